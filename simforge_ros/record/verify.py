"""`simforge verify RUN`: recompute a run's digests from its bag alone and check them.

steps.jsonl and the manifest are what people read and compare, but the bag is the record
of what was actually on the wire. Verify replays the bag through the same StepAssembler
the recorder used (same deserialiser, same plain values, same chains), so any change to
the bag, to steps.jsonl or to the manifest after the run shows up as the first step and
field that no longer agree. A refused run verifies too: it verifies what was recorded.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from simforge_ros import topics
from simforge_ros.core.canonical import to_plain
from simforge_ros.core.diffing import MISSING, diff_steps, first_field_diff, format_value
from simforge_ros.core.digest import GENESIS
from simforge_ros.core.errors import EXIT_FAILURE, EXIT_USAGE, SimforgeError
from simforge_ros.record.assembler import StepAssembler
from simforge_ros.record.bag import BagError, BagMessage, bag_connections, read_bag, typestore
from simforge_ros.record.bag_structure import bag_problem
from simforge_ros.record.manifest import CONTRACT_KEYS, SETUP_KEYS, setup_of
from simforge_ros.record.rundir import MANIFEST, STEPS, RunDir, load_run
from simforge_ros.record.side_digests import (
    MARKERS_TYPE,
    ODOM_TYPE,
    SIDE_BEFORE,
    SIDE_DIGESTS,
    TF_TYPE,
    TRUTH_TYPE,
    CameraInfoDigests,
    GroundTruthDigests,
    ImageHeaderDigests,
    OdometryDigests,
    TransformDigests,
    first_difference,
)
from simforge_ros.record.sim_time import carried_ns
from simforge_ros.tools import StepLine, parse, say

PART_TOPICS = {
    topics.TIMING: ("timing", "simforge_ros/msg/StepTiming"),
    topics.ACTION: ("action", "simforge_ros/msg/DriverAction"),
    topics.APPLIED: ("applied", "simforge_ros/msg/DriverAction"),
    topics.STATE: ("state", "simforge_ros/msg/VehicleState"),
}
CLOCK_TYPE = "rosgraph_msgs/msg/Clock"
IMAGE_TYPE = "sensor_msgs/msg/Image"
_IMAGE_TOPIC = re.compile(r"^/simforge/camera/(?P<camera>[^/]+)/image_raw$")
_INFO_TOPIC = re.compile(r"^/simforge/camera/(?P<camera>[^/]+)/camera_info$")
INFO_TYPE = "sensor_msgs/msg/CameraInfo"
STATUS_TYPE = "simforge_ros/msg/RunStatus"


@dataclass(frozen=True)
class VerifyResult:
    """The outcome of a verify; ``first_mismatch`` is None or {"step": int, "field": str}.

    ``steps_checked`` counts the recorded steps whose records matched the bag;
    ``chain_digest`` is the chain recomputed from the bag (GENESIS hex when empty).
    """

    ok: bool
    steps_checked: int
    first_mismatch: dict[str, Any] | None
    detail: str
    chain_digest: str

    def to_json(self) -> dict[str, Any]:
        """The --json form."""
        return {
            "ok": self.ok,
            "steps_checked": self.steps_checked,
            "first_mismatch": self.first_mismatch,
            "chain_digest": self.chain_digest,
        }


class Replay:
    """What the bag alone says: its step records, read once through ``records()``, then
    the chains, the /clock stamps and what the assembler still waits for.

    The records are handed out as the assembler completes them and not kept, so a run of
    any length verifies in flat memory; the /clock stamps are kept as two int64 arrays.
    """

    def __init__(self, bag_path: Path, expected_steps: int = 0, cut_ns: int | None = None) -> None:
        """``cut_ns``: a refused run's side digests count what is stamped before it only."""
        self.bag_path = bag_path
        self.expected_steps = expected_steps
        self.steps = 0
        self.chain_digest = GENESIS.hex()
        self.frames_digest: str | None = None
        self.last_record: dict[str, Any] | None = None
        self.clock_log_ns = array("q")  # /clock log times, in log order
        self.clock_stamp_ns = array("q")  # and the stamps they carry
        self.missing: tuple[str, ...] = ()  # what the assembler still waits for (assembler.missing)
        # the first message logged at another time than the simulation time it carries:
        # (that time in ns, topic, its log time in ns); /clock is checked apart (_clock_mismatch)
        self.misplaced: tuple[int, str, int] | None = None
        # what the recorder builds the manifest's "nodes" and "contacts" from
        self.nodes: dict[str, Any] = {}
        self.contacts: list[Any] = []
        self.statuses: list[dict[str, Any]] = []  # the run's status messages (/simforge/status)
        # what of the camera messages no chain holds (record.side_digests)
        self.camera_info = CameraInfoDigests(by_stamp=False, cut_ns=cut_ns)
        self.image_headers = ImageHeaderDigests(by_stamp=False, cut_ns=cut_ns)
        self.odometry = OdometryDigests(by_stamp=False, cut_ns=cut_ns)
        self.transforms = TransformDigests(by_stamp=False, cut_ns=cut_ns)
        self.ground_truth = GroundTruthDigests(by_stamp=False, cut_ns=cut_ns)

    @property
    def clock(self) -> Iterator[tuple[int, int]]:
        """(log time ns, stamp ns) of every /clock message, in log order."""
        return zip(self.clock_log_ns, self.clock_stamp_ns, strict=True)

    def records(self) -> Iterator[dict[str, Any]]:
        """Feed every step message and camera frame of the bag through a fresh
        StepAssembler, exactly as the recorder fed it, and yield each step record as it is
        chained; read to its end, it fills in the rest of this Replay (``missing`` covers
        at least ``expected_steps``).

        Raises:
            BagError: the bag is missing or unreadable, or a simforge topic holds another type.
        """
        bag_path = self.bag_path
        assembler = StepAssembler(keep_records=False)
        last_timing = -1
        for item in read_bag(bag_path):
            topic = item.topic
            done: list[dict[str, Any]] = []
            self._check_log_time(item)
            if topic in PART_TOPICS:
                part, msgtype = PART_TOPICS[topic]
                _expect_type(bag_path, topic, item.msgtype, msgtype)
                plain = cast("dict[str, Any]", to_plain(item.msg))
                if part == "timing":
                    last_timing = max(last_timing, int(plain["step"]))
                done = assembler.add(part, plain)
            elif topic == topics.NODE_PARAMS:
                self._note_node(item)
            elif topic == topics.CONTACTS:
                self.contacts.append(to_plain(item.msg))
            elif topic == topics.STATUS:
                _expect_type(bag_path, topic, item.msgtype, STATUS_TYPE)
                self.statuses.append(cast("dict[str, Any]", to_plain(item.msg)))
            elif topic == topics.CLOCK:
                _expect_type(bag_path, topic, item.msgtype, CLOCK_TYPE)
                stamp = item.msg.clock
                self.clock_log_ns.append(item.t_ns)
                self.clock_stamp_ns.append(int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec))
            elif topic == topics.ODOM:
                _expect_type(bag_path, topic, item.msgtype, ODOM_TYPE)
                self.odometry.add(cast("dict[str, Any]", to_plain(item.msg)), item.t_ns)
            elif topic in (topics.TF, topics.TF_STATIC):
                _expect_type(bag_path, topic, item.msgtype, TF_TYPE)
                self.transforms.add(topic, cast("dict[str, Any]", to_plain(item.msg)),
                                    item.t_ns if topic == topics.TF else None)
            elif topic in (topics.GROUND_TRUTH, topics.MARKERS):
                want = TRUTH_TYPE if topic == topics.GROUND_TRUTH else MARKERS_TYPE
                _expect_type(bag_path, topic, item.msgtype, want)
                self.ground_truth.add(topic, cast("dict[str, Any]", to_plain(item.msg)), item.t_ns)
            elif (match := _INFO_TOPIC.match(topic)) is not None:
                _expect_type(bag_path, topic, item.msgtype, INFO_TYPE)
                self.camera_info.add(match["camera"], cast("dict[str, Any]", to_plain(item.msg)))
            elif (match := _IMAGE_TOPIC.match(topic)) is not None:
                _expect_type(bag_path, topic, item.msgtype, IMAGE_TYPE)
                msg = item.msg
                stamp = msg.header.stamp
                self.image_headers.add(match["camera"], stamp.sec, stamp.nanosec, msg.header.frame_id, msg.is_bigendian)
                t_us = int(stamp.sec) * 1_000_000 + int(stamp.nanosec) // 1000
                done = assembler.add_frame(
                    match["camera"], t_us, msg.encoding, msg.width, msg.height, msg.step, msg.data
                )
            for record in done:
                self.steps += 1
                self.last_record = record
                yield record
        frames = assembler.frames_chain
        self.chain_digest = assembler.chain.hexdigest
        self.frames_digest = frames.hexdigest if frames.steps else None
        self.missing = tuple(assembler.missing(max(last_timing + 1, self.expected_steps)))

    def _note_node(self, item: BagMessage) -> None:
        """A node's latched parameters, as the recorder keeps them for the manifest (the
        last message of each node wins); one that is not such a JSON object is kept as it is,
        so it can only differ from the manifest."""
        try:
            info = json.loads(item.msg.data)
            node = info.pop("node")
        except (ValueError, AttributeError, KeyError, TypeError):
            self.nodes[f"<undecodable message at t={item.t_ns} ns>"] = getattr(item.msg, "data", None)
            return
        self.nodes[str(node)] = info

    def _check_log_time(self, item: BagMessage) -> None:
        """The recorder logs each message at the simulation time it carries (``t_us``, or its
        header's stamp), so a bag plays back in simulation time: note the first that is not."""
        if self.misplaced is not None:
            return
        carried = carried_ns(item.msg)
        if carried is None:  # /clock (checked apart), the run's status and parameters (logged at its latest time)
            return
        if item.t_ns != carried:
            self.misplaced = (carried, item.topic, item.t_ns)


def _expect_type(bag_path: Path, topic: str, got: str, want: str) -> None:
    if got != want:
        raise BagError(f"{bag_path}: topic {topic} holds {got}, expected {want}")


def _fmt(value: object) -> str:
    text = "missing" if value is MISSING else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _said(value: object) -> str:
    """A manifest's or a bag's value in a mismatch's detail ("none" where it has none)."""
    return "none" if value is MISSING else format_value(value)


def _mismatch(step: int, field: str, detail: str) -> tuple[int, str, str]:
    return step, field, f"field {field}: {detail}"


PROGRESS_EVERY = 100
"""Steps between two progress reports (a four-camera run verifies ~300 steps a second)."""


def _reported(records: Iterator[dict[str, Any]], total: int,
              progress: Callable[[int, int], None]) -> Iterator[dict[str, Any]]:
    for k, record in enumerate(records):
        if k % PROGRESS_EVERY == 0:
            progress(k, total)
        yield record


def _record_mismatch(run: RunDir, replay: Replay,
                     progress: Callable[[int, int], None] | None = None) -> tuple[int, str, str] | None:
    """The first step where the bag and steps.jsonl disagree; reads the bag to its end.

    The wall-clock readings each record keeps apart (``wall``) are in no digest and two
    runs never share them, so diff_steps passes over them; the bag and steps.jsonl of one
    run must still hold the same ones (the manifest's wall summary is made of them).
    """
    records = replay.records()
    if progress is not None:
        records = _reported(records, len(run.steps), progress)
    walls = _WallCheck()
    result = diff_steps(walls.bag_side(records), walls.file_side(run.steps))
    for _ in records:  # the rest of the bag: its chains and /clock are checked too
        pass
    if result.identical or (walls.first is not None and walls.first[0] < int(result.step or 0)):
        return walls.first
    step = int(result.step or 0)
    if result.first == "steps":
        detail = f"the bag gives {result.a} complete steps, {STEPS} holds {result.b}"
        if replay.missing and replay.steps < len(run.steps):
            detail += f" ({replay.missing[0]})"
        return _mismatch(step, "steps", detail)
    field = str(result.field)
    return _mismatch(step, field, f"bag {_fmt(result.a)} vs {STEPS} {_fmt(result.b)}")


class _WallCheck:
    """Pairs the bag's and steps.jsonl's records as diff_steps reads them (the bag's first)
    and keeps the first step whose ``wall`` readings differ."""

    def __init__(self) -> None:
        self._bag: deque[Any] = deque()
        self.first: tuple[int, str, str] | None = None

    def bag_side(self, records: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
        for record in records:
            self._bag.append(record.get("wall", MISSING))
            yield record

    def file_side(self, records: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
        for index, record in enumerate(records):
            bag = self._bag.popleft() if self._bag else MISSING
            kept = record.get("wall", MISSING)
            if self.first is None and bag is not MISSING and bag != kept:
                self.first = _wall_mismatch(int(record.get("step", index)), bag, kept)
            yield record


def _wall_mismatch(step: int, bag: Any, kept: Any) -> tuple[int, str, str]:
    """Name the first wall-clock reading that differs (or the whole ``wall``)."""
    if isinstance(bag, Mapping) and isinstance(kept, Mapping):
        for key in sorted(set(bag) | set(kept)):
            if bag.get(key, MISSING) != kept.get(key, MISSING):
                return _mismatch(step, f"wall.{key}",
                                 f"bag {_fmt(bag.get(key, MISSING))} vs {STEPS} {_fmt(kept.get(key, MISSING))}")
    return _mismatch(step, "wall", f"bag {_fmt(bag)} vs {STEPS} {_fmt(kept)}")


def _clock_mismatch(run: RunDir, replay: Replay) -> tuple[int, str, str] | None:
    """/clock must hold t(k) = k * decision_us for every recorded step, in order, logged
    at its own stamp. A refused run may hold one more: the step that was refused."""
    step_ns = run.decision_us * 1000
    clock = replay.clock_stamp_ns
    for k, (t_ns, stamp_ns) in enumerate(replay.clock):
        if stamp_ns != k * step_ns:
            want = k * step_ns
            return _mismatch(k, "clock", f"/clock message {k} is stamped {stamp_ns} ns, expected {want} ns")
        if t_ns != stamp_ns:
            return _mismatch(k, "clock", f"/clock message {k} is logged at {t_ns} ns, stamped {stamp_ns} ns")
    steps = len(run.steps)
    allowed = steps + 1 if run.status == "refused" else steps
    if len(clock) < steps:
        return _mismatch(len(clock), "clock", f"/clock has {len(clock)} messages for {steps} recorded steps")
    if len(clock) > allowed:
        return _mismatch(allowed, "clock", f"/clock has {len(clock)} messages for {steps} recorded steps")
    return None


def _log_time_mismatch(run: RunDir, replay: Replay) -> tuple[int, str, str] | None:
    if replay.misplaced is None:
        return None
    carried, topic, logged = replay.misplaced
    # the step named is where the message sits in the bag, by its log time: a damaged stamp
    # named a step it carried (step 670 of a 60-step run); a damaged log time, beyond the
    # run, is held to its last step (a refused run's last is the refused step)
    last = len(run.steps) if run.status == "refused" else max(len(run.steps) - 1, 0)
    return _mismatch(min(max(0, logged // (run.decision_us * 1000)), last), "log_time",
                     f"a {topic} message of t={carried} ns is logged at {logged} ns")


def _schema_mismatch(bag_path: Path) -> tuple[int, str, str] | None:
    """Each topic's message definition embedded in the bag, and its type hash (RIHS01, by
    which ROS 2 matches a type across nodes), must be the ones its type has here: `ros2 bag
    play`, Foxglove and rosbags decode a bag by those, not by ours."""
    store = typestore()
    for conn in bag_connections(bag_path):
        if conn.msgtype not in store.types:
            continue  # a type simforge does not record: nothing to hold it to
        embedded = conn.msgdef.data if conn.msgdef is not None else None
        if embedded != store.generate_msgdef(conn.msgtype, ros_version=2)[0]:
            return _mismatch(0, "schema", f"the message definition embedded for {conn.topic} "
                                          f"({conn.msgtype}) is not that of the type")
        if conn.digest and conn.digest != store.hash_rihs01(conn.msgtype):
            return _mismatch(0, "schema", f"the type hash recorded for {conn.topic} ({conn.msgtype}) is "
                                          f"{conn.digest}, the type's is {store.hash_rihs01(conn.msgtype)}")
    return None


def _structure_mismatch(bag_path: Path) -> tuple[int, str, str] | None:
    """The MCAP files' own bookkeeping, which `ros2 bag play` and other readers go by, must
    match the messages (record.bag_structure)."""
    problem = bag_problem(bag_path)
    return None if problem is None else _mismatch(0, "bag_structure", problem)


def _status_mismatch(manifest: Mapping[str, Any], replay: Replay) -> tuple[int, str, str] | None:
    """The run's status messages the bag holds (`ros2 bag play` replays them): the clock
    master's "running" at the start, and its outcome if that came before the recorder
    closed, each of this run and saying what the manifest says. They were in no check: one
    rewritten from running to counted passed verify and `play --verify`."""
    refusal = manifest.get("refusal") or {}
    for status in replay.statuses:
        if status.get("state") == "running":
            want = {"run_id": manifest.get("run_id"), "state": "running", "code": "", "step": 0, "detail": "",
                    "steps_done": 0}
        else:
            want = {"run_id": manifest.get("run_id"), "state": manifest.get("status"),
                    "code": refusal.get("code", ""), "step": refusal.get("step", 0),
                    "detail": refusal.get("detail", ""), "steps_done": replay.steps}
        wrong = next((k for k in want if status.get(k) != want[k]), None)
        if wrong is not None:
            return _mismatch(0, "status", f"a {topics.STATUS} message has {wrong} {_said(status.get(wrong, MISSING))}, "
                                          f"the run's {_said(want[wrong])}")
    return None


def _manifest_mismatch(run: RunDir, replay: Replay) -> tuple[int, str, str] | None:
    manifest = run.manifest
    n = replay.steps
    last = n - 1
    if manifest["steps"] != n:
        return _mismatch(min(n, manifest["steps"]), "manifest.steps",
                         f"{MANIFEST} says {manifest['steps']}, the bag gives {n}")
    if manifest["chain_digest"] != replay.chain_digest:
        return _mismatch(last, "manifest.chain_digest",
                         f"{MANIFEST} has {manifest['chain_digest']}, the bag gives {replay.chain_digest}")
    want_frames = manifest["frames_digest"]
    got_frames = replay.frames_digest
    if got_frames is None and want_frames == GENESIS.hex():
        want_frames = None  # no frames at all: null and GENESIS both say "empty chain"
    if want_frames != got_frames:
        return _mismatch(
            last, "manifest.frames_digest", f"{MANIFEST} has {want_frames}, the bag gives {got_frames}"
        )
    if replay.last_record is not None:
        timing = replay.last_record["timing"]
        world = timing.get("world_digest")
        if manifest["world_digest"] != world:
            return _mismatch(last, "manifest.world_digest",
                             f"{MANIFEST} has {manifest['world_digest']!r}, the last timing record {world!r}")
        # the contract, as the recorder took it from the last timing record (diff and info read it)
        contract = {k: timing.get(k) for k in CONTRACT_KEYS}
        if manifest.get("contract") != contract:
            field, has, holds = (first_field_diff("manifest.contract", manifest.get("contract"), contract)
                                 or ("manifest.contract", manifest.get("contract"), contract))
            return _mismatch(last, field, f"{MANIFEST} has {_said(has)}, the last timing record gives {_said(holds)}")
    nodes, contacts = manifest.get("nodes"), manifest.get("contacts")
    if nodes is None and replay.nodes:
        return _mismatch(0, "manifest.nodes", f"{MANIFEST} has no nodes, the bag holds the parameters of "
                                              f"{len(replay.nodes)}")
    if nodes is not None and nodes != replay.nodes:
        field, has, holds = first_field_diff("manifest.nodes", nodes, replay.nodes) or ("manifest.nodes", nodes, None)
        return _mismatch(0, field, f"{MANIFEST} has {_said(has)}, the node parameters the bag holds "
                                   f"give {_said(holds)}")
    if replay.nodes:  # how the run was set up, as the recorder derived it from those parameters
        derived = setup_of(replay.nodes)
        for key in SETUP_KEYS:
            if manifest.get(key) != derived[key]:
                return _mismatch(0, f"manifest.{key}", f"{MANIFEST} has {manifest.get(key)!r}, the node "
                                                       f"parameters the bag holds give {derived[key]!r}")
    status = _status_mismatch(manifest, replay)
    if status is not None:
        return status
    if contacts is not None and not (isinstance(contacts, dict) and contacts.get("events") == replay.contacts):
        return _mismatch(last, "manifest.contacts", f"{MANIFEST} contacts differ from the contact events the bag holds")
    before = manifest.get(SIDE_BEFORE)  # a refused run's: its recorded steps' messages only
    if SIDE_BEFORE in manifest:
        contract = manifest.get("contract") or {}
        due = n * int(contract.get("decision_us", 0)) * 1000
        if run.status != "refused" or type(before) is not int or before != due:
            return _mismatch(last, f"manifest.{SIDE_BEFORE}", f"{MANIFEST} has {before!r}: a refused run's first "
                                                              f"unrecorded step time, {due} ns, or none")
    for key, what, label in SIDE_DIGESTS:
        recorded = manifest.get(key)  # absent from runs recorded before it was kept
        replayed = getattr(replay, key)
        said = None if recorded is None else first_difference(recorded, replayed.summary(), what, label=label)
        if said is not None:
            return _mismatch(last, f"manifest.{key}", said)
    if run.status == "counted" and manifest["expected_steps"] != n:
        return _mismatch(min(n, manifest["expected_steps"]), "manifest.expected_steps",
                         f"a counted run of {n} steps, but {MANIFEST} expected {manifest['expected_steps']}")
    return None


def verify_run(run_dir: Path, progress: Callable[[int, int], None] | None = None) -> VerifyResult:
    """Recompute every step digest and frame hash of a run from its bag and compare them
    with steps.jsonl and the manifest; ``ok`` only on a full match. ``progress(k, steps)``
    is called as the bag's step k is chained, every PROGRESS_EVERY steps.

    Raises:
        RunDirError: manifest.json or steps.jsonl is missing, corrupt or truncated.
        BagError: the bag is missing, truncated or unreadable.
    """
    run = load_run(Path(run_dir))
    cut = run.manifest.get(SIDE_BEFORE)  # held to the run in _manifest_mismatch
    replay = Replay(run.bag_path, len(run.steps), cut_ns=cut if type(cut) is int else None)
    # first: bookkeeping that does not match can make rosbags read the bag wrong, or not at all
    structure = _structure_mismatch(run.bag_path)
    try:
        record = _record_mismatch(run, replay, progress)
    except BagError as err:
        problem = structure[2].removeprefix(f"field {structure[1]}: ") if structure is not None else ""
        if structure is None or problem in str(err):  # the reader's error already says it (bag._opened)
            raise
        raise BagError(f"{err}; {structure[2]}") from err  # unreadable, and what in it says why
    clock = _clock_mismatch(run, replay)
    logged = _log_time_mismatch(run, replay)
    # the bag's own bookkeeping and types first: a reader goes by them, so at the same step
    # they are the cause of what differs after them
    found = [m for m in (structure, _schema_mismatch(run.bag_path), record, clock, logged) if m is not None]
    first = min(found, key=lambda m: m[0]) if found else _manifest_mismatch(run, replay)
    matched = len(run.steps) if record is None else record[0]
    if first is None:
        detail = f"verified: {len(run.steps)} steps, chain {replay.chain_digest[:16]}"
        return VerifyResult(True, len(run.steps), None, detail, replay.chain_digest)
    step, field, detail = first
    return VerifyResult(False, matched, {"step": step, "field": field}, detail, replay.chain_digest)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simforge verify", description="Recompute a run's digests from its bag and check every record."
    )
    parser.add_argument("run", type=Path, help="the run directory")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 on a full match, 1 on a mismatch, 2 on unreadable input or bad usage."""
    args = parse(build_parser(), argv)
    if isinstance(args, int):
        return args
    progress = StepLine(f"verify {args.run}", sys.stderr.isatty() and not args.json)  # a long camera run: minutes
    try:
        try:
            result = verify_run(args.run, progress if progress.shown else None)
        finally:
            progress.clear()
    except SimforgeError as err:  # RunDirError, BagError: one line, never a traceback
        say("verify", err)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(result.to_json()))
    elif result.ok:
        print(result.detail)
    else:
        assert result.first_mismatch is not None
        print(f"MISMATCH at step {result.first_mismatch['step']}: {result.detail}")
    return 0 if result.ok else EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
