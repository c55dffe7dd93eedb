"""How far apart repeated runs are: the noise floor of a loop that is not exact.

A lockstep run repeats bit for bit, and then the floor is zero. When it does not (a
planner with nondeterministic kernels, an external driver, a change under test), the
first differing step says where, not by how much: ranking controllers on runs whose
repeats end up centimetres apart ranks the noise. This walks the step records of several
runs side by side and keeps, for each quantity a ranking would use, the largest spread
(max - min over the runs at one step) and its step, and the largest distance between two
runs' ego positions; and, for per-run metrics a ranking could use (distance travelled,
mean speed, steps recorded), each run's value with the mean's 95 % interval over the runs.
Pure: no rclpy, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from types import MappingProxyType

from simforge_ros.core.diffing import DiffResult, step_difference

QUANTITIES: tuple[tuple[str, str], ...] = (
    ("state.pose.x_m", "m"),
    ("state.pose.y_m", "m"),
    ("state.pose.yaw_rad", "rad"),
    ("state.speed_mps", "m/s"),
    ("action.steer_rad", "rad"),
    ("action.accel_mps2", "m/s^2"),
)
"""(dotted path in a step record, unit): what the spread is kept for."""

@dataclass(frozen=True)
class Spread:
    """The largest spread of one quantity, and the first step it was reached at."""

    field: str
    unit: str
    value: float
    step: int | None  # None: no step compared


_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045,
         2.042)
"""Student's t, two-sided 95 %, for 1 to 30 degrees of freedom (past 30: 30's, a little wide)."""


@dataclass(frozen=True)
class Estimate:
    """One per-run metric over the runs: each run's value, their mean, sample standard
    deviation and the half-width of the mean's 95 % interval (Student's t): the uncertainty
    to rank on, as the article asks, never a single run's value."""

    name: str
    unit: str
    values: tuple[float, ...]
    mean: float
    sd: float
    ci95: float


def estimate(name: str, unit: str, values: Sequence[float]) -> Estimate:
    """The Estimate of ``values`` (two or more runs').

    Raises:
        ValueError: fewer than two values.
    """
    n = len(values)
    if n < 2:
        raise ValueError(f"an estimate over runs needs two runs or more, got {n}")
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    return Estimate(name, unit, tuple(values), mean, sd, _T975[min(n - 1, len(_T975)) - 1] * sd / math.sqrt(n))


@dataclass(frozen=True)
class SpreadResult:
    """How far apart the runs' common steps are."""

    runs: int
    lengths: tuple[int, ...]  # each run's recorded steps
    common: int  # steps every run recorded
    first_step: int | None  # first common step where a run differs from the first; None: none
    first_field: str | None  # what differed first there (a dotted path, as diff names it)
    differing_steps: int  # common steps where any run differs from the first (the chains' digests aside)
    position: Spread  # the largest distance between two runs' ego positions at one step
    fields: tuple[Spread, ...]  # per QUANTITIES, in order
    # per-run metrics over each run's own recorded steps, with their uncertainty over the runs
    metrics: tuple[Estimate, ...] = ()

    @property
    def identical(self) -> bool:
        return self.first_step is None and len(set(self.lengths)) == 1


def _value(record: Mapping[str, object], path: str) -> float | None:
    node: object = record
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return float(node) if isinstance(node, (int, float)) and not isinstance(node, bool) else None


_END: Mapping[str, object] = MappingProxyType({})  # past the end of a shorter run
_CHAINS = ("digest", "frames_digest")  # a step record's chain digests


def _first_of(found: Iterable[DiffResult | None], head: Mapping[str, object]) -> DiffResult | None:
    """The difference that comes first in a step's causal order, of several runs' (None:
    none): by section, then, within one, by where its field comes in the first run's record
    as diff walks it (two fields of the state tied, and the run given first won)."""
    candidates = [d for d in found if d is not None]
    if len(candidates) < 2:
        return candidates[0] if candidates else None
    order = {path: i for i, path in enumerate(_leaf_paths("", head))}
    return min(candidates, key=lambda d: (d.rank, order.get(d.field or "", len(order))))


def _leaf_paths(path: str, value: object) -> Iterator[str]:
    """Every leaf's dotted path in ``value``, in the order diffing.first_field_diff walks it."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaf_paths(f"{path}.{key}" if path else str(key), item)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _leaf_paths(f"{path}.{i}", item)
    else:
        yield path


def spread(runs: Sequence[Iterable[Mapping[str, object]]]) -> SpreadResult:
    """Walk the runs' step records side by side (one record of each at a time, so no run
    is held in memory) and measure how far apart they are.

    Raises:
        ValueError: fewer than two runs.
    """
    if len(runs) < 2:
        raise ValueError(f"a spread needs two runs or more, got {len(runs)}")
    best: dict[str, tuple[float, int | None]] = {path: (0.0, None) for path, _ in QUANTITIES}
    position: tuple[float, int | None] = (0.0, None)
    counts = [0] * len(runs)
    common = differing = 0
    first: int | None = None
    first_field: str | None = None
    travelled = [0.0] * len(runs)  # each run's path length over its own steps
    speeds = [0.0] * len(runs)
    last: list[tuple[float, float] | None] = [None] * len(runs)
    for records in zip_longest(*runs, fillvalue=_END):
        for i, record in enumerate(records):
            if record is _END:
                continue
            counts[i] += 1
            x, y = _value(record, "state.pose.x_m"), _value(record, "state.pose.y_m")
            if x is not None and y is not None:
                before = last[i]
                if before is not None:
                    travelled[i] += math.dist(before, (x, y))
                last[i] = (x, y)
            speeds[i] += _value(record, "state.speed_mps") or 0.0
        if any(record is _END for record in records):
            continue  # past a shorter run: only counted
        head, others = records[0], records[1:]
        step = head.get("step")
        step_no = step if isinstance(step, int) and not isinstance(step, bool) else common
        # what differs in the step itself (never wall time, nor the chains' digests, which
        # differ at every step after the first difference), named as diff names it
        # (of several runs' differences, the one diff ranks first: not the first run's found,
        # which named action.steer_rad or state.pose.x_m by the order the runs were given in)
        found = _first_of((step_difference(common, head, other, chains=False) for other in others), head)
        if found is not None:
            differing += 1
        elif first is None and any(head.get(k) != other.get(k) for other in others for k in _CHAINS):
            # the same step with other digests: an edited record, which diff names too
            found = _first_of((step_difference(common, head, other) for other in others), head)
        if found is not None and first is None:
            first, first_field = step_no, found.field
        common += 1
        for path, _ in QUANTITIES:
            values = [v for v in (_value(r, path) for r in records) if v is not None]
            gap = max(values) - min(values) if len(values) == len(records) else 0.0
            if gap > best[path][0]:
                best[path] = (gap, step_no)
        xs = [v for v in (_value(r, "state.pose.x_m") for r in records) if v is not None]
        ys = [v for v in (_value(r, "state.pose.y_m") for r in records) if v is not None]
        if len(xs) == len(ys) == len(records):
            points = list(zip(xs, ys, strict=True))
            far = max(math.dist(p, q) for i, p in enumerate(points) for q in points[i + 1:])
            if far > position[0]:
                position = (far, step_no)
    return SpreadResult(
        runs=len(runs), lengths=tuple(counts), common=common, first_step=first, first_field=first_field,
        differing_steps=differing,
        position=Spread("position", "m", position[0], position[1]),
        fields=tuple(Spread(path, unit, best[path][0], best[path][1]) for path, unit in QUANTITIES),
        metrics=(estimate("distance travelled", "m", travelled),
                 estimate("mean speed", "m/s", [s / c if c else 0.0 for s, c in zip(speeds, counts, strict=True)]),
                 estimate("steps recorded", "steps", [float(c) for c in counts])),
    )
