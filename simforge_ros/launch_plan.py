"""What `ros2 launch simforge_ros simforge.launch.py` starts, and the parameters it hands
each node over the parameter file: the launch arguments checked and typed as `simforge
run` checks its options, before any node starts.

Why a module of its own, with no launch import: the launch file is only a shell around
``plan`` (launch is not on PyPI, so the tests run this, not the launch). Before it:

* a launch argument reached the node as launch_ros types YAML text by its look:
  ``real_time_factor:=1`` an int, which the node's double parameter refused at start-up,
  and ``run_id:=123`` an int where a string is declared;
* every argument's default was handed over too, so it overrode the parameter file:
  ``tf: true`` or ``backend: carla`` in a user's file had no effect;
* a typo in the parameter file was refused only on the ``driver:=torch`` path.

Now an argument left empty (its default) leaves the parameter to the file, else to the
node's own default; one given overrides the file, as ``--set`` does for `simforge run`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from simforge_ros.core.errors import ConfigError, Printed, Problem
from simforge_ros.core.faults import FaultPlan
from simforge_ros.drivers.registry import check_planner_cameras
from simforge_ros.params import (
    both_units,
    check_frame_wait,
    check_run_span,
    check_wanted_readers,
    coerce,
    frame_problems,
    meant_as,
    read_params_file,
    spec,
)
from simforge_ros.record.rundir import unusable_run_dir
from simforge_ros.runner import DRIVERS, EXTERNAL, check_camera_faults

NODES = ("recorder", "sim_bridge", "driver", "clock_master")
"""The nodes a launch starts, in the order it starts them (the clock master last: it
waits for the others, and its exit ends the launch)."""


@dataclass(frozen=True)
class LaunchArg:
    """One launch argument: its default ("": the parameter file's value) and what it sets."""

    default: str
    doc: str
    sets: tuple[tuple[str, str], ...] = ()  # (node, parameter)


_FILE = "empty: the parameter file's value, else the node's default"

ARGS: Mapping[str, LaunchArg] = {
    "params_file": LaunchArg("", "ROS 2 parameter file (empty: the package's config/simforge.yaml)"),
    "scenario": LaunchArg("", f"scenario name or scenario file ({_FILE}: right_turn)",
                          (("sim_bridge", "scenario"), ("driver", "scenario"))),
    "driver": LaunchArg("", f"driver: route | torch | external (start your own node offering /simforge/decide; "
                            f"see the README) ({_FILE}, driver.policy: route)"),
    "latency_us": LaunchArg("", f"driver latency in microseconds, a whole number of steps ({_FILE}: 0)",
                            (("clock_master", "latency_us"),)),
    "seed": LaunchArg("", f"run seed ({_FILE}: 0)", (("clock_master", "seed"),)),
    "steps": LaunchArg("", f"steps to run; 0 = the whole scenario ({_FILE}: 0)", (("clock_master", "steps"),)),
    "real_time_factor": LaunchArg(
        "", "simulation seconds a wall second may hold: 1 = real time (to watch the run live), 0 = as fast as "
            f"the participants answer ({_FILE}: 0)", (("clock_master", "real_time_factor"),)),
    "hold_at_step": LaunchArg(
        "", "hold the run once step K is done (0: at t(0)) until /simforge/pause (std_srvs/SetBool) is called "
            f"with false; -1: never ({_FILE}: -1)", (("clock_master", "hold_at_step"),)),
    "wait_for_readers": LaunchArg(
        "", "topics the run publishes that a node of yours must read before step 0, as a list: [/clock, "
            f"/simforge/camera/front/image_raw] ({_FILE}: [], none)",
        (("clock_master", "wait_for_readers"), ("sim_bridge", "wait_for_readers"))),
    "out_dir": LaunchArg("", "run directory: a new one, or one holding no run yet (empty: the parameter file's "
                             "recorder.out_dir, else /tmp/simforge-run)", (("recorder", "out_dir"),)),
    "run_id": LaunchArg("", "run id (empty: the parameter file's, else 'launch')",
                        (("recorder", "run_id"), ("clock_master", "run_id"))),
    "backend": LaunchArg("", "the simulator: embedded (this package's engine) | carla (a CARLA 0.10 server, run "
                             f"synchronous; the other carla_* in the parameter file) ({_FILE}: embedded)",
                         (("sim_bridge", "backend"),)),
    "carla_host": LaunchArg("", f"carla backend: the server's host ({_FILE}: localhost)",
                            (("sim_bridge", "carla_host"),)),
    "carla_port": LaunchArg("", f"carla backend: the server's RPC port ({_FILE}: 2000)",
                            (("sim_bridge", "carla_port"),)),
    "camera_tf": LaunchArg("", "the bridge publishes each rendered camera's frame (its images' frame_id) on "
                               f"/tf_static, from base_frame ({_FILE}: true)", (("sim_bridge", "camera_tf"),)),
    "tf": LaunchArg("", f"the bridge publishes map_frame -> base_frame on /tf once a step ({_FILE}: false)",
                    (("sim_bridge", "tf"),)),
    "base_frame": LaunchArg(
        "", "the ego's frame: its rear axle on the ground, x forward, y left, z up (the pose /simforge/state "
            "carries); the cameras' parent, and the child frame of the bridge's odometry and /tf "
            f"({_FILE}: base_link)", (("sim_bridge", "base_frame"),)),
}

OUT_DIR = "/tmp/simforge-run"
"""The recorder's directory where neither an argument nor the file names one (the node
itself has none: it needs one). Once it holds a run, the next launch takes OUT_DIR-2,
OUT_DIR-3, ...: the recorder never overwrites a run, and a plain second launch was
refused by it after its nodes had started."""
MAX_OUT_DIRS = 10_000
"""How many of OUT_DIR, OUT_DIR-2, ... a launch looks at for one holding no run."""
RUN_ID = "launch"
"""The run id where neither an argument nor the file gives one."""


@dataclass(frozen=True)
class LaunchPlan:
    """The nodes to start (``driver`` absent with ``driver:=external``), each with the
    parameters the launch hands it after the parameter file, as typed Python values."""

    params_file: Path
    nodes: dict[str, dict[str, Any]]
    out_dir: str  # the run's directory, from an argument, the file or free_out_dir
    notes: tuple[str, ...] = ()  # for the launch's log (near_misses)


def _value(arg: str, node: str, name: str, text: str) -> Any:
    """A launch argument's text as the parameter's value: a string parameter takes the text
    as it is (``run_id:=123`` is the string "123"), any other one reads it as YAML, as
    ``ros2 launch`` would, and then as ``--set`` does (ints widen to floats).

    Raises:
        ConfigError: a value of the wrong type or out of range, naming the argument.
    """
    source = f"launch argument {arg}:={text}"
    if spec(node, name, source).kind == "str":
        return coerce(node, name, text, source)
    try:
        value = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError):
        value = text
    return coerce(node, name, value, source)


def free_out_dir() -> str:
    """OUT_DIR, or the first of OUT_DIR-2, OUT_DIR-3, ... the recorder can use."""
    for n in range(1, MAX_OUT_DIRS + 1):
        candidate = OUT_DIR if n == 1 else f"{OUT_DIR}-{n}"
        if unusable_run_dir(Path(candidate)) is None:
            return candidate
    return OUT_DIR  # all taken: the plan refuses it, naming out_dir


def near_misses(names: Collection[str]) -> list[str]:
    """Notes on launch arguments within a typo of one of ARGS (``scenaro:=``): launch takes
    any ``name:=value``, and one misspelt ran the default scenario, unsaid. Said, not
    refused: launch configurations are not scoped, and an including launch file's own
    arguments (``camera``, ``output_dir``) come within a typo of ours too."""
    return [f"simforge: launch argument {name} is none of simforge's (did you mean {meant}?); it sets nothing here"
            for name in sorted(set(names) - set(ARGS)) if (meant := meant_as(name, ARGS)) is not None]


def _scenario_problems(merged: Mapping[str, Mapping[str, Any]], given: Mapping[str, str], params_file: Path,
                       route_driver: bool) -> list[Problem]:
    """The scenario, checked before any node starts as `simforge run` checks it: a wrong
    one made the bridge and driver exit 2 after every node had started, the clock master
    ended `aborted` and the recorder kept a run directory of nothing. The route follower
    tracks its own copy of the scenario's route (the torch planner reads none)."""
    from simforge_ros.engine.catalog import load_scenario, same_scenario

    bridge = str(merged["sim_bridge"].get("scenario", spec("sim_bridge", "scenario").default))
    source, field = ((f"launch argument scenario:={given['scenario']}", "scenario") if given.get("scenario")
                     else (str(params_file), "sim_bridge.scenario"))
    problems = []
    if route_driver:
        theirs = str(merged["driver"].get("scenario", spec("driver", "scenario").default))
        if not same_scenario(theirs, bridge):
            problems.append(Problem(str(params_file), "driver.scenario", f"the sim_bridge's scenario ({bridge})",
                                    theirs))
    try:
        load_scenario(bridge)  # as either backend loads it first (CARLA's then places it on its map)
    except ValueError as err:  # ScenarioError names the file and field
        problems.append(Problem(source, field, "a scenario the bridge can load", Printed(str(err))))
    except OSError as err:  # a file that cannot be read (its mode)
        problems.append(Problem(source, field, "a scenario file that can be read", Printed(str(err))))
    return problems


def plan(given: Mapping[str, str], default_params_file: Path, others: Collection[str] = ()) -> LaunchPlan:
    """What a launch starts with the launch arguments ``given`` (name -> text; an empty or
    absent one is left to the parameter file; ``others``: the other launch arguments' names,
    of which one within a typo of an argument here gets a note (near_misses): launch
    itself takes any ``name:=value``, and an including launch file may have its own).

    Raises:
        ConfigError: every problem at once: a bad value, a parameter file that `simforge
            run --params-file` would refuse, or a combination the run would refuse at
            start-up (a period given in both units, a torch driver whose frame wait
            outlasts the clock master's call limit).
    """
    problems: list[Problem] = []
    params_file = Path(given.get("params_file") or default_params_file)
    try:
        from_file = read_params_file(params_file)
    except ConfigError as err:
        problems.extend(err.problems)
        from_file = {}
    handed: dict[str, dict[str, Any]] = {node: {} for node in NODES}
    for arg, item in ARGS.items():
        text = given.get(arg, item.default)
        if not text:
            continue
        for node, name in item.sets:
            try:
                handed[node][name] = _value(arg, node, name, text)
            except ConfigError as err:
                problems.extend(err.problems)
    if not from_file.get("recorder", {}).get("out_dir") and "out_dir" not in handed["recorder"]:
        handed["recorder"]["out_dir"] = free_out_dir()
    # one run id for both nodes that take it: the manifest says the clock master's
    run_id = handed["clock_master"].get("run_id") or from_file.get("clock_master", {}).get("run_id") \
        or from_file.get("recorder", {}).get("run_id") or RUN_ID
    handed["clock_master"]["run_id"] = handed["recorder"]["run_id"] = run_id
    if given.get("driver"):
        driver, source = given["driver"], f"launch argument driver:={given['driver']}"
    else:
        driver = from_file.get("driver", {}).get("policy", spec("driver", "policy").default)
        source = str(params_file)
    if driver not in DRIVERS:
        problems.append(Problem(source, "driver" if given.get("driver") else "driver.policy", " | ".join(DRIVERS),
                                driver))
    elif driver == EXTERNAL:
        del handed["driver"]
    else:
        handed["driver"]["policy"] = driver
    # the driver node's parameters reach the recorder before step 0 (an external one has none)
    handed["recorder"]["await_driver"] = driver != EXTERNAL
    merged = {node: {**from_file.get(node, {}), **handed.get(node, {})} for node in NODES}
    out_dir = str(merged["recorder"].get("out_dir", ""))
    if out_dir and (why := unusable_run_dir(Path(out_dir))) is not None:
        # the recorder refuses it too, but only once every node has started
        problems.append(Problem(f"launch argument out_dir:={given['out_dir']}" if given.get("out_dir")
                                else str(params_file) if from_file.get("recorder", {}).get("out_dir")
                                else "launch", "out_dir", f"a new run directory (never overwritten; {why})",
                                out_dir))
    problems += _scenario_problems(merged, given, params_file, driver == "route")
    for node in NODES:
        problems += both_units(node, merged[node], f"{params_file} and the launch arguments")
    problems += frame_problems(merged["sim_bridge"], f"{params_file} and the launch arguments")
    try:
        check_run_span(merged, f"{params_file} and the launch arguments")
    except ConfigError as err:
        problems.extend(err.problems)
    if driver == "torch":
        # the bridge renders what the planner looks at (driver.cameras), or the file's rig
        # for the bridge where it holds every one of them, as `simforge run --driver torch`
        # does (cli._planner_rig, runner.node_params)
        cameras = [str(c) for c in merged["driver"].get("cameras", spec("driver", "cameras").default)]
        rig = merged["sim_bridge"].get("cameras")
        if not (isinstance(rig, list) and set(cameras) <= set(map(str, rig))):
            handed["sim_bridge"]["cameras"] = cameras
        for check in (lambda: check_planner_cameras(cameras),
                      lambda: check_frame_wait(merged, f"{params_file} and the launch arguments")):
            try:
                check()
            except ConfigError as err:
                problems.extend(err.problems)
    try:  # against the rig the bridge is handed (a torch run's planner cameras, say)
        check_wanted_readers({**merged, "sim_bridge": {**merged["sim_bridge"], **handed.get("sim_bridge", {})}},
                             f"{params_file} and the launch arguments")
    except ConfigError as err:
        problems.extend(err.problems)
    # every node's faults, as simforge run checks them: a node handed a spec it cannot parse
    # exits at start-up, and only the clock master's exit ends a launch (the rest waited out
    # its start-up limit and ended participant_timeout)
    for node in NODES:
        specs = merged[node].get("faults") or []
        try:
            plan_of = FaultPlan.parse(list(specs))
            if node == "sim_bridge":  # a camera fault that cannot fire is no plan
                check_camera_faults(merged, plan_of, str(params_file), "sim_bridge.faults")
        except ConfigError as err:
            problems += [Problem(str(params_file), f"{node}.faults", p.expected, p.got) if p.source == "--inject"
                         else p for p in err.problems]
    if problems:
        raise ConfigError(problems)
    return LaunchPlan(params_file, handed, out_dir, tuple(near_misses(others)))
