"""The scenario model: what a validated scenario file becomes.

Frozen values only. Parsing and validation live in ``schema``; finding files in ``catalog``.
Ego poses are rear-axle poses (the kinematic bicycle reference); actor poses are box centres.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simforge_ros.core.errors import Printed, cut_got
from simforge_ros.core.values import Pose2D

_MISSING_TEXT = "missing"


class ScenarioError(ValueError):
    """A scenario file that does not follow the schema, naming the file and the field path."""

    def __init__(self, path: str | Path, field: str, expected: str, got: Any) -> None:
        self.path = str(path)
        self.field = field
        self.expected = expected
        self.got = got
        super().__init__(f"{self.path}: {field}: expected {expected}, got {_shown(got)}")


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxstring, _REPR.maxother = 3, 4, 6, 120, 120


def _shown(got: Any) -> str:
    """``got`` as an error shows it, at most about 200 characters: a whole section written
    as the wrong form (a 3.5 KB ``actors`` mapping) or a YAML alias chain (8 MB of text,
    2.4 GB to build one level on) was echoed whole."""
    if isinstance(got, (Missing, Printed)):  # another problem's text stays whole
        return repr(got)
    if isinstance(got, int) and not isinstance(got, bool) and got.bit_length() > 1000:
        return f"an integer of about {int(got.bit_length() * 0.30103) + 1} digits"  # repr stops at 4300
    try:
        text = _REPR.repr(got)
    except ValueError:  # an integer of over 4300 digits inside it
        text = f"a {type(got).__name__} holding an integer of over 4300 digits"
    return cut_got(text)


class Missing:
    """Marks a required key that is absent (printed as 'missing' in errors)."""

    def __repr__(self) -> str:
        return _MISSING_TEXT

    def __str__(self) -> str:
        return _MISSING_TEXT


MISSING = Missing()


@dataclass(frozen=True)
class TimedPose:
    """A recorded pose at an exact integer time."""

    t_us: int
    x_m: float
    y_m: float
    yaw_rad: float


@dataclass(frozen=True)
class VehicleParams:
    """Ego body and actuator limits; the pose is the rear axle centre."""

    wheelbase_m: float = 2.8
    length_m: float = 4.6
    width_m: float = 1.9
    height_m: float = 1.5
    rear_overhang_m: float = 0.9
    max_steer_rad: float = 0.6
    max_steer_rate_radps: float = 0.8
    max_accel_mps2: float = 3.0
    max_brake_mps2: float = 7.0
    color: tuple[int, int, int] = (200, 40, 40)

    @property
    def box_offset_m(self) -> float:
        """Distance from the rear axle forward to the box centre."""
        return 0.5 * self.length_m - self.rear_overhang_m


@dataclass(frozen=True)
class RouteWaypoint:
    """A route point with heading along travel and the target speed there.

    ``hold_until_us``: the target speed counts as 0 until this time (how a blind route follower
    waits for a van, a gap or a green light).
    """

    x_m: float
    y_m: float
    yaw_rad: float
    speed_mps: float
    hold_until_us: int = 0


@dataclass(frozen=True)
class EgoSpec:
    """The ego's start, body and authored route."""

    start: Pose2D
    start_speed_mps: float
    vehicle: VehicleParams
    route: tuple[RouteWaypoint, ...]


@dataclass(frozen=True)
class Handover:
    """Before ``t_us`` the engine replays ``path`` for the ego; from ``t_us`` the driver steers."""

    t_us: int
    path: tuple[TimedPose, ...]


@dataclass(frozen=True)
class Road:
    """A road as a centreline polyline; lanes split the width evenly."""

    id: str
    points: tuple[tuple[float, float], ...]
    width_m: float
    lanes: int = 2
    sidewalk_m: float = 2.5


@dataclass(frozen=True)
class Junction:
    """A disc of plain asphalt (no lane marks) that rounds a crossing's corners."""

    id: str
    x_m: float
    y_m: float
    radius_m: float


@dataclass(frozen=True)
class Crosswalk:
    """Zebra stripes along segment a->b (the walking direction), width_m across."""

    id: str
    a: tuple[float, float]
    b: tuple[float, float]
    width_m: float = 3.0


@dataclass(frozen=True)
class SignalPhase:
    """One timed phase of a signal cycle."""

    state: str  # red | yellow | green
    duration_us: int


@dataclass(frozen=True)
class Signal:
    """A signal head at (x, y) with a stop line; phases repeat, shifted by offset_us."""

    id: str
    x_m: float
    y_m: float
    stop_line: tuple[tuple[float, float], tuple[float, float]]
    phases: tuple[SignalPhase, ...]
    offset_us: int = 0


ACTOR_KINDS = ("vehicle", "pedestrian")


@dataclass(frozen=True)
class Actor:
    """Scripted traffic: replays ``path`` (box centre poses), never reacts."""

    id: str
    kind: str
    length_m: float
    width_m: float
    height_m: float
    color: tuple[int, int, int]
    path: tuple[TimedPose, ...]


@dataclass(frozen=True)
class Scenario:
    """A validated scenario and the bytes it came from (hashed into the world digest)."""

    name: str
    description: str
    duration_us: int
    ego: EgoSpec
    roads: tuple[Road, ...]
    junctions: tuple[Junction, ...]
    crosswalks: tuple[Crosswalk, ...]
    signals: tuple[Signal, ...]
    actors: tuple[Actor, ...]
    handover: Handover | None
    path: Path
    source_sha256: str
    source_bytes: bytes = field(repr=False, default=b"")
