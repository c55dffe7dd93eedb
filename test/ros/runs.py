"""Helpers for tests that run real lockstep runs (real rclpy, real DDS, real bags)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from simforge_ros.runner import RunResult, RunSpec, new_run_id, run


def lockstep(tmp_path: Path, scenario: str = "right_turn", **kwargs: Any) -> RunResult:
    """One run through the same runner `simforge run` uses; a new run dir under tmp_path.
    ``on_step`` (a keyword) goes to the runner, the rest to the RunSpec."""
    seed = kwargs.get("seed", 0)
    on_step = kwargs.pop("on_step", None)
    run_id = new_run_id(scenario, seed, len(list(tmp_path.glob("*"))))
    return run(RunSpec(scenario=scenario, out_dir=tmp_path / run_id, run_id=run_id, **kwargs), on_step)


def steps_of(result: RunResult) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (Path(result.run_dir) / "steps.jsonl").read_text().splitlines()]


def manifest_of(result: RunResult) -> dict[str, Any]:
    return json.loads((Path(result.run_dir) / "manifest.json").read_text())


def simforge(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed CLI, as a user runs it."""
    exe = Path(sys.executable).with_name("simforge")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=cwd, timeout=600,
                          env=dict(os.environ))


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line mentions ``text`` (for orphan checks)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def wait_for_nodes(domain_id: int, name: str, count: int = 1, proc: subprocess.Popen[Any] | None = None,
                   limit_s: float = 60.0) -> None:
    """Until ``count`` nodes named ``name`` are on ``domain_id``'s graph (a loaded machine
    may take seconds to start a process); fail past ``limit_s`` or once ``proc`` (the
    process meant to make one) has ended."""
    import rclpy
    from rclpy.node import Node

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain_id)
    try:
        probe = Node("graph_probe", context=context)
        wall_deadline = time.monotonic() + limit_s
        while sum(1 for n, _ns in probe.get_node_names_and_namespaces() if n == name) < count:
            assert (proc is None or proc.poll() is None) and time.monotonic() < wall_deadline, (
                f"{count} {name} nodes did not appear" + (f": {proc.communicate()}" if proc is not None else ""))
            time.sleep(0.05)
    finally:
        rclpy.shutdown(context=context)


def salvaged_and_verified(run_dir: Path, kept: int, cwd: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """`simforge salvage RUN --json` of a run whose record stopped, holding at most ``kept``
    steps that agree with its steps.jsonl, and `simforge verify` of what it wrote: (the
    salvage's report, the salvaged manifest)."""
    salvaged = simforge("salvage", str(run_dir), "--json", cwd=cwd)
    assert salvaged.returncode == 0, salvaged.stderr
    report = json.loads(salvaged.stdout)
    assert 0 < report["steps"] <= kept and report["agree"] == report["steps"]
    again = simforge("verify", report["out"], "--json", cwd=cwd)
    assert again.returncode == 0, again.stdout + again.stderr
    return report, json.loads((Path(report["out"]) / "manifest.json").read_text())
