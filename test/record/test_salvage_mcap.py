"""A killed recorder's MCAP file: every message of its complete chunks reads back, in the
order written, wherever the file was cut; nothing of a chunk cut short is taken."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest
from rosbags.rosbag2 import Reader

from simforge_ros.record.bag import BagError, BagWriter
from simforge_ros.record.bag_structure import MAGIC, OP_CHUNK, U64
from simforge_ros.record.salvage import read_mcap_prefix

IMAGE = "sensor_msgs/msg/Image"
CLOCK = "rosgraph_msgs/msg/Clock"


def _bag(tmp_path: Path, steps: int = 9) -> tuple[Path, list[tuple[str, str, int, bytes]]]:
    """Nine four-camera steps (~700 KB each): several 1 MB chunks, then the footer."""
    messages = []
    for k in range(steps):
        t_ns = k * 100_000_000
        messages.append(("/clock", CLOCK, t_ns, os.urandom(16)))
        for cam in ("front", "left", "rear", "right"):
            messages.append((f"/camera/{cam}/image_raw", IMAGE, t_ns, os.urandom(320 * 180 * 3 + 64)))
    with BagWriter(tmp_path / "bag") as bag:
        for message in messages:
            bag.write(*message)
    return tmp_path / "bag" / "bag.mcap", messages


def test_a_whole_file_reads_back_every_message_in_order(tmp_path):
    path, messages = _bag(tmp_path)
    prefix = read_mcap_prefix(path)
    assert [(m.topic, m.type_name, m.t_ns, m.data) for m in prefix.messages()] == messages
    assert prefix.chunks >= 3 and prefix.bytes_read == prefix.bytes_total == path.stat().st_size
    assert prefix.messages_read == len(messages)
    assert [m.data for m in prefix.messages()] == [m[3] for m in messages]  # a second pass reads it again


@pytest.mark.parametrize("cut", [0.35, 0.5, 0.8, 0.999])
def test_a_cut_file_gives_the_messages_of_its_complete_chunks(tmp_path, cut):
    path, messages = _bag(tmp_path)
    with Reader(tmp_path / "bag") as reader:  # the chunks, from the complete file's own index
        chunks = list(reader.storage.storages[0].chunks)  # type: ignore[attr-defined]  (cleared on close)
    assert len(chunks) >= 3
    whole = path.read_bytes()
    size = int(len(whole) * cut)
    path.write_bytes(whole[:size])
    prefix = read_mcap_prefix(path)
    got = [(m.topic, m.type_name, m.t_ns, m.data) for m in prefix.messages()]
    complete = [c for c in chunks if c.chunk_start_offset + c.chunk_length <= size]
    assert prefix.chunks == len(complete)
    assert len(got) == prefix.messages_read == sum(sum(c.channel_count.values()) for c in complete)
    assert got == messages[:len(got)]  # the first ones, in order
    assert complete[-1].chunk_start_offset + complete[-1].chunk_length <= prefix.bytes_read <= size


def test_not_an_mcap_file_is_named(tmp_path):
    path = tmp_path / "bag.mcap"
    path.write_bytes(b"SQLite format 3\0")
    with pytest.raises(BagError, match="not an MCAP file"):
        read_mcap_prefix(path)


@pytest.mark.parametrize("written", [b"", b"\x89MC"], ids=["empty", "part-of-the-magic"])
def test_a_recorder_killed_before_it_wrote_anything_leaves_no_message(tmp_path, written):
    """Killed at its first step (kill=recorder@0), the recorder left a bag file of 0 bytes,
    which salvage refused as "not an MCAP file": the run's refusal could not be kept in a
    run directory the tools read. Such a file holds no chunk, and so no message."""
    path = tmp_path / "bag.mcap"
    path.write_bytes(written)
    prefix = read_mcap_prefix(path)
    assert list(prefix.messages()) == []
    assert (prefix.chunks, prefix.messages_read, prefix.bytes_total) == (0, 0, len(written))


def test_a_bag_is_read_a_chunk_at_a_time(tmp_path):
    """The whole file and every message in it were held at once: a long camera run's bag
    (~700 KB a step) could not be salvaged on a machine with less memory than twice it."""
    path, messages = _bag(tmp_path, steps=40)  # ~28 MB
    size = path.stat().st_size
    tracemalloc.start()
    try:
        read = sum(len(m.data) for m in read_mcap_prefix(path).messages())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert read == sum(len(m[3]) for m in messages) and size > 25_000_000
    assert peak < 4_000_000, f"{peak} bytes at the peak reading a {size}-byte bag"


def test_a_bag_that_cannot_be_read_any_more_is_named(tmp_path):
    """It used to end as an OSError that salvage reported as its own writing failing."""
    path, _ = _bag(tmp_path, steps=1)
    prefix = read_mcap_prefix(path)
    path.unlink()
    with pytest.raises(BagError, match=f"{path}: unreadable: No such file or directory"):
        list(prefix.messages())


def _chunk_offsets(path: Path) -> list[int]:
    blob = path.read_bytes()
    pos, chunks = len(MAGIC), []
    while pos + 9 <= len(blob):
        if blob[pos] == OP_CHUNK:
            chunks.append(pos)
        pos += 9 + U64.unpack_from(blob, pos + 1)[0]
    return chunks


def _flip(path: Path, at: int, mask: int = 0x01) -> None:
    blob = bytearray(path.read_bytes())
    blob[at] ^= mask
    path.write_bytes(bytes(blob))


def test_a_whole_file_whose_chunk_runs_past_its_end_is_corrupt_not_cut(tmp_path):
    """A bit flipped in a chunk's length made it run past the end of the file: read as a
    recorder cut off there, the chunks after it were dropped and the salvage went on."""
    path, _ = _bag(tmp_path)
    assert read_mcap_prefix(path).whole
    second = _chunk_offsets(path)[1]
    _flip(path, second + 8, 0x80)  # the top byte of its length
    prefix = read_mcap_prefix(path)
    assert prefix.whole
    with pytest.raises(BagError, match=f"{path}: the record at byte {second} runs .* bytes past the end of the "
                                       "file, which its recorder closed \\(corrupt\\)"):
        list(prefix.messages())


def _shorter_by_one(blob: bytearray, at: int) -> None:
    U64.pack_into(blob, at, U64.unpack_from(blob, at)[0] - 1)


@pytest.mark.parametrize(("change", "said"), [
    (lambda blob, chunk: blob.__setitem__(chunk + 9 + 28 + 3, 0x80), ": a string runs past its record"),
    (lambda blob, chunk: blob.__setitem__(chunk + 9 + 28 + 4 + 8 + 8, 0x80), ": a record of .* bytes runs past"),
    (lambda blob, chunk: _shorter_by_one(blob, chunk + 1), " holds .* bytes of records in"),
], ids=["compression-length", "record-length", "chunk-length"])
def test_a_changed_length_in_a_chunk_is_named_not_a_traceback(tmp_path, change, said):
    """These were a struct.error or IndexError traceback, or records read from the wrong
    place."""
    path, _ = _bag(tmp_path)
    chunk = _chunk_offsets(path)[0]
    blob = bytearray(path.read_bytes())
    change(blob, chunk)
    path.write_bytes(bytes(blob))
    with pytest.raises(BagError, match=f"{path}: the chunk at byte {chunk}{said}"):
        list(read_mcap_prefix(path).messages())


def test_what_the_last_salvaged_step_lacks_is_named() -> None:
    """A killed recorder's last written chunk may end between a step's image and its camera
    info: played, the image came without it, and `verify` passed (no chain holds camera
    infos), so salvage names what the last step lacks."""
    from simforge_ros import topics
    from simforge_ros.record.salvage import lacking

    front, chase = topics.image_topic("front"), topics.image_topic("chase")
    front_info, chase_info = topics.camera_info_topic("front"), topics.camera_info_topic("chase")
    every = {topics.CLOCK, topics.STATE, front, front_info, chase, chase_info, topics.ODOM, topics.TF}
    assert lacking(set(every), set(every)) == []
    assert lacking(every - {front_info}, every) == [front_info]
    assert lacking(every - {chase, topics.TF}, every) == [chase, topics.TF]
    # a camera at half the decision rate has no frame at this step: nothing lacks
    assert lacking(every - {chase, chase_info}, every) == []
    # odometry that was never on is not lacking; ground truth that was on is
    assert lacking({topics.CLOCK, topics.GROUND_TRUTH}, {topics.CLOCK}) == []
    assert lacking({topics.CLOCK}, {topics.CLOCK, topics.GROUND_TRUTH, topics.MARKERS}) == [
        topics.GROUND_TRUTH, topics.MARKERS]


@pytest.mark.parametrize(("said", "kept"), [
    ({"code": "participant_timeout", "step": 7, "detail": "driver"}, {"code": "participant_timeout", "step": 7,
                                                                      "detail": "driver"}),
    ({"code": "participant_timeout", "step": "x"}, {"code": "participant_timeout"}),
    ({"code": "participant_timeout", "step": -99}, {"code": "participant_timeout"}),
    ({"code": 42, "step": 3}, {}),
    ({"code": "bogus", "step": 3}, {}),  # no refusal of the table: the manifest could not hold it
    (["not", "a", "refusal"], {}),
])
def test_a_refusal_a_killed_recorders_log_holds_is_taken_as_far_as_a_manifest_can_hold_it(tmp_path, said, kept):
    """A refusal cut or edited in the run's logs ("step": "x", 1e999) ended salvage in
    "unexpected error: ValueError", or ("code": 42, "step": -99) blamed the salvaged
    manifest it was about to write; what of it a manifest can hold is taken."""
    import json

    from simforge_ros.record.rundir import RUNNER_REFUSAL
    from simforge_ros.record.salvage import _ended

    (tmp_path / "logs").mkdir()
    (tmp_path / RUNNER_REFUSAL).write_text(json.dumps(said))
    assert _ended(tmp_path) == {**kept, "why": "the recorder was killed"}
    (tmp_path / RUNNER_REFUSAL).write_text('{"code": "time_drift", "step": 1e999}')
    assert _ended(tmp_path) == {"code": "time_drift", "why": "the recorder was killed"}
    # a manifest nested past the parser, beside an unfinished bag: unreadable, not a traceback
    (tmp_path / "manifest.json").write_text("[" * 100_000)
    assert _ended(tmp_path)["why"] == "its manifest.json was unreadable and its bag unfinished"


def test_a_salvaged_bag_the_disk_cannot_hold_exits_1_naming_where(tmp_path, monkeypatch, capsys):
    """A full disk while writing the salvaged bag said "writing the bag failed" as bad input
    (exit 2) and named no path; the README gives a write that fails later exit 1."""
    from simforge_ros.record import salvage as salvage_module
    from simforge_ros.record.bag import BagWriteError

    run = tmp_path / "run"
    run.mkdir()

    def full_disk(_run, _out):
        raise BagWriteError("writing the bag failed: OSError: [Errno 28] No space left on device")

    monkeypatch.setattr(salvage_module, "salvage", full_disk)
    monkeypatch.setattr(salvage_module, "check_rmw", lambda: None)
    assert salvage_module.main([str(run), "--out", str(tmp_path / "kept")]) == 1
    assert capsys.readouterr().err == (f"simforge salvage: {tmp_path / 'kept'}: writing the salvaged run failed: "
                                       "writing the bag failed: OSError: [Errno 28] No space left on device\n")


def test_a_second_salvage_while_the_first_writes_is_refused_and_leaves_the_first_alone(tmp_path, monkeypatch):
    """Two salvages of one run at once: both found --out free, and the one that failed
    removed the directory the other was writing; neither succeeded (8 of 8)."""
    from simforge_ros.record import salvage as salvage_module
    from simforge_ros.record.rundir import RunDirError

    run, out = tmp_path / "run", tmp_path / "run-salvaged"
    (run / "bag").mkdir(parents=True)
    (run / "steps.jsonl").write_text("")
    _bag(run / "bag", steps=1)[0].rename(run / "bag" / "bag.mcap")  # one .mcap in the run's bag
    refused = []

    def first(_run, into, _bag_path, _given):
        assert into.is_dir()  # claimed before any work
        (into / "steps.jsonl").write_text("")  # what the first has written so far
        with pytest.raises(RunDirError) as err:
            salvage_module.salvage(run, out)  # the second, meanwhile
        refused.append(str(err.value))
        assert (into / "steps.jsonl").is_file()  # the first's work is still there
        return {"steps": 0}

    monkeypatch.setattr(salvage_module, "_salvage_into", first)
    monkeypatch.setattr(salvage_module, "_check_verifies", lambda _out: None)
    assert salvage_module.salvage(run, out) == {"steps": 0}
    assert refused == [f"{out}: exists (a salvage before, or one going on now); a salvaged run is written to a new "
                       "directory"]
    assert (out / "steps.jsonl").is_file()
