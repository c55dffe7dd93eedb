"""A recorder that cannot write its record (a full disk, here a file-size limit: the
same OSError from the same write calls) stops the run at once with a named refusal, keeps
what it wrote, and leaves a run that salvage turns into one that verifies."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from runs import lockstep, salvaged_and_verified, simforge

from simforge_ros.record import room

pytestmark = pytest.mark.ros

LIMIT_BYTES = 6_000_000  # each file the run writes: the bag passes it after ~17 steps of two frames


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT_BYTES, LIMIT_BYTES))


@pytest.mark.parametrize("layout", ["single", "processes"])
def test_a_record_that_cannot_be_written_is_refused_at_once_and_kept(tmp_path, layout):
    exe = Path(sys.executable).with_name("simforge")
    # the loop stays within 4 steps of the recorder: under load the recorder of the
    # processes layout took a bag's worth of frames before it had chained step 0
    out = subprocess.run([str(exe), "run", "right_turn", "--steps", "150", "--layout", layout, "--json",
                          "--set", "clock_master.recorder_backlog_steps=4", "--out", str(tmp_path / "runs")],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300, preexec_fn=_limited,
                         env=dict(os.environ))
    assert out.returncode == 18, out.stderr + out.stdout
    assert "Traceback" not in out.stderr and "FATAL" not in out.stderr
    result = json.loads(out.stdout)
    refusal = result["refusal"]
    assert refusal["code"] == "participant_error"
    assert refusal["detail"].startswith("recorder: writing the run's record failed after ")
    assert "File too large" in refusal["detail"]
    assert refusal["step"] < 60  # stopped at once, not after the 150 steps unrecorded
    run_dir = Path(result["run_dir"])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    kept = (run_dir / "steps.jsonl").read_text().splitlines()
    assert manifest["status"] == "refused" and manifest["steps"] == len(kept) == result["steps"] > 0
    assert manifest["record_failure"] in refusal["detail"]
    # the bag was cut off: verify says so and what to do; salvage makes a run that verifies
    verify = simforge("verify", str(run_dir), cwd=tmp_path)
    assert verify.returncode == 2 and "bag: not completed: writing the run's record failed" in verify.stderr
    assert f"`simforge salvage {run_dir}`" in verify.stderr
    report, salvaged_manifest = salvaged_and_verified(run_dir, len(kept), tmp_path)
    assert salvaged_manifest["refusal"]["code"] == "participant_error"
    said = f"salvaged {report['steps']} steps from the {report['chunks']} chunks its bag had written"
    if report["last_step_lacks"]:  # the last chunk written may end inside a step's messages
        lacks = ", ".join(report["last_step_lacks"])
        said += f"; step {report['steps'] - 1} lacks {lacks} (in the chunk never written)"
    assert salvaged_manifest["refusal"]["detail"].endswith(said)


def test_the_record_estimate_covers_what_a_run_writes(tmp_path):
    """The pre-flight estimate (record.room) against the bytes a real run left."""
    result = lockstep(tmp_path, steps=40, layout="single", sets={"sim_bridge": {"cameras": ["front", "left"]}})
    assert result.status == "counted"
    written = sum(p.stat().st_size for p in Path(result.run_dir).rglob("*") if p.is_file())
    from simforge_ros.runner import RunSpec, node_params

    estimate = room.estimate(node_params(RunSpec(scenario="right_turn", out_dir=tmp_path, run_id="x", steps=40,
                                                 sets={"sim_bridge": {"cameras": ["front", "left"]}})))
    assert estimate is not None
    assert written <= estimate.bytes <= 1.5 * written, (written, estimate.bytes)


@pytest.mark.parametrize("layout", ["single", "processes"])
def test_a_run_whose_directory_is_removed_is_refused_as_one_that_cannot_write_its_record(tmp_path, layout):
    """Writes into a removed directory's open files succeed, into nothing: the run went on
    to its last step and was then refused "incomplete_run at step 0, 0 steps", its detail
    "recorder: recorder: ...". The recorder looks at its directory at every flush (0.2 s)."""
    import shutil
    import signal
    import time

    out = tmp_path / "runs"
    exe = Path(sys.executable).with_name("simforge")
    run = subprocess.Popen([str(exe), "run", "right_turn", "--out", str(out), "--json", "--layout", layout,
                            "--steps", "3000", "--real-time-factor", "10"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        wall_deadline = time.monotonic() + 120
        while not (found := list(out.glob("*/steps.jsonl"))) or found[0].read_text().count("\n") < 20:
            assert run.poll() is None and time.monotonic() < wall_deadline, run.communicate()
            time.sleep(0.02)
        shutil.rmtree(found[0].parent)
        removed_at = time.monotonic()
        stdout, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGKILL)
    assert time.monotonic() - removed_at < 10, stderr  # not the 3000 steps' 30 s
    result = json.loads(stdout)
    assert run.returncode == 18 and result["refusal"]["code"] == "participant_error", (result, stderr)
    detail = result["refusal"]["detail"]
    assert detail.startswith("recorder: writing the run's record failed after ") and "recorder: recorder" not in detail
    assert "the run directory was removed or replaced" in detail, detail
    assert result["refusal"]["step"] < 3000
