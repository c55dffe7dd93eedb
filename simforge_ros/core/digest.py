"""Hash chains over a run: one digest per step, and one over the camera frames.

``digest_k = SHA-256(digest_{k-1} || canonical(step record k))`` with ``digest_{-1} =
GENESIS``, so one changed value at step k changes digest k and every digest after it,
and never one before. Two runs agree at the end exactly when they agree at every step.

Frames are hashed separately (``frame_hash``): the recorder hashes about 700 KB of pixels
per step, so pixel buffers are fed to hashlib as zero-copy views, never copied or
re-encoded. Verify tools recompute a step digest with ``step_record_bytes``.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping

from simforge_ros.core.canonical import byte_view, encode, strip_wall, to_plain

GENESIS = bytes(32)
"""The digest before step 0."""


def step_record(
    step: int, timing: Mapping[str, object], action: object, applied: object, state: object
) -> dict[str, object]:
    """The plain value a step digest covers (wall_* fields removed from timing).

    Raises:
        TypeError: a part has no plain form.
    """
    timing_plain = _plain(timing)
    if not isinstance(timing_plain, dict):
        raise TypeError(f"timing must be a mapping or message, got {type(timing).__name__}")
    return {
        "step": step,
        "timing": strip_wall(timing_plain),
        "action": _plain(action),
        "applied": _plain(applied),
        "state": _plain(state),
    }


def _plain(part: object) -> object:
    """A part as a plain value; a plain dict (what the recorder holds) is used as it is:
    ``encode`` writes anything inside it exactly as it would write its plain form."""
    return part if type(part) is dict else to_plain(part)


def step_record_bytes(
    step: int, timing: Mapping[str, object], action: object, applied: object, state: object
) -> bytes:
    """The canonical bytes hashed for one step (after the previous digest).

    Raises:
        TypeError: a part has no plain form.
    """
    return encode(step_record(step, timing, action, applied, state))


def next_digest(prev: bytes, record_bytes: bytes) -> bytes:
    """SHA-256(prev || record_bytes): one link of a chain."""
    h = hashlib.sha256(prev)
    h.update(record_bytes)
    return h.digest()


class _Chain:
    """What both chains share: the latest digest and how many links it has."""

    def __init__(self) -> None:
        self._digest = GENESIS
        self._steps = 0

    @property
    def digest(self) -> bytes:
        """The latest digest (GENESIS before any step)."""
        return self._digest

    @property
    def hexdigest(self) -> str:
        """The latest digest as hex (GENESIS hex before any step)."""
        return self._digest.hex()

    @property
    def steps(self) -> int:
        """How many steps were added."""
        return self._steps

    def _link(self, record_bytes: bytes) -> str:
        self._digest = next_digest(self._digest, record_bytes)
        self._steps += 1
        return self._digest.hex()


class StepChain(_Chain):
    """The per-step digest chain of a run; steps must come as 0, 1, 2, ... (so ``steps``
    is also the next step expected)."""

    def add(
        self, step: int, timing: Mapping[str, object], action: object, applied: object, state: object
    ) -> str:
        """Chain step ``step`` and return its digest as hex.

        Raises:
            ValueError: ``step`` is not the next consecutive step from 0.
            TypeError: a part has no plain form.
        """
        return self.add_record(step, step_record(step, timing, action, applied, state))

    def add_record(self, step: int, record: Mapping[str, object]) -> str:
        """Chain step ``step`` given as its step_record value (which a caller may keep
        for itself: the recorder writes its timing out without computing it again).

        Raises:
            ValueError: ``step`` is not the next consecutive step from 0, or is not the
                record's own step.
        """
        if isinstance(step, bool) or not isinstance(step, int) or step != self._steps:
            raise ValueError(f"step {step!r} added to a chain expecting step {self._steps}")
        if record.get("step") != step:
            raise ValueError(f"a record of step {record.get('step')!r} added as step {step}")
        return self._link(encode(record))


@functools.lru_cache(maxsize=64, typed=True)  # typed: True and 1 encode differently
def frame_header(encoding: str, width: int, height: int, step_bytes: int) -> bytes:
    """The canonical header hashed before a frame's pixels: [encoding, width, height, step]
    (cached: a camera rig has a handful of distinct headers, hashed every step)."""
    return encode([encoding, width, height, step_bytes])


def frame_hash(encoding: str, width: int, height: int, step_bytes: int, data: object) -> str:
    """SHA-256 hex of a camera frame: canonical header, then the raw pixel bytes.

    ``data`` may be bytes, bytearray, memoryview, array.array('B') or a numpy array; it is
    fed as a zero-copy view (a non-contiguous array is copied once). The pixels come last,
    so their length needs no prefix.

    Raises:
        TypeError: ``data`` exposes no buffer (e.g. a list).
    """
    h = hashlib.sha256(frame_header(encoding, width, height, step_bytes))
    h.update(byte_view(data))
    return h.hexdigest()


class FramesChain(_Chain):
    """The digest chain over camera frame hashes; steps must strictly increase.

    Steps without frames are simply not added, so the chain only moves on camera steps.
    """

    def __init__(self) -> None:
        super().__init__()
        self._last_step: int | None = None

    @property
    def last_step(self) -> int | None:
        """The step of the latest add, or None before any."""
        return self._last_step

    def add(self, step: int, frames: Mapping[str, str]) -> str:
        """Chain the frame hashes (camera -> hex) of ``step`` and return the digest as hex.

        Raises:
            ValueError: ``step`` is negative or not after the previous one.
        """
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be an int >= 0, got {step!r}")
        if self._last_step is not None and step <= self._last_step:
            raise ValueError(f"frames for step {step} after step {self._last_step}")
        self._last_step = step
        return self._link(frames_record_bytes(step, frames))


def frames_record_bytes(step: int, frames: Mapping[str, str]) -> bytes:
    """The canonical bytes hashed for one step's frames: [step, [[camera, hash], ...]]."""
    return encode([step, [[cam, frames[cam]] for cam in sorted(frames)]])
