"""core.wall_times: exact figures for a run of normal length, bounded memory for a long one."""
from __future__ import annotations

import random

import pytest

from simforge_ros.core import wall_times
from simforge_ros.core.wall_times import HEAD_STEPS, WallTimes
from simforge_ros.nodes.clock_master import wall_summary as loop_summary
from simforge_ros.record.manifest import wall_summary


def _times(n: int, seed: int = 3) -> list[int]:
    rng = random.Random(seed)
    return [int(rng.lognormvariate(13.5, 0.6)) for _ in range(n)]  # about 0.7 ms, spread out


def test_a_run_of_normal_length_is_summed_up_exactly() -> None:
    times = _times(3000)  # the bench's runs are 3 000 steps: exact
    kept = WallTimes.of(times)
    assert kept.exact and len(kept) == 3000 and len(times) <= wall_times.EXACT_STEPS
    for skip in (0, 7, HEAD_STEPS):
        ordered = kept.summary(skip)
        want = sorted(times[skip:])
        assert ordered.exact and len(ordered) == len(want)
        assert [ordered.at(i) for i in range(len(want))] == want
        assert ordered.total == sum(want) and ordered.max == want[-1]


def test_past_its_exact_steps_the_histogram_is_within_a_thousandth() -> None:
    times = _times(20_000)
    kept = WallTimes.of(times, exact_steps=1000)
    assert not kept.exact
    for skip in (0, 50):
        ordered = kept.summary(skip)
        want = sorted(times[skip:])
        assert not ordered.exact and len(ordered) == len(want)
        assert ordered.total == sum(want) and ordered.max == want[-1]  # these stay exact
        for i in (0, 1, len(want) // 2, (len(want) * 99) // 100, len(want) - 2, len(want) - 1):
            assert abs(ordered.at(i) - want[i]) <= want[i] / 1024, i
    with pytest.raises(IndexError):
        kept.summary().at(20_000)


def test_the_histogram_does_not_grow_with_the_run() -> None:
    """8 bytes a step per node was 29 MB an hour at 1 000 steps/s; the buckets depend on
    the times' spread, not on how many there are."""
    kept = WallTimes(exact_steps=1000)
    rng = random.Random(5)
    sizes = []
    for n in range(1, 300_001):
        kept.append(rng.randrange(200_000, 5_000_000))  # 0.2-5 ms
        if n in (100_000, 300_000):
            sizes.append(len(kept._counts))
    every = len({wall_times._bucket(v) for v in range(200_000, 5_000_000, 64)})  # buckets are >= 128 ns wide there
    assert sizes[0] <= sizes[1] <= every <= 5 * 1024  # under five octaves of 1 024 buckets
    assert len(kept) == 300_000 and len(kept.summary()) == 300_000


def test_the_histogram_is_kept_a_time_at_a_time_not_folded_at_the_limit() -> None:
    """Folding 65 536 times into it at once took 10 ms, inside the step being timed: every
    time past the first HEAD_STEPS is in the histogram as it comes, exact or not."""
    kept = WallTimes(exact_steps=1000)
    for n in range(1, 1201):
        kept.append(n * 1000)
        if n in (HEAD_STEPS + 1, 999, 1000, 1001, 1200):
            assert sum(kept._counts.values()) == n - HEAD_STEPS, n
    assert not kept.exact


def test_short_times_keep_their_own_bucket_and_the_order_holds() -> None:
    values = [0, 1, 2047, 2048, 2049, 4095, 4096, 10**6, 10**9, 2**62]
    keys = [wall_times._bucket(v) for v in values]
    assert keys == sorted(keys) and len(set(keys[:3])) == 3
    for v in values:
        assert abs(wall_times._bucket_value(wall_times._bucket(v)) - v) <= v / 1024
    kept = WallTimes.of([5, 3, 1] * 40, exact_steps=10)
    assert [kept.summary().at(i) for i in (0, 40, 80, 119)] == [1, 3, 5, 5]


def test_the_start_up_steps_left_out_must_be_kept_apart() -> None:
    kept = WallTimes.of(range(10))
    with pytest.raises(ValueError, match="skip"):
        kept.summary(HEAD_STEPS + 1)
    with pytest.raises(ValueError, match="exact_steps"):
        WallTimes(0)


def test_the_summaries_say_when_they_are_approximate() -> None:
    times = _times(3000)
    exact, folded = WallTimes.of(times), WallTimes.of(times, exact_steps=500)
    assert "approximate" not in wall_summary(exact) and "approximate" not in loop_summary(exact, 0)
    manifest, loop = wall_summary(folded), loop_summary(folded, 0)
    assert manifest["approximate"] is True and loop["approximate"] is True
    assert manifest["n"] == 3000 and manifest["max"] == max(times)
    want = sorted(times)
    assert abs(manifest["median"] - want[1499]) <= want[1499] / 1024
    assert loop["skipped"] == 50 and loop["total_ns"] == sum(times[50:])


def test_the_boundaries_are_exact_where_the_tolerance_would_hide_them() -> None:
    """Found by mutants the 1/1024 tolerance absorbed (test audit): the exact limit is
    inclusive; a bucket reads as its middle; the largest time is the last, exactly, and no
    bucket reads past it; a negative time (a clock step back) counts as 0."""
    full = WallTimes.of(range(100), exact_steps=100)
    assert full.exact and WallTimes.of(range(101), exact_steps=100).exact is False
    # past the limit: 4101 ns is in the bucket of 4100-4103 (shift 2, top 1025), read as 4102
    times = WallTimes.of([10] * 70 + [4101] * 10 + [4103], exact_steps=70)
    summary = times.summary()
    assert not summary.exact
    assert [summary.at(i) for i in (70, 79)] == [4102, 4102]
    assert summary.at(80) == 4103 == summary.max  # the last is the largest, not its bucket's middle
    capped = WallTimes.of([10] * 70 + [4100] * 2, exact_steps=70).summary()
    assert capped.at(70) == 4100  # the bucket's middle (4102) is past every time in it: the largest caps it
    assert WallTimes.of([-5, 3]).summary().at(0) == 0
