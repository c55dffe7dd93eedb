"""The lockstep loop itself, apart from the transport that carries its calls.

The clock master node runs this loop with participants reached over ROS services; tests
and the benchmark's no-ROS baseline run it with participants called directly. Either way
the loop is the only place that advances time, and it follows the total order written in
``timing_contract``: observe t(k), check, decide, delay, record, advance to t(k+1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from simforge_ros.core.errors import ParticipantError, RateNotMultiple
from simforge_ros.core.latency import DelayBuffer
from simforge_ros.core.timing_contract import DEFAULT_DECISION_US, Contract, build_contract, check_observation
from simforge_ros.core.values import Action, ContactEvent, FrameStamp, VehicleState, neutral_action


@dataclass(frozen=True)
class StepRequest:
    """Clock master -> bridge: apply ``applied`` and advance to t_us (or reset to t(0))."""

    step: int
    t_us: int
    decision_us: int
    seed: int
    reset: bool
    applied: Action


@dataclass(frozen=True)
class BridgeObservation:
    """Bridge -> clock master: what the world is at the requested time."""

    step: int
    engine_t_us: int
    tick_us: int
    camera_period_us: int
    cameras: tuple[str, ...]
    scenario_duration_us: int
    world_digest: str
    state: VehicleState
    frames: tuple[FrameStamp, ...]
    contacts: tuple[ContactEvent, ...] = ()


@dataclass(frozen=True)
class DecideRequest:
    """Clock master -> driver: the observation of step ``step``, named, never 'latest'."""

    step: int
    t_us: int
    decision_us: int
    seed: int
    state: VehicleState
    frames: tuple[FrameStamp, ...]
    camera_period_us: int = 0  # the bridge's (0: every step), so a driver can check its needs at step 0


@dataclass(frozen=True)
class TimingRecord:
    """The timing record of one step; wall_* fields never enter a digest.

    ``wall_bridge_ns`` and ``wall_driver_ns`` time the Step and Decide calls of the step
    (a hold or a pace before the Step, Participants.wait_turn, in neither);
    ``wall_step_ns`` is the loop's whole cycle for the step: from the end of the previous
    decision (step 0: from the reset request) to the end of this one, so it also covers
    publishing the previous step's records, /clock and the contract checks, less the
    loop's own waits before the step (a hold, a real-time pace: wait_turn), which the run's
    held and paced times count. Counted in, one 22 s hold made a run's p99 and largest step
    6.7 s, and a paced run's every step its pace, saying nothing of its participants.
    """

    step: int
    t_us: int
    engine_t_us: int
    decision_us: int
    tick_us: int
    ticks_per_step: int
    latency_steps: int
    world_digest: str
    frames: tuple[FrameStamp, ...]
    wall_bridge_ns: int = 0
    wall_driver_ns: int = 0
    wall_step_ns: int = 0


class Participants(Protocol):
    """How the loop reaches the bridge and the driver (ROS services, or direct calls)."""

    def wait_turn(self, request: StepRequest) -> None:
        """The loop's own waits before a step (a hold, a real-time pace), outside the
        Step call's time: a 40 s hold was timed as the bridge's wall_bridge_ns.

        Raises: Refusal (an interrupt, a participant gone meanwhile)."""

    def step(self, request: StepRequest) -> BridgeObservation:
        """Raises: Refusal."""

    def decide(self, request: DecideRequest) -> Action:
        """Raises: Refusal."""


class LoopSink(Protocol):
    """Where the loop's outputs go (publishers, or a list in tests)."""

    def clock(self, step: int, t_us: int) -> None: ...

    def record(self, timing: TimingRecord, action: Action, applied: Action, state: VehicleState) -> None: ...


@dataclass(frozen=True)
class LoopConfig:
    """The clock master's parameters for one run (already validated types)."""

    decision_us: int = DEFAULT_DECISION_US
    steps: int = 0  # 0: the scenario's duration / decision_us
    latency_us: int = 0
    seed: int = 0
    pose_tolerance_m: float = 0.01
    pose_tolerance_deg: float = 0.1
    extra_periods: dict[str, int] = field(default_factory=dict)


@dataclass
class LoopProgress:
    """What the loop has done so far; kept by the caller when a refusal interrupts it."""

    steps_done: int = 0
    expected_steps: int = 0
    contract: Contract | None = None
    world_digest: str = ""
    contacts: list[ContactEvent] = field(default_factory=list)


MAX_PLAN_POINTS = 10_000
"""The most points a driver's plan may hold (a planner's horizon is tens to hundreds)."""


def non_finite(action: Action) -> str | None:
    """The first number of ``action`` that is not finite, as ``field value``, or None."""
    anchor = action.anchor  # recorded and hashed with the action, a plan or not
    named = [("steer", action.steer_rad), ("accel", action.accel_mps2), ("anchor.x_m", anchor.x_m),
             ("anchor.y_m", anchor.y_m), ("anchor.yaw_rad", anchor.yaw_rad)]
    for i, point in enumerate(action.trajectory):
        named += [(f"trajectory[{i}].x_m", point.x_m), (f"trajectory[{i}].y_m", point.y_m)]
    return next((f"{name} {value}" for name, value in named if not math.isfinite(value)), None)


def plan_problem(action: Action, step: int) -> str | None:
    """What is wrong with ``action``'s plan for a decision at ``step``, or None. The plan is
    recorded and hashed with the action, and a replay or an analysis reads it as the driver's
    intent: a plan made at a later step than its own, waypoints not strictly later than the
    one before (dt_us is time after the plan's step), or waypoints without a plan were
    counted without a word."""
    if not action.has_plan:
        return f"{len(action.trajectory)} waypoints without a plan (has_plan false)" if action.trajectory else None
    if action.plan_step > step:
        return f"a plan made at step {action.plan_step}, after the step it was given at"
    last = 0
    for i, point in enumerate(action.trajectory):
        if point.dt_us <= last:
            return (f"trajectory[{i}].dt_us {point.dt_us} is not after "
                    + (f"trajectory[{i - 1}]'s {last}" if i else "the plan's step (0)"))
        last = point.dt_us
    return None


def run_lockstep(
    config: LoopConfig,
    participants: Participants,
    sink: LoopSink,
    wall_ns: Callable[[], int] = lambda: 0,
    progress: LoopProgress | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> LoopProgress:
    """Run the whole loop; return its progress.

    ``wall_ns`` is only ever written into wall_* fields (the shell passes
    time.perf_counter_ns; the core never reads a clock itself).

    Raises:
        Refusal: any named refusal, from the contract or a participant; ``progress``
            (when given) then tells how far the run got.
    """
    progress = progress if progress is not None else LoopProgress()
    decision_us = config.decision_us
    w0 = w_cycle = wall_ns()
    waited = 0  # in wait_turn before this step: left out of its wall_step_ns
    obs = participants.step(StepRequest(0, 0, decision_us, config.seed, True, neutral_action()))
    wall_bridge = wall_ns() - w0
    contract = build_contract(
        decision_us=decision_us,
        tick_us=obs.tick_us,
        latency_us=config.latency_us,
        camera_period_us=obs.camera_period_us,
        cameras=obs.cameras,
        extra_periods=config.extra_periods,
        pose_tolerance_m=config.pose_tolerance_m,
        pose_tolerance_deg=config.pose_tolerance_deg,
    )
    progress.contract = contract
    steps = config.steps or obs.scenario_duration_us // decision_us
    if steps <= 0:
        raise RateNotMultiple(-1, f"scenario of {obs.scenario_duration_us} us holds no step of {decision_us} us")
    progress.expected_steps = steps
    delay = DelayBuffer(contract.latency_steps)
    for k in range(steps):
        t_us = contract.t_us(k)
        sink.clock(k, t_us)
        progress.contacts.extend(obs.contacts)
        progress.world_digest = obs.world_digest
        check_observation(contract, k, obs.engine_t_us, obs.state.pose, obs.frames)
        w1 = wall_ns()
        action = participants.decide(
            DecideRequest(k, t_us, decision_us, config.seed, obs.state, tuple(obs.frames), contract.camera_period_us)
        )
        w2 = wall_ns()
        if action.step != k or action.decided_step != k or action.t_us != t_us:
            raise ParticipantError(
                k, f"driver answered for step {action.step} (decided {action.decided_step}, t={action.t_us} us), "
                   f"asked for step {k} at t={t_us} us"
            )
        if len(action.trajectory) > MAX_PLAN_POINTS:
            # every point is recorded and hashed each step: 150 000 of them outlasted the
            # recorder's Finish (the run refused at its end, blaming the recorder)
            raise ParticipantError(k, f"driver answered a plan of {len(action.trajectory)} points "
                                      f"(at most {MAX_PLAN_POINTS})")
        if (where := non_finite(action)) is not None:
            # refused as the driver's, at its step: not by the bridge's engine a step later,
            # nor kept in a plan (a NaN's bits are hashed; steps.jsonl's JSON keeps no NaN's)
            raise ParticipantError(k, f"driver answered a non-finite action ({where})")
        if (wrong := plan_problem(action, k)) is not None:
            raise ParticipantError(k, f"driver answered {wrong}")
        applied = delay.push(k, t_us, action)
        timing = TimingRecord(
            step=k, t_us=t_us, engine_t_us=obs.engine_t_us, decision_us=decision_us,
            tick_us=contract.tick_us, ticks_per_step=contract.ticks_per_step,
            latency_steps=contract.latency_steps, world_digest=obs.world_digest,
            frames=tuple(obs.frames), wall_bridge_ns=wall_bridge, wall_driver_ns=w2 - w1,
            wall_step_ns=w2 - w_cycle - waited,
        )
        w_cycle = w2
        sink.record(timing, action, applied, obs.state)
        progress.steps_done = k + 1
        if on_step is not None:
            on_step(k, steps)
        if k + 1 < steps:
            request = StepRequest(k + 1, contract.t_us(k + 1), decision_us, config.seed, False, applied)
            w_wait = wall_ns()
            participants.wait_turn(request)
            w0 = wall_ns()
            waited = w0 - w_wait
            obs = participants.step(request)
            wall_bridge = wall_ns() - w0
    return progress


__all__: Sequence[str] = (
    "BridgeObservation", "DecideRequest", "LoopConfig", "LoopProgress",
    "LoopSink", "Participants", "StepRequest", "TimingRecord", "run_lockstep",
)
