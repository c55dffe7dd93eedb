from __future__ import annotations

import pytest

from simforge_ros.core.errors import ConfigError, RateNotMultiple
from simforge_ros.core.units import clock_stamp, resolve_period, us_from_seconds


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.1, 100_000), (0.0999, 99_900), ("0.05", 50_000), (2, 2_000_000), (1e-6, 1), (0.3, 300_000), (0, 0)],
)
def test_us_from_seconds_exact(value: object, expected: int) -> None:
    assert us_from_seconds(value, "p") == expected  # type: ignore[arg-type]


def test_us_from_seconds_refuses_fractions_of_a_microsecond() -> None:
    with pytest.raises(RateNotMultiple) as info:
        us_from_seconds(1e-7, "camera_period_s")
    assert info.value.step == -1
    assert "camera_period_s=1e-07 s is not a whole number of microseconds" in info.value.detail


@pytest.mark.parametrize("value", ["fast", float("nan"), float("inf"), True, None, [0.1]])
def test_us_from_seconds_refuses_non_numbers(value: object) -> None:
    with pytest.raises(ConfigError):
        us_from_seconds(value, "p")  # type: ignore[arg-type]


def test_clock_stamp_exact_for_large_values() -> None:
    assert clock_stamp(0) == (0, 0)
    assert clock_stamp(1) == (0, 1000)
    assert clock_stamp(1_500_000) == (1, 500_000_000)
    big = 2**62 + 123_456
    sec, nsec = clock_stamp(big)
    assert sec * 1_000_000 + nsec // 1000 == big and 0 <= nsec < 10**9
    assert clock_stamp(9_007_199_254_740_993) == (9_007_199_254, 740_993_000)  # beyond float precision
    with pytest.raises(ValueError):
        clock_stamp(-1)


def test_resolve_period() -> None:
    assert resolve_period({}, "decision") is None
    assert resolve_period({"decision_us": 100000}, "decision") == 100000
    assert resolve_period({"decision_s": 0.1}, "decision") == 100000
    assert resolve_period({"decision_s": None, "decision_us": 5}, "decision") == 5
    with pytest.raises(ConfigError) as info:
        resolve_period({"decision_us": 100000, "decision_s": 0.1}, "decision")
    assert "decision_us/decision_s" in str(info.value)
    with pytest.raises(ConfigError):
        resolve_period({"decision_us": 0.1}, "decision")
    with pytest.raises(ConfigError):
        resolve_period({"decision_us": True}, "decision")
    with pytest.raises(ConfigError) as cinfo:
        resolve_period({"decision_s": "abc"}, "decision", source="scenario.yaml")
    assert str(cinfo.value).startswith("scenario.yaml: decision_s")
    with pytest.raises(RateNotMultiple):
        resolve_period({"decision_s": 1e-7}, "decision")
