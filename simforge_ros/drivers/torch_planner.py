"""A learned surround-camera planner: a small CNN proposes waypoints, pure pursuit tracks them.

The network adds a bounded residual to a nominal "keep lane, ease toward the target speed"
trajectory, so seeded untrained weights drive sensibly while every pixel still reaches the
plan. Plans are anchored where they were made and tracked every step from the observed
state. Sampling noise comes from a generator seeded by (run seed, step).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import math
import os
import re
import warnings
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from simforge_ros.core.errors import (
    ConfigError,
    MissingFrame,
    ParticipantError,
    Printed,
    Problem,
    RateNotMultiple,
    one_line,
)
from simforge_ros.core.limits import INT64, PLANNER_SAMPLES, TORCH_THREADS
from simforge_ros.core.lockstep import MAX_PLAN_POINTS
from simforge_ros.core.values import Action, Pose2D, TrajectoryPoint
from simforge_ros.drivers.policy import Observation

_MKL_BRANCHES = {1: "OFF", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1", 8: "SSE4_2", 9: "AVX",
                 10: "AVX2", 12: "AVX512"}  # mkl_service.h's MKL_CBWR_* branches
_MKL_COMPATIBLE = 3


def _mkl_service() -> Any:
    """torch's own Intel MKL (in libtorch_cpu, which exports its service calls), or None:
    a torch built without MKL (ARM), whose matrix products do not pick kernels by CPU, or
    one that does not export them."""
    if not torch.backends.mkl.is_available():
        return None
    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        get, put = lib.mkl_serv_cbwr_get, lib.mkl_serv_cbwr_set
    except (OSError, AttributeError):
        return None
    get.argtypes, get.restype, put.argtypes, put.restype = [ctypes.c_int], ctypes.c_int, [ctypes.c_int], ctypes.c_int
    return lib


def mkl_branch() -> str:
    """The code path MKL's matrix products take, by name ("COMPATIBLE"), for the manifest."""
    lib = _mkl_service()
    if lib is None:
        return "unknown" if torch.backends.mkl.is_available() else "no MKL"
    branch = int(lib.mkl_serv_cbwr_get(1))  # MKL_CBWR_BRANCH
    return _MKL_BRANCHES.get(branch, f"branch {branch}")


def _mkl_compatible() -> None:
    """MKL's conditional numerical reproducibility set to COMPATIBLE for the process, before
    any matrix product: MKL picks its kernels by the CPU's instruction sets (AVX-512, AVX2,
    ...), whose last bits differ, so the planner's linear layers gave other numbers (and
    other digests) on an AVX2 machine than on an AVX-512 one; COMPATIBLE takes one path on
    every x86 CPU. It cannot be changed once MKL has run: a process that ran a product
    first keeps its branch, which the manifest then names (mkl_branch)."""
    lib = _mkl_service()
    if lib is None:
        if torch.backends.mkl.is_available():  # MKL reads it at its first call
            os.environ["MKL_CBWR"] = "COMPATIBLE"
    elif lib.mkl_serv_cbwr_get(1) != _MKL_COMPATIBLE:
        lib.mkl_serv_cbwr_set(_MKL_COMPATIBLE)


_mkl_compatible()

SURROUND_CAMERAS: tuple[str, ...] = ("front", "left", "rear", "right")
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
_REDUCES = ("mean", "first")
_FLOATS = ("sample_noise_std", "target_speed_mps", "residual_scale_m")
# the driver node's parameter (and probe-driver's --weights) that names the weights file
WEIGHTS_FIELD = "driver.weights"


@dataclass(frozen=True)
class TorchPlannerConfig:
    """Everything that changes what the torch planner returns (all of it goes in describe)."""

    cameras: tuple[str, ...] = SURROUND_CAMERAS
    planning_period_us: int = 500_000
    waypoints: int = 10
    waypoint_dt_us: int = 100_000
    weights_path: str | None = None  # None: seeded initialisation from weights_seed
    weights_seed: int = 0
    deterministic: bool = True
    num_threads: int = 1  # used only when deterministic (off: torch's default)
    samples: int = 1
    sample_reduce: str = "mean"  # samples > 1: "mean" of the samples, or the "first"
    sample_noise_std: float = 0.1
    dtype: str = "float32"
    target_speed_mps: float = 8.0
    residual_scale_m: float = 0.5

    def __post_init__(self) -> None:
        problems = _problems(asdict(self), "TorchPlannerConfig")
        if problems:
            raise ConfigError(problems)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)


def _is_cameras(v: Any) -> bool:
    ok = isinstance(v, (list, tuple)) and len(v) > 0 and len(set(v)) == len(v)
    return ok and all(isinstance(c, str) and c for c in v)


_POSITIVE_INT = (lambda v: _is_int(v) and v > 0, "a positive integer")
_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "cameras": (_is_cameras, "a non-empty list of distinct camera names"),
    "planning_period_us": _POSITIVE_INT,
    # the loop refuses a plan of more (core.lockstep.MAX_PLAN_POINTS): said here, at start
    "waypoints": (lambda v: _is_int(v) and 0 < v <= MAX_PLAN_POINTS, f"an integer from 1 to {MAX_PLAN_POINTS}"),
    "waypoint_dt_us": _POSITIVE_INT,
    "weights_path": (lambda v: v is None or isinstance(v, str), "a weights file path, or empty"),
    "weights_seed": (lambda v: _is_int(v) and 0 <= v <= INT64[1], f"an integer from 0 to {INT64[1]}"),
    "deterministic": (lambda v: isinstance(v, bool), "true or false"),
    "num_threads": (lambda v: _is_int(v) and TORCH_THREADS[0] <= v <= TORCH_THREADS[1],
                    f"an integer from {TORCH_THREADS[0]} to {TORCH_THREADS[1]}"),
    "samples": (lambda v: _is_int(v) and PLANNER_SAMPLES[0] <= v <= PLANNER_SAMPLES[1],
                f"an integer from {PLANNER_SAMPLES[0]} to {PLANNER_SAMPLES[1]}"),
    "sample_reduce": (lambda v: v in _REDUCES, "one of " + ", ".join(_REDUCES)),
    "sample_noise_std": (lambda v: _is_num(v) and v >= 0, "a finite number >= 0"),
    "dtype": (lambda v: v in _DTYPES, "one of " + ", ".join(_DTYPES)),
    "target_speed_mps": (lambda v: _is_num(v) and v > 0, "a finite number > 0"),
    "residual_scale_m": (lambda v: _is_num(v) and v >= 0, "a finite number >= 0"),
}


def _problems(values: Mapping[str, Any], source: str) -> list[Problem]:
    """Every type or range problem in ``values``, fields named as users write them."""
    unknown = (lambda _: False, f"a known field ({', '.join(_CHECKS)})")
    return [
        Problem(source, f"driver.{key}", expected, v)
        for key, v in values.items()
        for check, expected in (_CHECKS.get(key, unknown),)
        if not check(v)
    ]


def from_params(params: Mapping[str, Any], source: str = "driver params") -> TorchPlannerConfig:
    """Validate user parameters (e.g. ROS params) into a config, reporting every problem.

    Raises:
        ConfigError: one Problem per bad field, naming ``driver.<field>`` and its form.
    """
    problems = _problems(params, source)
    if problems:
        raise ConfigError(problems)
    values: dict[str, Any] = {k: float(v) if k in _FLOATS else v for k, v in params.items()}
    if "cameras" in values:
        values["cameras"] = tuple(values["cameras"])
    return TorchPlannerConfig(**{**values, "weights_path": values.get("weights_path") or None})


class SurroundPlannerNet(nn.Module):
    """Shared conv encoder over every camera, then an MLP head to per-waypoint residuals.

    Downsamples raw uint8 frames itself (area pooling: every pixel counts; a TorchScript
    export is self-contained). Returns tanh values, shape (samples, waypoints, 2);
    ``noise`` (samples, latent_dim) perturbs the latent once per sample.
    """

    def __init__(self, cameras: int, waypoints: int) -> None:
        super().__init__()
        self.pool_h, self.pool_w, self.waypoints = 45, 80, waypoints
        self.latent_dim = cameras * 32 + 1
        conv = [nn.Conv2d(3, 16, 5, 2, 2), nn.Conv2d(16, 32, 3, 2, 1), nn.Conv2d(32, 32, 3, 2, 1)]
        self.enc = nn.Sequential(*[m for c in conv for m in (c, nn.ReLU())])
        self.head1 = nn.Linear(self.latent_dim, 64)
        self.head2 = nn.Linear(64, waypoints * 2)

    def forward(
        self, images: torch.Tensor, speed_mps: torch.Tensor, noise: torch.Tensor
    ) -> torch.Tensor:
        dtype = self.head2.weight.dtype
        x = F.adaptive_avg_pool2d(images.permute(0, 3, 1, 2).float(), (self.pool_h, self.pool_w))
        x = (x * (1.0 / 255.0) - 0.5).to(dtype)  # pooled in float32: no pixel lost to bf16
        x = self.enc(x).mean(dim=(2, 3))
        speed = (speed_mps.to(dtype) * 0.1).reshape(1, 1)
        latent = torch.cat([x.reshape(1, -1), speed], dim=1) + noise.to(dtype)
        out = torch.tanh(self.head2(torch.relu(self.head1(latent))))
        return out.reshape(-1, self.waypoints, 2)


def seeded_net(cameras: int, waypoints: int, weights_seed: int) -> SurroundPlannerNet:
    """He-uniform weights from weights_seed (not the run seed); zero biases. The last layer
    starts 10x smaller so untrained residuals are millimetres to centimetres, not metres.

    Drawn by numpy (PCG64, in float64, then rounded), not by torch's generator: torch's
    uniform_ and randn take a vectorised path on CPUs with AVX2 and a plain one without,
    whose last bits differ, so the same weights_seed gave other weights (and other digests)
    on another machine. numpy's uniform doubles are integer arithmetic on any CPU."""
    net = SurroundPlannerNet(cameras, waypoints)
    rng = np.random.default_rng(weights_seed)
    with torch.no_grad():
        for name, p in net.named_parameters():
            bound = 0.0 if name.endswith("bias") else math.sqrt(6.0 / p[0].numel())
            bound *= 0.1 if name == "head2.weight" else 1.0
            p.copy_(torch.from_numpy((rng.random(tuple(p.shape)) * 2.0 - 1.0) * bound))
    return net


def call_noise(seed: int | None, samples: int, width: int, std: float) -> torch.Tensor:
    """The planner's sampling noise for one call, float32 (samples, width): numpy's standard
    normal (PCG64, float64) from ``seed``, or unseeded (OS entropy) for None. Not torch.randn,
    whose vectorised path (16 or more values, AVX2) gave other last bits than its plain one,
    so a run with samples > 1 did not repeat on a CPU without AVX2."""
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.standard_normal((samples, width)) * std).float()


def state_dict_sha256(state: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 of sorted names, dtypes, shapes and raw bytes (torch.save bytes embed a
    per-save serialization id, so they cannot name seeded weights stably)."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}\n".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _is_torchscript(path: Path) -> bool:
    """TorchScript archives carry compiled code; plain state_dicts only pickled tensors."""
    with contextlib.suppress(zipfile.BadZipFile), zipfile.ZipFile(path) as zf:
        return any(n.endswith("/constants.pkl") or "/code/" in n for n in zf.namelist())
    return False


def load_weights(config: TorchPlannerConfig) -> tuple[nn.Module, str, str]:
    """(model, kind, sha256) of the configured weights: seeded, state_dict or TorchScript.

    Raises:
        ConfigError: the weights file is missing or does not fit this planner.
    """
    n_cam, k = len(config.cameras), config.waypoints
    if config.weights_path is None:
        net = seeded_net(n_cam, k, config.weights_seed)
        return net, "seeded", state_dict_sha256(net.state_dict())
    path = Path(config.weights_path)
    if not path.is_file():
        raise ConfigError.single("driver", WEIGHTS_FIELD, "an existing weights file", str(path))
    expected = f"a state_dict or TorchScript for {n_cam} cameras and {k} waypoints"
    with path.open("rb") as handle:  # its first byte, not the file: a 2 GB data file named by mistake took 2 GB
        first = handle.read(1)
    if not (zipfile.is_zipfile(path) or first == b"\x80"):  # torch.save's zip, or a legacy pickle
        not_torch = f"{path}: not a file torch.save or torch.jit.save wrote"
        raise ConfigError.single("driver", WEIGHTS_FIELD, expected, not_torch)
    with path.open("rb") as handle:
        sha = hashlib.file_digest(handle, "sha256").hexdigest()
    if (damaged := _damaged_member(path)) is not None:  # torch.load checks no CRC: a changed byte was driven
        raise ConfigError.single("driver", WEIGHTS_FIELD, expected, f"{path}: damaged: {damaged}")
    try:
        if _is_torchscript(path):
            with warnings.catch_warnings():  # torch.jit is deprecated in 2.13; still loads
                warnings.simplefilter("ignore", DeprecationWarning)
                return torch.jit.load(str(path), map_location="cpu"), "torchscript", sha
        net = SurroundPlannerNet(n_cam, k)
        with warnings.catch_warnings():  # a file that is no pickle: "Detected pickle protocol 236" on stderr
            warnings.simplefilter("ignore", UserWarning)
            state = torch.load(path, map_location="cpu", weights_only=True)
        net.load_state_dict(state, strict=True)
    except Exception as exc:  # noqa: BLE001 - a user's file: torch raises UnpicklingError, EOFError,
        # RuntimeError, BadZipFile... for files that are not weights; each is the same bad field
        raise ConfigError.single("driver", WEIGHTS_FIELD, expected, failed_as_weights(path, exc)) from None
    return net, "state_dict", sha


def _damaged_member(path: Path) -> str | None:
    """What of a torch.save / torch.jit.save zip fails its CRC check, or None (also for a
    legacy pickle, which has none). torch reads the members without checking: 100 bytes
    changed in a saved tensor loaded as other weights, and the run counted."""
    if not zipfile.is_zipfile(path):
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            if all(info.CRC == 0 for info in archive.infolist() if info.file_size):
                return None  # saved without CRCs (torch's save.compute_crc32 = False): nothing to check
            bad = archive.testzip()
    except Exception as exc:  # noqa: BLE001 - a user's file: BadZipFile, an unsupported compression...
        return _one_line(exc)
    return None if bad is None else f"its member {bad} fails its CRC check (changed on disk or in transfer?)"


def failed_as_weights(path: object, exc: BaseException) -> Printed:
    """What a weights file or model did, shown whole (a Problem cuts a long got to its
    start, and torch's size mismatch names the shapes past that)."""
    return Printed(repr(f"{path}: {_one_line(exc)}"))


def _one_line(exc: BaseException) -> str:
    """The exception's type and message on one line (torch's load errors run to a dozen
    lines), its middle cut when long."""
    text = one_line(_TERMINAL_CODES.sub("", str(exc)))  # torch's load errors carry bold on and off
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_TERMINAL_CODES = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class PursuitGains:
    """The deterministic tracker: pure pursuit for steering, speed preview for accel."""

    wheelbase_m: float = 2.7
    lookahead_min_m: float = 3.0
    lookahead_gain_s: float = 0.8
    max_steer_rad: float = 0.6
    speed_preview_us: int = 500_000
    max_accel_mps2: float = 2.0
    max_brake_mps2: float = 6.0
    nominal_accel_mps2: float = 1.0


TRACKER = PursuitGains()


def _call_seed(run_seed: int, step: int, stream: str = "") -> int:
    """A well-mixed 63-bit seed per (run seed, step) so no two steps share noise; a
    ``stream`` of its own for torch's global generator (seeded alike, a model adding
    torch.randn_like(noise) to its noise input would have doubled it)."""
    label = "torch-planner" + (f"-{stream}" if stream else "")
    digest = hashlib.sha256(f"{label}|{run_seed}|{step}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


@contextlib.contextmanager
def _torch_mode(deterministic: bool, num_threads: int) -> Iterator[None]:
    """Deterministic settings for one call, restoring the process-wide ones after; 'off'
    touches nothing (torch's own defaults). oneDNN is off within: its convolutions pick
    kernels by the CPU's instruction sets as MKL's products do (_mkl_compatible), and the
    planner's encoder gave other last bits under another one (ONEDNN_MAX_CPU_ISA=SSE41
    here); torch's own convolution then runs on MKL's products."""
    if not deterministic:
        yield
        return
    was_det, was_warn = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    was_threads, was_onednn = torch.get_num_threads(), bool(torch.backends.mkldnn.enabled)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(num_threads)
    torch.backends.mkldnn.enabled = False  # type: ignore[assignment]  # not mkldnn.flags(): it sets TF32, and warns
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was_det, warn_only=was_warn)
        torch.set_num_threads(was_threads)
        torch.backends.mkldnn.enabled = was_onednn  # type: ignore[assignment]


@contextlib.contextmanager
def _global_rng(seed: int | None) -> Iterator[None]:
    """torch's global generator seeded for one call and restored after; None: untouched.

    The planner's own noise has its own generator, but a user's model may sample from
    the global one (torch.randn in its forward), which torch seeds at random in each
    process: with 'deterministic' on, such a model repeats too.
    """
    if seed is None:
        yield
        return
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def nominal_x_m(speed_mps: float, target_mps: float, accel_mps2: float, t_s: np.ndarray) -> Any:
    """Distance travelled easing from speed to target at a constant rate, then holding it."""
    v0 = max(speed_mps, 0.0)
    a = math.copysign(accel_mps2, target_mps - v0) if v0 != target_mps else 0.0
    t_reach = abs(target_mps - v0) / accel_mps2 if a else 0.0
    t1 = np.minimum(t_s, t_reach)
    return v0 * t1 + 0.5 * a * t1 * t1 + (v0 + a * t_reach) * np.maximum(t_s - t_reach, 0.0)


DEFAULT_FRAMES_HW = (180, 320)
"""The bridge's default frame size (sim_bridge.height, sim_bridge.width)."""


class TorchPlanner:
    """Policy: plan with the CNN at planning steps, track the anchored plan every step."""

    name = "torch"

    def __init__(self, config: TorchPlannerConfig, frames_hw: tuple[int, int] | None = DEFAULT_FRAMES_HW) -> None:
        """``frames_hw``: the (height, width) it plans on, its model checked at it now; None
        when not known yet (the driver node, before the bridge's parameters come): the
        model is then checked by use_frames_hw, at the size the bridge renders (a model
        that takes only that size was refused at the default one)."""
        self.config = config
        self.frames_hw = (int(frames_hw[0]), int(frames_hw[1])) if frames_hw is not None else DEFAULT_FRAMES_HW
        model, self._weights_kind, self._weights_sha256 = load_weights(config)
        # The network in use (also for export, e.g. torch.jit.script(planner.model)).
        self.model: nn.Module = model.eval().to(_DTYPES[config.dtype])  # called in inference_mode
        self._seed, self._decision_us, self._period_steps = 0, 0, 0
        self._plan: tuple[int, Pose2D, tuple[TrajectoryPoint, ...]] | None = None
        self._checked_hw: tuple[int, int] | None = None
        if frames_hw is not None:
            self._check_model()
            self._checked_hw = self.frames_hw

    def _check_model(self) -> None:
        """One call on black frames at start-up, so that a TorchScript model of another
        shape (someone else's code) is a configuration error now rather than a refusal at
        the first planning step. It also pays torch's lazy set-up before step 0: a process's
        first call took 1.4-1.5 s here (later ones 3 ms), so that step 0's Decide call
        outlasted the clock master's 1 s before it resends a first request, in every torch
        `processes` run. The call changes nothing a later one computes: the model is in eval
        mode, no gradient, its noise input zeros.

        Raises:
            ConfigError: the model fails on, or answers other than (samples, waypoints, 2) to,
                this planner's inputs.
        """
        cfg = self.config
        images = torch.zeros((len(cfg.cameras), *self.frames_hw, 3), dtype=torch.uint8)
        h, w = self.frames_hw
        want = f"a model answering ({cfg.samples}, {cfg.waypoints}, 2) to {len(cfg.cameras)} cameras of {w}x{h}"
        try:
            with _torch_mode(cfg.deterministic, cfg.num_threads), torch.inference_mode():
                out = self.model(images, torch.zeros(1), torch.zeros((cfg.samples, self._latent_dim())))
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        except Exception as exc:  # noqa: BLE001 - a user's model: whatever it raises, it does not fit
            raise ConfigError.single("driver", WEIGHTS_FIELD, want, failed_as_weights(cfg.weights_path, exc)) from None
        if shape != (cfg.samples, cfg.waypoints, 2):
            raise ConfigError.single("driver", WEIGHTS_FIELD, want, f"{cfg.weights_path}: it answered {shape}")
        if not bool(torch.isfinite(out).all()):  # refused at step 0 without the field or the file, before
            raise ConfigError.single("driver", WEIGHTS_FIELD, f"{want}, finite",
                                     f"{cfg.weights_path}: it answered non-finite values to black frames")

    def use_frames_hw(self, frames_hw: tuple[int, int]) -> bool:
        """Plan on frames of this (height, width): the bridge's, which the driver learns from
        its parameters before step 0. The model is checked again at that size, so that one
        which only takes some sizes is named before the run rather than at its first
        planning step. Returns whether the size changed (the manifest's description did).

        Raises:
            ConfigError: the model fails on, or answers wrongly to, frames of that size.
        """
        hw = (int(frames_hw[0]), int(frames_hw[1]))
        if hw == self._checked_hw:
            return False
        changed, self.frames_hw = hw != self.frames_hw, hw
        self._check_model()
        self._checked_hw = hw
        return changed

    def _latent_dim(self) -> int:
        return int(getattr(self.model, "latent_dim", len(self.config.cameras) * 32 + 1))

    @property
    def weights_sha256(self) -> str:
        """SHA-256 of the weights file bytes, or of the canonical seeded state_dict."""
        return self._weights_sha256

    def reset(self, seed: int, decision_us: int) -> None:
        """Start a run; the planning period must be a positive whole number of steps.

        Raises:
            RateNotMultiple: planning_period_us is not a multiple of decision_us.
        """
        period_us = self.config.planning_period_us
        if decision_us <= 0 or period_us <= 0 or period_us % decision_us:
            detail = f"driver.planning_period_us={period_us} is not a whole number of decision"
            raise RateNotMultiple(-1, f"{detail} steps (decision_us={decision_us})")
        self._seed, self._decision_us = int(seed), int(decision_us)
        self._period_steps, self._plan = period_us // decision_us, None

    def cameras_at(self, step: int) -> tuple[str, ...]:
        """All configured cameras at planning steps, none in between."""
        planning = self._period_steps > 0 and step % self._period_steps == 0
        return self.config.cameras if planning else ()

    def _images(self, obs: Observation) -> torch.Tensor:
        """(cameras, H, W, 3) uint8 in configured camera order; refuses a missing frame."""
        frames = []
        for cam in self.config.cameras:
            frame = obs.frames.get(cam)
            if frame is None:
                raise MissingFrame(obs.step, f"torch planner needs camera {cam!r}")
            if frame.dtype != np.uint8 or frame.shape != (*self.frames_hw, 3):
                want = f"{(*self.frames_hw, 3)} uint8"
                raise ParticipantError(obs.step, f"the torch planner's {cam} frame is {frame.shape} "
                                       f"{frame.dtype}; it plans on {want}")
            frames.append(frame)
        return torch.from_numpy(np.stack(frames))

    def plan(self, obs: Observation) -> tuple[TrajectoryPoint, ...]:
        """Run the model on obs's frames and speed (the stored plan is not changed).

        samples > 1: each sample perturbs the latent with its own noise; the plan is the
        mean of the samples' residuals ("mean") or the first sample's ("first").
        """
        cfg, k = self.config, self.config.waypoints
        images = self._images(obs)
        speed = torch.tensor([obs.state.speed_mps], dtype=torch.float32)
        with _torch_mode(cfg.deterministic, cfg.num_threads), torch.inference_mode(), _global_rng(
            _call_seed(self._seed, obs.step, "global") if cfg.deterministic else None
        ):
            # deliberately unseeded when not deterministic: 'off' samples differ call to call
            seed = _call_seed(self._seed, obs.step) if cfg.deterministic else None
            noise = call_noise(seed, cfg.samples, self._latent_dim(), cfg.sample_noise_std)
            noise = noise if cfg.samples > 1 else torch.zeros_like(noise)
            out = self.model(images, speed, noise).float().numpy().astype(np.float64)
        if out.shape != (cfg.samples, k, 2) or not np.isfinite(out).all():
            got = f"shape {out.shape}" if out.shape != (cfg.samples, k, 2) else "non-finite values"
            want = f"({cfg.samples}, {k}, 2) finite"
            raise ParticipantError(obs.step, f"the torch planner's model answered {got}, want {want}")
        res = out.mean(axis=0) if cfg.sample_reduce == "mean" else out[0]
        t_s = np.arange(0, k + 1, dtype=np.float64) * (cfg.waypoint_dt_us / 1e6)
        x_nom = nominal_x_m(
            obs.state.speed_mps, cfg.target_speed_mps, TRACKER.nominal_accel_mps2, t_s
        )
        step_m = cfg.residual_scale_m / k  # a waypoint moves <= scale/K more than the last
        dx = np.maximum(np.diff(x_nom) + res[:, 0] * step_m, 0.0)  # never plan reversing
        xs, ys = np.cumsum(dx), np.cumsum(res[:, 1] * step_m)
        dts = [(i + 1) * cfg.waypoint_dt_us for i in range(k)]
        return tuple(TrajectoryPoint(dts[i], float(xs[i]), float(ys[i])) for i in range(k))

    def decide(self, obs: Observation) -> Action:
        """Replan at planning steps, then track the anchored plan from the observed state."""
        if obs.decision_us != self._decision_us:
            raise ValueError(f"obs.decision_us={obs.decision_us}, reset with {self._decision_us}")
        if self.cameras_at(obs.step):
            self._plan = (obs.step, obs.state.pose, self.plan(obs))
        if self._plan is None:  # only if a run starts off a planning step: coast straight
            return Action(obs.step, obs.step, obs.t_us, 0.0, 0.0)
        plan_step, anchor, traj = self._plan
        elapsed_us = (obs.step - plan_step) * self._decision_us
        steer, accel = track(obs.state.pose, obs.state.speed_mps, anchor, traj, elapsed_us)
        return Action(obs.step, obs.step, obs.t_us, steer, accel, True, plan_step, anchor, traj)

    def describe(self) -> dict[str, Any]:
        """The full configuration for the run manifest (weights named by sha256)."""
        cfg = self.config
        seeding = "sha256(run seed, step) seeded" if cfg.deterministic else "unseeded"
        weights = {"kind": self._weights_kind, "sha256": self.weights_sha256}
        return {
            **{k: v for k, v in asdict(cfg).items() if k != "cameras"},
            "name": self.name,
            "cameras": list(cfg.cameras),
            "frames_hw": list(self.frames_hw),
            "weights": weights,
            "num_threads": cfg.num_threads if cfg.deterministic else "torch default",
            "seed_handling": f"weights from weights_seed; per call {seeding} noise (numpy PCG64)"
                             + (", and torch's global generator seeded alike" if cfg.deterministic else ""),
            "tracker": asdict(TRACKER),
            "torch_version": torch.__version__,
            # the kernels torch runs a model with (AVX512, AVX2, DEFAULT): a user's model that
            # draws from torch's generator, or sums in another order, may differ across them
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            # MKL's code path (COMPATIBLE: one on every x86 CPU) and oneDNN's use, which set
            # the products' and convolutions' last bits
            "mkl_branch": mkl_branch(),
            "onednn": "off" if cfg.deterministic else "torch default",
        }


def track(
    pose: Pose2D, speed_mps: float, anchor: Pose2D, traj: Sequence[TrajectoryPoint], elapsed_us: int
) -> tuple[float, float]:
    """(steer_rad, accel_mps2) following an anchored plan: pure pursuit + speed preview."""
    g = TRACKER
    ca, sa = math.cos(anchor.yaw_rad), math.sin(anchor.yaw_rad)
    cp, sp = math.cos(pose.yaw_rad), math.sin(pose.yaw_rad)
    lookahead_m = max(g.lookahead_min_m, g.lookahead_gain_s * max(speed_mps, 0.0))
    target: tuple[float, float] | None = None
    for p in traj:  # anchor frame -> map frame -> current vehicle frame
        mx = anchor.x_m + ca * p.x_m - sa * p.y_m - pose.x_m
        my = anchor.y_m + sa * p.x_m + ca * p.y_m - pose.y_m
        lx, ly = cp * mx + sp * my, -sp * mx + cp * my
        if lx > 0.0:
            target = (lx, ly)
            if math.hypot(lx, ly) >= lookahead_m:
                break
    steer = 0.0
    if target is not None:  # curvature 2y/d^2 with d >= lookahead: no spikes at standstill
        d2 = max(target[0] ** 2 + target[1] ** 2, lookahead_m**2)
        steer = math.atan(g.wheelbase_m * 2.0 * target[1] / d2)
        steer = min(max(steer, -g.max_steer_rad), g.max_steer_rad)
    # Planned speed at elapsed + preview: the speed along the plan's segment at that time.
    times = [0] + [p.dt_us for p in traj]
    pts = [(0.0, 0.0)] + [(p.x_m, p.y_m) for p in traj]
    t_us = elapsed_us + g.speed_preview_us
    i = next((j for j in range(1, len(times)) if times[j] > t_us), len(times) - 1)
    v_ref = math.dist(pts[i], pts[i - 1]) / ((times[i] - times[i - 1]) / 1e6)
    accel = (v_ref - speed_mps) / (g.speed_preview_us / 1e6)
    return steer, min(max(accel, -g.max_brake_mps2), g.max_accel_mps2)
