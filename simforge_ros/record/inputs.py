"""Saved driver inputs from a recorded run: the frames and state of one step, read back
from the run's bag, for replaying a model on identical inputs (`simforge probe-driver
--inputs RUN`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

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
    # The timing records first, then only the images and states of the chosen steps: a
    # long run's bag holds gigabytes of frames, and the probe wants one step's.
    chosen = []
    for item in read_bag(run.bag_path, topics=(topics.TIMING,)):
        if item.msg.frames:
            chosen.append(item.msg)
            if len(chosen) >= max_count:
                break
    stamps = [int(f.t_us) for timing in chosen for f in timing.frames] + [int(t.t_us) for t in chosen]
    wanted = {f"{_PREFIX}{f.camera}/image_raw" for timing in chosen for f in timing.frames} | {topics.STATE}
    images: dict[tuple[str, int], object] = {}
    states: dict[int, VehicleState] = {}
    if chosen:
        for item in read_bag(run.bag_path, topics=wanted, start_ns=min(stamps) * 1000,
                             stop_ns=max(stamps) * 1000 + 1):
            if item.topic == topics.STATE:
                m = item.msg
                states[int(m.step)] = VehicleState(
                    int(m.step), int(m.t_us), Pose2D(m.pose.x_m, m.pose.y_m, m.pose.yaw_rad),
                    m.speed_mps, m.steer_rad, m.accel_mps2,
                )
            else:
                camera = item.topic[len(_PREFIX):-len("/image_raw")]
                images[(camera, item.t_ns // 1000)] = item.msg
    out: list[Observation] = []
    for timing in chosen:
        names = [(f.camera, int(f.t_us)) for f in timing.frames]
        if int(timing.step) not in states or any(n not in images for n in names):
            continue
        frames = {camera: imgmsg_to_numpy(images[(camera, t_us)]) for camera, t_us in names}
        out.append(Observation(int(timing.step), int(timing.t_us), int(timing.decision_us),
                               states[int(timing.step)], frames))
    if not out:
        raise BagError(f"{run_dir}: no recorded step has camera frames to replay")
    return out


def driver_settings(run_dir: Path) -> Mapping[str, Any]:
    """The driver's parameters the run's manifest kept ({} for an external driver's run).

    Raises:
        RunDirError: not a run directory, or its manifest is broken.
    """
    manifest = load_run(Path(run_dir)).manifest
    driver = (manifest.get("nodes") or {}).get("driver")
    params = driver.get("params") if isinstance(driver, Mapping) else None
    if not isinstance(params, Mapping):
        return {}
    weights = (manifest.get("digests") or {}).get("weights")  # probe.RUN_WEIGHTS_DIGEST: what the file must hold
    return {**params, "weights_sha256": weights} if isinstance(weights, str) else dict(params)
