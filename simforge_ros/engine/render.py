"""Software ray-caster: ground plane plus oriented 3D boxes, numpy only, byte-deterministic.

Each pixel's ray (precomputed per camera) is rotated by the ego heading; rays going down hit
the ground plane and are painted by GroundPainter; then every box is ray-cast (slab method in
its own frame) over the pixel rectangle its corners project to, with a depth buffer. Colours
come from fixed uint8 palettes, so no float-to-byte rounding can differ between runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simforge_ros.core.values import Pose2D
from simforge_ros.engine.cameras import CAMERAS, RayGrid, camera_coords, pixel_of, ray_grid
from simforge_ros.engine.ground import GroundPainter
from simforge_ros.engine.scenario import Scenario

RGB = tuple[int, int, int]
MAX_RANGE = 300.0
NEAR_M = 0.05
HORIZON: RGB = (196, 212, 226)
ZENITH: RGB = (96, 146, 212)
SIGNAL_RGB: dict[str, RGB] = {"red": (240, 30, 30), "yellow": (250, 200, 20), "green": (30, 230, 70)}


@dataclass(frozen=True)
class RenderBox:
    """A coloured box: footprint centre and heading, vertical extent, face colours."""

    x_m: float
    y_m: float
    yaw_rad: float
    length_m: float
    width_m: float
    z0_m: float
    z1_m: float
    end_rgb: RGB
    side_rgb: RGB
    top_rgb: RGB


def _scaled(rgb: RGB, factor: float) -> RGB:
    return (int(rgb[0] * factor), int(rgb[1] * factor), int(rgb[2] * factor))


def solid_box(
    x: float,
    y: float,
    yaw: float,
    length: float,
    width: float,
    z0: float,
    z1: float,
    rgb: RGB,
    shaded: bool = True,
) -> RenderBox:
    """A box lit from above: top full colour, ends and sides darker (unless emissive)."""
    if not shaded:
        return RenderBox(x, y, yaw, length, width, z0, z1, rgb, rgb, rgb)
    return RenderBox(x, y, yaw, length, width, z0, z1, _scaled(rgb, 0.82), _scaled(rgb, 0.66), rgb)


def vehicle_boxes(
    x: float, y: float, yaw: float, length: float, width: float, height: float, rgb: RGB
) -> list[RenderBox]:
    """Body plus a glassy cabin set slightly back, so a box reads as a car or van."""
    body_top = 0.55 * height
    back = -0.08 * length
    cx, cy = x + back * math.cos(yaw), y + back * math.sin(yaw)
    return [
        solid_box(x, y, yaw, length, width, 0.15, body_top, rgb),
        solid_box(cx, cy, yaw, 0.55 * length, 0.92 * width, body_top, height, (70, 84, 104)),
    ]


def pedestrian_boxes(
    x: float, y: float, yaw: float, width: float, height: float, rgb: RGB
) -> list[RenderBox]:
    """Legs, torso and head."""
    return [
        solid_box(x, y, yaw, 0.6 * width, 0.7 * width, 0.0, 0.48 * height, (40, 44, 80)),
        solid_box(x, y, yaw, 0.7 * width, width, 0.48 * height, 0.86 * height, rgb),
        solid_box(x, y, yaw, 0.45 * width, 0.45 * width, 0.86 * height, height, (224, 182, 150)),
    ]


SIGNAL_HEAD_M = (3.0, 4.0, 0.7)
"""A signal's lit head: from this height to this one, this wide, on a pole up to its bottom
(the markers draw it where the cameras do)."""


def signal_boxes(x: float, y: float, state: str) -> list[RenderBox]:
    """A grey pole with a lit head in the state's colour."""
    bottom, top, side = SIGNAL_HEAD_M
    return [
        solid_box(x, y, 0.0, 0.18, 0.18, 0.0, bottom, (90, 90, 94)),
        solid_box(x, y, 0.0, side, side, bottom, top, SIGNAL_RGB[state], shaded=False),
    ]


def _sky(grid: RayGrid) -> np.ndarray:
    """Sky gradient by ray elevation (computed once per camera)."""
    norm = np.sqrt(grid.dx * grid.dx + grid.dy * grid.dy + grid.dz * grid.dz)
    w = np.clip(grid.dz / norm * 3.0, 0.0, 1.0)
    img = np.empty((grid.height, grid.width, 3), dtype=np.uint8)
    for ch in range(3):
        img[:, :, ch] = np.floor(HORIZON[ch] + (ZENITH[ch] - HORIZON[ch]) * w).astype(np.uint8)
    return img


KEPT_BYTES_PER_PIXEL = 48
"""What a rendered camera keeps, a pixel: its rays, sky and ground pixels (measured ~42)."""
DRAWING_BYTES_PER_PIXEL = 96
"""What drawing one frame takes besides, a pixel (measured ~70: the rays turned to the
world, depth, the ground's hits)."""


def drawing_bytes(cameras: int, width: int, height: int) -> int:
    """The memory the renderer of ``cameras`` cameras at ``width`` x ``height`` takes."""
    if cameras <= 0:
        return 0
    return width * height * (cameras * KEPT_BYTES_PER_PIXEL + DRAWING_BYTES_PER_PIXEL)


class Renderer:
    """Renders named cameras for one scenario at one resolution."""

    def __init__(self, scenario: Scenario, width: int, height: int) -> None:
        self.width = width
        self.height = height
        # per camera, made at its first frame: its rays, its sky and its ground pixels
        # (about 40 bytes a pixel); all five cameras' were made at once, 2.7 GB at 4096x4096
        # for a run that renders one of them
        self._grids: dict[str, RayGrid] = {}
        self._sky: dict[str, np.ndarray] = {}
        self._ground_rows: dict[str, np.ndarray] = {}
        self._painter = GroundPainter(scenario)

    def _grid(self, camera: str) -> RayGrid:
        grid = self._grids.get(camera)
        if grid is None:
            grid = self._grids[camera] = ray_grid(CAMERAS[camera], self.width, self.height)
            self._sky[camera] = _sky(grid)
            self._ground_rows[camera] = np.flatnonzero(grid.dz.ravel() < -1e-9)
        return grid

    def render(self, camera: str, pose: Pose2D, boxes: Sequence[RenderBox]) -> np.ndarray:
        """H x W x 3 uint8 image from camera mounted on an ego at ``pose``."""
        grid = self._grid(camera)
        m = grid.mount
        c, s = math.cos(pose.yaw_rad), math.sin(pose.yaw_rad)
        ox = pose.x_m + (m.x_m * c - m.y_m * s)
        oy = pose.y_m + (m.x_m * s + m.y_m * c)
        oz = m.z_m
        dxw = grid.dx * c - grid.dy * s
        dyw = grid.dx * s + grid.dy * c
        img = self._sky[camera].copy()
        flat = img.reshape(-1, 3)
        flat_depth = np.full(grid.height * grid.width, np.inf)
        idx = self._ground_rows[camera]
        t = -oz / grid.dz.ravel()[idx]
        near = t < MAX_RANGE
        gidx = idx[near]
        tg = t[near]
        gx = ox + tg * dxw.ravel()[gidx]
        gy = oy + tg * dyw.ravel()[gidx]
        flat[gidx] = self._painter.colors(gx, gy)
        flat[idx[~near]] = HORIZON
        flat_depth[gidx] = tg
        depth = flat_depth.reshape(grid.height, grid.width)
        for box in boxes:
            self._draw_box(grid, img, depth, box, ox, oy, oz, pose.yaw_rad, dxw, dyw)
        return img

    def _bounds(self, grid: RayGrid, box: RenderBox, ox: float, oy: float, oz: float, yaw: float):
        """Pixel rectangle (r0, r1, c0, c1) that can contain the box, None if it is out of view.

        Conservative: frustum half-space culling, then the projection of the corners in front
        of the near plane plus the near-plane crossings of every corner pair behind/in front.
        """
        c, s = math.cos(box.yaw_rad), math.sin(box.yaw_rad)
        hl, hw = 0.5 * box.length_m, 0.5 * box.width_m
        pts = []
        for lx, ly in ((hl, hw), (-hl, hw), (-hl, -hw), (hl, -hw)):
            wx, wy = box.x_m + (lx * c - ly * s), box.y_m + (lx * s + ly * c)
            pts += [(wx, wy, box.z0_m), (wx, wy, box.z1_m)]
        cam = camera_coords(grid, ox, oy, oz, yaw, pts)
        tan_h = (0.5 * grid.width + 1.0) / grid.focal_px
        tan_v = (0.5 * grid.height + 1.0) / grid.focal_px
        for outside in (
            lambda f, left, up: f < NEAR_M,
            lambda f, left, up: left > f * tan_h,
            lambda f, left, up: -left > f * tan_h,
            lambda f, left, up: up > f * tan_v,
            lambda f, left, up: -up > f * tan_v,
        ):
            if all(outside(*p) for p in cam):
                return None
        front = [p for p in cam if p[0] >= NEAR_M]
        behind = [p for p in cam if p[0] < NEAR_M]
        clipped = list(front)
        for a in front:
            for b in behind:
                k = (a[0] - NEAR_M) / (a[0] - b[0])
                clipped.append((NEAR_M, a[1] + (b[1] - a[1]) * k, a[2] + (b[2] - a[2]) * k))
        px = [pixel_of(grid, *p) for p in clipped]
        cols = [p[0] for p in px]
        rows = [p[1] for p in px]
        c0, c1 = max(0, math.floor(min(cols)) - 1), min(grid.width, math.ceil(max(cols)) + 2)
        r0, r1 = max(0, math.floor(min(rows)) - 1), min(grid.height, math.ceil(max(rows)) + 2)
        if c0 >= c1 or r0 >= r1:
            return None
        return r0, r1, c0, c1

    def _draw_box(
        self,
        grid: RayGrid,
        img: np.ndarray,
        depth: np.ndarray,
        box: RenderBox,
        ox: float,
        oy: float,
        oz: float,
        yaw: float,
        dxw: np.ndarray,
        dyw: np.ndarray,
    ) -> None:
        bounds = self._bounds(grid, box, ox, oy, oz, yaw)
        if bounds is None:
            return
        r0, r1, c0, c1 = bounds
        c, s = math.cos(box.yaw_rad), math.sin(box.yaw_rad)
        rx, ry = ox - box.x_m, oy - box.y_m
        lox, loy = c * rx + s * ry, -s * rx + c * ry
        wx, wy = dxw[r0:r1, c0:c1], dyw[r0:r1, c0:c1]
        ldx = c * wx + s * wy
        ldy = -s * wx + c * wy
        ldz = grid.dz[r0:r1, c0:c1]
        hl, hw = 0.5 * box.length_m, 0.5 * box.width_m
        with np.errstate(divide="ignore", invalid="ignore"):
            ax, bx = (-hl - lox) / ldx, (hl - lox) / ldx
            ay, by = (-hw - loy) / ldy, (hw - loy) / ldy
            az, bz = (box.z0_m - oz) / ldz, (box.z1_m - oz) / ldz
        nx, ny, nz = np.minimum(ax, bx), np.minimum(ay, by), np.minimum(az, bz)
        tnear = np.maximum(np.maximum(nx, ny), nz)
        tfar = np.minimum(np.minimum(np.maximum(ax, bx), np.maximum(ay, by)), np.maximum(az, bz))
        dsub = depth[r0:r1, c0:c1]
        hit = (tnear <= tfar) & (tnear > NEAR_M) & (tnear < dsub)
        if not hit.any():
            return
        sub = img[r0:r1, c0:c1]
        face_x = hit & (nx == tnear)
        face_z = hit & (nz == tnear) & ~face_x
        sub[hit] = box.side_rgb
        sub[face_x] = box.end_rgb
        sub[face_z] = box.top_rgb
        dsub[hit] = tnear[hit]
