"""Time this process did not run: stopped (SIGSTOP, Ctrl-Z, a debugger, a paused
container or VM), not slow.

A participant's answer is allowed ``participant_timeout_ms`` of wall time; a clock master
frozen for longer while the answer was on its way refused a participant that had answered
at once ("sim_bridge did not answer within 10 s"). A thread of its own looks at the clock
every ``period_s``: looks ``gap_s`` or more apart mean the process was not running, and
that time is counted. A long computation in Python does not stop it (the interpreter lock
is handed over every few milliseconds), so a slow participant in the same process is
still timed; one C call holding that lock for a second or more looks like a freeze. A
debugger that stops the whole process (gdb) is a freeze; one that stops a thread (pdb)
is not.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

PERIOD_S = 0.1
GAP_S = 1.0


class FreezeWatch:
    """Counts the seconds this process was frozen, from when it is started."""

    def __init__(self, period_s: float = PERIOD_S, gap_s: float = GAP_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._period_s, self._gap_s, self._clock = period_s, gap_s, clock
        self._lock = threading.Lock()
        self._last = clock()
        self._frozen_s = 0.0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self) -> FreezeWatch:
        """Look every period_s on a daemon thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="freeze-watch", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    @property
    def counted(self) -> float:
        """The seconds counted by the last look (no look now: cheap, for a hot path)."""
        return self._frozen_s

    def frozen_s(self) -> float:
        """The seconds counted so far, a gap since the last look included: the thread that
        asks may be the first to run after a freeze."""
        self.look()
        return self._frozen_s

    def past(self, wall_deadline: float, frozen_from: float, now: float | None = None) -> bool:
        """Whether ``now`` is past ``wall_deadline`` moved on by the seconds counted frozen
        since ``frozen_from`` (frozen_s or counted, read when the wait began); the look only
        once the plain deadline has passed."""
        now = self._clock() if now is None else now
        return now >= wall_deadline and now >= wall_deadline + self.frozen_s() - frozen_from

    def look(self) -> None:
        """One look at the clock: a gap of gap_s or more since the last is counted (less the
        period a look waits anyway)."""
        with self._lock:
            now = self._clock()
            gap = now - self._last
            if gap >= self._gap_s:
                self._frozen_s += gap - self._period_s
            self._last = now

    def _run(self) -> None:
        while not self._stop.wait(self._period_s):
            self.look()
