"""sim_bridge.ground_truth: every scripted actor and signal on /simforge/ground_truth, once
a step at its exact time, published with the step's frames; recorded in the bag (never
chained), counted and digested in the manifest, and held to the bag by verify."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from runs import lockstep, manifest_of, steps_of

from simforge_ros import topics
from simforge_ros.engine import load_scenario
from simforge_ros.engine.paths import PathReplay
from simforge_ros.engine.render import SIGNAL_RGB, signal_boxes
from simforge_ros.engine.signals import signal_state
from simforge_ros.record.bag import read_bag
from simforge_ros.record.verify import verify_run

pytestmark = pytest.mark.ros


@pytest.mark.parametrize("layout", ["processes", "single"])
def test_a_run_with_ground_truth_records_the_world_of_each_step(tmp_path, layout):
    run = lockstep(tmp_path, "red_signal", steps=30, layout=layout,
                   sets={"sim_bridge": {"ground_truth": True, "markers": True}})
    plain = lockstep(tmp_path, "red_signal", steps=30, layout=layout)
    assert run.status == plain.status == "counted"
    assert (run.chain_digest, run.frames_digest) == (plain.chain_digest, plain.frames_digest)  # in no chain
    scenario = load_scenario("red_signal")
    replays = [PathReplay(a.path) for a in scenario.actors]
    steps = {s["timing"]["t_us"]: s["timing"]["step"] for s in steps_of(run)}
    items = list(read_bag(Path(run.run_dir) / "bag"))
    truth = [item for item in items if item.topic == topics.GROUND_TRUTH]
    markers = {item.t_ns: item.msg.markers for item in items if item.topic == topics.MARKERS}
    assert sorted(markers) == [k * 100_000_000 for k in range(30)]
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
        # the same world drawn: a box per actor, a sphere per signal, at the same time
        drawn = markers[item.t_ns]
        assert [(m.ns, m.id) for m in drawn] == [("actors", k) for k in range(len(msg.actors))] + [
            ("signals", k) for k in range(len(msg.signals))]
        for m, actor, spec in zip(drawn, msg.actors, scenario.actors, strict=False):
            assert (m.pose.position.x, m.pose.position.y) == (actor.pose.x_m, actor.pose.y_m)
            assert 2 * math.atan2(m.pose.orientation.z, m.pose.orientation.w) == pytest.approx(actor.pose.yaw_rad)
            assert (round(m.color.r * 255), round(m.color.g * 255), round(m.color.b * 255)) == spec.color
            assert (m.scale.x, m.scale.y, m.scale.z) == (actor.length_m, actor.width_m, actor.height_m)
            assert m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec == item.t_ns
        for m, head in zip(drawn[len(msg.actors):], msg.signals, strict=True):
            assert (m.pose.position.x, m.pose.position.y) == (head.x_m, head.y_m)
            # where the cameras draw the lit head, not 0.5 m lower on its pole (an audit's
            # projection through /tf and CameraInfo landed on the grey pole)
            lit = next(b for b in signal_boxes(head.x_m, head.y_m, head.state) if b.top_rgb == SIGNAL_RGB[head.state])
            assert m.pose.position.z == pytest.approx(0.5 * (lit.z0_m + lit.z1_m))
            assert m.scale.x == m.scale.y == m.scale.z == pytest.approx(lit.length_m)
            assert (round(m.color.r * 255), round(m.color.g * 255), round(m.color.b * 255)) == SIGNAL_RGB[head.state]
    assert len(moved) > len(scenario.actors)  # the actors are seen moving
    assert {k: v["messages"] for k, v in manifest_of(run)["ground_truth"].items()} == {
        topics.GROUND_TRUTH: 30, topics.MARKERS: 30}
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
    said = "topic /simforge/ground_truth: the bag's ground-truth and marker messages are not those recorded"
    assert said in result.detail


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ground_truth_driver.py"


def _example():
    """examples/ground_truth_driver.py as a module, for its decide()."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ground_truth_driver", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_external_planner_decides_from_the_ground_truth_of_its_step(tmp_path, monkeypatch):
    """examples/ground_truth_driver.py awaits each step's ground truth by its exact t_us (it
    may come before the Decide request or after it) and brakes for an actor ahead: every
    recorded action is its policy applied to that step's recorded state and ground truth,
    and the run repeats bit for bit across layouts."""
    import subprocess
    import sys

    from simforge_ros.isolation import lease_domain

    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        driver = subprocess.Popen([sys.executable, str(EXAMPLE)], env=dict(lease.env), stdin=subprocess.DEVNULL)
        try:
            runs = [lockstep(tmp_path, steps=120, layout=layout, driver="external",
                             sets={"sim_bridge": {"ground_truth": True}}) for layout in ("processes", "single")]
        finally:
            driver.kill()
            driver.wait()
    assert [r.status for r in runs] == ["counted", "counted"], [r.refusal for r in runs]
    assert runs[0].chain_digest == runs[1].chain_digest
    policy = _example()
    items = list(read_bag(Path(runs[0].run_dir) / "bag"))
    states = {item.msg.t_us: item.msg for item in items if item.topic == topics.STATE}
    truths = {item.msg.t_us: item.msg for item in items if item.topic == topics.GROUND_TRUTH}
    braked = cruised = 0
    for step in steps_of(runs[0]):
        t_us = step["timing"]["t_us"]
        ahead = policy.blocking(states[t_us], truths[t_us])
        assert step["action"]["accel_mps2"] == policy.decide(states[t_us], truths[t_us])
        braked, cruised = braked + bool(ahead), cruised + (not ahead)
    assert braked and cruised  # both branches of the policy were taken


def test_the_planner_refuses_a_step_whose_ground_truth_never_comes(tmp_path, monkeypatch):
    """With the bridge's ground truth off, nothing is published: the example refuses step
    0 by name after its wait (never deciding without it)."""
    import subprocess
    import sys

    from simforge_ros.isolation import lease_domain

    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        driver = subprocess.Popen([sys.executable, str(EXAMPLE), "--once"], env=dict(lease.env),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        try:
            run = lockstep(tmp_path, steps=5, layout="processes", driver="external")
            said, _ = driver.communicate(timeout=30)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
    assert run.status == "refused" and run.refusal["code"] == "missing_frame" and run.refusal["step"] == 0
    assert "no /simforge/ground_truth with t_us=0 within 5 s" in run.refusal["detail"]
    assert driver.returncode == 1 and f"run {run.run_id}: refused missing_frame" in said


def test_a_planner_started_after_the_run_gets_step_0s_ground_truth(tmp_path, monkeypatch):
    """README's order: the run first, waiting for its driver, then the driver. The bridge's
    discovery of a driver started so can lag the clock master's by seconds, and step 0's
    ground truth went out before the driver's reader was matched: refused missing_frame
    ("no /simforge/ground_truth with t_us=0 within 5 s") in about 1 run in 11 (10 of 107)."""
    import subprocess
    import sys
    import threading

    from runs import wait_for_nodes

    from simforge_ros.isolation import lease_domain

    results = []
    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        for index in range(8):
            runs = tmp_path / f"runs{index}"
            runs.mkdir()
            run = threading.Thread(target=lambda at=runs: results.append(lockstep(
                at, steps=3, layout="processes", driver="external", sets={"sim_bridge": {"ground_truth": True}})))
            run.start()
            try:
                wait_for_nodes(lease.domain_id, "clock_master")  # the run waits for its driver
                driver = subprocess.run([sys.executable, str(EXAMPLE), "--once"], env=dict(lease.env),
                                        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
            finally:
                run.join(timeout=120)
            assert results[-1].status == "counted", (index, results[-1].refusal, driver.stderr)
            assert driver.returncode == 0 and f"run {results[-1].run_id}: counted" in driver.stdout


def test_the_planner_with_once_exits_for_a_run_refused_before_it_answered(tmp_path, monkeypatch):
    """It exited only for a run it had answered: one refused at step 0 by the bridge's fault
    (before any Decide) left it waiting for ever, a CI job built on --once hung."""
    import subprocess
    import sys

    from simforge_ros.isolation import lease_domain

    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        driver = subprocess.Popen([sys.executable, str(EXAMPLE), "--once"], env=dict(lease.env),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        try:
            run = lockstep(tmp_path, steps=5, layout="processes", driver="external",
                           sets={"sim_bridge": {"ground_truth": True}}, faults=("drop_frame@0",))
            said, _ = driver.communicate(timeout=30)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
    assert run.status == "refused" and run.refusal["step"] == 0, run.refusal
    assert driver.returncode == 1 and f"run {run.run_id}: refused {run.refusal['code']}" in said
