from __future__ import annotations

import math

import pytest

from simforge_ros.core.errors import ConfigError
from simforge_ros.core.pacing import Pacer

MS = 1_000_000  # ns


def test_unpaced_never_waits() -> None:
    pacer = Pacer(0.0)
    pacer.start(5 * MS)
    assert not pacer.paced
    assert pacer.due_ns(100_000) is None
    assert pacer.wait_ns(10_000_000, 0) == 0


def test_nothing_is_due_before_the_origin_is_known() -> None:
    pacer = Pacer(1.0)
    assert pacer.paced
    assert pacer.due_ns(100_000) is None
    assert pacer.wait_ns(100_000, 0) == 0


def test_real_time_puts_each_step_at_its_simulation_time_after_the_origin() -> None:
    pacer = Pacer(1.0)
    pacer.start(7 * MS)
    assert pacer.due_ns(0) == 7 * MS
    assert pacer.due_ns(100_000) == 107 * MS
    assert pacer.wait_ns(100_000, 30 * MS) == 77 * MS
    assert pacer.wait_ns(100_000, 107 * MS) == 0
    assert pacer.wait_ns(100_000, 200 * MS) == 0  # late: go at once, never negative


@pytest.mark.parametrize(("factor", "due_ms"), [(2.0, 50), (0.5, 200), (4, 25), (10.0, 10)])
def test_a_factor_is_simulation_seconds_per_wall_second(factor: float, due_ms: int) -> None:
    pacer = Pacer(factor)
    pacer.start(0)
    assert pacer.due_ns(100_000) == due_ms * MS


def test_deadlines_count_from_the_origin_so_a_slow_step_is_caught_up_not_carried() -> None:
    pacer = Pacer(1.0)
    pacer.start(0)
    # step 1 answered 250 ms late: steps 2 and 3 are already due, step 4 waits its own time
    assert pacer.wait_ns(200_000, 350 * MS) == 0
    assert pacer.wait_ns(300_000, 351 * MS) == 0
    assert pacer.wait_ns(400_000, 352 * MS) == 48 * MS


def test_a_deadline_is_never_a_nanosecond_early() -> None:
    pacer = Pacer(3.0)
    pacer.start(0)
    due = pacer.due_ns(100_000)
    assert due is not None and due * 3 >= 100_000 * 1000
    assert due == math.ceil(100_000_000 / 3)


def test_waits_are_counted_for_the_wall_summary() -> None:
    pacer = Pacer(1.0)
    pacer.note_wait(3 * MS)
    pacer.note_wait(4 * MS)
    assert (pacer.waits, pacer.waited_ns) == (2, 7 * MS)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), True, "1"])
def test_a_factor_that_is_not_a_finite_number_at_least_0_is_refused_by_name(bad: object) -> None:
    with pytest.raises(ConfigError) as err:
        Pacer(bad)  # type: ignore[arg-type]
    assert "real_time_factor" in str(err.value) and "a finite number >= 0" in str(err.value)


def test_a_hold_moves_every_later_deadline_so_a_pause_is_not_rushed_back() -> None:
    pacer = Pacer(1.0)
    pacer.hold(5 * MS)  # not started: nothing to move
    pacer.start(0)
    pacer.hold(500 * MS)
    assert pacer.due_ns(100_000) == 600 * MS
    assert pacer.wait_ns(200_000, 650 * MS) == 50 * MS
