"""The lockstep world: ego bicycle, replayed traffic, timed signals, contacts, digest, cameras.

Time is always ``tick * tick_us`` (integers), never an accumulated float. The engine keeps
only its current state: it renders and reports the present tick and nothing else.

Handover: while t_us <= handover.t_us the ego replays its recorded path (the commands given
to advance() are held in the state, and so reach the digest, but do not move the ego). The
first tick that ends after handover.t_us integrates the bicycle from the last replayed state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simforge_ros.core.values import FrameStamp, Pose2D, VehicleState
from simforge_ros.engine.cameras import CAMERA_NAMES, CAMERAS
from simforge_ros.engine.contacts import EGO_ID, Body, ContactEvent, ContactTracker
from simforge_ros.engine.digest import chain, encode_state, root_digest
from simforge_ros.engine.geometry import Box, offset_pose, wrap_angle
from simforge_ros.engine.paths import PathReplay
from simforge_ros.engine.render import RenderBox, Renderer, pedestrian_boxes, signal_boxes, vehicle_boxes
from simforge_ros.engine.scenario import Scenario
from simforge_ros.engine.signals import STATE_CODES, signal_state
from simforge_ros.engine.vehicle import EgoState, ego_box, step_bicycle

ENGINE_VERSION = "simforge-engine/1.0.0"


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


class Engine:
    """One deterministic run of one scenario: advance in ticks, observe, render."""

    def __init__(
        self, scenario: Scenario, seed: int, tick_us: int = 20_000, width: int = 320, height: int = 180,
        *, keep_history: bool = False,
    ) -> None:
        """``keep_history`` keeps every tick's digest (tests compare them tick by tick); a
        long run does without, so its memory stays flat."""
        if isinstance(tick_us, bool) or not isinstance(tick_us, int) or tick_us <= 0:
            raise ValueError(f"tick_us must be a positive integer, got {tick_us!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise ValueError(f"seed must be an integer in [0, 2**64), got {seed!r}")
        for label, v in (("width", width), ("height", height)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 2:
                raise ValueError(f"{label} must be an integer >= 2, got {v!r}")
        self.scenario = scenario
        self.seed = seed
        self.tick_us = tick_us
        self.width = width
        self.height = height
        self._dt_s = tick_us / 1_000_000
        self._params = scenario.ego.vehicle
        self._replays = [PathReplay(a.path) for a in scenario.actors]
        self._handover_us = scenario.handover.t_us if scenario.handover else -1
        self._handover = PathReplay(scenario.handover.path) if scenario.handover else None
        self._tick = 0
        if self._handover is not None:
            self._ego = self._replayed(0, 0.0, 0.0, 0.0)
        else:
            self._ego = EgoState(scenario.ego.start, scenario.ego.start_speed_mps)
        self._tracker = ContactTracker()
        self._contacts: list[ContactEvent] = []
        self._digest = root_digest(scenario.source_bytes, seed)
        self._history: list[str] | None = [] if keep_history else None
        self._renderer: Renderer | None = None
        self._actor_poses: list[Pose2D] = []
        self._contacts.extend(self._observe())

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
        for _ in range(n_ticks):
            t_next = (self._tick + 1) * self.tick_us
            if t_next <= self._handover_us:
                self._ego = self._replayed(t_next, self._ego.speed_mps, steer, accel)
            else:
                self._ego = step_bicycle(self._ego, self._params, steer, accel, self._dt_s)
            self._tick += 1
            events.extend(self._observe())
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

    def _replayed(self, t_us: int, prev_speed: float, steer_cmd: float, accel_cmd: float) -> EgoState:
        """Ego state on its recorded path at t_us (speed and yaw rate of the segment leading in)."""
        path = self._handover
        assert path is not None
        probe = t_us - 1 if t_us > 0 else 0
        speed = path.speed_at(probe)
        yaw_rate = path.yaw_rate_at(probe)
        steer = math.atan(self._params.wheelbase_m * yaw_rate / speed) if speed > 0.1 else 0.0
        accel = (speed - prev_speed) / self._dt_s if t_us > 0 else 0.0
        return EgoState(path.pose_at(t_us), speed, steer, accel, steer_cmd, accel_cmd)

    def _observe(self) -> list[ContactEvent]:
        """Update actor poses, detect contact starts, chain the digest for the current tick."""
        t = self.t_us
        self._actor_poses = [r.pose_at(t) for r in self._replays]
        e = self._ego
        ego_body = Body(
            EGO_ID,
            ego_box(e, self._params),
            e.speed_mps * math.cos(e.pose.yaw_rad),
            e.speed_mps * math.sin(e.pose.yaw_rad),
        )
        bodies = []
        for actor, replay, pose in zip(self.scenario.actors, self._replays, self._actor_poses, strict=True):
            vx, vy = replay.velocity_at(t)
            bodies.append(
                Body(actor.id, Box(pose.x_m, pose.y_m, pose.yaw_rad, actor.length_m, actor.width_m), vx, vy)
            )
        events = self._tracker.update(self._tick, t, ego_body, bodies)
        codes = [STATE_CODES[signal_state(s, t)] for s in self.scenario.signals]
        self._digest = chain(self._digest, encode_state(self._tick, t, e, self._actor_poses, codes))
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
        return {a.id: p for a, p in zip(self.scenario.actors, self._actor_poses, strict=True)}

    def signal_states(self) -> dict[str, str]:
        """State of every signal now."""
        return {s.id: signal_state(s, self.t_us) for s in self.scenario.signals}

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
        pixels = self._renderer.render(camera, pose, self._scene_boxes(CAMERAS[camera].sees_ego))
        pixels.setflags(write=False)
        return Frame(camera, t_us, pose, pixels)

    def _scene_boxes(self, with_ego: bool) -> list[RenderBox]:
        boxes: list[RenderBox] = []
        if with_ego:
            b = ego_box(self._ego, self._params)
            p = self._params
            boxes += vehicle_boxes(b.x_m, b.y_m, b.yaw_rad, p.length_m, p.width_m, p.height_m, p.color)
        for actor, pose in zip(self.scenario.actors, self._actor_poses, strict=True):
            if actor.kind == "pedestrian":
                boxes += pedestrian_boxes(
                    pose.x_m, pose.y_m, pose.yaw_rad, actor.width_m, actor.height_m, actor.color
                )
            else:
                boxes += vehicle_boxes(
                    pose.x_m,
                    pose.y_m,
                    pose.yaw_rad,
                    actor.length_m,
                    actor.width_m,
                    actor.height_m,
                    actor.color,
                )
        for sig in self.scenario.signals:
            boxes += signal_boxes(sig.x_m, sig.y_m, signal_state(sig, self.t_us))
        return boxes
