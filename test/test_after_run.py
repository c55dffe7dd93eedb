"""What the runner says of participants that misbehave after a counted run: real
processes that exit non-zero, by a signal, or not at all."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from simforge_ros.runner import _after_run_notes, _stop_all


def _started(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def test_a_participant_that_crashed_or_hung_after_the_run_is_named_with_its_log(tmp_path: Path) -> None:
    procs = {
        "clock_master": _started("raise SystemExit(0)"),
        "sim_bridge": _started("raise SystemExit(0)"),
        "driver": _started("raise SystemExit(3)"),
        "recorder": _started("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"),
    }
    for proc in procs.values():
        proc.wait(timeout=30)
    notes = _after_run_notes(procs, set(), tmp_path)
    assert notes == (
        f"driver exited with 3 after the run ended (see {tmp_path / 'driver.log'})",
        f"recorder exited with signal SIGSEGV after the run ended (see {tmp_path / 'recorder.log'})",
    )


def test_a_participant_still_running_after_the_grace_is_named_as_stopped(tmp_path: Path) -> None:
    procs = {"clock_master": _started("pass"), "driver": _started("import time; time.sleep(60)")}
    procs["clock_master"].wait(timeout=30)
    lingering = {name for name, proc in procs.items() if proc.poll() is None}
    _stop_all(procs)
    assert procs["driver"].returncode == -signal.SIGTERM
    assert _after_run_notes(procs, lingering, tmp_path) == (
        f"driver was still running 5 s after the run ended and was stopped (see {tmp_path / 'driver.log'})",
    )


def test_participants_that_left_with_0_give_no_note(tmp_path: Path) -> None:
    procs = {name: _started("pass") for name in ("clock_master", "sim_bridge", "driver", "recorder")}
    for proc in procs.values():
        proc.wait(timeout=30)
    assert _after_run_notes(procs, set(), tmp_path) == ()
