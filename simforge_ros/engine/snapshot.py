"""Write camera and top-down PNGs of a scenario (docs, debugging, eyeballing a change),
or the camera frames a kept run recorded at a step.

    simforge render right_turn --step 60 --out docs/

drives the scenario with the RouteFollower in lockstep (decide every decision_us, hold for
decision_us / tick_us ticks) to the step, renders the cameras there and draws the top-down map.

    simforge render RUN --step 10 --out /tmp/look/

writes the frames RUN's step 10 names, read from its bag (what its driver was given), as
``<run_id>_step10_<camera>.png``, each checked against the digest steps.jsonl chained for
it (exit 1 if one differs).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from simforge_ros.core.errors import EXIT_USAGE
from simforge_ros.core.limits import IMAGE_SIDE, INT64
from simforge_ros.core.timing_contract import DEFAULT_DECISION_US, DEFAULT_TICK_US
from simforge_ros.core.values import Pose2D
from simforge_ros.drivers.policy import Observation
from simforge_ros.drivers.route_follower import RouteFollower
from simforge_ros.engine.cameras import CAMERA_NAMES
from simforge_ros.engine.catalog import load_scenario
from simforge_ros.engine.png import write_png
from simforge_ros.engine.scenario import Scenario, ScenarioError
from simforge_ros.engine.topdown import draw_topdown
from simforge_ros.engine.world import Engine
from simforge_ros.tools import out_dir_problem, say


def _scenario(s: Scenario | str | Path) -> Scenario:
    return s if isinstance(s, Scenario) else load_scenario(s)


def check_step(scenario: Scenario, step: int, decision_us: int) -> None:
    """Raises ValueError unless ``step`` is a decision step of ``scenario``."""
    last = scenario.duration_us // decision_us
    if not 0 <= step <= last:
        raise ValueError(f"step: expected a decision step from 0 to {last} ({scenario.name} lasts "
                         f"{scenario.duration_us / 1e6:g} s, a step is {decision_us} us), got {step}")


def drive_to_step(
    scenario: Scenario,
    step: int,
    decision_us: int = DEFAULT_DECISION_US,
    seed: int = 0,
    tick_us: int = DEFAULT_TICK_US,
    width: int = 320,
    height: int = 180,
) -> Engine:
    """An engine driven by the RouteFollower from step 0 to ``step``."""
    if decision_us <= 0 or decision_us % tick_us != 0:
        raise ValueError(f"decision_us {decision_us} must be a positive multiple of tick_us {tick_us}")
    check_step(scenario, step, decision_us)
    engine = Engine(scenario, seed, tick_us=tick_us, width=width, height=height)
    policy = RouteFollower(scenario)
    policy.reset(seed, decision_us)
    for k in range(step):
        obs = Observation(k, engine.t_us, decision_us, engine.ego_state(k), {})
        action = policy.decide(obs)
        engine.advance(action.steer_rad, action.accel_mps2, decision_us // tick_us)
    return engine


def write_camera_pngs(
    scenario: Scenario | str | Path,
    step: int,
    out_dir: str | Path,
    cameras: tuple[str, ...] | list[str],
    decision_us: int = DEFAULT_DECISION_US,
    seed: int = 0,
    width: int = 320,
    height: int = 180,
) -> list[Path]:
    """<out_dir>/<scenario>_step<step>_<camera>.png for each camera at ``step`` (named by
    the step, as a run's frames are: another step's pictures are not written over)."""
    sc = _scenario(scenario)
    engine = drive_to_step(sc, step, decision_us, seed, width=width, height=height)
    out = []
    for cam in cameras:
        frame = engine.render(cam, engine.t_us)
        out.append(write_png(Path(out_dir) / f"{sc.name}_step{step}_{cam}.png", frame.pixels))
    return out


TOPDOWN_DRIVE_US = 600_000_000
"""The follower's drive the top-down map is framed on and dotted with: its first 10
minutes (a scenario a day long was driven whole, 50 s of render with nothing said)."""


def write_topdown_png(scenario: Scenario | str | Path, out_path: str | Path) -> Path:
    """The top-down map (see topdown.py for the legend), framed on the follower's drive
    (at most its first TOPDOWN_DRIVE_US)."""
    sc = _scenario(scenario)
    decision_us = DEFAULT_DECISION_US
    trajectory: list[Pose2D] = []
    engine = Engine(sc, 0)
    policy = RouteFollower(sc)
    policy.reset(0, decision_us)
    k = 0
    while engine.t_us <= min(sc.duration_us, TOPDOWN_DRIVE_US):
        if engine.t_us % 1_000_000 == 0:
            trajectory.append(engine.ego.pose)
        action = policy.decide(Observation(k, engine.t_us, decision_us, engine.ego_state(k), {}))
        engine.advance(action.steer_rad, action.accel_mps2, decision_us // engine.tick_us)
        k += 1
    return write_png(out_path, draw_topdown(sc, trajectory))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="simforge render", description=__doc__.split("\n")[0]
    )
    parser.add_argument("scenario", help="scenario name, path to a .yaml file, or a kept run's directory")
    parser.add_argument("--step", type=int, default=None,
                        help="decision step (default 60; for a run: its last step if refused, else 0)")
    parser.add_argument("--out", default=None, help="output directory (default: the current one)")
    parser.add_argument("--cameras", default=None,
                        help=f"comma list from {','.join(CAMERA_NAMES)} (default chase,front; for a run: "
                             "every frame the step names)")
    # unset (None): a run's frames are its own, and these draw a scenario only
    parser.add_argument("--decision-us", type=int, default=None, help=f"default {DEFAULT_DECISION_US}")
    parser.add_argument("--seed", type=int, default=None, help="default 0")
    parser.add_argument("--width", type=int, default=None, help="default 320")
    parser.add_argument("--height", type=int, default=None, help="default 180")
    topdown = parser.add_mutually_exclusive_group()
    topdown.add_argument("--no-topdown", action="store_true", help="skip <scenario>_topdown.png")
    topdown.add_argument("--topdown-only", action="store_true", help="write only <scenario>_topdown.png")
    args = parser.parse_args(argv)
    if args.out == "":  # named no directory: the PNGs went to the default one unasked
        say("render", f"--out: expected a directory simforge can create ({out_dir_problem('')}), got ''")
        return EXIT_USAGE
    cameras = [c for c in (args.cameras if args.cameras is not None else "chase,front").split(",") if c]
    if args.cameras is not None and (not cameras or len(set(cameras)) < len(cameras)):
        # ",," drew nothing of a scenario and every frame of a run; "front,front" drew it twice
        parser.error(f"--cameras: expected distinct names from {','.join(CAMERA_NAMES)}, got {args.cameras!r}")
    if Path(args.scenario).is_dir():  # a kept run: its cameras are what its steps name
        scenario_only = [flag for flag, value in (("--decision-us", args.decision_us), ("--seed", args.seed),
                                                  ("--width", args.width), ("--height", args.height),
                                                  ("--no-topdown", args.no_topdown or None),
                                                  ("--topdown-only", args.topdown_only or None)) if value is not None]
        if scenario_only:  # a run's frames are as it recorded them: these were ignored
            parser.error(f"{', '.join(scenario_only)}: for a scenario, not a run (its frames are as recorded)")
        out = args.out if args.out is not None else "."
        return _render_run(Path(args.scenario), args.step, out, cameras if args.cameras else None)
    if args.topdown_only and args.step is not None:  # it drew the route whatever the step, -1 too
        parser.error("--step: --topdown-only draws the whole route, at no step")
    args.decision_us = DEFAULT_DECISION_US if args.decision_us is None else args.decision_us
    args.seed = 0 if args.seed is None else args.seed
    args.width = 320 if args.width is None else args.width
    args.height = 180 if args.height is None else args.height
    problem = _flag_problem(args)
    if problem:
        say("render", problem)
        return EXIT_USAGE
    unknown = [c for c in cameras if c not in CAMERA_NAMES]
    if unknown:
        parser.error(f"unknown camera(s) {unknown}; known: {', '.join(CAMERA_NAMES)}")
    args.out = args.out or "."  # once docs/: run from the repository, it wrote over the README's pictures
    args.step = 60 if args.step is None else args.step
    try:
        sc = load_scenario(args.scenario)
        if not args.topdown_only:  # before --out is made: nothing left behind
            check_step(sc, args.step, args.decision_us)
    except (ScenarioError, ValueError, OSError) as err:
        say("render", err)
        return EXIT_USAGE
    problem = out_dir_problem(args.out)
    if problem is not None:
        say("render", f"--out: expected a directory simforge can create ({problem}), got {args.out!r}")
        return EXIT_USAGE
    try:
        written: list[Path] = []
        with _all_or_none(args.out):
            if not args.topdown_only:
                written += write_camera_pngs(
                    sc, args.step, args.out, cameras, args.decision_us, args.seed, args.width, args.height
                )
            if not args.no_topdown:
                written.append(write_topdown_png(sc, Path(args.out) / f"{sc.name}_topdown.png"))
    except (ScenarioError, ValueError) as err:
        say("render", err)
        return EXIT_USAGE
    except OSError as err:
        say("render", _not_written(err, args.out))
        return EXIT_USAGE
    for p in written:
        print(p)
    return 0


@contextlib.contextmanager
def _all_or_none(out: str) -> Iterator[None]:
    """The PNGs a render writes into ``out``, all of them or, when one cannot be written
    (a directory of its name there, a file system that refuses it), none that were new:
    the first ones stayed beside the error."""
    before = set(os.listdir(out))
    try:
        yield
    except OSError:
        for name in set(os.listdir(out)) - before:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(out, name))
        raise


def _not_written(err: OSError, out: str) -> str:
    shown = os.path.basename(err.filename) if isinstance(err.filename, str) else "a PNG"
    return (f"--out: expected a directory simforge can write the PNGs into ({shown}: {err.strerror or err}), "
            f"got {out!r}")


def _flag_problem(args: argparse.Namespace) -> str | None:
    """The first flag outside what a run could have been made with, worded as `simforge
    run` words its own (the flag, the expected form, the value), before anything is drawn."""
    for flag, value in (("--width", args.width), ("--height", args.height)):
        if not IMAGE_SIDE[0] <= value <= IMAGE_SIDE[1]:
            return f"{flag}: expected an integer in [{IMAGE_SIDE[0]}, {IMAGE_SIDE[1]}], got {value}"
    if not 0 <= args.seed <= INT64[1]:
        return f"--seed: expected an integer in [0, {INT64[1]}], got {args.seed}"
    if args.decision_us <= 0 or args.decision_us % DEFAULT_TICK_US:
        return (f"--decision-us: expected a positive multiple of the engine's tick, {DEFAULT_TICK_US} us, "
                f"got {args.decision_us}")
    return None


def _render_run(path: Path, step: int | None, out: str, cameras: list[str] | None) -> int:
    """Write the frames a kept run recorded at ``step``; 1 when one differs from the digest
    steps.jsonl chained for it, 2 when the run, step or cameras cannot be read."""
    from simforge_ros.core.errors import EXIT_FAILURE, SimforgeError
    from simforge_ros.record.frames import FramesError, default_step, frames_at
    from simforge_ros.record.rundir import load_run

    try:
        run = load_run(path)
        at = default_step(run) if step is None else step
        frames = frames_at(run, at, cameras)
        problem = out_dir_problem(out)  # named as for a scenario, not an OSError's own text
        if problem is not None:
            say("render", f"--out: expected a directory simforge can create ({problem}), got {out!r}")
            return EXIT_USAGE
        run_id = run.manifest["run_id"]
    except FramesError as err:
        say("render", f"{path}: {err}")
        return EXIT_USAGE
    except (SimforgeError, OSError) as err:  # RunDirError, BagError: one line, never a traceback
        say("render", err)
        return EXIT_USAGE
    try:
        with _all_or_none(out):
            written = [(write_png(Path(out) / f"{run_id}_step{at}_{f.camera}.png", f.pixels), f) for f in frames]
    except OSError as err:
        say("render", _not_written(err, out))
        return EXIT_USAGE
    for png, frame in written:
        seen = "as chained" if frame.matches else f"DIFFERS from the chained {frame.chained}"
        print(f"{png}  {frame.camera} t={frame.t_us} us  sha256 {frame.digest[:16]} {seen}")
    bad = [f.camera for _, f in written if not f.matches]
    if bad:
        say("render", f"{path}: the bag's {', '.join(bad)} frame of step {at} is not the one the recorder chained")
        return EXIT_FAILURE
    return 0


if __name__ == "__main__":
    sys.exit(main())
