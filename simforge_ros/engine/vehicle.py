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
from simforge_ros.engine.geometry import Box, clamp, offset_pose, wrap_angle
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


def step_bicycle(
    state: EgoState, params: VehicleParams, steer_cmd_rad: float, accel_cmd_mps2: float, dt_s: float
) -> EgoState:
    """One tick of the kinematic bicycle (see the module docstring for the exact order)."""
    steer_target = clamp(steer_cmd_rad, -params.max_steer_rad, params.max_steer_rad)
    max_dsteer = params.max_steer_rate_radps * dt_s
    steer = state.steer_rad + clamp(steer_target - state.steer_rad, -max_dsteer, max_dsteer)
    accel = clamp(accel_cmd_mps2, -params.max_brake_mps2, params.max_accel_mps2)
    speed = state.speed_mps + accel * dt_s
    if speed < 0.0:
        speed = 0.0
        accel = 0.0 if state.speed_mps == 0.0 else -state.speed_mps / dt_s
    ds = (state.speed_mps + speed) * 0.5 * dt_s
    dyaw = ds * math.tan(steer) / params.wheelbase_m
    yaw_mid = state.pose.yaw_rad + 0.5 * dyaw
    pose = Pose2D(
        state.pose.x_m + ds * math.cos(yaw_mid),
        state.pose.y_m + ds * math.sin(yaw_mid),
        wrap_angle(state.pose.yaw_rad + dyaw),
    )
    return EgoState(pose, speed, steer, accel, steer_cmd_rad, accel_cmd_mps2)


def ego_box(state: EgoState, params: VehicleParams) -> Box:
    """The ego footprint: the box centre lies box_offset_m ahead of the rear axle."""
    centre = offset_pose(state.pose, params.box_offset_m)
    return Box(centre.x_m, centre.y_m, centre.yaw_rad, params.length_m, params.width_m)
