"""Will the run's record fit? An estimate of what a recorded run writes, from its
parameters alone, checked against the free space of its disk before anything starts.

A long camera run writes about 173 KB a frame at 320x180 (the pixels are stored as they
were published): 20 000 steps of the four-camera rig are 14 GB. A disk that fills up
mid-run stops the record there; a run that clearly cannot fit is refused at once instead.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simforge_ros.core.errors import SimforgeError
from simforge_ros.core.timing_contract import DEFAULT_DECISION_US
from simforge_ros.core.units import resolve_period
from simforge_ros.params import spec
from simforge_ros.record.reserve import RESERVE_BYTES

# measured on recorded runs (2026-12-03): a step's state, action, timing and /clock in the
# bag and its steps.jsonl line come to ~2 KB without cameras (1 885-1 893 B over 20 000- and
# 60 000-step runs, 2026-12-05: 3 000 refused a 25 000-step run of 47 MB on 63 MB free);
# a frame adds its pixels, its CameraInfo and its steps.jsonl digest
STEP_BYTES = 2_000
FRAME_OVERHEAD_BYTES = 1_500
# what the bridge's optional messages add to a step (400-step runs without cameras, bag and
# steps.jsonl, 2026-12-04): odometry 777 B, /tf 157-158 B, ground truth 456-458 B with four
# actors or signals, markers 1 000 B with four and 1 234 B with five, rounded up
ODOMETRY_BYTES = 800
TF_BYTES = 200
GROUND_TRUTH_BYTES = 100  # and GROUND_TRUTH_ITEM_BYTES per actor and per signal
GROUND_TRUTH_ITEM_BYTES = 100
MARKER_BYTES = 260  # per actor and per signal
FIXED_BYTES = 200_000 + RESERVE_BYTES  # manifest, params, node logs, the bag's metadata and summary;
# and the recorder's reserve for them (record.reserve), written first


@dataclass(frozen=True)
class RecordEstimate:
    """What a run is expected to write, and from what."""

    bytes: int
    steps: int
    cameras: int
    width: int
    height: int

    def describe(self) -> str:
        rig = f"{self.cameras} cameras at {self.width}x{self.height}" if self.cameras else "no cameras"
        return f"about {megabytes(self.bytes)} for {self.steps} steps with {rig}"


def megabytes(n: int) -> str:
    """``n`` bytes as MB, with a decimal below 10 MB (where the rounding would mislead)."""
    return f"{n / 1e6:,.1f} MB" if n < 10_000_000 else f"{n / 1e6:,.0f} MB"


def _value(params: Mapping[str, Mapping[str, Any]], node: str, name: str) -> Any:
    given = params.get(node, {}).get(name)
    return given if given is not None else spec(node, name).default


def estimate(params: Mapping[str, Mapping[str, Any]]) -> RecordEstimate | None:
    """The record a run with these (validated) parameters writes; None when its length
    cannot be known without the nodes (a scenario that does not load: its node says why)."""
    from simforge_ros.engine import load_scenario

    clock, bridge = params.get("clock_master", {}), params.get("sim_bridge", {})
    try:
        decision_us = resolve_period(clock, "decision") or DEFAULT_DECISION_US
        camera_period_us = resolve_period(bridge, "camera_period")
        steps = int(_value(params, "clock_master", "steps"))
        side = 0  # the bridge's optional messages, a step
        if _value(params, "sim_bridge", "odometry"):
            side += ODOMETRY_BYTES
        if _value(params, "sim_bridge", "tf"):
            side += TF_BYTES
        truth, markers = _value(params, "sim_bridge", "ground_truth"), _value(params, "sim_bridge", "markers")
        scenario = None
        if steps == 0 or truth or markers:
            scenario = load_scenario(_value(params, "sim_bridge", "scenario"))
        if scenario is not None:
            steps = steps or scenario.duration_us // decision_us
            items = len(scenario.actors) + len(scenario.signals)
            side += (GROUND_TRUTH_BYTES + GROUND_TRUTH_ITEM_BYTES * items if truth else 0) + (
                MARKER_BYTES * items if markers else 0)
    except (ValueError, TypeError, SimforgeError):  # the nodes refuse these, naming the field
        return None
    cameras = len(_value(params, "sim_bridge", "cameras")) if "sim_bridge" in params else 0
    width, height = int(_value(params, "sim_bridge", "width")), int(_value(params, "sim_bridge", "height"))
    # drawn only at step times, so at most once a step whatever the period (1 us used to
    # be estimated as 100 000 frames a step: a disk-space refusal for a rate problem)
    frames_per_step = 1.0 if not camera_period_us else min(1.0, decision_us / camera_period_us)
    frame = width * height * 3 + FRAME_OVERHEAD_BYTES
    total = FIXED_BYTES + steps * (STEP_BYTES + side + cameras * frames_per_step * frame)
    return RecordEstimate(int(total), steps, cameras, width, height)


def free_bytes(path: Path) -> int:
    """Free space of the disk ``path`` is on (its nearest existing parent)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free
