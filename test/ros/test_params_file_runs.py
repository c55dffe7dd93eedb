"""Runs set up from a ROS 2 parameter file, and periods given in seconds, over real DDS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runs import lockstep, simforge

pytestmark = pytest.mark.ros


def test_a_kept_runs_parameter_file_runs_the_same_run_again(tmp_path):
    first = simforge("run", "red_signal", "--seed", "4", "--steps", "12", "--layout", "single",
                     "--set", "sim_bridge.cameras=[front]", "--inject", "perturb_action=0.001@5",
                     "--out", str(tmp_path / "a"), "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    kept = json.loads(first.stdout)
    again = simforge("run", "--params-file", f"{kept['run_dir']}/params.yaml", "--layout", "single",
                     "--out", str(tmp_path / "b"), "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    rerun = json.loads(again.stdout)
    assert (rerun["scenario"], rerun["steps"], rerun["chain_digest"]) == ("red_signal", 12, kept["chain_digest"])
    assert "clock_master.run_id, recorder.out_dir, recorder.run_id ignored: each run has its own" in again.stderr
    # the command line wins over the file: another seed is another run
    other = simforge("run", "--params-file", f"{kept['run_dir']}/params.yaml", "--seed", "5", "--layout",
                     "single", "--out", str(tmp_path / "c"), "--json", cwd=tmp_path)
    assert json.loads(other.stdout)["chain_digest"] != kept["chain_digest"]


@pytest.mark.parametrize("layout", ["single", "processes"])
def test_periods_in_seconds_run_as_the_same_periods_in_microseconds(tmp_path, layout):
    seconds = lockstep(tmp_path, steps=6, layout=layout,
                       sets={"clock_master": {"decision_s": 0.2}, "sim_bridge": {"tick_s": 0.04}})
    micros = lockstep(tmp_path, steps=6, layout=layout,
                      sets={"clock_master": {"decision_us": 200_000}, "sim_bridge": {"tick_us": 40_000}})
    assert (seconds.status, micros.status) == ("counted", "counted"), (seconds.refusal, micros.refusal)
    assert seconds.chain_digest == micros.chain_digest


def test_the_shipped_parameter_file_runs_the_torch_planner_with_its_four_cameras(tmp_path):
    """config/simforge.yaml names the bridge's default rig (chase, front); with the torch
    planner the bridge renders the planner's four cameras, as the launch file does."""
    shipped = Path(__file__).resolve().parents[2] / "config" / "simforge.yaml"
    out = simforge("run", "--params-file", str(shipped), "--driver", "torch", "--steps", "6", "--layout",
                   "single", "--out", str(tmp_path / "runs"), "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr + out.stdout
    result = json.loads(out.stdout)
    first = json.loads((Path(result["run_dir"]) / "steps.jsonl").read_text().splitlines()[0])
    assert set(first["frames"]) == {"front", "left", "rear", "right"}


@pytest.mark.parametrize("layout", ["single", "processes"])
def test_nodes_given_use_sim_time_by_a_stacks_shared_section_run_the_same_run(tmp_path, layout, monkeypatch):
    """A launch that passes a stack's parameter file hands every node ``/**: use_sim_time:
    true``. The nodes' own timers (matching polls, progress, a frame's deadline) then must
    not follow /clock, which moves only once they have fired: such a run used to wait 30 s
    and be refused participant_timeout at start-up."""
    import yaml

    from simforge_ros import runner

    plain = lockstep(tmp_path, steps=8, layout=layout)
    write = runner.write_params_file

    def as_a_launch_passes_it(path, params):
        write(path, params)
        doc = yaml.safe_load(path.read_text())
        doc["/**"] = {"ros__parameters": {"use_sim_time": True}}
        path.write_text(yaml.safe_dump(doc))

    monkeypatch.setattr(runner, "write_params_file", as_a_launch_passes_it)
    sim_time = lockstep(tmp_path, steps=8, layout=layout)
    assert "use_sim_time: true" in (Path(sim_time.run_dir) / "params.yaml").read_text()
    assert (sim_time.status, sim_time.refusal) == ("counted", None)
    assert sim_time.chain_digest == plain.chain_digest


def test_a_kept_external_runs_parameter_file_awaits_the_driver_of_a_route_run(tmp_path):
    """recorder.await_driver follows the run's driver whatever the file says: a kept
    external run's `false`, taken by a route run, let its manifest call its driver external
    (the recorder stopped waiting for the driver's parameters)."""
    kept = tmp_path / "external.yaml"
    kept.write_text("recorder:\n  ros__parameters:\n    await_driver: false\n")
    out = simforge("run", "right_turn", "--params-file", str(kept), "--steps", "3", "--layout", "single",
                   "--out", str(tmp_path / "runs"), "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr + out.stdout
    run_dir = Path(json.loads(out.stdout)["run_dir"])
    assert "await_driver: true" in (run_dir / "params.yaml").read_text()
