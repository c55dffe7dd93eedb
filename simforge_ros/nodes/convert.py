"""Values <-> simforge_ros messages: the only place that knows both shapes."""

from __future__ import annotations

import math
from collections.abc import Iterable

from geometry_msgs.msg import TransformStamped
from nav_msgs.msg import Odometry
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import Marker, MarkerArray

from simforge_ros.core.lockstep import TimingRecord
from simforge_ros.core.units import clock_stamp
from simforge_ros.core.values import (
    Action,
    CameraExtrinsics,
    ContactEvent,
    FrameStamp,
    GroundTruth,
    Pose2D,
    TrajectoryPoint,
    VehicleState,
)
from simforge_ros.engine.render import SIGNAL_HEAD_M, SIGNAL_RGB
from simforge_ros.msg import ActorState as ActorMsg
from simforge_ros.msg import ContactEvent as ContactMsg
from simforge_ros.msg import DriverAction as ActionMsg
from simforge_ros.msg import FrameInfo as FrameMsg
from simforge_ros.msg import GroundTruth as TruthMsg
from simforge_ros.msg import Pose2D as PoseMsg
from simforge_ros.msg import SignalState as SignalMsg
from simforge_ros.msg import StepTiming as TimingMsg
from simforge_ros.msg import TrajectoryPoint as PointMsg
from simforge_ros.msg import VehicleState as StateMsg


def pose_msg(pose: Pose2D, msg: PoseMsg | None = None) -> PoseMsg:
    msg = msg if msg is not None else PoseMsg()
    msg.x_m, msg.y_m, msg.yaw_rad = float(pose.x_m), float(pose.y_m), float(pose.yaw_rad)
    return msg


def pose_value(msg: PoseMsg) -> Pose2D:
    return Pose2D(msg.x_m, msg.y_m, msg.yaw_rad)


def state_msg(state: VehicleState, msg: StateMsg | None = None) -> StateMsg:
    msg = msg if msg is not None else StateMsg()
    msg.step, msg.t_us = state.step, state.t_us
    pose_msg(state.pose, msg.pose)
    msg.speed_mps = float(state.speed_mps)
    msg.steer_rad = float(state.steer_rad)
    msg.accel_mps2 = float(state.accel_mps2)
    return msg


def state_value(msg: StateMsg) -> VehicleState:
    return VehicleState(msg.step, msg.t_us, pose_value(msg.pose), msg.speed_mps, msg.steer_rad, msg.accel_mps2)


def frame_msgs(frames: Iterable[FrameStamp]) -> list[FrameMsg]:
    out = []
    for frame in frames:
        msg = FrameMsg()
        msg.camera, msg.t_us = frame.camera, frame.t_us
        pose_msg(frame.pose, msg.pose)
        out.append(msg)
    return out


def frame_values(msgs: Iterable[FrameMsg]) -> tuple[FrameStamp, ...]:
    return tuple(FrameStamp(m.camera, m.t_us, pose_value(m.pose)) for m in msgs)


def action_msg(action: Action, msg: ActionMsg | None = None) -> ActionMsg:
    msg = msg if msg is not None else ActionMsg()
    msg.step, msg.decided_step, msg.t_us = action.step, action.decided_step, action.t_us
    msg.steer_rad, msg.accel_mps2 = float(action.steer_rad), float(action.accel_mps2)
    msg.has_plan, msg.plan_step = bool(action.has_plan), int(action.plan_step)
    pose_msg(action.anchor, msg.anchor)
    points = []
    for p in action.trajectory:
        point = PointMsg()
        point.dt_us, point.x_m, point.y_m = int(p.dt_us), float(p.x_m), float(p.y_m)
        points.append(point)
    msg.trajectory = points
    return msg


def action_value(msg: ActionMsg) -> Action:
    return Action(
        step=msg.step, decided_step=msg.decided_step, t_us=msg.t_us,
        steer_rad=msg.steer_rad, accel_mps2=msg.accel_mps2, has_plan=msg.has_plan,
        plan_step=msg.plan_step, anchor=pose_value(msg.anchor),
        trajectory=tuple(TrajectoryPoint(p.dt_us, p.x_m, p.y_m) for p in msg.trajectory),
    )


def timing_msg(timing: TimingRecord, msg: TimingMsg | None = None) -> TimingMsg:
    msg = msg if msg is not None else TimingMsg()
    msg.step, msg.t_us, msg.engine_t_us = timing.step, timing.t_us, timing.engine_t_us
    msg.decision_us, msg.tick_us = timing.decision_us, timing.tick_us
    msg.ticks_per_step, msg.latency_steps = timing.ticks_per_step, timing.latency_steps
    msg.world_digest = timing.world_digest
    msg.frames = frame_msgs(timing.frames)
    msg.wall_bridge_ns, msg.wall_driver_ns = timing.wall_bridge_ns, timing.wall_driver_ns
    msg.wall_step_ns = timing.wall_step_ns
    return msg


def contact_msgs(contacts: Iterable[ContactEvent]) -> list[ContactMsg]:
    out = []
    for c in contacts:
        msg = ContactMsg()
        msg.tick, msg.t_us, msg.actor_a, msg.actor_b = c.tick, c.t_us, c.actor_a, c.actor_b
        msg.harness_fault = bool(c.harness_fault)
        out.append(msg)
    return out


def contact_values(msgs: Iterable[ContactMsg]) -> tuple[ContactEvent, ...]:
    return tuple(ContactEvent(m.tick, m.t_us, m.actor_a, m.actor_b, m.harness_fault) for m in msgs)


def odometry_msg(state: VehicleState, yaw_rate_radps: float, map_frame: str, base_frame: str,
                 msg: Odometry | None = None) -> Odometry:
    """The ego state as nav_msgs/Odometry: stamped with its exact sim time, the rear axle's
    pose in ``map_frame`` (on the ground, turned by its yaw about z), its speed and yaw rate
    in ``base_frame``. Ground truth: every covariance is zero."""
    msg = msg or Odometry()
    msg.header.stamp.sec, msg.header.stamp.nanosec = clock_stamp(state.t_us)
    msg.header.frame_id, msg.child_frame_id = map_frame, base_frame
    pose = msg.pose.pose
    pose.position.x, pose.position.y, pose.position.z = state.pose.x_m, state.pose.y_m, 0.0
    half = 0.5 * state.pose.yaw_rad
    q = pose.orientation
    q.x, q.y, q.z, q.w = 0.0, 0.0, math.sin(half), math.cos(half)
    twist = msg.twist.twist
    twist.linear.x, twist.linear.y, twist.linear.z = state.speed_mps, 0.0, 0.0
    twist.angular.x, twist.angular.y, twist.angular.z = 0.0, 0.0, yaw_rate_radps
    return msg


def ego_transform_msg(state: VehicleState, map_frame: str, base_frame: str,
                      msg: TFMessage | None = None) -> TFMessage:
    """``map_frame`` -> ``base_frame`` at the state's exact sim time: the rear axle's pose on
    the ground, turned by its yaw about z (the pose odometry_msg carries), for /tf."""
    msg = msg or TFMessage(transforms=[TransformStamped()])
    t = msg.transforms[0]
    t.header.stamp.sec, t.header.stamp.nanosec = clock_stamp(state.t_us)
    t.header.frame_id, t.child_frame_id = map_frame, base_frame
    t.transform.translation.x, t.transform.translation.y, t.transform.translation.z = (
        state.pose.x_m, state.pose.y_m, 0.0)
    half = 0.5 * state.pose.yaw_rad
    q = t.transform.rotation
    q.x, q.y, q.z, q.w = 0.0, 0.0, math.sin(half), math.cos(half)
    return msg


def camera_transforms_msg(cameras: dict[str, CameraExtrinsics], base_frame: str) -> TFMessage:
    """``base_frame`` -> each camera's frame (its images' frame_id), for /tf_static: stamped
    at the run's origin (sim time 0; tf2 holds a static transform for all time)."""
    transforms = []
    for camera, e in cameras.items():
        t = TransformStamped()
        t.header.frame_id, t.child_frame_id = base_frame, camera
        t.transform.translation.x, t.transform.translation.y, t.transform.translation.z = e.x_m, e.y_m, e.z_m
        q = t.transform.rotation
        q.x, q.y, q.z, q.w = e.qx, e.qy, e.qz, e.qw
        transforms.append(t)
    return TFMessage(transforms=transforms)


def ground_truth_msg(step: int, truth: GroundTruth) -> TruthMsg:
    """Every actor and signal at the step's exact time, for /simforge/ground_truth."""
    msg = TruthMsg()
    msg.step, msg.t_us = step, truth.t_us
    actors = []
    for a in truth.actors:
        m = ActorMsg()
        m.id, m.kind, m.pose = a.id, a.kind, pose_msg(a.pose)
        m.vx_mps, m.vy_mps = float(a.vx_mps), float(a.vy_mps)
        m.length_m, m.width_m, m.height_m = float(a.length_m), float(a.width_m), float(a.height_m)
        actors.append(m)
    signals = []
    for s in truth.signals:
        head = SignalMsg()
        head.id, head.state, head.x_m, head.y_m = s.id, s.state, float(s.x_m), float(s.y_m)
        signals.append(head)
    msg.actors, msg.signals = actors, signals
    return msg


def markers_msg(truth: GroundTruth, map_frame: str) -> MarkerArray:
    """The actors as boxes (in the colours the cameras draw them) and the signals as spheres
    in the colour they show, in ``map_frame`` at the truth's exact time, for RViz or
    Foxglove: namespaces ``actors`` and ``signals``, ids the scenario's order (each step
    replaces the last), never expiring."""
    sec, nanosec = clock_stamp(truth.t_us)
    markers = []
    items = [("actors", k, Marker.CUBE, a.pose.x_m, a.pose.y_m, 0.5 * a.height_m, a.pose.yaw_rad,
              (a.length_m, a.width_m, a.height_m), a.color) for k, a in enumerate(truth.actors)]
    # a signal's marker: a sphere as wide as its head, at the head's centre (it stood 0.5 m
    # low, on the pole the cameras draw below the light)
    bottom, top, width = SIGNAL_HEAD_M
    items += [("signals", k, Marker.SPHERE, s.x_m, s.y_m, 0.5 * (bottom + top), 0.0, (width, width, width),
               SIGNAL_RGB.get(s.state, (128, 128, 128))) for k, s in enumerate(truth.signals)]  # as drawn
    for ns, k, shape, x, y, z, yaw, scale, rgb in items:
        m = Marker()
        m.header.stamp.sec, m.header.stamp.nanosec = sec, nanosec
        m.header.frame_id = map_frame
        m.ns, m.id, m.type, m.action = ns, k, shape, Marker.ADD
        m.pose.position.x, m.pose.position.y, m.pose.position.z = float(x), float(y), float(z)
        m.pose.orientation.z, m.pose.orientation.w = math.sin(0.5 * yaw), math.cos(0.5 * yaw)
        m.scale.x, m.scale.y, m.scale.z = (float(v) for v in scale)
        m.color.r, m.color.g, m.color.b, m.color.a = (c / 255.0 for c in (*rgb, 255))
        markers.append(m)
    return MarkerArray(markers=markers)
