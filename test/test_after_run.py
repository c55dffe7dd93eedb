"""A run counts only with a clean exit of every node: what the runner makes of
participants that misbehave after a counted run (real processes that exit non-zero, by a
signal, or not at all)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from simforge_ros.runner import (
    RunResult,
    RunSpec,
    _abort_lines,
    _dump_stacks,
    _refuse_unclean,
    _stop_all,
    _unclean_exits,
)


def _started(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def test_a_participant_that_crashed_after_the_run_is_named_with_its_log(tmp_path: Path) -> None:
    procs = {
        "clock_master": _started("raise SystemExit(0)"),
        "sim_bridge": _started("raise SystemExit(0)"),
        "driver": _started("raise SystemExit(3)"),
        "recorder": _started("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"),
    }
    for proc in procs.values():
        proc.wait(timeout=30)
    assert _unclean_exits(procs, set(), tmp_path) == [
        f"driver exited with 3 after the run ended (see {tmp_path / 'driver.log'})",
        f"recorder exited with signal SIGSEGV after the run ended (see {tmp_path / 'recorder.log'})",
    ]


def test_a_participant_still_running_after_the_grace_is_named_as_stopped_with_where_it_was(tmp_path: Path) -> None:
    """Its log ends with its threads' stacks (a node registers dump_stacks_on_signal as it
    starts): a node stuck past the run's end used to leave an empty log."""
    stuck = ("from simforge_ros.process_tuning import dump_stacks_on_signal\n"
             "import time\n"
             "def waiting_for_the_end():\n"
             "    print('up', flush=True)\n"
             "    time.sleep(60)\n"
             "dump_stacks_on_signal(); waiting_for_the_end()\n")
    log = (tmp_path / "driver.log").open("wb")
    procs = {"clock_master": _started("pass"),
             "driver": subprocess.Popen([sys.executable, "-c", stuck], start_new_session=True, stdout=subprocess.PIPE,
                                        stderr=log)}
    assert procs["driver"].stdout is not None and procs["driver"].stdout.readline() == b"up\n"
    procs["clock_master"].wait(timeout=30)
    lingering = {name for name, proc in procs.items() if proc.poll() is None}
    _dump_stacks(procs, lingering)
    _stop_all(procs)
    log.close()
    assert procs["driver"].returncode == -signal.SIGTERM
    assert _unclean_exits(procs, lingering, tmp_path) == [
        f"driver was still running 5 s after the run ended and was stopped (see {tmp_path / 'driver.log'}, "
        "which ends with where its threads were)",
    ]
    said = (tmp_path / "driver.log").read_text()
    assert "most recent call first" in said and "in waiting_for_the_end" in said, said


def test_participants_that_left_with_0_are_clean(tmp_path: Path) -> None:
    procs = {name: _started("pass") for name in ("clock_master", "sim_bridge", "driver", "recorder")}
    for proc in procs.values():
        proc.wait(timeout=30)
    assert _unclean_exits(procs, set(), tmp_path) == []


def test_an_unclean_exit_refuses_the_run_and_its_manifest_says_so(tmp_path: Path) -> None:
    manifest = {"run_id": "r", "status": "counted", "refusal": None, "steps": 40, "chain_digest": "ab" * 32}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    counted = RunResult("r", "right_turn", 40, "ab" * 32, "counted", None, str(tmp_path), 0)
    refused = _refuse_unclean(RunSpec("right_turn", tmp_path, "r"), counted, ["driver exited with 3 (see d.log)"])
    detail = "driver exited with 3 (see d.log): a run counts only with a clean exit of every node and no abort line"
    assert (refused.status, refused.exit_code) == ("refused", 18)
    assert refused.refusal == {"code": "participant_error", "step": 40, "detail": detail}
    kept = json.loads((tmp_path / "manifest.json").read_text())
    assert kept == {**manifest, "status": "refused", "refusal": refused.refusal}
    assert (refused.steps, refused.chain_digest) == (40, "ab" * 32)  # what was recorded stays


def test_the_first_abort_line_of_each_log_is_named(tmp_path: Path) -> None:
    """A traceback or a FATAL line: something broke that no refusal named. The warnings a
    counted run's logs hold (a resent request, a slow acknowledgement) are not one."""
    (tmp_path / "clock_master.log").write_text(
        "[WARN] [1.0] [clock_master]: no answer from driver within 1 s (step 0): sending the request again\n"
        'SIMFORGE_OUTCOME {"status": "counted"}\n')
    (tmp_path / "recorder.log").write_text(
        "Exception in thread bag-writer:\nTraceback (most recent call last):\n  File x\nOSError: boom\n")
    (tmp_path / "driver.log").write_text("[FATAL] [2.0] [driver]: lost\nTraceback (most recent call last):\n")
    names = ["clock_master", "recorder", "driver", "sim_bridge"]  # no sim_bridge.log: nothing to say
    assert _abort_lines(tmp_path, names) == [
        f"{tmp_path / 'recorder.log'} line 1: 'Exception in thread bag-writer:'",
        f"{tmp_path / 'driver.log'} line 1: '[FATAL] [2.0] [driver]: lost'",
    ]
