"""What a step costs without ROS: engine ticks, rendering, hashing, and the whole loop with
participants called directly (the baseline the ROS loop is compared with)."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from simforge_ros.benchmarks.stats import summary
from simforge_ros.core.timing_contract import DEFAULT_DECISION_US as _DECISION_US
from simforge_ros.core.timing_contract import DEFAULT_TICK_US as _TICK_US


def engine_speed(steps: int, cameras: tuple[str, ...], scenario: str = "right_turn") -> dict[str, Any]:
    """Engine ticks/s (no rendering) and render ms per frame of each camera."""
    from simforge_ros.backends.embedded import EmbeddedBackend

    backend = EmbeddedBackend(scenario, _TICK_US)
    backend.load(0)
    ticks = _DECISION_US // _TICK_US
    t0 = time.perf_counter_ns()
    for _ in range(steps):
        backend.advance(0.0, 0.0, ticks)
    tick_ns = (time.perf_counter_ns() - t0) / (steps * ticks)
    render_ms: dict[str, list[float]] = {c: [] for c in cameras}
    frames = max(5, steps // 20)
    size: list[int] = []
    for _ in range(frames):
        backend.advance(0.0, 0.0, ticks)
        for camera in cameras:
            t1 = time.perf_counter_ns()
            frame = backend.render(camera, backend.time_us(), (0.0, 0.0))
            pixels = frame.pixels  # named at render(), drawn on first use: time the drawing too
            render_ms[camera].append((time.perf_counter_ns() - t1) / 1e6)
    if cameras:
        size = [int(pixels.shape[1]), int(pixels.shape[0])]  # as drawn (the backend's default)
    per_camera = {c: summary(v) for c, v in render_ms.items()}
    every = [x for v in render_ms.values() for x in v]
    return {
        "ticks_per_s": 1e9 / tick_ns,
        "tick_us": tick_ns / 1000.0,
        "render_ms_per_frame": summary(every),
        "render_ms_by_camera": per_camera,
        "frame_size": size,  # width, height
    }


class _Direct:
    """Participants called in-process: BridgeCore over the embedded engine, the route follower."""

    def __init__(self, scenario: str, cameras: tuple[str, ...]) -> None:
        from simforge_ros.backends.embedded import EmbeddedBackend
        from simforge_ros.bridge_core import BridgeConfig, BridgeCore
        from simforge_ros.drivers.route_follower import RouteFollower
        from simforge_ros.engine import load_scenario

        self.core = BridgeCore(EmbeddedBackend(scenario, _TICK_US), BridgeConfig(cameras, None))
        self.policy = RouteFollower(load_scenario(scenario))
        self.frames: list[Any] = []

    def wait_turn(self, request: Any) -> None:
        """Nothing to wait for: no hold, no pace."""

    def step(self, request: Any) -> Any:
        observation, frames = self.core.step(request)
        self.frames = frames
        return observation

    def decide(self, request: Any) -> Any:
        from simforge_ros.drivers.policy import Observation

        if request.step == 0:
            self.policy.reset(request.seed, request.decision_us)
        return self.policy.decide(Observation(request.step, request.t_us, request.decision_us, request.state, {}))


class _HashingSink:
    """Hashes what the recorder hashes: every frame (frame_hash) and the step chain."""

    def __init__(self, participants: _Direct) -> None:
        from simforge_ros.core.digest import FramesChain, StepChain

        self.participants = participants
        self.chain = StepChain()
        self.frames_chain = FramesChain()

    def clock(self, step: int, t_us: int) -> None:
        del step, t_us

    def record(self, timing: Any, action: Any, applied: Any, state: Any) -> None:
        from simforge_ros.core.digest import frame_hash

        frames = {
            f.stamp.camera: frame_hash("rgb8", f.pixels.shape[1], f.pixels.shape[0], f.pixels.shape[1] * 3, f.pixels)
            for f in self.participants.frames
        }
        self.chain.add(timing.step, timing, action, applied, state)
        if frames:
            self.frames_chain.add(timing.step, frames)


def direct_loop(steps: int, cameras: tuple[str, ...], scenario: str = "right_turn") -> dict[str, Any]:
    """run_lockstep with in-process participants: engine + render + hash, no ROS."""
    from simforge_ros.core.lockstep import LoopConfig, run_lockstep

    participants = _Direct(scenario, cameras)
    sink = _HashingSink(participants)
    stamps: list[int] = []
    run_lockstep(LoopConfig(steps=steps), participants, sink, time.perf_counter_ns,
                 on_step=lambda _k, _n: stamps.append(time.perf_counter_ns()))
    skip = min(50, len(stamps) // 10)
    cycles = [(b - a) / 1000.0 for a, b in zip(stamps[skip:], stamps[skip + 1:], strict=False)]
    stats = summary(cycles)
    return {"cameras": list(cameras), "steps": steps, "per_step_us": stats,
            "steps_per_s": 1e6 / stats["mean"] if stats.get("mean") else None,
            "chain_digest": sink.chain.hexdigest}


def realistic_records(n: int, cameras: tuple[str, ...], scenario: str = "right_turn") -> list[dict[str, Any]]:
    """n step records as the recorder sees them (plain values of real messages) with frames."""
    from simforge_ros.core.canonical import to_plain
    from simforge_ros.core.lockstep import LoopConfig, TimingRecord, run_lockstep
    from simforge_ros.nodes import convert

    participants = _Direct(scenario, cameras)
    out: list[dict[str, Any]] = []

    class _Collect:
        def clock(self, step: int, t_us: int) -> None:
            del step, t_us

        def record(self, timing: TimingRecord, action: Any, applied: Any, state: Any) -> None:
            out.append({
                "step": timing.step,
                "timing": to_plain(convert.timing_msg(timing)),
                "action": to_plain(convert.action_msg(action)),
                "applied": to_plain(convert.action_msg(applied)),
                "state": to_plain(convert.state_msg(state)),
                "frames": [(f.stamp.camera, f.stamp.t_us, f.pixels) for f in participants.frames],
            })

    run_lockstep(LoopConfig(steps=n), participants, _Collect(), time.perf_counter_ns)
    return out


def hashing_speed(records: list[dict[str, Any]], repeat: int = 7) -> dict[str, Any]:
    """The recorder's hashing (frame_hash per frame, the step chain and the frames chain per
    step) against plain hashlib.sha256 over the same bytes; best of ``repeat`` interleaved passes.

    ``efficiency`` is the recorder's own path: core.digest's StepChain and FramesChain,
    as StepAssembler uses them.
    """
    from simforge_ros.core.digest import FramesChain, StepChain, frame_hash, frame_header, step_record_bytes

    def chain_pass() -> int:
        chain = StepChain()
        frames_chain = FramesChain()
        t0 = time.perf_counter_ns()
        for r in records:
            hashes = {}
            for camera, _t_us, pixels in r["frames"]:
                height, width = pixels.shape[:2]
                hashes[camera] = frame_hash("rgb8", width, height, width * 3, pixels)
            chain.add(r["step"], r["timing"], r["action"], r["applied"], r["state"])
            if hashes:
                frames_chain.add(r["step"], hashes)
        return time.perf_counter_ns() - t0

    blocks: list[list[Any]] = []
    payload = 0
    for r in records:
        for _camera, _t_us, pixels in r["frames"]:
            height, width = pixels.shape[:2]
            blocks.append([frame_header("rgb8", width, height, width * 3), pixels.reshape(-1).data])
        blocks.append([step_record_bytes(r["step"], r["timing"], r["action"], r["applied"], r["state"])])
    payload = sum(len(b) for block in blocks for b in block)

    def hashlib_pass() -> int:
        t0 = time.perf_counter_ns()
        for block in blocks:
            h = hashlib.sha256(block[0])
            for more in block[1:]:
                h.update(more)
            h.digest()
        return time.perf_counter_ns() - t0

    # interleaved, best of ``repeat`` each: this machine's speed drifts between passes
    rec_times, raw_times = [], []
    for _ in range(repeat):
        rec_times.append(chain_pass())
        raw_times.append(hashlib_pass())
    rec_ns, raw_ns = min(rec_times), min(raw_times)
    n = len(records)
    return {
        "records": n,
        "frames_per_record": len(records[0]["frames"]) if records else 0,
        "bytes_per_record": payload / n if n else 0,
        "recorder_us_per_record": rec_ns / n / 1000.0,
        "hashlib_us_per_record": raw_ns / n / 1000.0,
        "recorder_mb_per_s": payload / rec_ns * 1000.0,
        "hashlib_mb_per_s": payload / raw_ns * 1000.0,
        "efficiency": raw_ns / rec_ns,
    }
