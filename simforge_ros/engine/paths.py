"""Replay of recorded paths at exact integer microseconds.

A path holds its first pose before its first sample and its last pose after its last sample.
Between samples the pose is linear in time; the heading takes the short way round. The
fraction is ``(t - t0) / (t1 - t0)`` on Python ints, which is correctly rounded, so any
integer time gives the same bits on every run regardless of the tick length.
"""

from __future__ import annotations

import bisect
import math

from simforge_ros.core.values import Pose2D
from simforge_ros.engine.geometry import wrap_angle
from simforge_ros.engine.scenario import TimedPose


class PathReplay:
    """Pose and velocity of one recorded path as pure functions of t_us."""

    def __init__(self, samples: tuple[TimedPose, ...]) -> None:
        if not samples:
            raise ValueError("a recorded path needs at least one sample")
        self._samples = samples
        self._times = [s.t_us for s in samples]

    def _segment(self, t_us: int) -> int:
        """Index i with times[i] <= t_us < times[i+1], clamped to the ends."""
        return bisect.bisect_right(self._times, t_us) - 1

    def pose_at(self, t_us: int) -> Pose2D:
        """The interpolated pose at t_us."""
        i = self._segment(t_us)
        s = self._samples
        if i < 0:
            return Pose2D(s[0].x_m, s[0].y_m, s[0].yaw_rad)
        if i >= len(s) - 1:
            return Pose2D(s[-1].x_m, s[-1].y_m, s[-1].yaw_rad)
        a, b = s[i], s[i + 1]
        f = (t_us - a.t_us) / (b.t_us - a.t_us)
        dyaw = wrap_angle(b.yaw_rad - a.yaw_rad)
        return Pose2D(
            a.x_m + (b.x_m - a.x_m) * f, a.y_m + (b.y_m - a.y_m) * f, wrap_angle(a.yaw_rad + dyaw * f)
        )

    def velocity_at(self, t_us: int) -> tuple[float, float]:
        """Map-frame velocity (m/s) of the segment containing t_us; zero outside the path."""
        i = self._segment(t_us)
        s = self._samples
        if i < 0 or i >= len(s) - 1:
            return (0.0, 0.0)
        a, b = s[i], s[i + 1]
        dt_s = (b.t_us - a.t_us) / 1_000_000
        return ((b.x_m - a.x_m) / dt_s, (b.y_m - a.y_m) / dt_s)

    def yaw_rate_at(self, t_us: int) -> float:
        """Heading rate (rad/s) of the segment containing t_us; zero outside the path."""
        i = self._segment(t_us)
        s = self._samples
        if i < 0 or i >= len(s) - 1:
            return 0.0
        a, b = s[i], s[i + 1]
        return wrap_angle(b.yaw_rad - a.yaw_rad) / ((b.t_us - a.t_us) / 1_000_000)

    def speed_at(self, t_us: int) -> float:
        """Speed (m/s) of the segment containing t_us."""
        vx, vy = self.velocity_at(t_us)
        return math.hypot(vx, vy)
