"""A kept run's camera frames at one step, read back from its bag: the very pixels the
driver was given, checked against the digests the recorder chained for that step.

`simforge diff` names the first step where two runs differ and whether their frames did;
`simforge render RUN --step K` then shows what each run's cameras saw there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simforge_ros import topics
from simforge_ros.core.digest import frame_hash
from simforge_ros.image_codec import ImageCodecError, imgmsg_to_numpy
from simforge_ros.record.bag import BagError, read_bag
from simforge_ros.record.rundir import RunDir


class FramesError(ValueError):
    """The step or cameras asked for are not in the run (a usage problem, not a damaged run)."""


@dataclass(frozen=True)
class RecordedFrame:
    """One camera's frame of a step, as the bag holds it."""

    camera: str
    t_us: int  # the frame's exact stamp, as the step's timing record names it
    pixels: np.ndarray  # H x W x 3 RGB
    digest: str  # the frame hash of the bag's message
    chained: str | None  # the digest steps.jsonl chained for it (None: the record has none)

    @property
    def matches(self) -> bool:
        return self.digest == self.chained


def _rgb(pixels: np.ndarray, encoding: str) -> np.ndarray:
    """H x W x 3 RGB of an 8-bit image, for a PNG."""
    if encoding == "rgb8":
        return pixels
    if encoding == "bgr8":
        return np.ascontiguousarray(pixels[..., ::-1])
    if encoding == "mono8":
        return np.repeat(pixels.reshape(pixels.shape[0], pixels.shape[1], 1), 3, axis=2)
    raise ImageCodecError(f"encoding {encoding!r}: only rgb8, bgr8 and mono8 frames are written as PNG")


def default_step(run: RunDir) -> int:
    """Where a run is worth looking at when no step is asked for: the last recorded step of
    a refused run (where it broke), the first of a counted one."""
    if not run.steps:
        raise FramesError("the run recorded no step")
    return len(run.steps) - 1 if run.manifest.get("refusal") else 0


def frames_at(run: RunDir, step: int, cameras: Sequence[str] | None = None) -> list[RecordedFrame]:
    """The frames step ``step``'s timing record names (those of ``cameras`` if given), read
    from the bag by their exact stamps.

    Raises:
        FramesError: no such recorded step, a camera the step names no frame of, or a step
            that names no frames at all.
        BagError: the bag is unreadable, or lacks a frame the step names.
    """
    if not 0 <= step < len(run.steps):
        raise FramesError(f"step: expected a recorded step from 0 to {len(run.steps) - 1}, got {step}")
    record = run.steps[step]
    named = {str(f["camera"]): int(f["t_us"]) for f in record["timing"]["frames"]}
    if not named:
        raise FramesError(f"step {step} names no camera frames (the bridge rendered none for it)")
    wanted = list(named) if not cameras else list(cameras)
    unknown = [c for c in wanted if c not in named]
    if unknown:
        raise FramesError(f"cameras: expected cameras step {step} names ({', '.join(sorted(named))}), "
                          f"got {', '.join(unknown)}")
    by_topic = {topics.image_topic(c): c for c in wanted}
    stamps_ns = [named[c] * 1000 for c in wanted]
    found: dict[str, RecordedFrame] = {}
    chained = record.get("frames") or {}
    for item in read_bag(run.bag_path, set(by_topic), min(stamps_ns), max(stamps_ns) + 1):
        camera = by_topic[item.topic]
        if item.t_ns != named[camera] * 1000 or camera in found:
            continue
        msg = item.msg
        try:
            pixels = _rgb(imgmsg_to_numpy(msg), str(msg.encoding))
        except ImageCodecError as err:
            raise BagError(f"{run.bag_path}: {item.topic} at t={item.t_ns} ns: {err}") from None
        digest = frame_hash(str(msg.encoding), int(msg.width), int(msg.height), int(msg.step), msg.data)
        found[camera] = RecordedFrame(camera, named[camera], pixels, digest, chained.get(camera))
    missing = [c for c in wanted if c not in found]
    if missing:
        raise BagError(f"{run.bag_path}: no frame of {', '.join(missing)} at the stamp step {step} names "
                       f"({', '.join(f'{c}@{named[c]} us' for c in missing)})")
    return [found[c] for c in wanted]
