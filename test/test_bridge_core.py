"""BridgeCore over the embedded engine: frames named and posed at the step, drawn on use."""

from __future__ import annotations

import numpy as np
import pytest

from simforge_ros.backends.base import RenderedFrame
from simforge_ros.backends.embedded import EmbeddedBackend
from simforge_ros.bridge_core import ADVANCE_CHUNK_TICKS, BridgeConfig, BridgeCore
from simforge_ros.core.errors import ParticipantTimeout
from simforge_ros.core.faults import FaultPlan
from simforge_ros.core.lockstep import StepRequest
from simforge_ros.core.values import Action, FrameStamp, Pose2D
from simforge_ros.engine import Engine, load_scenario

DECISION_US = 100_000
CAMERAS = ("front", "left")


def _core(*faults: str) -> BridgeCore:
    return BridgeCore(EmbeddedBackend("right_turn", 20_000, 64, 48),
                      BridgeConfig(CAMERAS, None, FaultPlan.parse(list(faults))))


def _step(core: BridgeCore, step: int):
    t_us = step * DECISION_US
    request = StepRequest(step, t_us, DECISION_US, 0, step == 0, Action(step, step, t_us, 0.0, 1.0))
    return core.step(request)


def test_frames_are_named_at_the_step_and_drawn_once_on_first_use():
    core = _core()
    engine = Engine(load_scenario("right_turn"), 0, tick_us=20_000, width=64, height=48)
    for step in range(3):
        observation, frames = _step(core, step)
        if step:
            engine.advance(0.0, 1.0, 5)
        assert [f.camera for f in observation.frames] == list(CAMERAS)
        assert [f.stamp for f in frames] == list(observation.frames)
        assert not any(f.drawn for f in frames)  # the answer needs no pixels
        for frame in frames:
            direct = engine.render(frame.stamp.camera, engine.t_us)
            assert frame.stamp == direct.stamp
            first = frame.pixels
            assert frame.drawn and frame.pixels is first  # drawn once
            assert first.tobytes() == direct.pixels.tobytes()


def test_flip_pixel_changes_one_byte_of_that_camera_s_drawn_frame():
    plain, flipped = _core(), _core("flip_pixel=left@2")
    for step in range(3):
        _, a = _step(plain, step)
        _, b = _step(flipped, step)
    assert not any(f.drawn for f in b)
    for fa, fb in zip(a, b, strict=True):
        assert fa.stamp == fb.stamp
        diff = np.argwhere(fa.pixels != fb.pixels)
        assert len(diff) == (1 if fa.stamp.camera == "left" else 0)
        assert not fb.pixels.flags.writeable


def test_stale_frame_reuses_the_last_step_s_frames_with_their_own_stamps():
    core = _core("stale_frame@2")
    _, before = _step(core, 0)
    _, first = _step(core, 1)
    observation, again = _step(core, 2)
    assert again == first and all(f.t_us == DECISION_US for f in observation.frames)
    assert before[0].stamp.t_us == 0


def test_a_rendered_frame_has_its_pixels_or_a_way_to_draw_them_not_both():
    stamp = FrameStamp("front", 0, Pose2D(0.0, 0.0, 0.0))
    pixels = np.zeros((2, 2, 3), np.uint8)
    assert RenderedFrame(stamp, pixels).drawn
    for bad in ({}, {"pixels": pixels, "draw": lambda: pixels}):
        with pytest.raises(ValueError, match="either its pixels or a way to draw them"):
            RenderedFrame(stamp, **bad)


@pytest.mark.parametrize("decision_us", [0, -100_000])
def test_a_decision_period_that_is_not_positive_is_refused_by_name(decision_us):
    """0 reached the frames' period (t % 0): the bridge died with a ZeroDivisionError."""
    from simforge_ros.core.errors import RateNotMultiple

    with pytest.raises(RateNotMultiple) as info:
        _core().step(StepRequest(0, 0, decision_us, 0, True, Action(0, 0, 0, 0.0, 0.0)))
    assert info.value.code == "rate_not_multiple" and info.value.step == 0
    assert info.value.detail == f"decision_us={decision_us} must be > 0"


def _long_step(core: BridgeCore, n_ticks: int):
    decision_us = n_ticks * 20_000
    core.step(StepRequest(0, 0, decision_us, 0, True, Action(0, 0, 0, 0.0, 0.0)))
    return core.step(StepRequest(1, decision_us, decision_us, 0, False, Action(1, 0, decision_us, 0.05, 0.8)))


def test_a_watched_long_step_advances_in_chunks_to_the_same_world():
    """Between chunks the watchdog may end the step (single layout: the clock master's timeout
    and Ctrl-C); the chunks must not change what the step computes."""
    n_ticks = 2 * ADVANCE_CHUNK_TICKS + 500
    plain = BridgeCore(EmbeddedBackend("right_turn", 20_000, 64, 48), BridgeConfig((), None))
    looks: list[int] = []
    watched = BridgeCore(EmbeddedBackend("right_turn", 20_000, 64, 48), BridgeConfig((), None), watchdog=looks.append)
    expected, _ = _long_step(plain, n_ticks)
    observed, _ = _long_step(watched, n_ticks)
    assert looks == [1, 1]  # after the first and second chunk, not after the last
    assert observed == expected
    assert observed.world_digest == expected.world_digest and observed.state == expected.state


def test_a_watchdog_refusal_ends_the_step_and_says_how_far_it_got():
    def overdue(step: int) -> None:
        raise ParticipantTimeout(step, "still working after 2 s, the limit of a call")

    core = BridgeCore(EmbeddedBackend("right_turn", 20_000, 64, 48), BridgeConfig((), None), watchdog=overdue)
    with pytest.raises(ParticipantTimeout) as raised:
        _long_step(core, 3 * ADVANCE_CHUNK_TICKS)
    assert raised.value.step == 1
    assert raised.value.detail == (f"still working after 2 s, the limit of a call (had advanced {ADVANCE_CHUNK_TICKS} "
                                   f"of its {3 * ADVANCE_CHUNK_TICKS} ticks)")


def test_a_rig_listed_in_another_order_is_the_same_rig():
    """The step chain hashes the frames the answer names in its order; the frames chain
    sorts them. [front, chase] chained other timing records than [chase, front] (and diff
    named camera frames): the rig is now in camera-name order whatever the list's."""
    answers = []
    for cameras in (("front", "chase", "left"), ("chase", "left", "front")):
        core = BridgeCore(EmbeddedBackend("right_turn", 20_000, 64, 48),
                          BridgeConfig(cameras, None, FaultPlan.parse(["drop_frame@1"])))
        answers.append([_step(core, step)[0] for step in range(3)])
    assert answers[0] == answers[1]
    assert answers[0][0].cameras == ("chase", "front", "left")  # the contract's, from step 0's answer
    assert [f.camera for f in answers[0][0].frames] == ["chase", "front", "left"]
    assert [f.camera for f in answers[0][1].frames] == ["front", "left"]  # the first of the rig dropped
