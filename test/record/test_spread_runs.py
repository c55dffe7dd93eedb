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


def test_runs_of_other_seeds_are_not_repeats_and_are_refused_unless_forced(make_run, capsys):
    """Seeds 0, 0 and 1 gave "first difference at step 0 (timing.world_digest)" as if the
    noise floor were the seeds' difference."""
    a, b = make_run("a", steps=10, seed=0), make_run("b", steps=10, seed=1)
    assert main([str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("simforge spread: ") and "different seed (0 vs 1)" in err and err.count("\n") == 1
    assert main([str(a), str(b), "--force"]) == 0  # these fabricated runs draw nothing from their seed
    assert "seed (0 vs 1)" in capsys.readouterr().out


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


def test_runs_that_record_the_same_steps_but_end_differently_are_not_identical(make_run, capsys):
    """A counted 20-step run and a run refused at step 20 record the same 20 steps: spread
    said "identical ... the noise floor is 0" and exited 0."""
    counted, refused = make_run("counted", steps=20), make_run("refused", steps=40, refuse_at=20)
    assert main([str(counted), str(refused)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[1:3] == ["the common steps are the same in every run",
                        "the runs ended differently: counted, refused:participant_timeout at step 20"]
    assert main([str(counted), str(refused), "--json"]) == 1
    got = json.loads(capsys.readouterr().out)
    assert (got["identical"], got["first_step"]) == (False, None)
    assert got["outcomes"] == ["counted", "refused:participant_timeout at step 20"]


def test_a_stored_digest_edited_is_a_difference(make_run, capsys):
    a, b = make_run("a", steps=10), make_run("b", steps=10)
    lines = (b / "steps.jsonl").read_text().splitlines()
    record = json.loads(lines[4])
    record["digest"] = "0" * 64
    lines[4] = json.dumps(record)
    (b / "steps.jsonl").write_text("\n".join(lines) + "\n")
    assert main([str(a), str(b)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "first difference at step 4 (digest); 0 of 10 steps differ"
    assert out[2].startswith("every field of that step is the same but its stored digest")


def test_what_no_chain_holds_differing_is_a_difference(make_run, capsys):
    a, b = make_run("a", steps=10), make_run("b", steps=10)
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["camera_info"]["front"]["digest"] = "f" * 64
    (b / "manifest.json").write_text(json.dumps(manifest))
    assert main([str(a), str(b), "--json"]) == 1
    got = json.loads(capsys.readouterr().out)
    assert got["identical"] is False and got["first_step"] is None
    original = json.loads((a / "manifest.json").read_text())["camera_info"]["front"]["digest"]
    (said,) = got["apart"]
    assert said == ("b: every step record is the same (10 steps), but the messages no chain holds differ "
                           f"(camera_info.front.digest: '{original}' vs '{'f' * 64}')")


def test_runs_with_no_step_in_common_give_no_noise_floor(make_run, capsys):
    """Two runs refused at step 0: "identical: ...; the noise floor is 0" over no step."""
    a, b = make_run("a", steps=10, refuse_at=0), make_run("b", steps=10, refuse_at=0)
    assert main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "0 steps in common" in out and "no step in common: no noise floor to give" in out
    assert "the noise floor is 0" not in out


def test_a_run_stopped_before_step_0_beside_a_counted_one_is_said_to_have_no_step(make_run, capsys):
    """A --repeat interrupted before its second run's step 0: spread said "the common steps
    are the same in every run" of no step, and called what step 0 records (the engine's
    digests, the bridge's backend), missing from the stopped run, a different setup."""
    counted, stopped = make_run("counted", steps=20), make_run("stopped", steps=20, refuse_at=0)
    for run, engine, backend in ((counted, "2abb74bbc3263b27", {"params": {"engine_sha256": "2abb"}}),
                                 (stopped, None, None)):
        manifest = json.loads((run / "manifest.json").read_text())
        manifest.setdefault("digests", {})["engine"] = engine
        manifest["digests"]["weights"] = "ab12" if engine else None  # known before step 0: a difference
        manifest.setdefault("nodes", {}).pop("sim_bridge/backend", None)
        if backend is not None:
            manifest["nodes"]["sim_bridge/backend"] = backend
        (run / "manifest.json").write_text(json.dumps(manifest))
    assert main([str(counted), str(stopped)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[1:3] == ["no step in common", "the runs ended differently: counted, "
                                             "refused:participant_timeout at step 0"], out
    assert not any("engine" in line or "backend" in line for line in out), out
    assert out[3:] == ["stopped: set up differently: digests.weights ('ab12' vs None)"], out


def test_contacts_the_harness_caused_are_kept_out_of_the_drivers_count(make_run, capsys):
    """A scripted car rear-ending the ego and the ego driving into a car counted alike in
    spread ([1, 1]); a harness-caused contact is kept out of every rate, and said apart."""
    a, b = make_run("a", steps=40), make_run("b", steps=40)  # one contact each, at step 30, the ego's
    manifest = json.loads((a / "manifest.json").read_text())
    manifest["contacts"]["harness_faults"] = 1
    manifest["contacts"]["events"][0]["harness_fault"] = True
    (a / "manifest.json").write_text(json.dumps(manifest))
    main([str(a), str(b), "--json"])  # (only the manifest is edited here: the bags are the same)
    got = json.loads(capsys.readouterr().out)
    assert (got["contacts"], got["harness_contacts"]) == ([0, 1], [1, 0])
    main([str(a), str(b)])
    out = capsys.readouterr().out.splitlines()
    assert "contacts differ (the driver's; harness faults kept out): 0, 1" in out
    assert "contacts the scripted traffic caused (harness faults) differ: 1, 0" in out


def test_the_first_field_of_a_step_does_not_hang_on_the_order_the_runs_are_given_in(make_run, capsys):
    """A run whose driver's steer and one whose observed speed differ at the same step:
    the step's first field is the one diff ranks first (the state, before the controller
    acting on it), whichever run comes second. It named action.steer_rad one way round."""
    clean = make_run("clean", steps=20)
    steer, speed = make_run("steer", steps=20, perturb_action_at=12), make_run("speed", steps=20, perturb_state_at=12)
    named = []
    for order in ((clean, steer, speed), (clean, speed, steer)):
        assert main([*map(str, order), "--json"]) == 1
        got = json.loads(capsys.readouterr().out)
        named.append((got["first_step"], got["first_field"]))
    assert named == [(12, "state.speed_mps"), (12, "state.speed_mps")]


def test_runs_that_differ_give_each_metric_with_its_uncertainty(make_run, capsys):
    """Not a single run's figure: each per-run metric over the runs, with the half-width
    of its mean's 95 % interval."""
    runs = [make_run("base", steps=40), make_run("n1", steps=40, perturb_action_at=12),
            make_run("n2", steps=40, perturb_action_at=20)]
    assert main([*map(str, runs), "--json"]) == 1
    got = json.loads(capsys.readouterr().out)["metrics"]
    assert set(got) == {"distance travelled", "mean speed", "steps recorded", "contacts (the driver's)"}
    assert got["steps recorded"] == {"unit": "steps", "values": [40, 40, 40], "mean": 40, "sd": 0, "ci95": 0}
    assert got["contacts (the driver's)"]["values"] == [1, 1, 1]
    distance = got["distance travelled"]
    assert len(set(distance["values"])) > 1 and distance["sd"] > 0 and distance["ci95"] > distance["sd"]
    assert main(list(map(str, runs))) == 1
    out = capsys.readouterr().out.splitlines()
    at = out.index("per run, over the 3 runs (mean ± the half-width of its 95 % interval; sd; lowest to highest): "
                   "rank on these, never on one run")
    assert out[at + 1].split()[:3] == ["distance", "travelled", f"{distance['mean']:.6g}"]
    assert out[at + 3] == "  steps recorded           40 steps ± 0 (sd 0; 40 to 40)"
