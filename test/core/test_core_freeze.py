"""FreezeWatch counts the time the process did not run: gaps between looks of gap_s or
more, less the period; shorter ones (a look a little late) are not counted."""

from __future__ import annotations

import time

from simforge_ros.core.freeze import FreezeWatch


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_gaps_past_the_limit_are_counted_less_the_period_and_short_ones_not() -> None:
    clock = _Clock()
    watch = FreezeWatch(period_s=0.1, gap_s=1.0, clock=clock)
    for _ in range(20):  # looks on time, and a little late
        clock.now += 0.1
        watch.look()
    clock.now += 0.9
    watch.look()
    assert watch.frozen_s() == 0.0
    clock.now += 12.0  # frozen
    assert watch.frozen_s() == 12.0 - 0.1
    clock.now += 0.1
    assert watch.frozen_s() == 12.0 - 0.1  # counted once
    clock.now += 1.0  # exactly the limit
    assert abs(watch.frozen_s() - (12.0 - 0.1 + 0.9)) < 1e-9


def test_a_busy_thread_holding_the_interpreter_is_not_a_freeze() -> None:
    watch = FreezeWatch(period_s=0.05, gap_s=1.0).start()
    try:
        wall_end = time.monotonic() + 1.5
        total = 0
        while time.monotonic() < wall_end:  # pure Python: the lock is handed over every 5 ms
            total += 1
        assert watch.frozen_s() == 0.0
    finally:
        watch.stop()


def test_past_moves_the_deadline_on_by_the_time_frozen_since_the_wait_began() -> None:
    clock = _Clock()
    watch = FreezeWatch(period_s=0.1, gap_s=1.0, clock=clock)
    began = watch.frozen_s()
    deadline = clock.now + 3.0

    def looks(n: int) -> None:  # on time
        for _ in range(n):
            clock.now += 0.1
            watch.look()

    looks(10)
    clock.now += 5.0  # frozen (4.9 s of it counted: a look's period is waited anyway)
    assert not watch.past(deadline, began)  # past the plain deadline, not the moved one
    looks(18)
    assert clock.now < deadline + 4.9 and not watch.past(deadline, began)
    clock.now += 0.15
    assert watch.past(deadline, began)
