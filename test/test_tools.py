"""The tools' shared command-line pieces (simforge_ros.tools)."""

from __future__ import annotations

import pytest

from simforge_ros.tools import StepLine


def test_a_step_line_is_rewritten_in_place_once_a_step_and_taken_away(capsys: pytest.CaptureFixture[str]) -> None:
    line = StepLine("play runs/a", shown=True)
    for k in (0, 0, 1, 1, 1, 7):
        line(k, 9)
    line.clear()
    assert capsys.readouterr().err == ("\rplay runs/a: step 0/9\rplay runs/a: step 1/9\rplay runs/a: step 7/9"
                                       "\r\033[K")
    line.clear()  # nothing shown since: nothing to take away
    line(7, 9)  # shown again after a clear, even at the same step
    assert capsys.readouterr().err == "\rplay runs/a: step 7/9"


def test_a_step_line_not_shown_writes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    line = StepLine("verify x", shown=False)
    line(3, 9)
    line.clear()
    assert capsys.readouterr().err == ""


def test_say_prints_each_problem_of_a_configuration_error_on_its_own_line(capsys: pytest.CaptureFixture[str]) -> None:
    """`rerun` printed a kept params.yaml's two problems run together on one line."""
    from simforge_ros.core.errors import ConfigError, Problem
    from simforge_ros.tools import say

    say("rerun", ConfigError([Problem("p.yaml", "clock_master.seed", "an integer >= 0", -4),
                              Problem("p.yaml", "sim_bridge.width", "an int", "abc")]))
    say("verify", ValueError("two\nlines"))
    assert capsys.readouterr().err == (
        "simforge rerun: p.yaml: clock_master.seed: expected an integer >= 0, got -4\n"
        "simforge rerun: p.yaml: sim_bridge.width: expected an int, got 'abc'\n"
        "simforge verify: two lines\n")


def test_json_text_writes_a_non_finite_number_as_a_string() -> None:
    """diff --json of a tampered steps.jsonl printed a bare NaN, which no JSON parser reads."""
    import json

    from simforge_ros.tools import json_text

    text = json_text({"a": float("nan"), "b": [float("inf"), -float("inf"), 1.5], "c": {"d": 2}})
    assert json.loads(text) == {"a": "NaN", "b": ["Infinity", "-Infinity", 1.5], "c": {"d": 2}}


def test_an_out_inside_a_kept_run_is_refused_before_anything_is_made(tmp_path) -> None:
    """`simforge rerun R --out R/bag` and `simforge run --out R/logs` wrote a new run into R."""
    from simforge_ros.tools import out_dir_problem

    kept = tmp_path / "runs" / "r"
    (kept / "bag").mkdir(parents=True)
    (kept / "manifest.json").write_text("{}")
    for out in (kept, kept / "bag", kept / "logs" / "x"):
        assert out_dir_problem(str(out)) == f"it is in the kept run {kept}, which is never changed"
    assert not (kept / "logs").exists()
    killed = tmp_path / "runs" / "k"  # a killed recorder's: steps.jsonl, no manifest
    killed.mkdir()
    (killed / "steps.jsonl").write_text("")
    assert out_dir_problem(str(killed / "bag")) == f"it is in the kept run {killed}, which is never changed"
    assert out_dir_problem(str(tmp_path / "runs")) is None  # beside them: where runs go
