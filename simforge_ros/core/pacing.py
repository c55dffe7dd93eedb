"""Pacing a run against the wall clock: simulation time never ahead of factor x wall time.

A lockstep run goes as fast as its participants answer. Someone watching it live (RViz,
Foxglove) or a stack with wall-clock watchdogs of its own (an ECU in the loop) wants it no
faster than real time, or a set multiple of it: ``clock_master.real_time_factor``, the
simulation seconds a wall second may hold, as Gazebo's real-time factor and
``ros2 bag play --rate``. 0 (the default) leaves the run unpaced.

Pacing only ever delays a step's request: what a step computes, and every digest, is the
same at any factor. The deadlines count from one wall origin (the moment step 0 was done:
its time is start-up's), not from the previous step, so a step that took longer than its share does
not push every later one back: the run catches up, then keeps pace again (no faster than,
never "exactly at"). The wall clock is read by the caller; this module only does the
arithmetic, in integer nanoseconds.
"""

from __future__ import annotations

import math

from simforge_ros.core.errors import ConfigError


class Pacer:
    """When each simulation time may be reached, for one run's wall origin."""

    def __init__(self, factor: float) -> None:
        """Raises: ConfigError: ``factor`` negative or not finite."""
        if not (isinstance(factor, (int, float)) and not isinstance(factor, bool)
                and math.isfinite(factor) and factor >= 0):
            raise ConfigError.single("clock_master.real_time_factor", "real_time_factor",
                                     "a finite number >= 0 (0: unpaced; 1: real time)", factor)
        self.factor = float(factor)
        self._origin_ns: int | None = None
        self.waited_ns = 0  # wall time spent waiting for deadlines, for the run's wall summary
        self.waits = 0

    @property
    def paced(self) -> bool:
        return self.factor > 0

    def start(self, wall_ns: int) -> None:
        """Take ``wall_ns`` as the wall time of simulation time 0 (once step 0 is done)."""
        self._origin_ns = wall_ns

    def hold(self, held_ns: int) -> None:
        """The run was held (paused) ``held_ns``: every later deadline moves by as much, so
        the run does not rush to make the pause up."""
        if self._origin_ns is not None:
            self._origin_ns += held_ns

    def due_ns(self, t_us: int) -> int | None:
        """The wall time before which simulation time ``t_us`` must not be reached; None
        when unpaced or not started. Rounded up: never a nanosecond early."""
        if self._origin_ns is None or self.factor == 0:
            return None
        return self._origin_ns + math.ceil(t_us * 1000 / self.factor)

    def wait_ns(self, t_us: int, now_ns: int) -> int:
        """How long to wait at ``now_ns`` before advancing to ``t_us`` (0: go at once)."""
        due = self.due_ns(t_us)
        return 0 if due is None else max(0, due - now_ns)

    def note_wait(self, waited_ns: int) -> None:
        self.waits += 1
        self.waited_ns += waited_ns
