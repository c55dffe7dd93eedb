"""Validate a parsed scenario document and build the Scenario model.

Every refusal names the file and the field path (``actors[2].path[0].t_us``) so an author can
fix it without reading code. Times are integer microseconds; a float time is refused because
lockstep runs must compare times exactly. The schema is documented in docs/scenarios.md.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from simforge_ros.core.limits import MAX_MAGNITUDE, MAX_TIME_US
from simforge_ros.core.values import Pose2D
from simforge_ros.engine.geometry import wrap_angle
from simforge_ros.engine.scenario import (
    ACTOR_KINDS,
    MISSING,
    Actor,
    Crosswalk,
    EgoSpec,
    Handover,
    Junction,
    Road,
    RouteWaypoint,
    Scenario,
    ScenarioError,
    Signal,
    SignalPhase,
    TimedPose,
    VehicleParams,
)

MAX_LANES = 16
"""The most lanes a road may have (the renderer draws each one's marks)."""

SCHEMA_VERSION = 1
MIN_DURATION_US = 15_000_000
HEADING_TOLERANCE_RAD = 0.6
HANDOVER_START_TOLERANCE_M = 0.5
SIGNAL_STATES = ("red", "yellow", "green")
ACTOR_DEFAULTS = {  # kind -> (length_m, width_m, height_m, color)
    "vehicle": (4.5, 1.9, 1.5, (40, 90, 200)),
    "pedestrian": (0.5, 0.5, 1.75, (230, 150, 40)),
}
_ID = re.compile(r"[A-Za-z0-9_\-]+")  # whole (fullmatch): '$' let a trailing newline through
MIN_SEGMENT_M = 0.1  # consecutive points of a line: a zero-length segment has no direction
MIN_BODY_M = 0.1
"""The ego's wheelbase and box sides at least: a wheelbase of 1e-310 m (> 0) turned the
bicycle's heading to infinity at its first steer, a math domain error in the bridge."""
_BODY = ("wheelbase_m", "length_m", "width_m", "height_m")


class _Reader:
    """Field readers bound to one file, so every error carries its path."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, field: str, expected: str, got: Any) -> ScenarioError:
        return ScenarioError(self.path, field, expected, got)

    def mapping(
        self, value: Any, field: str, required: tuple[str, ...], optional: tuple[str, ...] = ()
    ) -> dict:
        if not isinstance(value, dict):
            raise self.fail(field or "<document>", "a mapping", value)
        known = required + optional
        for key in value:
            if key not in known:
                sub = f"{field}.{key}" if field else str(key)
                raise self.fail(sub, f"a known key (one of {', '.join(known)})", key)
        for key in required:
            if key not in value:
                raise self.fail(f"{field}.{key}" if field else key, "a value", MISSING)
        return value

    def seq(self, value: Any, field: str, min_len: int = 0) -> list:
        if not isinstance(value, list):
            raise self.fail(field, "a list", value)
        if len(value) < min_len:
            raise self.fail(field, f"a list of at least {min_len} items", value)
        return value

    def time_us(self, value: Any, field: str, low: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(field, "integer microseconds", value)
        if not low <= value <= MAX_TIME_US:
            raise self.fail(field, f"integer microseconds in [{low}, {MAX_TIME_US}]", value)
        return value

    def integer(self, value: Any, field: str, low: int, high: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
            raise self.fail(field, f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]",
                            value)
        return value

    def number(self, value: Any, field: str, low: float | None = None, positive: bool = False) -> float:
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or (isinstance(value, float) and not math.isfinite(value))):
            raise self.fail(field, "a finite number", value)
        if abs(value) > MAX_MAGNITUDE:  # an int of 309 digits or more has no float: compared as an int
            raise self.fail(field, f"a number within ±{MAX_MAGNITUDE:.0f}", value)
        if positive and value <= 0:
            raise self.fail(field, "a number > 0", value)
        if low is not None and value < low:
            raise self.fail(field, f"a number >= {low}", value)
        return float(value)

    def text(self, value: Any, field: str, ident: bool = False) -> str:
        if not isinstance(value, str) or (ident and not _ID.fullmatch(value)):
            raise self.fail(field, "an id of letters, digits, '_' or '-'" if ident else "a string", value)
        return value

    def xy(self, value: Any, field: str) -> tuple[float, float]:
        if not isinstance(value, list) or len(value) != 2:
            raise self.fail(field, "[x_m, y_m]", value)
        return (self.number(value[0], f"{field}[0]"), self.number(value[1], f"{field}[1]"))

    def segment(self, a: tuple[float, float], b: tuple[float, float], field: str) -> None:
        """Refuse a zero-length segment (the renderer divides by its length)."""
        if math.hypot(b[0] - a[0], b[1] - a[1]) < MIN_SEGMENT_M:
            raise self.fail(field, f"points at least {MIN_SEGMENT_M} m apart", [list(a), list(b)])

    def color(self, value: Any, field: str) -> tuple[int, int, int]:
        if not isinstance(value, list) or len(value) != 3:
            raise self.fail(field, "[r, g, b] with 0..255 integers", value)
        out = []
        for i, c in enumerate(value):
            if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c <= 255:
                raise self.fail(f"{field}[{i}]", "an integer 0..255", c)
            out.append(c)
        return (out[0], out[1], out[2])

    def timed_path(self, value: Any, field: str) -> tuple[TimedPose, ...]:
        items = self.seq(value, field, 1)
        out: list[TimedPose] = []
        for i, raw in enumerate(items):
            f = f"{field}[{i}]"
            m = self.mapping(raw, f, ("t_us", "x_m", "y_m", "yaw_rad"))
            t_us = self.time_us(m["t_us"], f"{f}.t_us")
            if out and t_us <= out[-1].t_us:
                raise self.fail(f"{f}.t_us", f"a time after {out[-1].t_us} (strictly increasing)", t_us)
            out.append(
                TimedPose(
                    t_us,
                    self.number(m["x_m"], f"{f}.x_m"),
                    self.number(m["y_m"], f"{f}.y_m"),
                    self.number(m["yaw_rad"], f"{f}.yaw_rad"),
                )
            )
        return tuple(out)


def _vehicle(r: _Reader, raw: Any) -> VehicleParams:
    names = tuple(n for n in VehicleParams.__dataclass_fields__ if n != "color")
    m = r.mapping(raw, "ego.vehicle", (), (*names, "color"))
    kwargs: dict[str, Any] = {}
    for n in names:
        if n in m:
            kwargs[n] = r.number(
                m[n],
                f"ego.vehicle.{n}",
                low=0.0 if n == "rear_overhang_m" else MIN_BODY_M if n in _BODY else None,
                positive=n != "rear_overhang_m",
            )
    if "color" in m:
        kwargs["color"] = r.color(m["color"], "ego.vehicle.color")
    params = VehicleParams(**kwargs)
    if params.max_steer_rad >= math.pi / 2:  # tan() turns over past it: a left command would turn right
        raise r.fail("ego.vehicle.max_steer_rad", "a number of radians < pi/2 (1.5708): 35 is degrees",
                     params.max_steer_rad)
    if params.rear_overhang_m >= params.length_m:
        raise r.fail(
            "ego.vehicle.rear_overhang_m", f"less than length_m {params.length_m}", params.rear_overhang_m
        )
    return params


def _route(r: _Reader, raw: Any) -> tuple[RouteWaypoint, ...]:
    items = r.seq(raw, "ego.route", 2)
    out: list[RouteWaypoint] = []
    for i, w in enumerate(items):
        f = f"ego.route[{i}]"
        m = r.mapping(w, f, ("x_m", "y_m", "yaw_rad", "speed_mps"), ("hold_until_us",))
        out.append(
            RouteWaypoint(
                r.number(m["x_m"], f"{f}.x_m"),
                r.number(m["y_m"], f"{f}.y_m"),
                r.number(m["yaw_rad"], f"{f}.yaw_rad"),
                r.number(m["speed_mps"], f"{f}.speed_mps", low=0.0),
                r.time_us(m.get("hold_until_us", 0), f"{f}.hold_until_us"),
            )
        )
    for i, w in enumerate(out):
        a, b = (w, out[i + 1]) if i + 1 < len(out) else (out[i - 1], w)
        dx, dy = b.x_m - a.x_m, b.y_m - a.y_m
        if math.hypot(dx, dy) < MIN_SEGMENT_M:
            raise r.fail(f"ego.route[{i}]", f"waypoints at least {MIN_SEGMENT_M} m apart", (w.x_m, w.y_m))
        off = abs(wrap_angle(w.yaw_rad - math.atan2(dy, dx)))
        if off > HEADING_TOLERANCE_RAD:
            raise r.fail(
                f"ego.route[{i}].yaw_rad",
                f"a heading within {HEADING_TOLERANCE_RAD} rad of the "
                f"direction of travel {math.atan2(dy, dx):.3f}",
                w.yaw_rad,
            )
    return tuple(out)


def _ego(r: _Reader, raw: Any) -> EgoSpec:
    m = r.mapping(raw, "ego", ("start", "route"), ("vehicle",))
    s = r.mapping(m["start"], "ego.start", ("x_m", "y_m", "yaw_rad", "speed_mps"))
    start = Pose2D(
        r.number(s["x_m"], "ego.start.x_m"),
        r.number(s["y_m"], "ego.start.y_m"),
        r.number(s["yaw_rad"], "ego.start.yaw_rad"),
    )
    speed = r.number(s["speed_mps"], "ego.start.speed_mps", low=0.0)
    vehicle = _vehicle(r, m["vehicle"]) if "vehicle" in m else VehicleParams()
    return EgoSpec(start, speed, vehicle, _route(r, m["route"]))


def _roads(r: _Reader, raw: Any) -> tuple[Road, ...]:
    out = []
    for i, item in enumerate(r.seq(raw, "roads")):
        f = f"roads[{i}]"
        m = r.mapping(item, f, ("id", "points", "width_m"), ("lanes", "sidewalk_m"))
        pts = tuple(r.xy(p, f"{f}.points[{j}]") for j, p in enumerate(r.seq(m["points"], f"{f}.points", 2)))
        for j in range(1, len(pts)):
            r.segment(pts[j - 1], pts[j], f"{f}.points[{j}]")
        out.append(
            Road(
                r.text(m["id"], f"{f}.id", ident=True),
                pts,
                r.number(m["width_m"], f"{f}.width_m", positive=True),
                # each lane's marks are drawn per pixel row: 10^9 lanes hung run and render
                r.integer(m.get("lanes", 2), f"{f}.lanes", 1, MAX_LANES),
                r.number(m.get("sidewalk_m", 2.5), f"{f}.sidewalk_m", low=0.0),
            )
        )
    return tuple(out)


def _junctions(r: _Reader, raw: Any) -> tuple[Junction, ...]:
    out = []
    for i, item in enumerate(r.seq(raw, "junctions")):
        f = f"junctions[{i}]"
        m = r.mapping(item, f, ("id", "x_m", "y_m", "radius_m"))
        out.append(
            Junction(
                r.text(m["id"], f"{f}.id", ident=True),
                r.number(m["x_m"], f"{f}.x_m"),
                r.number(m["y_m"], f"{f}.y_m"),
                r.number(m["radius_m"], f"{f}.radius_m", positive=True),
            )
        )
    return tuple(out)


def _crosswalks(r: _Reader, raw: Any) -> tuple[Crosswalk, ...]:
    out = []
    for i, item in enumerate(r.seq(raw, "crosswalks")):
        f = f"crosswalks[{i}]"
        m = r.mapping(item, f, ("id", "a", "b"), ("width_m",))
        r.segment(r.xy(m["a"], f"{f}.a"), r.xy(m["b"], f"{f}.b"), f"{f}.b")
        out.append(
            Crosswalk(
                r.text(m["id"], f"{f}.id", ident=True),
                r.xy(m["a"], f"{f}.a"),
                r.xy(m["b"], f"{f}.b"),
                r.number(m.get("width_m", 3.0), f"{f}.width_m", positive=True),
            )
        )
    return tuple(out)


def _signals(r: _Reader, raw: Any) -> tuple[Signal, ...]:
    out = []
    for i, item in enumerate(r.seq(raw, "signals")):
        f = f"signals[{i}]"
        m = r.mapping(item, f, ("id", "x_m", "y_m", "stop_line", "phases"), ("offset_us",))
        line = r.seq(m["stop_line"], f"{f}.stop_line", 2)
        if len(line) != 2:
            raise r.fail(f"{f}.stop_line", "two points [[x, y], [x, y]]", m["stop_line"])
        r.segment(r.xy(line[0], f"{f}.stop_line[0]"), r.xy(line[1], f"{f}.stop_line[1]"), f"{f}.stop_line")
        phases = []
        for j, p in enumerate(r.seq(m["phases"], f"{f}.phases", 1)):
            pf = f"{f}.phases[{j}]"
            pm = r.mapping(p, pf, ("state", "duration_us"))
            if pm["state"] not in SIGNAL_STATES:
                raise r.fail(f"{pf}.state", f"one of {', '.join(SIGNAL_STATES)}", pm["state"])
            phases.append(SignalPhase(pm["state"], r.time_us(pm["duration_us"], f"{pf}.duration_us", low=1)))
        out.append(
            Signal(
                r.text(m["id"], f"{f}.id", ident=True),
                r.number(m["x_m"], f"{f}.x_m"),
                r.number(m["y_m"], f"{f}.y_m"),
                (r.xy(line[0], f"{f}.stop_line[0]"), r.xy(line[1], f"{f}.stop_line[1]")),
                tuple(phases),
                r.time_us(m.get("offset_us", 0), f"{f}.offset_us"),
            )
        )
    return tuple(out)


def _actors(r: _Reader, raw: Any) -> tuple[Actor, ...]:
    out = []
    for i, item in enumerate(r.seq(raw, "actors")):
        f = f"actors[{i}]"
        m = r.mapping(item, f, ("id", "kind", "path"), ("length_m", "width_m", "height_m", "color"))
        kind = m["kind"]
        if kind not in ACTOR_KINDS:
            raise r.fail(f"{f}.kind", f"one of {', '.join(ACTOR_KINDS)}", kind)
        length, width, height, color = ACTOR_DEFAULTS[kind]
        out.append(
            Actor(
                r.text(m["id"], f"{f}.id", ident=True),
                kind,
                r.number(m.get("length_m", length), f"{f}.length_m", positive=True),
                r.number(m.get("width_m", width), f"{f}.width_m", positive=True),
                r.number(m.get("height_m", height), f"{f}.height_m", positive=True),
                r.color(m["color"], f"{f}.color") if "color" in m else color,
                r.timed_path(m["path"], f"{f}.path"),
            )
        )
    return tuple(out)


def _handover(r: _Reader, raw: Any, ego: EgoSpec, duration_us: int) -> Handover:
    m = r.mapping(raw, "handover", ("t_us", "path"))
    t_us = r.time_us(m["t_us"], "handover.t_us", low=1)
    if t_us >= duration_us:
        raise r.fail("handover.t_us", f"a time before duration_us {duration_us}", t_us)
    path = r.timed_path(m["path"], "handover.path")
    if path[0].t_us != 0:
        raise r.fail("handover.path[0].t_us", "0 (the path starts with the run)", path[0].t_us)
    if path[-1].t_us < t_us:
        raise r.fail(f"handover.path[{len(path) - 1}].t_us", f"a time >= handover.t_us {t_us}", path[-1].t_us)
    if math.hypot(path[0].x_m - ego.start.x_m, path[0].y_m - ego.start.y_m) > HANDOVER_START_TOLERANCE_M:
        raise r.fail(
            "handover.path[0]",
            f"within {HANDOVER_START_TOLERANCE_M} m of ego.start",
            (path[0].x_m, path[0].y_m),
        )
    for i in range(1, len(path)):
        # the replayed ego moves at each segment's speed, and is released at the speed of
        # the one leading into handover.t_us: a point 1e6 m on within 1 us released it at
        # 1e12 m/s, and the run counted. Held to the bound of every speed a file gives.
        a, b = path[i - 1], path[i]
        speed = math.hypot(b.x_m - a.x_m, b.y_m - a.y_m) / ((b.t_us - a.t_us) / 1e6)
        if speed > MAX_MAGNITUDE:
            raise r.fail(f"handover.path[{i}]", f"a pose reached from the one before at most {MAX_MAGNITUDE:.0f} m/s "
                                                f"(this one: {speed:.6g} m/s)", (b.x_m, b.y_m))
    return Handover(t_us, path)


def _unique(r: _Reader, items: tuple, field: str, reserved: tuple[str, ...] = ()) -> None:
    seen: set[str] = set(reserved)
    for i, item in enumerate(items):
        if item.id in seen:
            raise r.fail(
                f"{field}[{i}].id",
                "an id not used before" + (" (ego is reserved)" if reserved else ""),
                item.id,
            )
        seen.add(item.id)


def build_scenario(doc: Any, path: Path, source: bytes, source_sha256: str) -> Scenario:
    """The Scenario for a parsed YAML document, or ScenarioError naming the first bad field."""
    r = _Reader(path)
    m = r.mapping(
        doc,
        "",
        ("name", "duration_us", "ego"),
        ("schema", "description", "roads", "junctions", "crosswalks", "signals", "actors", "handover"),
    )
    version = m.get("schema", SCHEMA_VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or version != SCHEMA_VERSION:
        raise r.fail("schema", f"{SCHEMA_VERSION}", m["schema"])
    duration_us = r.time_us(m["duration_us"], "duration_us", low=MIN_DURATION_US)
    ego = _ego(r, m["ego"])
    actors = _actors(r, m.get("actors", []))
    signals = _signals(r, m.get("signals", []))
    roads = _roads(r, m.get("roads", []))
    junctions = _junctions(r, m.get("junctions", []))
    crosswalks = _crosswalks(r, m.get("crosswalks", []))
    _unique(r, actors, "actors", reserved=("ego",))
    _unique(r, signals, "signals")
    # roads, junctions and crosswalks are drawn, not named in any message: an id names a
    # feature to whoever reads the file and its errors, so two of one list may not share one
    _unique(r, roads, "roads")
    _unique(r, junctions, "junctions")
    _unique(r, crosswalks, "crosswalks")
    return Scenario(
        name=r.text(m["name"], "name", ident=True),
        description=r.text(m.get("description", ""), "description"),
        duration_us=duration_us,
        ego=ego,
        roads=roads,
        junctions=junctions,
        crosswalks=crosswalks,
        signals=signals,
        actors=actors,
        handover=_handover(r, m["handover"], ego, duration_us) if "handover" in m else None,
        path=path,
        source_sha256=source_sha256,
        source_bytes=source,
    )
