"""Exact time-unit conversions: simulation time is integer microseconds, never floats.

Users write periods in seconds (``0.1``); a float multiply would turn 0.0999 s into
99899.99999999999 us and silently round. Going through ``decimal.Decimal(str(value))``
keeps exactly what the user wrote, and a value that is not a whole number of
microseconds is refused instead of rounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

from simforge_ros.core.errors import ConfigError, Problem, RateNotMultiple

US_PER_S = 1_000_000
NS_PER_US = 1_000


def us_from_seconds(value: float | str | int, field: str) -> int:
    """Convert seconds to whole microseconds exactly.

    Raises:
        ConfigError: ``value`` is not a finite number (bools are not numbers here).
        RateNotMultiple: ``value`` seconds is not a whole number of microseconds.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError.single("units", field, "seconds as a number", value)
    try:
        seconds = Decimal(str(value).strip())
    except InvalidOperation:
        raise ConfigError.single("units", field, "seconds as a number", value) from None
    if not seconds.is_finite():
        raise ConfigError.single("units", field, "a finite number of seconds", value)
    micros = seconds * US_PER_S
    if micros != micros.to_integral_value():
        raise RateNotMultiple(-1, f"{field}={value} s is not a whole number of microseconds")
    return int(micros)


def clock_stamp(t_us: int) -> tuple[int, int]:
    """(sec, nanosec) of a builtin_interfaces/Time for t_us, with integer arithmetic only.

    Raises:
        ValueError: ``t_us`` is negative or not an int (simulation time starts at 0).
    """
    if isinstance(t_us, bool) or not isinstance(t_us, int) or t_us < 0:
        raise ValueError(f"t_us must be an int >= 0, got {t_us!r}")
    sec, rem_us = divmod(t_us, US_PER_S)
    return sec, rem_us * NS_PER_US


def resolve_period(
    params: Mapping[str, object], name: str, *, source: str = "parameters"
) -> int | None:
    """Read the period ``name`` given either as ``<name>_us`` (int) or ``<name>_s`` (seconds).

    A key whose value is None counts as not given. Returns None when neither is given,
    so the caller decides the default.

    Raises:
        ConfigError: both forms are given, or ``<name>_us`` is not an int, or
            ``<name>_s`` is not a number.
        RateNotMultiple: ``<name>_s`` is not a whole number of microseconds.
    """
    key_us, key_s = f"{name}_us", f"{name}_s"
    raw_us = params.get(key_us)
    raw_s = params.get(key_s)
    if raw_us is not None and raw_s is not None:
        raise ConfigError(
            [Problem(source, f"{key_us}/{key_s}", "only one of the two", {key_us: raw_us, key_s: raw_s})]
        )
    if raw_us is not None:
        if isinstance(raw_us, bool) or not isinstance(raw_us, int):
            raise ConfigError.single(source, key_us, "an integer number of microseconds", raw_us)
        return raw_us
    if raw_s is not None:
        if isinstance(raw_s, bool) or not isinstance(raw_s, (int, float, str)):
            raise ConfigError.single(source, key_s, "a number of seconds", raw_s)
        try:
            return us_from_seconds(raw_s, key_s)
        except ConfigError as err:
            raise ConfigError([Problem(source, p.field, p.expected, p.got) for p in err.problems]) from None
    return None
