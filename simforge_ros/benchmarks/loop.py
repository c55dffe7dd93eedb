"""Lockstep loop runs for the benchmark: per-step time, lost messages, node memory.

Per-step time comes from the clock master's own ``wall_step_ns`` (each step's whole loop
cycle: from the end of one decision to the end of the next, see core.lockstep.TimingRecord),
the first min(50, n/10) steps left out as start-up. The clock master reports the summary
in its outcome; with the recorder on, steps.jsonl holds the same numbers per step.
"""

from __future__ import annotations

import json
import shutil
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from simforge_ros import topics
from simforge_ros.benchmarks import scratch_dir

FOUR_CAMERAS = ("front", "left", "rear", "right")
_NODE_MARK = "simforge_ros.nodes."


def read_status(pid: int) -> dict[str, int] | None:
    """VmRSS and VmHWM (kB) of a process from /proc/<pid>/status; None once it is gone."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, value = line.split(":", 1)
                    out[key] = int(value.split()[0])
    except (FileNotFoundError, ProcessLookupError, OSError):
        return None
    return out if len(out) == 2 else None


def node_processes(marker: str) -> dict[str, int]:
    """node name -> pid of the live simforge node processes whose command line has ``marker``."""
    found: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in cmdline]
        if not any(marker in a for a in args):
            continue
        for arg in args:
            if arg.startswith(_NODE_MARK):
                found[arg[len(_NODE_MARK):]] = int(entry.name)
    return found


class StepsCounter:
    """Counts the lines of a growing steps.jsonl without rereading it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self.lines = 0

    def poll(self) -> int:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except FileNotFoundError:
            return self.lines
        self._offset += len(chunk)
        self.lines += chunk.count(b"\n")
        return self.lines


@dataclass
class RssSampler:
    """Samples VmRSS/VmHWM of a run's node processes while it runs (processes layout).

    ``checkpoint`` steps: the sample taken when steps.jsonl first holds that many steps is
    kept apart; ``last`` is the latest sample of each node before it exited.
    """

    marker: str
    steps_file: Path
    checkpoint: int
    period_s: float = 0.1
    at_checkpoint: dict[str, dict[str, int]] = field(default_factory=dict)
    checkpoint_step: int | None = None
    last: dict[str, dict[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)
        self._counter = StepsCounter(self.steps_file)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        pids: dict[str, int] = {}
        while not self._stop.wait(self.period_s):
            if len(pids) < 4:
                pids.update(node_processes(self.marker))
            sample = {name: s for name, pid in pids.items() if (s := read_status(pid)) is not None}
            self.last.update(sample)
            if self.checkpoint_step is None and sample:
                done = self._counter.poll()
                if done >= self.checkpoint:
                    self.at_checkpoint = {k: dict(v) for k, v in sample.items()}
                    self.checkpoint_step = done


def bag_counts(run_dir: Path) -> dict[str, int]:
    """topic -> messages in the run's bag (from the bag's metadata.yaml)."""
    meta = yaml.safe_load((run_dir / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    return {t["topic_metadata"]["name"]: int(t["message_count"]) for t in meta["topics_with_message_count"]}


def lost_messages(counts: dict[str, int], steps: int, cameras: tuple[str, ...]) -> dict[str, int]:
    """topic -> messages missing from the bag, for every topic the loop publishes once a step.

    camera_info is published with every image but is not part of a step record: it is
    counted too (the recorder stops listening once the run is confirmed, so a camera_info
    of the very last step can be late rather than lost; it is reported, not excused).
    """
    per_step = list(topics.STEP_TOPICS)
    per_step += [topics.image_topic(c) for c in cameras] + [topics.camera_info_topic(c) for c in cameras]
    return {t: steps - counts.get(t, 0) for t in per_step if counts.get(t, 0) != steps}


def round_trips(steps_file: Path, skip: int) -> dict[str, float]:
    """Median Step and Decide round trips (µs) over a run's steps.jsonl, its first ``skip``
    steps left out as the per-step figures leave them out: where a step's time goes."""
    bridge, driver = [], []
    with steps_file.open() as handle:
        for i, line in enumerate(handle):
            if i < skip:
                continue
            wall = json.loads(line).get("wall") or {}
            bridge.append(wall.get("wall_bridge_ns", 0))
            driver.append(wall.get("wall_driver_ns", 0))
    if not bridge:
        return {}
    return {"step_rtt_median": statistics.median(bridge) / 1000.0,
            "decide_rtt_median": statistics.median(driver) / 1000.0}


def run_loop(
    layout: str, cameras: tuple[str, ...], record: bool, steps: int, rss_checkpoint: int | None = None,
    scenario: str = "right_turn", keep: Path | None = None,
) -> dict[str, Any]:
    """One lockstep run through the product's runner; its timing, losses and memory."""
    from simforge_ros.runner import RunSpec, run

    with scratch_dir("simforge-bench-") as root:  # a bench stopped midway leaves no run directory behind
        run_id = f"bench-{layout}-{len(cameras)}cam-{'rec' if record else 'norec'}-{steps}"
        out_dir = root / run_id
        sets: dict[str, dict[str, Any]] = {"sim_bridge": {"cameras": list(cameras)}}
        if not record:
            sets["clock_master"] = {"record": False}
        spec = RunSpec(scenario=scenario, out_dir=out_dir, run_id=run_id, steps=steps, layout=layout,
                       sets=sets, record=record)
        sampler = None
        if rss_checkpoint is not None:
            sampler = RssSampler(str(out_dir), out_dir / "steps.jsonl", rss_checkpoint)
            sampler.start()
        t0 = time.perf_counter()
        try:
            result = run(spec)
        finally:
            if sampler is not None:
                sampler.stop()
        elapsed = time.perf_counter() - t0
        wall = result.wall or {}
        timed = wall.get("timed") or 0
        mean_us = wall["mean_ns"] / 1000.0 if timed else None
        out: dict[str, Any] = {
            "layout": layout, "cameras": list(cameras), "record": record, "steps": steps,
            "status": result.status, "refusal": result.refusal, "chain_digest": result.chain_digest,
            "per_step_us": {
                "median": wall["median_ns"] / 1000.0 if timed else None, "mean": mean_us,
                "p99": wall["p99_ns"] / 1000.0 if timed else None, "timed_steps": timed,
                "skipped_steps": wall.get("skipped"),
            },
            "steps_per_s": 1e6 / mean_us if mean_us else None,
            "finish_ms": wall.get("finish_ns", 0) / 1e6,
            "recorder_pauses": wall.get("recorder_pauses", 0),
            "recorder_pause_ms": wall.get("recorder_pause_ns", 0) / 1e6,
            "run_wall_s": elapsed,
        }
        if record and timed:
            out["per_step_us"].update(round_trips(out_dir / "steps.jsonl", wall.get("skipped") or 0))
        if record:
            recorded = result.steps
            out["steps_recorded"] = recorded
            out["steps_incomplete"] = max(0, steps - recorded)
            try:
                lost = lost_messages(bag_counts(out_dir), steps, cameras)
            except (OSError, KeyError, yaml.YAMLError) as err:
                lost = {"bag unreadable": steps, "error": str(err)}  # type: ignore[dict-item]
            out["missing_messages"] = lost
        if sampler is not None:
            out["rss_kb"] = {
                "checkpoint_step": sampler.checkpoint_step,
                "at_checkpoint": sampler.at_checkpoint,
                "at_end": sampler.last,
            }
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            shutil.move(str(out_dir), str(keep / run_id))
        return out


def rss_growth(rss: dict[str, Any]) -> dict[str, float]:
    """node -> VmHWM at the end / VmHWM at the checkpoint."""
    out = {}
    for node, end in rss.get("at_end", {}).items():
        start = rss.get("at_checkpoint", {}).get(node)
        if start and start.get("VmHWM"):
            out[node] = end["VmHWM"] / start["VmHWM"]
    return out
