"""The lockstep world: ego bicycle, replayed traffic, timed signals, contacts, digest, cameras.

Time is always ``tick * tick_us`` (integers), never an accumulated float. The engine keeps
only its current state: it renders and reports the present tick and nothing else.

Handover: while t_us <= handover.t_us the ego replays its recorded path (the commands given
to advance() are held in the state, and so reach the digest, but do not move the ego). The
first tick that ends after handover.t_us integrates the bicycle from the last replayed state.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simforge_ros.core.limits import IMAGE_SIDE
from simforge_ros.core.timing_contract import DEFAULT_TICK_US
from simforge_ros.core.values import ActorTruth, FrameStamp, GroundTruth, Pose2D, SignalTruth, VehicleState
from simforge_ros.engine.cameras import CAMERA_NAMES, CAMERAS
from simforge_ros.engine.contacts import EGO_ID, Body, ContactEvent, ContactTracker
from simforge_ros.engine.digest import root_digest, state_struct
from simforge_ros.engine.geometry import Box, offset_pose, wrap_angle
from simforge_ros.engine.paths import PathReplay, replayed_motion
from simforge_ros.engine.render import RenderBox, Renderer, pedestrian_boxes, signal_boxes, vehicle_boxes
from simforge_ros.engine.scenario import Scenario
from simforge_ros.engine.signals import SignalCodes, signal_state
from simforge_ros.engine.vehicle import EgoState, bicycle_tick, ego_box

ENGINE_VERSION = "simforge-engine/1.0.0"


@functools.cache
def code_sha256() -> str:
    """SHA-256 of the engine's own sources (every module of this package, by name and bytes):
    the manifest's ``digests.engine``. ENGINE_VERSION is a name a person keeps; an engine
    changed under it (an acceleration scaled by 1.01) made runs part at step 23 with no
    setup difference named."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


_flatten = itertools.chain.from_iterable
_sha256 = hashlib.sha256


def _squared(v: float) -> float:
    return v * v


class StaleRenderError(ValueError):
    """A render was asked for a time other than the engine's current time."""


@dataclass(frozen=True, eq=False)
class Frame:
    """A rendered camera image, named by its exact time and the (rig-offset) pose it was rendered for."""

    camera: str
    t_us: int
    pose: Pose2D
    pixels: np.ndarray  # H x W x 3 uint8 RGB, read-only

    @property
    def stamp(self) -> FrameStamp:
        return FrameStamp(self.camera, self.t_us, self.pose)


@dataclass(frozen=True)
class FrameJob:
    """A frame named and posed when it was due, with the scene of that time; drawn on demand."""

    camera: str
    t_us: int
    pose: Pose2D
    renderer: Renderer
    boxes: tuple[RenderBox, ...]

    @property
    def stamp(self) -> FrameStamp:
        return FrameStamp(self.camera, self.t_us, self.pose)

    def draw(self) -> Frame:
        pixels = self.renderer.render(self.camera, self.pose, self.boxes)
        pixels.setflags(write=False)
        return Frame(self.camera, self.t_us, self.pose, pixels)


class Engine:
    """One deterministic run of one scenario: advance in ticks, observe, render."""

    def __init__(
        self, scenario: Scenario, seed: int, tick_us: int = DEFAULT_TICK_US, width: int = 320, height: int = 180,
        *, keep_history: bool = False,
    ) -> None:
        """``keep_history`` keeps every tick's digest (tests compare them tick by tick); a
        long run does without, so its memory stays flat."""
        if isinstance(tick_us, bool) or not isinstance(tick_us, int) or tick_us <= 0:
            raise ValueError(f"tick_us must be a positive integer, got {tick_us!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise ValueError(f"seed must be an integer in [0, 2**64), got {seed!r}")
        for label, v in (("width", width), ("height", height)):
            if isinstance(v, bool) or not isinstance(v, int) or not IMAGE_SIDE[0] <= v <= IMAGE_SIDE[1]:
                raise ValueError(f"{label} must be an integer in [{IMAGE_SIDE[0]}, {IMAGE_SIDE[1]}], got {v!r}")
        self.scenario = scenario
        self.seed = seed
        self.tick_us = tick_us
        self.width = width
        self.height = height
        self._dt_s = tick_us / 1_000_000
        self._params = scenario.ego.vehicle
        self._replays = [PathReplay(a.path) for a in scenario.actors]
        self._xyz_at = [r.xyz_at for r in self._replays]  # bound once: called for every actor every tick
        self._signal_codes = SignalCodes(scenario.signals)
        self._state_struct = state_struct(len(scenario.actors), len(scenario.signals))
        # Contact broad phase: footprints never change size, so each pair's squared reach (the
        # first test of boxes_overlap, same operands, same bits) is worked out once.
        params = self._params
        self._box_offset_m = params.box_offset_m
        ego_radius = Box(0.0, 0.0, 0.0, params.length_m, params.width_m).radius_m()
        radii = [Box(0.0, 0.0, 0.0, a.length_m, a.width_m).radius_m() for a in scenario.actors]
        self._ego_reach2 = [_squared(ego_radius + r) for r in radii]
        # Actor pairs also have a known top closing speed (the sum of their paths' top speeds):
        # a pair found D apart cannot come within reach for (D - reach - 2 margin) / closing
        # seconds, so it is not tested again before then (the test could only say "apart").
        # margin (1 mm + 1e-9 of the size of the coordinates and the reach) dwarfs the rounding
        # of the interpolated positions and of D.
        self._pairs: list[tuple[int, int, float, float, float]] = []
        for i in range(len(radii)):
            for j in range(i + 1, len(radii)):
                ri, rj = self._replays[i], self._replays[j]
                reach = radii[i] + radii[j]
                margin_m = 1e-3 + 1e-9 * (max(ri.extent_m, rj.extent_m) + reach)
                closing_mps = (ri.max_speed_mps + rj.max_speed_mps) * (1.0 + 1e-9)
                us_per_m = 1e6 / closing_mps if closing_mps > 0.0 else math.inf
                self._pairs.append((i, j, _squared(reach), reach + 2.0 * margin_m, us_per_m))
        self._pair_next_us = [0] * len(self._pairs)  # per pair: first time it must be tested again
        self._handover_us = scenario.handover.t_us if scenario.handover else -1
        self._handover = PathReplay(scenario.handover.path) if scenario.handover else None
        self._tick = 0
        if self._handover is not None:
            x, y, yaw, speed, steer, accel = self._replayed(0, 0.0)
            self._ego = EgoState(Pose2D(x, y, yaw), speed, steer, accel, 0.0, 0.0)
        else:
            self._ego = EgoState(scenario.ego.start, scenario.ego.start_speed_mps)
        self._tracker = ContactTracker()
        self._contacts: list[ContactEvent] = []
        self._digest = root_digest(scenario.source_bytes, seed)
        self._history: list[str] | None = [] if keep_history else None
        self._renderer: Renderer | None = None
        # Actor poses of the current tick as (x, y, yaw); Pose2D values are built on request.
        self._actor_xyz: list[tuple[float, float, float]] = []
        e = self._ego
        p = e.pose
        self._contacts.extend(
            self._observe(
                0, p.x_m, p.y_m, p.yaw_rad, e.speed_mps, e.steer_rad, e.accel_mps2, e.steer_cmd_rad, e.accel_cmd_mps2
            )
        )

    # ---- time -------------------------------------------------------------------------------
    @property
    def tick(self) -> int:
        return self._tick

    @property
    def t_us(self) -> int:
        return self._tick * self.tick_us

    @property
    def duration_us(self) -> int:
        return self.scenario.duration_us

    @property
    def done(self) -> bool:
        """True once the scenario's duration is reached (advance still works past it)."""
        return self.t_us >= self.scenario.duration_us

    @property
    def cameras(self) -> tuple[str, ...]:
        return CAMERA_NAMES

    # ---- stepping ---------------------------------------------------------------------------
    def advance(self, steer_rad: float, accel_mps2: float, n_ticks: int) -> list[ContactEvent]:
        """Hold (steer, accel) for n_ticks ticks; the contacts that started during them."""
        if isinstance(n_ticks, bool) or not isinstance(n_ticks, int) or n_ticks < 0:
            raise ValueError(f"n_ticks must be a non-negative integer, got {n_ticks!r}")
        steer = float(steer_rad)
        accel = float(accel_mps2)
        if not (math.isfinite(steer) and math.isfinite(accel)):
            raise ValueError(f"controls must be finite, got steer {steer_rad!r}, accel {accel_mps2!r}")
        events: list[ContactEvent] = []
        if n_ticks == 0:
            return events
        # The ego is carried as plain floats tick to tick; EgoState is built once at the end.
        e = self._ego
        p = e.pose
        x, y, yaw, speed, steer_now, accel_now = p.x_m, p.y_m, p.yaw_rad, e.speed_mps, e.steer_rad, e.accel_mps2
        params = self._params
        dt_s = self._dt_s
        tick_us = self.tick_us
        handover_us = self._handover_us
        observe = self._observe
        tick = self._tick
        for _ in range(n_ticks):
            tick += 1
            if tick * tick_us <= handover_us:
                x, y, yaw, speed, steer_now, accel_now = self._replayed(tick * tick_us, speed)
            else:
                x, y, yaw, speed, steer_now, accel_now = bicycle_tick(
                    x, y, yaw, speed, steer_now, params, steer, accel, dt_s
                )
            events += observe(tick, x, y, yaw, speed, steer_now, accel_now, steer, accel)
        self._tick = tick
        self._ego = EgoState(Pose2D(x, y, yaw), speed, steer_now, accel_now, steer, accel)
        self._contacts.extend(events)
        return events

    def perturb_ego(self, dx_m: float) -> None:
        """Shift the ego along map x (fault injection); seen by contacts and digest next tick."""
        if not math.isfinite(dx_m):
            raise ValueError(f"dx_m must be finite, got {dx_m!r}")
        p = self._ego.pose
        e = self._ego
        self._ego = EgoState(
            Pose2D(p.x_m + dx_m, p.y_m, p.yaw_rad),
            e.speed_mps,
            e.steer_rad,
            e.accel_mps2,
            e.steer_cmd_rad,
            e.accel_cmd_mps2,
        )

    def _replayed(self, t_us: int, prev_speed: float) -> tuple[float, float, float, float, float, float]:
        """Ego (x, y, yaw, speed, steer, accel) on its recorded path at t_us (speed and yaw
        rate of the segment leading in)."""
        path = self._handover
        assert path is not None
        speed, steer, accel = replayed_motion(path, t_us, prev_speed, self._params.wheelbase_m, self._dt_s)
        x, y, yaw = path.xyz_at(t_us)
        return x, y, yaw, speed, steer, accel

    def _observe(
        self,
        tick: int,
        x: float,
        y: float,
        yaw: float,
        speed: float,
        steer: float,
        accel: float,
        steer_cmd: float,
        accel_cmd: float,
    ) -> list[ContactEvent]:
        """Update actor poses, detect contact starts, chain the digest for tick ``tick`` with
        the ego in the given state (the fields of EgoState, in order)."""
        t = tick * self.tick_us
        xyz = [pose_at(t) for pose_at in self._xyz_at]
        self._actor_xyz = xyz
        # Ego footprint centre as ego_box() computes it (offset_pose with left_m = 0.0).
        c = math.cos(yaw)
        s = math.sin(yaw)
        off = self._box_offset_m
        ex = x + (off * c - 0.0 * s)
        ey = y + (off * s + 0.0 * c)
        # Broad phase: only pairs that pass boxes_overlap's radius test need Box/Body values.
        candidates: list[tuple[int, int]] = []
        ego_reach2 = self._ego_reach2
        for k, (ax, ay, _) in enumerate(xyz):
            dx = ex - ax
            dy = ey - ay
            if not dx * dx + dy * dy >= ego_reach2[k]:
                candidates.append((-1, k))
        next_us = self._pair_next_us
        for n, (i, j, reach2, slack_m, us_per_m) in enumerate(self._pairs):
            if t < next_us[n]:
                continue
            a = xyz[i]
            b = xyz[j]
            dx = a[0] - b[0]
            dy = a[1] - b[1]
            d2 = dx * dx + dy * dy
            if not d2 >= reach2:
                candidates.append((i, j))
            else:
                gap_m = math.sqrt(d2) - slack_m
                if gap_m > 0.0:  # capped at ~30 years: a pair that never moves has us_per_m = inf
                    next_us[n] = t + int(min(gap_m * us_per_m, 1e15))
        pairs: list[tuple[Body, Body]] = []
        if candidates:
            params = self._params
            bodies: dict[int, Body] = {
                -1: Body(EGO_ID, Box(ex, ey, yaw, params.length_m, params.width_m), speed * c, speed * s)
            }
            for i, j in candidates:
                for k in (i, j):
                    if k not in bodies:
                        actor = self.scenario.actors[k]
                        ax, ay, ayaw = xyz[k]
                        vx, vy = self._replays[k].velocity_at(t)
                        bodies[k] = Body(actor.id, Box(ax, ay, ayaw, actor.length_m, actor.width_m), vx, vy)
                pairs.append((bodies[i], bodies[j]))
        events = self._tracker.update_pairs(tick, t, pairs)
        payload = self._state_struct.pack(
            tick, t, x, y, yaw, speed, steer, accel, steer_cmd, accel_cmd,
            *_flatten(xyz), *self._signal_codes.codes_at(t),
        )
        self._digest = _sha256(self._digest + payload).digest()  # chain(), without the call
        if self._history is not None:
            self._history.append(self._digest.hex())
        return events

    # ---- observation ------------------------------------------------------------------------
    def ego_state(self, step: int) -> VehicleState:
        """The ego state now, labelled with the caller's step number."""
        e = self._ego
        return VehicleState(
            step=step,
            t_us=self.t_us,
            pose=e.pose,
            speed_mps=e.speed_mps,
            steer_rad=e.steer_rad,
            accel_mps2=e.accel_mps2,
        )

    @property
    def ego(self) -> EgoState:
        return self._ego

    def actor_poses(self) -> dict[str, Pose2D]:
        """Box-centre pose of every scripted actor now."""
        return {a.id: Pose2D(*p) for a, p in zip(self.scenario.actors, self._actor_xyz, strict=True)}

    def signal_states(self) -> dict[str, str]:
        """State of every signal now."""
        return {s.id: signal_state(s, self.t_us) for s in self.scenario.signals}

    def ground_truth(self) -> GroundTruth:
        """Every actor's pose, velocity and box and every signal's state now, in the
        scenario's order: read off the same replays and phases the world steps with."""
        t = self.t_us
        actors = tuple(
            ActorTruth(a.id, a.kind, Pose2D(*xyz), *r.velocity_at(t), a.length_m, a.width_m, a.height_m, a.color)
            for a, r, xyz in zip(self.scenario.actors, self._replays, self._actor_xyz, strict=True)
        )
        signals = tuple(SignalTruth(s.id, signal_state(s, t), s.x_m, s.y_m) for s in self.scenario.signals)
        return GroundTruth(t, actors, signals)

    @property
    def contacts(self) -> tuple[ContactEvent, ...]:
        """Every contact start so far (including any at tick 0)."""
        return tuple(self._contacts)

    @property
    def world_digest(self) -> str:
        """Hex digest chained up to the current tick."""
        return self._digest.hex()

    @property
    def digest_history(self) -> tuple[str, ...]:
        """Hex digest at every tick so far; index = tick.

        Raises:
            RuntimeError: the engine was made without ``keep_history``.
        """
        if self._history is None:
            raise RuntimeError("digest_history needs Engine(..., keep_history=True)")
        return tuple(self._history)

    # ---- cameras ----------------------------------------------------------------------------
    def render(self, camera: str, t_us: int, rig_offset: tuple[float, float] = (0.0, 0.0)) -> Frame:
        """Render ``camera`` at t_us, which must be the current time (StaleRenderError otherwise).

        rig_offset = (offset_m along the ego heading, offset_deg added to yaw) moves the rig.
        """
        return self.frame_job(camera, t_us, rig_offset).draw()

    def frame_job(self, camera: str, t_us: int, rig_offset: tuple[float, float] = (0.0, 0.0)) -> FrameJob:
        """Name and pose ``camera``'s frame at t_us (the current time) now, draw it later.

        The scene is captured here, so ``draw()`` gives the same pixels whenever it runs,
        even after the world has moved on: a bridge can answer with the frame's stamp and
        pose and render while the driver decides. Raises as ``render`` does.
        """
        if camera not in CAMERAS:
            raise ValueError(f"unknown camera {camera!r}; known: {', '.join(CAMERA_NAMES)}")
        if t_us != self.t_us:
            when = "not reached" if t_us > self.t_us else "already passed"
            raise StaleRenderError(
                f"render of {camera!r} at t_us={t_us} refused: {when}; the engine is at "
                f"t_us={self.t_us} and keeps only its current state"
            )
        offset_m, offset_deg = float(rig_offset[0]), float(rig_offset[1])
        moved = offset_pose(self._ego.pose, offset_m)
        pose = Pose2D(moved.x_m, moved.y_m, wrap_angle(moved.yaw_rad + math.radians(offset_deg)))
        if self._renderer is None:
            self._renderer = Renderer(self.scenario, self.width, self.height)
        return FrameJob(camera, t_us, pose, self._renderer, tuple(self._scene_boxes(CAMERAS[camera].sees_ego)))

    def _scene_boxes(self, with_ego: bool) -> list[RenderBox]:
        boxes: list[RenderBox] = []
        if with_ego:
            b = ego_box(self._ego, self._params)
            p = self._params
            boxes += vehicle_boxes(b.x_m, b.y_m, b.yaw_rad, p.length_m, p.width_m, p.height_m, p.color)
        for actor, (x, y, yaw) in zip(self.scenario.actors, self._actor_xyz, strict=True):
            if actor.kind == "pedestrian":
                boxes += pedestrian_boxes(x, y, yaw, actor.width_m, actor.height_m, actor.color)
            else:
                boxes += vehicle_boxes(
                    x,
                    y,
                    yaw,
                    actor.length_m,
                    actor.width_m,
                    actor.height_m,
                    actor.color,
                )
        for sig in self.scenario.signals:
            boxes += signal_boxes(sig.x_m, sig.y_m, signal_state(sig, self.t_us))
        return boxes
