"""CARLA 0.10 as a bridge backend: the same timing contract, bound to a CARLA server.

SimForge only runs CARLA synchronous: in its default asynchronous mode the server runs on
its own clock and no two runs repeat. This backend is the only client that advances the
world: one ``world.tick()`` per engine tick, with ``fixed_delta_seconds`` set from
``tick_us`` (read from the bridge, never typed here). After every tick it checks that
CARLA's frame counter moved by exactly one (another client ticking the world would move
it further) and that CARLA's own clock reports the tick it was told: ``time_drift``
otherwise, at the tick it happens, not a hundred steps later.

Cameras capture every tick. A step's frame is the image whose frame id is the id of the
step's tick, awaited by that id (``missing_frame`` past ``timeout_ms``), never the latest
image in a queue. Its pose is read from the image's own sensor transform, so the clock
master's ``pose_tolerance`` guard compares where CARLA rendered from with the state.

Coordinates: CARLA's world is left-handed (x forward, y right, z up; yaw in degrees,
clockwise seen from above). The map frame here is its mirror, as the CARLA ROS bridge
gives it: (x, -y, -yaw). A scenario for CARLA is written in that frame, in its town's
coordinates. The ego pose is the rear axle on the ground, as with the embedded engine,
placed on CARLA's vehicle by the scenario's own ego geometry (CARLA 0.10 reports no wheel
positions).

Scripted actors are spawned with physics off and put on their replayed box-centre pose
before every tick. Contacts are found by the embedded engine's box test on the poses
CARLA reports after each tick, not from CARLA's collision sensor: its events arrive
asynchronously, and a step's contacts must not depend on when a message arrives.

Every load resets the town's light cycles. Each scenario signal drives the town's traffic
light nearest it: with signals every light is frozen (no light runs its own cycle), and
each driven one is set to its signal's phase, on the integer-time phases the embedded
engine uses. After every tick each must show its
signal's state (``participant_error`` otherwise); ground truth and the world digest read
what the lights show.

No rclpy here. The ``carla`` module is imported when the backend is built: the CARLA
package's own wheel, which is not on PyPI for this Python; the tests run against a test
double of it (test/carla_double), since no CARLA server can run on the project's machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import math
import re
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simforge_ros.backends.base import BackendInfo, BackendUnavailable, RenderedFrame
from simforge_ros.core.errors import (
    MissingFrame,
    ParticipantError,
    RateNotMultiple,
    Refusal,
    StaleFrame,
    TimeDrift,
)
from simforge_ros.core.values import (
    ActorTruth,
    CameraExtrinsics,
    CameraIntrinsics,
    ContactEvent,
    FrameStamp,
    GroundTruth,
    Pose2D,
    SignalTruth,
    VehicleState,
)
from simforge_ros.engine import CAMERA_NAMES, CAMERAS, EGO_ID, extrinsics, intrinsics, load_scenario
from simforge_ros.engine.contacts import Body, ContactTracker
from simforge_ros.engine.digest import root_digest
from simforge_ros.engine.geometry import Box, offset_pose, wrap_angle
from simforge_ros.engine.paths import PathReplay, replayed_motion
from simforge_ros.engine.signals import STATE_CODES, signal_state

BACKEND_VERSION = "carla-backend/1"

# A tick's reported length against tick_us, relative: CARLA hands the delta to the engine
# in single precision (0.01 s becomes 0.0099999998), a relative error of about 6e-8; a
# wrong period (the 0.0999 s typed for 0.1 s) is 1e-3.
DELTA_REL_TOL = 1e-6
# CARLA's elapsed time against k * tick_us: half a microsecond, plus the single-precision
# deltas' accumulation (1e-7 of the time: 0.01 s as a float32 is short by 2.2e-10 s, 22 us
# over 100 000 ticks, 2.2e-8 of the 1 000 s).
ELAPSED_TOL_US = 1.0
ELAPSED_REL_TOL = 1e-7
SPAWN_LIFT_M = 0.3  # the ego is spawned this far above the road (CARLA refuses a spawn into it)
SETTLE_US = 1_000_000  # and left that long, braked, to come to rest on its wheels before tick 0
# CARLA's physics covers a tick with at most max_substeps substeps of max_substep_delta_time
# (fixed_delta_seconds <= their product, docs "Synchrony and time-step"); past that the
# vehicles fall behind the clock without a word. A longer tick is given more substeps, up to
# this many (the engine's own limit), and refused beyond.
MAX_SUBSTEPS = 16
# A scenario signal drives the town's traffic light nearest its position, within this.
SIGNAL_MATCH_M = 10.0
_LIGHT_STATES = {"red": "Red", "yellow": "Yellow", "green": "Green"}  # -> carla.TrafficLightState
# Loading a town: the client waits for the new map only as long as its time-out, and
# CARLA 0.10 took longer than the 10 s default to load Town10HD_Opt (scenario_runner#1139).
LOAD_TIMEOUT_S = 120.0
WALKER_BLUEPRINT = "walker.pedestrian.0001"  # a scripted vehicle takes the ego's (CarlaOptions.vehicle)
_STEP = struct.Struct(">qq6d")
_NO_EGO = (0.0,) * 8  # (x, y, yaw, vx, vy, speed, accel, steer) before the first tick is read


@dataclass(frozen=True)
class CarlaOptions:
    """The bridge's carla_* parameters."""

    host: str = "localhost"
    port: int = 2000
    timeout_ms: int = 10_000  # wall clock: a server call, and the wait for a frame's image
    town: str = ""  # "": keep the map the server has loaded
    vehicle: str = "vehicle.lincoln.mkz"
    cameras: tuple[str, ...] = ("chase", "front")  # the cameras to spawn: those the bridge renders
    max_accel_mps2: float = 3.0  # full throttle, for the accel -> throttle mapping
    max_brake_mps2: float = 8.0  # full brake


def release(version: str) -> tuple[int, ...] | None:
    """A CARLA version's release, its first two numbers ("0.10.0-dirty" -> (0, 10));
    None when it has none."""
    match = re.match(r"\s*(\d+)\.(\d+)", version)
    return (int(match[1]), int(match[2])) if match else None


def load_town(client: Any, town: str, timeout_s: float) -> Any:
    """Load ``town`` on the server, given LOAD_TIMEOUT_S (a call's ``timeout_s`` after).

    Raises: RuntimeError: the server did not load it in time, or has no such town.
    """
    client.set_timeout(max(LOAD_TIMEOUT_S, timeout_s))
    try:
        return client.load_world(town)
    finally:
        client.set_timeout(timeout_s)


def import_carla() -> Any:
    """The CARLA Python API module.

    Raises: BackendUnavailable: it is not importable.
    """
    try:
        return importlib.import_module("carla")
    except ImportError as err:
        raise BackendUnavailable(
            f"the carla backend needs the CARLA 0.10 Python API (the carla wheel of your CARLA package, "
            f"PythonAPI/carla/dist) importable: {err}") from None


def to_carla_xy_yaw(x_m: float, y_m: float, yaw_rad: float) -> tuple[float, float, float]:
    """Map frame (right-handed) -> CARLA (x, y, yaw in degrees)."""
    return x_m, -y_m, -math.degrees(yaw_rad)


def from_carla_xy_yaw(x: float, y: float, yaw_deg: float) -> tuple[float, float, float]:
    """CARLA (x, y, yaw in degrees) -> map frame (x, y, yaw in [-pi, pi])."""
    return x, -y, wrap_angle(-math.radians(yaw_deg))


class _Images:
    """Every camera's images by frame id, as the sensors' callbacks deliver them (from
    CARLA's threads, in any order); a reader waits for the one frame it names."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._by_frame: dict[str, dict[int, Any]] = {}
        self._oldest = 0  # images of earlier frames are not kept

    def add(self, camera: str, image: Any) -> None:
        with self._cond:
            frame = int(image.frame)
            if frame >= self._oldest:
                self._by_frame.setdefault(camera, {})[frame] = image
                self._cond.notify_all()

    def forget_before(self, frame: int) -> None:
        with self._cond:
            self._oldest = frame
            for images in self._by_frame.values():
                for old in [f for f in images if f < frame]:
                    del images[old]

    def wait(self, camera: str, frame: int, timeout_s: float) -> Any | None:
        with self._cond:
            self._cond.wait_for(lambda: frame in self._by_frame.get(camera, {}), timeout_s)
            return self._by_frame.get(camera, {}).pop(frame, None)


class CarlaBackend:
    """One CARLA world driven in lockstep; ``load`` (re)spawns everything of the run."""

    camera_names: tuple[str, ...] = CAMERA_NAMES

    def __init__(self, scenario: str, tick_us: int, width: int = 320, height: int = 180,
                 options: CarlaOptions | None = None) -> None:
        """Raises: ScenarioError: the scenario cannot be found, or asks for what this
        backend does not drive; BackendUnavailable: no carla module."""
        self._scenario = load_scenario(scenario)
        self._carla = import_carla()
        self._tick_us = tick_us
        self._dt_s = tick_us / 1_000_000
        self._size = (width, height)
        self._options = options or CarlaOptions()
        self._replays = [PathReplay(a.path) for a in self._scenario.actors]
        self._images = _Images()
        self._world: Any = None
        self._map: Any = None  # the world's map, asked for once a load ("expensive", CARLA's docs say)
        self._saved_settings: Any = None
        self._actors: list[Any] = []  # scripted, in the scenario's order
        self._actor_z: list[float] = []  # the height each was spawned at, kept
        self._lights: list[Any] = []  # the traffic light each scenario signal drives, in its order
        self._light_set: dict[int, str] = {}  # light id -> the state last set
        self._froze_lights = False
        self._sensors: dict[str, Any] = {}
        self._spawned: list[Any] = []  # everything this run spawned, destroyed on close
        self._ego: Any = None
        self._tick = 0
        self._frame = 0  # CARLA's frame id of tick self._tick
        self._origin_s = 0.0  # CARLA's elapsed seconds at tick 0
        self._snapshot: Any = None
        self._axle_ahead_m = 0.0  # CARLA's actor origin ahead of the rear axle
        self._max_steer_rad = 1.0
        self._steer_cmd = 0.0
        self._accel_cmd = 0.0
        self._tracker = ContactTracker()
        self._digest = b""
        self._version = ""
        handover = self._scenario.handover
        # until handover_us the ego replays its recorded path, physics off (as the engine does);
        # without a hand-over it is held on its start pose for tick 0 only
        self._handover_us = handover.t_us if handover is not None else 0
        self._handover_path = PathReplay(handover.path) if handover is not None else None
        self._ego_values = _NO_EGO  # the ego now, read once a tick (_read_ego)
        self._ego_z = 0.0  # the height it came to rest at

    # ---- load ---------------------------------------------------------------------------
    def load(self, seed: int) -> BackendInfo:
        """Connect, set the world synchronous with this tick, spawn the ego, its cameras
        and the scripted actors, and take tick 0 once they have settled.

        Raises: ParticipantError: no server, or it refused what was asked;
            RateNotMultiple: it did not take the tick or synchronous mode.
        """
        self.close()
        self._images = _Images()  # a restarted server counts frames from 0 again
        self._steer_cmd = self._accel_cmd = 0.0
        self._ego_values = _NO_EGO
        carla, opts = self._carla, self._options
        try:
            client = carla.Client(opts.host, opts.port)
            client.set_timeout(opts.timeout_ms / 1000.0)
            server = client.get_server_version()
        except Exception as err:  # noqa: BLE001 - the client raises RuntimeError on a time-out, others elsewhere
            raise ParticipantError(-1, f"carla: no server answered at {opts.host}:{opts.port} "
                                       f"within {opts.timeout_ms} ms ({type(err).__name__}: {err})") from None
        mine = client.get_client_version()
        if release(server) != release(mine) and None not in (release(server), release(mine)):
            # the server only logs a warning; 0.10 changed the structures the client decodes
            # (a vehicle's and its wheels' physics control, carla#8141), read wrong or failing later
            raise ParticipantError(-1, f"carla: the server at {opts.host}:{opts.port} is CARLA {server}, this Python "
                                       f"client {mine}: install the client of the server's release (the wheel in "
                                       "its PythonAPI/carla/dist)")
        try:
            world = load_town(client, opts.town, opts.timeout_ms / 1000.0) if opts.town else client.get_world()
        except Exception as err:  # noqa: BLE001 - a time-out, or a town the server does not have
            limit_s = max(LOAD_TIMEOUT_S, opts.timeout_ms / 1000.0)
            raise ParticipantError(-1, f"carla: the server at {opts.host}:{opts.port} did not load town "
                                       f"{opts.town!r} (given {limit_s:g} s: {type(err).__name__}: {err}); "
                                       "`simforge carla-map` lists the towns it has") from None
        self._world, self._map = world, None
        self._version = f"carla {server} (client {mine}), {BACKEND_VERSION}"
        try:
            self._saved_settings = world.get_settings()
            settings = world.get_settings()
            settings.synchronous_mode = True
            settings.fixed_delta_seconds = self._dt_s
            self._cover_with_substeps(settings)
            world.apply_settings(settings)
            got = world.get_settings()
        except RuntimeError as err:  # the client's time-out
            raise ParticipantError(-1, f"carla: the world's settings could not be set ({err})") from None
        if not got.synchronous_mode or got.fixed_delta_seconds is None or \
                abs(got.fixed_delta_seconds - self._dt_s) > DELTA_REL_TOL * self._dt_s:
            raise RateNotMultiple(-1, f"carla: the server runs synchronous={got.synchronous_mode}, "
                                      f"fixed_delta_seconds={got.fixed_delta_seconds!r}; asked synchronous with "
                                      f"{self._tick_us} us ticks")
        try:
            self._spawn(world)
        except Refusal:
            raise
        except Exception as err:  # noqa: BLE001 - a spawn collision, an unknown blueprint
            raise ParticipantError(-1, f"carla: {type(err).__name__}: {err}") from None
        self._tick = 0
        self._frame = self._tick_world(0)  # everything placed: tick 0
        self._snapshot = world.get_snapshot()
        self._origin_s = float(self._snapshot.timestamp.elapsed_seconds)
        self._images.forget_before(self._frame)
        self._tracker = ContactTracker()
        self._digest = root_digest(self._scenario.source_bytes, seed)
        at_load = self._observe()
        return BackendInfo(tick_us=self._tick_us, scenario=self._scenario.name,
                           scenario_sha256=self._scenario.source_sha256,
                           duration_us=self._scenario.duration_us, version=self._version,
                           contacts=tuple(at_load))

    def _cover_with_substeps(self, settings: Any) -> None:
        """Give a tick longer than CARLA's physics substeps cover more of them.

        Raises:
            RateNotMultiple: the tick is longer than MAX_SUBSTEPS substeps cover.
        """
        substep_s = float(getattr(settings, "max_substep_delta_time", 0.0) or 0.0)
        if not getattr(settings, "substepping", False) or substep_s <= 0:
            return
        if self._dt_s > substep_s * int(settings.max_substeps) * (1 + DELTA_REL_TOL):
            settings.max_substeps = math.ceil(self._dt_s / substep_s * (1 - DELTA_REL_TOL))
            if settings.max_substeps > MAX_SUBSTEPS:
                raise RateNotMultiple(-1, (
                    f"carla: a tick of {self._tick_us} us is longer than the server's physics covers "
                    f"({MAX_SUBSTEPS} substeps of {substep_s:g} s): its vehicles would fall behind the clock; "
                    "give sim_bridge.tick_us a shorter tick (a whole number of them a step)"))

    def _spawn(self, world: Any) -> None:
        carla, opts = self._carla, self._options
        library = world.get_blueprint_library()
        start = self._ego_start()
        ground = self._ground_z(world, start.x_m, start.y_m)
        bp = library.find(opts.vehicle)
        if bp.has_attribute("role_name"):
            bp.set_attribute("role_name", "hero")
        ego = world.spawn_actor(bp, self._transform(start.x_m, start.y_m, ground + SPAWN_LIFT_M, start.yaw_rad))
        self._spawned.append(ego)
        self._ego = ego
        # Where the rear axle is: CARLA 0.10 reports every wheel at (0, 0, 0) (carla#8746),
        # so it is placed as the scenario's ego is built, box_offset_m (half its length less
        # its rear overhang) behind the centre of CARLA's bounding box. A scenario for a
        # blueprint gives its length and overhang (docs/scenarios.md, ego.vehicle).
        box = ego.bounding_box
        self._axle_ahead_m = self._scenario.ego.vehicle.box_offset_m - float(box.location.x)
        origin_height_m = float(box.extent.z) - float(box.location.z)  # the origin above the box's bottom
        c, s = math.cos(start.yaw_rad), math.sin(start.yaw_rad)
        ego.set_transform(self._transform(start.x_m + self._axle_ahead_m * c, start.y_m + self._axle_ahead_m * s,
                                          ground + SPAWN_LIFT_M, start.yaw_rad))
        # spawned above the road, it comes to rest on its wheels, braked, before tick 0
        ego.apply_control(carla.VehicleControl(throttle=0.0, steer=0.0, brake=1.0, hand_brake=True))
        for _ in range(-(-SETTLE_US // self._tick_us)):
            world.tick(opts.timeout_ms / 1000.0)
        # asked once the ego has been ticked: CARLA 0.10 makes a vehicle's wheels only after
        # the frame it was spawned in (asked before, its source says, the server may crash)
        self._max_steer_rad = self._max_steer(ego)
        rest = ego.get_transform()  # its height on the road; x, y and yaw set once more from the scenario
        ego.set_transform(self._transform(start.x_m + self._axle_ahead_m * c, start.y_m + self._axle_ahead_m * s,
                                          float(rest.location.z), start.yaw_rad))
        ego.apply_control(carla.VehicleControl(throttle=0.0, steer=0.0, brake=0.0))
        # Physics off through tick 0 (a vehicle given a velocity would move during that tick);
        # released with the start speed at tick 1, or carried along its recorded path until a
        # hand-over (_handover_us).
        ego.set_simulate_physics(False)
        self._ego_z = float(rest.location.z)
        width, height = self._size
        for camera in opts.cameras:
            mount = CAMERAS[camera]
            cam_bp = library.find("sensor.camera.rgb")
            cam_bp.set_attribute("image_size_x", str(width))
            cam_bp.set_attribute("image_size_y", str(height))
            cam_bp.set_attribute("fov", repr(math.degrees(mount.hfov_rad)))
            cam_bp.set_attribute("sensor_tick", "0.0")  # every tick: a frame is taken by its id
            cam_bp.set_attribute("role_name", camera)  # how a CARLA tool (its ROS bridge, a recorder) names it
            # the mount is relative to the rear axle on the ground; the actor's origin is
            # axle_ahead_m ahead of it and origin_height_m above the road
            where = carla.Transform(
                carla.Location(x=mount.x_m - self._axle_ahead_m, y=-mount.y_m, z=mount.z_m - origin_height_m),
                carla.Rotation(pitch=-math.degrees(mount.pitch_rad), yaw=-math.degrees(mount.yaw_rad), roll=0.0))
            sensor = world.spawn_actor(cam_bp, where, attach_to=ego)
            self._spawned.append(sensor)
            self._sensors[camera] = sensor
            sensor.listen(lambda image, name=camera: self._images.add(name, image))
        walkers = sorted(b.id for b in library.filter("walker.pedestrian.*"))
        walker = WALKER_BLUEPRINT if WALKER_BLUEPRINT in walkers or not walkers else walkers[0]
        for actor, replay in zip(self._scenario.actors, self._replays, strict=True):
            x, y, yaw = replay.xyz_at(0)
            actor_bp = library.find(walker if actor.kind == "pedestrian" else opts.vehicle)
            ground_z = self._ground_z(world, x, y)
            # spawned above the road (CARLA refuses a spawn into it), then set down with physics off
            try:
                spawned = world.spawn_actor(actor_bp, self._transform(x, y, ground_z + SPAWN_LIFT_M + 1.0, yaw))
            except RuntimeError as err:  # CARLA 0.10 refuses some listed walkers ("invalid actor description")
                raise ParticipantError(-1, f"carla: the scenario's {actor.kind} {actor.id!r} could not be spawned "
                                           f"as {actor_bp.id} at its start pose ({err})") from None
            self._spawned.append(spawned)  # destroyed at close() even if a call below fails (a time-out)
            spawned.set_simulate_physics(False)
            # CARLA 0.10 keeps a physics-off vehicle's collision (ACarlaWheeledVehicle::
            # SetSimulatePhysics), so a scripted actor moved onto the ego would push it, with
            # no limit (MaxDepenetrationVelocity=0): contacts are the boxes' overlap (as the
            # embedded engine's), not a shove no scenario scripted
            spawned.set_collisions(False)
            actor_box = spawned.bounding_box  # its origin above the box's bottom: a walker's is halfway up
            z = ground_z + float(actor_box.extent.z) - float(actor_box.location.z)
            spawned.set_transform(self._transform(x, y, z, yaw))
            self._actors.append(spawned)
            self._actor_z.append(z)
        # a run that crashed with signals left every light frozen (close() never ran): each run
        # gives the town its own cycles back first, then starts every cycle from its start
        world.freeze_all_traffic_lights(False)
        world.reset_all_traffic_lights()  # every light's cycle from its start: the same each run
        self._lights = self._match_lights(world)
        if self._lights:
            world.freeze_all_traffic_lights(True)  # no light runs its own cycle: the scenario's phases do
            self._froze_lights = True
            self._set_lights(0)

    def _match_lights(self, world: Any) -> list[Any]:
        """The town's traffic light nearest each scenario signal (within SIGNAL_MATCH_M).

        Raises: ParticipantError: a signal with no light near it, or two sharing one.
        """
        if not self._scenario.signals:
            return []
        lights = list(world.get_actors().filter("traffic.traffic_light*"))
        chosen: list[Any] = []
        for signal in self._scenario.signals:
            sx, sy, _ = to_carla_xy_yaw(signal.x_m, signal.y_m, 0.0)
            near = sorted(((math.hypot(light.get_location().x - sx, light.get_location().y - sy), light.id, light)
                           for light in lights), key=lambda item: (item[0], item[1]))
            if not near or near[0][0] > SIGNAL_MATCH_M:
                nearest = f"the nearest is {near[0][0]:.1f} m away" if near else "the town has none"
                raise ParticipantError(-1, f"carla: no traffic light within {SIGNAL_MATCH_M:g} m of signal "
                                           f"{signal.id!r} at ({signal.x_m:g}, {signal.y_m:g}); {nearest}")
            light = near[0][2]
            if any(light.id == other.id for other in chosen):
                raise ParticipantError(-1, f"carla: signal {signal.id!r} and another signal are both nearest "
                                           f"traffic light {light.id}")
            chosen.append(light)
        return chosen

    def _set_lights(self, t_us: int) -> None:
        """Set each light to its signal's state at t_us (shown from the next tick on)."""
        for signal, light in zip(self._scenario.signals, self._lights, strict=True):
            state = signal_state(signal, t_us)
            if self._light_set.get(light.id) != state:
                light.set_state(getattr(self._carla.TrafficLightState, _LIGHT_STATES[state]))
                self._light_set[light.id] = state

    def _lights_shown(self) -> list[str]:
        """The state each driven light shows now, as CARLA reports it ("red", "off", ...).

        Raises: ParticipantError: one shows other than its signal's state now.
        """
        shown = []
        t_us = self.time_us()
        for signal, light in zip(self._scenario.signals, self._lights, strict=True):
            state = str(light.get_state()).rsplit(".", 1)[-1].lower()
            if state != signal_state(signal, t_us):
                raise ParticipantError(-1, f"carla: traffic light {light.id} shows {state} at t_us={t_us}, where "
                                           f"signal {signal.id!r} is {signal_state(signal, t_us)}")
            shown.append(state)
        return shown

    def _ego_start(self) -> Pose2D:
        """The ego's rear-axle pose at t = 0: its recorded path's, with a hand-over."""
        path = self._handover_path
        return self._scenario.ego.start if path is None else Pose2D(*path.xyz_at(0))

    def _replaying(self, t_us: int) -> bool:
        """Whether the ego is not yet the driver's at t_us (held at tick 0, or carried)."""
        return t_us <= self._handover_us

    def _start_velocity(self, yaw: float) -> tuple[float, float, float]:
        """(vx, vy, speed) of the scenario's start speed along ``yaw``."""
        speed = self._scenario.ego.start_speed_mps
        return speed * math.cos(yaw), speed * math.sin(yaw), speed

    @staticmethod
    def _max_steer(ego: Any) -> float:
        """The ego's largest steering angle, radians: its steered wheels' smallest maximum
        (the front-left one need not be the first wheel listed). A steered wheel is one
        ``affected_by_steering`` (CARLA 0.10's Chaos wheels carry a maximum angle whether
        steered or not); with a client that has no such field, one with a maximum angle.

        Raises:
            ParticipantError: the blueprint reports no wheel that steers.
        """
        wheels = ego.get_physics_control().wheels
        angles = [float(w.max_steer_angle) for w in wheels
                  if getattr(w, "affected_by_steering", True) and float(w.max_steer_angle) > 0]
        if not angles:
            raise ParticipantError(-1, f"carla: the ego ({ego.type_id}) reports no wheel that steers")
        return math.radians(min(angles))

    def _ground_z(self, world: Any, x_m: float, y_m: float) -> float:
        cx, cy, _ = to_carla_xy_yaw(x_m, y_m, 0.0)
        if self._map is None:
            self._map = world.get_map()
        waypoint = self._map.get_waypoint(self._carla.Location(x=cx, y=cy, z=0.0), project_to_road=True)
        return float(waypoint.transform.location.z) if waypoint is not None else 0.0

    def _transform(self, x_m: float, y_m: float, z_m: float, yaw_rad: float) -> Any:
        carla = self._carla
        cx, cy, cyaw = to_carla_xy_yaw(x_m, y_m, yaw_rad)
        return carla.Transform(carla.Location(x=cx, y=cy, z=z_m), carla.Rotation(pitch=0.0, yaw=cyaw, roll=0.0))

    # ---- time ---------------------------------------------------------------------------
    @property
    def frame(self) -> int:
        """CARLA's frame id of the current tick (tick 0 is the frame load ended at)."""
        return self._frame

    def time_us(self) -> int:
        return self._tick * self._tick_us

    def advance(self, steer_rad: float, accel_mps2: float, n_ticks: int) -> list[ContactEvent]:
        """Hold the command for n_ticks ticks, checking CARLA's frame and clock after each.

        Raises: TimeDrift: a tick moved CARLA by other than one frame of tick_us;
            ParticipantError: a tick got no answer.
        """
        carla, opts = self._carla, self._options
        steer = max(-1.0, min(1.0, steer_rad / self._max_steer_rad))
        throttle = max(0.0, min(1.0, accel_mps2 / opts.max_accel_mps2))
        brake = max(0.0, min(1.0, -accel_mps2 / opts.max_brake_mps2))
        self._steer_cmd, self._accel_cmd = steer * self._max_steer_rad, accel_mps2
        self._ego.apply_control(carla.VehicleControl(throttle=throttle, steer=-steer, brake=brake))
        contacts: list[ContactEvent] = []
        for _ in range(n_ticks):
            t_next = (self._tick + 1) * self._tick_us
            try:
                for spawned, replay, z in zip(self._actors, self._replays, self._actor_z, strict=True):
                    x, y, yaw = replay.xyz_at(t_next)
                    spawned.set_transform(self._transform(x, y, z, yaw))
                self._set_lights(t_next)
                if self._replaying(t_next):
                    self._carry_ego(t_next)
                elif self._replaying(t_next - self._tick_us):  # the driver's from this tick on
                    vx, vy = self._ego_values[3], self._ego_values[4]  # the start's or the path's velocity
                    self._ego.set_simulate_physics(True)
                    self._ego.set_target_velocity(carla.Vector3D(vx, -vy, 0.0))
            except RuntimeError as err:  # the client's time-out
                raise ParticipantError(-1, f"carla: a call to the server before the tick to t_us={t_next} failed "
                                           f"({err})") from None
            frame = self._tick_world(t_next)
            self._check_tick(frame)
            self._tick += 1
            self._frame = frame
            self._images.forget_before(frame)
            contacts += self._observe()
        return contacts

    def _carry_ego(self, t_us: int) -> None:
        """Put the ego (physics off) on its recorded path's pose at t_us, from the next tick."""
        assert self._handover_path is not None
        x, y, yaw = self._handover_path.xyz_at(t_us)
        c, s = math.cos(yaw), math.sin(yaw)
        self._ego.set_transform(self._transform(x + self._axle_ahead_m * c, y + self._axle_ahead_m * s,
                                                self._ego_z, yaw))

    def _tick_world(self, t_us: int) -> int:
        """One world.tick(); its frame id.

        Raises: ParticipantError: no answer within timeout_ms (the server is gone or hung).
        """
        timeout_ms = self._options.timeout_ms
        try:
            return int(self._world.tick(timeout_ms / 1000.0))
        except RuntimeError as err:  # the client's time-out
            raise ParticipantError(-1, f"carla: the tick to t_us={t_us} got no answer within {timeout_ms} ms "
                                       f"({err})") from None

    def _check_tick(self, frame: int) -> None:
        t_us = (self._tick + 1) * self._tick_us
        if frame != self._frame + 1:
            raise TimeDrift(-1, f"carla: the tick to t_us={t_us} went from frame {self._frame} to {frame}: another "
                                "client advances the world; the bridge must be the only one that ticks it")
        snapshot = self._world.get_snapshot()
        stamp = snapshot.timestamp
        if snapshot.frame != frame:
            raise TimeDrift(-1, f"carla: frame {frame} ticked, but the world's snapshot is of frame {snapshot.frame}")
        if abs(stamp.delta_seconds - self._dt_s) > DELTA_REL_TOL * self._dt_s:
            raise TimeDrift(-1, f"carla: frame {frame} (t_us={t_us}) lasted {stamp.delta_seconds * 1e6:.3f} us, "
                                f"not the {self._tick_us} us tick")
        elapsed_us = (float(stamp.elapsed_seconds) - self._origin_s) * 1e6
        if abs(elapsed_us - t_us) > ELAPSED_TOL_US + ELAPSED_REL_TOL * t_us:
            raise TimeDrift(-1, f"carla: frame {frame} is at {elapsed_us:.3f} us from the run's origin, "
                                f"not at t_us={t_us}")
        self._snapshot = snapshot

    # ---- observation --------------------------------------------------------------------
    def _read_ego(self) -> None:
        """The ego now, from the snapshot of the current tick: its rear axle in the map frame
        where CARLA has it; while it replays its recorded path, the speed, acceleration and
        steer of that path (as the engine derives them: CARLA gives a carried actor none)."""
        ego = self._find(self._ego)
        t = ego.get_transform()
        ox, oy, yaw = from_carla_xy_yaw(t.location.x, t.location.y, t.rotation.yaw)
        c, s = math.cos(yaw), math.sin(yaw)
        x, y = ox - self._axle_ahead_m * c, oy - self._axle_ahead_m * s
        t_us = self.time_us()
        path = self._handover_path
        if self._replaying(t_us):  # held (tick 0) or carried: CARLA gives it no velocity
            if path is None:
                self._ego_values = (x, y, yaw, *self._start_velocity(yaw), 0.0, 0.0)
                return
            speed, steer, accel = replayed_motion(path, t_us, self._ego_values[5],
                                                  self._scenario.ego.vehicle.wheelbase_m, self._dt_s)
            self._ego_values = (x, y, yaw, speed * c, speed * s, speed, accel, steer)
            return
        v, a = ego.get_velocity(), ego.get_acceleration()
        vx, vy = float(v.x), -float(v.y)
        self._ego_values = (x, y, yaw, vx, vy, vx * c + vy * s, float(a.x) * c - float(a.y) * s, self._steer_cmd)

    def _find(self, actor: Any) -> Any:
        """``actor`` in the current tick's snapshot.

        Raises: ParticipantError: it is gone from the world (destroyed by another client).
        """
        found = self._snapshot.find(actor.id)
        if found is None:
            raise ParticipantError(-1, f"carla: actor {actor.id} ({actor.type_id}) is gone from the world at "
                                       f"t_us={self.time_us()}")
        return found

    def _actor_poses(self) -> list[tuple[float, float, float]]:
        out = []
        for spawned in self._actors:
            t = self._find(spawned).get_transform()
            out.append(from_carla_xy_yaw(t.location.x, t.location.y, t.rotation.yaw))
        return out

    def _observe(self) -> list[ContactEvent]:
        """Contacts that started at this tick, and the world digest chained over it."""
        self._read_ego()
        x, y, yaw, vx, vy, speed, _, _ = self._ego_values
        t_us = self.time_us()
        poses = self._actor_poses()
        box = self._ego.bounding_box
        c, s = math.cos(yaw), math.sin(yaw)
        centre = self._axle_ahead_m + float(box.location.x)
        ego = Body(EGO_ID, Box(x + centre * c, y + centre * s, yaw, 2.0 * float(box.extent.x),
                               2.0 * float(box.extent.y)), vx, vy)
        others = [Body(a.id, Box(px, py, pyaw, a.length_m, a.width_m), *r.velocity_at(t_us))
                  for a, r, (px, py, pyaw) in zip(self._scenario.actors, self._replays, poses, strict=True)]
        events = self._tracker.update(self._tick, t_us, ego, others)
        payload = _STEP.pack(self._tick, t_us, x, y, yaw, speed, self._steer_cmd, self._accel_cmd)
        payload += struct.pack(f">{3 * len(poses)}d", *[v for p in poses for v in p])
        payload += struct.pack(f">{len(self._lights)}q", *[STATE_CODES[s] for s in self._lights_shown()])
        self._digest = hashlib.sha256(self._digest + payload).digest()
        return events

    def state(self, step: int) -> VehicleState:
        x, y, yaw, _, _, speed, accel, steer = self._ego_values
        return VehicleState(step=step, t_us=self.time_us(), pose=Pose2D(x, y, yaw), speed_mps=speed,
                            steer_rad=steer, accel_mps2=accel)

    def render(self, camera: str, t_us: int, rig_offset: tuple[float, float]) -> RenderedFrame:
        """The image of the frame ticked for t_us (the current time), awaited by its id.

        Raises: StaleFrame: t_us is not the current time; MissingFrame: no such image came
            within timeout_ms; ValueError: a camera not spawned.
        """
        if camera not in self._sensors:
            raise ValueError(f"camera {camera!r} was not spawned; spawned: {', '.join(self._sensors)}")
        if t_us != self.time_us():
            when = "not reached" if t_us > self.time_us() else "already passed"
            raise StaleFrame(-1, f"render of {camera!r} at t_us={t_us} refused: {when}; the world is at "
                                 f"t_us={self.time_us()}")
        image = self._images.wait(camera, self._frame, self._options.timeout_ms / 1000.0)
        if image is None:
            raise MissingFrame(-1, f"carla: no image of camera {camera!r} for frame {self._frame} (t_us={t_us}) "
                                   f"within {self._options.timeout_ms} ms")
        width, height = self._size
        if (int(image.width), int(image.height)) != (width, height):
            raise MissingFrame(-1, f"carla: camera {camera!r} sent a {image.width}x{image.height} image, "
                                   f"not {width}x{height}")
        mount = CAMERAS[camera]
        t = image.transform  # where CARLA rendered from: the ego pose it implies
        cx, cy, cyaw = from_carla_xy_yaw(t.location.x, t.location.y, t.rotation.yaw)
        ego = offset_pose(Pose2D(cx, cy, wrap_angle(cyaw - mount.yaw_rad)), -mount.x_m, -mount.y_m)
        offset_m, offset_deg = float(rig_offset[0]), float(rig_offset[1])  # moved as the engine moves its rig
        moved = offset_pose(ego, offset_m)
        pose = Pose2D(moved.x_m, moved.y_m, wrap_angle(moved.yaw_rad + math.radians(offset_deg)))
        bgra = np.frombuffer(image.raw_data, dtype=np.uint8).reshape(height, width, 4)
        pixels = np.ascontiguousarray(bgra[:, :, 2::-1])
        pixels.setflags(write=False)
        return RenderedFrame(FrameStamp(camera, t_us, pose), pixels=pixels)

    def yaw_rate_radps(self) -> float:
        t_us = self.time_us()
        if self._handover_path is not None and self._replaying(t_us):
            return self._handover_path.yaw_rate_at(t_us - 1 if t_us > 0 else 0)
        w = self._find(self._ego).get_angular_velocity()
        return -math.radians(float(w.z))  # degrees/s about CARLA's z, clockwise

    def intrinsics(self, camera: str) -> CameraIntrinsics:
        return intrinsics(CAMERAS[camera], *self._size)  # CARLA's pinhole at the fov it was given

    def extrinsics(self, camera: str) -> CameraExtrinsics:
        return extrinsics(CAMERAS[camera])

    def ground_truth(self) -> GroundTruth:
        """The scripted actors where CARLA has them now, with their replays' velocities, and
        each signal in the state its traffic light shows."""
        t_us = self.time_us()
        actors = tuple(
            ActorTruth(a.id, a.kind, Pose2D(*pose), *r.velocity_at(t_us), a.length_m, a.width_m, a.height_m, a.color)
            for a, r, pose in zip(self._scenario.actors, self._replays, self._actor_poses(), strict=True))
        signals = tuple(SignalTruth(s.id, state, s.x_m, s.y_m)
                        for s, state in zip(self._scenario.signals, self._lights_shown(), strict=True))
        return GroundTruth(t_us, actors, signals)

    def world_digest(self) -> str:
        return self._digest.hex()

    def perturb_ego(self, dx_m: float) -> None:
        """Shift the ego along map x, as the engine does (CARLA's x is the map's): CARLA moves
        it at the next tick, so the state of this step does not show it yet (fault
        injection only)."""
        t = self._ego.get_transform()
        t.location.x += dx_m
        self._ego.set_transform(t)

    # ---- teardown -----------------------------------------------------------------------
    def close(self) -> None:
        """Destroy what the run spawned and give the world back its settings (a server left
        synchronous waits for a tick no one sends). Errors are ignored: the server may be gone."""
        for sensor in self._sensors.values():
            _quietly(sensor.stop)
        for spawned in reversed(self._spawned):
            _quietly(spawned.destroy)
        if self._world is not None and self._froze_lights:
            _quietly(lambda: self._world.freeze_all_traffic_lights(False))  # the town's own cycles again,
            _quietly(self._world.reset_all_traffic_lights)  # from their start
        if self._world is not None and self._saved_settings is not None:
            saved = self._saved_settings
            if saved.synchronous_mode:  # left so by a run that crashed: no one would tick it
                saved.synchronous_mode, saved.fixed_delta_seconds = False, None
            _quietly(lambda: self._world.apply_settings(saved))
        self._sensors, self._spawned, self._actors, self._actor_z, self._ego = {}, [], [], [], None
        self._lights, self._light_set, self._froze_lights = [], {}, False
        self._world = self._saved_settings = None


def _quietly(call: Any) -> None:
    with contextlib.suppress(Exception):  # teardown: the server may already be gone
        call()


def carla_cameras(cameras: Sequence[str]) -> tuple[str, ...]:
    """The cameras to spawn, those the bridge renders, in its order (camera-name order: the rig is a set)."""
    return tuple(c for c in cameras if c in CAMERAS)
