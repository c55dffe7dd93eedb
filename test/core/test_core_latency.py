from __future__ import annotations

import pytest

from simforge_ros.core.latency import DelayBuffer
from simforge_ros.core.values import Action, neutral_action

DECISION_US = 100_000


def decided(step: int) -> Action:
    return Action(step=step, decided_step=step, t_us=step * DECISION_US, steer_rad=0.01 * step, accel_mps2=1.0)


def test_zero_latency_applies_the_decision_at_once() -> None:
    buf = DelayBuffer(0)
    for k in range(5):
        applied = buf.push(k, k * DECISION_US, decided(k))
        assert applied == decided(k)


def test_latency_two_applies_k_at_k_plus_2_neutral_before() -> None:
    buf = DelayBuffer(2)
    out = [buf.push(k, k * DECISION_US, decided(k)) for k in range(6)]
    assert out[0] == neutral_action(0, 0)
    assert out[1] == neutral_action(1, DECISION_US)
    assert out[1].decided_step == 1
    for k in range(2, 6):
        assert out[k].decided_step == k - 2
        assert out[k].step == k and out[k].t_us == k * DECISION_US
        assert out[k].steer_rad == decided(k - 2).steer_rad


def test_initial_action_is_re_stamped_keeping_its_origin() -> None:
    start = Action(step=-1, decided_step=-1, t_us=0, steer_rad=0.2, accel_mps2=0.0)
    buf = DelayBuffer(1, initial=start)
    first = buf.push(0, 0, decided(0))
    assert first.step == 0 and first.t_us == 0 and first.decided_step == -1 and first.steer_rad == 0.2
    assert buf.push(1, DECISION_US, decided(1)).decided_step == 0


def test_requires_consecutive_steps() -> None:
    buf = DelayBuffer(1)
    buf.push(0, 0, decided(0))
    with pytest.raises(ValueError):
        buf.push(2, 2 * DECISION_US, decided(2))
    with pytest.raises(ValueError):
        buf.push(0, 0, decided(0))
    with pytest.raises(ValueError):
        buf.push(1, DECISION_US, decided(0))
    with pytest.raises(ValueError):
        DelayBuffer(-1)
    assert buf.last_step == 0 and buf.latency_steps == 1
