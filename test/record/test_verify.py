from __future__ import annotations

import dataclasses
import json
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from simforge_ros import topics
from simforge_ros.record.bag import BagError, BagMessage, BagWriter, read_bag, typestore
from simforge_ros.record.rundir import RunDirError
from simforge_ros.record.verify import VerifyResult, main, verify_run

MakeRun = Callable[..., Path]


def rewrite_bag(run: Path, change: Callable[[BagMessage], bytes | None]) -> None:
    """Rewrite the run's bag message by message; ``change`` returns new raw bytes or None
    to drop the message."""
    items = list(read_bag(run / "bag"))
    storage = json.loads((run / "manifest.json").read_text())["bag"]["storage"]
    shutil.rmtree(run / "bag")
    with BagWriter(run / "bag", storage) as bag:
        for item in items:
            raw = change(item)
            if raw is not None:
                bag.write(item.topic, item.msgtype, item.t_ns, raw)


def edit_json(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def edit_step(run: Path, step: int, edit: Callable[[dict[str, Any]], None]) -> None:
    lines = (run / "steps.jsonl").read_text().splitlines()
    record = json.loads(lines[step])
    edit(record)
    lines[step] = json.dumps(record)
    (run / "steps.jsonl").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_fabricated_run_verifies(make_run: MakeRun, storage: str, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(storage=storage)
    result = verify_run(run)
    manifest = json.loads((run / "manifest.json").read_text())
    assert result == VerifyResult(True, 60, None, result.detail, manifest["chain_digest"])
    assert main([str(run)]) == 0
    assert capsys.readouterr().out == f"verified: 60 steps, chain {manifest['chain_digest'][:16]}\n"


def test_json_output(make_run: MakeRun, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run()
    assert main([str(run), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"ok": True, "steps_checked": 60, "first_mismatch": None,
                   "chain_digest": json.loads((run / "manifest.json").read_text())["chain_digest"]}


@pytest.mark.parametrize("refuse_at", [0, 25])
def test_refused_run_verifies_what_was_recorded(make_run: MakeRun, refuse_at: int) -> None:
    run = make_run(refuse_at=refuse_at)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "refused" and manifest["steps"] == refuse_at
    result = verify_run(run)
    assert result.ok and result.steps_checked == refuse_at


def test_refused_run_may_not_have_two_extra_clock_messages(make_run: MakeRun) -> None:
    run = make_run(refuse_at=25)
    manifest = json.loads((run / "manifest.json").read_text())
    items = list(read_bag(run / "bag"))
    shutil.rmtree(run / "bag")
    with BagWriter(run / "bag", manifest["bag"]["storage"]) as bag:
        for item in items:
            bag.write(item.topic, item.msgtype, item.t_ns, item.raw)
        bag.write(topics.CLOCK, "rosgraph_msgs/msg/Clock", 26 * 50_000_000, _clock_raw(26 * 50_000))
    assert verify_run(run).first_mismatch == {"step": 26, "field": "clock"}


@pytest.mark.parametrize("step", [0, 23, 59])
def test_flipped_byte_in_bag_names_the_step(
    make_run: MakeRun, flip_state_byte: Callable[[Path, int], None], step: int, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run()
    flip_state_byte(run, step)
    result = verify_run(run)
    assert not result.ok
    assert result.first_mismatch == {"step": step, "field": "state.speed_mps"}
    assert result.steps_checked == step
    assert main([str(run)]) == 1
    assert capsys.readouterr().out.startswith(f"MISMATCH at step {step}: field state.speed_mps: bag ")
    assert main([str(run), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"ok", "steps_checked", "first_mismatch", "chain_digest"}
    assert out["ok"] is False and out["first_mismatch"] == {"step": step, "field": "state.speed_mps"}


def test_flipped_pixel_names_the_camera(make_run: MakeRun, bag_file_of: Callable[[Path], Path]) -> None:
    run = make_run()
    (item,) = [m for m in read_bag(run / "bag") if m.topic == topics.image_topic("rear") and m.t_ns == 14 * 50_000_000]
    path = bag_file_of(run)
    blob = bytearray(path.read_bytes())
    at = blob.find(item.raw)
    blob[at + len(item.raw) - 1] ^= 0x80  # the last pixel byte
    path.write_bytes(bytes(blob))
    assert verify_run(run).first_mismatch == {"step": 14, "field": "frames.rear"}


def test_edited_steps_jsonl_is_caught(make_run: MakeRun) -> None:
    run = make_run()
    edit_step(run, 17, lambda r: r["action"].update(steer_rad=0.25))
    assert verify_run(run).first_mismatch == {"step": 17, "field": "action.steer_rad"}


def test_edited_digest_is_caught(make_run: MakeRun) -> None:
    run = make_run()
    edit_step(run, 9, lambda r: r.update(digest="0" * 64))
    assert verify_run(run).first_mismatch == {"step": 9, "field": "digest"}


@pytest.mark.parametrize(
    ("key", "value", "field", "step"),
    [
        ("chain_digest", "ab" * 32, "manifest.chain_digest", 59),
        ("frames_digest", "cd" * 32, "manifest.frames_digest", 59),
        ("frames_digest", None, "manifest.frames_digest", 59),
        ("world_digest", "another world", "manifest.world_digest", 59),
        ("expected_steps", 61, "manifest.expected_steps", 60),
        # the set-up and the contacts the manifest tells of are held to what the bag recorded
        # named to the parameter (verify said "manifest.nodes" whatever had changed in it)
        ("nodes", {"clock_master": {"params": {"decision_us": 50_000, "seed": 8}}},
         "manifest.nodes.clock_master.params.seed", 0),
        ("contacts", {"total": 0, "harness_faults": 0, "events": []}, "manifest.contacts", 59),
        # null or missing nodes said nothing to hold, and the run verified with any set-up
        ("nodes", None, "manifest.nodes", 0),
        # what `simforge info`, diff and rerun read: derived from those parameters, and so
        # held to them too (an edited seed verified, and diff called the runs set up apart)
        ("seed", 99, "manifest.seed", 0),
        ("scenario", "red_signal", "manifest.scenario", 0),
        ("faults", ["drop_frame@2"], "manifest.faults", 0),
        ("digests", {"bridge": None}, "manifest.digests", 0),
        # what info prints and diff compares: an edited tick verified, and diff then called
        # the runs set up apart ("different contract")
        ("contract", {"decision_us": 50_000, "tick_us": "x", "latency_steps": 1, "ticks_per_step": 5},
         "manifest.contract.tick_us", 59),
        ("contract", {"decision_us": 50_000, "tick_us": 10_000, "latency_steps": 1, "ticks_per_step": 5, "x": 1},
         "manifest.contract.x", 59),
    ],
)
def test_manifest_is_checked(make_run: MakeRun, key: str, value: object, field: str, step: int) -> None:
    run = make_run()
    edit_json(run / "manifest.json", lambda m: m.update({key: value}))
    result = verify_run(run)
    assert result.first_mismatch == {"step": step, "field": field}
    assert result.steps_checked == 60


def test_message_missing_from_bag(make_run: MakeRun) -> None:
    run = make_run()
    rewrite_bag(run, lambda m: None if m.topic == topics.STATE and m.msg.step == 50 else m.raw)
    result = verify_run(run)
    assert result.first_mismatch == {"step": 50, "field": "steps"}
    assert "step 50: missing state" in result.detail


def test_bag_ends_early(make_run: MakeRun) -> None:
    run = make_run()
    rewrite_bag(run, lambda m: None if m.t_ns >= 50 * 50_000_000 else m.raw)
    result = verify_run(run)
    assert result.first_mismatch == {"step": 50, "field": "steps"}
    assert "the bag gives 50 complete steps, steps.jsonl holds 60" in result.detail
    assert "step 50: missing timing, action, applied, state" in result.detail


def _clock_raw(t_us: int) -> bytes:
    store = typestore()
    stamp = store.types["builtin_interfaces/msg/Time"](sec=t_us // 1_000_000, nanosec=t_us % 1_000_000 * 1000)
    msg = store.types["rosgraph_msgs/msg/Clock"](clock=stamp)
    return bytes(store.serialize_cdr(msg, msg.__msgtype__))


@pytest.mark.parametrize(
    ("change", "step"),
    [
        (lambda m: None if m.topic == topics.CLOCK and m.t_ns == 10 * 50_000_000 else m.raw, 10),
        (lambda m: _clock_raw(500_001) if m.topic == topics.CLOCK and m.t_ns == 10 * 50_000_000 else m.raw, 10),
        (lambda m: None if m.topic == topics.CLOCK and m.t_ns == 59 * 50_000_000 else m.raw, 59),
    ],
    ids=["dropped", "wrong-stamp", "last-dropped"],
)
def test_clock_is_checked(make_run: MakeRun, change: Callable[[BagMessage], bytes | None], step: int) -> None:
    run = make_run()
    rewrite_bag(run, change)
    result = verify_run(run)
    assert result.first_mismatch == {"step": step, "field": "clock"}
    assert result.steps_checked == 60  # every step record itself matched


@pytest.mark.parametrize(("topic", "step"), [(topics.STATE, 7), ("/simforge/camera/front/image_raw", 9),
                                             ("/simforge/camera/rear/camera_info", 4)])
def test_a_message_logged_at_another_time_than_it_carries_is_named(make_run: MakeRun, topic: str, step: int) -> None:
    """The bag plays back in simulation time: each message is logged at the time it carries
    (``t_us`` or its header's stamp). One moved by a microsecond digests the same but would
    play out of place; verify names it."""
    run = make_run()
    items = list(read_bag(run / "bag"))
    shutil.rmtree(run / "bag")
    moved = []
    with BagWriter(run / "bag") as bag:
        for item in items:
            t_ns = item.t_ns
            if item.topic == topic and t_ns == step * 50_000_000 and not moved:
                t_ns += 1000
                moved.append(item)
            bag.write(item.topic, item.msgtype, t_ns, item.raw)
    assert moved
    result = verify_run(run)
    assert result.first_mismatch == {"step": step, "field": "log_time"}
    assert result.detail == (f"field log_time: a {topic} message of t={step * 50_000_000} ns is logged at "
                             f"{step * 50_000_000 + 1000} ns")
    assert result.steps_checked == 60  # every step record itself matched


def test_a_damaged_stamp_is_named_at_the_step_it_sits_at(make_run: MakeRun) -> None:
    """A camera_info's stamp damaged to step 670's time, in a 60-step run: verify named
    step 670, from the damaged stamp, instead of step 30, where the message is."""
    store = typestore()
    topic = topics.camera_info_topic("front")

    def damage(m: BagMessage) -> bytes:
        if m.topic != topic or m.t_ns != 30 * 50_000_000:
            return m.raw
        stamp = dataclasses.replace(m.msg.header.stamp, sec=33, nanosec=500_000_000)
        header = dataclasses.replace(m.msg.header, stamp=stamp)
        msg = dataclasses.replace(m.msg, header=header)
        return bytes(store.serialize_cdr(msg, msg.__msgtype__))

    run = make_run()
    rewrite_bag(run, damage)
    result = verify_run(run)
    assert result.first_mismatch == {"step": 30, "field": "log_time"}
    assert result.detail.endswith(f"a {topic} message of t=33500000000 ns is logged at 1500000000 ns")


def test_a_damaged_message_definition_in_the_bag_is_named(make_run: MakeRun,
                                                         bag_file_of: Callable[[Path], Path]) -> None:
    """Other tools decode the bag by the definitions it embeds; verify decodes by its own,
    so a damaged one passed (a bit-flip fuzz found 22 of 400 flips there)."""
    run = make_run()
    path = bag_file_of(run)
    blob = path.read_bytes()
    assert blob.count(b"float64 speed_mps") == 2  # in the data and again in the summary
    path.write_bytes(blob.replace(b"float64 speed_mps", b"float64 speed_mpz"))
    result = verify_run(run)
    assert result.first_mismatch == {"step": 0, "field": "schema"}
    assert "the message definition embedded for /simforge/state (simforge_ros/msg/VehicleState)" in result.detail
    assert result.steps_checked == 60


def test_wrong_message_type_on_a_topic_is_bad_input(make_run: MakeRun) -> None:
    run = make_run()
    items = list(read_bag(run / "bag"))
    shutil.rmtree(run / "bag")
    with BagWriter(run / "bag") as bag:
        for item in items:
            topic = topics.ACTION if item.topic == topics.NODE_PARAMS else item.topic
            bag.write(topic, item.msgtype, item.t_ns, item.raw)
    with pytest.raises(BagError, match="/simforge/action holds std_msgs/msg/String"):
        verify_run(run)


def _keep_bytes(path: Path, n: int) -> None:
    path.write_bytes(path.read_bytes()[:n])


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


BAD_INPUTS: dict[str, tuple[Callable[[Path], object], str]] = {
    "manifest-missing": (lambda r: (r / "manifest.json").unlink(), "manifest.json: missing"),
    "manifest-truncated": (lambda r: _truncate(r / "manifest.json"), "manifest.json: not valid JSON (truncated?)"),
    "manifest-empty": (lambda r: (r / "manifest.json").write_text(""), "manifest.json: empty file"),
    "manifest-binary": (lambda r: (r / "manifest.json").write_bytes(b"\xff\xfe{"), "manifest.json: not UTF-8"),
    "steps-missing": (lambda r: (r / "steps.jsonl").unlink(), "steps.jsonl: missing"),
    "steps-truncated": (lambda r: _truncate(r / "steps.jsonl"), "not valid JSON (truncated?)"),
    "bag-missing": (lambda r: shutil.rmtree(r / "bag"), "bag: not a rosbag2 directory"),
    "bag-truncated": (lambda r: _truncate(r / "bag" / "bag.mcap"), "bag: unreadable bag"),
    "bag-metadata-corrupt": (lambda r: (r / "bag" / "metadata.yaml").write_text("{{{"),
                             "bag: unreadable bag: metadata.yaml: not readable YAML"),
    # named in the bag's terms, not the reader library's ("TypeError: ord() expected a character")
    "bag-8-bytes": (lambda r: _keep_bytes(r / "bag" / "bag.mcap", 8), "bag: unreadable bag: bag.mcap: no MCAP magic"),
    # info and play named it; verify failed with "unexpected error: UnicodeDecodeError"
    "bag-metadata-binary": (lambda r: (r / "bag" / "metadata.yaml").write_bytes(b"\xff\xfe{{"),
                            "bag: unreadable bag: metadata.yaml: "),
    "bag-metadata-empty": (lambda r: (r / "bag" / "metadata.yaml").write_text(""),
                           "bag: unreadable bag: metadata.yaml: not rosbag2 metadata"),
    "run-missing": (lambda r: shutil.rmtree(r), "run: no such run directory"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_exits_2_with_one_line(make_run: MakeRun, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run()
    damage, expected = BAD_INPUTS[case]
    damage(run)
    with pytest.raises((RunDirError, BagError), match=None) as info:
        verify_run(run)
    assert str(run) in str(info.value) and expected in str(info.value)
    for argv in ([str(run)], [str(run), "--json"]):
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
        assert captured.err.startswith("simforge verify: ") and expected in captured.err
        assert "Error:" not in captured.err  # no exception class of a library standing for the problem


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_progress_is_reported_as_the_bag_is_chained(make_run) -> None:
    """A long four-camera run takes verify minutes: `simforge verify` on a terminal shows
    the step it has reached, from these reports."""
    from simforge_ros.record.verify import PROGRESS_EVERY

    steps = 2 * PROGRESS_EVERY + 50
    run = make_run(steps=steps, cameras=())
    reports: list[tuple[int, int]] = []
    result = verify_run(run, lambda k, total: reports.append((k, total)))
    assert result.ok
    assert reports == [(0, steps), (PROGRESS_EVERY, steps), (2 * PROGRESS_EVERY, steps)]


def _flip_in_camera_info(run: Path, bag_file: Path, camera: str, step: int, find: bytes, xor: int) -> None:
    """Flip one byte of ``find`` inside the camera_info message of ``camera`` at ``step``,
    in the bag file itself."""
    (item,) = [m for m in read_bag(run / "bag")
               if m.topic == topics.camera_info_topic(camera) and m.t_ns == step * 50_000_000]
    field_at = item.raw.index(find)
    blob = bytearray(bag_file.read_bytes())
    at = blob.find(item.raw)
    assert at >= 0 and blob.find(item.raw, at + 1) < 0, "camera_info bytes not found exactly once"
    blob[at + field_at] ^= xor
    bag_file.write_bytes(bytes(blob))


@pytest.mark.parametrize(("find", "xor"), [(struct.pack("<d", 10.0), 0x01), (b"plumb_bob", 0x20), (b"rear\0", 0x01)],
                         ids=["focal-length", "distortion-model", "frame-id"])
def test_a_changed_camera_info_is_named(make_run: MakeRun, bag_file_of: Callable[[Path], Path],
                                        find: bytes, xor: int) -> None:
    """camera_info is in no step record: its intrinsics, distortion model or frame changed in
    the bag passed verify (29 of 400 flips of a byte-flip fuzz went unnoticed, all there).
    The manifest keeps each camera's camera_info count and digest, held to the bag's."""
    run = make_run()
    _flip_in_camera_info(run, bag_file_of(run), "rear", 14, find, xor)
    result = verify_run(run)
    assert result.first_mismatch == {"step": 59, "field": "manifest.camera_info"}
    assert "camera rear: the bag's camera_info messages are not those recorded" in result.detail
    assert result.steps_checked == 60  # every step record itself matched


def test_a_camera_info_missing_from_the_bag_is_counted(make_run: MakeRun) -> None:
    run = make_run()
    rewrite_bag(run, lambda m: None if m.topic == topics.camera_info_topic("top") and m.t_ns == 9 * 50_000_000
                else m.raw)
    result = verify_run(run)
    assert result.first_mismatch == {"step": 59, "field": "manifest.camera_info"}
    assert result.detail == "field manifest.camera_info: camera top: the manifest counts 20 camera_info messages, " \
                            "the bag holds 19"


def test_a_run_recorded_before_camera_info_was_kept_still_verifies(make_run: MakeRun) -> None:
    run = make_run()
    edit_json(run / "manifest.json", lambda m: (m.pop("camera_info"), m.pop("image_headers")))
    assert verify_run(run).ok


@pytest.mark.parametrize(("find", "at", "xor"), [(b"rear\0", 0, 0x20), (b"rgb8\0", 5, 0x01)],
                         ids=["frame-id", "is-bigendian"])
def test_a_changed_image_header_is_named(make_run: MakeRun, bag_file_of: Callable[[Path], Path],
                                         find: bytes, at: int, xor: int) -> None:
    """An image's frame_id and is_bigendian are in no frame hash: changed in the bag, they
    passed verify. The manifest keeps each camera's image headers' count and digest."""
    run = make_run()
    (item,) = [m for m in read_bag(run / "bag") if m.topic == topics.image_topic("rear") and m.t_ns == 14 * 50_000_000]
    path = bag_file_of(run)
    blob = bytearray(path.read_bytes())
    start = blob.find(item.raw)
    blob[start + item.raw.index(find) + at] ^= xor
    path.write_bytes(bytes(blob))
    result = verify_run(run)
    assert result.first_mismatch == {"step": 59, "field": "manifest.image_headers"}, result.detail
    assert "camera rear: the bag's image headers are not those recorded" in result.detail
    assert result.steps_checked == 60  # every step record and frame hash itself matched


def test_an_edited_wall_clock_reading_is_named(make_run: MakeRun) -> None:
    """Wall-clock readings are in no digest, and diff passes over them between two runs;
    the bag and steps.jsonl of one run must still agree on them (the manifest's wall
    summary is made of them), and an edit of either passed verify."""
    run = make_run()
    edit_step(run, 23, lambda r: r["wall"].update(wall_step_ns=r["wall"]["wall_step_ns"] + 1))
    result = verify_run(run)
    assert result.first_mismatch == {"step": 23, "field": "wall.wall_step_ns"}
    assert result.steps_checked == 23  # the records before it matched, wall readings included


def test_a_changed_wall_clock_reading_in_the_bag_is_named(make_run: MakeRun,
                                                          bag_file_of: Callable[[Path], Path]) -> None:
    run = make_run()
    (item,) = [m for m in read_bag(run / "bag") if m.topic == topics.TIMING and m.msg.step == 31]
    path = bag_file_of(run)
    blob = bytearray(path.read_bytes())
    at = blob.find(item.raw)
    blob[at + item.raw.index(struct.pack("<q", item.msg.wall_driver_ns))] ^= 0x01
    path.write_bytes(bytes(blob))
    result = verify_run(run)
    assert result.first_mismatch == {"step": 31, "field": "wall.wall_driver_ns"}
    assert result.detail == (f"field wall.wall_driver_ns: bag {item.msg.wall_driver_ns ^ 1} vs steps.jsonl "
                             f"{item.msg.wall_driver_ns}")


def test_a_changed_type_hash_is_named(make_run: MakeRun, bag_file_of: Callable[[Path], Path]) -> None:
    """ROS 2 matches a type across nodes by its hash (RIHS01): a bag that says another hash
    for a type everywhere it says one (metadata.yaml, the MCAP file) passed verify."""
    run = make_run()
    right = typestore().hash_rihs01("simforge_ros/msg/VehicleState")
    wrong = right[:-1] + ("0" if right[-1] != "0" else "1")
    for path in (bag_file_of(run), run / "bag" / "metadata.yaml"):
        blob = path.read_bytes()
        assert right.encode() in blob
        path.write_bytes(blob.replace(right.encode(), wrong.encode()))
    result = verify_run(run)
    assert result.first_mismatch == {"step": 0, "field": "schema"}, result.detail
    assert result.detail == (f"field schema: the type hash recorded for {topics.STATE} "
                             f"(simforge_ros/msg/VehicleState) is {wrong}, the type's is {right}")


def test_verify_shows_its_progress_on_a_terminal_only(make_run: MakeRun, monkeypatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from simforge_ros.record import verify

    run = make_run()  # 60 steps: one report, at step 0
    assert verify.main([str(run)]) == 0
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert verify.main([str(run)]) == 0
    out = capsys.readouterr()
    assert out.err == f"\rverify {run}: step 0/60\r\033[K"
    assert out.out.startswith("verified: 60 steps")


def test_an_edited_node_parameter_is_named(make_run: MakeRun) -> None:
    run = make_run()
    edit_json(run / "manifest.json", lambda m: m["nodes"]["driver"]["params"].update(latency_steps=3))
    result = verify_run(run)
    assert result.first_mismatch == {"step": 0, "field": "manifest.nodes.driver.params.latency_steps"}
    assert result.detail.endswith(": manifest.json has 3, the node parameters the bag holds give 1")
    edit_json(run / "manifest.json", lambda m: m["nodes"].pop("driver"))
    result = verify_run(run)
    assert result.first_mismatch == {"step": 0, "field": "manifest.nodes.driver"}
    assert ": manifest.json has none, the node parameters the bag holds give {'params': " in result.detail


@pytest.mark.parametrize(("written", "instead", "said"), [
    (b"\x08\x00\x00\x00counted\x00", b"\x08\x00\x00\x00refused\x00", "has state 'refused', the run's 'counted'"),
    (b"\x04\x00\x00\x00run\x00", b"\x04\x00\x00\x00rux\x00", "has run_id 'rux', the run's 'run'"),
], ids=["state", "run_id"])
def test_a_run_status_message_that_is_not_the_runs_is_named(make_run: MakeRun, bag_file_of: Callable[[Path], Path],
                                                            written: bytes, instead: bytes, said: str) -> None:
    """The bag's /simforge/status messages were in no digest and no check: rewritten from
    running to counted, verify and `play --verify` passed it, and `ros2 bag play` replays it."""
    run = make_run()
    path = bag_file_of(run)
    blob = path.read_bytes()
    assert blob.count(written) == 1
    path.write_bytes(blob.replace(written, instead))
    result = verify_run(run)
    assert result.first_mismatch == {"step": 0, "field": "status"}, result.detail
    assert said in result.detail
