"""Each seed scenario, driven by the blind RouteFollower in lockstep, runs clean and does its job."""

from __future__ import annotations

import itertools
import math

import pytest

from simforge_ros.core.values import Action, Pose2D
from simforge_ros.drivers.policy import Observation
from simforge_ros.drivers.route_follower import RouteFollower
from simforge_ros.engine import Engine, load_scenario
from simforge_ros.engine.paths import PathReplay
from simforge_ros.engine.route import RouteGeometry

SEEDS = ("right_turn", "unprotected_left", "red_signal", "handover_parked")
MIN_PROGRESS_M = {"right_turn": 80.0, "unprotected_left": 60.0, "red_signal": 100.0, "handover_parked": 120.0}


def _run(name):
    scenario = load_scenario(name)
    engine = Engine(scenario, 0)
    policy = RouteFollower(scenario)
    policy.reset(0, 100_000)
    trace = [engine.ego_state(0)]
    step = 0
    while engine.t_us < scenario.duration_us:
        action = policy.decide(Observation(step, engine.t_us, 100_000, engine.ego_state(step), {}))
        engine.advance(action.steer_rad, action.accel_mps2, 5)
        step += 1
        trace.append(engine.ego_state(step))
    return scenario, engine, trace


@pytest.mark.parametrize("name", SEEDS)
def test_full_run_clean_and_progressing(name):
    scenario, engine, trace = _run(name)
    assert engine.t_us >= scenario.duration_us >= 15_000_000
    assert [c for c in engine.contacts if not c.harness_fault] == []
    travelled = sum(
        math.hypot(b.pose.x_m - a.pose.x_m, b.pose.y_m - a.pose.y_m) for a, b in itertools.pairwise(trace)
    )
    route = RouteGeometry(scenario.ego.route)
    s0, _ = route.project(trace[0].pose.x_m, trace[0].pose.y_m, trace[0].pose.yaw_rad)
    s1, lateral = route.project(trace[-1].pose.x_m, trace[-1].pose.y_m, trace[-1].pose.yaw_rad)
    assert travelled >= MIN_PROGRESS_M[name]
    assert s1 - s0 >= MIN_PROGRESS_M[name] - 1.0  # progress along the route, not just motion
    assert abs(lateral) < 0.5
    assert max(abs(s.steer_rad) for s in trace) <= scenario.ego.vehicle.max_steer_rad


def _stopped_between(trace, t0_us, t1_us):
    return any(s.speed_mps < 0.1 for s in trace if t0_us <= s.t_us <= t1_us)


def test_right_turn_queues_then_turns():
    _, _, trace = _run("right_turn")
    van_moves_us = 8_000_000
    assert _stopped_between(trace, 5_000_000, van_moves_us)
    assert all(s.pose.x_m < -12.0 for s in trace if s.t_us <= van_moves_us)  # behind the van
    assert math.remainder(trace[-1].pose.yaw_rad + math.pi / 2, math.tau) == pytest.approx(0.0, abs=0.05)
    assert trace[-1].pose.y_m < -40.0 and trace[-1].speed_mps > 8.0


def test_unprotected_left_yields_then_turns():
    scenario, _, trace = _run("unprotected_left")
    oncoming = PathReplay(scenario.actors[0].path)
    passed_us = next(t for t in range(0, scenario.duration_us, 100_000) if oncoming.pose_at(t).x_m < -12.0)
    assert _stopped_between(trace, 0, passed_us)
    assert all(s.pose.y_m < -1.0 for s in trace if s.t_us <= passed_us)  # stayed in its lane until clear
    assert math.remainder(trace[-1].pose.yaw_rad - math.pi / 2, math.tau) == pytest.approx(0.0, abs=0.05)


def test_red_signal_stops_before_line():
    scenario, _, trace = _run("red_signal")
    front_m = scenario.ego.vehicle.length_m - scenario.ego.vehicle.rear_overhang_m
    stop_x = scenario.signals[0].stop_line[0][0]
    red = [s for s in trace if s.t_us < 12_000_000]
    assert max(s.pose.x_m + front_m for s in red) < stop_x
    assert _stopped_between(trace, 0, 12_000_000)
    assert trace[-1].pose.x_m > 20.0


def test_handover_replays_then_releases_and_passes_parked_car():
    scenario, engine, trace = _run("handover_parked")
    recorded = PathReplay(scenario.handover.path)
    for s in trace:
        if s.t_us <= scenario.handover.t_us:
            p = recorded.pose_at(s.t_us)
            assert (s.pose.x_m, s.pose.y_m) == (p.x_m, p.y_m)
    parked = engine.actor_poses()["parked"]
    beside = [s for s in trace if abs(s.pose.x_m + 1.4 - parked.x_m) < 3.0]
    assert beside and all(s.pose.y_m > -0.5 and s.speed_mps < 6.0 for s in beside)  # around it, slowly


def test_route_follower_contract():
    scenario = load_scenario("right_turn")
    policy = RouteFollower(scenario)
    policy.reset(0, 100_000)
    assert policy.name == "route" and policy.cameras_at(0) == () and policy.cameras_at(17) == ()
    engine = Engine(scenario, 0)
    obs = Observation(3, engine.t_us, 100_000, engine.ego_state(3), {})
    action = policy.decide(obs)
    assert isinstance(action, Action)
    assert (action.step, action.decided_step, action.t_us, action.has_plan) == (3, 3, engine.t_us, False)
    assert policy.decide(obs) == action
    desc = policy.describe()
    assert desc["scenario"] == "right_turn" and desc["gains"]["speed_kp"] > 0
    with pytest.raises(ValueError):
        policy.reset(0, 0)


def test_a_run_past_the_scenarios_duration_holds_the_actors_and_cycles_the_signals():
    """clock_master.steps may ask for more than the scenario's duration (README): the
    world goes on, each scripted actor held at its path's last pose, the signals cycling."""
    from simforge_ros.engine.signals import signal_state

    scenario = load_scenario("red_signal")
    assert scenario.actors and scenario.signals
    engine = Engine(scenario, 0)
    ticks = (scenario.duration_us + 5_000_000) // engine.tick_us
    engine.advance(0.0, 0.0, ticks)
    assert engine.t_us > scenario.duration_us and engine.done
    for actor in scenario.actors:
        last = actor.path[-1]
        assert engine.actor_poses()[actor.id] == Pose2D(last.x_m, last.y_m, last.yaw_rad), actor.id
    for signal in scenario.signals:
        assert engine.signal_states()[signal.id] == signal_state(signal, engine.t_us)
        cycle = sum(p.duration_us for p in signal.phases)
        assert signal_state(signal, engine.t_us) == signal_state(signal, engine.t_us - cycle)  # it repeats
