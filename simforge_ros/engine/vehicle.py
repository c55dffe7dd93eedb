"""The ego's kinematic bicycle model, stepped with a fixed order of float operations.

The pose is the rear-axle centre. One tick of length dt_s does, in this order:

1. steer_target = clamp(steer_cmd, -max_steer, +max_steer)
2. steer += clamp(steer_target - steer, -max_steer_rate * dt_s, +max_steer_rate * dt_s)
3. accel = clamp(accel_cmd, -max_brake, +max_accel)
4. speed_new = speed + accel * dt_s; if speed_new < 0: speed_new = 0, accel = 0 if speed was 0
5. ds = (speed + speed_new) * 0.5 * dt_s            (trapezoid on speed)
6. dyaw = ds * tan(steer) / wheelbase
7. yaw_mid = yaw + 0.5 * dyaw                        (midpoint heading)
8. x += ds * cos(yaw_mid); y += ds * sin(yaw_mid); yaw = wrap(yaw + dyaw)

Each line is plain IEEE-754 double arithmetic on Python floats (math.sin/cos/tan from the
platform libm), so equal inputs give equal bits. The held commands are part of the state so
that a command change always reaches the world digest, even when a limit swallows it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simforge_ros.core.values import Pose2D
from simforge_ros.engine.geometry import Box, offset_pose
from simforge_ros.engine.scenario import VehicleParams


@dataclass(frozen=True)
class EgoState:
    """Full ego state: rear-axle pose, speed, actual steer and accel, held commands."""

    pose: Pose2D
    speed_mps: float
    steer_rad: float = 0.0
    accel_mps2: float = 0.0
    steer_cmd_rad: float = 0.0
    accel_cmd_mps2: float = 0.0


def bicycle_tick(
    x_m: float,
    y_m: float,
    yaw_rad: float,
    speed_mps: float,
    steer_rad: float,
    params: VehicleParams,
    steer_cmd_rad: float,
    accel_cmd_mps2: float,
    dt_s: float,
) -> tuple[float, float, float, float, float, float]:
    """step_bicycle on plain floats: (x, y, yaw, speed, steer, accel) after one tick.

    The engine's per-tick path (no EgoState/Pose2D built per tick). clamp() is written out
    (the same comparisons in the same order) to save three calls a tick.
    """
    max_steer = params.max_steer_rad
    steer_target = steer_cmd_rad
    if steer_target < -max_steer:
        steer_target = -max_steer
    elif steer_target > max_steer:
        steer_target = max_steer
    max_dsteer = params.max_steer_rate_radps * dt_s
    dsteer = steer_target - steer_rad
    if dsteer < -max_dsteer:
        dsteer = -max_dsteer
    elif dsteer > max_dsteer:
        dsteer = max_dsteer
    steer = steer_rad + dsteer
    accel = accel_cmd_mps2
    if accel < -params.max_brake_mps2:
        accel = -params.max_brake_mps2
    elif accel > params.max_accel_mps2:
        accel = params.max_accel_mps2
    speed = speed_mps + accel * dt_s
    if speed < 0.0:
        speed = 0.0
        accel = 0.0 if speed_mps == 0.0 else -speed_mps / dt_s
    ds = (speed_mps + speed) * 0.5 * dt_s
    dyaw = ds * math.tan(steer) / params.wheelbase_m
    yaw_mid = yaw_rad + 0.5 * dyaw
    return (
        x_m + ds * math.cos(yaw_mid),
        y_m + ds * math.sin(yaw_mid),
        math.remainder(yaw_rad + dyaw, math.tau),  # wrap_angle
        speed,
        steer,
        accel,
    )


def step_bicycle(
    state: EgoState, params: VehicleParams, steer_cmd_rad: float, accel_cmd_mps2: float, dt_s: float
) -> EgoState:
    """One tick of the kinematic bicycle (see the module docstring for the exact order)."""
    p = state.pose
    x, y, yaw, speed, steer, accel = bicycle_tick(
        p.x_m, p.y_m, p.yaw_rad, state.speed_mps, state.steer_rad, params, steer_cmd_rad, accel_cmd_mps2, dt_s
    )
    return EgoState(Pose2D(x, y, yaw), speed, steer, accel, steer_cmd_rad, accel_cmd_mps2)


def ego_box(state: EgoState, params: VehicleParams) -> Box:
    """The ego footprint: the box centre lies box_offset_m ahead of the rear axle."""
    centre = offset_pose(state.pose, params.box_offset_m)
    return Box(centre.x_m, centre.y_m, centre.yaw_rad, params.length_m, params.width_m)
