"""Top-down map of a scenario: road layout, ego route, actor paths, signals, stop lines.

Drawn with the same GroundPainter as the cameras, plus overlays:
  cyan line: ego route; black squares: held waypoints (hold_until_us);
  orange line / square: recorded ego path before hand-over / the hand-over point;
  ego colour box: ego start; white dots: where the route follower puts the ego each second;
  actor colour boxes: actors at t = 0, thin lines and dots (one per second): their paths;
  discs: signal heads in their colour at t = 0; white bars: stop lines, crosswalks.
North is up, one scale for both axes.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from simforge_ros.core.values import Pose2D
from simforge_ros.engine.geometry import Box
from simforge_ros.engine.ground import GroundPainter
from simforge_ros.engine.paths import PathReplay
from simforge_ros.engine.render import SIGNAL_RGB
from simforge_ros.engine.scenario import Scenario
from simforge_ros.engine.signals import signal_state
from simforge_ros.engine.vehicle import EgoState, ego_box

MAX_SIDE_PX = 720
MAX_PX_PER_M = 6.0
MARGIN_M = 12.0
MIN_SIDE_M = 30.0
MAX_DOTTED_US = 600_000_000  # actors dotted each second of the first 10 minutes at most (snapshot.TOPDOWN_DRIVE_US)
ROUTE_RGB = (40, 220, 230)
HOLD_RGB = (10, 10, 10)
HANDOVER_RGB = (255, 140, 0)


class Canvas:
    """An RGB image over a map window, with world-coordinate drawing helpers."""

    def __init__(self, x0: float, y0: float, x1: float, y1: float) -> None:
        self.k = min(MAX_PX_PER_M, MAX_SIDE_PX / max(x1 - x0, y1 - y0))
        self.x0, self.y1 = x0, y1
        self.w = math.ceil((x1 - x0) * self.k)
        self.h = math.ceil((y1 - y0) * self.k)
        self.img = np.zeros((self.h, self.w, 3), dtype=np.uint8)

    def centres(self) -> tuple[np.ndarray, np.ndarray]:
        """Map coordinates of every pixel centre, row-major."""
        xs = self.x0 + (np.arange(self.w) + 0.5) / self.k
        ys = self.y1 - (np.arange(self.h) + 0.5) / self.k
        gx, gy = np.meshgrid(xs, ys)
        return gx.ravel(), gy.ravel()

    def _px(self, x: float, y: float) -> tuple[float, float]:
        return (x - self.x0) * self.k, (self.y1 - y) * self.k

    def dot(self, x: float, y: float, rgb: tuple[int, int, int], radius_px: int = 1) -> None:
        c, r = self._px(x, y)
        ci, ri = int(c), int(r)
        self.img[
            max(0, ri - radius_px) : max(0, ri + radius_px + 1),
            max(0, ci - radius_px) : max(0, ci + radius_px + 1),
        ] = rgb

    def line(self, pts: list[tuple[float, float]], rgb: tuple[int, int, int], radius_px: int = 1) -> None:
        for (ax, ay), (bx, by) in itertools.pairwise(pts):
            n = max(1, int(math.hypot(bx - ax, by - ay) * self.k * 2))
            for i in range(n + 1):
                self.dot(ax + (bx - ax) * i / n, ay + (by - ay) * i / n, rgb, radius_px)

    def disc(self, x: float, y: float, r_m: float, rgb: tuple[int, int, int]) -> None:
        gx, gy = self.centres()
        inside = (gx - x) ** 2 + (gy - y) ** 2 < r_m * r_m
        self.img.reshape(-1, 3)[inside] = rgb

    def box(self, b: Box, rgb: tuple[int, int, int], outline: tuple[int, int, int] = (20, 20, 20)) -> None:
        gx, gy = self.centres()
        c, s = math.cos(b.yaw_rad), math.sin(b.yaw_rad)
        lx = (gx - b.x_m) * c + (gy - b.y_m) * s
        ly = -(gx - b.x_m) * s + (gy - b.y_m) * c
        inside = (np.abs(lx) < 0.5 * b.length_m) & (np.abs(ly) < 0.5 * b.width_m)
        edge = inside & (
            (np.abs(lx) > 0.5 * b.length_m - 1.5 / self.k) | (np.abs(ly) > 0.5 * b.width_m - 1.5 / self.k)
        )
        flat = self.img.reshape(-1, 3)
        flat[inside] = rgb
        flat[edge] = outline


def _window(scenario: Scenario, trajectory: list[Pose2D]) -> tuple[float, float, float, float]:
    pts = [(p.x_m, p.y_m) for p in trajectory] + [(s.x_m, s.y_m) for s in scenario.signals]
    pts += [(j.x_m, j.y_m) for j in scenario.junctions]
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    wx = max(x1 - x0, MIN_SIDE_M) + 2 * MARGIN_M
    wy = max(y1 - y0, MIN_SIDE_M) + 2 * MARGIN_M
    cx, cy = 0.5 * (x0 + x1), 0.5 * (y0 + y1)
    return cx - 0.5 * wx, cy - 0.5 * wy, cx + 0.5 * wx, cy + 0.5 * wy


def draw_topdown(scenario: Scenario, trajectory: list[Pose2D]) -> np.ndarray:
    """The top-down image; ``trajectory`` (ego poses, one per second) frames the window."""
    canvas = Canvas(*_window(scenario, trajectory))
    gx, gy = canvas.centres()
    canvas.img.reshape(-1, 3)[:] = GroundPainter(scenario, min_line_half_m=0.6 / canvas.k).colors(gx, gy)
    seconds = range(0, min(scenario.duration_us, MAX_DOTTED_US) + 1, 1_000_000)
    for actor in scenario.actors:
        replay = PathReplay(actor.path)
        r, g, b = actor.color
        light = (r // 2 + 128, g // 2 + 128, b // 2 + 128)
        canvas.line([(p.x_m, p.y_m) for p in actor.path], light, 0)
        for t in seconds:
            p = replay.pose_at(t)
            canvas.dot(p.x_m, p.y_m, actor.color, 1)
        p = replay.pose_at(0)
        canvas.box(Box(p.x_m, p.y_m, p.yaw_rad, actor.length_m, actor.width_m), actor.color)
    canvas.line([(w.x_m, w.y_m) for w in scenario.ego.route], ROUTE_RGB, 1)
    if scenario.handover is not None:
        path = scenario.handover.path
        canvas.line([(p.x_m, p.y_m) for p in path], HANDOVER_RGB, 1)
        hp = PathReplay(path).pose_at(scenario.handover.t_us)
        canvas.dot(hp.x_m, hp.y_m, HANDOVER_RGB, 4)
    for w in scenario.ego.route:
        if w.hold_until_us > 0:
            canvas.dot(w.x_m, w.y_m, HOLD_RGB, 3)
    canvas.box(ego_box(EgoState(scenario.ego.start, 0.0), scenario.ego.vehicle), scenario.ego.vehicle.color)
    for p in trajectory:
        canvas.dot(p.x_m, p.y_m, (255, 255, 255), 1)
    for sig in scenario.signals:
        canvas.disc(sig.x_m, sig.y_m, 1.2, SIGNAL_RGB[signal_state(sig, 0)])
    return canvas.img
