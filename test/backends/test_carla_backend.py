"""The carla backend against the CARLA test double (test/carla_double: no CARLA server can
run here). What is tested is the backend's side of the contract: the world is made
synchronous with the bridge's tick and given back as it was, one frame a tick, CARLA's
clock held to k * tick_us, a frame taken by its id, the pose read from where CARLA
rendered, the map frame mirrored from CARLA's, and each failure refused by name."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from simforge_ros.backends import make_backend
from simforge_ros.backends.base import BackendUnavailable
from simforge_ros.backends.carla_backend import (
    CarlaBackend,
    CarlaOptions,
    _Images,
    from_carla_xy_yaw,
    to_carla_xy_yaw,
)
from simforge_ros.bridge_core import BridgeConfig, BridgeCore
from simforge_ros.core.errors import MissingFrame, ParticipantError, RateNotMultiple, StaleFrame, TimeDrift
from simforge_ros.core.lockstep import StepRequest
from simforge_ros.core.values import Action
from simforge_ros.engine import CAMERAS, load_scenario
from simforge_ros.engine.paths import PathReplay
from simforge_ros.engine.scenario import ScenarioError
from simforge_ros.engine.signals import signal_state

DOUBLE = Path(__file__).resolve().parents[1] / "carla_double"
TICK_US = 20_000


@pytest.fixture
def carla(monkeypatch) -> Iterator[Any]:
    """A fresh double (its world is module state, as a server's is)."""
    monkeypatch.syspath_prepend(str(DOUBLE))
    monkeypatch.delenv("CARLA_DOUBLE_FAULTS", raising=False)
    sys.modules.pop("carla", None)
    import carla as module

    yield module
    sys.modules.pop("carla", None)


def backend(cameras: tuple[str, ...] = ("chase", "front"), tick_us: int = TICK_US, **options: Any) -> CarlaBackend:
    return CarlaBackend("right_turn", tick_us, 64, 48, CarlaOptions(cameras=cameras, **options))


def test_coordinates_are_carlas_mirrored_as_the_carla_ros_bridge_gives_them():
    assert to_carla_xy_yaw(3.0, 2.0, math.pi / 2) == (3.0, -2.0, -90.0)
    x, y, yaw = from_carla_xy_yaw(3.0, -2.0, -90.0)
    assert (x, y) == (3.0, 2.0) and yaw == pytest.approx(math.pi / 2)
    assert from_carla_xy_yaw(0.0, 0.0, 270.0)[2] == pytest.approx(math.pi / 2)  # wrapped into (-pi, pi]


def test_load_makes_the_world_synchronous_with_the_bridges_tick_and_close_gives_it_back(carla):
    b = backend()
    world = carla.Client().get_world()
    before = world.get_settings()
    assert not before.synchronous_mode
    info = b.load(seed=3)
    settings = world.get_settings()
    assert settings.synchronous_mode and settings.fixed_delta_seconds == TICK_US / 1e6
    assert info.tick_us == TICK_US and info.scenario == "right_turn" and info.version.startswith("carla 0.10.0")
    spawned = [a for a in world.get_actors() if not a.type_id.startswith("traffic.")]
    # the ego, its two cameras (named by role, as CARLA's tools name sensors), the four actors
    assert sorted(a.type_id for a in spawned).count("sensor.camera.rgb") == 2
    assert {a.attributes["role_name"] for a in spawned if a.type_id == "sensor.camera.rgb"} == {"chase", "front"}
    assert len(spawned) == 1 + 2 + len(load_scenario("right_turn").actors)
    b.close()
    assert [a.type_id for a in world.get_actors()] == ["traffic.traffic_light"] * 3  # the town's own
    assert not world.get_settings().synchronous_mode  # a server left synchronous would wait forever


def test_the_ego_starts_where_the_scenario_puts_its_rear_axle(carla):
    b = backend()
    b.load(0)
    start = load_scenario("right_turn").ego.start
    state = b.state(0)
    assert (state.step, state.t_us) == (0, 0)
    assert state.pose.x_m == pytest.approx(start.x_m, abs=1e-9) and state.pose.y_m == pytest.approx(start.y_m)
    assert state.pose.yaw_rad == pytest.approx(start.yaw_rad, abs=1e-12)
    assert state.speed_mps == pytest.approx(load_scenario("right_turn").ego.start_speed_mps)


def test_the_rear_axle_is_placed_as_the_scenarios_ego_is_built_on_carlas_box(carla):
    """CARLA 0.10 reports no wheel positions: the box's centre goes box_offset_m ahead of the
    scenario's start (the double's origin is 0.1 m behind its box's centre, 0.2 m up)."""
    b = backend()
    b.load(0)
    scenario = load_scenario("right_turn")
    ego = next(a for a in carla.Client().get_world().get_actors() if a.attributes["role_name"] == "hero")
    t = ego.get_transform()
    start, offset = scenario.ego.start, scenario.ego.vehicle.box_offset_m
    assert (t.location.x, t.location.y) == pytest.approx((start.x_m + offset - 0.1, -start.y_m))
    assert t.location.z == pytest.approx(0.2) and t.rotation.yaw == pytest.approx(-math.degrees(start.yaw_rad))


def test_the_ego_does_not_move_during_tick_0_and_leaves_at_its_start_speed(carla):
    """Held with physics off through tick 0 (a vehicle given a velocity would move during
    it: the double integrates in the tick it is teleported, as CARLA does), then released
    at the scenario's start speed: one tick later it is one tick's travel on."""
    b = backend()
    b.load(0)
    start = load_scenario("right_turn").ego.start
    speed = load_scenario("right_turn").ego.start_speed_mps
    assert (b.state(0).pose.x_m, b.state(0).pose.y_m) == pytest.approx((start.x_m, start.y_m), abs=1e-12)
    b.advance(0.0, 0.0, 1)
    assert b.state(1).pose.x_m == pytest.approx(start.x_m + speed * TICK_US / 1e6, abs=1e-7)  # f32 delta
    assert b.state(1).speed_mps == pytest.approx(speed)


def test_advance_ticks_the_world_once_a_tick_and_its_time_is_whole_ticks(carla):
    b = backend()
    b.load(0)
    world = carla.Client().get_world()
    frame0 = world.get_snapshot().frame
    b.advance(0.0, 0.0, 5)
    assert world.get_snapshot().frame == frame0 + 5
    assert b.time_us() == 5 * TICK_US
    b.advance(0.0, 0.0, 3)
    assert b.time_us() == 8 * TICK_US


def test_a_left_steer_turns_the_ego_left_in_the_map_frame(carla):
    """CARLA's steer > 0 turns right (its yaw grows clockwise): the backend sends the map
    frame's left-positive steer mirrored."""
    b = backend()
    b.load(0)
    b.advance(0.1, 0.0, 25)
    left = b.state(1)
    assert left.pose.yaw_rad > 0.05 and left.pose.y_m > load_scenario("right_turn").ego.start.y_m
    assert left.steer_rad == pytest.approx(0.1) and b.yaw_rate_radps() > 0.0


def test_frames_are_the_images_of_their_tick_posed_where_carla_rendered(carla):
    b = backend(cameras=("chase", "front", "left"))
    b.load(0)
    for k in range(1, 4):
        b.advance(0.05, 1.0, 5)
        state = b.state(k)
        for camera in ("chase", "front", "left"):
            frame = b.render(camera, b.time_us(), (0.0, 0.0))
            assert frame.stamp.camera == camera and frame.stamp.t_us == k * 5 * TICK_US
            pose = frame.stamp.pose  # the ego pose the camera's transform implies
            assert pose.x_m == pytest.approx(state.pose.x_m, abs=1e-9)
            assert pose.y_m == pytest.approx(state.pose.y_m, abs=1e-9)
            assert pose.yaw_rad == pytest.approx(state.pose.yaw_rad, abs=1e-12)
            assert frame.pixels.shape == (48, 64, 3) and not frame.pixels.flags.writeable


def test_a_frame_is_taken_by_its_frame_id_not_as_the_latest_image():
    images = _Images()
    for frame in (7, 5, 6):  # CARLA's sensor threads deliver in any order
        images.add("front", SimpleNamespace(frame=frame))
    assert images.wait("front", 6, 0.01).frame == 6
    assert images.wait("front", 6, 0.01) is None  # taken once
    images.forget_before(7)
    assert images.wait("front", 5, 0.01) is None
    images.add("front", SimpleNamespace(frame=4))  # late, for a frame already passed: dropped
    assert images.wait("front", 4, 0.01) is None
    assert images.wait("front", 7, 0.01).frame == 7


def test_ground_truth_is_the_scripted_actors_where_carla_has_them(carla):
    b = backend()
    b.load(0)
    b.advance(0.0, 0.0, 50)
    truth = b.ground_truth()
    scenario = load_scenario("right_turn")
    assert truth.t_us == 50 * TICK_US and truth.signals == ()
    for actor, seen in zip(scenario.actors, truth.actors, strict=True):
        x, y, yaw = PathReplay(actor.path).xyz_at(truth.t_us)
        assert seen.id == actor.id
        assert (seen.pose.x_m, seen.pose.y_m) == pytest.approx((x, y), abs=1e-9)
        assert seen.pose.yaw_rad == pytest.approx(yaw, abs=1e-9)


def test_the_same_commands_on_a_deterministic_server_give_the_same_world_digest(carla):
    def run(seed: int) -> tuple[str, str, Any]:
        b = backend()
        b.load(seed)
        at_load = b.world_digest()
        for k in range(10):
            b.advance(0.02 * k, 0.5, 5)
        out = (at_load, b.world_digest(), b.state(10))
        b.close()
        return out

    first, again, other = run(7), run(7), run(8)
    assert first == again
    assert other[0] != first[0]  # the seed is in the chain's root


def test_a_thousand_ten_ms_ticks_in_single_precision_are_no_drift(carla):
    """CARLA hands the engine its delta in single precision (0.01 s becomes 0.0099999998):
    the clock check allows for that, not for a wrong period."""
    b = backend(cameras=(), tick_us=10_000)
    b.load(0)
    b.advance(0.0, 0.0, 20_000)
    assert b.time_us() == 200_000_000


def test_a_server_ticking_another_period_is_refused_time_drift_at_the_first_tick(carla, monkeypatch):
    """The article's 0.0999 s typed for 0.1 s: refused at once, not a hundred steps later."""
    monkeypatch.setenv("CARLA_DOUBLE_FAULTS", "delta_s=0.0999")
    b = backend(tick_us=100_000)
    b.load(0)
    with pytest.raises(TimeDrift) as err:
        b.advance(0.0, 0.0, 1)
    assert "lasted 99900.000 us, not the 100000 us tick" in err.value.detail


def test_another_client_ticking_the_world_is_refused_time_drift(carla, monkeypatch):
    b = backend()
    b.load(0)
    monkeypatch.setenv("CARLA_DOUBLE_FAULTS", f"extra_tick@{b.frame + 7}")  # another client ticks after tick 7
    b.advance(0.0, 0.0, 6)
    with pytest.raises(TimeDrift) as err:
        b.advance(0.0, 0.0, 1)
    assert "another client advances the world" in err.value.detail and f"t_us={7 * TICK_US}" in err.value.detail


def test_a_tick_longer_than_the_physics_substeps_cover_gets_more_of_them_or_is_refused(carla):
    """fixed_delta_seconds must not exceed max_substep_delta_time x max_substeps (0.1 s by
    default): past that CARLA's vehicles fall behind its clock without a word."""
    world = carla.Client().get_world()
    b = backend(cameras=(), tick_us=150_000)
    b.load(0)
    settings = world.get_settings()
    assert (settings.fixed_delta_seconds, settings.max_substep_delta_time, settings.max_substeps) == (0.15, 0.01, 15)
    b.close()
    backend(cameras=(), tick_us=100_000).load(0)
    assert world.get_settings().max_substeps == 10  # covered already: the server's own
    with pytest.raises(RateNotMultiple) as err:
        backend(cameras=(), tick_us=170_000).load(0)
    assert err.value.detail.startswith("carla: a tick of 170000 us is longer than the server's physics covers "
                                       "(16 substeps of 0.01 s)")


def test_the_map_is_asked_for_once_a_load(carla, monkeypatch):
    """CARLA's docs: get_map "is expensive, and should only be called once"; the ground's
    height under the ego and every scripted actor was asked of a fresh one each time."""
    calls = []
    get_map = carla.World.get_map
    monkeypatch.setattr(carla.World, "get_map", lambda self: calls.append(1) or get_map(self))
    b = backend(cameras=())
    b.load(0)
    assert len(calls) == 1
    b.load(0)
    assert len(calls) == 2  # a reload may be another town


def test_the_ego_steers_as_far_as_its_steered_wheels_allow_whichever_is_listed_first(carla, monkeypatch):
    """A full left steer is the steered wheels' maximum angle; the first wheel listed need
    not be a steered one."""
    wheels = [carla.WheelPhysicsControl(0.0), carla.WheelPhysicsControl(0.0), carla.WheelPhysicsControl(35.0),
              carla.WheelPhysicsControl(35.0)]
    monkeypatch.setattr(carla.Vehicle, "get_physics_control", lambda self: carla.VehiclePhysicsControl(wheels))
    b = backend(cameras=())
    b.load(0)
    b.advance(math.radians(35.0), 0.0, 1)
    assert b._ego.get_control().steer == pytest.approx(-1.0)  # CARLA's steer > 0 turns right
    wheels[:] = [carla.WheelPhysicsControl(0.0)] * 4
    with pytest.raises(ParticipantError, match=r"carla: the ego \(vehicle\.lincoln\.mkz\) reports no wheel that "):
        backend(cameras=()).load(0)


def test_a_server_that_stays_asynchronous_is_refused_at_load(carla, monkeypatch):
    monkeypatch.setenv("CARLA_DOUBLE_FAULTS", "no_sync")
    with pytest.raises(RateNotMultiple) as err:
        backend().load(0)
    assert "synchronous=False" in err.value.detail


def test_no_server_is_a_participant_error_naming_where_it_was_looked_for(carla, monkeypatch):
    monkeypatch.setenv("CARLA_DOUBLE_FAULTS", "down")
    with pytest.raises(ParticipantError) as err:
        backend(host="sim-host", port=2010, timeout_ms=1500).load(0)
    assert "no server answered at sim-host:2010 within 1500 ms" in err.value.detail


def test_a_server_that_stops_answering_mid_run_is_a_participant_error_at_that_tick(carla, monkeypatch):
    b = backend(timeout_ms=700)
    b.load(0)
    monkeypatch.setenv("CARLA_DOUBLE_FAULTS", f"gone@{b.frame + 8}")  # no answer to tick 8
    b.advance(0.0, 0.0, 5)
    with pytest.raises(ParticipantError) as err:
        b.advance(0.0, 0.0, 5)
    assert f"the tick to t_us={8 * TICK_US} got no answer within 700 ms" in err.value.detail


def test_an_image_that_never_comes_is_a_missing_frame_named_by_camera_and_frame(carla, monkeypatch):
    b = backend(timeout_ms=300)
    b.load(0)
    monkeypatch.setenv("CARLA_DOUBLE_FAULTS", f"drop_image=front@{b.frame + 10}")  # tick 10's
    b.advance(0.0, 0.0, 5)
    b.render("front", b.time_us(), (0.0, 0.0))
    b.advance(0.0, 0.0, 5)
    assert b.render("chase", b.time_us(), (0.0, 0.0)).stamp.t_us == 10 * TICK_US
    with pytest.raises(MissingFrame) as err:
        b.render("front", b.time_us(), (0.0, 0.0))
    assert "no image of camera 'front'" in err.value.detail and "within 300 ms" in err.value.detail


def test_a_render_for_another_time_is_a_stale_frame(carla):
    b = backend()
    b.load(0)
    b.advance(0.0, 0.0, 5)
    with pytest.raises(StaleFrame, match="not reached"):
        b.render("front", 10 * TICK_US, (0.0, 0.0))
    with pytest.raises(StaleFrame, match="already passed"):
        b.render("front", 0, (0.0, 0.0))


def test_a_camera_rig_off_shows_in_the_frames_pose(carla, monkeypatch):
    """pose_tolerance's input: a rig 2 cm out gives a frame pose 2 cm from the state."""
    monkeypatch.setenv("CARLA_DOUBLE_FAULTS", "rig_error_m=0.02")
    b = backend()
    b.load(0)
    b.advance(0.0, 0.0, 5)
    pose, state = b.render("front", b.time_us(), (0.0, 0.0)).stamp.pose, b.state(1).pose
    assert math.hypot(pose.x_m - state.x_m, pose.y_m - state.y_m) == pytest.approx(0.02, abs=1e-9)


def test_perturb_state_shifts_the_ego_along_map_x_from_the_next_tick(carla):
    b = backend()
    b.load(0)
    b.advance(0.0, 0.0, 5)
    before = b.state(1).pose
    b.perturb_ego(0.25)
    assert b.state(1).pose == before  # CARLA moves it at the next tick
    b.advance(0.0, 0.0, 1)
    moved = b.state(1).pose
    travel = load_scenario("right_turn").ego.start_speed_mps * TICK_US / 1e6
    assert moved.x_m == pytest.approx(before.x_m + 0.25 + travel, abs=1e-3)  # the double steps it that tick too


def test_the_bridge_core_refuses_a_backends_refusal_at_the_step_it_happened(carla, monkeypatch):
    monkeypatch.setenv("CARLA_DOUBLE_FAULTS", "delta_s=0.05")  # asked 0.02
    core = BridgeCore(backend(), BridgeConfig(("front",), None))
    core.step(StepRequest(0, 0, 100_000, 0, True, Action(0, 0, 0, 0.0, 0.0)))
    with pytest.raises(TimeDrift) as err:
        core.step(StepRequest(1, 100_000, 100_000, 0, False, Action(1, 0, 0, 0.0, 0.0)))
    assert err.value.step == 1


def test_each_signal_drives_the_traffic_light_nearest_it_on_the_scenarios_phases(carla):
    """red_signal's east_light is red for 12 s, then green 10 s, then yellow 3 s; the
    town's lights are frozen, so none runs its own cycle (the double's would turn them)."""
    b = CarlaBackend("red_signal", TICK_US, 64, 48, CarlaOptions(cameras=()))
    b.load(0)
    world = carla.Client().get_world()
    lights = {(round(a.get_location().x), round(a.get_location().y)): a for a in world.get_actors()
              if a.type_id == "traffic.traffic_light"}
    east, north, far = lights[(9, 5)], lights[(5, -9)], lights[(300, 300)]  # red_signal's, mirrored
    assert east.is_frozen() and north.is_frozen() and far.is_frozen()
    scenario = load_scenario("red_signal")
    seen = []
    for t_s in (0, 6, 11.98, 12, 21.98, 22, 24.98, 25):
        ticks = round(t_s * 1e6 / TICK_US) - b.time_us() // TICK_US
        if ticks:
            b.advance(0.0, 0.0, ticks)
        truth = {s.id: s.state for s in b.ground_truth().signals}
        assert truth == {s.id: signal_state(s, b.time_us()) for s in scenario.signals}
        assert str(east.get_state()).lower() == truth["east_light"]
        seen.append(truth["east_light"])
    assert seen == ["red", "red", "red", "green", "green", "yellow", "yellow", "red"]
    b.close()
    assert not east.is_frozen()  # the town's own cycles again


def test_a_signal_with_no_light_near_it_is_a_participant_error_naming_it(carla, monkeypatch):
    monkeypatch.setenv("CARLA_DOUBLE_FAULTS", "no_lights")
    with pytest.raises(ParticipantError) as err:
        CarlaBackend("red_signal", TICK_US, 64, 48, CarlaOptions(cameras=())).load(0)
    assert err.value.detail.startswith("carla: no traffic light within 10 m of signal 'east_light' at (9, -5)")


def test_a_reload_starts_as_a_fresh_backend_does(carla):
    """Nothing of a run reaches the next load: not its last command, not its images."""
    fresh = backend()
    fresh.load(0)
    first = (fresh.world_digest(), fresh.state(0))
    fresh.advance(0.2, 2.0, 25)
    fresh.render("front", fresh.time_us(), (0.0, 0.0))
    fresh.load(0)
    assert (fresh.world_digest(), fresh.state(0)) == first
    fresh.advance(0.0, 0.0, 5)
    assert fresh.render("front", fresh.time_us(), (0.0, 0.0)).stamp.t_us == 5 * TICK_US


def test_an_actor_destroyed_by_another_client_is_a_participant_error(carla):
    b = backend()
    b.load(0)
    van = next(a for a in carla.Client().get_world().get_actors() if a.type_id.startswith("vehicle.")
               and a.attributes["role_name"] != "hero")
    van.destroy()
    with pytest.raises(ParticipantError, match=r"actor \d+ \(vehicle\.lincoln\.mkz\) is gone from the world"):
        b.advance(0.0, 0.0, 1)


def test_a_light_that_does_not_show_its_signals_state_is_refused(carla, monkeypatch):
    monkeypatch.setenv("CARLA_DOUBLE_FAULTS", "light_stuck")  # the double's lights start green
    with pytest.raises(ParticipantError, match=r"shows green at t_us=0, where signal 'east_light' is red"):
        CarlaBackend("red_signal", TICK_US, 64, 48, CarlaOptions(cameras=())).load(0)


def test_a_handover_carries_the_ego_on_its_recorded_path_then_releases_it(carla):
    """handover_parked: until 5 s the ego is carried along its recorded rear-axle path,
    physics off, whatever it is told (as in the engine); from the next tick it drives."""
    scenario = load_scenario("handover_parked")
    assert scenario.handover is not None
    path = PathReplay(scenario.handover.path)
    b = CarlaBackend("handover_parked", TICK_US, 64, 48, CarlaOptions(cameras=()))
    b.load(0)
    ego = next(a for a in carla.Client().get_world().get_actors() if a.attributes.get("role_name") == "hero")
    for k in range(1, 51):
        b.advance(0.3, -5.0, 5)  # ignored while replaying
        state, t_us = b.state(k), k * 5 * TICK_US
        x, y, yaw = path.xyz_at(t_us)
        assert (state.pose.x_m, state.pose.y_m) == pytest.approx((x, y), abs=1e-9)
        assert state.pose.yaw_rad == pytest.approx(yaw, abs=1e-9)
        assert state.speed_mps == path.speed_at(t_us - 1)
    assert not ego._physics and b.time_us() == scenario.handover.t_us
    released = b.state(50)
    b.advance(0.0, 0.0, 5)  # the hand-over: the driver's command moves it from here
    assert ego._physics
    after = b.state(51)
    assert after.speed_mps == pytest.approx(released.speed_mps, abs=1e-6)
    moved = math.hypot(after.pose.x_m - released.pose.x_m, after.pose.y_m - released.pose.y_m)
    assert moved == pytest.approx(released.speed_mps * 5 * TICK_US / 1e6, rel=1e-3)


def test_a_scenario_that_cannot_be_found_is_a_scenario_error(carla):
    with pytest.raises(ScenarioError):
        CarlaBackend("no_such_scenario", TICK_US)


def test_without_the_carla_module_the_backend_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "carla", None)  # import carla raises ImportError
    values = {"scenario": "right_turn", "width": 64, "height": 48, "carla_host": "localhost", "carla_port": 2000,
              "carla_timeout_ms": 1000, "carla_town": "", "carla_vehicle": "vehicle.lincoln.mkz",
              "cameras": ["front"]}
    with pytest.raises(BackendUnavailable, match=r"CARLA 0\.10 Python API"):
        make_backend("carla", values, TICK_US)


def test_cameras_are_mounted_where_the_extrinsics_say(carla):
    """/tf_static publishes the engine's mounts: the camera CARLA renders from is there."""
    b = backend(cameras=("left",))
    b.load(0)
    sensor = next(a for a in carla.Client().get_world().get_actors() if a.type_id == "sensor.camera.rgb")
    t = sensor.get_transform()
    x, y, yaw = from_carla_xy_yaw(t.location.x, t.location.y, t.rotation.yaw)
    state, mount = b.state(0).pose, CAMERAS["left"]
    c, s = math.cos(state.yaw_rad), math.sin(state.yaw_rad)
    assert x == pytest.approx(state.x_m + mount.x_m * c - mount.y_m * s, abs=1e-9)
    assert y == pytest.approx(state.y_m + mount.x_m * s + mount.y_m * c, abs=1e-9)
    assert yaw == pytest.approx(state.yaw_rad + mount.yaw_rad, abs=1e-9)
    assert t.location.z == pytest.approx(mount.z_m)  # above the road (the double's is at z 0)
    assert t.rotation.pitch == pytest.approx(-math.degrees(mount.pitch_rad))  # CARLA's pitch > 0 looks up
    assert float(sensor.attributes["fov"]) == pytest.approx(math.degrees(mount.hfov_rad))
    assert b.intrinsics("left").fx == pytest.approx(32 / math.tan(mount.hfov_rad / 2))


def test_a_client_of_another_release_than_the_server_is_refused_at_load(carla, monkeypatch):
    """The server only logs a warning; a 0.9 client decodes 0.10's physics control wrong."""
    monkeypatch.setenv("CARLA_DOUBLE_FAULTS", "client_version=0.9.16")
    with pytest.raises(ParticipantError) as err:
        backend(cameras=()).load(0)
    assert err.value.detail == ("carla: the server at localhost:2000 is CARLA 0.10.0-double, this Python client "
                                "0.9.16: install the client of the server's release (the wheel in its "
                                "PythonAPI/carla/dist)")
    monkeypatch.setenv("CARLA_DOUBLE_FAULTS", "client_version=0.10.0")
    backend(cameras=()).load(0)  # the same release: a build suffix is no difference


def test_a_town_is_given_longer_to_load_than_a_call_and_a_failed_load_is_said_apart(carla, monkeypatch):
    """The client waits for a new map only as long as its time-out: CARLA 0.10 took longer
    than the 10 s default to load Town10HD_Opt, and the failure read "no server answered"."""
    monkeypatch.setenv("CARLA_DOUBLE_FAULTS", "load_s=30")
    b = backend(cameras=(), town="Town10HD_Opt", timeout_ms=10_000)
    b.load(0)
    assert carla.Client().get_world().get_map().name == "Carla/Maps/Town10HD_Opt"
    b.close()
    monkeypatch.setenv("CARLA_DOUBLE_FAULTS", "load_s=500")
    with pytest.raises(ParticipantError) as err:
        backend(cameras=(), town="Town10HD_Opt", timeout_ms=10_000).load(0)
    assert err.value.detail.startswith("carla: the server at localhost:2000 did not load town 'Town10HD_Opt' "
                                       "(given 120 s: RuntimeError: time-out of 120000ms")


def test_scripted_actors_have_no_collision_to_push_the_ego_with(carla):
    """CARLA 0.10 keeps a physics-off vehicle's collision: a scripted car set onto the ego
    would shove it. Contacts are the boxes' overlap, as in the embedded engine."""
    b = backend(cameras=())
    b.load(0)
    assert b._actors and all(not actor._collisions for actor in b._actors)
    assert b._ego._collisions


def test_a_wheel_with_a_maximum_angle_that_steering_does_not_turn_is_not_a_steered_one(carla, monkeypatch):
    wheels = [carla.WheelPhysicsControl(35.0), carla.WheelPhysicsControl(35.0),
              carla.WheelPhysicsControl(10.0, affected_by_steering=False),
              carla.WheelPhysicsControl(10.0, affected_by_steering=False)]
    monkeypatch.setattr(carla.Vehicle, "get_physics_control", lambda self: carla.VehiclePhysicsControl(wheels))
    b = backend(cameras=())
    b.load(0)
    b.advance(math.radians(10.0), 0.0, 1)
    assert b._ego.get_control().steer == pytest.approx(-10.0 / 35.0)  # a full steer is 35 degrees, not 10


def test_a_world_a_crashed_run_left_synchronous_is_given_back_asynchronous(carla):
    """close() gave back the settings it found: a server left synchronous by a run that
    crashed stayed synchronous, waiting for a tick no one sends."""
    world = carla.Client().get_world()
    left = world.get_settings()
    left.synchronous_mode, left.fixed_delta_seconds = True, 0.05
    world.apply_settings(left)
    b = backend(cameras=())
    b.load(0)
    b.close()
    settings = world.get_settings()
    assert (settings.synchronous_mode, settings.fixed_delta_seconds) == (False, None)


def test_a_scripted_actor_carla_will_not_spawn_is_named(carla, monkeypatch):
    """CARLA 0.10 refuses some walker blueprints it lists ("invalid actor description",
    carla#8818): the refusal named no actor."""
    monkeypatch.setenv("CARLA_DOUBLE_FAULTS", "bad_blueprint=walker.pedestrian.0001")
    with pytest.raises(ParticipantError) as err:
        backend(cameras=()).load(0)
    assert err.value.detail == ("carla: the scenario's pedestrian 'walker' could not be spawned as "
                                "walker.pedestrian.0001 at its start pose (Spawn failed because of invalid actor "
                                "description)")


def test_lights_a_crashed_run_left_frozen_cycle_again_in_the_next_run(carla):
    """close() unfroze the lights only of a run that froze them: after a run with signals
    crashed, a run without signals got a town whose lights never turned."""
    crashed = CarlaBackend("red_signal", TICK_US, 64, 48, CarlaOptions(cameras=()))
    crashed.load(0)  # freezes every light; never closed
    world = carla.Client().get_world()
    lights = [a for a in world.get_actors() if a.type_id == "traffic.traffic_light"]
    assert lights and all(light.is_frozen() for light in lights)
    b = CarlaBackend("right_turn", TICK_US, 64, 48, CarlaOptions(cameras=()))
    b.load(0)
    assert not any(light.is_frozen() for light in lights)
    b.close()


def test_a_scripted_actor_whose_setting_up_fails_is_still_destroyed_at_close(carla, monkeypatch):
    """An actor was counted as the run's only once set up: a time-out between its spawn and
    its last setting (physics, collisions, pose) left it standing in the town, in the next
    run's images and physics."""
    def timed_out(self: Any, enabled: bool = True) -> None:
        raise RuntimeError("time-out of 10000ms while waiting for the simulator")

    monkeypatch.setattr(carla.Actor, "set_collisions", timed_out)
    b = backend(cameras=())
    with pytest.raises(ParticipantError, match="carla: RuntimeError: time-out"):
        b.load(0)
    b.close()
    world = carla.Client().get_world()
    assert [a.type_id for a in world.get_actors()] == ["traffic.traffic_light"] * 3  # the town's own
