"""A test double of the CARLA 0.10 Python API: the part the carla backend calls.

No CARLA server can run on this project's machine (no GPU, no Unreal Engine), and the
``carla`` wheel comes only with the CARLA package. This module stands in for both, in
tests only, so that the backend's own logic (synchronous settings, one frame a tick, the
clock check, images awaited by frame id, coordinates, teardown) runs against something
that behaves as the server is documented to:

* the world is left-handed (x forward, y right, z up, yaw in degrees, clockwise from
  above); wheels report no position, as CARLA 0.10's do (carla#8746);
* ``world.tick()`` advances one frame of ``fixed_delta_seconds``, handed on in single
  precision as the engine does, and returns the frame id; ``apply_settings`` and
  ``set_transform`` take effect at the next tick;
* sensors deliver their data after the tick, from a thread of their own, in no fixed order
  across sensors;
* the town has three traffic lights, at CARLA (9, 5), (5, -9) and (300, 300): where
  ``red_signal``'s two signals stand, mirrored, and one far off; they cycle on their own
  (green 10 s, yellow 2 s, red 10 s) unless frozen;
* a vehicle is a kinematic bicycle on its rear axle (its origin 1.3 m ahead of it and 0.2 m
  above the road, its box's centre 0.1 m ahead of the origin), with its own pedal response;
  walkers and physics-off actors stay where they are put; a spawn into the road is refused.

Faults, for the refusal tests, from ``CARLA_DOUBLE_FAULTS`` (comma-separated): ``delta_s=S``
(the server ticks S seconds whatever it was asked), ``no_sync`` (it ignores
synchronous_mode), ``extra_tick@F`` (another client ticks the world once more at the F-th
frame), ``drop_image=ROLE@F`` (the F-th frame's image of the camera with that role_name
never comes), ``rig_error_m=M`` (cameras render from M metres further forward than asked),
``no_lights`` (the town has no traffic light), ``light_stuck`` (traffic lights ignore
set_state), ``down`` (no server answers), ``gone@F`` (the server stops answering from frame
F's tick on), ``client_version=V`` (the Python client is release V), ``bad_blueprint=ID`` (a spawn of that
blueprint is refused, as CARLA 0.10 refuses some walkers), ``load_s=S`` (loading a
town takes S seconds: a client whose time-out is shorter gets the time-out CARLA gives). F
is a frame id; a fresh double's world starts at frame 0 (a test reads the carla backend's
``frame`` after load to name the frame of a later step).
"""

from __future__ import annotations

import hashlib
import math
import os
import queue
import struct
import threading
from typing import Any

__version__ = "0.10.0-double"
_WHEELBASE_M = 2.8
# A vehicle's origin: 1.3 m ahead of its rear axle, 0.2 m above the road; its box's centre
# 0.1 m ahead of the origin (so the axle is 1.4 m behind it, as the seed scenarios' ego).
_AXLE_TO_ORIGIN_M = 1.3
_ORIGIN_HEIGHT_M = 0.2
_BOX_AHEAD_M = 0.1
_WHEEL_RADIUS_CM = 35.0
_MAX_STEER_DEG = 70.0
_MAX_ACCEL = 3.6  # not the backend's mapping: the double's pedal response is its own
_MAX_BRAKE = 9.5


def _faults() -> dict[str, str]:
    out: dict[str, str] = {}
    for item in filter(None, os.environ.get("CARLA_DOUBLE_FAULTS", "").split(",")):
        key, _, value = item.partition("=")
        if "@" in key:  # extra_tick@F
            key, _, value = key.partition("@")
        out[key.strip()] = value.strip()
    return out


# ---- value types --------------------------------------------------------------------------
class Vector3D:
    def __init__(self, x: float = 0.0, y: float = 0.0, z: float = 0.0) -> None:
        self.x, self.y, self.z = float(x), float(y), float(z)


class Location(Vector3D):
    pass


class Rotation:
    def __init__(self, pitch: float = 0.0, yaw: float = 0.0, roll: float = 0.0) -> None:
        self.pitch, self.yaw, self.roll = float(pitch), float(yaw), float(roll)


class Transform:
    def __init__(self, location: Location | None = None, rotation: Rotation | None = None) -> None:
        self.location = location if location is not None else Location()
        self.rotation = rotation if rotation is not None else Rotation()


class BoundingBox:
    def __init__(self, location: Location, extent: Vector3D) -> None:
        self.location, self.extent = location, extent


class VehicleControl:
    def __init__(self, throttle: float = 0.0, steer: float = 0.0, brake: float = 0.0, hand_brake: bool = False,
                 reverse: bool = False, manual_gear_shift: bool = False, gear: int = 0) -> None:
        self.throttle, self.steer, self.brake = float(throttle), float(steer), float(brake)
        self.hand_brake, self.reverse, self.manual_gear_shift, self.gear = hand_brake, reverse, manual_gear_shift, gear


class WorldSettings:
    def __init__(self) -> None:
        self.synchronous_mode = False
        self.no_rendering_mode = False
        self.fixed_delta_seconds: float | None = None
        self.substepping = True
        self.max_substep_delta_time = 0.01
        self.max_substeps = 10

    def _copy(self) -> WorldSettings:
        other = WorldSettings()
        other.__dict__.update(self.__dict__)
        return other


class Timestamp:
    def __init__(self, frame: int, elapsed_seconds: float, delta_seconds: float) -> None:
        self.frame, self.elapsed_seconds, self.delta_seconds = frame, elapsed_seconds, delta_seconds
        self.platform_timestamp = 0.0


class ActorSnapshot:
    def __init__(self, actor: Actor) -> None:
        self.id = actor.id
        self._transform = _copy_transform(actor._transform)
        self._velocity = Vector3D(actor._velocity.x, actor._velocity.y, 0.0)
        self._acceleration = Vector3D(actor._acceleration.x, actor._acceleration.y, 0.0)
        self._angular = Vector3D(0.0, 0.0, actor._yaw_rate_dps)

    def get_transform(self) -> Transform:
        return _copy_transform(self._transform)

    def get_velocity(self) -> Vector3D:
        return self._velocity

    def get_acceleration(self) -> Vector3D:
        return self._acceleration

    def get_angular_velocity(self) -> Vector3D:
        return self._angular


class WorldSnapshot:
    def __init__(self, world: World) -> None:
        self.frame = world._frame
        self.timestamp = Timestamp(world._frame, world._elapsed_s, world._last_delta_s)
        self._actors = {a.id: ActorSnapshot(a) for a in world._actors.values()}

    def find(self, actor_id: int) -> ActorSnapshot | None:
        return self._actors.get(actor_id)


class TrafficLightState:
    """The enum: its members print as their names (Boost.Python's)."""

    class _Member(int):
        def __new__(cls, value: int, name: str) -> TrafficLightState._Member:
            member = int.__new__(cls, value)
            member.name = name
            return member

        name: str

        def __str__(self) -> str:
            return self.name

    Red = _Member(0, "Red")
    Yellow = _Member(1, "Yellow")
    Green = _Member(2, "Green")
    Off = _Member(3, "Off")
    Unknown = _Member(4, "Unknown")


class ActorList(list):  # type: ignore[type-arg]
    def filter(self, wildcard_pattern: str) -> ActorList:
        import fnmatch

        return ActorList(a for a in self if fnmatch.fnmatch(a.type_id, wildcard_pattern))


class Image:
    def __init__(self, frame: int, timestamp: float, transform: Transform, width: int, height: int,
                 fov: float, raw_data: bytes) -> None:
        self.frame, self.timestamp, self.transform = frame, timestamp, transform
        self.width, self.height, self.fov, self.raw_data = width, height, fov, raw_data


def _copy_transform(t: Transform) -> Transform:
    return Transform(Location(t.location.x, t.location.y, t.location.z),
                     Rotation(t.rotation.pitch, t.rotation.yaw, t.rotation.roll))


# ---- blueprints and actors ---------------------------------------------------------------
class ActorBlueprint:
    def __init__(self, blueprint_id: str) -> None:
        self.id = blueprint_id
        self._attributes: dict[str, str] = {"role_name": ""}
        if blueprint_id.startswith("sensor.camera"):
            self._attributes.update(image_size_x="800", image_size_y="600", fov="90.0", sensor_tick="0.0")

    def has_attribute(self, name: str) -> bool:
        return name in self._attributes

    def set_attribute(self, name: str, value: str) -> None:
        if name not in self._attributes:
            raise IndexError(f"blueprint {self.id!r} has no attribute {name!r}")
        self._attributes[name] = str(value)


class BlueprintLibrary:
    WALKERS = ("walker.pedestrian.0001", "walker.pedestrian.0002")

    def filter(self, wildcard_pattern: str) -> list[ActorBlueprint]:
        import fnmatch

        return [ActorBlueprint(b) for b in self.WALKERS if fnmatch.fnmatch(b, wildcard_pattern)]

    def find(self, blueprint_id: str) -> ActorBlueprint:
        known = ("vehicle.", "walker.pedestrian.", "sensor.camera.rgb")
        if not blueprint_id.startswith(known):
            raise IndexError(f"blueprint {blueprint_id!r} not found")
        return ActorBlueprint(blueprint_id)


class WheelPhysicsControl:
    """As CARLA 0.10 reports it: ``location`` and ``offset`` always (0, 0, 0) (carla#8746),
    ``wheel_radius`` in centimetres, ``max_steer_angle`` in degrees."""

    def __init__(self, max_steer_angle: float, affected_by_steering: bool | None = None) -> None:
        self.location, self.offset = Vector3D(), Vector3D()
        self.max_steer_angle, self.wheel_radius = max_steer_angle, _WHEEL_RADIUS_CM
        self.affected_by_steering = max_steer_angle > 0 if affected_by_steering is None else affected_by_steering


class VehiclePhysicsControl:
    def __init__(self, wheels: list[WheelPhysicsControl]) -> None:
        self.wheels = wheels


class Actor:
    def __init__(self, world: World, actor_id: int, blueprint: ActorBlueprint, transform: Transform,
                 parent: Actor | None) -> None:
        self.id = actor_id
        self.type_id = blueprint.id
        self.attributes = dict(blueprint._attributes)
        self.parent = parent
        self.is_alive = True
        self._world = world
        self._transform = _copy_transform(transform)  # relative to the parent when attached
        self._pending: Transform | None = None
        self._velocity = Vector3D()
        self._acceleration = Vector3D()
        self._yaw_rate_dps = 0.0
        self._physics = True
        self._collisions = True
        if self.type_id.startswith("vehicle."):
            extent = Vector3D(2.3, 0.95, 0.75)
            self.bounding_box = BoundingBox(Location(_BOX_AHEAD_M, 0.0, extent.z - _ORIGIN_HEIGHT_M), extent)
        else:  # a walker's origin is halfway up its body
            self.bounding_box = BoundingBox(Location(0.0, 0.0, 0.0), Vector3D(0.3, 0.3, 0.9))

    def get_transform(self) -> Transform:
        return _copy_transform(self._world_transform())

    def _world_transform(self) -> Transform:
        if self.parent is None:
            return self._transform
        p, r = self.parent._transform, self._transform
        yaw = math.radians(p.rotation.yaw)
        c, s = math.cos(yaw), math.sin(yaw)
        return Transform(
            Location(p.location.x + r.location.x * c - r.location.y * s,
                     p.location.y + r.location.x * s + r.location.y * c, p.location.z + r.location.z),
            Rotation(r.rotation.pitch, p.rotation.yaw + r.rotation.yaw, r.rotation.roll))

    def set_transform(self, transform: Transform) -> None:
        self._pending = _copy_transform(transform)  # at the next tick, as in synchronous mode

    def set_simulate_physics(self, enabled: bool = True) -> None:
        self._physics = bool(enabled)  # its collision stays (ACarlaWheeledVehicle::SetSimulatePhysics)

    def set_collisions(self, enabled: bool = True) -> None:
        self._collisions = bool(enabled)

    def destroy(self) -> bool:
        self.is_alive = False
        self._world._actors.pop(self.id, None)
        return True


class Vehicle(Actor):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._control = VehicleControl()
        self._speed = 0.0

    def apply_control(self, control: VehicleControl) -> None:
        self._control = control

    def get_control(self) -> VehicleControl:
        return self._control

    def set_target_velocity(self, velocity: Vector3D) -> None:
        self._speed = math.hypot(velocity.x, velocity.y)
        self._velocity = Vector3D(velocity.x, velocity.y, 0.0)

    def get_physics_control(self) -> VehiclePhysicsControl:
        return VehiclePhysicsControl([WheelPhysicsControl(a) for a in (_MAX_STEER_DEG, _MAX_STEER_DEG, 0.0, 0.0)])

    def _step(self, dt: float) -> None:
        """A kinematic bicycle on the rear axle (CARLA's steer > 0 turns right: yaw grows)."""
        control = self._control
        brake = 1.0 if control.hand_brake else control.brake
        accel = control.throttle * _MAX_ACCEL - brake * _MAX_BRAKE
        speed = max(0.0, self._speed + accel * dt)
        t = self._transform
        yaw = math.radians(t.rotation.yaw)
        rx = t.location.x - _AXLE_TO_ORIGIN_M * math.cos(yaw)
        ry = t.location.y - _AXLE_TO_ORIGIN_M * math.sin(yaw)
        yaw_rate = speed * math.tan(math.radians(control.steer * _MAX_STEER_DEG)) / _WHEELBASE_M
        rx += speed * math.cos(yaw) * dt
        ry += speed * math.sin(yaw) * dt
        yaw += yaw_rate * dt
        t.location.x = rx + _AXLE_TO_ORIGIN_M * math.cos(yaw)
        t.location.y = ry + _AXLE_TO_ORIGIN_M * math.sin(yaw)
        t.location.z = _ORIGIN_HEIGHT_M  # on the road (it was spawned above it)
        t.rotation.yaw = math.degrees(yaw)
        accel = (speed - self._speed) / dt
        self._acceleration = Vector3D(accel * math.cos(yaw), accel * math.sin(yaw))
        self._speed = speed
        self._velocity = Vector3D(speed * math.cos(yaw), speed * math.sin(yaw))
        self._yaw_rate_dps = math.degrees(yaw_rate)


class TrafficLight(Actor):
    _CYCLE = ((TrafficLightState.Green, 10.0), (TrafficLightState.Yellow, 2.0), (TrafficLightState.Red, 10.0))

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._state = TrafficLightState.Green
        self._pending_state: Any = None
        self._frozen = False
        self._elapsed_in_state = 0.0

    def get_location(self) -> Location:
        return self.get_transform().location

    def get_state(self) -> Any:
        return self._state

    def set_state(self, state: Any) -> None:
        if "light_stuck" not in _faults():
            self._pending_state = state  # at the next tick

    def freeze(self, freeze: bool) -> None:
        self._world.freeze_all_traffic_lights(freeze)  # every light in the map, as CARLA's does

    def is_frozen(self) -> bool:
        return self._frozen

    def _step(self, dt: float) -> None:
        if self._pending_state is not None:
            self._state, self._pending_state, self._elapsed_in_state = self._pending_state, None, 0.0
            return
        if self._frozen:
            return
        self._elapsed_in_state += dt
        durations = dict(self._CYCLE)
        if self._elapsed_in_state >= durations[self._state]:
            order = [state for state, _ in self._CYCLE]
            self._state = order[(order.index(self._state) + 1) % len(order)]
            self._elapsed_in_state = 0.0

    def destroy(self) -> bool:
        return False  # a map's light is not the client's to destroy


class Sensor(Actor):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._callback: Any = None

    @property
    def is_listening(self) -> bool:
        return self._callback is not None

    def listen(self, callback: Any) -> None:
        self._callback = callback

    def stop(self) -> None:
        self._callback = None

    def _image(self, frame: int, elapsed: float, name_rig_error: float) -> Image:
        width, height = int(self.attributes["image_size_x"]), int(self.attributes["image_size_y"])
        t = self.get_transform()
        if name_rig_error:
            yaw = math.radians(t.rotation.yaw)
            t.location.x += name_rig_error * math.cos(yaw)
            t.location.y += name_rig_error * math.sin(yaw)
        # pixels that depend on what is there to see, as a renderer's do (not on the frame's
        # id): a row pattern from a hash of the camera's pose and every other body's
        seed = hashlib.sha256(struct.pack(">4d", t.location.x, t.location.y, t.rotation.yaw, t.rotation.pitch))
        for body in sorted((a._world_transform().location.x, a._world_transform().location.y)
                           for a in self._world._actors.values() if not isinstance(a, Sensor)):
            seed.update(struct.pack(">2d", *body))
        row = (seed.digest() * (4 * width // 32 + 1))[: 4 * width]
        raw = bytes(row) * height
        return Image(frame, elapsed, t, width, height, float(self.attributes["fov"]), raw)


# ---- the world and the client ------------------------------------------------------------
class Waypoint:
    def __init__(self, location: Location) -> None:
        self.transform = Transform(Location(location.x, location.y, 0.0), Rotation())


class Map:
    def __init__(self, town: str = "Double") -> None:
        self.name = f"Carla/Maps/{town}"

    def get_spawn_points(self) -> list[Transform]:
        return [Transform(Location(-50.0, 1.75, 0.3), Rotation(yaw=0.0)),
                Transform(Location(1.75, -120.0, 0.3), Rotation(yaw=90.0))]

    def get_waypoint(self, location: Location, project_to_road: bool = True, lane_type: Any = None) -> Waypoint:
        return Waypoint(location)


class World:
    def __init__(self) -> None:
        self.id = 1
        self._town = "Double"
        self._settings = WorldSettings()
        self._pending_settings: WorldSettings | None = None
        self._frame = 0
        self._elapsed_s = 0.0
        self._last_delta_s = 0.0
        self._actors: dict[int, Actor] = {}
        self._next_id = 100
        if "no_lights" not in _faults():
            for x, y in ((9.0, 5.0), (5.0, -9.0), (300.0, 300.0)):
                light = TrafficLight(self, self._next_id, ActorBlueprint("traffic.traffic_light"),
                                     Transform(Location(x, y, 0.0)), None)
                self._actors[light.id] = light
                self._next_id += 1
        self._deliveries: queue.Queue[tuple[Any, Any] | None] = queue.Queue()
        self._deliverer = threading.Thread(target=self._deliver, name="carla-double-sensors", daemon=True)
        self._deliverer.start()

    def _deliver(self) -> None:
        while True:
            item = self._deliveries.get()
            if item is None:
                return
            callback, data = item
            callback(data)

    def get_settings(self) -> WorldSettings:
        return self._settings._copy()

    def apply_settings(self, settings: WorldSettings) -> int:
        new = settings._copy()
        if "no_sync" in _faults():
            new.synchronous_mode = False
        self._settings = new
        return self._frame

    def get_blueprint_library(self) -> BlueprintLibrary:
        return BlueprintLibrary()

    def get_map(self) -> Map:
        return Map(self._town)

    def get_snapshot(self) -> WorldSnapshot:
        return WorldSnapshot(self)

    def get_actors(self) -> ActorList:
        return ActorList(self._actors.values())

    def freeze_all_traffic_lights(self, frozen: bool) -> None:
        for actor in self._actors.values():
            if isinstance(actor, TrafficLight):
                actor._frozen = bool(frozen)

    def reset_all_traffic_lights(self) -> None:
        for actor in self._actors.values():
            if isinstance(actor, TrafficLight):
                actor._state, actor._elapsed_in_state = TrafficLightState.Green, 0.0

    def spawn_actor(self, blueprint: ActorBlueprint, transform: Transform, attach_to: Actor | None = None) -> Actor:
        if _faults().get("bad_blueprint") == blueprint.id:
            raise RuntimeError("Spawn failed because of invalid actor description")
        kind = Vehicle if blueprint.id.startswith("vehicle.") else Actor
        kind = Sensor if blueprint.id.startswith("sensor.") else kind
        actor = kind(self, self._next_id, blueprint, transform, attach_to)
        box = actor.bounding_box
        if attach_to is None and transform.location.z + box.location.z - box.extent.z < -0.01:  # into the road
            raise RuntimeError("Spawn failed because of collision at spawn position")
        self._next_id += 1
        self._actors[actor.id] = actor
        return actor

    def tick(self, seconds: float = 10.0) -> int:
        if not self._settings.synchronous_mode:
            raise RuntimeError("tick() in asynchronous mode")  # as the server answers
        faults = _faults()
        gone = faults.get("gone")
        if gone is not None and self._frame + 1 >= int(gone):
            raise RuntimeError(f"time-out of {int(seconds * 1000)}ms while waiting for the simulator, make sure "
                               "the simulator is ready and connected to localhost:2000")
        self._advance(faults)
        extra = faults.get("extra_tick")
        if extra is not None and self._frame == int(extra):
            self._advance(faults)  # another client's tick
        return self._frame

    def _advance(self, faults: dict[str, str]) -> None:
        asked = self._settings.fixed_delta_seconds or 0.05
        delta = float(faults.get("delta_s", asked))
        delta = struct.unpack("<f", struct.pack("<f", delta))[0]  # handed on in single precision
        for actor in list(self._actors.values()):
            if actor._pending is not None:  # teleported, then stepped in the same tick
                actor._transform, actor._pending = actor._pending, None
            if isinstance(actor, Vehicle) and actor._physics:
                actor._step(delta)
            if isinstance(actor, TrafficLight):
                actor._step(delta)
        self._frame += 1
        self._elapsed_s += delta
        self._last_delta_s = delta
        rig_error = float(faults.get("rig_error_m", 0.0))
        dropped = faults.get("drop_image")
        sensors = [a for a in self._actors.values() if isinstance(a, Sensor) and a.is_listening]
        for sensor in reversed(sensors):  # not in the order they were spawned
            if dropped == f"{sensor.attributes['role_name']}@{self._frame}":
                continue
            self._deliveries.put((sensor._callback, sensor._image(self._frame, self._elapsed_s, rig_error)))


_WORLD: World | None = None


def _world() -> World:
    global _WORLD
    if _WORLD is None:
        _WORLD = World()
    return _WORLD


class Client:
    def __init__(self, host: str = "localhost", port: int = 2000, worker_threads: int = 0) -> None:
        self.host, self.port = host, port
        self._timeout = 5.0

    def set_timeout(self, seconds: float) -> None:
        self._timeout = float(seconds)

    def _server(self) -> World:
        if "down" in _faults():
            raise RuntimeError(f"time-out of {int(self._timeout * 1000)}ms while waiting for the simulator, make "
                               f"sure the simulator is ready and connected to {self.host}:{self.port}")
        return _world()

    def get_client_version(self) -> str:
        return _faults().get("client_version", __version__)

    def get_server_version(self) -> str:
        self._server()
        return __version__

    def get_world(self) -> World:
        return self._server()

    def load_world(self, map_name: str, reset_settings: bool = True) -> World:
        world = self._server()
        load_s = float(_faults().get("load_s", 0.0))
        if load_s > self._timeout:  # the client waits for the new map only as long as its time-out
            raise RuntimeError(f"time-out of {int(self._timeout * 1000)}ms while waiting for the simulator, make "
                               f"sure the simulator is ready and connected to {self.host}:{self.port}")
        world._town = map_name.rsplit("/", 1)[-1]
        for actor in list(world._actors.values()):
            actor.destroy()  # all but the map's own traffic lights
        if reset_settings:
            world._settings = WorldSettings()
        return world
