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
