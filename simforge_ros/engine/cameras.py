"""Camera mounts on the ego and their per-pixel ray grids (precomputed once per engine).

Frames are x forward, y left, z up, relative to the ego's rear-axle pose on the ground.
A ray grid holds, for each pixel centre, the ray direction in the ego-aligned frame with the
mount's yaw and pitch already applied; rendering only rotates it by the ego heading.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simforge_ros.core.values import CameraExtrinsics, CameraIntrinsics


@dataclass(frozen=True)
class CameraMount:
    """Where a camera sits on the ego and where it looks (pitch > 0 looks down)."""

    name: str
    x_m: float
    y_m: float
    z_m: float
    yaw_rad: float
    pitch_rad: float
    hfov_rad: float
    sees_ego: bool = False


CAMERAS: dict[str, CameraMount] = {
    "chase": CameraMount("chase", -7.0, 0.0, 3.4, 0.0, math.radians(13.0), math.radians(90.0), sees_ego=True),
    "front": CameraMount("front", 1.7, 0.0, 1.45, 0.0, math.radians(4.0), math.radians(90.0)),
    "left": CameraMount("left", 1.4, 0.95, 1.5, 0.5 * math.pi, math.radians(8.0), math.radians(100.0)),
    "rear": CameraMount("rear", -0.9, 0.0, 1.4, math.pi, math.radians(6.0), math.radians(100.0)),
    "right": CameraMount("right", 1.4, -0.95, 1.5, -0.5 * math.pi, math.radians(8.0), math.radians(100.0)),
}
CAMERA_NAMES: tuple[str, ...] = tuple(CAMERAS)
SURROUND_RIG: tuple[str, ...] = ("front", "left", "rear", "right")


@dataclass(frozen=True, eq=False)
class RayGrid:
    """Per-pixel ray directions (H x W float64 each) in the ego-aligned frame."""

    mount: CameraMount
    width: int
    height: int
    focal_px: float
    dx: np.ndarray
    dy: np.ndarray
    dz: np.ndarray


def intrinsics(mount: CameraMount, width: int, height: int) -> CameraIntrinsics:
    """The mount's pinhole model at this image size: square pixels, the focal length from
    its horizontal field of view, the principal point at the image centre."""
    if width < 2 or height < 2:
        raise ValueError(f"camera resolution must be at least 2x2, got {width}x{height}")
    focal = (0.5 * width) / math.tan(0.5 * mount.hfov_rad)
    return CameraIntrinsics(focal, focal, 0.5 * width - 0.5, 0.5 * height - 0.5)


_Quaternion = tuple[float, float, float, float]  # (x, y, z, w)
# the optical axes (x right, y down, z forward) in a forward-looking camera's body frame
# (x forward, y left, z up): the rotation REP 103 gives camera optical frames
_OPTICAL: _Quaternion = (-0.5, 0.5, -0.5, 0.5)


def _qmul(a: _Quaternion, b: _Quaternion) -> _Quaternion:
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz)


def optical_quaternion(mount: CameraMount) -> _Quaternion:
    """(x, y, z, w): the rotation from the ego frame (x forward, y left, z up, at the rear
    axle on the ground) to the camera's optical frame (x right, y down, z along its centre
    ray): the mount's yaw about z, its pitch down about the new y, then the optical axes.
    With (x_m, y_m, z_m) it is the static transform a stack needs for the camera's frame_id."""
    yaw = (0.0, 0.0, math.sin(0.5 * mount.yaw_rad), math.cos(0.5 * mount.yaw_rad))
    pitch = (0.0, math.sin(0.5 * mount.pitch_rad), 0.0, math.cos(0.5 * mount.pitch_rad))
    return _qmul(_qmul(yaw, pitch), _OPTICAL)


def extrinsics(mount: CameraMount) -> CameraExtrinsics:
    """The camera's optical frame in the ego frame: its mount point and optical_quaternion."""
    return CameraExtrinsics(mount.x_m, mount.y_m, mount.z_m, *optical_quaternion(mount))


def static_transform_args(camera: str) -> list[str]:
    """tf2_ros static_transform_publisher's arguments for ``camera``'s frame (its images'
    frame_id) relative to the ego's, less ``--frame-id EGO_FRAME``: what the README shows
    for a stack that places the frames itself (the bridge publishes the same on /tf_static)."""
    e = extrinsics(CAMERAS[camera])
    values = {"--x": e.x_m, "--y": e.y_m, "--z": e.z_m, "--qx": e.qx, "--qy": e.qy, "--qz": e.qz, "--qw": e.qw}
    out = []
    for flag, value in values.items():
        out += [flag, f"{round(value, 10) + 0.0:.10g}"]  # + 0.0: no "-0"
    return [*out, "--child-frame-id", camera]


def ray_grid(mount: CameraMount, width: int, height: int) -> RayGrid:
    """Pinhole rays through pixel centres: (1, -xn, -yn) pitched down, then yawed."""
    focal = intrinsics(mount, width, height).fx
    xn = (np.arange(width, dtype=np.float64) + 0.5 - 0.5 * width) / focal
    yn = (np.arange(height, dtype=np.float64) + 0.5 - 0.5 * height) / focal
    left = np.broadcast_to(-xn[None, :], (height, width))
    up = np.broadcast_to(-yn[:, None], (height, width))
    cp, sp = math.cos(mount.pitch_rad), math.sin(mount.pitch_rad)
    fwd = cp + up * sp
    dz = up * cp - sp
    cy, sy = math.cos(mount.yaw_rad), math.sin(mount.yaw_rad)
    dx = fwd * cy - left * sy
    dy = fwd * sy + left * cy
    return RayGrid(
        mount,
        width,
        height,
        focal,
        np.ascontiguousarray(dx),
        np.ascontiguousarray(dy),
        np.ascontiguousarray(dz),
    )


def camera_coords(
    grid: RayGrid,
    cam_x_m: float,
    cam_y_m: float,
    cam_z_m: float,
    ego_yaw_rad: float,
    points: list[tuple[float, float, float]],
) -> list[tuple[float, float, float]]:
    """World points in the camera frame: (forward, left, up) after mount yaw and pitch."""
    m = grid.mount
    yaw = ego_yaw_rad + m.yaw_rad
    c, s = math.cos(yaw), math.sin(yaw)
    cp, sp = math.cos(m.pitch_rad), math.sin(m.pitch_rad)
    out = []
    for px, py, pz in points:
        dx, dy, dz = px - cam_x_m, py - cam_y_m, pz - cam_z_m
        xb = c * dx + s * dy
        out.append((xb * cp - dz * sp, -s * dx + c * dy, xb * sp + dz * cp))
    return out


def pixel_of(grid: RayGrid, f: float, left: float, up: float) -> tuple[float, float]:
    """(col, row) of a camera-frame point with f > 0."""
    return (
        0.5 * grid.width - grid.focal_px * left / f - 0.5,
        0.5 * grid.height - grid.focal_px * up / f - 0.5,
    )
