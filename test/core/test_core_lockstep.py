"""The lockstep loop itself (core.lockstep.run_lockstep), without ROS: what it asks of the
participants at each step, what it hands the sink, the driver's latency, and the refusals it
raises itself when a driver's answer does not fit the step it was asked about."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from simforge_ros.backends.embedded import EmbeddedBackend
from simforge_ros.bridge_core import BridgeConfig, BridgeCore
from simforge_ros.core.errors import ParticipantError
from simforge_ros.core.lockstep import (
    BridgeObservation,
    DecideRequest,
    LoopConfig,
    LoopProgress,
    StepRequest,
    TimingRecord,
    run_lockstep,
)
from simforge_ros.core.timing_contract import DEFAULT_DECISION_US
from simforge_ros.core.values import Action, TrajectoryPoint, VehicleState
from simforge_ros.drivers.policy import Observation
from simforge_ros.drivers.route_follower import RouteFollower
from simforge_ros.engine import load_scenario

SCENARIO = "right_turn"
TICK_US = 10_000


class Direct:
    """The bridge core over the embedded engine and the route follower, called in-process;
    ``spoil`` (step -> function of the action) stands for a driver that answers wrongly."""

    def __init__(self, spoil: dict[int, Any] | None = None) -> None:
        self.core = BridgeCore(EmbeddedBackend(SCENARIO, TICK_US), BridgeConfig((), None))
        self.policy = RouteFollower(load_scenario(SCENARIO))
        self.spoil = spoil or {}
        self.steps: list[StepRequest] = []
        self.decides: list[DecideRequest] = []
        self.turns: list[int] = []

    def wait_turn(self, request: StepRequest) -> None:
        self.turns.append(request.step)

    def step(self, request: StepRequest) -> BridgeObservation:
        self.steps.append(request)
        observation, _frames = self.core.step(request)
        return observation

    def decide(self, request: DecideRequest) -> Action:
        self.decides.append(request)
        if request.step == 0:
            self.policy.reset(request.seed, request.decision_us)
        obs = Observation(request.step, request.t_us, request.decision_us, request.state, {})
        action = self.policy.decide(obs)
        return self.spoil[request.step](action) if request.step in self.spoil else action


class Sink:
    def __init__(self) -> None:
        self.clocks: list[tuple[int, int]] = []
        self.records: list[tuple[TimingRecord, Action, Action, VehicleState]] = []

    def clock(self, step: int, t_us: int) -> None:
        self.clocks.append((step, t_us))

    def record(self, timing: TimingRecord, action: Action, applied: Action, state: VehicleState) -> None:
        self.records.append((timing, action, applied, state))


def test_every_step_is_asked_and_recorded_at_k_times_decision_us() -> None:
    participants, sink = Direct(), Sink()
    progress = run_lockstep(LoopConfig(steps=25), participants, sink)
    t = [k * DEFAULT_DECISION_US for k in range(25)]
    assert progress.steps_done == progress.expected_steps == 25
    assert sink.clocks == list(zip(range(25), t, strict=True))
    assert [(r.step, r.t_us, r.reset) for r in participants.steps] == [(0, 0, True)] + [
        (k, t[k], False) for k in range(1, 25)]
    assert [(d.step, d.t_us, d.state.t_us) for d in participants.decides] == [(k, t[k], t[k]) for k in range(25)]
    assert [(timing.step, timing.t_us, timing.engine_t_us) for timing, *_ in sink.records] == [
        (k, t[k], t[k]) for k in range(25)]
    # no latency: the action decided at step k is the one the next Step request applies
    for k in range(24):
        assert participants.steps[k + 1].applied == sink.records[k][1]


def test_a_latency_applies_the_action_decided_that_many_steps_earlier() -> None:
    participants, sink = Direct(), Sink()
    run_lockstep(LoopConfig(steps=12, latency_us=3 * DEFAULT_DECISION_US), participants, sink)
    decided = {action.decided_step: action for _timing, action, _applied, _state in sink.records}
    for timing, _action, applied, _state in sink.records:
        if timing.step < 3:  # nothing decided that long ago: the neutral action
            assert (applied.steer_rad, applied.accel_mps2) == (0.0, 0.0)
        else:
            assert applied.decided_step == timing.step - 3
            assert (applied.steer_rad, applied.accel_mps2) == (
                decided[timing.step - 3].steer_rad, decided[timing.step - 3].accel_mps2)


def _with(field: str, value: float):
    """An edit of an action setting ``field`` (an Action field, anchor.X or trajectory.X)."""
    if field.startswith("anchor."):
        return lambda a: dataclasses.replace(a, anchor=dataclasses.replace(a.anchor, **{field[7:]: value}))
    if field.startswith("trajectory."):
        point = TrajectoryPoint(100_000, 1.0, 0.0)
        return lambda a: dataclasses.replace(a, has_plan=True, trajectory=(
            point, dataclasses.replace(point, **{field[11:]: value})))
    return lambda a: dataclasses.replace(a, **{field: value})


@pytest.mark.parametrize("field", ["steer_rad", "accel_mps2", "anchor.yaw_rad", "trajectory.x_m", "trajectory.y_m"])
@pytest.mark.parametrize("value", [math.nan, -math.nan, math.inf, -math.inf])
def test_a_non_finite_action_is_refused_as_the_drivers_at_its_step(field: str, value: float) -> None:
    """A NaN in a plan was counted, hashed by its bits, and written to steps.jsonl as a
    NaN of other bits: `verify` then refused the counted run ("nan vs nan")."""
    participants = Direct({7: _with(field, value)})
    sink, progress = Sink(), LoopProgress()
    with pytest.raises(ParticipantError) as info:
        run_lockstep(LoopConfig(steps=20), participants, sink, progress=progress)
    assert info.value.code == "participant_error" and info.value.step == 7
    assert "driver answered a non-finite action" in info.value.detail
    # refused before the step is recorded or the action reaches the bridge (no Step of step 8)
    assert progress.steps_done == 7 and len(sink.records) == 7 and participants.steps[-1].step == 7


def test_a_plan_past_the_most_points_is_refused_as_the_drivers_at_its_step() -> None:
    """150 000 points a step outlasted the recorder's Finish: the run was refused at its
    end, blaming the recorder, while its manifest said counted."""
    from simforge_ros.core.lockstep import MAX_PLAN_POINTS

    plan = tuple(TrajectoryPoint(100_000 * (i + 1), 1.0, 0.0) for i in range(MAX_PLAN_POINTS + 1))
    for points, refused in ((MAX_PLAN_POINTS, False), (MAX_PLAN_POINTS + 1, True)):
        participants = Direct({3: lambda a, n=points: dataclasses.replace(a, has_plan=True, trajectory=plan[:n])})
        progress = LoopProgress()
        if not refused:
            run_lockstep(LoopConfig(steps=5), participants, Sink(), progress=progress)
            assert progress.steps_done == 5
            continue
        with pytest.raises(ParticipantError) as info:
            run_lockstep(LoopConfig(steps=5), participants, Sink(), progress=progress)
        assert info.value.step == 3
        assert info.value.detail == f"driver answered a plan of {points} points (at most {MAX_PLAN_POINTS})"


@pytest.mark.parametrize(("edit", "said"), [
    (lambda a: dataclasses.replace(a, has_plan=True, plan_step=6),
     "a plan made at step 6, after the step it was given at"),
    (lambda a: dataclasses.replace(a, trajectory=(TrajectoryPoint(100_000, 1.0, 0.0),)),
     "1 waypoints without a plan (has_plan false)"),
    (lambda a: dataclasses.replace(a, has_plan=True, trajectory=(TrajectoryPoint(-5, 1.0, 0.0),)),
     "trajectory[0].dt_us -5 is not after the plan's step (0)"),
    (lambda a: dataclasses.replace(a, has_plan=True, trajectory=(
        TrajectoryPoint(100_000, 1.0, 0.0), TrajectoryPoint(100_000, 2.0, 0.0))),
     "trajectory[1].dt_us 100000 is not after trajectory[0]'s 100000"),
])
def test_a_plan_that_cannot_be_is_refused_as_the_drivers_at_its_step(edit, said) -> None:
    """An ECU's plan made at a future step, with waypoints going back in time, or waypoints
    without a plan, was recorded and hashed as its intent, and the run counted."""
    participants, progress = Direct({5: edit}), LoopProgress()
    with pytest.raises(ParticipantError) as info:
        run_lockstep(LoopConfig(steps=10), participants, Sink(), progress=progress)
    assert (info.value.step, info.value.detail) == (5, f"driver answered {said}")
    assert progress.steps_done == 5
    # a plan made earlier and still followed, and one made now, are the driver's to give
    for plan_step in (0, 5):
        kept = Direct({5: lambda a, s=plan_step: dataclasses.replace(a, has_plan=True, plan_step=s, trajectory=(
            TrajectoryPoint(100_000, 1.0, 0.0), TrajectoryPoint(200_000, 2.0, 0.0)))})
        assert run_lockstep(LoopConfig(steps=10), kept, Sink()).steps_done == 10


def test_an_answer_for_another_step_is_refused() -> None:
    participants, progress = Direct({4: lambda a: dataclasses.replace(a, step=3, decided_step=3)}), LoopProgress()
    with pytest.raises(ParticipantError) as info:
        run_lockstep(LoopConfig(steps=10), participants, Sink(), progress=progress)
    assert info.value.step == 4 and "driver answered for step 3" in info.value.detail
    assert info.value.detail.endswith(", asked for step 4 at t=400000 us")  # what it should have said, too
    assert progress.steps_done == 4


@pytest.mark.parametrize(("changed", "said"), [
    ({"decided_step": 3}, "driver answered for step 4 (decided 3, t=400000 us)"),
    ({"t_us": 399_999}, "driver answered for step 4 (decided 4, t=399999 us)"),
])
def test_an_answer_naming_another_decision_or_time_is_refused(changed: dict[str, int], said: str) -> None:
    """Each of the three names an answer carries is checked on its own: one that moved
    only its decided step or only its time was recorded and hashed as step 4's."""
    participants = Direct({4: lambda a: dataclasses.replace(a, **changed)})
    with pytest.raises(ParticipantError) as info:
        run_lockstep(LoopConfig(steps=10), participants, Sink(), progress=LoopProgress())
    assert info.value.step == 4 and info.value.detail.startswith(said), info.value.detail


def test_the_loops_own_waits_come_before_each_step_and_are_no_participants_time() -> None:
    """A hold on /simforge/pause or a real-time pace happened inside the Step call and
    was timed as the bridge's: a 40 s hold read wall_bridge_ns 40.7 s at its step."""
    now = [0]

    def wall_ns() -> int:
        return now[0]

    class Waiting(Direct):
        def wait_turn(self, request: StepRequest) -> None:
            super().wait_turn(request)
            now[0] += 1_000_000  # held or paced 1 ms

        def step(self, request: StepRequest) -> BridgeObservation:
            now[0] += 7
            return super().step(request)

        def decide(self, request: Any) -> Any:
            now[0] += 30
            return super().decide(request)

    participants, sink = Waiting(), Sink()
    run_lockstep(LoopConfig(steps=5), participants, sink, wall_ns)
    assert participants.turns == [1, 2, 3, 4]  # before every step but the reset
    assert [timing.wall_bridge_ns for timing, *_ in sink.records] == [7] * 5
    assert [timing.wall_driver_ns for timing, *_ in sink.records] == [30] * 5  # the Decide call alone
    # nor the step's: a 22 s hold made a run's p99 and largest step 6.7 s (the run's held
    # and paced times count the waits)
    assert [timing.wall_step_ns for timing, *_ in sink.records][1:] == [37] * 4
