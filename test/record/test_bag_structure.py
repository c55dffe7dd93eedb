"""record.bag_structure: the bookkeeping other readers of a bag go by (message and chunk
indexes, the schema and channel records each chunk repeats, statistics, summary offsets,
the rosbag2 metadata record) is held to the messages, and `simforge verify` names the
first piece that does not match as ``bag_structure``."""

from __future__ import annotations

import re
import sqlite3
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from simforge_ros import topics
from simforge_ros.record.bag import BagError, BagWriter, read_bag, typestore
from simforge_ros.record.bag_structure import bag_problem, mcap_problem, sqlite_problem
from simforge_ros.record.verify import verify_run

MakeRun = Callable[..., Path]
_RECORD = struct.Struct("<BQ")


def records(blob: bytes) -> list[tuple[int, int, int]]:
    """(offset, opcode, body length) of every top-level record."""
    out, pos = [], 8
    while pos < len(blob) - 8:
        op, length = _RECORD.unpack_from(blob, pos)
        out.append((pos, op, length))
        pos += _RECORD.size + length
    return out


def first(blob: bytes, opcode: int) -> int:
    """The body offset of the first top-level record of ``opcode``."""
    return next(pos for pos, op, _ in records(blob) if op == opcode) + _RECORD.size


def bag_info(run: Path) -> dict:
    return yaml.safe_load((run / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]


def edit(run: Path, bag_file: Path, change: Callable[[bytearray], None]) -> str | None:
    blob = bytearray(bag_file.read_bytes())
    change(blob)
    bag_file.write_bytes(bytes(blob))
    return mcap_problem(bag_file, bag_info(run))


def _bump_u64(blob: bytearray, at: int, by: int = 1) -> None:
    struct.pack_into("<Q", blob, at, struct.unpack_from("<Q", blob, at)[0] + by)


def test_a_recorded_bag_has_nothing_to_name(make_run: MakeRun, bag_file_of: Callable[[Path], Path]) -> None:
    run = make_run()
    assert mcap_problem(bag_file_of(run), bag_info(run)) is None
    assert verify_run(run).ok


def _channel_in_chunk(blob: bytearray) -> None:
    at = blob.find(b"/simforge/state")  # its first copy: the channel record inside the first chunk
    assert at < first(bytes(blob), 0x0F)  # before the data end: in the data section
    blob[at + 10] ^= 0x01


def _message_index_offset(blob: bytearray) -> None:
    _bump_u64(blob, first(bytes(blob), 0x07) + 6 + 8)  # the first entry's offset


def _chunk_index_start_time(blob: bytearray) -> None:
    _bump_u64(blob, first(bytes(blob), 0x08))


def _statistics_message_count(blob: bytearray) -> None:
    _bump_u64(blob, first(bytes(blob), 0x0B))


def _statistics_channel_count(blob: bytearray) -> None:
    body = first(bytes(blob), 0x0B)
    _bump_u64(blob, body + 46 + 2)  # the first channel's message count


def _footer_summary_start(blob: bytearray) -> None:
    _bump_u64(blob, first(bytes(blob), 0x02), 9)


def _summary_offset(blob: bytearray) -> None:
    _bump_u64(blob, first(bytes(blob), 0x0E) + 1)


def _metadata_record(blob: bytearray) -> None:
    at = blob.find(b"ros_distro: rosbags")
    assert at > 0
    blob[at + len("ros_distro: rosbag")] = ord("z")


@pytest.mark.parametrize(("change", "said", "checked"), [
    (_channel_in_chunk, "its copy in the summary differs from the one in the chunk at byte", 60),
    (_message_index_offset, "does not list the messages of the chunk at byte", 60),
    # rosbags picks chunks by their index's times: it then reads none of this one
    (_chunk_index_start_time, "the chunk index of the chunk at byte", 0),
    (_statistics_message_count, "the statistics record says message_count", 60),
    (_statistics_channel_count, "the statistics record counts", 60),
    # rosbags cannot read the bag at all (a MemoryError): bad input, and the structure says why
    (_footer_summary_start, "the footer puts the summary at byte", None),
    (_summary_offset, "the summary offset records do not point at the summary's record groups", 60),
    (_metadata_record, "its rosbag2 metadata record is not the bag's metadata.yaml", 60),
], ids=["chunk-channel", "message-index", "chunk-index", "statistics-total", "statistics-channel", "footer",
        "summary-offset", "metadata-record"])
def test_bookkeeping_that_does_not_match_is_named(make_run: MakeRun, bag_file_of: Callable[[Path], Path],
                                                  change: Callable[[bytearray], None], said: str,
                                                  checked: int | None) -> None:
    """Each was a flip the byte-flip fuzz found verify not noticing (10 of 400): the digests
    rosbags reads back are the same, but ros2 bag play or Foxglove would read the bag wrong."""
    run = make_run()
    problem = edit(run, bag_file_of(run), change)
    assert problem is not None and said in problem, problem
    if checked is None:
        with pytest.raises(BagError, match="unreadable bag: .*" + said):
            verify_run(run)
        return
    result = verify_run(run)
    assert result.first_mismatch == {"step": 0, "field": "bag_structure"}, result.detail
    assert said in result.detail
    assert result.steps_checked == checked  # 60: every step record itself matched


def test_a_record_running_past_the_end_is_named(make_run: MakeRun, bag_file_of: Callable[[Path], Path]) -> None:
    run = make_run()
    problem = edit(run, bag_file_of(run), lambda blob: _bump_u64(blob, first(bytes(blob), 0x0B) - 8, 1 << 40))
    assert problem is not None and "runs past the end of the file" in problem


def test_a_recorded_sqlite3_bag_has_nothing_to_name(make_run: MakeRun, bag_file_of: Callable[[Path], Path]) -> None:
    run = make_run(storage="sqlite3")
    assert sqlite_problem(bag_file_of(run), bag_info(run)) is None
    assert verify_run(run).ok


def test_a_sqlite3_row_its_index_does_not_list_is_named(make_run: MakeRun,
                                                       bag_file_of: Callable[[Path], Path]) -> None:
    """A row whose timestamp no longer matches the timestamp index: rosbags, which reads
    through that index, still read it as it was, so verify passed (1 of 300 flips)."""
    run = make_run(storage="sqlite3")
    (item,) = [m for m in read_bag(run / "bag") if m.topic == topics.STATE and m.msg.step == 14]
    path = bag_file_of(run)
    blob = bytearray(path.read_bytes())
    at = blob.find(item.raw)
    assert at > 0 and blob.find(item.raw, at + 1) < 0
    assert struct.unpack(">I", blob[at - 4:at])[0] == item.t_ns  # the row's timestamp, right before its data
    blob[at - 1] ^= 0x01
    path.write_bytes(bytes(blob))
    result = verify_run(run)
    assert result.first_mismatch == {"step": 0, "field": "bag_structure"}, result.detail
    assert "bag.db3: SQLite's integrity check: " in result.detail and "missing from index" in result.detail


def test_a_sqlite3_schema_that_is_not_utf8_is_named(make_run: MakeRun, bag_file_of: Callable[[Path], Path]) -> None:
    """One flipped byte in the topics table's schema text: SQLite's message quotes it, and
    Python's default decoding raised UnicodeDecodeError ("unexpected error", exit 1)."""
    run = make_run(storage="sqlite3")
    path = bag_file_of(run)
    blob = bytearray(path.read_bytes())
    at = blob.find(b"NULL", blob.find(b"CREATE TABLE topics"))
    assert at > 0
    blob[at] ^= 0xFF
    path.write_bytes(bytes(blob))
    said = "bag.db3: SQLite cannot read it (its schema holds text that is not UTF-8: damaged)"
    assert sqlite_problem(path, bag_info(run)) == said
    with pytest.raises(BagError) as info:  # no reader opens it: `simforge verify` exits 2, naming it
        verify_run(run)
    assert said in str(info.value)


def test_a_sqlite3_metadata_table_that_is_not_metadata_yaml_is_named(make_run: MakeRun,
                                                                    bag_file_of: Callable[[Path], Path]) -> None:
    run = make_run(storage="sqlite3")
    con = sqlite3.connect(bag_file_of(run))
    with con:
        changed = con.execute("UPDATE metadata SET metadata = replace(metadata, 'ros_distro: rosbags', "
                              "'ros_distro: rosbagz')").rowcount
    con.close()
    assert changed == 1
    result = verify_run(run)
    assert result.first_mismatch == {"step": 0, "field": "bag_structure"}
    assert result.detail == "field bag_structure: bag.db3: its metadata table is not the bag's metadata.yaml"


def test_a_chunk_whose_message_index_is_gone_is_named(make_run: MakeRun,
                                                      bag_file_of: Callable[[Path], Path]) -> None:
    """Readers that go by the indexes would miss that channel's messages in the chunk."""
    run = make_run()

    def drop_one_index(blob: bytearray) -> None:
        pos = next(p for p, op, _ in records(bytes(blob)) if op == 0x07)
        blob[pos] = 0x1C  # an opcode no reader knows: skipped, as the spec says

    problem = edit(run, bag_file_of(run), drop_one_index)
    assert problem is not None and "has no message index for channel" in problem, problem


def test_a_sqlite3_type_hash_its_two_tables_disagree_on_is_named(make_run: MakeRun,
                                                                 bag_file_of: Callable[[Path], Path]) -> None:
    run = make_run(storage="sqlite3")
    con = sqlite3.connect(bag_file_of(run))
    with con:
        con.execute("UPDATE message_definitions SET type_description_hash = 'RIHS01_' || printf('%064d', 0) "
                    "WHERE topic_type = 'sensor_msgs/msg/CameraInfo'")
    con.close()
    problem = sqlite_problem(bag_file_of(run), bag_info(run))
    assert problem == ("bag.db3: the message definitions table hashes sensor_msgs/msg/CameraInfo "
                       f"RIHS01_{'0' * 64}, its topics table {typestore().hash_rihs01('sensor_msgs/msg/CameraInfo')}")
    assert verify_run(run).first_mismatch == {"step": 0, "field": "bag_structure"}


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_a_bag_without_messages_has_nothing_to_name(tmp_path: Path, storage: str) -> None:
    """rosbags' MCAP writer says 2**63 - 1 for the earliest message of none; the spec says 0."""
    with BagWriter(tmp_path / "bag", storage):
        pass
    assert bag_problem(tmp_path / "bag") is None


_CLOCK_COUNT = re.compile(rb"message_count: (\d+)\n\s+topic_metadata:\n\s+name: /clock\n")


def _recount_clock(text: bytes) -> bytes:
    """/clock's message count in a metadata.yaml text, one more (as many digits: nothing moves)."""
    match = _CLOCK_COUNT.search(text)
    assert match is not None
    digits = str(int(match[1]) + 1).encode()
    assert len(digits) == len(match[1])
    return text[:match.start(1)] + digits + text[match.end(1):]


def test_metadata_counts_that_are_not_the_files_are_named(make_run: MakeRun,
                                                         bag_file_of: Callable[[Path], Path]) -> None:
    """/clock counted once more in metadata.yaml and in the bag's rosbag2 record alike: the
    two agreed with each other, so verify passed, while `ros2 bag info` and rosbags' count
    said 61 messages where 60 were."""
    run = make_run()
    yaml_path, bag_file = run / "bag" / "metadata.yaml", bag_file_of(run)
    text = yaml_path.read_bytes()
    blob = bag_file.read_bytes()
    assert len(_CLOCK_COUNT.findall(blob)) == 1  # the rosbag2 record's copy (indented its own way)
    bag_file.write_bytes(_recount_clock(blob))
    yaml_path.write_bytes(_recount_clock(text))
    said = "bag.mcap: metadata.yaml counts 61 messages on /clock, the file holds 60"
    assert mcap_problem(bag_file, bag_info(run)) == said
    result = verify_run(run)
    assert result.first_mismatch == {"step": 0, "field": "bag_structure"}
    assert said in result.detail


def test_sqlite3_metadata_counts_that_are_not_the_files_are_named(make_run: MakeRun,
                                                                 bag_file_of: Callable[[Path], Path]) -> None:
    run = make_run(storage="sqlite3")
    yaml_path = run / "bag" / "metadata.yaml"
    text = _recount_clock(yaml_path.read_bytes()).decode()
    yaml_path.write_text(text)
    con = sqlite3.connect(bag_file_of(run))
    with con:  # the table repeats the yaml
        (inner,) = con.execute("SELECT metadata FROM metadata").fetchone()
        con.execute("UPDATE metadata SET metadata = ?", (_recount_clock(inner.encode()).decode(),))
    con.close()
    assert sqlite_problem(bag_file_of(run), bag_info(run)) == (
        "bag.db3: metadata.yaml counts 61 messages on /clock, the file holds 60")


def _first_message_in_chunk(blob: bytes) -> int:
    """The body offset of the first message record inside the first chunk."""
    chunk = first(blob, 0x06)
    (n,) = struct.unpack_from("<I", blob, chunk + 28)
    pos = chunk + 28 + 4 + n + 8
    while True:
        op, length = _RECORD.unpack_from(blob, pos)
        if op == 0x05:
            return pos + _RECORD.size
        pos += _RECORD.size + length


def test_a_publish_time_that_is_not_the_log_time_is_named(make_run: MakeRun,
                                                          bag_file_of: Callable[[Path], Path]) -> None:
    """rosbags reads log times only, so verify passed; `ros2 bag play --message-order sent`
    replays by publish time, and would have played that message out of its place."""
    run = make_run()
    problem = edit(run, bag_file_of(run), lambda blob: _bump_u64(blob, _first_message_in_chunk(bytes(blob)) + 14))
    assert problem is not None and "was published at 1 ns and logged at 0 ns" in problem, problem
    assert verify_run(run).first_mismatch == {"step": 0, "field": "bag_structure"}


def test_a_summary_offset_to_an_empty_group_is_taken(make_run: MakeRun, bag_file_of: Callable[[Path], Path]) -> None:
    """The mcap library's writer points a summary offset at its (empty) attachment index
    group: a valid file, which verify refused as not pointing at the summary's groups."""
    run = make_run()
    bag_file = bag_file_of(run)
    blob = bag_file.read_bytes()
    footer = first(blob, 0x02) - _RECORD.size
    empty = struct.pack("<BQQ", 0x0A, footer, 0)
    bag_file.write_bytes(blob[:footer] + _RECORD.pack(0x0E, len(empty)) + empty + blob[footer:])
    assert mcap_problem(bag_file, bag_info(run)) is None
    assert verify_run(run).ok
