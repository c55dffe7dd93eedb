"""Write camera and top-down PNGs of a scenario (docs, debugging, eyeballing a change).

    simforge render right_turn --step 60 --out docs/

drives the scenario with the RouteFollower in lockstep (decide every decision_us, hold for
decision_us / tick_us ticks) to the step, renders the cameras there and draws the top-down map.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simforge_ros.core.errors import EXIT_USAGE
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
from simforge_ros.tools import say


def _scenario(s: Scenario | str | Path) -> Scenario:
    return s if isinstance(s, Scenario) else load_scenario(s)


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
    last = scenario.duration_us // decision_us
    if not 0 <= step <= last:
        raise ValueError(f"step: expected a decision step from 0 to {last} ({scenario.name} lasts "
                         f"{scenario.duration_us / 1e6:g} s, a step is {decision_us} us), got {step}")
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
    """<out_dir>/<scenario>_<camera>.png for each camera at ``step``."""
    sc = _scenario(scenario)
    engine = drive_to_step(sc, step, decision_us, seed, width=width, height=height)
    out = []
    for cam in cameras:
        frame = engine.render(cam, engine.t_us)
        out.append(write_png(Path(out_dir) / f"{sc.name}_{cam}.png", frame.pixels))
    return out


def write_topdown_png(scenario: Scenario | str | Path, out_path: str | Path) -> Path:
    """The top-down map (see topdown.py for the legend), framed on the follower's drive."""
    sc = _scenario(scenario)
    decision_us = DEFAULT_DECISION_US
    trajectory: list[Pose2D] = []
    engine = Engine(sc, 0)
    policy = RouteFollower(sc)
    policy.reset(0, decision_us)
    k = 0
    while engine.t_us <= sc.duration_us:
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
    parser.add_argument("scenario", help="scenario name or path to a .yaml file")
    parser.add_argument("--step", type=int, default=60, help="decision step to render at (default 60)")
    parser.add_argument("--out", default="docs", help="output directory (default docs)")
    parser.add_argument("--cameras", default="chase,front", help=f"comma list from {','.join(CAMERA_NAMES)}")
    parser.add_argument("--decision-us", type=int, default=DEFAULT_DECISION_US)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--height", type=int, default=180)
    parser.add_argument("--no-topdown", action="store_true", help="skip <scenario>_topdown.png")
    parser.add_argument("--topdown-only", action="store_true", help="write only <scenario>_topdown.png")
    args = parser.parse_args(argv)
    cameras = [c for c in args.cameras.split(",") if c]
    unknown = [c for c in cameras if c not in CAMERA_NAMES]
    if unknown:
        parser.error(f"unknown camera(s) {unknown}; known: {', '.join(CAMERA_NAMES)}")
    try:
        Path(args.out).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        say("render", f"--out: expected a directory simforge can create ({err.strerror}), got {args.out!r}")
        return EXIT_USAGE
    try:
        sc = load_scenario(args.scenario)
        written: list[Path] = []
        if not args.topdown_only:
            written += write_camera_pngs(
                sc, args.step, args.out, cameras, args.decision_us, args.seed, args.width, args.height
            )
        if not args.no_topdown:
            written.append(write_topdown_png(sc, Path(args.out) / f"{sc.name}_topdown.png"))
    except (ScenarioError, ValueError, OSError) as err:
        say("render", err)
        return EXIT_USAGE
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
