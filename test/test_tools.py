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
