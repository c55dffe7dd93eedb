"""The bridge's frames for tf2: base_frame -> each rendered camera's frame on /tf_static,
once and latched (sim_bridge.camera_tf, on by default), and map_frame -> base_frame on /tf
once a step at its exact sim time (sim_bridge.tf, off by default). Both are recorded in
the bag (never chained), counted and digested in the manifest, and held to the bag by
verify; /tf_static is recorded latched, so a replay gives it to a reader that comes late."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from runs import lockstep, manifest_of, steps_of, wait_for_nodes

from simforge_ros import topics
from simforge_ros.core.values import CameraExtrinsics, Pose2D, VehicleState
from simforge_ros.engine import CAMERAS, extrinsics
from simforge_ros.nodes.convert import camera_transforms_msg, ego_transform_msg
from simforge_ros.record.bag import read_bag
from simforge_ros.record.play import latched_topics
from simforge_ros.record.verify import verify_run

pytestmark = pytest.mark.ros


def test_ego_transform_msg_is_the_rear_axles_pose_at_the_states_time():
    state = VehicleState(step=7, t_us=700_001, pose=Pose2D(3.5, -2.25, 2.5), speed_mps=4.0, steer_rad=0.1,
                         accel_mps2=0.5)
    [t] = ego_transform_msg(state, "world", "ego").transforms
    assert (t.header.stamp.sec, t.header.stamp.nanosec) == (0, 700_001_000)
    assert (t.header.frame_id, t.child_frame_id) == ("world", "ego")
    v, q = t.transform.translation, t.transform.rotation
    assert (v.x, v.y, v.z) == (3.5, -2.25, 0.0)
    assert (q.x, q.y) == (0.0, 0.0) and 2 * math.atan2(q.z, q.w) == pytest.approx(2.5)


def test_camera_transforms_msg_places_each_camera_from_the_base_frame():
    e = CameraExtrinsics(1.0, -0.5, 1.5, 0.1, 0.2, 0.3, 0.9)
    msg = camera_transforms_msg({"front": e, "rear": extrinsics(CAMERAS["rear"])}, "ego")
    assert [(t.header.frame_id, t.child_frame_id) for t in msg.transforms] == [("ego", "front"), ("ego", "rear")]
    first = msg.transforms[0]
    assert (first.header.stamp.sec, first.header.stamp.nanosec) == (0, 0)  # the run's origin
    v, q = first.transform.translation, first.transform.rotation
    assert (v.x, v.y, v.z, q.x, q.y, q.z, q.w) == (1.0, -0.5, 1.5, 0.1, 0.2, 0.3, 0.9)


@pytest.mark.parametrize("layout", ["processes", "single"])
def test_a_run_with_tf_records_the_ego_each_step_and_the_cameras_once(tmp_path, layout):
    cameras = ["front", "left"]
    run = lockstep(tmp_path, steps=20, layout=layout,
                   sets={"sim_bridge": {"tf": True, "cameras": cameras, "base_frame": "ego", "map_frame": "world"}})
    plain = lockstep(tmp_path, steps=20, layout=layout,
                     sets={"sim_bridge": {"camera_tf": False, "cameras": cameras}})
    assert run.status == plain.status == "counted", (run.refusal, plain.refusal)
    assert (run.chain_digest, run.frames_digest) == (plain.chain_digest, plain.frames_digest)  # in no chain
    bag = Path(run.run_dir) / "bag"
    items = list(read_bag(bag))
    states = {s["state"]["t_us"]: s["state"] for s in steps_of(run)}
    tf = [item for item in items if item.topic == topics.TF]
    assert [item.t_ns for item in tf] == [k * 100_000_000 for k in range(20)]
    for item in tf:
        [t] = item.msg.transforms
        state = states[item.t_ns // 1000]
        stamp_ns = t.header.stamp.sec * 1_000_000_000 + t.header.stamp.nanosec
        assert stamp_ns == item.t_ns and (t.header.frame_id, t.child_frame_id) == ("world", "ego")
        v, q = t.transform.translation, t.transform.rotation
        assert (v.x, v.y, v.z) == (state["pose"]["x_m"], state["pose"]["y_m"], 0.0)
        assert 2 * math.atan2(q.z, q.w) == pytest.approx(state["pose"]["yaw_rad"])
    [static] = [item for item in items if item.topic == topics.TF_STATIC]
    placed = {t.child_frame_id: t for t in static.msg.transforms}
    assert list(placed) == cameras  # the rendered ones: what images name as frame_id
    for camera, t in placed.items():
        e = extrinsics(CAMERAS[camera])
        v, q = t.transform.translation, t.transform.rotation
        assert t.header.frame_id == "ego"
        assert (v.x, v.y, v.z, q.x, q.y, q.z, q.w) == (e.x_m, e.y_m, e.z_m, e.qx, e.qy, e.qz, e.qw)
    frame_ids = {item.msg.header.frame_id for item in items if item.topic.endswith("/image_raw")}
    assert frame_ids == set(cameras)
    transforms = manifest_of(run)["transforms"]
    assert {k: v["messages"] for k, v in transforms.items()} == {topics.TF: 20, topics.TF_STATIC: 1}
    assert manifest_of(plain)["transforms"] == {}
    assert not [item for item in read_bag(Path(plain.run_dir) / "bag") if item.topic in (topics.TF, topics.TF_STATIC)]
    assert topics.TF_STATIC in latched_topics(bag) and topics.TF not in latched_topics(bag)
    assert verify_run(Path(run.run_dir)).ok


def test_by_default_the_cameras_are_placed_and_the_ego_is_not(tmp_path):
    """camera_tf is on and tf off by default; with no camera rendered there is nothing to
    place, and the run counts without one."""
    run = lockstep(tmp_path, steps=5, layout="single")
    bare = lockstep(tmp_path, steps=5, layout="single", sets={"sim_bridge": {"cameras": []}})
    assert run.status == bare.status == "counted"
    assert {k: v["messages"] for k, v in manifest_of(run)["transforms"].items()} == {topics.TF_STATIC: 1}
    assert manifest_of(bare)["transforms"] == {}


def test_verify_names_a_transform_message_the_bag_does_not_hold(tmp_path):
    run = lockstep(tmp_path, steps=8, layout="single", sets={"sim_bridge": {"tf": True}})
    path = Path(run.run_dir) / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["transforms"][topics.TF]["messages"] += 1
    path.write_text(json.dumps(manifest))
    result = verify_run(Path(run.run_dir))
    assert not result.ok and result.first_mismatch["field"] == "manifest.transforms"
    assert result.detail.endswith("topic /tf: the manifest counts 9 transform messages, the bag holds 8")


def test_the_generated_tfmessage_is_the_upstream_type():
    """tf2_msgs has no wheel: make setup generates TFMessage with rosidl
    (tools/build_tf2_msgs.py). Its RIHS01 type hash, which ROS 2 endpoints compare when they
    match, is the one rosbags holds for Kilted's own tf2_msgs, so a real install's tf2
    tools and this venv's nodes talk and read each other's bags."""
    import sys

    from rosbags.typesys import Stores, get_typestore

    share = Path(sys.prefix) / "share" / "tf2_msgs"  # where the venv's ROS packages are
    hashes = json.loads((share / "msg" / "TFMessage.json").read_text())["type_hashes"]
    generated = {h["type_name"]: h["hash_string"] for h in hashes}
    store = get_typestore(Stores.ROS2_KILTED)
    assert generated["tf2_msgs/msg/TFMessage"] == store.hash_rihs01("tf2_msgs/msg/TFMessage")
    assert generated["geometry_msgs/msg/TransformStamped"] == store.hash_rihs01("geometry_msgs/msg/TransformStamped")


@pytest.mark.parametrize("layout", ["processes", "single"])
def test_another_nodes_tf_in_the_runs_domain_is_left_out(tmp_path, monkeypatch, capfd, layout):
    """/tf and /tf_static are every tf2 node's: a user's stack in the run's domain publishes
    there too, stamped with its own clock. Only the bridge's messages are recorded: the bag
    and manifest are those of a run without that stack, and every message is logged at sim
    time. The run is paced at real time (6 s, which no digest sees) so that discovery has
    matched the stack's writers to the recorder: in a fast 20-step `processes` run it did so
    in 1 of 5 tries; the warning in the logs shows it did."""
    import subprocess
    import sys

    from simforge_ros.isolation import lease_domain

    script = Path(__file__).with_name("foreign_tf.py")
    sets = {"sim_bridge": {"tf": True, "cameras": ["front"]}}
    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        stack = subprocess.Popen([sys.executable, str(script), "--seconds", "60"], env=dict(lease.env))
        try:
            wait_for_nodes(lease.domain_id, "users_stack", proc=stack)
            time.sleep(0.5)  # its /tf_static is out, latched (published right after its node is made)
            run = lockstep(tmp_path, steps=60, layout=layout, sets={**sets, "clock_master": {"real_time_factor": 1.0}})
            assert stack.poll() is None, "the user's stack should still be running"
        finally:
            stack.kill()
            stack.wait()
    alone = lockstep(tmp_path, steps=60, layout=layout, sets=sets)
    assert run.status == alone.status == "counted"
    items = list(read_bag(Path(run.run_dir) / "bag"))
    frames = {(t.header.frame_id, t.child_frame_id)
              for item in items if item.topic in (topics.TF, topics.TF_STATIC) for t in item.msg.transforms}
    assert frames == {("map", "base_link"), ("base_link", "front")}
    assert max(item.t_ns for item in items) == 59 * 100_000_000  # nothing logged at a wall-clock stamp
    assert manifest_of(run)["transforms"] == manifest_of(alone)["transforms"]
    # the recorder's warnings: in its log (processes), or on this process's stderr (single)
    said = capfd.readouterr().err + "".join(
        p.read_text(errors="replace") for p in (Path(run.run_dir) / "logs").iterdir() if p.is_file())
    for topic in (topics.TF, topics.TF_STATIC):  # the stack's messages came, and were left out
        assert f"{topic}: a message with other transforms than the bridge's" in said
    assert verify_run(Path(run.run_dir)).ok
