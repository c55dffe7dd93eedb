"""Small statistics helpers for the benchmark (pure; no ROS, no clock)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between closest ranks.

    Raises:
        ValueError: no values, or q outside 0..100.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be within 0..100, got {q}")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summary(values: Sequence[float]) -> dict[str, Any]:
    """n, median, p99, mean, min and max of a sample (an empty sample gives n=0 only)."""
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "median": percentile(values, 50.0),
        "p99": percentile(values, 99.0),
        "mean": sum(values) / len(values),
        "min": min(values),
        "max": max(values),
    }


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, or None when either is missing or the denominator is 0."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator
