"""The sim bridge over real DDS: its answer names the step's frames (stamp and pose), the
images with exactly those stamps follow, drawn after the answer or before it; a frame that
fails to go out after an answer already sent refuses the next step, by name; a request
sent again gets the same answer and moves nothing twice."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image
from simforge_ros.srv import Step

from simforge_ros import topics
from simforge_ros.nodes.common import RECORD_QOS, close_nodes, make_executor
from simforge_ros.nodes.sim_bridge import SimBridge
from simforge_ros.runner import write_params_file

pytestmark = pytest.mark.ros

CAMERAS = ["front", "left"]
DECISION_US = 100_000


@pytest.fixture
def bridge_and_probe(ros_lease, tmp_path, request):
    params = tmp_path / "params.yaml"
    write_params_file(params, {"sim_bridge": {"cameras": CAMERAS, "width": 64, "height": 48}})
    context = rclpy.Context()
    rclpy.init(args=["--ros-args", "--params-file", str(params)], context=context, domain_id=ros_lease.domain_id)
    executor = make_executor(context)
    nodes = []
    try:
        bridge = SimBridge(context, frames_after_answer=request.param)
        probe = Node("bridge_probe", context=context)
        nodes = [bridge.node, probe]
        for node in nodes:
            executor.add_node(node)
        images: list[tuple[str, int]] = []

        def on_image(msg: Image) -> None:
            stamp = msg.header.stamp
            images.append((msg.header.frame_id, stamp.sec * 1_000_000 + stamp.nanosec // 1000))

        infos: dict[str, CameraInfo] = {}
        for camera in CAMERAS:
            probe.create_subscription(Image, topics.image_topic(camera), on_image, RECORD_QOS)
            probe.create_subscription(CameraInfo, topics.camera_info_topic(camera),
                                      lambda msg, c=camera: infos.setdefault(c, msg), RECORD_QOS)
        client = probe.create_client(Step, topics.STEP_SERVICE)

        def spin_for(seconds: float, until=lambda: False) -> bool:
            wall_deadline = time.monotonic() + seconds
            while time.monotonic() < wall_deadline and not until():
                executor.spin_once(timeout_sec=0.02)
            return until()

        def step(k: int, wait: bool = True) -> Any:
            """Step k's answer; with wait=False the future of it."""
            req = Step.Request()
            req.step, req.t_us, req.decision_us, req.seed, req.reset = k, k * DECISION_US, DECISION_US, 0, k == 0
            future = client.call_async(req)
            if not wait:
                return future
            # sent again while unanswered, as the clock master does: an answer can be lost
            # while discovery is still matching the service; a repeated request gets the same
            sent = [future]
            wall_deadline = time.monotonic() + 10.0
            while not spin_for(2.0, lambda: any(f.done() for f in sent)):
                assert time.monotonic() < wall_deadline, f"no answer to step {k}"
                sent.append(client.call_async(req))
            return next(f for f in sent if f.done()).result()

        assert spin_for(10.0, lambda: client.service_is_ready()
                        and all(probe.count_publishers(topics.image_topic(c)) for c in CAMERAS))
        yield bridge, step, images, spin_for, infos
    finally:
        close_nodes(executor, nodes)
        rclpy.shutdown(context=context)


@pytest.mark.parametrize("bridge_and_probe", [True, False], ids=["after", "before"], indirect=True)
def test_the_images_named_in_each_answer_arrive_with_exactly_those_stamps(bridge_and_probe):
    _bridge, step, images, spin_for = bridge_and_probe[:4]
    named = []
    for k in range(3):
        answer = step(k)
        assert answer.ok, answer.detail
        assert [f.camera for f in answer.frames] == CAMERAS
        assert all(f.t_us == k * DECISION_US for f in answer.frames)
        named += [(f.camera, f.t_us) for f in answer.frames]
    assert spin_for(5.0, lambda: len(images) >= len(named))
    assert sorted(images) == sorted(named)


@pytest.mark.parametrize("bridge_and_probe", [True], ids=["after"], indirect=True)
def test_camera_info_is_the_pinhole_each_camera_is_drawn_with(bridge_and_probe):
    """front has a 90 degree field of view, left 100: at 64x48, focal lengths of 32 and
    32 / tan(50 degrees) pixels, the principal point at pixel (31.5, 23.5), pixel centres
    being whole numbers (the engine's test holds these to the renderer's own rays). The
    bridge used to say 90 degrees and (32, 24) for every camera."""
    _bridge, step, _images, spin_for, infos = bridge_and_probe
    assert step(0).ok
    assert spin_for(5.0, lambda: len(infos) == len(CAMERAS))
    for camera, fx in (("front", 32.0), ("left", 32.0 / math.tan(math.radians(50.0)))):
        info = infos[camera]
        assert (info.width, info.height, info.header.frame_id) == (64, 48, camera)
        assert list(info.k) == pytest.approx([fx, 0.0, 31.5, 0.0, fx, 23.5, 0.0, 0.0, 1.0], abs=1e-12)
        assert list(info.p) == pytest.approx([fx, 0.0, 31.5, 0.0, 0.0, fx, 23.5, 0.0, 0.0, 0.0, 1.0, 0.0], abs=1e-12)
        assert info.distortion_model == "plumb_bob" and list(info.d) == [0.0] * 5


@pytest.mark.parametrize("bridge_and_probe", [True], ids=["after"], indirect=True)
def test_frames_that_fail_after_the_answer_refuse_the_next_step(bridge_and_probe, monkeypatch):
    bridge, step, images, spin_for = bridge_and_probe[:4]

    def broken(frame):
        raise RuntimeError(f"cannot publish {frame.stamp.camera}")

    monkeypatch.setattr(bridge, "_publish_frame", broken)
    assert step(0).ok  # the answer went out before the frames were drawn
    spin_for(0.5)
    refused = step(1)
    assert not refused.ok and refused.refusal_code == "participant_error"
    assert "the frames of step 0 failed after its answer: RuntimeError: cannot publish front" in refused.detail
    assert images == []


@pytest.mark.parametrize("bridge_and_probe", [True, False], ids=["after", "before"], indirect=True)
def test_a_step_sent_again_gets_the_same_answer_and_moves_the_world_once(bridge_and_probe):
    """The clock master sends step 0 again when no answer came (ClockMaster._call): the
    bridge may have served the first request already."""
    _bridge, step, images, spin_for = bridge_and_probe[:4]
    first, again = step(0, wait=False), step(0, wait=False)
    assert spin_for(10.0, lambda: first.done() and again.done())
    assert first.result().ok and again.result().ok
    assert again.result().world_digest == first.result().world_digest
    one = step(1)
    unwanted = step(1, wait=False)
    unwanted.cancel()  # its answer comes for a request nobody waits on any more
    repeat = step(1)
    # served twice, step 1 would be refused: "step 1 requested after step 1"
    assert repeat.ok, repeat.detail
    assert (repeat.engine_t_us, repeat.world_digest, repeat.state.pose.x_m) == (
        one.engine_t_us, one.world_digest, one.state.pose.x_m)
    two = step(2)
    assert two.ok and two.engine_t_us == 2 * DECISION_US, two.detail
    named = [(f.camera, f.t_us) for answer in (first.result(), one, two) for f in answer.frames]
    assert spin_for(5.0, lambda: len(images) >= len(named))
    spin_for(0.3)  # a frame published twice would arrive by now
    assert sorted(images) == sorted(named)


@pytest.mark.parametrize("bridge_and_probe", [False], ids=["before"], indirect=True)
def test_a_cameras_first_frame_waits_for_its_readers_but_not_for_one_that_cannot_match(bridge_and_probe,
                                                                                       monkeypatch):
    """A reliable writer sends a volatile sample only to readers it has matched when it
    writes: the first frame waits until every reader the graph shows has matched. A reader
    that never can (it asks for transient-local, the writer offers volatile) is named and
    not waited for: waited FIRST_MATCH_WAIT_S on each topic in turn, a stack's listener on
    six topics made a torch run's driver give up on step 0's front frame."""
    from rclpy.duration import Duration
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    from simforge_ros.nodes import sim_bridge

    monkeypatch.setattr(sim_bridge, "FIRST_MATCH_WAIT_S", 20.0)  # a wait for it would show
    monkeypatch.setattr(sim_bridge, "DRIVER_SEEN_WAIT_S", 0.0)  # no driver here
    bridge, step, images, spin_for = bridge_and_probe[:4]
    never = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL)
    stubborn = bridge.node.create_subscription(Image, topics.image_topic("left"), lambda _msg: None, never)
    # a deadline the writer does not offer (it offers none) cannot match either
    strict = bridge.node.create_subscription(Image, topics.image_topic("front"), lambda _msg: None,
                                             QoSProfile(depth=1, deadline=Duration(seconds=0.5)))
    assert spin_for(5.0, lambda: bridge.node.count_subscribers(topics.image_topic("left")) == 2
                    and bridge.node.count_subscribers(topics.image_topic("front")) == 2)
    started = time.monotonic()
    assert step(0).ok
    first = time.monotonic() - started
    assert first < 10.0  # not waited for
    # those only: the probe's readers (the recorder's QoS) can match, and are waited for
    assert bridge._unmatchable_said == {(topics.image_topic(c), "/", bridge.node.get_name()) for c in ("left", "front")}
    assert step(1).ok
    assert spin_for(5.0, lambda: len(images) >= 4)
    assert sorted(images) == [("front", 0), ("front", DECISION_US), ("left", 0), ("left", DECISION_US)]
    bridge.node.destroy_subscription(stubborn)
    bridge.node.destroy_subscription(strict)


@pytest.mark.parametrize("bridge_and_probe", [False], ids=["before"], indirect=True)
def test_a_wanted_reader_never_seen_is_waited_for_from_the_first_wait_of_all(bridge_and_probe, monkeypatch):
    """--wait-for-reader: the bridge's wait for a stack's reader (WANTED_WAIT_S, 4 s) counts
    from its first wait, the one for the driver's Decide reader (DRIVER_SEEN_WAIT_S)
    included. Counted after it, the two made 7.5 s, past the torch driver's 5 s wait for
    step 0's frames."""
    from simforge_ros.nodes import sim_bridge

    monkeypatch.setattr(sim_bridge, "DRIVER_SEEN_WAIT_S", 3.0)  # no driver here: waited out
    monkeypatch.setattr(sim_bridge, "foreign_readers", lambda _node, _topic: [])  # no stack's reader ever
    bridge, step = bridge_and_probe[:2]
    bridge._wanted_readers = frozenset({topics.image_topic("front")})
    started = time.monotonic()
    assert step(0).ok  # drawn and published before the answer: the waits are in it
    took = time.monotonic() - started
    # about 4 s; 7 s when counted after the driver's wait
    assert sim_bridge.WANTED_WAIT_S - 0.1 <= took < sim_bridge.WANTED_WAIT_S + 2.0, took


@pytest.mark.parametrize("bridge_and_probe", [False], ids=["before"], indirect=True)
def test_step_0s_waits_for_readers_end_together_whatever_the_number_of_topics(bridge_and_probe, monkeypatch):
    """Each topic's first message waits (FIRST_MATCH_WAIT_S) for the readers the graph
    shows; at step 0 all of those waits end by FIRST_MESSAGES_WAIT_S from the first, the
    allowance the torch driver adds to its wait for step 0's frames. Counted a topic at a
    time, they added up: here 5 s for two cameras, past that allowance."""
    from simforge_ros.nodes import sim_bridge

    monkeypatch.setattr(sim_bridge, "DRIVER_SEEN_WAIT_S", 0.0)  # no driver here
    monkeypatch.setattr(sim_bridge, "FIRST_MATCH_WAIT_S", 2.5)
    monkeypatch.setattr(sim_bridge, "FIRST_MESSAGES_WAIT_S", 3.0)
    monkeypatch.setattr(sim_bridge, "matchable_readers", lambda *_args: 99)  # a reader that never matches
    step = bridge_and_probe[1]
    started = time.monotonic()
    assert step(0).ok  # drawn and published before the answer: the waits are in it
    took = time.monotonic() - started
    # 3 s: the first camera waits 2.5 s, the second the 0.5 s left; 5 s a topic at a time
    assert 2.9 <= took < 4.2, took
    started = time.monotonic()
    assert step(1).ok
    assert time.monotonic() - started < 2.0  # each topic waits once, at its first message
