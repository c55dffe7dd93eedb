"""Plain values passed between the pure core, the engine, the policies and the ROS shell.

Frozen dataclasses only: no rclpy import, no wall clock. Units are in the names.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Pose2D:
    """A planar pose in the map frame."""

    x_m: float
    y_m: float
    yaw_rad: float


@dataclass(frozen=True)
class VehicleState:
    """The ego state observed at t_us of a step."""

    step: int
    t_us: int
    pose: Pose2D
    speed_mps: float
    steer_rad: float
    accel_mps2: float


@dataclass(frozen=True)
class FrameStamp:
    """A camera frame named by its exact sample time and the ego pose it was rendered for."""

    camera: str
    t_us: int
    pose: Pose2D


@dataclass(frozen=True)
class CameraIntrinsics:
    """A camera's pinhole model in ROS/OpenCV pixel coordinates (a pixel's centre at integer
    (col, row)): col = fx * x / z + cx, row = fy * y / z + cy for a point (x right, y down,
    z forward) in the camera's optical frame. What its CameraInfo says (K and P)."""

    fx: float
    fy: float
    cx: float
    cy: float


@dataclass(frozen=True)
class ActorTruth:
    """A scripted actor as the simulator holds it at one instant: its box centre's pose in
    the map frame, its velocity there (m/s, the replayed path's), its box, and the colour
    the cameras draw it in (for markers)."""

    id: str
    kind: str
    pose: Pose2D
    vx_mps: float
    vy_mps: float
    length_m: float
    width_m: float
    height_m: float
    color: tuple[int, int, int] = (128, 128, 128)


@dataclass(frozen=True)
class SignalTruth:
    """A signal head at (x, y) in the map frame and the state it shows at one instant."""

    id: str
    state: str
    x_m: float
    y_m: float


@dataclass(frozen=True)
class GroundTruth:
    """What the simulator knows of the world besides the ego at time ``t_us``: every scripted
    actor and every signal, in the scenario's order (sim_bridge.ground_truth)."""

    t_us: int
    actors: tuple[ActorTruth, ...]
    signals: tuple[SignalTruth, ...]


@dataclass(frozen=True)
class CameraExtrinsics:
    """Where a camera's optical frame (x right, y down, z along its centre ray) sits in the
    ego frame (x forward, y left, z up, the rear axle on the ground): a translation in
    metres and a unit quaternion (x, y, z, w). The static transform a stack needs to place
    the camera's images (their frame_id)."""

    x_m: float
    y_m: float
    z_m: float
    qx: float
    qy: float
    qz: float
    qw: float


@dataclass(frozen=True)
class TrajectoryPoint:
    """A waypoint in the frame of the pose where the plan was made (x forward, y left)."""

    dt_us: int
    x_m: float
    y_m: float


@dataclass(frozen=True)
class Action:
    """A driver decision: a command plus an optional plan anchored where it was planned.

    ``step`` is the step the action was decided at (or, once applied, the step it is applied
    at); ``decided_step`` always names the step it was decided at.
    """

    step: int
    decided_step: int
    t_us: int
    steer_rad: float
    accel_mps2: float
    has_plan: bool = False
    plan_step: int = 0
    anchor: Pose2D = Pose2D(0.0, 0.0, 0.0)
    trajectory: tuple[TrajectoryPoint, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ContactEvent:
    """Start of a contact between actor_a and actor_b at an engine tick. harness_fault:
    scripted traffic moved into a stationary or slower ego; kept out of every rate."""

    tick: int
    t_us: int
    actor_a: str
    actor_b: str
    harness_fault: bool


def neutral_action(step: int = 0, t_us: int = 0) -> Action:
    """The action applied before any decision has come through the latency buffer."""
    return Action(step=step, decided_step=step, t_us=t_us, steer_rad=0.0, accel_mps2=0.0)
