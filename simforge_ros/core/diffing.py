"""Find where two recorded runs first differ, and say what differed first.

Digest chains say *whether* two runs agree; when they do not, a human wants the first step
that differs and which part of the loop moved first. Within a step the parts are compared
in causal order (timing, then the world state, then the controller's decided and applied
actions, then the camera frames, reported alongside: see _sections), so the reported field
is the earliest cause seen, not one of its consequences.

Values are compared exactly as the digest sees them: a float differs from an int, -0.0
differs from 0.0, and NaN equals NaN only when its bits are the same.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from itertools import zip_longest

from simforge_ros.core.canonical import strip_wall


class _Missing:
    """Marks a field present in one run and absent in the other."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()
"""The value reported for a field that one of the two runs does not have."""

_KNOWN = ("step", "t_us", "timing", "state", "frames", "frames_digest", "action", "applied", "digest")
_PHRASES = {
    "timing": "timing",
    "state": "vehicle state",
    "frames": "camera frames",
    "controller": "controller output",
    "other": "the record",
    "digest": "the digest (all fields equal)",
}


@dataclass(frozen=True)
class DiffResult:
    """The first difference between two runs, or that there is none.

    ``first`` is "timing", "state", "frames", "controller", "steps" (different run lengths
    with an equal prefix), "other" (an unknown top-level key), "digest" (every field
    equal but the stored digests differ), or, with every step record the same, "end" (the
    runs ended differently: counted, or refused with another code or at another step) or
    "messages" (what of the messages no chain holds differs; record.diff_runs sets these
    two from the manifests). ``steps`` is how many steps were compared equal before the
    difference (all of them when identical).
    """

    identical: bool
    step: int | None = None
    first: str | None = None
    field: str | None = None
    a: object = None
    b: object = None
    steps: int = 0
    frames_differ: bool = False  # the camera frames also differ at ``step``
    # where in a step's causal order the field comes (step_difference): of several runs'
    # differences at one step, the lowest is the step's first, whatever the runs' order
    rank: int = dataclass_field(default=0, compare=False, repr=False)


def _sections(record: Mapping[str, object], chains: bool = True) -> Iterator[tuple[str, str, object]]:
    """(category, path, value) in the causal comparison order of one step record; without
    the frames chain's digest unless ``chains``."""
    yield "timing", "step", record.get("step", MISSING)
    yield "timing", "t_us", record.get("t_us", MISSING)
    timing = record.get("timing", MISSING)
    timing = strip_wall(timing) if isinstance(timing, Mapping) else timing
    # The clock fields of the timing record come first; its world digest and frame stamps
    # (poses the frames were rendered for) follow the state they are derived from.
    derived = ("world_digest", "frames")
    if isinstance(timing, Mapping):
        yield "timing", "timing", {k: v for k, v in timing.items() if k not in derived}
    else:
        yield "timing", "timing", timing
    yield "state", "state", record.get("state", MISSING)
    if isinstance(timing, Mapping):
        yield "state", "timing.world_digest", timing.get("world_digest", MISSING)
    yield "controller", "action", record.get("action", MISSING)
    yield "controller", "applied", record.get("applied", MISSING)
    # Frames are the controller's input, but what a diff must name is which simulated
    # quantity moved first: the vehicle state or the controller output. A frame that
    # differs at the same step is reported alongside (frames_differ); a frame that
    # differs with nothing simulated differing yet is reported on its own.
    if isinstance(timing, Mapping):
        yield "frames", "timing.frames", timing.get("frames", MISSING)
    yield "frames", "frames", record.get("frames", MISSING)
    if chains:
        yield "frames", "frames_digest", record.get("frames_digest", MISSING)


def _same_leaf(x: object, y: object) -> bool:
    if type(x) is not type(y):
        return False
    if isinstance(x, float):
        return struct.pack(">d", x) == struct.pack(">d", y)
    return x == y


def first_field_diff(path: str, x: object, y: object) -> tuple[str, object, object] | None:
    """The first (path, x value, y value) where two plain values differ, or None.

    Mapping keys are walked in x's order, then keys only y has; lists by index.
    """
    if isinstance(x, Mapping) and isinstance(y, Mapping):
        keys = list(x.keys()) + [k for k in y if k not in x]
        for key in keys:
            found = first_field_diff(f"{path}.{key}", x.get(key, MISSING), y.get(key, MISSING))
            if found is not None:
                return found
        return None
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        for i in range(max(len(x), len(y))):
            xi = x[i] if i < len(x) else MISSING
            yi = y[i] if i < len(y) else MISSING
            found = first_field_diff(f"{path}.{i}", xi, yi)
            if found is not None:
                return found
        return None
    if _same_leaf(x, y):
        return None
    return path, x, y


_END = object()  # marks the end of the shorter run in diff_steps


def diff_steps(a: Iterable[Mapping[str, object]], b: Iterable[Mapping[str, object]]) -> DiffResult:
    """Compare two runs' step records (as in steps.jsonl) and report the first difference.

    The records are read one pair at a time, so neither run need be held in memory; when
    one run is longer, the rest of it is read to count its steps.
    """
    # The runs may have different lengths: the common prefix is compared, then the lengths.
    ia, ib = iter(a), iter(b)
    i = 0
    for ra, rb in zip_longest(ia, ib, fillvalue=_END):
        if ra is _END or rb is _END:
            len_a = i + (ra is not _END) + sum(1 for _ in ia)
            len_b = i + (rb is not _END) + sum(1 for _ in ib)
            return DiffResult(False, i, "steps", "steps", len_a, len_b, i)
        assert isinstance(ra, Mapping) and isinstance(rb, Mapping)
        found = step_difference(i, ra, rb)
        if found is not None:
            return found
        i += 1
    return DiffResult(True, steps=i)


def step_difference(i: int, ra: Mapping[str, object], rb: Mapping[str, object],
                    chains: bool = True) -> DiffResult | None:
    """The first difference of the i-th records of two runs, or None (`simforge spread`
    names a step's first difference by it too, so the two tools name the same field).

    ``chains=False`` leaves out the two chains' digests (``digest``, ``frames_digest``),
    which differ at every step after the first difference: what differs in the step itself.
    """
    step = ra.get("step", i)
    step_no = step if isinstance(step, int) and not isinstance(step, bool) else i
    # Both records yield the same sections in the same order (they only differ in count when one
    # timing is a mapping and the other is not, and that difference is found first).
    rank = 0
    for rank, ((category, path, va), (_, _, vb)) in enumerate(zip(_sections(ra, chains), _sections(rb, chains),
                                                                  strict=True)):
        found = first_field_diff(path, va, vb)
        if found is not None:
            frames_differ = category == "frames" or any(
                first_field_diff(k, ra.get(k, MISSING), rb.get(k, MISSING)) is not None
                for k in ("frames", "frames_digest")
            )
            return DiffResult(False, step_no, category, found[0], found[1], found[2], i, frames_differ, rank)
    extra = [k for k in ra if k not in _KNOWN] + [k for k in rb if k not in _KNOWN and k not in ra]
    for key in extra:
        if key == "wall" or key.startswith("wall_"):
            continue  # wall-clock time: never part of what a run computes
        rank += 1
        found = first_field_diff(key, ra.get(key, MISSING), rb.get(key, MISSING))
        if found is not None:
            return DiffResult(False, step_no, "other", found[0], found[1], found[2], i, rank=rank)
    found = first_field_diff("digest", ra.get("digest", MISSING), rb.get("digest", MISSING)) if chains else None
    if found is not None:
        return DiffResult(False, step_no, "digest", found[0], found[1], found[2], i, rank=rank + 1)
    return None


def format_value(value: object) -> str:
    """A value as a diff line shows it: its repr, at most 80 characters, or "missing"."""
    text = "missing" if value is MISSING else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def describe(result: DiffResult) -> str:
    """One line for humans, e.g. "first difference at step 40: controller output differed
    first (action.steer_rad: 0.1 vs 0.1001)" or "identical (120 steps)"."""
    if result.identical:
        return f"identical ({result.steps} steps)"
    if result.first == "steps":
        return (
            f"first difference at step {result.step}: the runs have different lengths "
            f"({result.a} vs {result.b} steps)"
        )
    if result.first == "end":
        return (f"first difference at step {result.step}: every step record is the same, but the runs ended "
                f"differently ({result.a} vs {result.b})")
    if result.first == "messages":
        return (f"every step record is the same ({result.steps} steps), but the messages no chain holds differ "
                f"({result.field}: {format_value(result.a)} vs {format_value(result.b)})")
    phrase = _PHRASES.get(result.first or "", result.first or "?")
    if result.field == "timing.world_digest":
        # the vehicle state's category (`first` in JSON), but the ego's state is the same:
        # what else the world holds (actors, signals, its scenario file's bytes, the seed)
        # differs. A comment edited into a scenario file was "vehicle state differed first".
        phrase = "the world (the vehicle state the same; actors, signals, the scenario file or the seed)"
    also = "; camera frames differ at this step too" if result.frames_differ and result.first != "frames" else ""
    return (
        f"first difference at step {result.step}: {phrase} differed first "
        f"({result.field}: {format_value(result.a)} vs {format_value(result.b)}){also}"
    )
