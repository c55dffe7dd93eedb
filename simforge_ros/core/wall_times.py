"""Per-step wall-clock times, kept for a run's summary in bounded memory.

Why: the clock master and the recorder each kept every step's wall time (8 bytes a step)
only to report a median and a 99th percentile at the end: 29 MB an hour per node at
1 000 steps/s, so a long run's memory never stayed flat. Here the first
``EXACT_STEPS`` times are kept as they are, and every run of that length or shorter reports
exact figures, as before. Past it only a histogram holds them (kept from the start, a time
at a time), whose buckets are at most 1/1024 of their value wide (every time under 2 048 ns
has its own), so its size depends on the spread of the times, not on the run's length, and
a percentile read from it is within 0.1 %.
The count, the total and the largest stay exact. Wall time never reaches a digest: these
figures are only reported (the manifest's ``wall``, the clock master's outcome).
"""
from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable
from itertools import accumulate

EXACT_STEPS = 1 << 12
"""Times kept exactly before the histogram takes over: 32 KB of them. 65 536 (512 KB) made
a node's memory grow 8 bytes a step up to there: x1.012 from step 1 000 to 20 000 in the
bench, which cannot tell that from a leak."""
HEAD_STEPS = 64
"""The first times, always kept apart and exact, so that start-up steps can be left out of
a summary however long the run was."""
_FINE_BITS = 11  # a bucket's value is its time's top 11 bits: 1024-2047 times 2**shift


def _bucket(ns: int) -> int:
    """A key that sorts as the times do: the time itself under 2 048 ns, else its octave and
    its top 11 bits."""
    shift = ns.bit_length() - _FINE_BITS
    if shift <= 0:
        return ns
    return (shift << _FINE_BITS) | (ns >> shift)


def _bucket_value(key: int) -> int:
    """The middle of a bucket's times."""
    shift = key >> _FINE_BITS
    if shift == 0:
        return key
    top = key & ((1 << _FINE_BITS) - 1)
    return (top << shift) + ((1 << shift) >> 1)


class WallTimes:
    """Append each step's wall time; read the sorted order back with ``summary``."""

    def __init__(self, exact_steps: int = EXACT_STEPS) -> None:
        if exact_steps < 1:
            raise ValueError(f"exact_steps={exact_steps} must be >= 1")
        self._exact_steps = exact_steps
        self._head = array("q")
        self._rest: array[int] | None = array("q")
        self._counts: dict[int, int] = {}  # the histogram of every time past the head, exact or not
        self._n = 0
        self._rest_total = 0
        self._rest_max: int | None = None

    @classmethod
    def of(cls, times: Iterable[int], exact_steps: int = EXACT_STEPS) -> WallTimes:
        out = cls(exact_steps)
        for ns in times:
            out.append(ns)
        return out

    def __len__(self) -> int:
        return self._n

    @property
    def exact(self) -> bool:
        """Whether every time is still kept as it is."""
        return self._rest is not None

    def append(self, ns: int) -> None:
        ns = max(0, int(ns))
        self._n += 1
        if len(self._head) < HEAD_STEPS:
            self._head.append(ns)
            return
        self._rest_total += ns
        self._rest_max = ns if self._rest_max is None else max(self._rest_max, ns)
        # the histogram is kept from the start, a bucket a time: folding the old limit's
        # 65 536 times at once took 10 ms, inside the step being timed
        key = _bucket(ns)
        self._counts[key] = self._counts.get(key, 0) + 1
        if self._rest is not None:
            self._rest.append(ns)
            if len(self._head) + len(self._rest) > self._exact_steps:
                self._rest = None  # the exact times go; the histogram holds them

    def summary(self, skip: int = 0) -> SortedTimes:
        """The times in sorted order, leaving out the first ``skip`` (at most HEAD_STEPS)."""
        if not 0 <= skip <= HEAD_STEPS:
            raise ValueError(f"skip={skip} must be between 0 and {HEAD_STEPS}")
        head = list(self._head[skip:])
        total = sum(head) + self._rest_total
        largest = max([*head, *([self._rest_max] if self._rest_max is not None else [])], default=None)
        if self._rest is not None:
            return SortedTimes(sorted([*head, *self._rest]), None, total, largest)
        counts = dict(self._counts)
        for ns in head:
            key = _bucket(ns)
            counts[key] = counts.get(key, 0) + 1
        return SortedTimes(None, counts, total, largest)


class SortedTimes:
    """The times of a run in sorted order: ``at(i)`` is the i-th smallest, exactly while
    every time was kept, else the middle of its histogram bucket (within 0.1 %)."""

    def __init__(self, ordered: list[int] | None, counts: dict[int, int] | None, total: int,
                 largest: int | None) -> None:
        self.exact = ordered is not None
        self.total = total
        self.max = largest
        self._ordered = ordered
        if counts is not None:
            self._keys = sorted(counts)
            self._ends = list(accumulate(counts[key] for key in self._keys))
            self.n = self._ends[-1] if self._ends else 0
        else:
            self.n = len(ordered or ())

    def __len__(self) -> int:
        return self.n

    def at(self, index: int) -> int:
        if not 0 <= index < self.n:
            raise IndexError(f"index {index} out of {self.n} times")
        if self._ordered is not None:
            return self._ordered[index]
        if index == self.n - 1 and self.max is not None:
            return self.max
        value = _bucket_value(self._keys[bisect_left(self._ends, index + 1)])
        return min(value, self.max) if self.max is not None else value
