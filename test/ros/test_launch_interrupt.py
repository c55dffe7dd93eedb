"""Ctrl-C on `ros2 launch`: the terminal's SIGINT reaches every node of the launch at
once (launch's children share its process group). launch and launch_ros do not install
from PyPI, so this starts the launch file's four nodes as it does (the launch plan's
parameter file, each node named by `__node`, SIMFORGE_UNDER_LAUNCH=1 for the
participants, one process group) and interrupts the group. The run must end as a run
interrupted by `simforge run` does: refused `aborted` at its step, its record verified;
every participant used to leave at once and every interrupted launch was kept as
incomplete_run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from runs import simforge

from simforge_ros.launch_plan import NODES, plan
from simforge_ros.params import params_yaml
from simforge_ros.under_launch import UNDER_LAUNCH_ENV

pytestmark = pytest.mark.ros
ROOT = Path(__file__).resolve().parents[2]
EXES = {"clock_master": "simforge-clock-master", "sim_bridge": "simforge-sim-bridge", "driver": "simforge-driver",
        "recorder": "simforge-recorder"}


def _launch(ros_lease: Any, tmp_path: Path, given: dict[str, str]) -> tuple[list[str], list[subprocess.Popen[str]]]:
    """The launch file's four nodes, started as it starts them, in one process group."""
    planned = plan(given, ROOT / "config" / "simforge.yaml")
    handed = tmp_path / "handed.yaml"
    handed.write_text(params_yaml(planned.nodes))
    env = {**ros_lease.env, UNDER_LAUNCH_ENV: "1"}
    procs, names = [], []
    for name in NODES:
        if name not in planned.nodes:
            continue
        exe = Path(sys.executable).with_name(EXES[name])
        names.append(name)
        procs.append(subprocess.Popen(
            [str(exe), "--ros-args", "-r", f"__node:={name}", "--params-file", str(planned.params_file),
             "--params-file", str(handed)],
            env={k: v for k, v in env.items() if not (k == UNDER_LAUNCH_ENV and name == "clock_master")},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            process_group=0 if not procs else procs[0].pid))
    return names, procs


def test_ctrl_c_on_a_launch_aborts_the_run_at_its_step_and_keeps_its_record(ros_lease, tmp_path):
    run_dir = tmp_path / "run"  # out_dir:= is the run's own directory
    names, procs = _launch(ros_lease, tmp_path, {"scenario": "right_turn", "out_dir": str(run_dir),
                                                 "run_id": "launched", "steps": "2000", "real_time_factor": "4"})
    try:
        steps = run_dir / "steps.jsonl"
        wall_deadline = time.monotonic() + 120
        while not (steps.exists() and steps.read_text().count("\n") >= 30):
            assert time.monotonic() < wall_deadline, "no 30 steps chained within 120 s"
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            time.sleep(0.02)
        os.killpg(procs[0].pid, signal.SIGINT)  # the terminal's Ctrl-C
        logs = [p.communicate(timeout=60)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all("Traceback" not in log for log in logs), logs
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "refused", logs
    assert (manifest["refusal"]["code"], manifest["refusal"]["detail"]) == ("aborted", "interrupted")
    assert 30 <= manifest["refusal"]["step"] < 2000 and manifest["steps"] >= manifest["refusal"]["step"]
    # the clock master exits as a refused run does; the participants ended on the run's end
    assert {name: p.returncode for name, p in zip(names, procs, strict=True)} == {
        "recorder": 0, "sim_bridge": 0, "driver": 0, "clock_master": 19}
    check = simforge("verify", str(run_dir), cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr

