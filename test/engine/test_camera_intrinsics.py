"""A camera's intrinsics (what the bridge's CameraInfo says) are the pinhole the renderer
draws with: each pixel's ray, taken back into the camera's optical frame and projected
with them, lands on that pixel's own (col, row), for every camera of the rig."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simforge_ros.backends.embedded import EmbeddedBackend
from simforge_ros.engine import CAMERA_NAMES, CAMERAS, extrinsics, intrinsics, optical_quaternion
from simforge_ros.engine.cameras import ray_grid, static_transform_args


@pytest.mark.parametrize("camera", CAMERA_NAMES)
@pytest.mark.parametrize(("width", "height"), [(320, 180), (64, 48), (7, 5)])
def test_intrinsics_project_each_pixels_ray_onto_that_pixel(camera, width, height):
    k = intrinsics(CAMERAS[camera], width, height)
    # the mount's yaw and pitch are what its TF would carry; level, a ray is (fwd, left, up),
    # which in the optical frame is (x, y, z) = (-left, -up, fwd)
    grid = ray_grid(replace(CAMERAS[camera], yaw_rad=0.0, pitch_rad=0.0), width, height)
    cols = k.fx * (-grid.dy / grid.dx) + k.cx
    rows = k.fy * (-grid.dz / grid.dx) + k.cy
    np.testing.assert_allclose(cols, np.broadcast_to(np.arange(width, dtype=float), (height, width)), atol=1e-9)
    np.testing.assert_allclose(rows, np.broadcast_to(np.arange(height, dtype=float)[:, None], (height, width)),
                               atol=1e-9)


def test_the_wide_cameras_have_a_shorter_focal_length_and_the_backend_says_so():
    backend = EmbeddedBackend("right_turn", 10_000, 320, 180)
    front, left = backend.intrinsics("front"), backend.intrinsics("left")
    assert front.fx == front.fy == pytest.approx(160.0)  # 90 degrees
    assert left.fx == pytest.approx(160.0 / np.tan(np.radians(50.0)))  # 100 degrees: 134.3
    assert (front.cx, front.cy) == (left.cx, left.cy) == (159.5, 89.5)
    assert {c: backend.intrinsics(c) for c in CAMERA_NAMES} == {
        c: intrinsics(CAMERAS[c], 320, 180) for c in CAMERA_NAMES}
    assert {c: backend.extrinsics(c) for c in CAMERA_NAMES} == {c: extrinsics(CAMERAS[c]) for c in CAMERA_NAMES}


def _rotate(q: tuple[float, float, float, float], v: np.ndarray) -> np.ndarray:
    """v (..., 3) rotated by the unit quaternion q = (x, y, z, w)."""
    u, w = np.array(q[:3]), q[3]
    return v + 2.0 * np.cross(u, np.cross(u, v) + w * v)


@pytest.mark.parametrize("camera", CAMERA_NAMES)
def test_the_mount_transform_and_intrinsics_give_the_renderers_ray_of_every_pixel(camera):
    """A stack that puts the camera's frame_id at (x_m, y_m, z_m) with optical_quaternion
    on the ego (the README's table) and unprojects a pixel with the CameraInfo gets the ray
    the renderer drew that pixel along: the extrinsics, yaw and pitch included."""
    mount, (width, height) = CAMERAS[camera], (40, 30)
    q = optical_quaternion(mount)
    assert sum(c * c for c in q) == pytest.approx(1.0)
    k = intrinsics(mount, width, height)
    cols, rows = np.meshgrid(np.arange(width, dtype=float), np.arange(height, dtype=float))
    optical = np.stack([(cols - k.cx) / k.fx, (rows - k.cy) / k.fy, np.ones_like(cols)], axis=-1)
    ego = _rotate(q, optical)
    grid = ray_grid(mount, width, height)
    drawn = np.stack([grid.dx, grid.dy, grid.dz], axis=-1)
    ego /= np.linalg.norm(ego, axis=-1, keepdims=True)
    drawn /= np.linalg.norm(drawn, axis=-1, keepdims=True)
    np.testing.assert_allclose(ego, drawn, atol=1e-12)


@pytest.mark.parametrize("camera", CAMERA_NAMES)
def test_the_static_transform_the_bridge_and_readme_give_is_the_mount(camera):
    """static_transform_args (the README's tf2_ros static_transform_publisher line), read
    back as that tool reads them, give the mount and the rotation above (extrinsics, what
    the bridge publishes on /tf_static, is built from the same two)."""
    args = static_transform_args(camera)
    assert args[-2:] == ["--child-frame-id", camera] and "--frame-id" not in args
    values = dict(zip(args[:-2:2], map(float, args[1:-2:2]), strict=True))
    assert list(values) == ["--x", "--y", "--z", "--qx", "--qy", "--qz", "--qw"]
    mount = CAMERAS[camera]
    assert (values["--x"], values["--y"], values["--z"]) == (mount.x_m, mount.y_m, mount.z_m)
    q = (values["--qx"], values["--qy"], values["--qz"], values["--qw"])
    assert q == pytest.approx(optical_quaternion(mount), abs=1e-10)
    assert "-0" not in args  # a zero is written 0
