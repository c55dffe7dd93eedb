"""The torch planner: period checks, camera requests, bit-exact replay, pixel sensitivity,
anchored tracking, weight files and config errors."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import pickle
import struct
import subprocess
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
import torch

from simforge_ros.core.errors import ConfigError, MissingFrame, ParticipantError, RateNotMultiple
from simforge_ros.core.values import Action, Pose2D, TrajectoryPoint, VehicleState
from simforge_ros.drivers.policy import Observation
from simforge_ros.drivers.probe import generated_inputs
from simforge_ros.drivers.torch_planner import (
    TRACKER,
    TorchPlanner,
    TorchPlannerConfig,
    _torch_mode,
    from_params,
    track,
)

DECISION_US = 100_000
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def frames() -> Mapping[str, np.ndarray]:
    return generated_inputs(7)[0].frames


def _obs(step: int, state: VehicleState, frames: Mapping[str, np.ndarray]) -> Observation:
    return Observation(step, step * DECISION_US, DECISION_US, state, frames)


ORIGIN = Pose2D(0.0, 0.0, 0.0)


def _state(step: int, pose: Pose2D = ORIGIN, speed_mps: float = 5.0) -> VehicleState:
    return VehicleState(step, step * DECISION_US, pose, speed_mps, 0.0, 0.0)


def _bits(action: Action) -> bytes:
    """Every float of an action as exact bits (== would equate -0.0 and 0.0)."""
    vals = [action.steer_rad, action.accel_mps2, action.anchor.x_m, action.anchor.y_m]
    vals += [v for p in action.trajectory for v in (p.x_m, p.y_m)]
    return repr(action).encode() + struct.pack(f"<{len(vals)}d", *vals)


def _drive(planner: TorchPlanner, frames: Mapping[str, np.ndarray], steps: int) -> list[Action]:
    """Closed loop on a kinematic bicycle; frames only where the planner asks for them."""
    x = y = yaw = 0.0
    v = 3.0
    actions = []
    for k in range(steps):
        state = _state(k, Pose2D(x, y, yaw), v)
        obs_frames = {c: frames[c] for c in planner.cameras_at(k)}
        a = planner.decide(_obs(k, state, obs_frames))
        actions.append(a)
        dt = DECISION_US / 1e6
        x, y = x + v * math.cos(yaw) * dt, y + v * math.sin(yaw) * dt
        yaw += v / TRACKER.wheelbase_m * math.tan(a.steer_rad) * dt
        v = max(0.0, v + a.accel_mps2 * dt)
    return actions


def test_reset_refuses_a_planning_period_that_is_not_whole_steps() -> None:
    planner = TorchPlanner(TorchPlannerConfig(planning_period_us=250_000))
    with pytest.raises(RateNotMultiple) as info:
        planner.reset(0, DECISION_US)
    assert info.value.code == "rate_not_multiple"
    assert info.value.step == -1
    assert "driver.planning_period_us=250000" in info.value.detail
    assert "decision_us=100000" in info.value.detail
    planner.reset(0, 50_000)  # 250 000 us is 5 steps of 50 000 us


def test_cameras_only_at_planning_steps() -> None:
    planner = TorchPlanner(TorchPlannerConfig())
    planner.reset(0, DECISION_US)
    asked = {k: planner.cameras_at(k) for k in range(12)}
    assert asked[0] == asked[5] == asked[10] == ("front", "left", "rear", "right")
    assert all(asked[k] == () for k in range(12) if k % 5)


def test_same_config_and_seed_give_bit_identical_actions(frames: Mapping[str, np.ndarray]) -> None:
    runs = []
    for _ in range(2):
        planner = TorchPlanner(TorchPlannerConfig(samples=3))
        planner.reset(42, DECISION_US)
        runs.append([_bits(a) for a in _drive(planner, frames, 30)])
    assert runs[0] == runs[1]


def test_untrained_seeded_planner_drives_sensibly(frames: Mapping[str, np.ndarray]) -> None:
    planner = TorchPlanner(TorchPlannerConfig())
    planner.reset(0, DECISION_US)
    actions = _drive(planner, frames, 50)
    assert all(a.has_plan for a in actions)
    assert all(abs(a.steer_rad) < 0.05 for a in actions)
    assert all(0.0 < a.accel_mps2 <= TRACKER.max_accel_mps2 for a in actions[:20])  # 3 -> 8 m/s
    last = actions[-1].anchor
    assert last.x_m > 15.0 and abs(last.y_m) < 0.5 and abs(last.yaw_rad) < 0.1
    points = actions[0].trajectory
    assert [p.dt_us for p in points] == [100_000 * (i + 1) for i in range(10)]
    assert all(b.x_m >= a.x_m for a, b in itertools.pairwise(points))


def test_one_changed_pixel_changes_the_plan_and_tracking_uses_the_anchored_plan(
    frames: Mapping[str, np.ndarray],
) -> None:
    changed = dict(frames)
    rear = frames["rear"].copy()
    rear[90, 160, 1] = (int(rear[90, 160, 1]) + 100) % 256
    changed["rear"] = rear
    anchor = Pose2D(10.0, -2.0, 0.3)
    results = []
    for fr in (frames, changed):
        planner = TorchPlanner(TorchPlannerConfig())
        planner.reset(0, DECISION_US)
        planned = planner.decide(_obs(0, _state(0, anchor), fr))
        # Step 1 is no planning step: no frames; the car has moved 0.5 m along its heading.
        moved = Pose2D(10.0 + 0.5 * math.cos(0.3), -2.0 + 0.5 * math.sin(0.3), 0.3)
        tracked = planner.decide(_obs(1, _state(1, moved), {}))
        results.append((planned, tracked))
    (plan_a, track_a), (plan_b, track_b) = results
    assert plan_a.trajectory != plan_b.trajectory
    assert max(abs(p.y_m - q.y_m) for p, q in zip(plan_a.trajectory, plan_b.trajectory, strict=True)) < 0.01
    for planned, tracked in results:
        assert tracked.has_plan and tracked.plan_step == 0 and tracked.anchor == anchor
        assert tracked.trajectory == planned.trajectory
        expected = track(moved, 5.0, anchor, planned.trajectory, DECISION_US)
        assert (tracked.steer_rad, tracked.accel_mps2) == expected
    assert (track_a.steer_rad, track_a.accel_mps2) != (track_b.steer_rad, track_b.accel_mps2)


def test_tracking_transforms_the_anchored_plan_into_the_current_frame() -> None:
    left_turn = tuple(TrajectoryPoint(100_000 * (i + 1), 0.5 * (i + 1), 0.05 * (i + 1) ** 2)
                      for i in range(10))  # fmt: skip
    anchor = Pose2D(3.0, 4.0, math.pi / 2)  # heading +y in the map
    steer, _ = track(anchor, 5.0, anchor, left_turn, 0)
    assert steer > 0.0  # plan bends left of the anchor heading
    # The same plan seen from a pose already turned past the plan's heading steers right.
    steer_past, _ = track(Pose2D(3.0, 4.0, math.pi / 2 + 0.8), 5.0, anchor, left_turn, 0)
    assert steer_past < 0.0
    straight = tuple(TrajectoryPoint(100_000 * (i + 1), 0.5 * (i + 1), 0.0) for i in range(10))
    # 5 m/s planned, 4.5 m/s driven: close the gap over the 0.5 s speed preview.
    assert track(anchor, 4.5, anchor, straight, 200_000) == pytest.approx((0.0, 1.0), abs=1e-9)
    assert track(anchor, 20.0, anchor, straight, 200_000)[1] == -TRACKER.max_brake_mps2


def test_weight_files_round_trip(tmp_path: Path, frames: Mapping[str, np.ndarray]) -> None:
    seeded = TorchPlanner(TorchPlannerConfig(weights_seed=3))
    assert seeded.weights_sha256 == TorchPlanner(TorchPlannerConfig(weights_seed=3)).weights_sha256
    assert seeded.weights_sha256 != TorchPlanner(TorchPlannerConfig()).weights_sha256
    state_path = tmp_path / "planner.pth"
    torch.save(seeded.model.state_dict(), state_path)
    script_path = tmp_path / "planner_ts.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(seeded.model), str(script_path))
    obs = _obs(0, _state(0), frames)
    seeded.reset(9, DECISION_US)
    want = seeded.plan(obs)
    for path, kind in ((state_path, "state_dict"), (script_path, "torchscript")):
        loaded = TorchPlanner(TorchPlannerConfig(weights_path=str(path)))
        loaded.reset(9, DECISION_US)
        assert loaded.plan(obs) == want
        assert loaded.weights_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        assert loaded.describe()["weights"] == {"kind": kind, "sha256": loaded.weights_sha256}


class _NaNPlanner(torch.nn.Module):
    def forward(self, images: torch.Tensor, speed_mps: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return torch.full((noise.shape[0], 10, 2), float("nan"))


class _NaNOnRealFramesPlanner(torch.nn.Module):
    """Finite on the black start-up frames, NaN on any drawn one."""

    def forward(self, images: torch.Tensor, speed_mps: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        scale = torch.where(images.sum() > 0, torch.tensor(float("nan")), torch.tensor(0.0))
        return torch.zeros((noise.shape[0], 10, 2)) * scale


class _FlatPlanner(torch.nn.Module):
    def forward(self, images: torch.Tensor, speed_mps: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return torch.zeros((noise.shape[0], 3))


class _OneCameraPlanner(torch.nn.Module):
    def forward(self, images: torch.Tensor, speed_mps: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return images.reshape(1, 180, 320, 3)[:, :10, :2, 0].float()


class _SamplingPlanner(torch.nn.Module):
    """Draws from torch's global generator, as a model with dropout-like noise may."""

    def forward(self, images: torch.Tensor, speed_mps: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return torch.randn((noise.shape[0], 10, 2))


class _FixedSizePlanner(torch.nn.Module):
    """Takes four 320x180 frames and no other size (a reshape of someone's own)."""

    def forward(self, images: torch.Tensor, speed_mps: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return images.reshape(4, 180, 320, 3)[:1, :10, :2, 0].float()


class _SmallSizePlanner(torch.nn.Module):
    """Takes four 160x90 frames and no other size."""

    def forward(self, images: torch.Tensor, speed_mps: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return images.reshape(4, 90, 160, 3)[:1, :10, :2, 0].float()


def _script(module: torch.nn.Module, path: Path) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(module), str(path))
    return str(path)


def test_weights_that_do_not_fit_are_a_config_error(tmp_path: Path) -> None:
    """Named by the driver node's parameter, whatever torch raised: never a traceback."""
    other = TorchPlanner(TorchPlannerConfig(waypoints=6))
    six = tmp_path / "six.pt"
    torch.save(other.model.state_dict(), six)
    (tmp_path / "text.pt").write_text("not weights\n")
    (tmp_path / "empty.pt").write_bytes(b"")
    (tmp_path / "pickle.pt").write_bytes(pickle.dumps({"a": object()}, protocol=2))  # not weights_only
    (tmp_path / "zip.pt").write_bytes(b"PK\x03\x04" + bytes(60))
    cases = {
        str(six): "size mismatch", str(tmp_path / "missing.pt"): "missing.pt",
        str(tmp_path / "text.pt"): "not a file torch.save", str(tmp_path / "empty.pt"): "not a file torch.save",
        str(tmp_path / "pickle.pt"): "UnpicklingError",
        str(tmp_path / "zip.pt"): "zip.pt: ",
        _script(_FlatPlanner(), tmp_path / "flat.pt"): "it answered (1, 3)",
        _script(_OneCameraPlanner(), tmp_path / "one.pt"): "RuntimeError",  # fails on 4 cameras
    }
    for bad, said in cases.items():
        with pytest.raises(ConfigError) as info:
            TorchPlanner(TorchPlannerConfig(weights_path=bad))
        problem = info.value.problems[0]
        assert problem.field == "driver.weights" and said in str(problem.got), (bad, problem)
        assert "\n" not in str(info.value), str(info.value)  # torch's dozen lines cut to the first


def test_a_size_mismatch_names_both_shapes(tmp_path: Path) -> None:
    """torch's message names the shapes past 120 characters, where a got was once cut."""
    three = tmp_path / "three.pt"
    torch.save(TorchPlanner(TorchPlannerConfig(cameras=("front", "left", "rear"))).model.state_dict(), three)
    with pytest.raises(ConfigError) as info:
        TorchPlanner(TorchPlannerConfig(weights_path=str(three)))
    said = str(info.value)
    assert "from checkpoint" in said and "current model" in said and said.count("torch.Size") >= 2, said


def test_a_model_sampling_from_the_global_generator_repeats_when_deterministic(
        tmp_path: Path, frames: Mapping[str, np.ndarray]) -> None:
    """torch seeds its global generator at random in each process: seeded per call from
    (run seed, step), and put back as it was after the call."""
    path = _script(_SamplingPlanner(), tmp_path / "sampling.pt")
    obs = _obs(5, _state(5), frames)
    plans = []
    for _ in range(2):
        torch.manual_seed(len(plans))  # as if another process
        planner = TorchPlanner(TorchPlannerConfig(weights_path=path))
        planner.reset(3, DECISION_US)
        before = torch.get_rng_state()
        plans.append(planner.plan(obs))
        assert torch.equal(torch.get_rng_state(), before)
    assert plans[0] == plans[1]
    planner.reset(4, DECISION_US)
    assert planner.plan(obs) != plans[0]  # another run seed, other draws
    off = TorchPlanner(TorchPlannerConfig(weights_path=path, deterministic=False))
    off.reset(3, DECISION_US)
    assert off.plan(obs) != off.plan(obs)  # 'off' leaves the global generator alone


def test_the_planner_plans_at_the_size_the_bridge_renders(tmp_path: Path) -> None:
    """The driver hands it the bridge's width and height before step 0; a model that
    cannot take them is named then, as the weights field, with the size."""
    small = generated_inputs(7, hw=(90, 160))[0].frames
    planner = TorchPlanner(TorchPlannerConfig())
    assert planner.use_frames_hw((90, 160)) is True and planner.use_frames_hw((90, 160)) is False
    planner.reset(0, DECISION_US)
    assert len(planner.plan(_obs(0, _state(0), small))) == 10
    assert planner.describe()["frames_hw"] == [90, 160]
    with pytest.raises(ParticipantError) as info:
        planner.plan(_obs(5, _state(5), generated_inputs(7)[0].frames))
    assert info.value.step == 5 and "(90, 160, 3) uint8" in info.value.detail
    fixed = TorchPlanner(TorchPlannerConfig(weights_path=_script(_FixedSizePlanner(), tmp_path / "fixed.pt")))
    with pytest.raises(ConfigError) as err:
        fixed.use_frames_hw((90, 160))
    assert err.value.problems[0].field == "driver.weights" and "cameras of 160x90" in str(err.value)
    # the driver node does not know the bridge's size when it builds the planner: a model
    # that takes only the bridge's was refused at the default size, before it was asked
    small_path = _script(_SmallSizePlanner(), tmp_path / "small.pt")
    with pytest.raises(ConfigError):
        TorchPlanner(TorchPlannerConfig(weights_path=small_path))
    later = TorchPlanner(TorchPlannerConfig(weights_path=small_path), frames_hw=None)
    assert later.use_frames_hw((90, 160)) is True
    unknown = TorchPlanner(TorchPlannerConfig(weights_path=small_path), frames_hw=None)
    with pytest.raises(ConfigError):  # the default size, once named, is checked too
        unknown.use_frames_hw((180, 320))


def test_a_model_answering_non_finite_values_is_refused_at_its_step(
        tmp_path: Path, frames: Mapping[str, np.ndarray]) -> None:
    planner = TorchPlanner(TorchPlannerConfig(weights_path=_script(_NaNOnRealFramesPlanner(), tmp_path / "nan.pt")))
    planner.reset(0, DECISION_US)
    with pytest.raises(ParticipantError) as info:
        planner.decide(_obs(5, _state(5), frames))
    assert info.value.step == 5 and "non-finite values" in info.value.detail


def test_a_model_answering_non_finite_values_to_black_frames_is_named_as_the_weights(tmp_path: Path) -> None:
    """Refused at step 0 as "the torch planner's model answered non-finite values", without
    the field or the file, where a model of the wrong shape is named by both."""
    path = _script(_NaNPlanner(), tmp_path / "nan.pt")
    with pytest.raises(ConfigError) as info:
        TorchPlanner(TorchPlannerConfig(weights_path=path))
    problem = info.value.problems[0]
    assert problem.field == "driver.weights" and str(problem.got) == f"{path}: it answered non-finite values to " \
        "black frames"


def test_a_damaged_weights_file_is_refused_not_driven(tmp_path: Path) -> None:
    """torch.load checks no CRC: 100 bytes changed inside a saved tensor loaded as other
    weights, and the run counted."""
    path = tmp_path / "weights.pt"
    torch.save(TorchPlanner(TorchPlannerConfig()).model.state_dict(), path)
    blob = bytearray(path.read_bytes())
    start = blob.index(b"data/0") + 200  # inside the first tensor's bytes (stored, uncompressed)
    for i in range(start, start + 100):
        blob[i] ^= 0xFF
    path.write_bytes(bytes(blob))
    with pytest.raises(ConfigError) as info:
        TorchPlanner(TorchPlannerConfig(weights_path=str(path)))
    problem = info.value.problems[0]
    assert problem.field == "driver.weights" and "damaged: its member " in str(problem.got)
    assert "fails its CRC check" in str(problem.got)


def test_samples_reduce_and_dtype_options(frames: Mapping[str, np.ndarray]) -> None:
    obs = _obs(5, _state(5), frames)
    plans = {}
    for key, cfg in {
        "one": TorchPlannerConfig(),
        "mean": TorchPlannerConfig(samples=4),
        "first": TorchPlannerConfig(samples=4, sample_reduce="first"),
        "bf16": TorchPlannerConfig(dtype="bfloat16"),
    }.items():
        planner = TorchPlanner(cfg)
        planner.reset(1, DECISION_US)
        plans[key] = planner.plan(obs)
        assert planner.plan(obs) == plans[key]  # deterministic: same step, same noise
    assert len({plans[k] for k in plans}) == 4
    unseeded = TorchPlanner(TorchPlannerConfig(samples=4, deterministic=False))
    unseeded.reset(1, DECISION_US)
    assert unseeded.plan(obs) != unseeded.plan(obs)


def test_model_calls_restore_torch_global_settings(frames: Mapping[str, np.ndarray]) -> None:
    threads, det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    planner = TorchPlanner(TorchPlannerConfig(num_threads=1))
    planner.reset(0, DECISION_US)
    planner.plan(_obs(0, _state(0), frames))
    assert (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()) == (threads, det)


def test_a_missing_camera_at_a_planning_step_is_refused(frames: Mapping[str, np.ndarray]) -> None:
    planner = TorchPlanner(TorchPlannerConfig())
    planner.reset(0, DECISION_US)
    partial = {c: f for c, f in frames.items() if c != "left"}
    with pytest.raises(MissingFrame) as info:
        planner.decide(_obs(0, _state(0), partial))
    assert info.value.code == "missing_frame" and "'left'" in info.value.detail


def test_describe_is_json_and_names_every_option() -> None:
    planner = TorchPlanner(TorchPlannerConfig(weights_seed=2))
    desc = json.loads(json.dumps(planner.describe()))
    assert desc["name"] == "torch" and desc["cameras"] == ["front", "left", "rear", "right"]
    for key in ("planning_period_us", "waypoints", "waypoint_dt_us", "deterministic", "samples",
                "sample_reduce", "dtype", "weights_seed", "weights_path", "num_threads",
                "seed_handling", "frames_hw", "torch_version", "torch_cpu_capability"):  # fmt: skip
        assert key in desc
    assert desc["weights"] == {"kind": "seeded", "sha256": planner.weights_sha256}


def test_from_params_builds_a_config_and_names_every_bad_field() -> None:
    cfg = from_params({"cameras": ["front"], "planning_period_us": 300_000, "samples": 2,
                       "target_speed_mps": 6, "weights_path": "", "dtype": "bfloat16"})  # fmt: skip
    assert cfg == TorchPlannerConfig(cameras=("front",), planning_period_us=300_000, samples=2,
                                     target_speed_mps=6.0, dtype="bfloat16")  # fmt: skip
    bad = {"planning_period_us": "500000", "samples": 0, "dtype": "float16", "bogus": 1,
           "deterministic": "yes", "cameras": [], "sample_reduce": "median"}  # fmt: skip
    with pytest.raises(ConfigError) as info:
        from_params(bad, source="run.yaml")
    problems = {p.field: p for p in info.value.problems}
    assert set(problems) == {f"driver.{k}" for k in bad}
    assert problems["driver.samples"].expected == "an integer from 1 to 1024"
    assert "float32" in problems["driver.dtype"].expected
    assert all(p.source == "run.yaml" for p in problems.values())
    with pytest.raises(ConfigError, match=r"driver\.waypoints"):
        TorchPlannerConfig(waypoints=True)
    # a plan the loop would refuse at step 0 (core.lockstep.MAX_PLAN_POINTS) is refused here
    with pytest.raises(ConfigError, match=r"driver\.waypoints: expected an integer from 1 to 10000, got 10001"):
        TorchPlannerConfig(waypoints=10_001)
    # a kept run's manifest edited to 10^30: "Overflow when unpacking long long", no field named
    with pytest.raises(ConfigError, match=r"driver\.weights_seed: expected an integer from 0 to 9223372036854775807"):
        TorchPlannerConfig(weights_seed=10**30)


def test_the_drivers_package_does_not_import_torch() -> None:
    code = "import sys, simforge_ros.drivers.policy; print('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(("planning_us", "camera_steps", "first"), [
    (500_000, 1, None),  # frames every step: every need is met
    (500_000, 5, None),  # the camera period is the planning period
    (600_000, 3, None),  # ... or divides it
    (500_000, 3, 5),  # plans at 5, renders at 3 and 6
    (300_000, 2, 3),
    (100_000, 2, 1),
])
def test_the_first_planning_step_a_camera_period_misses(planning_us, camera_steps, first):
    from simforge_ros.drivers.policy import first_step_without_frames

    planner = TorchPlanner(TorchPlannerConfig(planning_period_us=planning_us))
    planner.reset(0, 100_000)
    assert first_step_without_frames(planner, camera_steps) == first


def test_a_policy_that_needs_frames_late_is_caught_only_within_the_horizon():
    from simforge_ros.drivers.policy import first_step_without_frames

    class Late:  # frames at step 200 000 only
        name = "late"

        def cameras_at(self, step: int) -> tuple[str, ...]:
            return ("front",) if step == 200_000 else ()

    assert first_step_without_frames(Late(), 7) is None  # past FRAME_CHECK_STEPS: refused when it comes
    assert first_step_without_frames(Late(), 7, horizon=200_001) == 200_000


_DRAWS = """
import hashlib, torch
from simforge_ros.drivers.torch_planner import TorchPlanner, TorchPlannerConfig, call_noise
print(torch.backends.cpu.get_cpu_capability())
print(TorchPlanner(TorchPlannerConfig()).weights_sha256)
print(hashlib.sha256(call_noise(7, 4, 129, 0.5).numpy().tobytes()).hexdigest())
"""


def test_seeded_weights_and_noise_do_not_depend_on_torchs_cpu_kernels() -> None:
    """torch's uniform_ and randn take a vectorised path with AVX2 and a plain one without,
    whose last bits differ: the default seeded weights, and the noise of samples > 1, were
    other numbers on a CPU without AVX2 (ATEN_CPU_CAPABILITY=default stands in for one), and
    a run repeated on it did not repeat."""
    said = {}
    for capability in ("default", ""):
        env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
        if capability:
            env["ATEN_CPU_CAPABILITY"] = capability
        out = subprocess.run([sys.executable, "-c", _DRAWS], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        kernels, weights, noise = out.stdout.split()
        said[kernels] = (weights, noise)
    assert "DEFAULT" in said
    assert len(set(said.values())) == 1, said


def test_a_whole_module_saved_is_named_without_terminal_codes(tmp_path: Path) -> None:
    """torch.save(model) (not its state_dict) is refused by weights_only loading, whose
    message carried bold on and off as raw escape codes into the one-line error."""
    path = tmp_path / "module.pt"
    torch.save(TorchPlanner(TorchPlannerConfig()).model, path)
    with pytest.raises(ConfigError) as info:
        TorchPlanner(TorchPlannerConfig(weights_path=str(path)))
    assert info.value.problems[0].field == "driver.weights"
    assert "\x1b" not in str(info.value) and "\\x1b" not in str(info.value)


def test_weights_saved_without_crcs_are_not_called_damaged(tmp_path: Path) -> None:
    """torch can save without CRCs (every member's CRC 0); testzip took each for damage."""
    from torch.utils.serialization import config

    path = tmp_path / "nocrc.pt"
    before = config.save.compute_crc32
    config.save.compute_crc32 = False
    try:
        torch.save(TorchPlanner(TorchPlannerConfig()).model.state_dict(), path)
    finally:
        config.save.compute_crc32 = before
    assert TorchPlanner(TorchPlannerConfig(weights_path=str(path))).describe()["weights_path"] == str(path)


_PLANS = """
import hashlib, json, numpy as np, torch
from simforge_ros.drivers.torch_planner import TorchPlanner, TorchPlannerConfig, _torch_mode
said = hashlib.sha256()
for samples in (1, 8):
    planner = TorchPlanner(TorchPlannerConfig(samples=samples))
    rng = np.random.default_rng(1)
    images = torch.from_numpy(rng.integers(0, 256, (4, 180, 320, 3), dtype=np.uint8))
    noise = torch.from_numpy(rng.standard_normal((samples, planner.model.latent_dim))).float()
    with _torch_mode(True, 1), torch.inference_mode():
        said.update(planner.model(images, torch.tensor(7.3), noise).numpy().tobytes())
described = planner.describe()
print(json.dumps([said.hexdigest(), described["mkl_branch"], described["onednn"]]))
"""


@pytest.mark.parametrize("isa", ["MKL_ENABLE_INSTRUCTIONS=SSE4_2", "ONEDNN_MAX_CPU_ISA=SSE41", "MKL_CBWR=AVX2"])
def test_the_planners_numbers_do_not_depend_on_the_cpus_instruction_sets(isa: str) -> None:
    """MKL's matrix products and oneDNN's convolutions pick kernels by the CPU's instruction
    sets, whose last bits differ: the planner's plans (and a run's chain, from step 0) were
    other numbers on an AVX2 machine than on an AVX-512 one, and `diff` named no setup
    difference. The libraries' own limits stand in for an older CPU here (on this AVX-512
    machine the old code gave other plans under each of them)."""
    said = []
    for extra in ({}, dict([isa.split("=")])):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MKL_", "ONEDNN_", "DNNL_"))} | extra
        out = subprocess.run([sys.executable, "-c", _PLANS], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        said.append(json.loads(out.stdout))
    assert said[0] == said[1], said
    # as the manifest's driver configuration names them (a torch without MKL: aarch64)
    assert said[0][1:] == ["COMPATIBLE" if torch.backends.mkl.is_available() else "no MKL", "off"]


def test_an_undeterministic_planner_leaves_onednn_to_torch() -> None:
    planner = TorchPlanner(TorchPlannerConfig(deterministic=False))
    assert planner.describe()["onednn"] == "torch default"
    with _torch_mode(False, 1):
        assert torch.backends.mkldnn.enabled == torch.backends.mkldnn.is_available()
    with _torch_mode(True, 1):
        assert not torch.backends.mkldnn.enabled
    assert torch.backends.mkldnn.enabled == torch.backends.mkldnn.is_available()  # put back


def test_a_torch_whose_mkl_exports_no_service_calls_gets_the_same_plans_through_the_environment() -> None:
    """Where libtorch_cpu does not export MKL's service calls (another torch build), the
    planner sets MKL_CBWR before MKL's first call instead, and names its branch unknown."""
    hidden = ("import ctypes, torch\n"
              "def no_mkl(*args, **kwargs):\n"
              "    raise OSError('hidden')\n"
              "ctypes.CDLL = no_mkl\n")
    said = []
    for program, isa in ((_PLANS, {}), (hidden + _PLANS, {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"})):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MKL_", "ONEDNN_", "DNNL_"))} | isa
        out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        said.append(json.loads(out.stdout))
    assert said[1] == [said[0][0], "unknown" if torch.backends.mkl.is_available() else "no MKL", "off"], said
