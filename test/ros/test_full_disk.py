"""A disk that fills up during a run, for real: a small tmpfs of the test's own, filled
while the run is held. The run is refused at the step it reached, naming the write that
failed and the full disk, keeps what it wrote, and salvage makes a run that verifies once
there is room again.

test_record_failure covers the recorder's side with a file-size limit; a full disk also
keeps each node's log from being written, the clock master's outcome line included, and
`simforge run` (processes layout) then said "participant_error before step 0" of a run
refused at step 57."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from runs import salvaged_and_verified, simforge

from simforge_ros.runner import RunSpec, run

pytestmark = pytest.mark.ros

HOLD_AT = 4
DISK = "48m"  # room for the run's estimate (record.room), 200 steps of one camera


@contextmanager
def _disk(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        # a failure, not a skip: a skip passed the suite with no full disk tested (as root in CI it mounts)
        pytest.fail(f"a disk of the test's own needs `mount` (root): {made.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with _disk(tmp_path / "disk", DISK) as where:
        yield where


def _fill(path: Path) -> None:
    with path.open("wb") as handle:
        chunk = bytes(1 << 20)
        try:
            while True:
                handle.write(chunk)
                handle.flush()
        except OSError as err:
            assert err.errno == errno.ENOSPC, err


def _wait_for_steps(runs: Path, count: int, proc: subprocess.Popen[str]) -> Path:
    wall_deadline = time.monotonic() + 120
    while True:
        found = list(runs.glob("*/steps.jsonl"))
        if found and found[0].read_text().count("\n") >= count:
            return found[0].parent
        assert proc.poll() is None and time.monotonic() < wall_deadline, proc.communicate()
        time.sleep(0.1)


@pytest.mark.parametrize("layout", ["processes", "single"])
def test_a_disk_filled_during_the_run_is_refused_where_it_filled(small_disk, tmp_path, layout):
    exe = Path(sys.executable).with_name("simforge")
    runs = small_disk / "runs"
    proc = subprocess.Popen([str(exe), "run", "right_turn", "--steps", "200", "--layout", layout, "--json",
                             "--hold-at-step", str(HOLD_AT), "--set", "sim_bridge.cameras=[front]",
                             "--out", str(runs)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env=dict(os.environ))
    try:
        run_dir = _wait_for_steps(runs, HOLD_AT + 1, proc)  # held once step HOLD_AT is done and recorded
        filler = small_disk / "filler"
        _fill(filler)
        resumed = simforge("pause", "--resume", "--run", str(run_dir), cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 18, err + out
    assert "Traceback" not in err
    result = json.loads(out)
    refusal = result["refusal"]
    assert refusal["code"] == "participant_error"
    assert HOLD_AT < refusal["step"] <= HOLD_AT + 10, refusal  # where it filled, not "before step 0"
    assert refusal["detail"].startswith("recorder: writing the run's record failed after "), refusal
    assert "No space left on device" in refusal["detail"]
    assert f"the disk of {run_dir} is full" in refusal["detail"]
    kept = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines(keepends=True)
            if line.endswith("\n")]
    assert HOLD_AT + 1 <= result["steps"] == len(kept) <= refusal["step"]
    assert result["chain_digest"] == kept[-1]["digest"]
    # the recorder's reserve (record.reserve) gave the manifest room: it says what the files hold
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "refused"
    assert {**manifest["refusal"], "detail": refusal["detail"]} == refusal  # `simforge run` adds the full disk
    assert refusal["detail"].startswith(manifest["refusal"]["detail"])
    assert manifest["steps"] == len(kept) and manifest["chain_digest"] == kept[-1]["digest"]
    assert manifest["record_failure"] in refusal["detail"]
    assert not (run_dir / ".reserved-room").exists()
    if layout == "processes":  # its log is on the full disk: the line is said again once there is room
        assert manifest["record_failure"] in (run_dir / "logs" / "recorder.log").read_text()
    # room again: salvage keeps what the bag had written, and the salvaged run verifies
    filler.unlink()
    _report, salvaged_manifest = salvaged_and_verified(run_dir, len(kept), tmp_path)
    assert salvaged_manifest["refusal"]["code"] == "participant_error"
    assert "No space left on device" in salvaged_manifest["refusal"]["detail"]


def test_a_clock_master_that_cannot_write_its_log_still_says_how_the_run_ended(tmp_path):
    """Its outcome line also goes through a pipe to `simforge run` (processes layout): a
    run that counted read "participant_error ... clock master exited with 0" when its
    clock master's log was on a full disk."""
    with _disk(tmp_path / "full", "64k") as full:
        (full / "clock_master.log").touch()
        _fill(full / "filler")
        runs = tmp_path / "runs"
        runs.mkdir()
        run_id = "right_turn-s0-00-fulllog"
        (runs / run_id / "logs").mkdir(parents=True)
        (runs / run_id / "logs" / "clock_master.log").symlink_to(full / "clock_master.log")
        result = run(RunSpec(scenario="right_turn", out_dir=runs / run_id, run_id=run_id, steps=20,
                             layout="processes"))
        assert (full / "clock_master.log").stat().st_size == 0  # nothing of it was written
    assert result.run_dir == str(runs / run_id)
    assert (result.status, result.refusal, result.exit_code, result.steps) == ("counted", None, 0, 20)
