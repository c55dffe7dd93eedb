"""Start-up order over real DDS: the recorder offers Finish (the clock master's signal to
start stepping) only once its readers of the clock master's per-step topics have matched
a writer and the clock master's and the bridge's parameters have reached it; a service
that is visible proves nothing about the topics or the data path."""

from __future__ import annotations

import time
from contextlib import contextmanager

import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from simforge_ros.msg import DriverAction, StepTiming, VehicleState
from simforge_ros.srv import Finish

from simforge_ros import topics
from simforge_ros.nodes.common import RECORD_QOS, close_nodes, make_executor, publish_node_params
from simforge_ros.nodes.recorder import Recorder
from simforge_ros.runner import write_params_file

pytestmark = pytest.mark.ros

WRITERS = ((Clock, topics.CLOCK), (StepTiming, topics.TIMING), (DriverAction, topics.ACTION),
           (DriverAction, topics.APPLIED), (VehicleState, topics.STATE))


@contextmanager
def _shell_and_probe(ros_lease, tmp_path, node_params, make_shell, probe_name):
    """A node shell and a probe node on one executor in a fresh context; yields the shell,
    the probe and spin_for(seconds, until)."""
    params = tmp_path / "params.yaml"
    write_params_file(params, node_params)
    context = rclpy.Context()
    rclpy.init(args=["--ros-args", "--params-file", str(params)], context=context, domain_id=ros_lease.domain_id)
    executor = make_executor(context)
    nodes = []
    try:
        shell = make_shell(context)
        probe = Node(probe_name, context=context)
        nodes = [shell.node, probe]
        for node in nodes:
            executor.add_node(node)

        def spin_for(seconds: float, until=lambda: False) -> None:
            wall_deadline = time.monotonic() + seconds
            while time.monotonic() < wall_deadline and not until():
                executor.spin_once(timeout_sec=0.02)

        yield shell, probe, spin_for
    finally:
        close_nodes(executor, nodes)
        rclpy.shutdown(context=context)


@pytest.mark.parametrize("last", ["state writer", "bridge parameters", "driver parameters"])
def test_recorder_offers_finish_only_once_it_hears_from_every_writer(ros_lease, tmp_path, last):
    """The driver's parameters are awaited too (recorder.await_driver, true unless the
    driver is external): a short run could end before they came."""
    node_params = {"recorder": {"out_dir": str(tmp_path / "run")}}
    with _shell_and_probe(ros_lease, tmp_path, node_params, Recorder, "startup_probe") as (recorder, probe, spin_for):
        finish = probe.create_client(Finish, topics.FINISH_SERVICE)
        writers = [probe.create_publisher(cls, topic, RECORD_QOS) for cls, topic in WRITERS[:-1]]
        latched = [publish_node_params(probe, "clock_master", {})]
        missing = {"bridge parameters": "sim_bridge", "driver parameters": "driver"}.get(last)
        latched += [publish_node_params(probe, node, {}) for node in ("sim_bridge", "driver") if node != missing]
        if last != "state writer":
            writers.append(probe.create_publisher(*WRITERS[-1], RECORD_QOS))
        spin_for(1.0)
        assert not recorder.offering and not finish.service_is_ready()  # one thing still missing

        if last == "state writer":
            writers.append(probe.create_publisher(*WRITERS[-1], RECORD_QOS))
        else:
            latched.append(publish_node_params(probe, missing, {}))
        spin_for(10.0, lambda: recorder.offering and finish.service_is_ready())
        assert recorder.offering and finish.service_is_ready()
        assert all(w.get_subscription_count() >= 1 for w in writers)
        recorder.close()


def test_the_clock_master_writes_exactly_the_step_topics_the_recorder_waits_for(ros_lease):
    from simforge_ros.nodes.clock_master import ClockMaster

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_lease.domain_id)
    clock = None
    try:
        clock = ClockMaster(context)
        assert tuple(p.topic_name for p in clock._record_publishers()) == topics.STEP_TOPICS
    finally:
        if clock is not None:
            clock.node.destroy_node()
        rclpy.shutdown(context=context)


@pytest.mark.parametrize("last", ["image writer", "bridge parameters"])
def test_a_camera_driver_offers_decide_only_once_the_bridge_s_image_writers_matched(ros_lease, tmp_path, last):
    """Frames published before the driver's readers matched would never reach it (it would
    wait, then refuse missing_frame): the bridge's parameters name its cameras, and Decide
    appears only once a writer of each has matched."""
    from sensor_msgs.msg import Image
    from simforge_ros.srv import Decide

    from simforge_ros.nodes.driver import Driver

    node_params = {"driver": {"policy": "torch"}}
    with _shell_and_probe(ros_lease, tmp_path, node_params, Driver, "bridge_stand_in") as (driver, probe, spin_for):
        decide = probe.create_client(Decide, topics.DECIDE_SERVICE)
        writers = [probe.create_publisher(Image, topics.image_topic("front"), RECORD_QOS)]
        latched = []
        if last == "image writer":
            latched.append(publish_node_params(probe, "sim_bridge", {"cameras": ["front", "left"]}))
        else:
            writers.append(probe.create_publisher(Image, topics.image_topic("left"), RECORD_QOS))
        spin_for(1.0)
        assert not driver.offering and not decide.service_is_ready()  # one thing still missing

        if last == "image writer":
            writers.append(probe.create_publisher(Image, topics.image_topic("left"), RECORD_QOS))
        else:
            latched.append(publish_node_params(probe, "sim_bridge", {"cameras": ["front", "left"]}))
        spin_for(10.0, lambda: driver.offering and decide.service_is_ready())
        assert driver.offering and decide.service_is_ready()
        assert all(w.get_subscription_count() >= 1 for w in writers)


def test_a_driver_without_cameras_offers_decide_at_once(ros_lease):
    from simforge_ros.nodes.driver import Driver

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_lease.domain_id)
    driver = None
    try:
        driver = Driver(context)
        assert driver.offering and driver.node.count_subscribers(topics.image_topic("front")) == 0
    finally:
        if driver is not None:
            driver.node.destroy_node()
        rclpy.shutdown(context=context)


def test_step_0s_frames_are_waited_for_with_discovery_s_allowance_later_ones_without(ros_lease, tmp_path,
                                                                                   monkeypatch):
    """The bridge may hold step 0's first messages back while discovery settles (up to
    params.FIRST_MESSAGES_WAIT_MS); the torch driver adds that to its frame_timeout_ms at
    step 0 only. Without it, a short limit (one meant for the frames drawn later on) could
    refuse step 0 as missing_frame whenever discovery was slow."""
    import numpy as np
    from sensor_msgs.msg import Image
    from simforge_ros.msg import FrameInfo
    from simforge_ros.srv import Decide

    from simforge_ros.image_codec import numpy_to_imgmsg
    from simforge_ros.nodes import driver as driver_module
    from simforge_ros.nodes.driver import Driver

    monkeypatch.setattr(driver_module, "FIRST_MESSAGES_WAIT_MS", 4_000)  # the allowance, at most
    node_params = {"driver": {"policy": "torch", "cameras": ["front"], "frame_timeout_ms": 300}}
    with _shell_and_probe(ros_lease, tmp_path, node_params, Driver, "bridge_stand_in") as (driver, probe, spin_for):
        decide = probe.create_client(Decide, topics.DECIDE_SERVICE)
        writer = probe.create_publisher(Image, topics.image_topic("front"), RECORD_QOS)
        latched = publish_node_params(probe, "sim_bridge", {"cameras": ["front"], "width": 64, "height": 48})
        spin_for(10.0, lambda: driver.offering and decide.service_is_ready())
        assert decide.service_is_ready() and latched is not None

        def request(step: int) -> Decide.Request:
            req = Decide.Request()
            req.step, req.t_us, req.decision_us, req.seed = step, step * 100_000, 100_000, 0
            req.frames = [FrameInfo(camera="front", t_us=req.t_us)] if step % 5 == 0 else []
            return req

        def publish_frame(t_us: int) -> None:
            image = numpy_to_imgmsg(np.zeros((48, 64, 3), np.uint8), "rgb8")
            image.header.stamp.sec, image.header.stamp.nanosec = t_us // 1_000_000, (t_us % 1_000_000) * 1000
            image.header.frame_id = "front"
            writer.publish(image)

        # step 0's frame comes 1.2 s after the request: past frame_timeout_ms, within the allowance
        first = decide.call_async(request(0))
        spin_for(1.2, first.done)
        assert not first.done()
        publish_frame(0)
        spin_for(10.0, first.done)
        assert first.done() and first.result().ok, first.result().detail
        for step in range(1, 5):  # the planner plans every 5 steps: no frame named between
            answer = decide.call_async(request(step))
            spin_for(10.0, answer.done)
            assert answer.done() and answer.result().ok, answer.result().detail
        # a later frame that never comes: refused after frame_timeout_ms alone
        late = decide.call_async(request(5))
        spin_for(2.0, late.done)
        assert late.done(), "step 5 waited past frame_timeout_ms + 1.7 s: the allowance is for step 0 only"
        assert late.result().refusal_code == "missing_frame"
        assert "within 0.3 s (driver.frame_timeout_ms)" in late.result().detail, late.result().detail
