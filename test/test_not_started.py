"""What `simforge run` says of a node process that exited before the run began: its own
configuration problems, or its last words, never a 30 s wait for its service."""

from __future__ import annotations

from pathlib import Path

import pytest

from simforge_ros.core.errors import ConfigError
from simforge_ros.runner import RunSpec, _not_started


def _spec(tmp_path: Path) -> RunSpec:
    return RunSpec(scenario="right_turn", out_dir=tmp_path / "run", run_id="r")


def test_the_nodes_configuration_problems_come_back_as_its_config_error(tmp_path):
    log = tmp_path / "sim_bridge.log"
    log.write_text(
        "[INFO] [1.0] [sim_bridge]: starting\n"
        "sim_bridge: backend: expected one of ['embedded'], got 'carla9'\n"
        "sim_bridge: width: expected an integer > 0, got -5\n"
        "driver: steps: expected an integer, got 1\n"  # another node's: not this one's problem
    )
    with pytest.raises(ConfigError) as err:
        _not_started(_spec(tmp_path), "sim_bridge", 2, log)
    assert str(err.value).splitlines() == [
        "sim_bridge: backend: expected one of ['embedded'], got 'carla9'",
        "sim_bridge: width: expected an integer > 0, got -5",
    ]


def test_anything_else_is_a_refused_run_naming_the_node_and_its_last_line(tmp_path):
    log = tmp_path / "recorder.log"
    log.write_text("recorder: unexpected error: PermissionError: [Errno 13] Permission denied: '/x'\n\n")
    result = _not_started(_spec(tmp_path), "recorder", 1, log)
    assert (result.status, result.exit_code, result.steps) == ("refused", 18, 0)
    assert result.refusal == {
        "code": "participant_error", "step": -1,
        "detail": "recorder did not start (exit 1): recorder: unexpected error: PermissionError: "
                  "[Errno 13] Permission denied: '/x'",
    }


def test_a_node_that_said_nothing_is_still_named(tmp_path):
    result = _not_started(_spec(tmp_path), "driver", 1, tmp_path / "driver.log")
    assert result.refusal["detail"] == "driver did not start (exit 1): nothing"


def test_the_recorders_manifest_is_made_to_say_why_the_run_did_not_start(tmp_path):
    """The recorder, up before the node that failed, wrote `incomplete_run` ("the recorder
    stopped before the clock master finished the run"): the manifest and the exit status agree."""
    import json

    spec = _spec(tmp_path)
    spec.out_dir.mkdir()
    manifest = {"status": "refused", "steps": 0, "chain_digest": "0" * 64, "scenario": "right_turn",
                "refusal": {"code": "incomplete_run", "step": 0, "detail": "the recorder stopped before ..."}}
    (spec.out_dir / "manifest.json").write_text(json.dumps(manifest))
    result = _not_started(spec, "driver", 1, tmp_path / "driver.log")
    kept = json.loads((spec.out_dir / "manifest.json").read_text())
    assert kept["refusal"] == result.refusal and kept["refusal"]["code"] == "participant_error"
    assert kept["status"] == "refused" and kept["steps"] == 0
