"""recorder node: records every topic of a run into a rosbag2 bag, chains the per-step
digests, and writes steps.jsonl and manifest.json into the run directory.

Subscriptions are reliable with keep-all history (nothing may be dropped) and raw: the
bytes go into the bag as they came (written on a thread of their own), and are
deserialised once with the bag's own typestore to feed the StepAssembler, exactly as
`simforge verify` will from the bag; images are not deserialised: their stamp, size and
pixels are read straight from the CDR bytes (record.image_cdr.image_view), and the
pixels hashed without a copy. The run counts only if the clock master's Finish request
says so and every step up to the expected count is complete in the record; Finish also
gives late camera_info messages a moment, so the bag holds one for every image.
Memory stays flat: each step record goes to steps.jsonl, only the latest is kept.

/tf and /tf_static are every tf2 node's topics, not only the bridge's: a user's stack in
the run's domain publishes its own there. Only the bridge's messages are the run's, told
apart by the frames its parameters name (_from_bridge); the others are counted and left
out, or the bag would hold them, logged at whatever stamps they carry, and a rerun without
that stack would not repeat. (Their writer cannot be asked: a callback taking the message
info fails in the EventsExecutor of this rclpy, "SystemError: null argument".)
"""

from __future__ import annotations

import contextlib
import errno
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, cast

from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import String, UInt64
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import MarkerArray

from simforge_ros import topics
from simforge_ros.core.canonical import to_plain
from simforge_ros.core.errors import ConfigError
from simforge_ros.core.wall_times import WallTimes
from simforge_ros.msg import ContactEvent, DriverAction, GroundTruth, RunStatus, StepTiming, VehicleState
from simforge_ros.nodes.common import (
    HOST,
    LATCHED_QOS,
    PROGRESS_QOS,
    RECORD_QOS,
    declare_params,
    die_now,
    in_dds_domain,
    losing_answer,
    node_faults,
    process_alive,
    publish_node_params,
    run_participant,
    stall_forever,
    steady_timer,
)
from simforge_ros.nodes.driver import ALL_CAMERAS
from simforge_ros.record.assembler import StepAssembler
from simforge_ros.record.bag import BackgroundBagWriter, BagError, typestore
from simforge_ros.record.clock_first import ClockFirst
from simforge_ros.record.image_cdr import image_view, leading_stamp_ns
from simforge_ros.record.manifest import build_manifest, wall_summary, write_json
from simforge_ros.record.reserve import RESERVE, RoomReserve
from simforge_ros.record.rundir import RECORD_FAILED, STOPPED_FIRST, kept_chain, unusable_run_dir
from simforge_ros.record.side_digests import (
    MARKERS_TYPE,
    ODOM_TYPE,
    SIDE_BEFORE,
    TF_TYPE,
    TRUTH_TYPE,
    CameraInfoDigests,
    GroundTruthDigests,
    ImageHeaderDigests,
    OdometryDigests,
    TransformDigests,
)
from simforge_ros.record.sim_time import carried_ns, stamp_ns
from simforge_ros.srv import Finish

NAME = "recorder"
_INFO_GRACE_S = 1.0
# Wall clock: how long Finish still waits for a step's messages once the bridge's process
# is gone (what it wrote before it died is already on its way, or lost)
_LOST_WRITER_GRACE_S = 0.5
# Wall clock: how long Finish waits for a node's latched parameters still due (_params_due).
_PARAMS_GRACE_S = 3.0
BACKEND = "sim_bridge/backend"  # what the bridge's backend is (sim_bridge: published at the reset)
# Topics any tf2 node publishes on: only the bridge's messages are recorded (_from_bridge).
_BRIDGE_ONLY = frozenset({topics.TF, topics.TF_STATIC})
# Such messages held until the bridge's parameters say which are its own (oldest dropped).
_UNSORTED_MAX = 64
# /tf_static read latched, as tf2 offers it, but keeping all: two static messages that come
# together must both be taken (the bridge's writer keeps its last one, TF_STATIC_QOS).
_LATCHED_ALL_QOS = QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.RELIABLE,
                              durability=DurabilityPolicy.TRANSIENT_LOCAL)

# topic -> (rclpy type, rosbags type name, assembler part or None)
_RECORDS: dict[str, tuple[Any, str, str | None]] = {
    topics.CLOCK: (Clock, "rosgraph_msgs/msg/Clock", None),
    topics.TIMING: (StepTiming, "simforge_ros/msg/StepTiming", "timing"),
    topics.ACTION: (DriverAction, "simforge_ros/msg/DriverAction", "action"),
    topics.APPLIED: (DriverAction, "simforge_ros/msg/DriverAction", "applied"),
    topics.STATE: (VehicleState, "simforge_ros/msg/VehicleState", "state"),
    topics.CONTACTS: (ContactEvent, "simforge_ros/msg/ContactEvent", None),
}
# types of which the recorder needs only the stamp they start with (record.image_cdr)
_STAMP_ONLY = frozenset({"rosgraph_msgs/msg/Clock", "sensor_msgs/msg/CameraInfo"})
BRIDGE_NODE = "sim_bridge"  # the bridge's node name (nodes.sim_bridge.NAME)
_HEARD_FROM = {"clock_master", BRIDGE_NODE}  # whose latched parameters must have arrived first
_AWAIT_SAY_S = 2.0  # wall clock: when to say whose parameters Finish still waits for
_MATCH_POLL_S = 0.01  # wall clock: how often the readers' matches are checked before Finish
# Wall clock: steps.jsonl (and the bag, BackgroundBagWriter.checkpoint) is flushed at the
# first record and then at most this long after the last flush, so a recorder killed
# outright loses at most that much of what it chained (`simforge salvage` reads the rest).
# A record chained after a flush is flushed by the progress timer once this has gone by,
# also when no step follows (a run held on /simforge/pause, a participant working long).
_STEPS_FLUSH_S = 0.2
# Progress reports on topics.RECORDED: every quarter of the clock master's
# recorder_backlog_steps (read from its latched parameters, which come before step 0),
# and from a timer whatever is left over, so a loop paused for the recorder always hears
# of its progress (wall clock).
_PROGRESS_S = 0.05
# Wall clock: how long the recorder stays after answering Finish when the clock master's
# final status (sent once the answer has reached it) does not come: an answer lost on its
# way is asked for again after 1 s, then 2 s more (ClockMaster._call). Below the 5 s that
# `simforge run` gives every node to exit after the clock master: at 5 s, a recorder that
# missed the status (1 run in some hundreds) was refused as still running.
_LINGER_S = 3.0
# One encoder for every steps.jsonl line: json.dumps with keyword arguments builds a new
# one per call (21 against 15.5 µs a record here; the same text, a record holds no cycles).
_RECORD_JSON = json.JSONEncoder(sort_keys=True, check_circular=False)
_LATCHED: dict[str, tuple[Any, str]] = {
    topics.STATUS: (RunStatus, "simforge_ros/msg/RunStatus"),
    topics.NODE_PARAMS: (String, "std_msgs/msg/String"),
}


class Recorder:
    """The recorder shell; ``node`` is its rclpy node."""

    def __init__(self, context: Any = None) -> None:
        """Raises: ConfigError: no out_dir, an existing run directory, or bad parameters."""
        self.node = Node(NAME, context=context)
        values = declare_params(self.node, NAME)
        if not values["out_dir"]:
            raise ConfigError.single(NAME, "out_dir", "a directory path for the run", values["out_dir"])
        self.out_dir = Path(values["out_dir"])
        if (why := unusable_run_dir(self.out_dir)) is not None:
            raise ConfigError.single(NAME, "out_dir", f"a new run directory (never overwritten; {why})",
                                     str(self.out_dir))
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._dir_id = _dir_id(self.out_dir)  # see _flush_record
        self._values = values
        self._faults = node_faults(values, NAME).for_node(NAME)
        kill, stall = self._faults.first("kill"), self._faults.first("stall")
        self._kill_step = kill.step if kill is not None else None
        self._stall_step = stall.step if stall is not None else None
        self._store = typestore()
        self._bag = BackgroundBagWriter(self.out_dir / "bag", values["storage"])
        self._bag.open()
        self._bag_order = ClockFirst(self._bag.write)  # each /clock ahead of its time's messages
        self._steps_file = (self.out_dir / "steps.jsonl").open("w")
        # room for the manifest and the last records on a disk the run fills (record.reserve)
        self._reserve = RoomReserve(self.out_dir / RESERVE).hold()
        self._flush_at = 0.0  # time.monotonic() of the next steps.jsonl flush
        self._unflushed = False  # records written since the last flush
        self.assembler = StepAssembler(keep_records=False)  # each record goes to steps.jsonl
        self._step_ns = WallTimes()  # wall_step_ns per step, for the manifest's summary
        self._images_seen: Counter[str] = Counter()  # per camera: each image has a camera_info
        self._infos_seen: Counter[str] = Counter()
        # what of the camera messages no chain holds (record.side_digests)
        self._info_digests = CameraInfoDigests(
            lambda raw: self._store.deserialize_cdr(raw, "sensor_msgs/msg/CameraInfo"))
        self._header_digests = ImageHeaderDigests()
        self._odom_digests = OdometryDigests()  # sim_bridge.odometry's messages, also in no chain
        self._tf_digests = TransformDigests()  # /tf and /tf_static (sim_bridge.tf, camera_tf), the same
        self._truth_digests = GroundTruthDigests()  # sim_bridge.ground_truth's and markers', the same
        self._side_digests = (self._info_digests, self._header_digests, self._odom_digests, self._tf_digests,
                              self._truth_digests)
        self._nodes: dict[str, Any] = {}
        self._bridge_pid: int | None = None  # the bridge's process, watched at Finish (_watch_bridge)
        self._kept: tuple[int, str, str] | None = None  # steps, chain and frames digests the manifest says
        # Whose latched parameters must have come before Finish is offered. The driver's
        # with await_driver (true unless the driver is external): a short run could
        # otherwise end before they came, and its manifest called the driver external (7 of
        # 365 runs of the processes layout with only the Finish wait of _params_due: the
        # recorder's graph did not yet show the driver publishing them).
        self._heard_from = _HEARD_FROM | ({"driver"} if values["await_driver"] else set())
        self._awaited_since = time.monotonic()
        self._awaited_said = False
        self._contacts: list[dict[str, Any]] = []
        self._last_t_ns = 0
        self._progress: Future | None = None
        self._wall_start_ns: int | None = time.time_ns()  # wall time: kept apart in the manifest, never hashed
        self._salvaged = False
        self._written = False
        self._ended_unsaid = True
        self._failure: str | None = None  # why writing the record failed (see _fail)
        self._failure_said = False  # in the log
        self._failure_pub = self.node.create_publisher(String, topics.RECORDER_FAILURE, LATCHED_QOS)
        self._finishing: Future | None = None  # the Finish answer, once under way (see _on_finish)
        self._answered_at: float | None = None  # time.monotonic() when Finish was answered
        self._final = False  # the clock master's final status has arrived
        self._final_status: Any = None  # it (a RunStatus), for close()
        self._subs = []
        self._topics: dict[str, tuple[str, str | None]] = {}  # topic -> (type name, assembler part)
        self._step_subs = []  # of topics.STEP_TOPICS: see _offer_finish
        for topic, (msg_type, type_name, part) in _RECORDS.items():
            self._subs.append(self._subscribe(msg_type, topic, type_name, part, RECORD_QOS))
            if topic in topics.STEP_TOPICS:
                self._step_subs.append(self._subs[-1])
        self._odom_sub = self._subscribe(Odometry, topics.ODOM, ODOM_TYPE, "odom", RECORD_QOS)
        self._subs.append(self._odom_sub)
        self._tf_sub = self._subscribe(TFMessage, topics.TF, TF_TYPE, "tf", RECORD_QOS)
        # latched (as tf2 offers it): the bridge publishes it once, before this reader may exist
        self._subs += [self._tf_sub, self._subscribe(TFMessage, topics.TF_STATIC, TF_TYPE, "tf", _LATCHED_ALL_QOS)]
        self.others_left_out: Counter[str] = Counter()  # per topic: messages of other nodes
        self._unsorted: list[tuple[str, bytes, Any]] = []  # come before the bridge's parameters
        self._truth_sub = self._subscribe(GroundTruth, topics.GROUND_TRUTH, TRUTH_TYPE, "truth", RECORD_QOS)
        self._markers_sub = self._subscribe(MarkerArray, topics.MARKERS, MARKERS_TYPE, "truth", RECORD_QOS)
        self._subs += [self._truth_sub, self._markers_sub]
        # the bridge's optional messages, one a step when its parameter is on: (parameter,
        # reader, the digests that count them, the key they are counted under)
        self._per_step: tuple[tuple[str, Any, Any, str], ...] = (
            ("odometry", self._odom_sub, self._odom_digests, OdometryDigests.KEY),
            ("tf", self._tf_sub, self._tf_digests, topics.TF),
            ("ground_truth", self._truth_sub, self._truth_digests, topics.GROUND_TRUTH),
            ("markers", self._markers_sub, self._truth_digests, topics.MARKERS),
        )
        self._camera_subs: dict[str, tuple[Any, Any]] = {}  # camera -> its image and camera_info readers
        for camera in ALL_CAMERAS:
            image_sub = self._subscribe(
                Image, topics.image_topic(camera), "sensor_msgs/msg/Image", f"frame:{camera}", RECORD_QOS)
            info_sub = self._subscribe(
                CameraInfo, topics.camera_info_topic(camera), "sensor_msgs/msg/CameraInfo", f"info:{camera}",
                RECORD_QOS)
            self._subs += [image_sub, info_sub]
            self._camera_subs[camera] = (image_sub, info_sub)
        # The parameters' reader comes after every recorded topic's: discovery announces a
        # participant's readers in the order they were made, so a node's parameters
        # arriving here means its writers have matched every reader above (_offer_finish).
        for topic, (msg_type, type_name) in _LATCHED.items():
            self._subs.append(self._subscribe(msg_type, topic, type_name, None, LATCHED_QOS))
        self._params_pub = publish_node_params(self.node, NAME, values, {"faults": self._faults.specs()})
        self._progress_pub = self.node.create_publisher(UInt64, topics.RECORDED, PROGRESS_QOS)
        self._progress_msg = UInt64()
        self._reported = 0  # steps chained at the last progress report
        self._progress_every = 1  # until the clock master's parameters say otherwise
        self._progress_timer = steady_timer(self.node, _PROGRESS_S, self._on_progress_timer)
        # Finish is offered last: the clock master starts stepping when it sees it. By then
        # every per-step topic's reader has matched its writer (the clock master publishes
        # them all; a service seen proves nothing about the topics, discovery matches each
        # endpoint on its own), and data has come through from the clock master's and the
        # bridge's processes (their latched parameters). In one CI run a recorder received
        # nothing of a whole run (stale shared memory of a killed process, a known Fast DDS
        # issue, is the likely cause); now such a run cannot start unrecorded.
        self._offer_timer: Any = steady_timer(self.node, _MATCH_POLL_S, self._offer_finish)
        self.offering = False
        self._running_id: str | None = None  # the run id of the "running" status seen (see _on_status)
        self._status_sub = self.node.create_subscription(RunStatus, topics.STATUS, self._on_status, LATCHED_QOS)

    @property
    def finished(self) -> bool:
        """Finish answered, and the clock master's final status here (or _LINGER_S gone by):
        until the answer has reached the clock master, it may ask again. The final status
        without a Finish answered (a run refused before it could be offered: the clock
        master has given up on it) ends it too, where the recorder waited for the clock
        master to leave and then said that status had never come. (A clock master that has
        left ends the recorder too: nodes.common.ClockMasterGone.)"""
        if self._final:
            return True
        if self._answered_at is None:
            return False
        if time.monotonic() - self._answered_at < _LINGER_S:
            return False
        if self._ended_unsaid:  # said once: the participant's loop asks again before it ends
            self._ended_unsaid = False
            with contextlib.suppress(OSError):
                print(f"{NAME}: the run's final status never came here; ending {_LINGER_S:g} s after answering "
                      "Finish", file=sys.stderr, flush=True)
        return True

    def _on_status(self, status: Any) -> None:
        """The clock master's status: "running" as its run starts, then its final status
        (counted or refused). A final one counts only for this run (its "running" seen, or
        this recorder's own run_id): a latched one of a run before (a clock master still
        ending in a domain shared by hand-started nodes) would end this recorder with that
        run's refusal (finished, close)."""
        if status.state == "running":
            self._running_id = str(status.run_id)
        elif status.state in ("counted", "refused") and str(status.run_id) in (self._running_id,
                                                                                self._values["run_id"]):
            self._final, self._final_status = True, status

    def _offer_finish(self) -> None:
        if self.offering or not self._nodes.keys() >= self._heard_from:
            self._say_whose_params_are_awaited()
            return
        side = [sub for param, sub, _, _ in self._per_step if self._bridge_param(param) is True]
        if any(sub.get_publisher_count() < 1 for sub in self._step_subs + self._bridge_camera_subs() + side):
            return
        self.node.destroy_timer(self._offer_timer)
        on_finish: Any = self._on_finish  # a coroutine callback: mypy cannot infer it
        lose = self._faults.first("lose_answer")
        if lose is not None and lose.step is not None:
            on_finish = losing_answer(on_finish, lose.step, lambda request: int(request.expected_steps))
        self.node.create_service(Finish, topics.FINISH_SERVICE, on_finish)
        self.offering = True

    def _say_whose_params_are_awaited(self) -> None:
        """Once, after _AWAIT_SAY_S: whose parameters hold Finish back (a clock master that
        gives up names only the Finish service)."""
        missing = sorted(self._heard_from - self._nodes.keys())
        if self._awaited_said or not missing or time.monotonic() - self._awaited_since < _AWAIT_SAY_S:
            return
        self._awaited_said = True
        self.node.get_logger().warning(
            f"Finish is not offered until the parameters of {', '.join(missing)} have come on "
            f"{topics.NODE_PARAMS}" + (" (recorder.await_driver is true: an external driver publishes none)"
                                       if "driver" in missing else ""))

    def _bridge_param(self, name: str) -> Any:
        """A parameter of the bridge's, as its latched parameters said (None: not yet)."""
        return (self._nodes.get(BRIDGE_NODE) or {}).get("params", {}).get(name)

    def _bridge_camera_subs(self) -> list[Any]:
        """The readers of the cameras the bridge's parameters name: matched to its writers
        before step 0 too, as the driver's are. The order readers are announced in was taken
        to match them (see above), yet one run lost step 0's first image (chase@0, recorded
        from step 1 on): the step never completed and nothing was chained."""
        cameras = self._bridge_param("cameras")
        if not isinstance(cameras, list):
            return []
        return [sub for c in cameras if str(c) in self._camera_subs for sub in self._camera_subs[str(c)]]

    def _subscribe(self, msg_type: Any, topic: str, type_name: str, part: str | None, qos: Any) -> Any:
        self._topics[topic] = (type_name, part)

        def _cb(raw: bytes, msg: Any = None) -> None:
            try:
                self._on_message(topic, type_name, part, raw, msg)
            except (BagError, OSError) as err:
                self._fail(err)

        def _cb_bridge_only(raw: bytes) -> None:
            msg = self._store.deserialize_cdr(raw, type_name)
            mine = self._from_bridge(topic, msg)
            if mine is None:  # the bridge's parameters have not come yet
                self._unsorted = [*self._unsorted[-(_UNSORTED_MAX - 1):], (topic, raw, msg)]
            elif mine:
                _cb(raw, msg)
        return self.node.create_subscription(msg_type, topic, _cb_bridge_only if topic in _BRIDGE_ONLY else _cb,
                                             qos, raw=True)

    def _from_bridge(self, topic: str, msg: Any) -> bool | None:
        """Whether a /tf or /tf_static message is the bridge's: exactly the transforms its
        parameters say it publishes (tf: map_frame -> base_frame; camera_tf: base_frame ->
        each camera it renders, in order); None until those parameters are here. Another
        node's is counted and left out, with a warning the first time."""
        params = (self._nodes.get(BRIDGE_NODE) or {}).get("params")
        if params is None:
            return None
        edges = [(t.header.frame_id, t.child_frame_id) for t in msg.transforms]
        if topic == topics.TF:
            mine = params.get("tf") is True and edges == [(params.get("map_frame"), params.get("base_frame"))]
        else:
            cameras = params.get("cameras") or []
            mine = (params.get("camera_tf") is True and bool(cameras)
                    and edges == [(params.get("base_frame"), c) for c in cameras])
        if not mine:
            if not self.others_left_out[topic]:
                self.node.get_logger().warning(
                    f"{topic}: a message with other transforms than the bridge's ({', '.join(map(str, edges))}): "
                    "another node's, not recorded")
            self.others_left_out[topic] += 1
        return mine

    def _sort_unsorted(self) -> None:
        """The bridge's parameters are here: record the held /tf and /tf_static messages that
        are its own, in the order they came."""
        held, self._unsorted = self._unsorted, []
        for topic, raw, msg in held:
            if self._from_bridge(topic, msg):
                type_name, part = self._topics[topic]
                self._on_message(topic, type_name, part, raw, msg)

    def take(self, topic: str, raw: bytes) -> bool:
        """Handle ``raw`` as if it had just come on ``topic`` (a salvaged bag fed back,
        record.salvage); False for a topic this recorder does not record."""
        known = self._topics.get(topic)
        if known is None:
            return False
        self._on_message(topic, known[0], known[1], raw)
        return True

    def conclude(self, run_id: str, refusal: dict[str, Any], expected: int) -> None:
        """Write the manifest of a refused run now, without a Finish (record.salvage): when
        the run began and ended is not this recorder's to say (it was the salvage's time),
        only how long its steps took (their own wall records)."""
        self._wall_start_ns = None
        self._salvaged = True
        self._write(run_id, False, refusal, expected)

    def _fail(self, err: BaseException) -> None:
        """Writing the record failed (a full disk): stop writing, keep what is in the files,
        and tell the clock master, which refuses the run at its next step. Before, the
        error escaped the callback: a FATAL traceback, and the run went on unrecorded."""
        if self._failure is not None:
            return
        cause = err.__cause__ if isinstance(err, BagError) and err.__cause__ is not None else err
        reason = f"{type(cause).__name__}: {cause}"
        self._failure = f"{RECORD_FAILED} after {self.assembler.steps_done} steps ({reason})"
        self._failure_pub.publish(String(data=self._failure))
        self._say_failure()

    def _say_failure(self) -> None:
        """The failure in this node's log, once: the log may be on the same full disk (the
        line is then lost, not kept to be written later), so it is said again once the
        reserve is given back (_write)."""
        if self._failure is None or self._failure_said:
            return
        with contextlib.suppress(OSError):
            print(f"{NAME}: {self._failure}", file=sys.stderr, flush=True)
            self._failure_said = True

    def _on_message(self, topic: str, type_name: str, part: str | None, raw: bytes, msg: Any = None) -> None:
        """Record one message; ``msg``: it deserialised already, if it was."""
        if self._written or self._failure is not None:
            return
        completed: list[dict[str, Any]] = []
        side_done = False  # a camera_info: what a finishing run may be waiting for
        camera = part[6:] if part is not None and part.startswith("frame:") else None
        image = image_view(raw) if camera is not None else None
        stamp_ns = leading_stamp_ns(raw) if type_name in _STAMP_ONLY else None
        if image is not None and camera is not None:
            # pixels are hashed straight from the received bytes: no deserialising, no copy
            t_ns = self._note_time(image.sec * 1_000_000_000 + image.nanosec)
            self._bag_order.write(topic, type_name, t_ns, raw)
            self._images_seen[camera] += 1
            self._header_digests.add(camera, image.sec, image.nanosec, image.frame_id, image.is_bigendian)
            completed = self.assembler.add_frame(
                camera, t_ns // 1000, image.encoding, image.width, image.height, image.step, image.data
            )
        elif stamp_ns is not None:
            # /clock or a camera_info: its stamp, read straight from the received bytes, is
            # all that is needed of it
            t_ns = self._note_time(stamp_ns)
            self._bag_order.write(topic, type_name, t_ns, raw)
            if part is not None:  # info:CAMERA: its field values, kept apart (record.side_digests)
                self._infos_seen[part[5:]] += 1
                self._info_digests.add_raw(part[5:], raw)
                side_done = True
        else:
            msg = msg if msg is not None else self._store.deserialize_cdr(raw, type_name)
            t_ns = self._sim_time_ns(msg, type_name)
            self._bag_order.write(topic, type_name, t_ns, raw)
            if part is None:
                self._side_record(type_name, msg)
            elif part.startswith("info:"):
                self._infos_seen[part[5:]] += 1
                self._info_digests.add(part[5:], cast("dict[str, Any]", to_plain(msg)))
                side_done = True
            elif part == "odom":
                self._odom_digests.add(cast("dict[str, Any]", to_plain(msg)), t_ns)
                side_done = True
            elif part == "tf":  # /tf_static is sent once, not a step's
                self._tf_digests.add(topic, cast("dict[str, Any]", to_plain(msg)), t_ns if topic == topics.TF else None)
                side_done = True
            elif part == "truth":
                self._truth_digests.add(topic, cast("dict[str, Any]", to_plain(msg)), t_ns)
                side_done = True
            elif part.startswith("frame:"):
                self._images_seen[part[6:]] += 1
                stamp = msg.header.stamp
                self._header_digests.add(part[6:], stamp.sec, stamp.nanosec, msg.header.frame_id, msg.is_bigendian)
                completed = self.assembler.add_frame(
                    part[6:], t_ns // 1000, msg.encoding, msg.width, msg.height, msg.step, msg.data
                )
            else:
                value = cast("dict[str, Any]", to_plain(msg))  # a message flattens to a dict
                if part == "timing" and value["step"] == self._kill_step:
                    die_now()
                if part == "timing" and value["step"] == self._stall_step:
                    stall_forever()
                completed = self.assembler.add(part, value)
        for record in completed:
            self._steps_file.write(_RECORD_JSON.encode(record) + "\n")
            self._step_ns.append(record["wall"].get("wall_step_ns", 0))
        if completed:
            for digests in self._side_digests:  # a cut (side_digests_before_ns) is never before a recorded step
                digests.settle(int(completed[-1]["t_us"]) * 1000)
            now = time.monotonic()
            if now >= self._flush_at:
                self._flush_record(now)
            else:
                self._unflushed = True
            if self.assembler.steps_done - self._reported >= self._progress_every:
                self._report_progress()
        if (completed or side_done) and self._progress is not None and not self._progress.done():
            self._progress.set_result(True)

    def _flush_record(self, now: float) -> None:
        """steps.jsonl and the bag's messages so far into their files (record.salvage)."""
        last = self.assembler.last_record
        if last is not None:  # its messages too, should its /clock not have come yet
            self._bag_order.release_through(int(last["t_us"]) * 1000)
        self._steps_file.flush()
        self._bag.checkpoint()
        self._flush_at = now + _STEPS_FLUSH_S
        self._unflushed = False
        if _dir_id(self.out_dir) != self._dir_id:
            # writes into a removed directory's open files succeed, into nothing: a run whose
            # directory was deleted ran to its end and then said "incomplete_run, 0 steps"
            raise FileNotFoundError(errno.ENOENT, "the run directory was removed or replaced", str(self.out_dir))

    def _on_progress_timer(self) -> None:
        self._report_progress()
        if self._unflushed and not self._written and self._failure is None:
            now = time.monotonic()
            if now >= self._flush_at:
                try:
                    self._flush_record(now)
                except (BagError, OSError) as err:
                    self._fail(err)

    def _report_progress(self) -> None:
        """Tell the clock master how many steps are chained (see core.backlog)."""
        if self.assembler.steps_done > self._reported and not self._written:
            self._reported = self._progress_msg.data = self.assembler.steps_done
            self._progress_pub.publish(self._progress_msg)

    def _note_time(self, t_ns: int) -> int:
        self._last_t_ns = max(self._last_t_ns, t_ns)
        return t_ns

    def _sim_time_ns(self, msg: Any, type_name: str) -> int:
        t_ns = stamp_ns(msg.clock) if type_name == "rosgraph_msgs/msg/Clock" else carried_ns(msg)
        if t_ns is None:
            t_ns = self._last_t_ns  # status and parameters: stamped with the run's latest time
        self._last_t_ns = max(self._last_t_ns, t_ns)
        return t_ns

    def _watch_bridge(self, process: Any) -> None:
        """Note the bridge's process from its parameters, to be watched at Finish
        (_bridge_gone) when it is one this node can see: of this host, its pid in the run's
        DDS domain (as the clock master's _Peer.learn); not a pid of another host or of a
        container's own pid namespace, which would look gone while it runs."""
        if isinstance(process, dict) and isinstance(pid := process.get("pid"), int) and pid > 0 \
                and process.get("host") == HOST and in_dds_domain(pid, self.node.context.get_domain_id()):
            self._bridge_pid = pid

    def _bridge_gone(self) -> str | None:
        """"sim_bridge (pid N) is gone" once the watched bridge process has ended; else None."""
        pid = self._bridge_pid
        return f"sim_bridge (pid {pid}) is gone" if pid is not None and not process_alive(pid) else None

    def _side_record(self, type_name: str, msg: Any) -> None:
        if type_name == "std_msgs/msg/String":
            info = json.loads(msg.data)
            node = info.pop("node")
            self._nodes[node] = info
            if node == "clock_master":
                limit = info.get("params", {}).get("recorder_backlog_steps")
                if isinstance(limit, int) and limit > 0:
                    self._progress_every = max(1, limit // 4)
            elif node == BRIDGE_NODE:
                self._watch_bridge(info.get("process"))
                if self._unsorted:
                    self._sort_unsorted()
        elif type_name == "simforge_ros/msg/ContactEvent":
            contact = to_plain(msg)
            assert isinstance(contact, dict)
            self._contacts.append(contact)

    def _side_behind(self) -> bool:
        """A camera_info (or, with the bridge's odometry, tf or ground truth on, one of
        those messages) not yet here for a step recorded, or the cameras' /tf_static not yet
        here: none is in a step record, but the bag must hold them all."""
        if any(self._infos_seen[c] < n for c, n in self._images_seen.items()):
            return True
        steps = self.assembler.steps_done
        if any(self._bridge_param(param) is True and digests.messages(key) < steps
               for param, _, digests, key in self._per_step):
            return True
        return (self._bridge_param("camera_tf") is True and bool(self._bridge_param("cameras"))
                and self._tf_digests.messages(topics.TF_STATIC) < 1)

    def _params_due(self, participants: Any) -> list[str]:
        """The latched parameters the manifest needs that are not here yet: the bridge's
        backend (published as it answered the reset, so due once a step is recorded) and
        those of each participant the graph shows publishing parameters (a simforge node;
        an external driver publishes none, and is named so by their absence). Before step
        0 only the clock master's, the bridge's and (await_driver) the driver's are
        awaited: a short run could end before the backend's came, or an external driver's
        that publishes some, and its manifest then had no scenario or engine digest, or
        said the driver was external (about 1 run in 25 of 40 steps)."""
        due = [BACKEND] if self.assembler.steps_done > 0 and BACKEND not in self._nodes else []
        publishing: set[str] | None = None
        for participant in participants:
            role, pid = str(participant.role), int(participant.pid)
            heard = self._nodes.get(role)
            if heard is not None and (not pid or (heard.get("process") or {}).get("pid") == pid):
                continue
            named = [n for n in str(participant.node).split(", ") if n]
            if publishing is None and named:
                publishing = {info.node_namespace.rstrip("/") + "/" + info.node_name
                              for info in self.node.get_publishers_info_by_topic(topics.NODE_PARAMS)}
            if any(n in (publishing or ()) for n in named):  # one that has left the graph: not awaited
                due.append(role)
        return due

    def _params_grace_s(self) -> float:
        """How long Finish waits for parameters still due: _PARAMS_GRACE_S, or less when
        the clock master gives the Finish call less time than several of that."""
        limit_ms = ((self._nodes.get("clock_master") or {}).get("params") or {}).get("participant_timeout_ms")
        return min(_PARAMS_GRACE_S, 0.3 * limit_ms / 1000.0) if isinstance(limit_ms, int) else _PARAMS_GRACE_S

    def _poll_progress(self) -> None:
        """Wake the Finish wait now and then, also when no step completes (wall_deadline)."""
        if self._progress is not None and not self._progress.done():
            self._progress.set_result(False)

    async def _on_finish(self, request: Finish.Request, response: Finish.Response) -> Finish.Response:
        """Confirm the run once; a Finish sent again (its answer can be lost while
        discovery is still matching the service, see ClockMaster._call) gets the same
        answer, also while the first one still waits for late messages."""
        if self._finishing is not None:
            return cast("Finish.Response", await self._finishing)
        self._finishing = Future()
        answer = await self._finish(request, response)
        self._answered_at = time.monotonic()
        self._finishing.set_result(answer)
        return answer

    async def _finish(self, request: Finish.Request, response: Finish.Response) -> Finish.Response:
        expected = int(request.expected_steps)
        wall_deadline = time.monotonic() + self._values["finish_timeout_ms"] / 1000.0
        wall_info_deadline: float | None = None
        wall_params_deadline: float | None = None
        gone: str | None = None  # the bridge's process, once seen gone
        stalled_at = (0.0, -1)  # wall clock and steps done when the record last moved on
        while time.monotonic() < wall_deadline and self._failure is None:  # failed: nothing more comes
            if self.assembler.steps_done < expected:
                # a bridge killed between answering a step and drawing its frames never
                # sends them: Finish waited out finish_timeout_ms (10 s) for it. What it
                # sent before is still taken in (a backlog of steps): waited for while the
                # record moves on, and _LOST_WRITER_GRACE_S once it stops
                if stalled_at[1] != self.assembler.steps_done:
                    stalled_at = (time.monotonic(), self.assembler.steps_done)
                if gone is None and (gone := self._bridge_gone()) is not None:
                    self.node.get_logger().warning(
                        f"{gone}: the messages of step {self.assembler.steps_done} on are waited for while they "
                        f"come, {_LOST_WRITER_GRACE_S:g} s at most between steps, not "
                        f"{self._values['finish_timeout_ms']} ms")
                if gone is not None and time.monotonic() >= stalled_at[0] + _LOST_WRITER_GRACE_S:
                    break
            elif self._side_behind():
                # camera_info is not part of a step record, but the bag must hold every
                # one published with a recorded image: give the late ones a moment
                wall_info_deadline = wall_info_deadline or time.monotonic() + _INFO_GRACE_S
                if time.monotonic() >= wall_info_deadline:
                    break
            elif self._params_due(request.participants):
                wall_params_deadline = wall_params_deadline or time.monotonic() + self._params_grace_s()
                if time.monotonic() >= wall_params_deadline:
                    break
            else:
                break
            self._progress = Future()
            timer = steady_timer(self.node, 0.05, self._poll_progress)
            try:
                await self._progress
            finally:
                self.node.destroy_timer(timer)
        missing = self.assembler.missing(expected)
        status = request.status
        refusal = None
        if status.state != "counted":
            refusal = {"code": status.code, "step": int(status.step), "detail": status.detail}
        elif self._failure is not None:  # failed at the last step, before the clock master heard
            refusal = {"code": "participant_error", "step": self.assembler.steps_done,
                       "detail": f"recorder: {self._failure}"}
        elif missing:
            refusal = {"code": "incomplete_run", "step": self.assembler.steps_done, "detail": "; ".join(missing)}
        counted = refusal is None
        participants = {  # 0 and empty: not known (never answered, or did not say)
            str(p.role): {"node": str(p.node) or None, "pid": int(p.pid) or None, "host": str(p.host) or None,
                          "pid_watched": bool(p.pid_watched) if p.pid else None}
            for p in request.participants
        }
        waited = {"paced_ns": int(request.wall_paced_ns), "held_ns": int(request.wall_held_ns)}
        self._write(status.run_id or self._values["run_id"], counted, refusal, expected, participants, waited)
        response.counted = counted
        # what the manifest says: after a failed write, what steps.jsonl kept (_write)
        response.steps_recorded, response.chain_digest, response.frames_digest = self._kept or (
            self.assembler.steps_done, self.assembler.chain.hexdigest, self.assembler.frames_chain.hexdigest)
        response.detail = "" if counted else (refusal or {}).get("detail", "")
        if self._failure is not None:  # perhaps only now, writing the manifest
            response.counted = False
            response.detail = f"recorder: {self._failure}"
        return response

    def _write(self, run_id: str, counted: bool, refusal: dict[str, Any] | None, expected: int,
               participants: dict[str, dict[str, Any]] | None = None, waited: dict[str, int] | None = None) -> None:
        """The manifest; ``waited``: the wall time the clock master paced and held the loop."""
        if self._written:
            return
        self._written = True
        try:
            try:
                self._bag_order.release()
            finally:
                self._bag.close()
        except (BagError, OSError) as err:
            self._fail(err)
        # the bag first: on a full disk it takes what room there is; the reserve is for
        # the records still buffered and the manifest (record.reserve)
        self._reserve.release()
        try:
            self._steps_file.close()
        except OSError as err:
            self._fail(err)
        self._say_failure()
        last = self.assembler.last_record
        steps, chain = self.assembler.steps_done, self.assembler.chain.hexdigest
        frames = self.assembler.frames_chain.hexdigest if self.assembler.frames_chain.steps else None
        if self._failure is not None:
            # what steps.jsonl kept, which may be less than was chained: the manifest says
            # what the files hold (it said one step more on a full disk)
            kept = kept_chain(self.out_dir / "steps.jsonl")
            last, steps, chain, frames = kept.last, kept.steps, kept.chain_digest, kept.frames_digest
            self._kept = (steps, chain, frames or "")
        # a refused run's digests of what no chain holds count its recorded steps' messages
        # only: what came of the step it was refused at (frames sent after the bridge's
        # answer) reached this node before it closed in some repeats and not in others
        before = None if counted else (steps * int(last["timing"]["decision_us"]) * 1000 if last is not None else 0)
        manifest = build_manifest(
            run_id=run_id or self._values["run_id"],
            status="counted" if counted else "refused",
            refusal=refusal,
            expected_steps=expected,
            records=[last] if last is not None else [],
            steps=steps,
            chain_digest=chain,
            frames_digest=frames,
            nodes=self._nodes,
            storage=self._values["storage"],
            contacts=self._contacts,
            camera_info=self._info_digests.summary(before),
            image_headers=self._header_digests.summary(before),
            odometry=self._odom_digests.summary(before),
            transforms=self._tf_digests.summary(before),
            ground_truth=self._truth_digests.summary(before),
            participants=participants or {},
            wall={"start_ns": self._wall_start_ns,
                  "end_ns": time.time_ns() if self._wall_start_ns is not None else None,
                  # not known (a salvage: no clock master said them): null, as start and end
                  "step_ns": wall_summary(self._step_ns), **(waited or {"paced_ns": None, "held_ns": None})},
        )
        if before is not None:
            manifest[SIDE_BEFORE] = before
        if self._failure is not None:
            manifest["record_failure"] = self._failure
        if self._salvaged:  # rebuilt from a killed recorder's bag (record.salvage): rerun runs its steps
            manifest["salvaged"] = True
        try:
            write_json(self.out_dir / "manifest.json", manifest)
        except OSError as err:  # atomic: no manifest rather than half of one
            self._fail(err)

    def close(self, why: str = "", refusal: dict[str, Any] | None = None) -> None:
        """Keep what was recorded even when no Finish came (the clock master died): as
        incomplete_run, saying ``why`` it ended first if known, or as ``refusal`` (the
        single layout's, for a run stopped before its clock master ran)."""
        if not self._written:
            done = self.assembler.steps_done
            said = self._final_status
            if refusal is None and said is not None and said.state == "refused" and said.steps_done == done:
                # the clock master's refusal, which the bag holds too (verify compares the two):
                # a run refused before Finish was offered was kept incomplete_run beside it
                refusal = {"code": said.code, "step": said.step, "detail": said.detail}
            detail = STOPPED_FIRST + (f": {why}" if why else "")
            self._write(self._values["run_id"], False,
                        refusal or {"code": "incomplete_run", "step": done, "detail": detail}, done)


def _dir_id(path: Path) -> tuple[int, int] | None:
    """The directory's identity (device, inode), or None where it is no more."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def main(argv: list[str] | None = None) -> int:
    return run_participant(Recorder, NAME, argv if argv is not None else sys.argv)



if __name__ == "__main__":
    sys.exit(main())
