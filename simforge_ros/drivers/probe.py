"""Determinism probe for the torch planner: same input, many calls, how many bit-identical?

``simforge probe-driver`` answers two questions a user must know before trusting a
recorded run of a learned driver: does the model give the same plan for the same input
(with deterministic on, it must; with it off, it may or may not), and what does
determinism cost per call. Every call gets the *same* saved input, so any difference is
the model's, not the data's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from simforge_ros.core.errors import EXIT_FAILURE, EXIT_USAGE, ConfigError, Printed, Refusal, SimforgeError
from simforge_ros.core.limits import INT64, PLANNER_SAMPLES, PROBE_CALLS, TORCH_THREADS
from simforge_ros.core.timing_contract import DEFAULT_DECISION_US
from simforge_ros.core.values import Pose2D, TrajectoryPoint, VehicleState
from simforge_ros.drivers.policy import Observation
from simforge_ros.drivers.torch_planner import (
    DEFAULT_FRAMES_HW,
    SURROUND_CAMERAS,
    WEIGHTS_FIELD,
    TorchPlanner,
    TorchPlannerConfig,
    failed_as_weights,
)

InputsLoader = Callable[[Path], list[Observation]]
"""Reads the observations (state + frames) of a recorded run directory."""

SettingsLoader = Callable[[Path], Mapping[str, Any]]
"""Reads the driver's parameters a recorded run was made with (its manifest's)."""

RUN_SETTINGS = ("weights", "weights_seed", "samples", "dtype")
"""What --inputs RUN takes from a torch run's driver unless the command line gives it:
probing a run's frames on another model than the run's answers another question."""
RUN_WEIGHTS_DIGEST = "weights_sha256"
"""The key a SettingsLoader adds to a run's driver parameters: the SHA-256 of the weights
the run loaded (its manifest's digests.weights)."""
DEFAULT_SETTINGS: dict[str, Any] = {"weights": None, "weights_seed": 0, "samples": 1, "dtype": "float32"}

NO_LOADER_MESSAGE = "reading inputs from a run needs the recorder's bag reader"
PROBE_RUN_SEED = 0


@dataclass(frozen=True)
class ProbeResult:
    """How many of ``calls`` model calls returned the first call's plan, bit for bit."""

    mode: str  # "on" (deterministic) or "off"
    calls: int
    identical: int
    ms_per_call: float
    samples: int = 1
    dtype: str = "float32"
    weights: str = "seeded:0"  # the file probed, or seeded:<weights_seed>
    weights_sha256: str = ""


def _plan_bits(traj: Sequence[TrajectoryPoint]) -> bytes:
    """The exact bits of a plan (float equality would call -0.0 == 0.0 and NaN != NaN)."""
    return b"".join(struct.pack("<qdd", p.dt_us, p.x_m, p.y_m) for p in traj)


def probe(config: TorchPlannerConfig, inputs: Sequence[Observation], calls: int) -> ProbeResult:
    """Call the planner's model ``calls`` times and count plans identical to the first.

    Every call uses inputs[0] (same frames, same state, same step, so the same per-call
    seed when deterministic). One untimed, uncounted warm-up call first keeps one-time
    setup out of ms_per_call; the cost is timed with time.perf_counter and never affects
    a plan.
    """
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    if not inputs:
        raise ValueError("probe needs at least one input observation")
    obs = inputs[0]
    first_frame = next(iter(obs.frames.values()))
    planner = TorchPlanner(config, frames_hw=(first_frame.shape[0], first_frame.shape[1]))
    planner.reset(PROBE_RUN_SEED, obs.decision_us)
    weights = config.weights_path or f"seeded:{config.weights_seed}"
    try:  # the model the file holds, called on real frames (its start-up check drew none)
        planner.plan(obs)  # warm-up
        bits: list[bytes] = []
        start_s = time.perf_counter()
        for _ in range(calls):
            bits.append(_plan_bits(planner.plan(obs)))
        elapsed_s = time.perf_counter() - start_s
    except Refusal as err:  # a plan the loop would refuse (non-finite): the model's, named
        raise ConfigError.single("driver", WEIGHTS_FIELD, "a model whose plans the planner takes",
                                 Printed(repr(f"{weights}: {err.detail}"))) from None
    except Exception as exc:  # noqa: BLE001 - a user's model raising: TorchScript's 17-line traceback was shown
        raise ConfigError.single("driver", WEIGHTS_FIELD, "a model the planner can call",
                                 failed_as_weights(weights, exc)) from None
    identical = sum(1 for b in bits if b == bits[0])
    mode = "on" if config.deterministic else "off"
    ms_per_call = elapsed_s * 1e3 / calls
    return ProbeResult(mode, calls, identical, ms_per_call, config.samples, config.dtype, str(weights),
                       planner.weights_sha256)


def generated_inputs(
    seed: int,
    cameras: Sequence[str] = SURROUND_CAMERAS,
    hw: tuple[int, int] = DEFAULT_FRAMES_HW,
    count: int = 1,
    decision_us: int = DEFAULT_DECISION_US,
) -> list[Observation]:
    """Synthetic but deterministic observations: textured frames from default_rng(seed).

    A smooth per-camera gradient plus noise, so the frames are not constant (every conv
    sees structure) yet reproducible from the seed alone. Steps are 0, 1, 2, ...
    """
    rng = np.random.default_rng(seed)
    h, w = hw
    ramp = (np.linspace(0, 160, w, dtype=np.float64)[None, :, None]
            + np.linspace(0, 60, h, dtype=np.float64)[:, None, None])  # fmt: skip
    out = []
    for step in range(count):
        frames = {}
        for i, cam in enumerate(cameras):
            noise = rng.integers(0, 96, size=(h, w, 3))
            frames[cam] = np.clip(ramp + noise + 20 * i, 0, 255).astype(np.uint8)
        speed_mps = float(rng.uniform(2.0, 8.0))
        t_us = step * decision_us
        state = VehicleState(step, t_us, Pose2D(0.0, 0.0, 0.0), speed_mps, 0.0, 0.0)
        out.append(Observation(step, t_us, decision_us, state, frames))
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="simforge probe-driver",
        description="Call the torch planner many times on one saved input; count identical plans.",
    )
    p.add_argument("--calls", type=int, default=182, help="model calls per mode (default 182)")
    p.add_argument("--deterministic", choices=("on", "off", "both"), default="both")
    from_run = "; with --inputs, a torch run's own"
    p.add_argument("--samples", type=int, default=None, help=f"trajectory samples per call (default 1{from_run})")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default=None,
                   help=f"the model's dtype (default float32{from_run})")
    p.add_argument("--threads", type=int, default=1, help="torch threads when deterministic")
    p.add_argument("--weights", default=None,
                   help=f"state_dict/TorchScript file (default: seeded by --weights-seed{from_run})")
    p.add_argument("--weights-seed", type=int, default=None, help=f"seed of seeded weights (default 0{from_run})")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated input frames")
    p.add_argument(
        "--inputs", type=Path, default=None, metavar="RUN_DIR",
        help="probe on a recorded run's first observation, not generated frames, with the run's own "
             "weights, weights seed, samples and dtype when its driver was the torch planner",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print a JSON list, one object per mode")
    return p


def _format_table(results: Sequence[ProbeResult]) -> str:
    """Modes side by side: identical/calls and ms per call, then the on/off cost ratio."""
    rows = [
        ("mode", [r.mode for r in results]),
        ("identical", [f"{r.identical}/{r.calls}" for r in results]),
        ("ms/call", [f"{r.ms_per_call:.3f}" for r in results]),
    ]
    lines = [f"{name:<10}" + "".join(f"{v:>12}" for v in vals) for name, vals in rows]
    if results:
        r = results[0]
        lines.insert(0, f"model: {r.weights} (sha256 {r.weights_sha256[:16]}), samples {r.samples}, {r.dtype}")
    by_mode = {r.mode: r for r in results}
    if "on" in by_mode and "off" in by_mode and by_mode["off"].ms_per_call > 0:
        ratio = by_mode["on"].ms_per_call / by_mode["off"].ms_per_call
        lines.append(f"cost ratio on/off: {ratio:.2f}x")
    return "\n".join(lines)


def _torch_run(run: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A run's driver parameters when its driver was the torch planner, else none."""
    return run if run is not None and run.get("policy") == "torch" else {}


def _settings(args: argparse.Namespace, run: Mapping[str, Any] | None) -> dict[str, Any]:
    """The model to probe: the command line's, else (with --inputs) a torch run's, else the
    defaults."""
    from_run = _torch_run(run)
    out = {}
    for name in RUN_SETTINGS:
        given = getattr(args, name)
        value = given if given is not None else from_run.get(name, DEFAULT_SETTINGS[name])
        out[name] = None if name == "weights" and value == "" else value
    return out


def _check_run_weights(run: Mapping[str, Any] | None, weights: str | None) -> None:
    """--inputs RUN probes the run's own model: its weights file must still hold what the
    run loaded (the manifest's digest). Overwritten, it was probed unsaid but for a hash
    in the header.

    Raises:
        ConfigError: the file's SHA-256 is not the run's.
    """
    recorded = (run or {}).get(RUN_WEIGHTS_DIGEST)
    if not weights or not isinstance(recorded, str) or not Path(weights).is_file():
        return  # seeded, or none recorded: nothing to hold it to (a missing file: the planner says so)
    with Path(weights).open("rb") as handle:
        now = hashlib.file_digest(handle, "sha256").hexdigest()
    if now != recorded:
        raise ConfigError.single("driver", WEIGHTS_FIELD, f"the run's model (sha256 {recorded[:16]}), or --weights",
                                 Printed(repr(f"{weights}: sha256 {now[:16]}, changed since the run")))


def _check_run_seeded(run: Mapping[str, Any] | None, probed: str, weights_seed: int) -> None:
    """--inputs RUN of a run on seeded weights probes the weights its weights_seed draws
    now: the run's own only if they hash as the run's did. A run kept before the planner drew
    its weights with numpy (not torch's generator) was probed on other weights, unsaid.

    Raises:
        ConfigError: the seeded weights' SHA-256 is not the run's.
    """
    recorded = (run or {}).get(RUN_WEIGHTS_DIGEST)
    if isinstance(recorded, str) and recorded != probed:
        raise ConfigError.single("driver", WEIGHTS_FIELD, f"the run's model (sha256 {recorded[:16]}), or --weights",
                                 Printed(repr(f"seeded:{weights_seed}: sha256 {probed[:16]} here, other weights "
                                              "than the run's (drawn by another version of simforge_ros)")))


def main(argv: Sequence[str] | None = None, loader: InputsLoader | None = None,
         run_settings: SettingsLoader | None = None) -> int:
    """``simforge probe-driver``: exit 0 when deterministic-on plans are all identical.

    Exit 1 when 'on' returned a differing plan (the determinism promise is broken), 2 on
    usage errors (including --inputs without a bag reader wired in as ``loader``). 'off'
    differing is information, not a failure. ``run_settings`` reads a run's driver
    parameters, for --inputs RUN to probe the run's own model.
    """
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse: --help is 0, a usage error 2
        return int(exc.code or 0)
    for flag, value, (low, high) in (("--calls", args.calls, PROBE_CALLS), ("--samples", args.samples, PLANNER_SAMPLES),
                                     ("--threads", args.threads, TORCH_THREADS), ("--seed", args.seed, (0, INT64[1])),
                                     ("--weights-seed", args.weights_seed, (0, INT64[1]))):
        # --seed -3 failed in numpy, --threads 100000 ended the process (SIGSEGV), --samples
        # 10^8 asked torch for 51 GB, --weights-seed 10^20 said only "Overflow when unpacking"
        if value is not None and (value < low or (high is not None and value > high)):
            expected = f"an integer >= {low}" if high is None else f"an integer from {low} to {high}"
            print(f"simforge probe-driver: {flag}: expected {expected}, got {value}", file=sys.stderr)
            return EXIT_USAGE
    try:
        run = run_settings(args.inputs) if args.inputs is not None and run_settings is not None else None
        chosen = _settings(args, run)
        base = TorchPlannerConfig(
            samples=chosen["samples"], dtype=chosen["dtype"], num_threads=args.threads,
            weights_path=chosen["weights"], weights_seed=chosen["weights_seed"],
        )  # fmt: skip
        if args.inputs is None:
            inputs = generated_inputs(args.seed, base.cameras)
        elif loader is None:
            print(f"simforge probe-driver: {NO_LOADER_MESSAGE}", file=sys.stderr)
            return EXIT_USAGE
        else:
            inputs = loader(args.inputs)
            names = tuple(inputs[0].frames) if inputs else ()
            run_cameras = tuple(_torch_run(run).get("cameras") or ())
            if run_cameras and set(run_cameras) <= set(names):  # the run's planner, its camera order
                base = replace(base, cameras=run_cameras)
            elif names and not set(base.cameras) <= set(names):  # a recorded rig of its own
                base = replace(base, cameras=names)
        _check_run_weights(run, chosen["weights"] if args.weights is None else None)
        if args.weights is None and args.weights_seed is None and not chosen["weights"] and run:
            # before any call: the seeded weights' hash is the planner's as it is built
            _check_run_seeded(run, TorchPlanner(base).weights_sha256, chosen["weights_seed"])
        modes = {"on": (True,), "off": (False,), "both": (True, False)}[args.deterministic]
        results = [probe(replace(base, deterministic=d), inputs, args.calls) for d in modes]
    except (SimforgeError, OSError, ValueError, KeyError) as exc:
        print(f"simforge probe-driver: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps([asdict(r) for r in results]))  # one line, as every tool's --json
    else:
        print(_format_table(results))
    on = [r for r in results if r.mode == "on"]
    return EXIT_FAILURE if any(r.identical != r.calls for r in on) else 0


if __name__ == "__main__":
    raise SystemExit(main())
