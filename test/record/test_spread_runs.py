"""`simforge spread` on fabricated runs: the noise floor of repeats, what it names when
they differ, and its refusals."""

from __future__ import annotations

import json

from simforge_ros.record.spread_runs import main


def test_repeats_that_differ_only_in_wall_time_are_identical(make_run, capsys):
    runs = [str(make_run(f"r{i}", steps=30, wall_seed=i)) for i in range(3)]
    assert main(runs) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "3 runs of straight_road, 30 steps in common"
    assert out[1].startswith("identical: every step is the same in every run (chain ")
    assert out[1].endswith("the noise floor is 0")


def test_a_perturbed_run_is_named_with_its_first_step_and_spread(make_run, capsys):
    base, other = make_run("base", steps=40), make_run("nudged", steps=40, perturb_action_at=12)
    assert main([str(base), str(other), "--json"]) == 1
    got = json.loads(capsys.readouterr().out)
    assert (got["identical"], got["first_step"], got["common_steps"]) == (False, 12, 40)
    assert got["first_field"] == "action.steer_rad"
    assert got["spread"]["action.steer_rad"]["step"] == 12
    assert got["spread"]["action.steer_rad"]["value"] > 0.0009  # the fabricated nudge is 1e-3 (then clipped)
    assert got["position"]["value"] > 0 and got["position"]["step"] > 12
    assert got["runs"] == ["base", "nudged"] and got["lengths"] == [40, 40]
    assert main([str(base), str(other)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("first difference at step 12 (action.steer_rad); ")
    assert any(line.split()[:2] == ["action.steer_rad", "0.001"] and line.endswith("at step 12") for line in out)


def test_runs_of_other_scenarios_are_refused_unless_forced(make_run, capsys):
    a, b = make_run("a", steps=10), make_run("b", steps=10, scenario="other_road")
    assert main([str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("simforge spread: ") and "different scenario" in err and err.count("\n") == 1
    assert main([str(a), str(b), "--force"]) == 1
    out = capsys.readouterr().out.splitlines()
    # the fabricated world digest is the scenario's name's; the ego drives the same
    assert out[1] == "first difference at step 0 (timing.world_digest); 10 of 10 steps differ"
    assert out[2] == "the ego's pose and speed and the driver's commands are the same in every run"


def test_one_run_or_a_missing_one_is_a_usage_error(make_run, tmp_path, capsys):
    a = make_run("a", steps=5)
    assert main([str(a)]) == 2
    assert capsys.readouterr().err == "simforge spread: RUN: expected two run directories or more, got 1\n"
    assert main([str(a), str(tmp_path / "gone")]) == 2
    assert capsys.readouterr().err == f"simforge spread: {tmp_path / 'gone'}: no such run directory\n"


def test_json_names_a_setting_only_one_run_has_with_null(make_run, capsys):
    """A run with an external driver has no driver parameters in its manifest: --json
    crashed on the marker of a missing value (TypeError: not JSON serializable)."""
    a, b = make_run("a", steps=10), make_run("b", steps=10)
    manifest = json.loads((b / "manifest.json").read_text())
    driver = manifest["nodes"].pop("driver")
    (b / "manifest.json").write_text(json.dumps(manifest))
    assert main([str(a), str(b), "--json"]) == 0
    [setup] = json.loads(capsys.readouterr().out)["setup"]
    assert setup == [{"field": "nodes.driver.params", "a": driver["params"], "b": None}]
