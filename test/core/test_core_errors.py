from __future__ import annotations

import pickle

import pytest

from simforge_ros.core import errors as E


def test_refusal_codes_and_exit_codes_are_stable() -> None:
    expected = {
        "time_drift": 10,
        "rate_not_multiple": 11,
        "missing_frame": 12,
        "stale_frame": 13,
        "pose_tolerance": 14,
        "participant_timeout": 15,
        "participant_lost": 16,
        "incomplete_run": 17,
        "participant_error": 18,
        "aborted": 19,
    }
    assert {code: cls.exit_code for code, cls in E.REFUSALS.items()} == expected
    for code, cls in E.REFUSALS.items():
        assert cls.code == code
        assert issubclass(cls, E.Refusal) and issubclass(cls, E.SimforgeError)
    assert (E.EXIT_COUNTED, E.EXIT_FAILURE, E.EXIT_USAGE) == (0, 1, 2)


def test_refusal_str_and_dict() -> None:
    r = E.TimeDrift(3, "engine 300001 us")
    assert str(r) == "time_drift at step 3: engine 300001 us"
    assert r.to_dict() == {"code": "time_drift", "step": 3, "detail": "engine 300001 us"}
    early = E.RateNotMultiple(-1, "tick")
    assert str(early) == "rate_not_multiple before step 0: tick"


def test_refusal_pickles_and_base_is_abstract() -> None:
    r = pickle.loads(pickle.dumps(E.StaleFrame(7, "old")))
    assert isinstance(r, E.StaleFrame) and r.step == 7 and r.detail == "old"
    with pytest.raises(TypeError):
        E.Refusal(0, "x")
    with pytest.raises(ValueError):
        E.TimeDrift(-2, "x")


def test_refusal_from_code() -> None:
    r = E.refusal_from_code("missing_frame", 4, "no chase")
    assert type(r) is E.MissingFrame and r.step == 4 and r.detail == "no chase"
    u = E.refusal_from_code("bogus_code", 5, "boom")
    assert type(u) is E.ParticipantError and u.code == "participant_error"
    assert "bogus_code" in u.detail and "boom" in u.detail


def test_config_error_reports_every_problem() -> None:
    err = E.ConfigError(
        [E.Problem("scenario.yaml", "decision_s", "a number", "fast"), E.Problem("cli", "--seed", "an int", 1.5)]
    )
    assert str(err).splitlines() == [
        "scenario.yaml: decision_s: expected a number, got 'fast'",
        "cli: --seed: expected an int, got 1.5",
    ]
    assert len(err.problems) == 2
    single = E.ConfigError.single("a", "b", "c", None)
    assert str(single) == "a: b: expected c, got None"
    whole = "x" * 198  # its repr, quotes included: 200 characters, shown whole
    assert str(E.Problem("f", "file", "a mapping", whole)).endswith(f"got '{whole}'")
    long = E.Problem("f", "file", "a mapping", "root:x:0:0 " * 100)
    assert str(long) == f"f: file: expected a mapping, got {repr('root:x:0:0 ' * 100)[:120]}... (1102 characters)"
    assert str(E.Problem.parse(str(long))) == str(long)  # what another process printed reads back the same
    quoted = E.Problem("driver", "scenario", "a valid scenario", E.Printed("y" * 300))
    assert str(quoted).endswith("got " + "y" * 300)  # another problem, printed: never cut
    again = pickle.loads(pickle.dumps(err))
    assert again.problems == err.problems
    with pytest.raises(ValueError):
        E.ConfigError([])


@pytest.mark.parametrize(
    "problem",
    [
        E.Problem("sim_bridge", "backend", "one of ['embedded']", "carla9"),
        E.Problem("driver", "driver.weights_path", "an existing weights file", "/tmp/a, got b.pt"),
        E.Problem("clock_master", "steps", "an integer >= 0", -3),
        E.Problem("sim_bridge", "cameras", "a list of distinct cameras from a, b", ["a", "a"]),
        # a got quoting a scenario file's own problem (it was split inside, and the node's
        # configuration error came back as a participant_error)
        E.Problem("sim_bridge", "scenario", "a valid scenario name or file",
                  "/tmp/rt.yaml: duration_us: expected integer microseconds, got '2.2e7'"),
        # ... as the nodes quote it now: the file's own problem as it printed, not its repr
        E.Problem("driver", "scenario", "a valid scenario name or file", E.Printed(
            "/tmp/rt.yaml: <document>: expected valid YAML, got \"line 2, column 1: expected ',' or ']', but "
            "got '<stream end>'\"")),
    ],
)
def test_a_problem_printed_by_another_process_parses_back_to_the_same_line(problem) -> None:
    again = E.Problem.parse(str(problem))
    assert again is not None
    assert (again.source, again.field, again.expected) == (problem.source, problem.field, problem.expected)
    assert str(again) == str(problem)
    # as the runner reads a node's log line with the node's name in front
    assert E.Problem.parse(f"{problem.source}: {problem}") is None


@pytest.mark.parametrize("line", ["", "[ERROR] [12.5] [clock_master]: refused: time_drift",
                                  "sim_bridge: no problem here", "driver: unexpected error: KeyError: 'x'"])
def test_other_lines_are_not_problems(line) -> None:
    assert E.Problem.parse(line) is None


def test_one_line_keeps_a_long_messages_start_and_end() -> None:
    """A TorchScript traceback is twenty lines whose last says what failed: a refusal's
    detail is printed on one line, with that end kept."""
    from simforge_ros.core.errors import one_line

    assert one_line("a\n  b\tc ") == "a b c"
    trace = "The following operation failed in the TorchScript interpreter.\n" + "  File x\n" * 80
    trace += "RuntimeError: boom"
    flat = one_line(trace, limit=120)
    assert "\n" not in flat and len(flat) <= 120
    assert flat.startswith("The following operation failed") and flat.endswith("RuntimeError: boom")
    assert " ... " in flat


def test_a_refusal_before_any_step_is_said_before_step_0() -> None:
    """Its manifest keeps step -1; the run's line, info, diff and rerun said "at step -1"."""
    from simforge_ros.core.errors import ParticipantTimeout, where
    from simforge_ros.record.diff_runs import ending

    assert where(-1) == "before step 0" and where(0) == "at step 0" and where(None) == "at step None"
    assert str(ParticipantTimeout(-1, "no driver")) == "participant_timeout before step 0: no driver"
    assert ending({"code": "participant_timeout", "step": -1}) == "refused:participant_timeout before step 0"
    assert ending({"code": "aborted", "step": 4}) == "refused:aborted at step 4"


def test_a_refusal_with_no_code_says_so() -> None:
    """ok false with neither code nor detail read "unknown refusal code '': driver: "."""
    refusal = E.refusal_from_code("", 3, "driver: no detail")
    assert isinstance(refusal, E.ParticipantError) and refusal.step == 3
    assert refusal.detail == "refused with no refusal code: driver: no detail"
