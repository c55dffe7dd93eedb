"""A run counts only with a clean exit of every node and no abort line (the seed
article's third guard), shown on real `processes` runs whose nodes misbehave only after
the last step. The misbehaviour comes from a sitecustomize module on the node processes'
PYTHONPATH: nothing in simforge is told about it, as with a real crash at exit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from runs import lockstep, manifest_of

# runs at interpreter exit in the one node process named, after the node's main returned 0
_AT_EXIT = """\
import atexit, os, sys
if "simforge_ros.nodes.{node}" in sys.orig_argv:
    atexit.register(lambda: {action})
"""


def _at_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, node: str, action: str) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_AT_EXIT.format(node=node, action=action))
    monkeypatch.setenv("PYTHONPATH", str(site))


_HELPERS = str(Path(__file__).resolve().parent.parent)  # test/, where hold_lock.py is

# in each node process named, its teardown (close_nodes) hangs as rclpy's was seen to: in C,
# the interpreter lock held, so that exit_if_stuck's timer thread never runs
_HANG_IN_TEARDOWN = """\
import sys
if any(f"simforge_ros.nodes.{{name}}" in sys.orig_argv for name in {nodes!r}):
    sys.path.insert(0, {helpers!r})
    from hold_lock import hold_interpreter_lock
    import simforge_ros.nodes.common as common
    common.close_nodes = lambda executor, nodes: {hang}
"""


def _hang_in_teardown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *nodes: str,
                      hang: str = "hold_interpreter_lock()") -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_HANG_IN_TEARDOWN.format(nodes=nodes, helpers=_HELPERS, hang=hang))
    monkeypatch.setenv("PYTHONPATH", str(site))


def test_nodes_whose_teardown_hangs_holding_the_interpreter_lock_leave_and_the_run_counts(tmp_path, monkeypatch):
    """Seen in a full suite (the driver, once): the run's results were all out, then the
    node never left, and the run was refused as a node still running 5 s after it ended."""
    nodes = ("clock_master", "sim_bridge", "driver", "recorder")
    _hang_in_teardown(tmp_path, monkeypatch, *nodes)
    result = lockstep(tmp_path / "runs", steps=12, layout="processes", sets={"sim_bridge": {"cameras": []}})
    assert (result.status, result.refusal, result.exit_code, result.steps) == ("counted", None, 0, 12)
    assert manifest_of(result)["status"] == "counted"
    for node in nodes:
        lines = (Path(result.run_dir) / "logs" / f"{node}.log").read_text().splitlines()
        assert lines[-1] == (f"simforge run: {node}'s teardown hung after its work was done, holding Python's "
                             "interpreter lock; its watchdog ended it (SIGALRM); the stacks above show where it was")
        assert any("in hold_interpreter_lock" in line for line in lines)  # where it was
    # counted, and said: `simforge run` prints each note on stderr
    assert sorted(note.split("'")[0] for note in result.notes) == sorted(nodes)
    assert all("ROS teardown hung after the run, holding the interpreter lock, and its watchdog ended it" in note
               for note in result.notes)


def test_a_teardown_that_hangs_in_python_is_ended_by_its_timer_and_noted(tmp_path, monkeypatch):
    _hang_in_teardown(tmp_path, monkeypatch, "driver", hang="__import__('time').sleep(60)")
    result = lockstep(tmp_path / "runs", steps=12, layout="processes", sets={"sim_bridge": {"cameras": []}})
    assert (result.status, result.exit_code) == ("counted", 0)
    log = Path(result.run_dir) / "logs" / "driver.log"
    assert log.read_text().splitlines()[-1] == "teardown did not finish within 3 s: exiting without it"
    assert result.notes == (f"driver's ROS teardown did not finish in time after the run, and its watchdog ended it "
                            f"(see {log})",)


def test_a_refused_run_whose_clock_master_hangs_in_teardown_keeps_its_refusal(tmp_path, monkeypatch):
    _hang_in_teardown(tmp_path, monkeypatch, "clock_master")
    result = lockstep(tmp_path / "runs", steps=12, layout="processes", faults=("drop_frame@4",))
    assert (result.status, result.refusal["code"], result.refusal["step"]) == ("refused", "missing_frame", 4)
    assert result.exit_code == 12  # missing_frame's own, not the watchdog's signal
    log = (Path(result.run_dir) / "logs" / "clock_master.log").read_text()
    assert log.endswith("its watchdog ended it (SIGALRM); the stacks above show where it was\n")


# in the `simforge run` process itself (the single layout's), the same hang, and a short watch
_HANG_IN_SINGLE_TEARDOWN = """\
import sys
sys.path.insert(0, {helpers!r})
from hold_lock import hold_interpreter_lock
import simforge_ros.nodes.common as common
import simforge_ros.runner as runner
common.close_nodes = lambda executor, nodes: hold_interpreter_lock()
runner.SINGLE_TEARDOWN_S = 1.0
"""


def test_a_single_run_whose_teardown_hangs_ends_its_process_instead_of_hanging_for_good(tmp_path):
    """The nodes' threads are `simforge run`'s own there: nothing else could end it."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_HANG_IN_SINGLE_TEARDOWN.format(helpers=_HELPERS))
    exe = Path(sys.executable).with_name("simforge")
    out = tmp_path / "runs"
    done = subprocess.run([str(exe), "run", "right_turn", "--layout", "single", "--steps", "5", "--out", str(out)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(site)})
    assert done.returncode == -signal.SIGALRM, done.stderr
    assert "in hold_interpreter_lock" in done.stderr  # where it was, for the bug report
    (run_dir,) = list(out.iterdir())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert (manifest["status"], manifest["steps"]) == ("counted", 5)  # written before the teardown


def test_a_node_that_exits_non_zero_after_the_last_step_refuses_the_run(tmp_path, monkeypatch):
    _at_exit(tmp_path, monkeypatch, "driver", "os._exit(3)")
    result = lockstep(tmp_path / "runs", steps=12, layout="processes", sets={"sim_bridge": {"cameras": []}})
    assert (result.status, result.exit_code) == ("refused", 18)
    log = Path(result.run_dir) / "logs" / "driver.log"
    assert result.refusal == {
        "code": "participant_error", "step": 12,
        "detail": f"driver exited with 3 after the run ended (see {log}): a run counts only with a clean exit "
                  "of every node and no abort line"}
    manifest = manifest_of(result)
    assert (manifest["status"], manifest["refusal"], manifest["steps"]) == ("refused", result.refusal, 12)
    records = (Path(result.run_dir) / "steps.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in records] == list(range(12))  # every step is kept


def test_a_traceback_in_a_nodes_log_refuses_the_run(tmp_path, monkeypatch):
    _at_exit(tmp_path, monkeypatch, "recorder",
             "print('Traceback (most recent call last):', file=sys.stderr, flush=True)")
    result = lockstep(tmp_path / "runs", steps=12, layout="processes", sets={"sim_bridge": {"cameras": []}})
    assert (result.status, result.refusal["code"], result.refusal["step"]) == ("refused", "participant_error", 12)
    log = Path(result.run_dir) / "logs" / "recorder.log"
    assert result.refusal["detail"].startswith(f"{log} line 1: 'Traceback (most recent call last):'")


def test_a_clean_run_with_the_same_hook_on_no_node_counts(tmp_path, monkeypatch):
    """The hook itself changes nothing: on a node name no process has, the run counts."""
    _at_exit(tmp_path, monkeypatch, "nobody", "os._exit(3)")
    result = lockstep(tmp_path / "runs", steps=12, layout="processes", sets={"sim_bridge": {"cameras": []}})
    assert (result.status, result.refusal, result.exit_code) == ("counted", None, 0)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the thread fails on purpose
def test_a_thread_of_a_single_run_that_dies_of_an_exception_refuses_the_run(tmp_path):
    """In `single` the nodes' threads are the runner's own: one that dies of an exception
    (its traceback printed, as before) is what an abort line is in a node's log. The thread
    here is started from the run's on_step callback, at step 5, and fails at once."""
    from simforge_ros.runner import RunSpec, run

    def on_step(step: int, _steps: int) -> None:
        if step == 5:
            worker = threading.Thread(target=lambda: 1 / 0, name="worker-of-step-5")
            worker.start()
            worker.join()

    out = tmp_path / "runs" / "r"
    hook = threading.excepthook
    result = run(RunSpec(scenario="right_turn", out_dir=out, run_id="r", steps=12, layout="single",
                         sets={"sim_bridge": {"cameras": []}}), on_step=on_step)
    assert (result.status, result.exit_code) == ("refused", 18)
    assert result.refusal == {
        "code": "participant_error", "step": 12,
        "detail": "worker-of-step-5 died of ZeroDivisionError: division by zero: a run counts only with a clean "
                  "exit of every node and no abort line"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["status"], manifest["refusal"], manifest["steps"]) == ("refused", result.refusal, 12)
    assert threading.excepthook is hook  # put back as it was
    clean = run(RunSpec(scenario="right_turn", out_dir=tmp_path / "runs" / "c", run_id="c", steps=12,
                        layout="single", sets={"sim_bridge": {"cameras": []}}))
    assert clean.status == "counted"


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # raised on purpose
def test_an_exception_python_ignored_during_a_single_run_refuses_it(tmp_path):
    """"Exception ignored in ...": an exception in a __del__, which Python prints (with a
    traceback, an abort line in a node's log in processes) and cannot raise."""
    from simforge_ros.runner import RunSpec, run

    class Leaky:
        def __del__(self) -> None:
            raise RuntimeError("closing what was already closed")

    def on_step(step: int, _steps: int) -> None:
        if step == 3:
            Leaky()  # dropped at once: its __del__ runs here

    out = tmp_path / "runs" / "r"
    hook = sys.unraisablehook
    result = run(RunSpec(scenario="right_turn", out_dir=out, run_id="r", steps=8, layout="single",
                         sets={"sim_bridge": {"cameras": []}}), on_step=on_step)
    assert (result.status, result.refusal["code"], result.refusal["step"]) == ("refused", "participant_error", 8)
    assert result.refusal["detail"].startswith(
        "an exception was ignored (RuntimeError: closing what was already closed, in <function ")
    assert sys.unraisablehook is hook
