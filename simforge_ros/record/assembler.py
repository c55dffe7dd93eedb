"""Assemble a run's records into complete steps and chain their digests.

The recorder node feeds it what arrives on the topics; `simforge verify` feeds it what it
reads back from the bag. Messages of one step arrive on several topics in no guaranteed
order, so nothing is hashed until the step is complete: its timing record, action,
applied action, vehicle state, and every frame the timing record names (camera + exact
stamp). Steps are chained strictly in order; a piece that never comes is reported by
``missing``, never silently skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from simforge_ros.core.digest import FramesChain, StepChain, frame_hash, step_record

PARTS = ("timing", "action", "applied", "state")


@dataclass
class _Pending:
    parts: dict[str, dict[str, Any]] = field(default_factory=dict)


class StepAssembler:
    """Collects plain message values per step and emits chained step records in order.

    The chains are core.digest's StepChain and FramesChain. ``keep_records=False`` (the recorder,
    which writes each record out as it completes) keeps only the latest record, so memory
    stays flat however long the run; ``records`` is then empty.
    """

    def __init__(self, keep_records: bool = True) -> None:
        self.chain = StepChain()
        self.frames_chain = FramesChain()
        self._pending: dict[int, _Pending] = {}
        self._frames: dict[tuple[str, int], str] = {}
        self._duplicates: list[str] = []
        self._keep = keep_records
        self._done = 0
        self.records: list[dict[str, Any]] = []
        self.last_record: dict[str, Any] | None = None

    @property
    def steps_done(self) -> int:
        return self._done

    def add(self, part: str, plain: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Add one timing/action/applied/state value (a plain dict with its ``step``);
        return the step records this completed, in order."""
        if part not in PARTS:
            raise ValueError(f"unknown part {part!r}; expected one of {PARTS}")
        step = int(plain["step"])
        if step < self.steps_done:
            self._duplicates.append(f"{part} of step {step} after the step was chained")
            return []
        pending = self._pending.setdefault(step, _Pending())
        if part in pending.parts:
            self._duplicates.append(f"{part} of step {step} twice")
        pending.parts[part] = dict(plain)
        return self._drain()

    def add_frame(self, camera: str, t_us: int, encoding: str, width: int, height: int,
                  step_bytes: int, data: Any) -> list[dict[str, Any]]:
        """Hash one camera frame (named by camera and exact stamp); return completed steps."""
        self._frames[(camera, int(t_us))] = frame_hash(encoding, width, height, step_bytes, data)
        return self._drain()

    def _drain(self) -> list[dict[str, Any]]:
        done: list[dict[str, Any]] = []
        while True:
            step = self.steps_done
            pending = self._pending.get(step)
            if pending is None or any(p not in pending.parts for p in PARTS):
                return done
            timing = pending.parts["timing"]
            names = [(f["camera"], int(f["t_us"])) for f in timing["frames"]]
            if any(n not in self._frames for n in names):
                return done
            done.append(self._chain(step, pending, names))
            del self._pending[step]

    def _chain(self, step: int, pending: _Pending, names: list[tuple[str, int]]) -> dict[str, Any]:
        timing, action = pending.parts["timing"], pending.parts["action"]
        applied, state = pending.parts["applied"], pending.parts["state"]
        hashed = step_record(step, timing, action, applied, state)  # timing without wall_*
        digest = self.chain.add_record(step, hashed)
        frames = {camera: self._frames.pop((camera, t_us)) for camera, t_us in names}
        frames_digest = self.frames_chain.add(step, frames) if frames else None
        record = {
            "step": step,
            "t_us": int(timing["t_us"]),
            "digest": digest,
            "frames_digest": frames_digest,
            "frames": frames,
            "timing": hashed["timing"],
            "action": action,
            "applied": applied,
            "state": state,
            "wall": {k: v for k, v in timing.items() if k.startswith("wall_")},
        }
        if self._keep:
            self.records.append(record)
        self.last_record = record
        self._done += 1
        return record

    def missing(self, expected_steps: int) -> list[str]:
        """What is missing for steps < expected_steps (empty: the record is complete)."""
        problems = list(self._duplicates)
        for step in range(self.steps_done, expected_steps):
            pending = self._pending.get(step, _Pending())
            absent = [p for p in PARTS if p not in pending.parts]
            timing = pending.parts.get("timing")
            if timing is not None:
                absent += [
                    f"frame {f['camera']}@{f['t_us']}us" for f in timing["frames"]
                    if (f["camera"], int(f["t_us"])) not in self._frames
                ]
            problems.append(f"step {step}: missing {', '.join(absent) or 'an earlier step'}")
            if len(problems) >= 10:
                problems.append("...")
                break
        return problems
