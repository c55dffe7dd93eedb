"""sim_bridge.ground_truth: every scripted actor and signal on /simforge/ground_truth, once
a step at its exact time, published with the step's frames; recorded in the bag (never
chained), counted and digested in the manifest, and held to the bag by verify."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runs import lockstep, manifest_of, steps_of

from simforge_ros import topics
from simforge_ros.engine import load_scenario
from simforge_ros.engine.paths import PathReplay
from simforge_ros.engine.signals import signal_state
from simforge_ros.record.bag import read_bag
from simforge_ros.record.verify import verify_run

pytestmark = pytest.mark.ros


@pytest.mark.parametrize("layout", ["processes", "single"])
def test_a_run_with_ground_truth_records_the_world_of_each_step(tmp_path, layout):
    run = lockstep(tmp_path, "red_signal", steps=30, layout=layout, sets={"sim_bridge": {"ground_truth": True}})
    plain = lockstep(tmp_path, "red_signal", steps=30, layout=layout)
    assert run.status == plain.status == "counted"
    assert (run.chain_digest, run.frames_digest) == (plain.chain_digest, plain.frames_digest)  # in no chain
    scenario = load_scenario("red_signal")
    replays = [PathReplay(a.path) for a in scenario.actors]
    steps = {s["timing"]["t_us"]: s["timing"]["step"] for s in steps_of(run)}
    truth = [item for item in read_bag(Path(run.run_dir) / "bag") if item.topic == topics.GROUND_TRUTH]
    assert [item.t_ns for item in truth] == [k * 100_000_000 for k in range(30)]
    moved = set()
    for item in truth:
        msg = item.msg
        assert msg.t_us * 1000 == item.t_ns and msg.step == steps[msg.t_us]
        assert [a.id for a in msg.actors] == [a.id for a in scenario.actors]
        for actor, spec, replay in zip(msg.actors, scenario.actors, replays, strict=True):
            assert (actor.pose.x_m, actor.pose.y_m, actor.pose.yaw_rad) == replay.xyz_at(msg.t_us)
            assert (actor.vx_mps, actor.vy_mps) == replay.velocity_at(msg.t_us)
            assert (actor.kind, actor.length_m, actor.width_m, actor.height_m) == (
                spec.kind, spec.length_m, spec.width_m, spec.height_m)
            moved.add((actor.id, actor.pose.x_m, actor.pose.y_m))
        assert [(s.id, s.state, s.x_m, s.y_m) for s in msg.signals] == [
            (s.id, signal_state(s, msg.t_us), s.x_m, s.y_m) for s in scenario.signals]
    assert len(moved) > len(scenario.actors)  # the actors are seen moving
    assert manifest_of(run)["ground_truth"][topics.GROUND_TRUTH]["messages"] == 30
    assert manifest_of(plain)["ground_truth"] == {}
    assert verify_run(Path(run.run_dir)).ok


def test_verify_names_ground_truth_the_bag_does_not_hold(tmp_path):
    run = lockstep(tmp_path, steps=8, layout="single", sets={"sim_bridge": {"ground_truth": True}})
    path = Path(run.run_dir) / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["ground_truth"][topics.GROUND_TRUTH]["digest"] = "0" * 64
    path.write_text(json.dumps(manifest))
    result = verify_run(Path(run.run_dir))
    assert not result.ok and result.first_mismatch["field"] == "manifest.ground_truth"
    assert "topic /simforge/ground_truth: the bag's ground-truth messages are not those recorded" in result.detail
