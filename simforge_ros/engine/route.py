"""Arc-length geometry of an authored route: projection and look-ahead points.

Pure Python floats in a fixed order so a policy using it stays bit-for-bit repeatable.
"""

from __future__ import annotations

import itertools
import math

from simforge_ros.engine.scenario import RouteWaypoint


class RouteGeometry:
    """A polyline through the route waypoints, measured by arc length s from the first."""

    def __init__(self, waypoints: tuple[RouteWaypoint, ...]) -> None:
        if len(waypoints) < 2:
            raise ValueError("a route needs at least two waypoints")
        self.waypoints = waypoints
        self._xy = [(w.x_m, w.y_m) for w in waypoints]
        s = [0.0]
        for (ax, ay), (bx, by) in itertools.pairwise(self._xy):
            s.append(s[-1] + math.hypot(bx - ax, by - ay))
        self.s_m = s
        # per segment, what every projection needs: (ax, ay, ux, uy, length, s at a);
        # computed once with the same operations project() used to repeat per call
        self._segs: list[tuple[float, float, float, float, float, float]] = []
        for i, ((ax, ay), (bx, by)) in enumerate(itertools.pairwise(self._xy)):
            ex, ey = bx - ax, by - ay
            seg = math.hypot(ex, ey)
            self._segs.append((ax, ay, ex / seg, ey / seg, seg, s[i]))

    @property
    def length_m(self) -> float:
        return self.s_m[-1]

    def project(self, x_m: float, y_m: float, yaw_rad: float | None = None) -> tuple[float, float]:
        """(s, signed lateral offset, left +) of the nearest point; with yaw, segments facing
        more than 90 degrees away are skipped unless no other segment is left."""
        best: tuple[float, float, float] | None = None
        fallback: tuple[float, float, float] | None = None
        cos_yaw = sin_yaw = 0.0
        if yaw_rad is not None:
            cos_yaw, sin_yaw = math.cos(yaw_rad), math.sin(yaw_rad)
        last = len(self._segs) - 1
        for i, (ax, ay, ux, uy, seg, s0) in enumerate(self._segs):
            px, py = x_m - ax, y_m - ay
            along = px * ux + py * uy
            clipped = min(max(along, 0.0), seg)
            if i == 0 and along < 0.0:
                clipped = along
            if i == last and along > seg:
                clipped = along
            dist = math.hypot(px - clipped * ux, py - clipped * uy)
            if fallback is not None and dist >= fallback[0] and best is not None and dist >= best[0]:
                continue  # beaten on both counts: nothing below could change
            cand = (dist, s0 + clipped, py * ux - px * uy)
            facing = yaw_rad is None or (cos_yaw * ux + sin_yaw * uy) > 0.0
            if facing and (best is None or dist < best[0]):
                best = cand
            if fallback is None or dist < fallback[0]:
                fallback = cand
        chosen = best if best is not None else fallback
        assert chosen is not None  # at least one segment
        return chosen[1], chosen[2]

    def point_at(self, s_m: float) -> tuple[float, float]:
        """The route point at arc length s, extended straight beyond either end."""
        n = len(self._xy)
        i = 0
        while i < n - 2 and self.s_m[i + 1] < s_m:
            i += 1
        (ax, ay), (bx, by) = self._xy[i], self._xy[i + 1]
        seg = self.s_m[i + 1] - self.s_m[i]
        f = (s_m - self.s_m[i]) / seg
        return ax + (bx - ax) * f, ay + (by - ay) * f
