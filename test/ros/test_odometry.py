"""sim_bridge.odometry: the ego state as nav_msgs/Odometry on /simforge/odom, once a step,
stamped with its exact sim time, recorded in the bag (never chained: /simforge/state is),
its count and digest kept in the manifest and held to the bag by verify."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from runs import lockstep, manifest_of, simforge, steps_of

from simforge_ros import topics
from simforge_ros.backends.embedded import EmbeddedBackend
from simforge_ros.core.values import Pose2D, VehicleState
from simforge_ros.nodes.convert import odometry_msg
from simforge_ros.record.bag import read_bag
from simforge_ros.record.verify import verify_run

pytestmark = pytest.mark.ros


def test_odometry_msg_is_the_state_in_the_standard_type():
    state = VehicleState(step=7, t_us=700_001, pose=Pose2D(3.5, -2.25, 2.5), speed_mps=4.0, steer_rad=0.1,
                         accel_mps2=0.5)
    msg = odometry_msg(state, 0.125, "world", "ego")
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (0, 700_001_000)
    assert (msg.header.frame_id, msg.child_frame_id) == ("world", "ego")
    p, q = msg.pose.pose.position, msg.pose.pose.orientation
    assert (p.x, p.y, p.z) == (3.5, -2.25, 0.0)
    assert (q.x, q.y) == (0.0, 0.0) and math.atan2(2 * q.w * q.z, 1 - 2 * q.z * q.z) == pytest.approx(2.5)
    assert q.z == pytest.approx(math.sin(1.25)) and q.w == pytest.approx(math.cos(1.25))
    t = msg.twist.twist
    assert (t.linear.x, t.linear.y, t.linear.z, t.angular.x, t.angular.y, t.angular.z) == (4.0, 0, 0, 0, 0, 0.125)
    assert set(msg.pose.covariance) == {0.0} and set(msg.twist.covariance) == {0.0}


def test_the_backends_yaw_rate_is_how_fast_the_ego_turns():
    backend = EmbeddedBackend("right_turn", 10_000)
    backend.load(0)
    backend.advance(0.0, 2.0, 200)  # 2 s of speeding up straight
    assert backend.yaw_rate_radps() == 0.0
    for _ in range(100):
        backend.advance(0.3, 0.0, 1)  # steering towards 0.3 rad at the steering-rate limit
    rate = backend.yaw_rate_radps()
    before = backend.state(0).pose.yaw_rad
    backend.advance(0.3, 0.0, 1)
    turned = (backend.state(0).pose.yaw_rad - before) / 0.01
    assert rate > 0.1 and turned == pytest.approx(rate, rel=0.02)


@pytest.mark.parametrize("layout", ["processes", "single"])
def test_a_run_with_odometry_records_one_per_step_that_is_its_state(tmp_path, layout):
    run = lockstep(tmp_path, steps=25, layout=layout, sets={"sim_bridge": {"odometry": True, "base_frame": "ego"}})
    plain = lockstep(tmp_path, steps=25, layout=layout)
    assert run.status == plain.status == "counted"
    assert run.chain_digest == plain.chain_digest  # odometry is in no chain
    states = {s["state"]["t_us"]: s["state"] for s in steps_of(run)}
    odom = [item for item in read_bag(Path(run.run_dir) / "bag") if item.topic == topics.ODOM]
    assert [o.t_ns for o in odom] == [k * 100_000_000 for k in range(25)]
    for item in odom:
        msg = item.msg
        state = states[item.t_ns // 1000]
        assert (msg.header.frame_id, msg.child_frame_id) == ("map", "ego")
        assert (msg.pose.pose.position.x, msg.pose.pose.position.y) == (state["pose"]["x_m"], state["pose"]["y_m"])
        assert msg.twist.twist.linear.x == state["speed_mps"]
        assert 2 * math.atan2(msg.pose.pose.orientation.z, msg.pose.pose.orientation.w) == pytest.approx(
            state["pose"]["yaw_rad"])
    assert manifest_of(run)["odometry"]["ego"]["messages"] == 25
    assert manifest_of(plain)["odometry"] == {}
    assert not [item for item in read_bag(Path(plain.run_dir) / "bag") if item.topic == topics.ODOM]
    assert verify_run(Path(run.run_dir)).ok


def test_verify_names_an_odometry_message_missing_from_the_bag(tmp_path):
    """The manifest's count is held to the bag: a manifest that counts one more (as a bag
    that lost one would show) is named."""
    run = lockstep(tmp_path, steps=10, layout="single", sets={"sim_bridge": {"odometry": True}})
    path = Path(run.run_dir) / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["odometry"]["ego"]["messages"] += 1
    path.write_text(json.dumps(manifest))
    result = verify_run(Path(run.run_dir))
    assert not result.ok and result.first_mismatch["field"] == "manifest.odometry"
    assert result.detail.endswith("vehicle ego: the manifest counts 11 odometry messages, the bag holds 10")


def test_a_frame_name_tf2_would_refuse_is_a_config_error(tmp_path):
    out = simforge("run", "right_turn", "--steps", "2", "--set", "sim_bridge.base_frame=/base_link",
                   "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert out.returncode == 2
    assert "sim_bridge.base_frame: expected a tf2 frame name (not empty, no leading '/', no spaces), " \
           "got '/base_link'" in out.stderr
