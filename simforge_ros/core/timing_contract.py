"""The timing contract of a lockstep run, and the checks that refuse to break it.

The clock master owns simulation time as integer microseconds: step k happens at exactly
``t(k) = k * decision_us``. Every period in the run (engine tick, camera, latency, driver
planning) must be a whole number of ticks or steps, otherwise some event would fall
between steps and the run could only be "about right". Such a configuration is refused
before step 0 with ``rate_not_multiple``; a run that drifts is refused at the step it
drifts.

The one total order of a step k, sorted by (step, tick, rank)::

    rank  tick  what happens
    ----  ----  ---------------------------------------------------------------------
    1     0     clock master publishes /clock = t(k)
    2     0     observe: the bridge's Step call answers engine time, state, frame stamps
    3     0     contract check (check_observation): time, frames, rendered pose
    4     0     decide: the driver's Decide call on the observation of step k only
    5     0     latency buffer: the action decided at k-L becomes ``applied`` at k
    6     0     publish timing, action and applied action for step k
    7     0..n  the next Step call applies ``applied`` and advances ticks_per_step ticks
              (n = ticks_per_step) to t(k+1), where step k+1 begins at rank 1

Nothing of step k+1 happens before rank 7 of step k has finished. Ranks 2 and 7 are one
Step call: its answer is the observation of the step it advanced to, so /clock = t(k) goes
out once the world is at t(k). The bridge's own topics of t(k) (images, odometry, /tf)
leave as it answers, and may reach a reader before that /clock: stamps name the step,
arrival order names nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from simforge_ros.core.errors import (
    ConfigError,
    MissingFrame,
    PoseTolerance,
    Problem,
    RateNotMultiple,
    StaleFrame,
    TimeDrift,
)
from simforge_ros.core.limits import UINT32_MAX
from simforge_ros.core.values import FrameStamp, Pose2D

DEFAULT_DECISION_US = 100_000
"""The decision period when none is configured, typed once: the clock master's parameter
default; tools that drive the engine without a clock master (render, probe-driver, the
benchmark's baseline) start from it too."""
DEFAULT_TICK_US = 20_000
"""The engine tick when none is configured (the bridge's parameter default)."""


@dataclass(frozen=True)
class Contract:
    """The validated timing of a run; build it with build_contract."""

    decision_us: int
    tick_us: int
    latency_steps: int
    camera_period_steps: int
    cameras: tuple[str, ...]
    pose_tolerance_m: float = 0.01
    pose_tolerance_deg: float = 0.1

    def __post_init__(self) -> None:
        """Refuse a hand-built contract that build_contract would never produce."""
        ok = (
            all(_is_int(v) for v in (self.decision_us, self.tick_us, self.latency_steps))
            and _is_int(self.camera_period_steps)
            and self.decision_us > 0
            and self.tick_us > 0
            and self.decision_us % self.tick_us == 0
            and self.latency_steps >= 0
            and self.camera_period_steps >= 1
        )
        if not ok:
            raise ValueError(f"inconsistent contract {self!r}; use build_contract")

    def t_us(self, step: int) -> int:
        """Simulation time of a step, exactly (integers only).

        Raises:
            ValueError: ``step`` is negative or not an int.
        """
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be an int >= 0, got {step!r}")
        return step * self.decision_us

    @property
    def ticks_per_step(self) -> int:
        """Engine ticks between two steps (a whole number by construction)."""
        return self.decision_us // self.tick_us

    @property
    def latency_us(self) -> int:
        """Action latency in microseconds."""
        return self.latency_steps * self.decision_us

    @property
    def camera_period_us(self) -> int:
        """Camera period in microseconds."""
        return self.camera_period_steps * self.decision_us

    def cameras_at(self, step: int) -> tuple[str, ...]:
        """The cameras whose frames are due at ``step`` (all of them or none)."""
        if step % self.camera_period_steps == 0:
            return self.cameras
        return ()


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _said(name: str, value: int) -> str:
    """``name=value`` with the value in seconds too: a parameter given as ``<name>_s`` was
    named only by its ``_us`` twin (camera_period_s: 0.25 said "camera_period_us=250000")."""
    if value <= 0:
        return f"{name}={value}"
    return f"{name}={value} ({f'{Decimal(value).scaleb(-6):f}'.rstrip('0').rstrip('.')} s)"  # exact, any size


def build_contract(
    *,
    decision_us: int,
    tick_us: int,
    latency_us: int = 0,
    camera_period_us: int = 0,
    cameras: Sequence[str] = (),
    extra_periods: Mapping[str, int] | None = None,
    pose_tolerance_m: float = 0.01,
    pose_tolerance_deg: float = 0.1,
) -> Contract:
    """Check every timing rule at once and build the contract.

    ``camera_period_us=0`` means a frame every step. ``extra_periods`` names other periods
    that must be a positive whole number of steps (e.g. ``{"driver.planning_period_us":
    500000}``).

    Raises:
        ConfigError: a value has the wrong type (ints required, bools refused), a camera
            name is empty or repeated, or a tolerance is negative or not finite.
        RateNotMultiple: (step -1) one or more rate rules fail; the detail lists each
            failing rule with its field, value and what it must divide or be a multiple of.
    """
    extras = dict(extra_periods or {})
    problems: list[Problem] = []
    src = "contract"
    for name, value in (
        ("decision_us", decision_us),
        ("tick_us", tick_us),
        ("latency_us", latency_us),
        ("camera_period_us", camera_period_us),
    ):
        if not _is_int(value):
            problems.append(Problem(src, name, "an integer number of microseconds", value))
    for name, value in extras.items():
        if not _is_int(value):
            problems.append(Problem(src, str(name), "an integer number of microseconds", value))
    if isinstance(cameras, str):
        problems.append(Problem(src, "cameras", "a sequence of camera names", cameras))
        camera_names: tuple[str, ...] = ()
    else:
        camera_names = tuple(cameras)
        seen: set[str] = set()
        for cam in camera_names:
            if not isinstance(cam, str) or not cam:
                problems.append(Problem(src, "cameras", "non-empty camera names", cam))
            elif cam in seen:
                problems.append(Problem(src, "cameras", "distinct camera names", cam))
            else:
                seen.add(cam)
    for name, tolerance in (("pose_tolerance_m", pose_tolerance_m), ("pose_tolerance_deg", pose_tolerance_deg)):
        if not _is_real(tolerance) or not math.isfinite(tolerance) or tolerance < 0:
            problems.append(Problem(src, name, "a finite number >= 0", tolerance))
    if problems:
        raise ConfigError(problems)

    rules: list[str] = []
    d, t = _said("decision_us", decision_us), _said("tick_us", tick_us)
    if decision_us <= 0:
        rules.append(f"{d} must be > 0")
    if tick_us <= 0:
        rules.append(f"{t} must be > 0")
    if decision_us > 0 and tick_us > 0 and decision_us % tick_us:
        rules.append(f"{t} must divide {d}: remainder {decision_us % tick_us} us")
    elif decision_us > 0 and tick_us > 0 and decision_us // tick_us > UINT32_MAX:
        rules.append(f"{d} must be at most {UINT32_MAX} ticks of {t} (a step's tick count is a uint32 "
                     f"in StepTiming): {decision_us // tick_us} ticks")
    if decision_us > 0:
        if camera_period_us < 0:
            rules.append(f"{_said('camera_period_us', camera_period_us)} must be >= 0 (0 = every step)")
        elif camera_period_us % decision_us:
            rules.append(f"{_said('camera_period_us', camera_period_us)} must be a multiple of {d}: "
                         f"remainder {camera_period_us % decision_us} us")
        if latency_us < 0:
            rules.append(f"{_said('latency_us', latency_us)} must be >= 0")
        elif latency_us % decision_us:
            rules.append(f"{_said('latency_us', latency_us)} must be a multiple of {d}: "
                         f"remainder {latency_us % decision_us} us")
        for name, value in extras.items():
            if value <= 0:
                rules.append(f"{_said(name, value)} must be > 0 and a multiple of {d}")
            elif value % decision_us:
                rules.append(f"{_said(name, value)} must be a multiple of {d}: remainder {value % decision_us} us")
    if rules:
        raise RateNotMultiple(-1, "; ".join(rules))

    return Contract(
        decision_us=decision_us,
        tick_us=tick_us,
        latency_steps=latency_us // decision_us,
        camera_period_steps=max(1, camera_period_us // decision_us),
        cameras=camera_names,
        pose_tolerance_m=float(pose_tolerance_m),
        pose_tolerance_deg=float(pose_tolerance_deg),
    )


def wrap_deg(angle_deg: float) -> float:
    """Wrap an angle in degrees to [-180, 180)."""
    wrapped = (angle_deg + 180.0) % 360.0 - 180.0
    # Float modulo of a tiny negative number can give 360.0, i.e. +180 after the shift.
    return wrapped - 360.0 if wrapped >= 180.0 else wrapped


POSE_ROUNDING_M = 1e-9
POSE_ROUNDING_DEG = 1e-9
"""What the pose guard lets pass beyond its tolerance: the rounding of map-frame floats
(about 1e-14 m at 50 m from the origin). A rig offset of exactly 0.01 m was refused at a
step that depended on where the car was (0.010000000000001563 m there)."""


def pose_error(state_pose: Pose2D, frame_pose: Pose2D) -> tuple[float, float]:
    """(distance in metres, |wrapped yaw difference| in degrees) between two poses."""
    dist_m = math.hypot(frame_pose.x_m - state_pose.x_m, frame_pose.y_m - state_pose.y_m)
    yaw_deg = abs(wrap_deg(math.degrees(frame_pose.yaw_rad - state_pose.yaw_rad)))
    return dist_m, yaw_deg


def check_observation(
    contract: Contract,
    step: int,
    engine_t_us: int,
    state_pose: Pose2D,
    frames: Sequence[FrameStamp],
) -> None:
    """Refuse an observation that breaks the contract at ``step`` (rank 3 of the step).

    Order: engine time; then each expected camera in contract order (missing, then
    stale); then frames of cameras not due at this step (ignored when stamped t(step),
    stale otherwise); then the pose each expected frame was rendered for. A non-finite
    pose error counts as out of tolerance.

    Raises:
        TimeDrift: engine_t_us != t(step).
        MissingFrame: an expected camera has no frame.
        StaleFrame: a frame is stamped for another time than t(step).
        PoseTolerance: an expected frame's pose is out of tolerance of ``state_pose``.
    """
    t_us = contract.t_us(step)
    if not _is_int(engine_t_us) or engine_t_us != t_us:
        off = f" (off by {engine_t_us - t_us} us)" if _is_real(engine_t_us) else ""
        raise TimeDrift(step, f"engine time {engine_t_us!r} us != t({step}) = {t_us} us{off}")
    expected = contract.cameras_at(step)
    by_camera: dict[str, list[FrameStamp]] = {}
    for frame in frames:
        by_camera.setdefault(frame.camera, []).append(frame)
    for cam in expected:
        got = by_camera.get(cam)
        if not got:
            raise MissingFrame(step, f"no frame from camera {cam!r} for t({step}) = {t_us} us")
        for frame in got:
            if frame.t_us != t_us:
                raise StaleFrame(step, _stale_detail(cam, frame.t_us, step, t_us))
    for frame in frames:
        if frame.camera not in expected and frame.t_us != t_us:
            raise StaleFrame(step, _stale_detail(frame.camera, frame.t_us, step, t_us))
    for cam in expected:
        for frame in by_camera[cam]:
            dist_m, yaw_deg = pose_error(state_pose, frame.pose)
            bad = not (math.isfinite(dist_m) and math.isfinite(yaw_deg))
            if (bad or dist_m > contract.pose_tolerance_m + POSE_ROUNDING_M
                    or yaw_deg > contract.pose_tolerance_deg + POSE_ROUNDING_DEG):
                raise PoseTolerance(
                    step,
                    f"frame {cam!r} was rendered {_past(dist_m, contract.pose_tolerance_m)} m and "
                    f"{_past(yaw_deg, contract.pose_tolerance_deg)} deg away "
                    f"from the state pose (tolerance {contract.pose_tolerance_m:g} m, "
                    f"{contract.pose_tolerance_deg:g} deg)",
                )


def _past(value: float, tolerance: float) -> str:
    """``value`` to 6 significant digits, or all of them where those would show it within
    ``tolerance`` while it is past it: "0.01 m away (tolerance 0.01 m)" read as a refusal
    of a frame within tolerance (it was 0.010000000000001563 m)."""
    text = f"{value:.6g}"
    return repr(value) if value > tolerance and float(text) <= tolerance else text


def _stale_detail(camera: str, frame_t_us: int, step: int, t_us: int) -> str:
    kind = "a time the world has not reached" if frame_t_us > t_us else "an old time"
    return (
        f"frame {camera!r} is stamped {frame_t_us} us, {kind}; "
        f"t({step}) = {t_us} us (off by {frame_t_us - t_us} us)"
    )
