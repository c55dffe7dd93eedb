"""Planar geometry shared by the world, contacts and the renderer.

Pure Python floats on purpose: every operation here is a single IEEE-754 double operation in a
fixed order, so the same inputs give the same bits on every run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simforge_ros.core.values import Pose2D


def wrap_angle(angle_rad: float) -> float:
    """Angle in [-pi, pi]; math.remainder is exact, so wrapping adds no rounding."""
    return math.remainder(angle_rad, math.tau)


def clamp(value: float, low: float, high: float) -> float:
    """Clamp without min/max so NaN handling and operation order stay explicit."""
    if value < low:
        return low
    if value > high:
        return high
    return value


@dataclass(frozen=True)
class Box:
    """An oriented rectangle: centre, heading and full extents (the footprint of an actor)."""

    x_m: float
    y_m: float
    yaw_rad: float
    length_m: float
    width_m: float

    def corners(self) -> tuple[tuple[float, float], ...]:
        """Four corners, counter-clockwise from front-left."""
        c = math.cos(self.yaw_rad)
        s = math.sin(self.yaw_rad)
        hl = 0.5 * self.length_m
        hw = 0.5 * self.width_m
        out = []
        for lx, ly in ((hl, hw), (-hl, hw), (-hl, -hw), (hl, -hw)):
            out.append((self.x_m + (lx * c - ly * s), self.y_m + (lx * s + ly * c)))
        return tuple(out)

    def radius_m(self) -> float:
        """Half diagonal: a cheap bound for the broad phase."""
        return 0.5 * math.hypot(self.length_m, self.width_m)


def offset_pose(pose: Pose2D, forward_m: float, left_m: float = 0.0) -> Pose2D:
    """The pose moved in its own frame (x forward, y left), heading kept."""
    c = math.cos(pose.yaw_rad)
    s = math.sin(pose.yaw_rad)
    return Pose2D(
        pose.x_m + (forward_m * c - left_m * s), pose.y_m + (forward_m * s + left_m * c), pose.yaw_rad
    )


def _project(corners: tuple[tuple[float, float], ...], ax: float, ay: float) -> tuple[float, float]:
    lo = math.inf
    hi = -math.inf
    for x, y in corners:
        p = x * ax + y * ay
        lo = min(lo, p)
        hi = max(hi, p)
    return lo, hi


def boxes_overlap(a: Box, b: Box) -> bool:
    """Separating-axis test for two oriented rectangles; touching edges count as no contact."""
    dx = a.x_m - b.x_m
    dy = a.y_m - b.y_m
    reach = a.radius_m() + b.radius_m()
    if dx * dx + dy * dy >= reach * reach:
        return False
    ca = a.corners()
    cb = b.corners()
    for yaw in (a.yaw_rad, b.yaw_rad):
        for ax, ay in ((math.cos(yaw), math.sin(yaw)), (-math.sin(yaw), math.cos(yaw))):
            lo_a, hi_a = _project(ca, ax, ay)
            lo_b, hi_b = _project(cb, ax, ay)
            if hi_a <= lo_b or hi_b <= lo_a:
                return False
    return True
