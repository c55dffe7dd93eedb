"""The `simforge` command line: every tool is listed with what it does, and answers
--help under its own name."""

from __future__ import annotations

import json

import pytest

from simforge_ros import cli
from simforge_ros.core.faults import FORMS
from simforge_ros.drivers.registry import POLICIES
from simforge_ros.params import validate
from simforge_ros.runner import DRIVERS, EXTERNAL


def _exit_code(argv: list[str]) -> int:
    """What `simforge ARGV` exits with (argparse's --help raises SystemExit; some tools
    catch it and return the code)."""
    try:
        return cli.main(argv)
    except SystemExit as done:
        return int(done.code or 0)


def test_top_level_help_says_what_each_tool_does(capsys):
    assert _exit_code(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps long lines
    for name, _module, summary in cli._TOOLS:
        assert f"{name} " in out and " ".join(summary.split()) in out
    assert "run a scenario in lockstep" in out


@pytest.mark.parametrize("name", [t[0] for t in cli._TOOLS])
def test_each_tool_answers_help_under_its_own_name(name, capsys):
    assert _exit_code([name, "--help"]) == 0
    assert capsys.readouterr().out.startswith(f"usage: simforge {name} ")


def test_run_options_are_explained(capsys):
    assert _exit_code(["run", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for phrase in ("one process per node", "override a node parameter", "one JSON object per run"):
        assert phrase in out
    for form in FORMS.values():  # every fault's form, as --inject accepts it
        assert form in out


def test_the_set_example_is_accepted(capsys):
    assert _exit_code(["run", "--help"]) == 0
    assert cli._SET_EXAMPLE in capsys.readouterr().out
    sets = cli._parse_set([cli._SET_EXAMPLE])
    assert validate(sets, "--set")["sim_bridge"]["cameras"] == ["front", "left"]


def test_the_driver_choices_are_the_policies_and_external():
    # the runner lists them without importing the drivers (simforge --help stays quick)
    assert (*POLICIES, EXTERNAL) == DRIVERS


def test_version_names_what_the_digests_depend_on(capsys):
    """The package, the engine, rclpy, numpy (the engine's and the renderer's arithmetic),
    torch (the planner) and the machine: numpy and torch were left out."""
    import importlib.metadata
    import platform

    import numpy

    import simforge_ros
    from simforge_ros.engine.world import ENGINE_VERSION

    assert _exit_code(["--version"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"simforge_ros {simforge_ros.__version__} ({ENGINE_VERSION}, "
                          f"rclpy {importlib.metadata.version('ros-rclpy')}, numpy {numpy.__version__}, "
                          f"torch {importlib.metadata.version('torch')}; {platform.machine()}"), out


def _result(run_id: str, chain: str = "c" * 64, frames: str | None = "f" * 64, code: str | None = None):
    from simforge_ros.runner import RunResult

    refusal = None if code is None else {"code": code, "step": 3, "detail": "d"}
    return RunResult(run_id, "right_turn", 3 if code else 8, chain, "refused" if code else "counted", refusal,
                     f"/runs/{run_id}", 12 if code else 0, frames_digest=frames)


def test_a_repeat_ends_with_whether_the_runs_repeated_bit_for_bit(monkeypatch):
    monkeypatch.setattr(cli.Path, "is_file", lambda self: self.name == "manifest.json")  # every run finished
    same = [_result("a"), _result("b"), _result("c")]
    assert cli._repeat_summary(same) == f"all 3 runs repeated bit for bit: chain {'c' * 16}, frames {'f' * 16}"
    assert cli._repeat_summary([_result("a", frames=None)] * 2) == f"all 2 runs repeated bit for bit: chain {'c' * 16}"
    apart = [_result("a"), _result("b", chain="d" * 64), _result("c b", code="missing_frame")]
    assert cli._repeat_summary(apart) == ("3 runs, 3 different outcomes; how far apart: "
                                          "simforge spread /runs/a /runs/b '/runs/c b'")
    # a refusal repeats by its code and step: its detail may name a process id
    killed = [_result(r, code="participant_lost") for r in ("a", "b")]
    killed[1].refusal["detail"] = "driver (pid 4242) is gone"
    assert cli._repeat_summary(killed) == f"all 2 runs repeated bit for bit: chain {'c' * 16}, frames {'f' * 16}"
    killed[1].refusal["step"] = 4
    assert cli._repeat_summary(killed).startswith("2 runs, 2 different outcomes; ")


def test_a_repeat_names_salvage_first_for_a_run_whose_recorder_never_finished(tmp_path):
    """kill=recorder@10 --repeat 2: the suggested `simforge spread A B` was refused, a run
    of the two having no manifest ("manifest.json: missing")."""
    from simforge_ros.runner import RunResult

    kept, killed = tmp_path / "a", tmp_path / "b"
    kept.mkdir()
    killed.mkdir()
    (kept / "manifest.json").write_text("{}")
    results = [RunResult("a", "right_turn", 60, "c" * 64, "counted", None, str(kept), 0),
               RunResult("b", "right_turn", 9, "", "refused", {"code": "participant_lost", "step": 10}, str(killed),
                         16)]
    assert cli._repeat_summary(results) == (
        f"2 runs, 2 different outcomes; how far apart: simforge salvage {killed} && "
        f"simforge spread {kept} {killed}-salvaged")


@pytest.mark.parametrize(("text", "said"), [
    ("1e30", "--latency-ms: latency: expected at most 9223372036854775.807 ms, got '1e30'"),
    ("-1", "--latency-ms: latency: expected a finite number of milliseconds >= 0, got '-1'"),
    ("inf", "--latency-ms: latency: expected a finite number of milliseconds >= 0, got 'inf'"),
])
def test_a_latency_out_of_range_is_named_as_given(text, said):
    """1e30 ms was refused as clock_master.latency_us with a 34-digit number the user never typed."""
    with pytest.raises(cli.ConfigError) as err:
        cli._latency_us(text)
    assert str(err.value) == said
    assert cli._latency_us("200") == 200_000


def test_a_latency_of_a_fraction_of_a_microsecond_is_the_contracts_refusal_exactly():
    """--latency-ms 100.0001 was a usage error (exit 2), while the same latency as
    clock_master.latency_s was rate_not_multiple (exit 11); handed on as float seconds,
    100.00000000000001 ms rounded to whole microseconds and ran, and Decimal's 28 digits
    rounded 100.00000000000000000000000001 ms and 1e-99999999 ms so (test/ros/test_lockstep.py
    runs the command)."""
    for text in ("100.0001", "100.00000000000001", "100.00000000000000000000000001", "0.0005", "1e-99999999"):
        with pytest.raises(cli.RateNotMultiple) as err:
            cli._latency_us(text)
        assert (err.value.step, err.value.detail) == (-1, f"--latency-ms {text}: not a whole number of microseconds")
    long = "0." + "0" * 1000 + "1"
    with pytest.raises(cli.RateNotMultiple) as err:
        cli._latency_us(long)
    assert len(err.value.detail) < 300  # the value cut, not a megabyte of it on one line
    for text, us in (("0.001", 1), ("1E+2", 100_000), ("100.000", 100_000), ("0e-99999999", 0), ("5e-3", 5),
                     ("9223372036854775.807", 2**63 - 1)):
        assert cli._latency_us(text) == us, text
    with pytest.raises(cli.ConfigError):
        cli._latency_us("9999999999999999.9990")  # whole, and past int64 microseconds


def test_a_latency_refused_before_any_run_still_gives_json_its_object(tmp_path, capsys):
    """--latency-ms 0.0005 --json printed nothing on stdout (the refusal on stderr alone),
    where the same latency as clock_master.latency_s gave a run's object with step -1."""
    from simforge_ros.runner import RunResult

    code = cli.main(["run", "right_turn", "--latency-ms", "0.0005", "--json", "--out", str(tmp_path / "runs")])
    out, err = capsys.readouterr()
    assert code == 11
    said = json.loads(out)
    assert set(said) == set(RunResult("r", "s", 0, "", "refused", None, "d", 11).to_dict())  # a run's keys
    assert said["refusal"] == {"code": "rate_not_multiple", "step": -1,
                               "detail": "--latency-ms 0.0005: not a whole number of microseconds"}
    assert (said["status"], said["run_dir"], said["run_id"], said["steps"]) == ("refused", None, None, 0)
    assert err == "simforge: refused:rate_not_multiple before step 0: --latency-ms 0.0005: not a whole number " \
                  "of microseconds\n"
    assert not (tmp_path / "runs").exists()  # refused before any run
    assert cli.main(["run", "right_turn", "--latency-ms", "0.0005", "--out", str(tmp_path / "runs")]) == 11
    assert capsys.readouterr().out == ""  # without --json, the line on stderr only, as before


def test_an_unknown_option_is_named_with_the_usage_of_its_command(capsys):
    """`simforge --bogus` said only that a command was required; `simforge run --bogus`
    printed the top-level usage."""
    for argv, usage, said in ((["--bogus"], "usage: simforge [-h]", "unrecognized argument --bogus (the command "
                                                                       "comes first"),
                              (["run", "--bogus", "right_turn"], "usage: simforge run ", "unrecognized arguments: "
                                                                                           "--bogus")):
        with pytest.raises(SystemExit) as info:
            cli.main(argv)
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(usage) and said in err, err


def test_a_scenario_is_a_file_only_when_its_argument_says_so(tmp_path, monkeypatch, capsys):
    """A file named like a scenario in the working directory ran in place of it (a copy
    of another scenario saved as `right_turn` ran under that name); a FIFO was 'no such
    file'. A file is a path ending in .yaml or with a directory part, as `render` reads it."""
    import os

    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_scene").write_text("schema: 1\n")
    assert cli.main(["run", "my_scene", "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.rstrip().endswith("or a scenario file (a path ending in .yaml, or with a directory part), "
                                 "got 'my_scene'")
    # ./NAME is a file, as the docs write it (pathlib drops the ./): refused here for its content,
    # not as an unknown name, and ./right_turn is not the shipped right_turn
    assert cli.main(["run", "./my_scene", "--out", str(tmp_path / "runs")]) == 2
    assert "my_scene" in capsys.readouterr().err
    from simforge_ros.engine import ScenarioError, load_scenario

    (tmp_path / "right_turn").write_text("schema: 1\n")
    with pytest.raises(ScenarioError):
        load_scenario("./right_turn")  # the local file, which is no scenario
    assert load_scenario("right_turn").path.name == "right_turn.yaml"  # the shipped one by name
    os.mkfifo(tmp_path / "pipe.yaml")
    assert cli.main(["run", "pipe.yaml", "--out", str(tmp_path / "runs")]) == 2
    assert "expected an existing scenario file (not a regular file)" in capsys.readouterr().err
    assert not list(tmp_path.glob("runs/*"))  # no run was started


@pytest.mark.parametrize("name", ["b" * 190, "x\ny"])
def test_a_scenario_file_name_that_makes_no_run_id_is_refused_before_the_run(tmp_path, capsys, name):
    """The run id starts with the file's name: a 190-character name made a counted run
    that verify, info and rerun refused; a newline in it, a run no tool took."""
    from simforge_ros.engine import scenario_dirs

    shipped = next(d / "right_turn.yaml" for d in scenario_dirs() if (d / "right_turn.yaml").is_file())
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(shipped.read_bytes())
    assert cli.main(["run", str(path), "--steps", "2", "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "SCENARIO: scenario: expected a file name that makes a run id: printable, and at most 200 bytes" in err
    assert not (tmp_path / "runs").exists()


def test_a_reader_that_leaves_early_ends_the_tool_as_sigpipe_would_not_as_an_error():
    """`simforge info RUN | head -1` said "unexpected error: BrokenPipeError" (exit 1)."""
    import signal
    import subprocess
    import sys
    from pathlib import Path

    exe = Path(sys.executable).with_name("simforge")
    proc = subprocess.Popen([str(exe), "scenarios"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 128 + signal.SIGPIPE, err
    assert "error" not in err.lower() and "Traceback" not in err, err


def test_a_ctrl_c_in_the_commands_imports_is_one_line_not_a_traceback():
    """The CLI's imports take about 0.25 s; a Ctrl-C in them printed Python's
    KeyboardInterrupt traceback. The interrupt is raised here by an import hook at the
    CLI's import, in a fresh interpreter, through the `simforge` script's entry point."""
    import subprocess
    import sys
    from importlib.metadata import entry_points

    scripts = [e.value for e in entry_points(group="console_scripts") if e.name == "simforge"]
    assert len(scripts) <= 1, scripts
    # a colcon install has no entry point: its bin/simforge imports this (CMakeLists.txt)
    module, func = (scripts[0] if scripts else "simforge_ros.command:main").split(":")
    program = f"""
import sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "simforge_ros.cli":
            raise KeyboardInterrupt
        return None
sys.meta_path.insert(0, Interrupt())
from {module} import {func}
sys.exit({func}())
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert done.stderr == "simforge: interrupted\n"


def test_a_stop_signal_between_or_after_runs_is_noted_not_raised():
    """After a run's line was printed, a Ctrl-C made `simforge run` exit 130 while the run's
    manifest said counted: between and after runs a stop signal is noted, ending a --repeat
    before its next run. It stays noted up to the run's own handlers (runner._stop_signals
    takes them over and stops the run for one noted): Python's default was put back before
    each run, and a signal in between was forgotten, or killed the command with no line."""
    import os
    import signal

    from simforge_ros.runner import NotedStops

    # as a `simforge run` process starts, whatever an earlier test left installed
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with cli._BetweenRuns() as between:
            assert between.came == []
            os.kill(os.getpid(), signal.SIGINT)  # noted: no KeyboardInterrupt here
            for _ in range(1000):  # a handler runs at a bytecode boundary
                pass
            assert between.came == [signal.SIGINT]
            with between.run_taking_them():
                assert isinstance(signal.getsignal(signal.SIGINT), NotedStops)  # for the run to take over
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(1000):
                    pass
            assert between.came == [signal.SIGINT, signal.SIGINT]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # as before
    finally:
        signal.signal(signal.SIGINT, previous)


def test_after_the_runs_of_the_simforge_command_a_stop_signal_is_ignored():
    """The command's result is out once its runs are: a signal while the interpreter and
    rclpy end (0.03-0.23 s) made the exit status the signal's beside a counted manifest, also
    with a handler kept, which Python puts back to the default as it ends."""
    import signal

    from simforge_ros.runner import STOP_SIGNALS

    previous = {sig: signal.signal(sig, signal.SIG_DFL) for sig in STOP_SIGNALS}
    try:
        with cli._BetweenRuns(keep=True):
            pass
        assert all(signal.getsignal(sig) == signal.SIG_IGN for sig in STOP_SIGNALS)
    finally:  # an ignored signal is inherited: the tests' child processes would ignore it too
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def test_a_torch_planner_parameter_given_to_the_route_driver_is_noted(tmp_path, capsys):
    """driver.weights with the route follower was ignored without a word, and the run counted:
    its user believed the weights had driven it. (--out names a file here, so that the run
    stops at the check after the note.)"""
    from simforge_ros.params import unread_by_policy

    assert unread_by_policy("route", {"weights": "w.pt", "weights_seed": 3, "frame_timeout_ms": 9}) == [
        "weights", "weights_seed"]
    assert unread_by_policy("torch", {"weights": "w.pt"}) == []
    # the shipped config spells every default out: a route run of it gave 7 notes
    assert unread_by_policy("route", {"weights": "", "samples": 1, "cameras": ["front", "left", "rear", "right"],
                                      "planning_period_us": 500_000, "dtype": "float32"}) == []
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    code = cli.main(["run", "right_turn", "--set", "driver.samples=2", "--out", str(blocker / "runs")])
    err = capsys.readouterr().err
    assert code == 2 and "--out" in err
    assert ("simforge: note: driver.samples is read by the torch planner only (--driver torch); the route driver "
            "ignores it") in err
    cli.main(["run", "right_turn", "--driver", "torch", "--set", "driver.samples=2", "--out", str(blocker / "runs")])
    assert "note: driver.samples" not in capsys.readouterr().err


def test_a_files_rig_holding_the_planners_cameras_stays_in_a_torch_run(capsys):
    """A kept torch run's params.yaml with a chase camera for viewing ran again without it
    (another chain): the file's sim_bridge.cameras was dropped whatever it held. A rig
    lacking a planner camera still gives way to the planner's, now with a note."""
    kept = {"sim_bridge": {"cameras": ["front", "chase"]}, "driver": {"cameras": ["front"]}}
    cli._planner_rig("run/params.yaml", kept, {})
    assert kept["sim_bridge"] == {"cameras": ["front", "chase"]} and capsys.readouterr().err == ""
    shipped = {"sim_bridge": {"cameras": ["chase", "front"], "width": 320}}  # config/simforge.yaml
    cli._planner_rig("config/simforge.yaml", shipped, {})
    assert shipped["sim_bridge"] == {"width": 320}
    assert capsys.readouterr().err == (
        "simforge: note: config/simforge.yaml: sim_bridge.cameras [chase, front] lacks the torch planner's "
        "[left, rear, right]: the bridge renders the planner's cameras [front, left, rear, right]\n")
    # the planner's cameras as --set gives them, and a --set of the bridge's rig wins
    narrowed = {"sim_bridge": {"cameras": ["chase", "front"]}}
    cli._planner_rig("p.yaml", narrowed, {"driver": {"cameras": ["front"]}})
    assert narrowed["sim_bridge"] == {"cameras": ["chase", "front"]}
    overridden = {"sim_bridge": {"cameras": ["chase"]}}
    cli._planner_rig("p.yaml", overridden, {"sim_bridge": {"cameras": ["front", "left", "rear", "right"]}})
    assert overridden["sim_bridge"] == {"cameras": ["chase"]} and capsys.readouterr().err == ""


def test_the_out_folders_made_for_a_run_refused_before_it_began_are_removed(tmp_path, monkeypatch, capsys):
    """A scenario the bridge refused at start: exit 2, no run directory, but --out's
    folders stayed, empty (`newout/deep/er`; ./runs without --out). Folders that were there
    already, and ones a run of a --repeat has written into, are kept."""
    from simforge_ros import runner

    def refused(spec, _progress=None):
        raise cli.ConfigError.single("sim_bridge", "scenario", "a scenario the embedded backend can load", "x")

    monkeypatch.setattr(runner, "run", refused)
    (tmp_path / "there").mkdir()
    out = tmp_path / "there" / "newout" / "deep" / "er"
    assert cli.main(["run", "right_turn", "--steps", "3", "--out", str(out)]) == 2
    assert "sim_bridge: scenario: expected a scenario the embedded backend can load" in capsys.readouterr().err
    assert list((tmp_path / "there").iterdir()) == []  # what it made, gone; what was there, kept
    out.mkdir(parents=True)
    (out / "mine.txt").write_text("a user's")
    assert cli.main(["run", "right_turn", "--steps", "3", "--out", str(out)]) == 2
    assert (out / "mine.txt").read_text() == "a user's"
