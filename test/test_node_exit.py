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



def test_a_teardown_stuck_holding_the_interpreter_lock_still_ends_with_its_stacks():
    # as rclpy's EventsExecutor.shutdown was seen to: in C++, the lock held, so that
    # exit_if_stuck's timer thread (Python) never runs; its kernel timer ends the process
    script = (f"import sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
              "from hold_lock import hold_interpreter_lock\n"
              "from simforge_ros.nodes.common import exit_if_stuck\n"
              "exit_if_stuck(0.3, 7)\nhold_interpreter_lock()\n")
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == -signal.SIGALRM
    assert time.monotonic() - t0 < 20
    assert "teardown did not finish" not in done.stderr  # the Python timer never ran
    assert "in hold_interpreter_lock" in done.stderr  # where the main thread was
    assert "in wait" in done.stderr  # the timer thread, waiting for the lock

