"""Fabricated run directories, built without ROS exactly the way the recorder builds them.

Messages are rosbags typestore dataclasses, serialised to CDR and written into a real bag
with BagWriter; the same bytes, deserialised again, are fed through StepAssembler, whose
records become steps.jsonl and whose chains go into manifest.json. So a fabricated run is
byte-for-byte what a recorder following the documented path would leave behind.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from simforge_ros import topics
from simforge_ros.core.canonical import to_plain
from simforge_ros.record.assembler import StepAssembler
from simforge_ros.record.bag import BagWriter, read_bag, typestore
from simforge_ros.record.manifest import setup_of
from simforge_ros.record.side_digests import CameraInfoDigests, ImageHeaderDigests

WIDTH, HEIGHT = 8, 6
WHEELBASE_M = 2.7


@dataclass(frozen=True)
class RunSpec:
    """What to fabricate; ``cameras`` are (name, every n steps)."""

    run_id: str = "run"
    steps: int = 60
    scenario: str = "straight_road"
    seed: int = 7
    decision_us: int = 50_000
    tick_us: int = 10_000
    latency_steps: int = 1
    cameras: tuple[tuple[str, int], ...] = (("front", 1), ("rear", 2), ("top", 3))
    storage: str = "mcap"
    perturb_action_at: int | None = None  # the driver's steer at this step moves by 1e-3
    perturb_state_at: int | None = None  # the observed speed at this step moves by 1e-3
    refuse_at: int | None = None  # the driver times out at this step
    wall_seed: int = 0  # wall-clock readings differ between runs


def _cls(name: str) -> Any:
    return typestore().types[name]


def _time(t_us: int) -> Any:
    sec, rem = divmod(t_us, 1_000_000)
    return _cls("builtin_interfaces/msg/Time")(sec=sec, nanosec=rem * 1000)


def _header(t_us: int, frame_id: str) -> Any:
    return _cls("std_msgs/msg/Header")(stamp=_time(t_us), frame_id=frame_id)


def _pose(x: float, y: float, yaw: float) -> Any:
    return _cls("simforge_ros/msg/Pose2D")(x_m=x, y_m=y, yaw_rad=yaw)


def _action(step: int, decided: int, t_us: int, steer: float, accel: float, pose: Any) -> Any:
    point = _cls("simforge_ros/msg/TrajectoryPoint")
    plan = [point(dt_us=i * 100_000, x_m=float(i), y_m=-0.01 * i) for i in range(1, 4)]
    return _cls("simforge_ros/msg/DriverAction")(
        step=step, decided_step=decided, t_us=t_us, steer_rad=steer, accel_mps2=accel,
        has_plan=True, plan_step=decided, anchor=pose, trajectory=plan,
    )


def _image(camera: str, t_us: int, x: float) -> Any:
    seed = hashlib.sha256(f"{camera}/{t_us}/{x!r}".encode()).digest()
    data = np.frombuffer((seed * 5)[: WIDTH * HEIGHT * 3], dtype=np.uint8).copy()
    return _cls("sensor_msgs/msg/Image")(
        header=_header(t_us, camera), height=HEIGHT, width=WIDTH, encoding="rgb8",
        is_bigendian=0, step=WIDTH * 3, data=data,
    )


def _camera_info(camera: str, t_us: int) -> Any:
    roi = _cls("sensor_msgs/msg/RegionOfInterest")(x_offset=0, y_offset=0, height=0, width=0, do_rectify=False)
    k = np.array([10.0, 0, WIDTH / 2, 0, 10.0, HEIGHT / 2, 0, 0, 1], dtype=np.float64)
    p = np.array([10.0, 0, WIDTH / 2, 0, 0, 10.0, HEIGHT / 2, 0, 0, 0, 1, 0], dtype=np.float64)
    return _cls("sensor_msgs/msg/CameraInfo")(
        header=_header(t_us, camera), height=HEIGHT, width=WIDTH, distortion_model="plumb_bob",
        d=np.zeros(5), k=k, r=np.eye(3).reshape(-1), p=p, binning_x=0, binning_y=0, roi=roi,
    )


class _Recorder:
    """Writes each message into the bag and feeds it to the assembler as the recorder does."""

    def __init__(self, bag: BagWriter) -> None:
        self.bag = bag
        self.assembler = StepAssembler()
        self.store = typestore()
        self.infos = CameraInfoDigests(lambda raw: self.store.deserialize_cdr(raw, "sensor_msgs/msg/CameraInfo"))
        self.headers = ImageHeaderDigests()

    def put(self, topic: str, msg: Any, t_us: int) -> None:
        raw = self.store.serialize_cdr(msg, msg.__msgtype__)
        self.bag.write(topic, msg.__msgtype__, t_us * 1000, raw)
        back: Any = self.store.deserialize_cdr(raw, msg.__msgtype__)
        part = {topics.TIMING: "timing", topics.ACTION: "action", topics.APPLIED: "applied", topics.STATE: "state"}
        if topic in part:
            self.assembler.add(part[topic], cast("dict[str, Any]", to_plain(back)))
        elif topic.endswith("/camera_info"):
            self.infos.add_raw(topic.split("/")[3], raw)
        elif topic.endswith("/image_raw"):
            stamp = back.header.stamp
            camera = topic.split("/")[3]
            self.headers.add(camera, stamp.sec, stamp.nanosec, back.header.frame_id, back.is_bigendian)
            self.assembler.add_frame(camera, stamp.sec * 1_000_000 + stamp.nanosec // 1000,
                                     back.encoding, back.width, back.height, back.step, back.data)


def fabricate(run_dir: Path, spec: RunSpec) -> Path:
    """Write a complete run directory (bag, steps.jsonl, manifest.json) for ``spec``."""
    run_dir.mkdir(parents=True)
    wall = random.Random(spec.wall_seed)
    world_digest = hashlib.sha256(f"world:{spec.scenario}".encode()).hexdigest()
    dt = spec.decision_us / 1e6
    x = y = yaw = 0.0
    speed, steer, accel = 5.0, 0.0, 0.0
    decided: list[Any] = []
    contacts: list[Any] = []
    end = spec.steps if spec.refuse_at is None else spec.refuse_at
    params = {"clock_master": {"decision_us": spec.decision_us, "seed": spec.seed},
              "sim_bridge": {"scenario": spec.scenario, "tick_us": spec.tick_us},
              "driver": {"kind": "route_follower", "latency_steps": spec.latency_steps}}
    with BagWriter(run_dir / "bag", spec.storage) as bag:
        rec = _Recorder(bag)
        for node, values in params.items():  # each node's latched parameters, as the nodes publish them
            rec.put(topics.NODE_PARAMS, _cls("std_msgs/msg/String")(
                data=json.dumps({"node": node, "params": values}, sort_keys=True)), 0)
        for k in range(min(spec.steps, end + 1)):
            t_us = k * spec.decision_us
            rec.put(topics.CLOCK, _cls("rosgraph_msgs/msg/Clock")(clock=_time(t_us)), t_us)
            if k == spec.perturb_state_at:
                speed += 1e-3
            pose = _pose(x, y, yaw)
            due = [cam for cam, every in spec.cameras if k % every == 0]
            for cam in due:
                rec.put(topics.image_topic(cam), _image(cam, t_us, x), t_us)
                rec.put(topics.camera_info_topic(cam), _camera_info(cam, t_us), t_us)
            state = _cls("simforge_ros/msg/VehicleState")(
                step=k, t_us=t_us, pose=pose, speed_mps=speed, steer_rad=steer, accel_mps2=accel)
            rec.put(topics.STATE, state, t_us)
            if k == 30:
                contact = _cls("simforge_ros/msg/ContactEvent")(
                    tick=k * 5, t_us=t_us, actor_a="ego", actor_b="cone_3", harness_fault=False)
                rec.put(topics.CONTACTS, contact, t_us)
                contacts.append(to_plain(contact))
            if k == end:
                break  # the driver never answered: no timing, no action for this step
            new_steer = max(-0.5, min(0.5, -0.05 * y - 0.3 * yaw)) + (1e-3 if k == spec.perturb_action_at else 0.0)
            action = _action(k, k, t_us, new_steer, 0.4 * (10.0 - speed), pose)
            decided.append(action)
            src = k - spec.latency_steps
            applied = (dataclasses.replace(decided[src], step=k, t_us=t_us) if src >= 0
                       else _action(k, 0, t_us, 0.0, 0.0, _pose(0.0, 0.0, 0.0)))
            frame = _cls("simforge_ros/msg/FrameInfo")
            timing = _cls("simforge_ros/msg/StepTiming")(
                step=k, t_us=t_us, engine_t_us=t_us, decision_us=spec.decision_us, tick_us=spec.tick_us,
                ticks_per_step=spec.decision_us // spec.tick_us, latency_steps=spec.latency_steps,
                world_digest=world_digest, frames=[frame(camera=c, t_us=t_us, pose=pose) for c in due],
                wall_bridge_ns=wall.randrange(10**6, 10**7), wall_driver_ns=wall.randrange(10**6, 10**7),
                wall_step_ns=wall.randrange(10**7, 10**8),
            )
            rec.put(topics.TIMING, timing, t_us)
            rec.put(topics.ACTION, action, t_us)
            rec.put(topics.APPLIED, applied, t_us)
            steer, accel = applied.steer_rad, applied.accel_mps2
            x += speed * math.cos(yaw) * dt
            y += speed * math.sin(yaw) * dt
            yaw += speed * math.tan(steer) / WHEELBASE_M * dt
            speed += accel * dt
        refused = spec.refuse_at is not None
        status = _cls("simforge_ros/msg/RunStatus")(
            run_id=spec.run_id, state="refused" if refused else "counted",
            code="participant_timeout" if refused else "", step=end if refused else 0,
            detail="driver did not answer within 2 s" if refused else "", steps_done=end)
        rec.put(topics.STATUS, status, max(end, 0) * spec.decision_us)
    asm = rec.assembler
    with (run_dir / "steps.jsonl").open("w") as out:
        for record in asm.records:
            out.write(json.dumps(record) + "\n")
    manifest = {
        "format": 1, "run_id": spec.run_id, "scenario": spec.scenario, "seed": spec.seed,
        "status": "refused" if refused else "counted",
        "refusal": {"code": "participant_timeout", "step": end, "detail": status.detail} if refused else None,
        "expected_steps": spec.steps, "steps": len(asm.records), "chain_digest": asm.chain.hexdigest,
        "frames_digest": asm.frames_chain.hexdigest if asm.frames_chain.steps else None,
        "world_digest": world_digest,
        "contract": {"decision_us": spec.decision_us, "tick_us": spec.tick_us, "latency_steps": spec.latency_steps,
                     "ticks_per_step": spec.decision_us // spec.tick_us},  # the last timing record's, as recorded
        "contacts": {"total": len(contacts), "harness_faults": 0, "events": contacts},
        "camera_info": rec.infos.summary(),
        "image_headers": rec.headers.summary(),
        "nodes": {node: {"params": values} for node, values in sorted(params.items())},
        # derived from the nodes' parameters, as the recorder does (verify derives them again)
        "digests": setup_of({node: {"params": values} for node, values in params.items()})["digests"],
        "versions": {"simforge_ros": "0.0.0-test"},
        "faults": [], "bag": {"path": "bag", "storage": spec.storage},
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return run_dir


@pytest.fixture
def make_run(tmp_path: Path) -> Callable[..., Path]:
    """make_run(name="run", **RunSpec fields) -> a fresh fabricated run directory."""

    def make(name: str = "run", **fields: Any) -> Path:
        return fabricate(tmp_path / name, RunSpec(run_id=name, **fields))

    return make


def bag_file(run_dir: Path) -> Path:
    """The single storage file of a run's bag."""
    (found,) = [p for p in (run_dir / "bag").iterdir() if p.suffix in (".mcap", ".db3")]
    return found


@pytest.fixture
def flip_state_byte() -> Callable[[Path, int], None]:
    """flip_state_byte(run_dir, k): flip the low byte of speed_mps inside the bytes of the
    state message of step k, in the bag file itself (the file is searched for them)."""

    def flip(run_dir: Path, step: int) -> None:
        (item,) = [m for m in read_bag(run_dir / "bag") if m.topic == topics.STATE and m.msg.step == step]
        field_at = item.raw.index(struct.pack("<d", item.msg.speed_mps))
        path = bag_file(run_dir)
        blob = bytearray(path.read_bytes())
        at = blob.find(item.raw)
        assert at >= 0 and blob.find(item.raw, at + 1) < 0, "state message bytes not found exactly once"
        blob[at + field_at] ^= 0x01
        path.write_bytes(bytes(blob))

    return flip


@pytest.fixture
def bag_file_of() -> Callable[[Path], Path]:
    """bag_file_of(run_dir): the .mcap or .db3 file of the run's bag."""
    return bag_file
