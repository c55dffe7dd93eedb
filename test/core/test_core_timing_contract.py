from __future__ import annotations

import math

import pytest

from simforge_ros.core.errors import (
    ConfigError,
    MissingFrame,
    PoseTolerance,
    RateNotMultiple,
    Refusal,
    StaleFrame,
    TimeDrift,
)
from simforge_ros.core.timing_contract import Contract, build_contract, check_observation, wrap_deg
from simforge_ros.core.values import FrameStamp, Pose2D

POSE = Pose2D(10.0, -2.0, 0.5)


def contract(**kw: object) -> Contract:
    args: dict[str, object] = dict(
        decision_us=100_000, tick_us=10_000, camera_period_us=200_000, cameras=("front", "chase")
    )
    args.update(kw)
    return build_contract(**args)  # type: ignore[arg-type]


def frames(c: Contract, step: int, pose: Pose2D = POSE, **t_over: int) -> list[FrameStamp]:
    return [FrameStamp(cam, t_over.get(cam, c.t_us(step)), pose) for cam in c.cameras_at(step)]


def test_contract_basics() -> None:
    c = contract(latency_us=200_000)
    assert c.t_us(0) == 0 and c.t_us(40) == 4_000_000 and isinstance(c.t_us(3), int)
    assert c.t_us(10**12) == 10**17
    assert c.ticks_per_step == 10 and c.latency_steps == 2 and c.camera_period_steps == 2
    assert c.cameras_at(0) == ("front", "chase") and c.cameras_at(1) == () and c.cameras_at(4) == ("front", "chase")
    every = contract(camera_period_us=0)
    assert every.camera_period_steps == 1 and every.cameras_at(3) == ("front", "chase")
    assert (c.pose_tolerance_m, c.pose_tolerance_deg) == (0.01, 0.1)
    with pytest.raises(ValueError):
        Contract(100_000, 30_000, 0, 1, ())


def test_refuses_tick_that_does_not_divide_decision() -> None:
    with pytest.raises(RateNotMultiple) as info:
        build_contract(decision_us=100_000, tick_us=30_000)
    assert info.value.step == -1 and info.value.code == "rate_not_multiple"
    assert "tick_us=30000" in info.value.detail and "decision_us=100000" in info.value.detail


def test_refuses_more_ticks_a_step_than_step_timing_can_carry() -> None:
    """StepTiming.ticks_per_step is a uint32: a step of 2^32 + 5 ticks was recorded as 5."""
    assert build_contract(decision_us=2**32 - 1, tick_us=1).ticks_per_step == 2**32 - 1
    with pytest.raises(RateNotMultiple) as info:
        build_contract(decision_us=2**32 + 5, tick_us=1)
    assert info.value.detail == (
        "decision_us=4294967301 (4294.967301 s) must be at most 4294967295 ticks of tick_us=1 (0.000001 s) (a "
        "step's tick count is a uint32 in StepTiming): 4294967301 ticks")


def test_refuses_camera_period_of_0_0999_s() -> None:
    with pytest.raises(RateNotMultiple) as info:
        build_contract(decision_us=100_000, tick_us=10_000, camera_period_us=99_900, cameras=("front",))
    assert "camera_period_us=99900" in info.value.detail


def test_reports_every_rate_problem_at_once() -> None:
    with pytest.raises(RateNotMultiple) as info:
        build_contract(
            decision_us=100_000,
            tick_us=30_000,
            latency_us=150_000,
            camera_period_us=99_900,
            extra_periods={"driver.planning_period_us": 250_000, "driver.replan_us": 0},
        )
    detail = info.value.detail
    for needle in (
        "tick_us=30000",
        "latency_us=150000",
        "camera_period_us=99900",
        "driver.planning_period_us=250000",
        "driver.replan_us=0",
    ):
        assert needle in detail
    assert detail.count(";") == 4


def test_a_period_is_said_in_seconds_too() -> None:
    # a bridge given camera_period_s: 0.25 was refused naming only "camera_period_us=250000"
    with pytest.raises(RateNotMultiple) as info:
        build_contract(decision_us=100_000, tick_us=10_000, camera_period_us=250_000,
                       extra_periods={"driver.planning_period_us": 1_234_567})
    assert info.value.detail == (
        "camera_period_us=250000 (0.25 s) must be a multiple of decision_us=100000 (0.1 s): remainder 50000 us; "
        "driver.planning_period_us=1234567 (1.234567 s) must be a multiple of decision_us=100000 (0.1 s): "
        "remainder 34567 us")


def test_refuses_non_positive_periods() -> None:
    with pytest.raises(RateNotMultiple) as info:
        build_contract(decision_us=0, tick_us=-5)
    assert "decision_us=0 must be > 0" in info.value.detail and "tick_us=-5 must be > 0" in info.value.detail
    with pytest.raises(RateNotMultiple):
        build_contract(decision_us=100_000, tick_us=10_000, latency_us=-100_000)
    with pytest.raises(RateNotMultiple):
        build_contract(decision_us=100_000, tick_us=10_000, camera_period_us=-100_000)


def test_extra_periods_accept_whole_steps() -> None:
    c = build_contract(decision_us=100_000, tick_us=10_000, extra_periods={"driver.planning_period_us": 500_000})
    assert c.decision_us == 100_000


def test_wrong_types_are_config_errors_all_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        build_contract(
            decision_us=0.1,  # type: ignore[arg-type]
            tick_us=True,  # type: ignore[arg-type]
            cameras=("front", "front"),
            pose_tolerance_m=-1.0,
        )
    fields = [p.field for p in info.value.problems]
    assert fields == ["decision_us", "tick_us", "cameras", "pose_tolerance_m"]


def test_check_observation_passes_a_good_step() -> None:
    c = contract()
    for step in range(6):
        check_observation(c, step, c.t_us(step), POSE, frames(c, step))


def test_time_drift() -> None:
    c = contract()
    check_observation(c, 3, 300_000, POSE, [])
    with pytest.raises(TimeDrift) as info:
        check_observation(c, 3, 300_001, POSE, [])
    assert info.value.step == 3 and "300001" in info.value.detail and "300000" in info.value.detail
    with pytest.raises(TimeDrift):
        check_observation(c, 3, 300_000.0, POSE, [])  # type: ignore[arg-type]


def test_time_drift_is_checked_before_frames() -> None:
    c = contract()
    with pytest.raises(TimeDrift):
        check_observation(c, 2, 199_999, POSE, [])


def test_missing_frame_only_when_expected() -> None:
    c = contract()
    check_observation(c, 1, c.t_us(1), POSE, [])  # no camera due at step 1
    with pytest.raises(MissingFrame) as info:
        check_observation(c, 2, c.t_us(2), POSE, frames(c, 2)[:1])
    assert info.value.step == 2 and "chase" in info.value.detail


def test_stale_frame_old_and_future() -> None:
    c = contract()
    with pytest.raises(StaleFrame) as old:
        check_observation(c, 4, c.t_us(4), POSE, frames(c, 4, front=c.t_us(2)))
    assert old.value.step == 4 and "old" in old.value.detail
    with pytest.raises(StaleFrame) as future:
        check_observation(c, 4, c.t_us(4), POSE, frames(c, 4, chase=c.t_us(5)))
    assert "not reached" in future.value.detail


def test_missing_is_reported_before_stale_of_a_later_camera() -> None:
    c = contract()
    with pytest.raises(MissingFrame):
        check_observation(c, 2, c.t_us(2), POSE, [FrameStamp("chase", 0, POSE)])


def test_extra_frames_ignored_only_when_stamped_now() -> None:
    c = contract()
    check_observation(c, 1, c.t_us(1), POSE, [FrameStamp("front", c.t_us(1), POSE)])
    check_observation(c, 2, c.t_us(2), POSE, [*frames(c, 2), FrameStamp("rear", c.t_us(2), POSE)])
    with pytest.raises(StaleFrame):
        check_observation(c, 1, c.t_us(1), POSE, [FrameStamp("front", c.t_us(0), POSE)])


def rig(dx_m: float, dyaw_deg: float) -> Pose2D:
    return Pose2D(POSE.x_m + dx_m, POSE.y_m, POSE.yaw_rad + math.radians(dyaw_deg))


def test_pose_tolerance_trips_on_a_5_4_mm_0_134_deg_offset_by_its_yaw_and_names_both() -> None:
    """5.4 mm is within the 10 mm tolerance; 0.134 deg is past the 0.1 deg one."""
    c = contract()
    with pytest.raises(PoseTolerance) as info:
        check_observation(c, 2, c.t_us(2), POSE, frames(c, 2, pose=rig(0.0054, 0.134)))
    assert info.value.step == 2 and "0.0054 m" in info.value.detail and "0.134 deg" in info.value.detail


@pytest.mark.parametrize("which", ["distance", "yaw"])
def test_a_pose_error_equal_to_its_tolerance_passes_and_one_past_it_trips(which: str) -> None:
    """The tolerance is the largest error allowed: exactly at it is within (each alone, the
    other error 0)."""
    from simforge_ros.core.timing_contract import pose_error

    state = Pose2D(0.0, 0.0, 0.0)
    at = Pose2D(0.0075, 0.0, 0.0) if which == "distance" else Pose2D(0.0, 0.0, 0.0013)
    past = Pose2D(0.0075 + 1e-8, 0.0, 0.0) if which == "distance" else Pose2D(0.0, 0.0, 0.0013 + 1e-8)
    dist_m, yaw_deg = pose_error(state, at)
    c = contract(pose_tolerance_m=dist_m if which == "distance" else 1.0,
                 pose_tolerance_deg=yaw_deg if which == "yaw" else 1.0)
    check_observation(c, 0, 0, state, frames(c, 0, pose=at))
    with pytest.raises(PoseTolerance):
        check_observation(c, 0, 0, state, frames(c, 0, pose=past))


def test_pose_tolerance_passes_5_mm_and_0_05_deg() -> None:
    c = contract()
    check_observation(c, 2, c.t_us(2), POSE, frames(c, 2, pose=rig(0.005, 0.05)))


def test_pose_tolerance_distance_and_wrap() -> None:
    c = contract()
    with pytest.raises(PoseTolerance):
        check_observation(c, 0, 0, POSE, frames(c, 0, pose=rig(0.011, 0.0)))
    a = Pose2D(0.0, 0.0, math.pi - 0.0005)
    b = Pose2D(0.0, 0.0, -math.pi + 0.0005)  # 0.057 deg apart across the wrap
    check_observation(c, 0, 0, a, frames(c, 0, pose=b))
    with pytest.raises(PoseTolerance):
        check_observation(c, 0, 0, POSE, frames(c, 0, pose=Pose2D(math.nan, 0.0, 0.0)))
    with pytest.raises(PoseTolerance):  # a non-finite heading alone, the position right
        check_observation(c, 0, 0, POSE, frames(c, 0, pose=Pose2D(POSE.x_m, POSE.y_m, math.nan)))


def test_every_frame_of_a_camera_is_checked_not_only_its_first() -> None:
    """A camera with two frames at one step: the second one stale, or rendered elsewhere,
    is refused too (only the first of each camera was ever sent in a test)."""
    c = contract()
    good = frames(c, 4)
    front = next(f for f in good if f.camera == "front")
    with pytest.raises(StaleFrame) as stale:
        check_observation(c, 4, c.t_us(4), POSE, [*good, FrameStamp("front", c.t_us(2), POSE)])
    assert "'front'" in stale.value.detail and "old" in stale.value.detail
    with pytest.raises(PoseTolerance) as elsewhere:
        check_observation(c, 4, c.t_us(4), POSE, [*good, FrameStamp("front", front.t_us, rig(0.5, 0.0))])
    assert "'front'" in elsewhere.value.detail


def test_wrap_deg_range() -> None:
    assert wrap_deg(180.0) == -180.0
    assert wrap_deg(-180.0) == -180.0
    assert wrap_deg(359.0) == pytest.approx(-1.0)
    assert -180.0 <= wrap_deg(-1e-20) < 180.0
    # float modulo of a number just below -180 gives 360.0, so +180 after the shift: folded back
    assert wrap_deg(-180.00000000000003) == -180.0


def test_no_refusal_over_a_clean_run() -> None:
    c = contract(camera_period_us=100_000)
    raised: list[Refusal] = []
    for step in range(50):
        try:
            check_observation(c, step, c.t_us(step), POSE, frames(c, step))
        except Refusal as r:  # pragma: no cover - must not happen
            raised.append(r)
    assert raised == []


def test_a_pose_just_past_the_tolerance_is_said_with_the_digits_that_show_it() -> None:
    """An audit's refusal read "rendered 0.01 m ... away (tolerance 0.01 m)": 6 digits
    rounded 0.010000000000001563 down to the tolerance it was past."""
    c = contract()
    just_past = c.pose_tolerance_m + 1e-8
    with pytest.raises(PoseTolerance) as info:
        check_observation(c, 2, c.t_us(2), POSE, frames(c, 2, pose=rig(just_past, 0.0)))
    shown = info.value.detail.split("was rendered ")[1].split(" m and")[0]
    assert float(shown) > c.pose_tolerance_m  # all its digits: not "0.01"
    assert " 0 deg away" in info.value.detail


@pytest.mark.parametrize(("kw", "accepted"), [
    ({"decision_us": 0}, False), ({"decision_us": 1, "tick_us": 1}, True),
    ({"tick_us": 0}, False), ({"camera_period_us": 0}, True), ({"camera_period_us": -1}, False),
    ({"latency_us": 0}, True), ({"latency_us": -1}, False),
    ({"pose_tolerance_m": 0.0}, True), ({"pose_tolerance_m": -1e-300}, False),
    ({"pose_tolerance_deg": 0.0}, True), ({"pose_tolerance_deg": -1e-300}, False),
])
def test_each_bound_of_the_contract_is_where_it_says(kw: dict, accepted: bool) -> None:
    """Every bound at its edge: periods of 0 (not > 0) refused, a camera period or latency of
    0 (every step, none) taken, a tolerance of 0 (an exact pose) taken, one below it not."""
    args = {"decision_us": 100_000, "tick_us": 10_000, "camera_period_us": 200_000, "cameras": ("front",), **kw}
    if accepted:
        build_contract(**args)
    else:
        with pytest.raises((RateNotMultiple, ConfigError)):
            build_contract(**args)



def test_an_offset_of_exactly_the_tolerance_passes_wherever_the_car_is() -> None:
    """A rig offset of exactly 0.01 m was 0.010000000000001563 m in the map frame at one
    step and refused there, within it at others: the guard passes its floats' rounding."""
    c = contract()
    for x_m in (0.0, 1.7, -49.99, 123.456, 1e4):
        for yaw in (0.0, 0.3, -2.9):
            state = Pose2D(x_m, x_m / 3, yaw)
            frame = offset_pose_m(state, 0.01)
            check_observation(c, 0, 0, state, frames(c, 0, pose=frame))
            with pytest.raises(PoseTolerance):
                check_observation(c, 0, 0, state, frames(c, 0, pose=offset_pose_m(state, 0.0101)))


def offset_pose_m(pose: Pose2D, forward_m: float) -> Pose2D:
    return Pose2D(pose.x_m + forward_m * math.cos(pose.yaw_rad), pose.y_m + forward_m * math.sin(pose.yaw_rad),
                  pose.yaw_rad)
