"""simforge rerun's reading of a kept run (no ROS here; test/ros/test_rerun.py reruns real
runs): the parameter file turns back into the RunSpec that asks the nodes the same."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from simforge_ros.core.errors import ConfigError
from simforge_ros.record.rundir import RunDirError, layout_of
from simforge_ros.rerun import read_params, spec_for
from simforge_ros.runner import RunSpec, node_params, write_params_file

SPECS = [
    RunSpec("right_turn", Path("/runs/a"), "a"),
    RunSpec("red_signal", Path("/runs/a"), "a", driver="torch", seed=9, steps=30, latency_us=200_000,
            faults=("perturb_action=0.001@10", "drop_frame@4")),
    RunSpec("unprotected_left", Path("/runs/a"), "a", driver="external", layout="single",
            sets={"sim_bridge": {"cameras": ["front"], "width": 64, "height": 36},
                  "clock_master": {"decision_s": 0.05, "participant_timeout_ms": 9000}}),
    RunSpec("/scenarios/mine.yaml", Path("/runs/a"), "a", record=False,
            sets={"driver": {"planning_period_s": 0.2}, "recorder": {"storage": "sqlite3"}}),
    RunSpec("right_turn", Path("/runs/a"), "a", driver="torch", sets={"driver": {"cameras": ["chase", "front"]}}),
]


def test_the_bridge_renders_what_the_torch_planner_looks_at() -> None:
    """--driver torch gives the bridge the planner's cameras: the four surround ones, or
    driver.cameras where it is set; a rig set for the bridge itself wins."""
    assert node_params(SPECS[1])["sim_bridge"]["cameras"] == ["front", "left", "rear", "right"]
    assert node_params(SPECS[-1])["sim_bridge"]["cameras"] == ["chase", "front"]
    own = RunSpec("right_turn", Path("/runs/a"), "a", driver="torch",
                  sets={"driver": {"cameras": ["front"]}, "sim_bridge": {"cameras": ["front", "rear"]}})
    assert node_params(own)["sim_bridge"]["cameras"] == ["front", "rear"]
    assert "cameras" not in node_params(SPECS[0])["sim_bridge"]  # the route follower: the default rig


def test_the_recorder_awaits_the_driver_nodes_parameters_unless_the_driver_is_external() -> None:
    """Before step 0, as the clock master's and the bridge's: a short run could end before
    the driver's reached the recorder, whose manifest then called the driver external."""
    assert node_params(SPECS[0])["recorder"]["await_driver"] is True
    assert node_params(SPECS[1])["recorder"]["await_driver"] is True  # torch
    assert node_params(SPECS[2])["recorder"]["await_driver"] is False  # external: it publishes none
    mine = RunSpec("right_turn", Path("/runs/a"), "a", driver="external", sets={"recorder": {"await_driver": True}})
    assert node_params(mine)["recorder"]["await_driver"] is True  # an external driver that publishes some


def _without_names(params: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {node: {k: v for k, v in values.items() if k not in ("run_id", "out_dir")}
            for node, values in params.items()}


@pytest.mark.parametrize("original", SPECS, ids=[s.scenario + "-" + s.driver for s in SPECS])
def test_the_parameter_file_asks_the_nodes_the_same_again(tmp_path: Path, original: RunSpec) -> None:
    params = node_params(original)
    write_params_file(tmp_path / "params.yaml", params)
    kept = SimpleNamespace(manifest={}, path=tmp_path)
    again = spec_for(kept, read_params(tmp_path / "params.yaml"), tmp_path / "b", "b", "processes")
    assert (again.run_id, again.out_dir) == ("b", tmp_path / "b")
    assert _without_names(node_params(again)) == _without_names(params)
    assert node_params(again)["recorder"]["out_dir"] == str(tmp_path / "b")


_KEPT = """clock_master:
  ros__parameters: {seed: 1, steps: 3}
sim_bridge:
  ros__parameters: {scenario: right_turn, cameras: []}
"""


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[1, 2]", "file: expected a mapping of node: ros__parameters"),
        ("clock_master: {seed: 1}", "clock_master: expected ros__parameters"),
        ("clock_master: {ros__parameters: {seed: 1}}", "expected the clock_master's parameters and the sim_bridge's"),
        # where PyYAML stopped, as `simforge run --params-file` says it (it said "unreadable: ParserError")
        ("clock_master: [", "file: expected a YAML ROS 2 parameter file, got \"line 1, column 16: expected the node "
                            "content, but found '<stream end>'\""),
        # a value the nodes refuse is the file's, not a --set the user never gave
        (_KEPT.replace("seed: 1", "seed: four"), "params.yaml: clock_master.seed: expected a value of type int, "
                                                 "got 'four'"),
        (_KEPT.replace("seed: 1", "decision_us: 200000, decision_s: 0.1"),
         "params.yaml: clock_master.decision_us and clock_master.decision_s: expected one of the two"),
        # a typo'd section: the hint `simforge run --params-file` gives
        (_KEPT.replace("sim_bridge:", "sim_brige:"), "params.yaml: sim_brige: expected a node in ['clock_master', "
                                                     "'driver', 'recorder', 'sim_bridge'] (did you mean sim_bridge?)"),
    ],
)
def test_a_bad_parameter_file_is_named(tmp_path: Path, text: str, needle: str) -> None:
    (tmp_path / "params.yaml").write_text(text)
    with pytest.raises((RunDirError, ConfigError), match=r"params\.yaml") as err:
        read_params(tmp_path / "params.yaml")
    assert needle in str(err.value)
    assert "--set" not in str(err.value)
    with pytest.raises(RunDirError, match="missing"):
        read_params(tmp_path / "other.yaml")


def test_another_nodes_section_is_left_out_with_a_note_as_simforge_run_does(tmp_path: Path) -> None:
    """It was refused as a bad --set (bogus_node.x), a --set the user never gave."""
    path = tmp_path / "params.yaml"
    path.write_text(_KEPT + "bogus_node:\n  ros__parameters: {x: 1}\n")
    notes: list[str] = []
    assert read_params(path, notes) == {"clock_master": {"seed": 1, "steps": 3},
                                        "sim_bridge": {"scenario": "right_turn", "cameras": []}}
    assert notes == [f"{path}: bogus_node left out: not a simforge node (a section for another node of the stack)"]


def test_the_layout_is_the_one_the_kept_run_used() -> None:
    def kept(*pids: int | None) -> Any:
        return SimpleNamespace(manifest={"nodes": {f"n{i}": {"process": {"pid": p}} for i, p in enumerate(pids)}})

    assert layout_of(kept(7, 7, 7, 7)) == "single"
    assert layout_of(kept(7, 8, 9, 10)) == "processes"
    assert layout_of(kept(None, None)) == "processes"  # not known: one process per node, the default


def test_no_kept_run_exits_2_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from simforge_ros.rerun import main

    assert main([str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err == f"simforge rerun: {tmp_path / 'nothing'}: no such run directory\n"
    assert main([str(tmp_path), "--layout", "threads"]) == 2
    assert "argument --layout: invalid choice: 'threads'" in capsys.readouterr().err


def test_faults_that_are_not_a_list_of_specs_are_named(tmp_path: Path) -> None:
    params = node_params(SPECS[0])
    params["sim_bridge"]["faults"] = 3
    kept = SimpleNamespace(manifest={}, path=tmp_path)
    with pytest.raises(RunDirError, match=r"sim_bridge\.faults: expected a list of fault specs, got 3"):
        spec_for(kept, params, tmp_path / "b", "b", "single")


def test_a_fault_edited_into_any_nodes_section_is_rerun(tmp_path: Path) -> None:
    """An edited params.yaml asks "what if": a fault put in the driver's section only was
    dropped without a word (the rerun "repeated bit for bit"), where `simforge run
    --params-file` takes every node's, as here."""
    params = node_params(SPECS[0])
    params["driver"]["faults"] = ["drop_frame@10"]
    params["recorder"]["faults"] = ["drop_frame@10", "perturb_action=0.001@3"]
    kept = SimpleNamespace(manifest={}, path=tmp_path)
    assert spec_for(kept, params, tmp_path / "b", "b", "single").faults == ("drop_frame@10", "perturb_action=0.001@3")
    params["driver"]["faults"] = "drop_frame@10"
    with pytest.raises(RunDirError, match=r"driver\.faults: expected a list of fault specs, got 'drop_frame@10'"):
        spec_for(kept, params, tmp_path / "b", "b", "single")


def test_an_outcome_without_a_chain_says_so() -> None:
    from simforge_ros.rerun import _outcome

    assert _outcome(None, 220, "ab" * 32) == f"counted, 220 steps, chain {'ab' * 8}"
    aborted = {"code": "aborted", "step": -1}
    assert _outcome(aborted, 0, "") == "refused:aborted before step 0, 0 steps, chain none"


def test_a_frame_wait_the_clock_master_would_not_outwait_is_named() -> None:
    """driver.frame_timeout_ms at or past participant_timeout_ms: a lost frame would be
    refused as the driver's participant_timeout, not missing_frame. Only the torch driver
    waits for frames, so the route follower takes any pair."""
    short = {"clock_master": {"participant_timeout_ms": 3000}}
    with pytest.raises(ConfigError) as err:
        node_params(RunSpec("right_turn", Path("/runs/a"), "a", driver="torch", sets=short))
    assert str(err.value) == (
        "run parameters: driver.frame_timeout_ms: expected less than clock_master.participant_timeout_ms (3000): "
        "the clock master must outwait the driver's wait for a frame, or a frame that never comes is refused as "
        "participant_timeout, got 5000")
    both = {**short, "driver": {"frame_timeout_ms": 3000}}
    with pytest.raises(ConfigError, match=r"driver\.frame_timeout_ms: .*, got 3000"):
        node_params(RunSpec("right_turn", Path("/runs/a"), "a", driver="torch", sets=both))
    fits = {**short, "driver": {"frame_timeout_ms": 2999}}
    assert node_params(RunSpec("right_turn", Path("/runs/a"), "a", driver="torch", sets=fits))["driver"][
        "frame_timeout_ms"] == 2999
    assert node_params(RunSpec("right_turn", Path("/runs/a"), "a", sets=short))["clock_master"][
        "participant_timeout_ms"] == 3000


def test_step_0s_frame_wait_the_clock_master_would_not_outwait_is_named() -> None:
    """At step 0 the torch driver waits params.FIRST_MESSAGES_WAIT_MS more for its frames
    (the bridge's hold while discovery settles), and the clock master waits for step 0 the
    larger of participant_timeout_ms and startup_timeout_ms: that one must outwait it."""
    from simforge_ros.params import FIRST_MESSAGES_WAIT_MS

    slow_start = {"clock_master": {"participant_timeout_ms": 8000, "startup_timeout_ms": 9000}}
    frame_ms = 9000 - FIRST_MESSAGES_WAIT_MS
    sets = {**slow_start, "driver": {"frame_timeout_ms": frame_ms}}
    with pytest.raises(ConfigError) as err:
        node_params(RunSpec("right_turn", Path("/runs/a"), "a", driver="torch", sets=sets))
    assert str(err.value) == (
        f"run parameters: driver.frame_timeout_ms: expected less than {frame_ms}: step 0's call limit (the larger "
        "of clock_master.participant_timeout_ms and clock_master.startup_timeout_ms, 9000) must outwait the "
        f"driver's wait for step 0's frames, frame_timeout_ms + {FIRST_MESSAGES_WAIT_MS} while discovery "
        f"settles, got {frame_ms}")
    fits = {**slow_start, "driver": {"frame_timeout_ms": frame_ms - 1}}
    assert node_params(RunSpec("right_turn", Path("/runs/a"), "a", driver="torch", sets=fits))["driver"][
        "frame_timeout_ms"] == frame_ms - 1
    # a participant limit past the start-up one is step 0's limit too
    longer = {"clock_master": {"participant_timeout_ms": 9500, "startup_timeout_ms": 1000},
              "driver": {"frame_timeout_ms": 9500 - FIRST_MESSAGES_WAIT_MS - 1}}
    assert node_params(RunSpec("right_turn", Path("/runs/a"), "a", driver="torch", sets=longer))
    too_long = {**longer, "driver": {"frame_timeout_ms": 9500 - FIRST_MESSAGES_WAIT_MS}}
    with pytest.raises(ConfigError, match=r"step 0's call limit .* 9500\)"):
        node_params(RunSpec("right_turn", Path("/runs/a"), "a", driver="torch", sets=too_long))


def test_a_run_without_params_yaml_is_asked_again_what_its_nodes_reported() -> None:
    """ros2 launch and ros2 run leave no params.yaml; the manifest keeps what each node
    reported: a period's unset unit (null) and the run's own out_dir and run_id are left out."""
    from simforge_ros.rerun import params_from_manifest

    nodes = {
        "clock_master": {"params": {"decision_us": 100000, "decision_s": None, "run_id": "launch", "seed": 3,
                                    "steps": 15, "latency_us": 0}},
        "sim_bridge": {"params": {"scenario": "red_signal", "tick_us": 20000, "tick_s": None, "faults": []}},
        "driver": {"params": {"policy": "route", "scenario": "red_signal"}},
        "recorder": {"params": {"out_dir": "/tmp/simforge-run", "run_id": "launch", "storage": "sqlite3"}},
        "sim_bridge/backend": {"params": {"engine_sha256": "ab"}},  # what the bridge says of its engine
    }
    run = SimpleNamespace(path=Path("/runs/launch"), manifest={"nodes": nodes})
    params = params_from_manifest(run)  # type: ignore[arg-type]
    assert params == {"clock_master": {"decision_us": 100000, "seed": 3, "steps": 15, "latency_us": 0},
                      "sim_bridge": {"scenario": "red_signal", "tick_us": 20000, "faults": []},
                      "driver": {"policy": "route", "scenario": "red_signal"}, "recorder": {"storage": "sqlite3"}}
    spec = spec_for(run, params, Path("/runs/b"), "b", "processes")  # type: ignore[arg-type]
    assert (spec.scenario, spec.seed, spec.steps, spec.driver) == ("red_signal", 3, 15, "route")
    # an external driver reports nothing: no driver section, and the rerun's driver is external again
    del nodes["driver"]
    assert spec_for(run, params_from_manifest(run), Path("/runs/b"), "b", "processes").driver == "external"  # type: ignore[arg-type]
    nodes["clock_master"]["params"]["seed"] = -1  # a manifest edited since: named, as a file would be
    with pytest.raises(ConfigError, match=r"manifest.json \(its nodes' parameters\): clock_master.seed"):
        params_from_manifest(run)  # type: ignore[arg-type]
    assert params_from_manifest(SimpleNamespace(path=Path("/r"), manifest={"nodes": {}})) is None  # type: ignore[arg-type]


def test_a_scenario_file_changed_since_the_run_is_named_before_the_rerun(tmp_path: Path) -> None:
    """A comment added to the scenario file: the whole rerun ran, then "did not repeat:
    first difference at step 0: vehicle state differed first" (scenario-file audit)."""
    import hashlib

    from simforge_ros.engine.catalog import _resolve
    from simforge_ros.rerun import _check_same_scenario

    mine = tmp_path / "mine.yaml"
    mine.write_bytes(_resolve("right_turn").read_bytes())
    kept = SimpleNamespace(path=tmp_path / "run", manifest={
        "digests": {"scenario_file": hashlib.sha256(mine.read_bytes()).hexdigest()}})
    _check_same_scenario(kept, str(mine))  # the same bytes: rerun
    was = kept.manifest["digests"]["scenario_file"]
    mine.write_bytes(mine.read_bytes() + b"# an edit\n")
    with pytest.raises(ConfigError) as err:
        _check_same_scenario(kept, str(mine))
    now = hashlib.sha256(mine.read_bytes()).hexdigest()
    assert str(err.value) == (
        f"RUN: scenario: expected its scenario file as the run had it (sha256 {was[:16]}); to run the file as it is "
        f"now: simforge run --params-file {tmp_path / 'run' / 'params.yaml'}, got {mine}, changed since (sha256 "
        f"{now[:16]})")
    _check_same_scenario(SimpleNamespace(path=kept.path, manifest={"digests": {"scenario_file": None}}), str(mine))
    mine.unlink()  # gone: the run names it, as before
    _check_same_scenario(kept, str(mine))
