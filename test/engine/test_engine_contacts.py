"""Contacts: SAT overlap, recorded once at the start tick, and the harness_fault label."""

from __future__ import annotations

import math

from simforge_ros.engine import Engine, load_scenario
from simforge_ros.engine.contacts import Body, ContactTracker, is_harness_fault
from simforge_ros.engine.geometry import Box, boxes_overlap
from simforge_ros.engine.paths import PathReplay
from simforge_ros.engine.vehicle import ego_box


def _path(samples):
    return [{"t_us": t, "x_m": x, "y_m": y, "yaw_rad": yaw} for t, x, y, yaw in samples]


def test_sat_overlap_oriented_boxes():
    a = Box(0.0, 0.0, 0.0, 4.0, 2.0)
    assert boxes_overlap(a, Box(3.9, 0.0, 0.0, 4.0, 2.0))
    assert not boxes_overlap(a, Box(4.1, 0.0, 0.0, 4.0, 2.0))
    # a rotated box whose bounding circle overlaps but whose corner does not reach
    assert not boxes_overlap(a, Box(3.2, 2.2, math.pi / 4, 2.0, 2.0))
    assert boxes_overlap(a, Box(2.6, 1.6, math.pi / 4, 2.0, 2.0))


def test_traffic_into_stopped_ego_is_harness_fault_at_exact_tick(minimal_doc, write_doc):
    doc = minimal_doc()
    # a car comes from behind at 10 m/s through the stopped ego (ego box spans x -0.9 .. 3.7)
    doc["actors"] = [
        {
            "id": "chaser",
            "kind": "vehicle",
            "length_m": 4.5,
            "path": _path([(0, -20.0, 0.0, 0.0), (4_000_000, 20.0, 0.0, 0.0)]),
        }
    ]
    engine = Engine(load_scenario(write_doc(doc)), 0)
    events = []
    for _ in range(60):
        events += engine.advance(0.0, 0.0, 5)  # ego held still
    # overlap once chaser centre x > -0.9 - 2.25 = -3.15, i.e. t > 1.685 s: first tick 85 (1.70 s)
    assert len(events) == 1, events  # overlapping for many ticks, recorded once
    event = events[0]
    assert (event.tick, event.t_us) == (85, 1_700_000)
    assert (event.actor_a, event.actor_b, event.harness_fault) == ("ego", "chaser", True)
    assert engine.contacts == (event,)


def test_ego_into_stopped_actor_is_not_harness_fault(minimal_doc, write_doc):
    doc = minimal_doc()
    doc["ego"]["start"]["speed_mps"] = 10.0
    doc["actors"] = [
        {"id": "parked", "kind": "vehicle", "length_m": 4.5, "path": _path([(0, 20.0, 0.0, 0.0)])}
    ]
    engine = Engine(load_scenario(write_doc(doc)), 0)
    events = engine.advance(0.0, 0.0, 100)
    # ego front = x + 3.7 passes the parked rear 17.75 once x > 14.05: x = 0.2 * tick -> tick 71
    assert len(events) == 1
    assert (events[0].tick, events[0].t_us, events[0].actor_b, events[0].harness_fault) == (
        71,
        1_420_000,
        "parked",
        False,
    )


def test_contact_recorded_again_after_separation(minimal_doc, write_doc):
    doc = minimal_doc()
    doc["actors"] = [
        {
            "id": "walker",
            "kind": "pedestrian",
            "path": _path([(0, 1.0, -3.0, 1.57), (2_000_000, 1.0, 3.0, 1.57), (4_000_000, 1.0, -3.0, -1.57)]),
        }
    ]
    engine = Engine(load_scenario(write_doc(doc)), 0)
    events = engine.advance(0.0, 0.0, 250)
    assert len(events) == 2
    assert all(e.harness_fault for e in events)
    assert events[0].tick < 100 < events[1].tick


def test_blame_rule():
    box_ego = Box(0.0, 0.0, 0.0, 4.6, 1.9)
    behind = Box(-4.0, 0.0, 0.0, 4.5, 1.9)
    ahead = Box(4.0, 0.0, 0.0, 4.5, 1.9)
    slow_ego = Body("ego", box_ego, 2.0, 0.0)
    fast_ego = Body("ego", box_ego, 8.0, 0.0)
    assert is_harness_fault(slow_ego, Body("t", behind, 8.0, 0.0))  # rear-ended by faster traffic
    assert not is_harness_fault(fast_ego, Body("t", ahead, 2.0, 0.0))  # ego runs into slower car
    assert not is_harness_fault(fast_ego, Body("t", ahead, 0.0, 0.0))  # ego runs into a stopped car
    # the ego creeping into a parked car is the ego's: the car caused nothing (it was the
    # harness's, as a (nearly) stopped ego's every contact was)
    assert not is_harness_fault(Body("ego", box_ego, 0.05, 0.0), Body("t", ahead, 0.0, 0.0))
    assert is_harness_fault(Body("ego", box_ego, 0.0, 0.0), Body("t", ahead, 0.0, 0.0))  # placed so
    assert is_harness_fault(Body("ego", box_ego, 0.05, 0.0), Body("t", behind, 0.5, 0.0))  # nudged from behind
    assert is_harness_fault(Body("ego", box_ego, -0.05, 0.0), Body("t", ahead, 0.0, 0.0))  # creeping away
    # a car overtaking a parked ego cuts in and clips its corner: its centre already past
    # the ego's, it "closes" at less than 0; the parked ego is not to blame
    parked = Body("ego", Box(0.0, 0.0, 0.0, 4.5, 1.8), 0.0, 0.0)
    cutting_in = Body("car", Box(3.5, 1.7, -0.05, 4.5, 1.8), 10.0, -0.5)
    assert boxes_overlap(parked.box, cutting_in.box) and is_harness_fault(parked, cutting_in)
    for creep in (0.001, 0.05, 0.09):  # and one creeping: the car is the mover
        assert is_harness_fault(Body("ego", parked.box, creep, 0.0), cutting_in), creep
    side = Box(0.0, 2.5, -math.pi / 2, 4.5, 1.9)
    assert is_harness_fault(slow_ego, Body("t", side, 0.0, -6.0))  # fast cross traffic into ego's side
    assert not is_harness_fault(fast_ego, Body("t", side, 0.0, 0.0))


def test_actor_actor_contacts_are_harness_faults():
    tracker = ContactTracker()
    ego = Body("ego", Box(50.0, 0.0, 0.0, 4.6, 1.9), 5.0, 0.0)
    a = Body("a", Box(0.0, 0.0, 0.0, 4.5, 1.9), 3.0, 0.0)
    b = Body("b", Box(2.0, 0.0, 0.0, 4.5, 1.9), 0.0, 0.0)
    events = tracker.update(3, 60_000, ego, [a, b])
    assert [(e.actor_a, e.actor_b, e.harness_fault, e.tick) for e in events] == [("a", "b", True, 3)]
    assert tracker.update(4, 80_000, ego, [a, b]) == []


def test_perturbation_into_actor_makes_contact():
    scenario = load_scenario("handover_parked")
    engine = Engine(scenario, 0)
    engine.advance(0.0, 0.0, 260)  # past the hand-over (before it the recorded path sets the pose)
    ego = engine.ego_state(0).pose
    assert engine.t_us > scenario.handover.t_us
    parked = engine.actor_poses()["parked"]
    engine.perturb_ego(parked.x_m - ego.x_m - 1.4)  # ego box centre onto the parked car's x
    assert engine.contacts == ()  # seen at the next tick
    engine.advance(0.0, 0.0, 1)
    assert [c.actor_b for c in engine.contacts] == ["parked"]
    assert engine.contacts[0].tick == 261


def test_engine_events_match_a_tracker_fed_every_pair(minimal_doc, write_doc):
    """The engine tests only the pairs its broad phase lets through (actor pairs far apart are
    not looked at until they could close the gap); a tracker given every pair agrees."""
    doc = minimal_doc()
    doc["duration_us"] = 16_000_000
    doc["actors"] = [
        # east and north cross at (10, 0.3) at the same time, coming from 60 m away at 15 m/s
        {"id": "east", "kind": "vehicle", "path": _path([(0, -60.0, 0.3, 0.0), (8_000_000, 60.0, 0.3, 0.0)])},
        {
            "id": "north",
            "kind": "vehicle",
            "path": _path([(0, 10.0, -60.0, 1.5), (4_666_667, 10.0, 0.3, 1.5), (9_000_000, 10.0, 60.0, 1.5)]),
        },
        # shuttles into the parked car every other second: contact, separation, contact again
        {
            "id": "shuttle",
            "kind": "vehicle",
            "path": _path([(k * 1_000_000, 50.0 if k % 2 else 30.0, 0.0, 0.0) for k in range(14)]),
        },
        {"id": "parked", "kind": "vehicle", "path": _path([(0, 53.0, 0.0, 0.0)])},
        {
            "id": "walker",
            "kind": "pedestrian",
            "path": _path([(2_000_000, 20.0, -8.0, 1.6), (9_000_000, 20.0, 8.0, 1.6)]),
        },
    ]
    scenario = load_scenario(write_doc(doc))
    params = scenario.ego.vehicle
    replays = {a.id: PathReplay(a.path) for a in scenario.actors}
    engine = Engine(scenario, 0)
    reference = ContactTracker()
    seen = []
    while engine.t_us < scenario.duration_us:
        events = engine.advance(0.05, 0.6, 1)
        e, t = engine.ego, engine.t_us
        vx, vy = e.speed_mps * math.cos(e.pose.yaw_rad), e.speed_mps * math.sin(e.pose.yaw_rad)
        ego = Body("ego", ego_box(e, params), vx, vy)
        actors = [
            Body(a.id, Box(p.x_m, p.y_m, p.yaw_rad, a.length_m, a.width_m), *replays[a.id].velocity_at(t))
            for a, p in zip(scenario.actors, engine.actor_poses().values(), strict=True)
        ]
        assert events == reference.update(engine.tick, t, ego, actors), engine.tick
        seen += events
    pairs = [(c.actor_a, c.actor_b) for c in seen]
    assert ("east", "north") in pairs and pairs.count(("shuttle", "parked")) > 1
    assert any(a == "ego" for a, _ in pairs)


def test_a_pair_placed_overlapping_is_reported_at_step_0(minimal_doc, write_doc):
    """A parked car placed on the ego: the engine held the tick-0 contact, but the bridge
    reset its step-0 contacts to none, and the pair, overlapping from then on, was never
    reported: the ego drove through the car with no contact in the run."""
    from simforge_ros.backends.embedded import EmbeddedBackend
    from simforge_ros.bridge_core import BridgeConfig, BridgeCore
    from simforge_ros.core.faults import FaultPlan
    from simforge_ros.core.lockstep import StepRequest
    from simforge_ros.core.values import Action

    doc = minimal_doc()
    doc["actors"] = [{"id": "parked", "kind": "vehicle", "length_m": 4.5, "path": _path([(0, 2.0, 0.0, 0.0)])}]
    core = BridgeCore(EmbeddedBackend(str(write_doc(doc)), 20_000, 32, 24), BridgeConfig((), None, FaultPlan.parse([])))
    observation, _ = core.step(StepRequest(0, 0, 100_000, 0, True, Action(0, 0, 0, 0.0, 0.0)))
    ((tick, t_us, a, b, fault),) = [(c.tick, c.t_us, c.actor_a, c.actor_b, c.harness_fault)
                                    for c in observation.contacts]
    assert (tick, t_us, a, b, fault) == (0, 0, "ego", "parked", True)  # the ego stands: the harness's
    later, _ = core.step(StepRequest(1, 100_000, 100_000, 0, False, Action(1, 1, 100_000, 0.0, 0.0)))
    assert later.contacts == ()  # still overlapping: not again
