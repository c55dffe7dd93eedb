"""Saved driver inputs from a recorded run: the frames and state of one step, read back
from the run's bag, for replaying a model on identical inputs (`simforge probe-driver
--inputs RUN`)."""

from __future__ import annotations

from pathlib import Path

from simforge_ros import topics
from simforge_ros.core.values import Pose2D, VehicleState
from simforge_ros.drivers.policy import Observation
from simforge_ros.image_codec import imgmsg_to_numpy
from simforge_ros.record.bag import BagError, read_bag
from simforge_ros.record.rundir import load_run

_PREFIX = "/simforge/camera/"


def observations_from_run(run_dir: Path, max_count: int = 1) -> list[Observation]:
    """The observations of the first ``max_count`` steps whose timing record names frames.

    Raises:
        RunDirError: not a run directory, or its manifest or steps.jsonl is broken (named as
            every tool names them; the bag alone was read, so a missing directory was said to
            be "not a rosbag2 directory" and a truncated manifest went unnoticed).
        BagError: the run has no bag, or no step with camera frames.
    """
    run = load_run(Path(run_dir))
    images: dict[tuple[str, int], object] = {}
    states: dict[int, VehicleState] = {}
    timings = []
    for item in read_bag(run.bag_path):
        if item.topic.startswith(_PREFIX) and item.topic.endswith("/image_raw"):
            camera = item.topic[len(_PREFIX):-len("/image_raw")]
            images[(camera, item.t_ns // 1000)] = item.msg
        elif item.topic == topics.STATE:
            m = item.msg
            states[int(m.step)] = VehicleState(
                int(m.step), int(m.t_us), Pose2D(m.pose.x_m, m.pose.y_m, m.pose.yaw_rad),
                m.speed_mps, m.steer_rad, m.accel_mps2,
            )
        elif item.topic == topics.TIMING:
            timings.append(item.msg)
    out: list[Observation] = []
    for timing in timings:
        names = [(f.camera, int(f.t_us)) for f in timing.frames]
        if not names or int(timing.step) not in states or any(n not in images for n in names):
            continue
        frames = {camera: imgmsg_to_numpy(images[(camera, t_us)]) for camera, t_us in names}
        out.append(Observation(int(timing.step), int(timing.t_us), int(timing.decision_us),
                               states[int(timing.step)], frames))
        if len(out) >= max_count:
            break
    if not out:
        raise BagError(f"{run_dir}: no recorded step has camera frames to replay")
    return out
