"""A node whose teardown hangs still leaves, with the exit code it had."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path


def test_exit_if_stuck_leaves_with_the_code_after_the_deadline():
    script = ("import time\nfrom simforge_ros.nodes.common import exit_if_stuck\n"
              "exit_if_stuck(0.3, 7)\ntime.sleep(30)\n")
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 7
    assert time.monotonic() - t0 < 20
    assert "teardown did not finish within 0.3 s" in done.stderr


def test_exit_if_stuck_does_not_hold_a_process_that_finishes():
    script = "from simforge_ros.nodes.common import exit_if_stuck\nexit_if_stuck(30, 7)\nprint('done')\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=20)
    assert done.returncode == 0 and done.stdout.strip() == "done"


def _stuck(body: str) -> subprocess.CompletedProcess[str]:
    """Run ``body`` in a fresh interpreter, hold_interpreter_lock (test/hold_lock.py) at hand."""
    script = (f"import sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
              f"from hold_lock import hold_interpreter_lock\n{body}")
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)


def test_a_teardown_stuck_holding_the_interpreter_lock_still_ends_with_its_stacks():
    # as rclpy's EventsExecutor.shutdown was seen to: in C++, the lock held, so that
    # exit_if_stuck's timer thread (Python) never runs; its kernel timer ends the process
    t0 = time.monotonic()
    done = _stuck("from simforge_ros.nodes.common import exit_if_stuck\nexit_if_stuck(0.3, 7)\n"
                  "hold_interpreter_lock()\n")
    assert done.returncode == -signal.SIGALRM
    assert time.monotonic() - t0 < 20
    assert "teardown did not finish" not in done.stderr  # the Python timer never ran
    assert "in hold_interpreter_lock" in done.stderr  # where the main thread was
    assert "in wait" in done.stderr  # the timer thread, waiting for the lock


def test_a_stretch_watched_by_ended_if_stuck_that_hangs_ends_the_process_with_its_stacks():
    # the single layout's teardown, in the process that ran the run
    done = _stuck("from simforge_ros.process_tuning import ended_if_stuck\n"
                  "with ended_if_stuck(0.3):\n    hold_interpreter_lock()\n")
    assert done.returncode == -signal.SIGALRM
    assert "in hold_interpreter_lock" in done.stderr


def test_a_watch_nested_in_a_longer_one_leaves_the_longer_one_armed_with_its_stacks():
    # a single run's teardown inside a bench: the bench's own watch still ends a later hang
    done = _stuck("from simforge_ros.process_tuning import ended_if_stuck\n"
                  "with ended_if_stuck(0.5):\n"
                  "    with ended_if_stuck(30):\n        pass\n"
                  "    hold_interpreter_lock()\n")
    assert done.returncode == -signal.SIGALRM
    assert "in hold_interpreter_lock" in done.stderr


def test_a_bench_that_hangs_holding_the_interpreter_lock_still_ends():
    # its watchdog thread cannot run then: the kernel's timer ends it, past the deadline
    done = _stuck("from simforge_ros import bench\nbench._BACKSTOP_S = 0.2\n"
                  "with bench.Watchdog(0.3):\n    hold_interpreter_lock()\n")
    assert done.returncode == -signal.SIGALRM
    assert "in hold_interpreter_lock" in done.stderr and "bench_timeout" not in done.stderr


def test_a_stretch_done_in_time_leaves_the_signal_and_the_callers_own_timer_as_they_were():
    from simforge_ros.process_tuning import ended_if_stuck

    fired = []

    def handler(signum, _frame):
        fired.append(signum)

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 100.0)
        with ended_if_stuck(5.0):
            assert 4.0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 5.0  # armed for the stretch
        assert signal.getsignal(signal.SIGALRM) is handler
        assert 90.0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 100.0  # the caller's own, going on
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        time.sleep(0.3)
        assert fired == [signal.SIGALRM]  # reaches the caller's handler, not faulthandler's
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_participant_missing_a_module_exits_2_with_its_line():
    """A start-up failure like a bad parameter: under launch, exit 2 ends the launch at once;
    a missing torch exited 1 and the launch waited out the clock master's start-up limit."""
    code = ("import sys\nfrom simforge_ros.nodes.common import run_participant\n"
            "def build():\n    raise ModuleNotFoundError(\"No module named 'torch'\")\n"
            "sys.exit(run_participant(build, 'driver', ['driver']))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().endswith("driver: cannot start: No module named 'torch'")


_FLOODED = """\
import os, signal, subprocess, sys, time
from simforge_ros.nodes.common import ignore_stop_signals
signal.signal(signal.{name}, lambda *_: None)  # a node's own handler, as run_participant's
flood = subprocess.Popen(["sh", "-c", "while kill -{short} {{pid}} 2>/dev/null; do :; done".format(pid=os.getpid())])
time.sleep(0.3)  # the flood is on, and the handler takes each signal
if {ignore}:
    ignore_stop_signals()  # as run_participant does on its way out
"""


def test_a_stop_signal_as_the_interpreter_ends_no_longer_kills_a_node_that_has_done_its_part():
    """Python puts the default action back for a handler of its own as the interpreter ends:
    a signal then killed the node (exit -2), which `ros2 launch` logs as a death, after a
    counted run (it sends SIGINT to every node still running once the clock master has
    exited). Signals come without pause here; before ignore_stop_signals, every such
    process died of one."""
    for name in ("SIGINT", "SIGTERM"):
        def flooded(ignore: bool, name: str = name) -> int:
            code = _FLOODED.format(name=name, short=name[3:], ignore=ignore)
            return subprocess.run([sys.executable, "-c", code], timeout=30).returncode

        assert flooded(False) == -getattr(signal, name)  # what a node's exit was, without it
        assert flooded(True) == 0, name
