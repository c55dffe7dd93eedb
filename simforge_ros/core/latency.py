"""The action latency buffer: what the vehicle applies at step k is what was decided at k-L.

Latency is a whole number of steps (the contract refuses anything else), so the buffer is
a plain FIFO and fully deterministic: no timers, no wall clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace

from simforge_ros.core.values import Action, neutral_action


class DelayBuffer:
    """Delays decided actions by ``latency_steps`` steps.

    Before the first decision comes through (steps < first_step + L) the applied action is
    the previously applied one, re-stamped to the current step: that is ``initial`` (its
    ``decided_step`` kept, naming its origin) or, without ``initial``, a neutral action
    whose ``decided_step`` is the current step (a neutral action was decided by nobody, so
    it is stamped as if decided where it is applied).
    """

    def __init__(self, latency_steps: int, initial: Action | None = None) -> None:
        """Raises: ValueError: ``latency_steps`` is negative or not an int."""
        if isinstance(latency_steps, bool) or not isinstance(latency_steps, int) or latency_steps < 0:
            raise ValueError(f"latency_steps must be an int >= 0, got {latency_steps!r}")
        self._latency_steps = latency_steps
        self._initial = initial
        self._pending: deque[Action] = deque()
        self._last_step: int | None = None
        self._last_applied: Action | None = None

    @property
    def latency_steps(self) -> int:
        """The delay L in steps."""
        return self._latency_steps

    @property
    def last_step(self) -> int | None:
        """The step of the latest push, or None before any."""
        return self._last_step

    @property
    def last_applied(self) -> Action | None:
        """The action returned by the latest push, or None before any."""
        return self._last_applied

    def push(self, step: int, t_us: int, action: Action) -> Action:
        """Take the action decided at ``step`` and return the one applied at ``step``.

        The returned action is a copy stamped ``step``/``t_us`` whose ``decided_step``
        names the step it was decided at.

        Raises:
            ValueError: ``step`` does not follow the previous push by exactly one, or
                ``action.decided_step`` is not ``step``.
        """
        if self._last_step is not None and step != self._last_step + 1:
            raise ValueError(f"push for step {step} after step {self._last_step}; steps must be consecutive")
        if action.decided_step != step:
            raise ValueError(f"action decided at step {action.decided_step} pushed at step {step}")
        self._pending.append(action)
        if len(self._pending) > self._latency_steps:
            due = self._pending.popleft()
            applied = replace(due, step=step, t_us=t_us)
        elif self._initial is not None:
            # Only steps before the first due decision get here: once the FIFO holds
            # L+1 actions, every later push pops exactly one.
            applied = replace(self._initial, step=step, t_us=t_us)
        else:
            applied = neutral_action(step, t_us)
        self._last_step = step
        self._last_applied = applied
        return applied
