"""How far the loop may run ahead of the recorder: a bounded backlog, never an unbounded one.

The recorder takes every message of a run from reliable keep-all readers. When it falls
behind (a slow disk, a stalled recorder, a recorder on a thread of its own sharing the
interpreter lock with the loop), the unread messages pile up in the transport's
histories until the writer's history is full and a publish fails outright: measured, a
16 000-step ``single`` run, its recorder then on a thread of its own, died at a publish with
``RCLError: cannot publish data``, its step time doubling on the way as the histories
grew. So the clock master counts the steps it has published against the steps the
recorder reports chained and, past ``limit`` steps behind, pauses the loop until the
recorder is back within half of it (or refuses when the recorder makes no progress).
Pure: the clock master feeds it what the recorder reports.
"""

from __future__ import annotations


class RecorderBacklog:
    """Steps published by the loop against steps the recorder has chained."""

    def __init__(self, limit: int) -> None:
        """Raises: ValueError: ``limit`` < 1."""
        if limit < 1:
            raise ValueError(f"a backlog limit is at least one step, got {limit}")
        self.limit = limit
        self.resume_at = limit // 2  # pause until at most this many steps are behind
        self.recorded = 0  # steps the recorder reports chained (a count: steps 0..recorded-1)

    def note_recorded(self, steps: int) -> bool:
        """Take a progress report (reports may come late or twice; only progress counts).
        Returns whether it was progress."""
        if steps > self.recorded:
            self.recorded = steps
            return True
        return False

    def behind(self, published: int) -> int:
        """Steps published (a count) that the recorder has not chained yet."""
        return max(0, published - self.recorded)

    def must_pause(self, published: int) -> bool:
        return self.behind(published) > self.limit

    def may_resume(self, published: int) -> bool:
        return self.behind(published) <= self.resume_at
