"""The run manifest: everything needed to re-run a run and check it step by step.

Digests of what drove the run (driver configuration and weights, bridge and engine,
scenario file, package and library versions) sit next to the outcome (chain digests,
step count, status, refusal). Wall-clock values are kept under "wall" and never feed a
digest.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import math
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy

import simforge_ros
from simforge_ros.core.canonical import encode
from simforge_ros.core.wall_times import WallTimes

FORMAT = 1


def canonical_sha256(value: Any) -> str:
    """SHA-256 over the canonical encoding of a JSON-like value."""
    return hashlib.sha256(encode(value)).hexdigest()


def cpu() -> dict[str, Any]:
    """The machine's architecture and the vector instruction levels numpy found on it. The
    same wheels can compute other last bits on another CPU (torch's kernels for AVX2 and
    without it did, for its generators): two runs that part at their first step on two
    machines are then told apart by this (``diff``'s "set up differently")."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # numpy's private module moved: the architecture alone
        features = {}
    levels = ("X86_V2", "X86_V3", "X86_V4", "ASIMD", "SVE", "VSX", "VX")
    return {"machine": platform.machine(), "simd": [level for level in levels if features.get(level)]}


def versions() -> dict[str, Any]:
    """Package, Python, numpy, rclpy and every ROS wheel in this environment, and its CPU."""
    ros = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] or ""
        if name.startswith("ros-") or name in ("rosbags", "torch"):
            ros[name] = dist.version
    return {
        "simforge_ros": simforge_ros.__version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "rclpy": ros.get("ros-rclpy", "unknown"),
        "packages": dict(sorted(ros.items())),
        "cpu": cpu(),
    }


SETUP_KEYS = ("scenario", "seed", "faults", "digests")
"""The manifest's keys that say how a run was set up, all derived from its nodes'
parameters (``setup_of``): verify derives them again from the parameters in the bag."""
CONTRACT_KEYS = ("decision_us", "tick_us", "ticks_per_step", "latency_steps")
"""The manifest's ``contract``: these fields of the last timing record."""


def setup_of(nodes: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest's setup keys (SETUP_KEYS), from the nodes' parameters as the recorder
    heard them (node -> {"params": ..., "faults": ..., "policy": ...})."""
    def params(name: str) -> Mapping[str, Any]:
        node = nodes.get(name)
        got = node.get("params") if isinstance(node, Mapping) else None
        return got if isinstance(got, Mapping) else {}

    clock, bridge, backend = params("clock_master"), params("sim_bridge"), params("sim_bridge/backend")
    driver = nodes.get("driver")
    policy = driver.get("policy", {}) if isinstance(driver, Mapping) else {}
    faults = sorted({f for n in nodes.values() if isinstance(n, Mapping) for f in n.get("faults", [])})
    return {
        "scenario": backend.get("scenario", bridge.get("scenario")),
        "seed": clock.get("seed"),
        "faults": faults,
        "digests": {
            "driver_config": canonical_sha256(policy) if policy else None,
            "weights": (policy.get("weights") or {}).get("sha256") if isinstance(policy, dict) else None,
            "scenario_file": backend.get("scenario_sha256"),
            "engine_version": backend.get("engine_version"),
            "engine": backend.get("engine_sha256") or None,  # "" where the simulator is not ours (CARLA)
            "bridge": canonical_sha256(bridge) if bridge else None,
        },
    }


def build_manifest(
    *,
    run_id: str,
    status: str,
    refusal: Mapping[str, Any] | None,
    expected_steps: int,
    records: list[dict[str, Any]],
    chain_digest: str,
    frames_digest: str | None,
    nodes: Mapping[str, Any],
    storage: str,
    contacts: list[dict[str, Any]],
    wall: Mapping[str, Any],
    steps: int | None = None,
    participants: Mapping[str, Mapping[str, Any]] | None = None,
    camera_info: Mapping[str, Mapping[str, Any]] | None = None,
    image_headers: Mapping[str, Mapping[str, Any]] | None = None,
    odometry: Mapping[str, Mapping[str, Any]] | None = None,
    transforms: Mapping[str, Mapping[str, Any]] | None = None,
    ground_truth: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The manifest of a finished (or refused) run.

    ``records`` are the step records in order, or only the latest one when ``steps``
    (the number of recorded steps) is given: the recorder keeps no more than that.
    ``participants``: role -> node, pid, host of who answered the clock master's Step and
    Decide calls (Finish.Request); a role none of ``nodes`` has is marked ``external``
    (``--driver external``: a node of the user's own, which publishes no parameters here).
    ``camera_info``, ``image_headers``: per camera, the count and digest of its
    camera_info messages and of its images' headers; ``odometry``: the same of the ego's
    nav_msgs/Odometry messages (sim_bridge.odometry); ``transforms``: per topic, of its
    tf2_msgs/TFMessage messages (/tf and /tf_static); ``ground_truth``: the same of
    /simforge/ground_truth (sim_bridge.ground_truth; record.side_digests).
    """
    last = records[-1] if records else None
    contract = None
    if last is not None:
        t = last["timing"]
        contract = {k: t[k] for k in CONTRACT_KEYS}
    setup = setup_of(nodes)
    return {
        "format": FORMAT,
        "run_id": run_id,
        "scenario": setup["scenario"],
        "seed": setup["seed"],
        "status": status,
        "refusal": dict(refusal) if refusal else None,
        "expected_steps": expected_steps,
        "steps": len(records) if steps is None else steps,
        "chain_digest": chain_digest,
        "frames_digest": frames_digest,
        "world_digest": last["timing"]["world_digest"] if last else None,
        "contract": contract,
        "digests": setup["digests"],
        "contacts": {
            "total": len(contacts),
            "harness_faults": sum(1 for c in contacts if c.get("harness_fault")),
            "events": contacts,
        },
        "camera_info": {k: dict(v) for k, v in sorted((camera_info or {}).items())},
        "image_headers": {k: dict(v) for k, v in sorted((image_headers or {}).items())},
        "odometry": {k: dict(v) for k, v in sorted((odometry or {}).items())},
        "transforms": {k: dict(v) for k, v in sorted((transforms or {}).items())},
        "ground_truth": {k: dict(v) for k, v in sorted((ground_truth or {}).items())},
        "faults": setup["faults"],
        "nodes": {k: v for k, v in sorted(nodes.items())},
        "participants": {
            role: {**dict(who), "external": role not in nodes} for role, who in sorted((participants or {}).items())
        },
        "versions": versions(),
        "bag": {"path": "bag", "storage": storage},
        "wall": dict(wall),
    }


def write_json(path: Path, value: Any) -> None:
    """Write atomically: a crash never leaves half a manifest."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk: no half-written file left behind either
        raise


def wall_summary(step_ns: WallTimes | Sequence[int]) -> dict[str, Any]:
    """The manifest's figures of the steps' wall-clock times: how many, median, 99th
    percentile (nearest rank) and largest. Each step's own is in steps.jsonl under "wall";
    the manifest held the whole list again, 168 KB of a 20 000-step run's 292 KB. Past
    core.wall_times.EXACT_STEPS steps the median and p99 come from a histogram, within 0.1 %,
    and ``approximate`` says so."""
    times = step_ns if isinstance(step_ns, WallTimes) else WallTimes.of(step_ns)
    ordered = times.summary()
    n = len(ordered)
    if not n:
        return {"n": 0}
    out: dict[str, Any] = {"n": n, "median": ordered.at((n - 1) // 2),
                           "p99": ordered.at(max(0, math.ceil(0.99 * n) - 1)), "max": ordered.max}
    if not ordered.exact:
        out["approximate"] = True
    return out
