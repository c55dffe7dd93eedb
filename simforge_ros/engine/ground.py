"""Ground colours at map points: grass, sidewalks, asphalt, lane marks, crosswalks, stop lines.

Shared by the camera renderer (points where pixel rays hit the ground) and the top-down map,
so both show the same road. Vectorised over N points; class codes index a fixed palette so
the output is exact uint8 with no float-to-int rounding.
"""

from __future__ import annotations

import itertools

import numpy as np

from simforge_ros.engine.scenario import Scenario

GRASS, SIDEWALK, ASPHALT, WHITE, YELLOW = 0, 1, 2, 3, 4
PALETTE = np.array(
    [
        (98, 128, 74),  # grass
        (172, 170, 162),  # sidewalk
        (74, 74, 80),  # asphalt
        (236, 236, 232),  # white paint
        (232, 190, 48),  # yellow paint
    ],
    dtype=np.uint8,
)
LINE_HALF_M = 0.08
EDGE_INSET_M = 0.3
DASH_PERIOD_M = 9.0
DASH_ON_M = 3.0
STOP_LINE_HALF_M = 0.3
ZEBRA_PERIOD_M = 1.0


def _segment_frame(gx: np.ndarray, gy: np.ndarray, a: tuple[float, float], b: tuple[float, float]):
    """Squared distance to segment a-b, signed lateral offset (left +) and distance along from a."""
    ex, ey = b[0] - a[0], b[1] - a[1]
    length = float(np.hypot(ex, ey))
    ux, uy = ex / length, ey / length
    px = gx - a[0]
    py = gy - a[1]
    along = px * ux + py * uy
    lateral = py * ux - px * uy
    excess = along - np.clip(along, 0.0, length)
    return lateral * lateral + excess * excess, lateral, along


def _near_box(gx: np.ndarray, gy: np.ndarray, pts: list[tuple[float, float]], margin: float) -> np.ndarray:
    """Indices of points inside the padded bounding box of pts (cheap pre-filter)."""
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    return np.flatnonzero(
        (gx > min(xs) - margin) & (gx < max(xs) + margin) & (gy > min(ys) - margin) & (gy < max(ys) + margin)
    )


class GroundPainter:
    """Paints map points for one scenario's static layout."""

    def __init__(self, scenario: Scenario, min_line_half_m: float = 0.0) -> None:
        self._scenario = scenario
        self._line_half_m = max(LINE_HALF_M, min_line_half_m)  # the top-down map widens thin paint

    def classes(self, gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
        """Class code (GRASS..YELLOW) per point."""
        sc = self._scenario
        n = gx.shape[0]
        sidewalk = np.zeros(n, dtype=bool)
        asphalt = np.zeros(n, dtype=bool)
        per_road = []
        for road in sc.roads:
            best, lat, along = _segment_frame(gx, gy, road.points[0], road.points[1])
            for a, b in itertools.pairwise(road.points[1:]):
                d2, la, al = _segment_frame(gx, gy, a, b)
                closer = d2 < best
                best = np.where(closer, d2, best)
                lat = np.where(closer, la, lat)
                along = np.where(closer, al, along)
            half = 0.5 * road.width_m
            on = best < half * half
            sidewalk |= best < (half + road.sidewalk_m) * (half + road.sidewalk_m)
            asphalt |= on
            per_road.append((road, on, lat, along))
        no_marks = np.zeros(n, dtype=bool)
        for j in sc.junctions:
            near = _near_box(gx, gy, [(j.x_m, j.y_m)], j.radius_m)
            dx, dy = gx[near] - j.x_m, gy[near] - j.y_m
            inside = near[dx * dx + dy * dy < j.radius_m * j.radius_m]
            asphalt[inside] = True
            no_marks[inside] = True
        cls = np.where(asphalt, ASPHALT, np.where(sidewalk, SIDEWALK, GRASS)).astype(np.uint8)
        for i, (road, on, lat, along) in enumerate(per_road):
            clear = on & ~no_marks
            for k, (_, other_on, _, _) in enumerate(per_road):
                if k != i:
                    clear &= ~other_on
            half = 0.5 * road.width_m
            edge = np.abs(np.abs(lat) - (half - EDGE_INSET_M)) < self._line_half_m
            cls[clear & edge] = WHITE
            lane_w = road.width_m / road.lanes
            for k in range(1, road.lanes):
                near = np.abs(lat - (-half + k * lane_w)) < self._line_half_m
                if road.lanes % 2 == 0 and 2 * k == road.lanes:
                    cls[clear & near] = YELLOW
                else:
                    dashed = np.mod(along, DASH_PERIOD_M) < DASH_ON_M
                    cls[clear & near & dashed] = WHITE
        for cw in sc.crosswalks:
            near = _near_box(gx, gy, [cw.a, cw.b], cw.width_m)
            _, lat, along = _segment_frame(gx[near], gy[near], cw.a, cw.b)
            length = float(np.hypot(cw.b[0] - cw.a[0], cw.b[1] - cw.a[1]))
            inside = (np.abs(lat) < 0.5 * cw.width_m) & (along >= 0.0) & (along <= length)
            stripe = np.mod(along, ZEBRA_PERIOD_M) < 0.5 * ZEBRA_PERIOD_M
            cls[near[inside & stripe]] = WHITE
        for sig in sc.signals:
            near = _near_box(gx, gy, list(sig.stop_line), STOP_LINE_HALF_M)
            a, b = sig.stop_line
            _, lat, along = _segment_frame(gx[near], gy[near], a, b)
            length = float(np.hypot(b[0] - a[0], b[1] - a[1]))
            cls[near[(np.abs(lat) < STOP_LINE_HALF_M) & (along >= 0.0) & (along <= length)]] = WHITE
        return cls

    def colors(self, gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
        """uint8 RGB (N x 3) per point."""
        return PALETTE[self.classes(gx, gy)]
