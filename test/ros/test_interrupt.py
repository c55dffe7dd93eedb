"""Ctrl-C (or SIGTERM, SIGHUP) on a run: it stops as `aborted` at the step it had reached,
keeps and verifies what it recorded, leaves no process behind; an interrupt that comes
while the recorder confirms the finished run does not turn it into an aborted one."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runs import lockstep, manifest_of, processes_mentioning, simforge
from simforge_ros.srv import Finish

from simforge_ros.nodes.clock_master import ClockMaster

pytestmark = pytest.mark.ros


def _wait_for_steps(proc: subprocess.Popen[str], out: Path, steps: int) -> None:
    """Until the first run under ``out`` has chained ``steps`` steps (or 120 s: fail)."""
    wall_deadline = time.monotonic() + 120
    while time.monotonic() < wall_deadline:
        found = list(out.glob("*/steps.jsonl"))
        if found and found[0].read_text().count("\n") >= steps:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    pytest.fail(f"no {steps} steps chained within 120 s")


@pytest.mark.parametrize("layout", ["processes", "single"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_mid_run_is_aborted_at_its_step_and_keeps_a_verifiable_record(tmp_path, layout, sig):
    """SIGTERM (kill, timeout, a CI job cancelled) to `simforge run` alone used to end it
    and leave its nodes, in sessions of their own, to run the run to its end."""
    out = tmp_path / "runs"
    exe = Path(sys.executable).with_name("simforge")
    proc = subprocess.Popen([str(exe), "run", "right_turn", "--out", str(out), "--json", "--layout", layout,
                             "--repeat", "2", "--set", "sim_bridge.cameras=[front,left,rear,right]"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    _wait_for_steps(proc, out, 20)
    os.kill(proc.pid, sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 19, stderr
    assert len(list(out.iterdir())) == 1  # the second --repeat run was not started
    assert "Traceback" not in stderr
    result = json.loads(stdout)
    refusal = result["refusal"]
    assert refusal["code"] == "aborted" and refusal["detail"] == "interrupted"
    assert 20 <= refusal["step"] < 219
    manifest = json.loads((Path(result["run_dir"]) / "manifest.json").read_text())
    assert manifest["status"] == "refused"
    assert (manifest["refusal"]["code"], manifest["refusal"]["step"]) == ("aborted", refusal["step"])
    assert manifest["steps"] == result["steps"] >= refusal["step"]
    check = simforge("verify", result["run_dir"], cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"verified: {result['steps']} steps" in check.stdout
    assert not processes_mentioning(str(out))


@pytest.mark.parametrize(("layout", "hold_at"), [("processes", 3), ("single", 3), ("processes", 19)])
def test_ctrl_c_ends_a_held_run_as_aborted_at_the_step_it_holds(tmp_path, layout, hold_at):
    """A run held on /simforge/pause waits for no one but its user: Ctrl-C still ends it,
    and what it recorded up to the hold is kept and verifies (19: held after its last step,
    with every step recorded; ended there, the run is still the user's stop, not counted)."""
    out = tmp_path / "runs"
    exe = Path(sys.executable).with_name("simforge")
    proc = subprocess.Popen([str(exe), "run", "right_turn", "--out", str(out), "--json", "--layout", layout,
                             "--steps", "20", "--hold-at-step", str(hold_at)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    _wait_for_steps(proc, out, hold_at + 1)  # steps 0..hold_at, then held (the recorder flushes while held)
    time.sleep(0.5)
    assert proc.poll() is None  # held, not ended
    os.kill(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 19, stderr
    result = json.loads(stdout)
    assert (result["refusal"]["code"], result["refusal"]["step"], result["steps"]) == (
        "aborted", hold_at + 1, hold_at + 1)
    check = simforge("verify", result["run_dir"], cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"verified: {hold_at + 1} steps" in check.stdout
    assert not processes_mentioning(str(out))
    # its rerun runs the steps it had done and repeats them: the interrupt was the user's
    # (rerun said "did not repeat ... different lengths", exit 1, of every interrupted run)
    rerun = simforge("rerun", result["run_dir"], cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert rerun.stdout.splitlines()[-1] == (f"repeated bit for bit up to the interrupt: the {hold_at + 1} steps the "
                                             "kept run had done when it was stopped (a rerun runs no further)")


@pytest.mark.parametrize(("sig", "sigint_ignored"), [(signal.SIGINT, False), (signal.SIGTERM, True)])
def test_a_signal_while_the_nodes_start_is_aborted_not_lost(tmp_path, sig, sigint_ignored):
    """Passed on to a clock master not yet holding its handlers, the interrupt was lost (SIGINT
    ignored as the shell started the job: the run went on to be counted) or misread (a
    KeyboardInterrupt in its imports, or rclpy's handler shutting the context under the
    node being built: 'clock master exited with 1'). Now the nodes start with the stop
    signals blocked and take them once their handlers are in place."""
    out = tmp_path / "runs"
    exe = Path(sys.executable).with_name("simforge")
    # `simforge run ... &` in a script starts with SIGINT ignored (the shell's rule for
    # background jobs), and so did its nodes: SIGTERM is how such a run is stopped
    ignore_sigint = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
    proc = subprocess.Popen([str(exe), "run", "right_turn", "--out", str(out), "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, preexec_fn=ignore_sigint)
    wall_deadline = time.monotonic() + 60
    while not list(out.glob("*/logs/clock_master.log")):  # the clock master has just been started
        assert time.monotonic() < wall_deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.001)
    os.kill(proc.pid, sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 19, stderr
    result = json.loads(stdout)
    assert result["status"] == "refused" and result["refusal"]["code"] == "aborted", result
    assert result["refusal"]["step"] == -1 and result["steps"] == 0
    assert "Traceback" not in stderr and "unexpected error" not in stderr
    assert not processes_mentioning(str(out))


@pytest.mark.parametrize("wait_s", [0.0, 0.1, 0.2])
def test_a_signal_while_the_single_layouts_nodes_are_built_is_aborted_at_step_minus_1(tmp_path, wait_s):
    """The single layout builds its nodes in `simforge run` itself (about a second, rclpy's
    import included): a Ctrl-C then was a KeyboardInterrupt, exit 130, and the recorder's
    close kept the run as incomplete_run at step 0."""
    out = tmp_path / "runs"
    exe = Path(sys.executable).with_name("simforge")
    proc = subprocess.Popen([str(exe), "run", "right_turn", "--out", str(out), "--json", "--layout", "single",
                             "--steps", "20"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    wall_deadline = time.monotonic() + 60
    while not list(out.glob("*/logs/ros_domain_id")):  # its lease is taken: the nodes come next
        assert time.monotonic() < wall_deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.001)
    time.sleep(wait_s)
    os.kill(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 19, stderr
    assert "Traceback" not in stderr and "unexpected error" not in stderr
    result = json.loads(stdout)
    assert (result["status"], result["refusal"]["code"], result["steps"]) == ("refused", "aborted", 0), result
    assert result["refusal"]["step"] == -1, result  # before step 0, wherever the building was
    manifest = Path(result["run_dir"]) / "manifest.json"
    if manifest.is_file():  # the recorder was built: what it kept says the same
        assert json.loads(manifest.read_text())["refusal"] == result["refusal"]


def test_an_interrupt_while_the_recorder_confirms_the_run_leaves_it_counted(tmp_path, monkeypatch):
    """The recorder writes its manifest as it answers Finish: the run's outcome must be the
    manifest's, whenever the interrupt comes."""
    call = ClockMaster._call

    def interrupted_at_finish(self, peer, request, *args, **kwargs):
        if isinstance(request, Finish.Request):
            self.interrupted = True  # as the SIGINT handler does
        return call(self, peer, request, *args, **kwargs)

    monkeypatch.setattr(ClockMaster, "_call", interrupted_at_finish)
    result = lockstep(tmp_path, steps=8, layout="single")
    assert (result.status, result.refusal, result.steps) == ("counted", None, 8)
    assert manifest_of(result)["status"] == "counted"


def test_a_run_whose_simforge_run_is_killed_outright_aborts_and_keeps_a_verifiable_record(tmp_path):
    """SIGKILL (or the OOM killer) leaves `simforge run` no handler to pass a stop on, and its
    nodes, in sessions of their own, used to run the run to its end unwatched. Each node it
    started now watches it: the clock master takes its going as a Ctrl-C, the run ends as
    aborted at its step, and the recorder keeps a record that verifies."""
    out = tmp_path / "runs"
    exe = Path(sys.executable).with_name("simforge")
    proc = subprocess.Popen([str(exe), "run", "right_turn", "--out", str(out), "--steps", "100000",
                             "--set", "sim_bridge.cameras=[]"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    _wait_for_steps(proc, out, 20)
    assert processes_mentioning(str(out))  # the nodes, running
    killed_at = time.monotonic()
    proc.kill()
    proc.communicate(timeout=30)
    while processes_mentioning(str(out)):
        assert time.monotonic() - killed_at < 20, "the nodes outlived their simforge run"
        time.sleep(0.1)
    (run_dir,) = out.iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "refused"
    refusal = manifest["refusal"]
    assert refusal["code"] == "aborted"
    assert refusal["detail"].startswith(f"interrupted: simforge run (pid {proc.pid}) is gone"), refusal
    assert 20 <= refusal["step"] < 100_000
    assert "Traceback" not in (run_dir / "logs" / "clock_master.log").read_text()
    check = simforge("verify", str(run_dir), cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"verified: {manifest['steps']} steps" in check.stdout


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_as_the_processes_layout_sets_up_is_aborted_at_step_minus_1(tmp_path, sig):
    """Between its run directory's first file and its nodes' start, the processes layout
    left the signals to Python: SIGTERM ended `simforge run` there, the directory kept with
    no manifest (seen at a --repeat's second run)."""
    out = tmp_path / "runs"
    exe = Path(sys.executable).with_name("simforge")
    proc = subprocess.Popen([str(exe), "run", "right_turn", "--out", str(out), "--json", "--steps", "20"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    wall_deadline = time.monotonic() + 60
    while not list(out.glob("*/params.yaml")):  # set up, its nodes not yet started
        assert time.monotonic() < wall_deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.001)
    os.kill(proc.pid, sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 19, stderr
    assert "Traceback" not in stderr and "unexpected error" not in stderr
    result = json.loads(stdout)
    assert (result["status"], result["refusal"]["code"], result["refusal"]["step"]) == ("refused", "aborted", -1)
    assert not processes_mentioning(str(out))


def test_a_stop_during_a_later_repeat_run_is_the_users_not_runs_that_differ(tmp_path):
    """Exit 1 and "2 runs, 2 different outcomes; how far apart: simforge spread ..." said
    a Ctrl-C in a --repeat's second run was runs that failed to repeat."""
    out = tmp_path / "runs"
    exe = Path(sys.executable).with_name("simforge")
    proc = subprocess.Popen([str(exe), "run", "right_turn", "--out", str(out), "--layout", "single", "--repeat", "3",
                             "--set", "sim_bridge.cameras=[front,left,rear,right]"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    wall_deadline = time.monotonic() + 180
    while not any(p.read_text().count("\n") >= 5 for p in out.glob("*-01-*/steps.jsonl")):  # the second run's
        assert time.monotonic() < wall_deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 19, stderr
    assert stdout.splitlines()[-1] == "interrupted: run 2 of 3 aborted", stdout
    assert len(list(out.iterdir())) == 2  # the third was not started


@pytest.mark.parametrize("layout", ["processes", "single"])
def test_a_stop_noted_before_the_run_took_the_signals_stops_it(tmp_path, layout):
    """`simforge run` notes stop signals between runs (runner.NotedStops) and looks at them
    before each; one that came after that look, before the run had its own handlers, was
    forgotten: the run went on and counted (exit 0, 3 times in 60 at 0.37-0.40 s)."""
    from simforge_ros.runner import NotedStops

    noted = NotedStops()
    previous = signal.signal(signal.SIGTERM, noted)
    try:
        os.kill(os.getpid(), signal.SIGTERM)  # noted, as after the caller's last look
        assert noted.came == [signal.SIGTERM]
        result = lockstep(tmp_path, steps=50, layout=layout)
        assert signal.getsignal(signal.SIGTERM) is noted  # handed back after the run
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert (result.status, result.refusal["code"], result.exit_code) == ("refused", "aborted", 19), result.refusal
    assert result.steps == 0


def test_a_signal_while_the_recorder_is_built_leaves_a_run_the_tools_read(tmp_path, monkeypatch):
    """In the single layout a stop signal ended the building at once: inside the recorder's
    constructor, the run directory kept its bag and steps.jsonl begun and no manifest
    (verify: "the recorder did not finish this run (killed?)"), at least 10 times at
    0.25-0.65 s. The recorder is now built whole first, and writes its refused manifest."""
    from simforge_ros.nodes import recorder as recorder_module

    built = recorder_module.Recorder.__init__

    def built_then_signalled(self, *args, **kwargs):
        built(self, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)  # taken by the run's handler while still in here

    monkeypatch.setattr(recorder_module.Recorder, "__init__", built_then_signalled)
    # as a `simforge run` process starts: an earlier test's tool may have left its own handler
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        result = lockstep(tmp_path, steps=20, layout="single")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert (result.refusal["code"], result.refusal["step"], result.exit_code) == ("aborted", -1, 19), result.refusal
    manifest = manifest_of(result)
    assert manifest["status"] == "refused" and manifest["refusal"]["code"] == "aborted" and manifest["steps"] == 0
    assert simforge("verify", result.run_dir, cwd=tmp_path).returncode == 0


def test_a_stop_raised_while_a_class_is_made_is_still_a_stop():
    """A Ctrl-C while the single layout first imported a node module was raised inside a
    dataclass's __set_name__, which Python wraps: "RuntimeError: Error calling __set_name__
    on 'Field' instance 'faults' in 'BridgeConfig'", an unexpected error (exit 1) in a CI
    run where the run should have been aborted at step -1."""
    from simforge_ros import runner

    class Fires:
        def __set_name__(self, owner, name):
            raise runner._StoppedAtStart

    with pytest.raises(RuntimeError) as wrapped:
        type("Made", (), {"field": Fires()})
    assert runner._stopped_at_start(wrapped.value)
    assert runner._stopped_at_start(runner._StoppedAtStart())
    assert not runner._stopped_at_start(RuntimeError("another"))


def test_ctrl_c_while_a_participant_is_stopped_ends_the_run_without_waiting_for_it(tmp_path):
    """A driver stopped (SIGSTOP, a debugger) cannot end by itself: the run waited its 5 s
    grace for it and then 3 s for a SIGTERM it could not take, 9.7 s after a Ctrl-C. It is
    continued after its SIGTERM now, and leaves as a node does."""
    out = tmp_path / "runs"
    exe = Path(sys.executable).with_name("simforge")
    proc = subprocess.Popen([str(exe), "run", "right_turn", "--out", str(out), "--json", "--steps", "3000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    _wait_for_steps(proc, out, 30)
    (driver,) = [pid for pid in processes_mentioning(str(out))
                 if b"nodes.driver" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    os.kill(driver, signal.SIGSTOP)
    try:
        time.sleep(0.5)
        interrupted_at = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(driver, signal.SIGCONT)
    assert time.monotonic() - interrupted_at < 7.0, stderr  # about 2 s here, 9.7 s before
    result = json.loads(stdout)
    assert proc.returncode == 19 and result["refusal"]["code"] == "aborted", (result, stderr)
    assert processes_mentioning(str(out)) == []
    check = simforge("verify", result["run_dir"], cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
