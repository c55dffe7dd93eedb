from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from simforge_ros.core.diffing import MISSING
from simforge_ros.record.diff_runs import (
    DiffRefused,
    describe,
    describe_setup,
    diff_runs,
    main,
    setup_differences,
)
from simforge_ros.record.rundir import RunDirError

MakeRun = Callable[..., Path]


def test_identical_runs_despite_wall_clock(make_run: MakeRun, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_run("a", wall_seed=1), make_run("b", wall_seed=2)
    wall_a = json.loads((a / "steps.jsonl").read_text().splitlines()[3])["wall"]
    wall_b = json.loads((b / "steps.jsonl").read_text().splitlines()[3])["wall"]
    assert wall_a != wall_b  # the runs really differ in wall-clock readings
    result = diff_runs(a, b)
    assert result.identical and result.steps == 60
    assert main([str(a), str(b)]) == 0
    assert capsys.readouterr() == ("identical (60 steps)\n", "")


def test_a_manifest_at_odds_with_its_steps_is_noted(make_run: MakeRun, capsys: pytest.CaptureFixture[str]) -> None:
    """diff reads steps.jsonl; a manifest whose chain digest is not its last step's (edited,
    or another run's copied in) was left unsaid, and the runs were called identical."""
    a, b = make_run("a"), make_run("b")
    manifest = json.loads((b / "manifest.json").read_text())
    last = manifest["chain_digest"]
    manifest["chain_digest"] = "0" * 64
    (b / "manifest.json").write_text(json.dumps(manifest))
    assert main([str(a), str(b)]) == 0
    out, err = capsys.readouterr()
    assert out == "identical (60 steps)\n"
    assert err == (f"simforge diff: note: {b / 'manifest.json'}: chain_digest '{'0' * 16}' is not its last step's "
                   f"('{last[:16]}'): the record was edited or mixed up; `simforge verify {b}` holds it to its bag\n")


def test_perturbed_action_is_the_controller(make_run: MakeRun, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_run("a"), make_run("b", perturb_action_at=40, wall_seed=5)
    result = diff_runs(a, b)
    assert (result.identical, result.step, result.first, result.field) == (False, 40, "controller", "action.steer_rad")
    assert isinstance(result.a, float) and result.b == pytest.approx(result.a + 1e-3)
    assert main([str(a), str(b)]) == 1
    line = capsys.readouterr().out
    assert line == describe(result) + "\n"
    assert line.startswith("first difference at step 40: controller output differed first (action.steer_rad: ")


def test_perturbed_state_is_the_vehicle_state(make_run: MakeRun, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_run("a"), make_run("b", perturb_state_at=40)
    result = diff_runs(a, b)
    assert (result.step, result.first, result.field) == (40, "state", "state.speed_mps")
    assert main([str(a), str(b)]) == 1
    assert capsys.readouterr().out.startswith(
        "first difference at step 40: vehicle state differed first (state.speed_mps: "
    )


def test_json_keys(make_run: MakeRun, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_run("a"), make_run("b", perturb_action_at=40)
    assert main([str(a), str(b), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"identical", "step", "first", "field", "a", "b", "frames_differ", "setup"}
    assert (out["identical"], out["step"], out["first"], out["field"]) == (False, 40, "controller", "action.steer_rad")
    assert out["b"] == pytest.approx(out["a"] + 1e-3)
    same = make_run("same")  # the same run again: identical
    assert main([str(a), str(same), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "identical": True, "step": None, "first": None, "field": None, "a": None, "b": None,
        "frames_differ": False, "setup": [],
    }


def test_different_lengths(make_run: MakeRun) -> None:
    a, b = make_run("a"), make_run("b", refuse_at=30)
    result = diff_runs(a, b)
    assert (result.step, result.first, result.a, result.b) == (30, "steps", 60, 30)


@pytest.mark.parametrize(
    ("fields", "what"),
    [
        ({"scenario": "curvy_road"}, "scenario"),
        ({"latency_steps": 2}, "contract"),
        ({"decision_us": 100_000}, "contract"),
    ],
)
def test_other_scenario_or_contract_is_refused_unless_forced(
    make_run: MakeRun, fields: dict[str, object], what: str, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = make_run("a"), make_run("b", **fields)
    with pytest.raises(DiffRefused, match=f"different {what} .*--force"):
        diff_runs(a, b)
    assert main([str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("simforge diff: ") and f"different {what}" in err and err.count("\n") == 1
    if what == "contract":  # the field that differs, not the whole contract
        (field,) = fields
        assert f"{field}: " in err
        assert "(latency_steps: 1 vs 2)" in err if field == "latency_steps" else "ticks_per_step: 5 vs 10" in err
    else:
        assert "vs 'curvy_road')" in err
    forced = diff_runs(a, b, force=True)
    assert not forced.identical and forced.step == 0
    # another scenario: the world differs (state, world digest); another contract: timing
    assert forced.first == ("state" if what == "scenario" else "timing")
    assert main([str(a), str(b), "--force"]) == 1


def test_bad_input_exits_2(make_run: MakeRun, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_run("a"), make_run("b")
    lines = (b / "steps.jsonl").read_text()
    (b / "steps.jsonl").write_text(lines[: len(lines) // 3])
    with pytest.raises(RunDirError, match=r"steps\.jsonl: line \d+: not valid JSON \(truncated\?\)"):
        diff_runs(a, b)
    assert main([str(a), str(b), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err and str(b / "steps.jsonl") in captured.err
    assert main([str(a), str(a.parent / "nope")]) == 2
    assert "nope: no such run directory" in capsys.readouterr().err
    assert main([str(a)]) == 2  # usage


def test_runs_set_up_differently_say_how_next_to_their_steps(make_run: MakeRun,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_run("a"), make_run("b", seed=8, perturb_action_at=40)
    assert main([str(a), str(b)]) == 1
    first, setup = capsys.readouterr().out.splitlines()
    assert first.startswith("first difference at step 40: controller output")
    assert setup == "set up differently: seed (7 vs 8)"
    assert main([str(a), str(b), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["setup"] == [{"field": "seed", "a": 7, "b": 8}]
    assert main([str(a), str(make_run("c"))]) == 0  # the same setup: no second line
    assert capsys.readouterr().out == "identical (60 steps)\n"


def _manifest(**changes: object) -> dict[str, object]:
    manifest: dict[str, object] = {
        "seed": 0, "faults": [], "run_id": "a",
        "digests": {"driver_config": "1" * 64, "engine_version": "simforge-engine/1.0.0"},
        "nodes": {"clock_master": {"params": {"seed": 0, "run_id": "a", "decision_us": 100_000},
                                   "process": {"pid": 1, "host": "h"}},
                  "recorder": {"params": {"out_dir": "/runs/a", "storage": "mcap"}}},
        "participants": {"driver": {"node": "/driver", "pid": 1, "host": "h", "external": False}},
        "versions": {"simforge_ros": "0.1.0", "packages": {"ros-rclpy": "9.1.2"}},
        "wall": {"start_ns": 1},
    }
    manifest.update(changes)
    return manifest


def test_setup_differences_leave_out_what_differs_between_any_two_runs() -> None:
    a = _manifest()
    b = _manifest(run_id="b", wall={"start_ns": 2}, nodes={
        "clock_master": {"params": {"seed": 0, "run_id": "b", "decision_us": 100_000},
                         "process": {"pid": 2, "host": "g"}},
        "recorder": {"params": {"out_dir": "/runs/b", "storage": "mcap"}}},
        participants={"driver": {"node": "/driver", "pid": 2, "host": "g", "external": False}})
    assert setup_differences(a, b) == []  # names, places, processes and wall time only


def test_a_node_entry_that_is_not_an_object_is_a_difference_not_a_crash() -> None:
    a = _manifest()
    b = _manifest(nodes={**a["nodes"], "recorder": 5})
    assert ("nodes.recorder.params", {"storage": "mcap"}, 5) in setup_differences(a, b)


def test_an_entry_one_run_lacks_is_shown_without_what_differs_on_every_run() -> None:
    """A run whose driver was not told: the setup line showed the other's pid. A salvaged
    run knows none of its participants (no Finish told it): nothing to compare them with."""
    driver = {"node": "/driver", "pid": 17917, "host": "h", "external": False}
    bridge = {"node": "/sim_bridge", "pid": 17918, "host": "h"}
    a = _manifest(participants={"driver": driver, "sim_bridge": bridge})
    b = _manifest(participants={"sim_bridge": {**bridge, "pid": 5}})
    assert setup_differences(a, b) == [("participants.driver", {"node": "/driver", "external": False}, MISSING)]
    assert setup_differences(a, _manifest(participants={})) == []
    assert setup_differences(_manifest(participants={}), a) == []


def test_setup_differences_name_each_field_in_order() -> None:
    a = _manifest()
    b = _manifest(
        seed=3, faults=["drop_frame@4"],
        digests={"driver_config": "2" * 64, "engine_version": "simforge-engine/1.0.0"},
        nodes={"clock_master": {"params": {"seed": 3, "run_id": "b", "decision_us": 50_000}},
               "recorder": {"params": {"out_dir": "/runs/b", "storage": "sqlite3"}},
               "driver": {"params": {"policy": "torch"}}},
        participants={"driver": {"node": "/my_ecu", "pid": 9, "host": "ecu", "external": True}},
        versions={"simforge_ros": "0.1.0", "packages": {"ros-rclpy": "9.2.0"}},
    )
    found = setup_differences(a, b)
    assert found == [
        ("seed", 0, 3),  # said once: not again as the clock master's parameter
        ("faults", [], ["drop_frame@4"]),
        ("nodes.clock_master.params.decision_us", 100_000, 50_000),
        ("nodes.driver.params", MISSING, {"policy": "torch"}),
        ("nodes.recorder.params.storage", "mcap", "sqlite3"),
        ("participants.driver.external", False, True),
        ("participants.driver.node", "/driver", "/my_ecu"),
        ("digests.driver_config", "1" * 64, "2" * 64),
        ("versions.packages.ros-rclpy", "9.1.2", "9.2.0"),
    ]
    line = describe_setup(found)
    assert line.startswith("set up differently: seed (0 vs 3); faults ([] vs ['drop_frame@4']); ")
    assert line.endswith("; and 4 more (--json lists all)")
    assert describe_setup(found[-3:-1]) == (  # a digest shown by its first 16 hex digits
        "set up differently: participants.driver.node ('/driver' vs '/my_ecu'); "
        f"digests.driver_config ('{'1' * 16}' vs '{'2' * 16}')"
    )
    assert describe_setup([]) == ""


def test_a_run_of_no_step_is_compared_with_any_contract(make_run: MakeRun) -> None:
    """A run refused at step 0 ran under no contract (its manifest has none to give): set
    beside a run of the same scenario, it differs in length, not in contract."""
    a, b = make_run("a", refuse_at=0), make_run("b")
    manifest = json.loads((a / "manifest.json").read_text())
    manifest.update(contract=None, world_digest=None)
    (a / "manifest.json").write_text(json.dumps(manifest))
    result = diff_runs(a, b)
    assert (result.identical, result.first, result.step, result.a, result.b) == (False, "steps", 0, 0, 60)


def test_runs_that_record_the_same_steps_but_end_differently_differ(
        make_run: MakeRun, capsys: pytest.CaptureFixture[str]) -> None:
    """A counted 20-step run and a run refused at step 20 record the same 20 steps: diff
    said "identical (20 steps)" and exited 0, and so for two refusals of other codes."""
    counted, refused = make_run("counted", steps=20), make_run("refused", steps=40, refuse_at=20)
    result = diff_runs(counted, refused)
    assert (result.identical, result.step, result.first) == (False, 20, "end")
    assert (result.a, result.b) == ("counted", "refused:participant_timeout at step 20")
    assert main([str(counted), str(refused)]) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        "first difference at step 20: every step record is the same, but the runs ended differently "
        "(counted vs refused:participant_timeout at step 20)")
    other = make_run("other", steps=40, refuse_at=20)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["refusal"]["code"] = "stale_frame"
    (other / "manifest.json").write_text(json.dumps(manifest))
    assert main([str(refused), str(other), "--json"]) == 1
    got = json.loads(capsys.readouterr().out)
    assert (got["identical"], got["first"], got["a"], got["b"]) == (
        False, "end", "refused:participant_timeout at step 20", "refused:stale_frame at step 20")


def test_what_no_chain_holds_differing_is_a_difference(make_run: MakeRun,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_run("a", steps=10), make_run("b", steps=10)
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["image_headers"]["rear"]["messages"] = 4
    (b / "manifest.json").write_text(json.dumps(manifest))
    assert main([str(a), str(b), "--json"]) == 1
    got = json.loads(capsys.readouterr().out)
    assert (got["identical"], got["step"], got["first"], got["field"]) == (False, None, "messages",
                                                                          "image_headers.rear.messages")
    assert (got["a"], got["b"]) == (5, 4)
    assert main([str(a), str(b)]) == 1
    assert capsys.readouterr().out == ("every step record is the same (10 steps), but the messages no chain holds "
                                       "differ (image_headers.rear.messages: 5 vs 4)\n")


@pytest.mark.parametrize("second", ["{a}", "{a}/", "{a}/../a", "link"])
def test_one_run_given_twice_is_bad_input(make_run: MakeRun, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          second: str) -> None:
    """`diff runs/a runs/a/` said "identical" and `spread` found a noise floor of 0 in one run."""
    from simforge_ros.record.spread_runs import main as spread_main

    a = make_run("a")
    (tmp_path / "link").symlink_to(a)
    other = second.format(a=a) if second != "link" else str(tmp_path / "link")
    assert main([str(a), other]) == 2
    assert capsys.readouterr().err.rstrip().endswith("one directory given twice")
    assert spread_main([str(a), str(make_run("b")), other]) == 2
    assert capsys.readouterr().err.rstrip().endswith("one directory given twice")


def test_two_runs_refused_for_the_same_breach_measured_otherwise_differ(
        make_run: MakeRun, capsys: pytest.CaptureFixture[str]) -> None:
    """An engine 1 us off and one 20 000 us off, both time_drift at step 15: diff said
    "identical (15 steps)". A contract refusal's detail is what the run measured."""
    a, b = make_run("a", steps=40, refuse_at=15), make_run("b", steps=40, refuse_at=15)
    for run, off in ((a, 1), (b, 20_000)):
        manifest = json.loads((run / "manifest.json").read_text())
        detail = f"engine time is {1_500_000 + off} us, expected 1500000 us"
        manifest["refusal"].update(code="time_drift", detail=detail)
        (run / "manifest.json").write_text(json.dumps(manifest))
    result = diff_runs(a, b)
    assert (result.identical, result.first, result.step) == (False, "end", 15)
    assert result.a == "refused:time_drift at step 15: engine time is 1500001 us, expected 1500000 us"
    assert main([str(a), str(b)]) == 1
    assert "1520000 us" in capsys.readouterr().out
    # the other refusals' details name a pid or a wall time: two alike refusals stay identical
    c, d = make_run("c", steps=40, refuse_at=15), make_run("d", steps=40, refuse_at=15)
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["refusal"]["detail"] = "driver (pid 4242) did not answer within 2 s"
    (d / "manifest.json").write_text(json.dumps(manifest))
    assert diff_runs(c, d).identical


def test_no_step_to_look_at_is_offered_for_a_run_that_did_none(make_run: MakeRun,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Two runs refused at step 0 with other codes: diff offered `rerun --hold-at-step 0` and
    `play --from-step 0 --to-step 0` of a run with no step to hold at or play."""
    a, b = make_run("a", steps=10, refuse_at=0), make_run("b", steps=10, refuse_at=0)
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["refusal"]["code"] = "stale_frame"
    (b / "manifest.json").write_text(json.dumps(manifest))
    assert main([str(a), str(b)]) == 1
    out, err = capsys.readouterr()
    assert "ended differently" in out and "to look at step" not in err and "simforge play" not in err


def test_a_step_the_second_run_never_did_is_looked_at_from_the_step_before(make_run: MakeRun,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A counted 15-step run against one refused at step 15 end apart at step 15: diff
    offered `rerun --hold-at-step 15`, a hold the refused run never reaches (it ran to its
    refusal and exited without holding)."""
    a, b = make_run("a", steps=15), make_run("b", steps=20, refuse_at=15)
    assert main([str(a), str(b)]) == 1
    _out, err = capsys.readouterr()
    assert (f"to look at step 15 live, rerun the second run held at step 14, the last it did, and let it do the next "
            f"(`simforge pause --step`): simforge rerun {b} --hold-at-step 14") in err
    assert f"simforge play {b} --from-step 5 --to-step 15" in err  # its bag holds the refused step's /clock


def test_a_step_only_the_first_run_reached_is_looked_at_in_the_first(make_run: MakeRun,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A run refused at step 5 against a counted 5-step run part at step 5, which the second
    never reached: diff offered to hold the second at step 4 and step it, and the rerun said
    "the run ends: step 4 was its last". The first run shows that step."""
    a, b = make_run("a", steps=20, refuse_at=5), make_run("b", steps=5)
    assert main([str(a), str(b)]) == 1
    _out, err = capsys.readouterr()
    assert (f"to look at step 5 live, rerun the first run held at step 4, the last it did, and let it do the next "
            f"(`simforge pause --step`): simforge rerun {a} --hold-at-step 4") in err
    assert f"simforge play {a} --from-step 0 --to-step 5" in err
    assert f"simforge rerun {b}" not in err and f"simforge play {b}" not in err


def test_a_torch_run_not_meant_to_repeat_is_said_so(make_run: MakeRun, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_run("a", steps=20), make_run("b", steps=20)
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["nodes"]["driver"]["params"].update(policy="torch", deterministic=False)
    manifest["steps"] = 20
    (b / "manifest.json").write_text(json.dumps(manifest))
    lines = (b / "steps.jsonl").read_text().splitlines()
    record = json.loads(lines[10])
    record["action"]["accel_mps2"] += 0.5
    lines[10] = json.dumps(record)
    (b / "steps.jsonl").write_text("\n".join(lines) + "\n")
    main([str(a), str(b)])
    _out, err = capsys.readouterr()
    assert f"simforge diff: note: {b}: its driver.deterministic is false: the torch planner samples unseeded" in err


def test_a_side_difference_in_counts_is_named_by_the_count() -> None:
    """The manifest keeps keys sorted: diff said 'camera_info.chase.digest: <64 hex> vs <64
    hex>' of runs whose difference was 10 vs 11 camera_info messages."""
    from simforge_ros.record.diff_runs import manifest_difference

    base = {"status": "refused", "refusal": {"code": "time_drift", "step": 10, "detail": "x"}, "steps": 10}
    a = {**base, "camera_info": {"chase": {"digest": "a" * 64, "messages": 10}}}
    b = {**base, "camera_info": {"chase": {"digest": "b" * 64, "messages": 11}}}
    found = manifest_difference(a, b, 10)
    assert found is not None and (found.field, found.a, found.b) == ("camera_info.chase.messages", 10, 11)
