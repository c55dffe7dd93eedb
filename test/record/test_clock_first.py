"""record.clock_first: each /clock ahead of the messages of its time, every message once."""

from __future__ import annotations

from simforge_ros.record import clock_first
from simforge_ros.record.clock_first import ClockFirst

CLOCK = "/clock"


def _order(arrivals: list[tuple[str, int]], release: bool = True) -> list[tuple[str, int]]:
    written: list[tuple[str, int]] = []
    order = ClockFirst(lambda topic, _type, t_ns, _raw: written.append((topic, t_ns)), CLOCK)
    for topic, t_ns in arrivals:
        order.write(topic, "x/msg/Y", t_ns, b"")
    if release:
        order.release()
    return written


def test_a_step_s_state_and_frames_that_came_before_its_clock_are_written_after_it():
    arrivals = [("params", 0), ("state", 0), (CLOCK, 0), ("timing", 0),
                ("state", 100), ("image", 100), (CLOCK, 100), ("timing", 100), ("action", 100)]
    assert _order(arrivals) == [(CLOCK, 0), ("params", 0), ("state", 0), ("timing", 0),
                                (CLOCK, 100), ("state", 100), ("image", 100), ("timing", 100), ("action", 100)]


def test_what_came_after_its_clock_or_stamped_earlier_goes_straight_through():
    # a stale frame stamped before the last /clock is not held for one that never comes
    arrivals = [(CLOCK, 0), ("state", 0), (CLOCK, 100), ("image", 0), ("timing", 100)]
    assert _order(arrivals, release=False) == arrivals


def test_a_clock_writes_only_what_it_reaches_and_holds_the_rest():
    written = _order([("state", 100), ("state", 200), (CLOCK, 100)], release=False)
    assert written == [(CLOCK, 100), ("state", 100)]


def test_what_no_clock_reaches_is_written_at_release_in_the_order_it_came():
    # a refused step's state, the final status: kept, never dropped
    arrivals = [(CLOCK, 0), ("state", 100), ("status", 100), ("state", 50)]
    assert _order(arrivals, release=False) == [(CLOCK, 0)]
    assert _order(arrivals) == [(CLOCK, 0), ("state", 100), ("status", 100), ("state", 50)]


def test_a_clock_that_goes_back_changes_nothing_held():
    arrivals = [(CLOCK, 100), ("state", 200), (CLOCK, 50), ("timing", 100)]
    assert _order(arrivals, release=False) == [(CLOCK, 100), (CLOCK, 50), ("timing", 100)]


def test_held_messages_are_bounded(monkeypatch):
    monkeypatch.setattr(clock_first, "MAX_HELD", 3)
    written = _order([("state", k) for k in range(1, 6)], release=False)
    assert written == [("state", k) for k in range(1, 5)]  # the fourth held released them all


def test_held_bytes_are_bounded(monkeypatch):
    monkeypatch.setattr(clock_first, "MAX_HELD_BYTES", 25)
    written: list[int] = []
    order = ClockFirst(lambda _topic, _type, t_ns, _raw: written.append(t_ns), CLOCK)
    for t_ns in (1, 2, 3):
        order.write("image", "sensor_msgs/msg/Image", t_ns, bytes(10))
    assert written == [1, 2, 3] and order.held == 0  # the third image passed 25 bytes held
    order.write("image", "sensor_msgs/msg/Image", 4, bytes(10))
    order.write(CLOCK, "rosgraph_msgs/msg/Clock", 3, b"")  # not yet its time: held, the count started over
    assert order.held == 1


def test_a_checkpoint_writes_what_a_complete_step_holds_even_before_its_clock():
    """steps.jsonl is flushed with the bag: a step it holds must be in the bag, should its
    /clock come last (a killed recorder's salvage keeps what both hold)."""
    written: list[tuple[str, int]] = []
    order = ClockFirst(lambda topic, _type, t_ns, _raw: written.append((topic, t_ns)), CLOCK)
    for topic, t_ns in [(CLOCK, 0), ("state", 100), ("timing", 100), ("state", 200)]:
        order.write(topic, "x/msg/Y", t_ns, b"")
    order.release_through(100)
    assert written == [(CLOCK, 0), ("state", 100), ("timing", 100)] and order.held == 1
    order.write(CLOCK, "rosgraph_msgs/msg/Clock", 100, b"")  # late: nothing held of its time
    order.write(CLOCK, "rosgraph_msgs/msg/Clock", 200, b"")
    assert written[3:] == [(CLOCK, 100), (CLOCK, 200), ("state", 200)]
