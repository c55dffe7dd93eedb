"""Traffic signal timing on integer microseconds (no float time, so phases never drift)."""

from __future__ import annotations

from simforge_ros.engine.scenario import Signal

STATE_CODES = {"red": 0, "yellow": 1, "green": 2}


def cycle_us(signal: Signal) -> int:
    """Length of one full phase cycle."""
    return sum(p.duration_us for p in signal.phases)


def signal_state(signal: Signal, t_us: int) -> str:
    """The state shown at t_us: phases repeat from t = -offset_us."""
    into = (t_us + signal.offset_us) % cycle_us(signal)
    for phase in signal.phases:
        if into < phase.duration_us:
            return phase.state
        into -= phase.duration_us
    raise AssertionError("unreachable: phase durations sum to the cycle")


class SignalCodes:
    """STATE_CODES[signal_state(s, t)] for every signal, in scenario order, for the engine's
    per-tick digest: cycles are summed once, and the codes are reused until a phase ends."""

    def __init__(self, signals: tuple[Signal, ...]) -> None:
        self._timing = [
            (s.offset_us, cycle_us(s), tuple((p.duration_us, STATE_CODES[p.state]) for p in s.phases))
            for s in signals
        ]
        self._codes: tuple[int, ...] = ()
        self._from_us = 0
        self._until_us = -1  # codes valid for from_us <= t_us < until_us; none yet

    def codes_at(self, t_us: int) -> tuple[int, ...]:
        """State codes at t_us (the same phase walk as signal_state)."""
        if self._from_us <= t_us < self._until_us:
            return self._codes
        codes = []
        until_us = None
        for offset_us, cycle, phases in self._timing:
            into = (t_us + offset_us) % cycle
            for duration_us, code in phases:
                if into < duration_us:
                    codes.append(code)
                    # this phase holds until t_us + (duration_us - into), and so does its code
                    ends_us = t_us + (duration_us - into)
                    until_us = ends_us if until_us is None else min(until_us, ends_us)
                    break
                into -= duration_us
            else:
                raise AssertionError("unreachable: phase durations sum to the cycle")
        self._codes = tuple(codes)
        self._from_us = t_us
        self._until_us = t_us + 2**62 if until_us is None else until_us  # no signals: never changes
        return self._codes
