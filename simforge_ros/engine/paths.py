"""Replay of recorded paths at exact integer microseconds.

A path holds its first pose before its first sample and its last pose after its last sample.
Between samples the pose is linear in time; the heading takes the short way round. The
fraction is ``(t - t0) / (t1 - t0)`` on Python ints, which is correctly rounded, so any
integer time gives the same bits on every run regardless of the tick length.
"""

from __future__ import annotations

import bisect
import itertools
import math

from simforge_ros.core.values import Pose2D
from simforge_ros.engine.geometry import wrap_angle
from simforge_ros.engine.scenario import TimedPose

_bisect_right = bisect.bisect_right
_remainder = math.remainder
_TAU = math.tau


class PathReplay:
    """Pose and velocity of one recorded path as pure functions of t_us."""

    def __init__(self, samples: tuple[TimedPose, ...]) -> None:
        if not samples:
            raise ValueError("a recorded path needs at least one sample")
        self._times = [s.t_us for s in samples]
        self._last_i = len(samples) - 1
        first, last = samples[0], samples[-1]
        self._first = (first.x_m, first.y_m, first.yaw_rad)
        self._last = (last.x_m, last.y_m, last.yaw_rad)
        # Per segment i (samples i -> i+1), the terms pose_at, velocity_at, speed_at and
        # yaw_rate_at used to compute on every call: same operations on the same operands, so
        # the same bits, done once.
        self._segments: list[tuple[int, int, float, float, float, float, float, float]] = []
        self._velocities: list[tuple[float, float]] = []
        for a, b in itertools.pairwise(samples):
            span_us = b.t_us - a.t_us
            dx = b.x_m - a.x_m
            dy = b.y_m - a.y_m
            self._segments.append((a.t_us, span_us, a.x_m, a.y_m, a.yaw_rad, dx, dy, wrap_angle(b.yaw_rad - a.yaw_rad)))
            dt_s = span_us / 1_000_000
            self._velocities.append((dx / dt_s, dy / dt_s))
        self._speeds = [math.hypot(vx, vy) for vx, vy in self._velocities]
        self._yaw_rates = [dyaw / (span_us / 1_000_000) for _, span_us, _, _, _, _, _, dyaw in self._segments]
        self.max_speed_mps = max(self._speeds, default=0.0)
        """Fastest segment: the pose never moves faster than this (it is held outside the path)."""
        self.extent_m = max(max(abs(s.x_m), abs(s.y_m)) for s in samples)
        """Largest |x| or |y| of any sample: interpolated positions lie within it (to rounding)."""

    def _segment(self, t_us: int) -> int:
        """Index i with times[i] <= t_us < times[i+1], clamped to the ends."""
        return _bisect_right(self._times, t_us) - 1

    def xyz_at(self, t_us: int) -> tuple[float, float, float]:
        """(x_m, y_m, yaw_rad) of pose_at(t_us), without building a Pose2D (the per-tick path)."""
        i = _bisect_right(self._times, t_us) - 1
        if i < 0:
            return self._first
        if i >= self._last_i:
            return self._last
        t0, span_us, x0, y0, yaw0, dx, dy, dyaw = self._segments[i]
        f = (t_us - t0) / span_us
        return (x0 + dx * f, y0 + dy * f, _remainder(yaw0 + dyaw * f, _TAU))  # remainder: wrap_angle

    def pose_at(self, t_us: int) -> Pose2D:
        """The interpolated pose at t_us."""
        x, y, yaw = self.xyz_at(t_us)
        return Pose2D(x, y, yaw)

    def velocity_at(self, t_us: int) -> tuple[float, float]:
        """Map-frame velocity (m/s) of the segment containing t_us; zero outside the path."""
        i = self._segment(t_us)
        if i < 0 or i >= self._last_i:
            return (0.0, 0.0)
        return self._velocities[i]

    def yaw_rate_at(self, t_us: int) -> float:
        """Heading rate (rad/s) of the segment containing t_us; zero outside the path."""
        i = self._segment(t_us)
        if i < 0 or i >= self._last_i:
            return 0.0
        return self._yaw_rates[i]

    def speed_at(self, t_us: int) -> float:
        """Speed (m/s) of the segment containing t_us (hypot of velocity_at)."""
        i = self._segment(t_us)
        if i < 0 or i >= self._last_i:
            return 0.0  # hypot(0.0, 0.0)
        return self._speeds[i]


def replayed_motion(path: PathReplay, t_us: int, prev_speed: float, wheelbase_m: float,
                    dt_s: float) -> tuple[float, float, float]:
    """(speed, steer, accel) of an ego carried along ``path`` at t_us: the speed and yaw rate
    of the segment leading in, the steer a bicycle of that wheelbase turns that rate with,
    and the change from ``prev_speed`` over one tick (the engine's and the carla backend's
    hand-over replay)."""
    probe = t_us - 1 if t_us > 0 else 0
    speed = path.speed_at(probe)
    yaw_rate = path.yaw_rate_at(probe)
    steer = math.atan(wheelbase_m * yaw_rate / speed) if speed > 0.1 else 0.0
    accel = (speed - prev_speed) / dt_s if t_us > 0 else 0.0
    return speed, steer, accel
