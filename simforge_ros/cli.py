"""`simforge`: run, compare and check lockstep runs.

    simforge run [SCENARIO] [--params-file FILE] [--repeat N] [--driver route|torch|external] [--seed S]
                 [--latency-ms MS] [--steps K] [--layout processes|single] [--set NODE.PARAM=VALUE ...]
                 [--inject SPEC ...] [--real-time-factor F] [--hold-at-step K] [--wait-for-reader TOPIC ...]
                 [--out DIR] [--json]
    simforge scenarios
    simforge info RUN [--json]
    simforge verify RUN [--json]
    simforge diff RUN_A RUN_B [--json] [--force]
    simforge spread RUN RUN [RUN ...] [--json] [--force]
    simforge rerun RUN [--layout processes|single] [--out DIR] [--json] [--real-time-factor F] [--hold-at-step K]
    simforge play RUN [--rate R] [--topic T ...] [--from-step K] [--to-step K] [--wait-for-reader T ...]
                  [--wait-s S] [--verify]
    simforge salvage RUN [--out DIR] [--json]
    simforge probe-driver [--calls N] [--deterministic on|off|both] [--inputs RUN] [--weights F] [--json]
    simforge render SCENARIO --step K [--out DIR] | RUN [--step K] [--cameras C,...] [--out DIR]
    simforge pause [--resume | --step] [--run RUN_DIR]
    simforge bench [--quick]
    simforge carla-map [--host H] [--port P] [--town T] [--json]
    simforge --version

Every command returns an exit code: 0 success (every run counted), 1 a run refused or a
check failed, 2 a usage or input error (said in one line naming the field), and a run's
own refusal exit code when a single run was refused.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml

from simforge_ros.command import INTERRUPTED
from simforge_ros.core.errors import (
    EXIT_FAILURE,
    EXIT_USAGE,
    ConfigError,
    Problem,
    RateNotMultiple,
    Refusal,
    SimforgeError,
    cut_got,
    where,
)
from simforge_ros.core.faults import FORMS, FaultPlan
from simforge_ros.core.limits import INT64
from simforge_ros.core.yaml_file import load_rcl_value
from simforge_ros.runner import (
    DRIVERS,
    EXTERNAL,
    RUN_PARAMETERS,
    SPEC_PARAMS,
    STOP_SIGNALS,
    SURROUND,
    NotedStops,
    RunResult,
    RunSpec,
)
from simforge_ros.tools import out_dir_problem

_RUN_FIELDS = "run_id, scenario, steps, chain_digest, frames_digest, status, refusal, run_dir"
_SET_EXAMPLE = "sim_bridge.cameras=[front,left]"


# the tools with parsers of their own: (command, module with main(argv), one-line summary)
_TOOLS = (
    ("verify", "simforge_ros.record.verify", "recompute a run's digests from its bag alone and check them"),
    ("info", "simforge_ros.record.info", "what a kept run is: its setup, its end, its digests and its bag"),
    ("diff", "simforge_ros.record.diff_runs", "name the first step where two runs differ, and what moved first"),
    ("spread", "simforge_ros.record.spread_runs", "how far apart repeated runs are: the noise floor before ranking"),
    ("rerun", "simforge_ros.rerun", "run a kept run again from its parameter file: did it repeat bit for bit?"),
    ("play", "simforge_ros.record.play", "publish a run's bag on its topics again, paced by its simulation time"),
    ("salvage", "simforge_ros.record.salvage", "make a usable run of one whose recorder was killed"),
    ("probe-driver", "simforge_ros.drivers.probe", "is the torch planner deterministic? one input, many calls"),
    ("render", "simforge_ros.engine.snapshot", "write camera and top-down PNGs of a scenario at a step"),
    ("pause", "simforge_ros.pause_client", "hold a running run before its next step, --resume it, or --step it"),
    ("bench", "simforge_ros.bench", "measure the lockstep loop against the transport floor"),
    ("carla-map", "simforge_ros.backends.carla_map",
     "a CARLA server's spawn points and traffic lights, in the map frame a scenario is written in"),
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own exit code 2, with our wording
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)  # "simforge run: error: ..."
        raise SystemExit(EXIT_USAGE)


# How `simforge run` is told what it sets itself (runner.SPEC_PARAMS) in every node that
# needs it. Through --set such a parameter reached one node only: a driver following another
# scenario than the bridge's, a run id or a seed the run directory's name contradicts, a
# record written outside its run directory, --steps overridden unseen.
# {value} is the value given to --set: "--driver instead" read as wrong beside a --driver.
_RUN_OPTION = {"scenario": "the SCENARIO argument instead", "seed": "--seed {value} instead",
               "steps": "--steps {value} instead", "latency_us": "--latency-ms instead",
               "driver": "--driver {value} instead, in place of any --driver", "faults": "--inject instead",
               "out_dir": "--out instead", "record": "clock_master.record in a --params-file instead",
               "run_id": "no value: each run is named for you"}


def _parse_set(items: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        node, dot, name = key.partition(".")
        if not sep or not dot or not node or not name:
            raise ConfigError.single("--set", item, f"NODE.PARAM=VALUE (e.g. {_SET_EXAMPLE})", item)
        option = SPEC_PARAMS.get(node, {}).get(name)
        if option is not None:
            said = _RUN_OPTION[option].format(value=cut_got(raw))
            raise ConfigError.single("--set", key, f"{said} (simforge run sets {key} itself)", item)
        try:
            value = load_rcl_value(raw)  # as `ros2 run ... -p NAME:=VALUE` reads it (rcl)
        except (yaml.YAMLError, RecursionError, ValueError):  # ValueError: an int of over 4300 digits
            # rcl refuses it ("Couldn't parse parameter override rule"); taken as the string,
            # a stray shell quote made a frame named 'odom, and the run counted
            raise ConfigError.single("--set", key, "a value as rcl reads `-p NAME:=VALUE`: YAML (a string with a "
                                     "quote or a leading * or & in the other quotes: \"'odom\")", item) from None
        out.setdefault(node, {})[name] = value
    return out


def _planner_rig(path: str | None, file_sets: dict[str, dict[str, Any]],
                 given_sets: Mapping[str, Mapping[str, Any]]) -> None:
    """The bridge of a torch run renders the planner's cameras (driver.cameras); a parameter
    file's sim_bridge.cameras stays when it holds every one of them. It was always dropped,
    without a word: a kept torch run's params.yaml with a chase camera for viewing ran again
    without it, another chain (README: a kept run's params.yaml runs that run again)."""
    rig = file_sets.get("sim_bridge", {}).get("cameras")
    if rig is None or "cameras" in given_sets.get("sim_bridge", {}):
        return  # none in the file, or a --set of the bridge's own wins
    planner = given_sets.get("driver", {}).get("cameras", file_sets.get("driver", {}).get("cameras", SURROUND))
    if isinstance(rig, list) and isinstance(planner, list) and set(map(str, planner)) <= set(map(str, rig)):
        return
    del file_sets["sim_bridge"]["cameras"]
    missing = [c for c in planner if c not in rig] if isinstance(rig, list) and isinstance(planner, list) else planner
    print(f"simforge: note: {path}: sim_bridge.cameras {_shown_list(rig)} lacks the torch planner's "
          f"{_shown_list(missing)}: the bridge renders the planner's cameras {_shown_list(planner)}", file=sys.stderr)


def _shown_list(value: Any) -> str:
    """A list as a parameter file writes it: [front, left]."""
    return "[" + ", ".join(map(str, value)) + "]" if isinstance(value, list) else repr(value)


def _latency_us(text: str | None) -> int:
    """--latency-ms in whole microseconds.

    Raises:
        ConfigError: not a finite number of milliseconds >= 0, or past int64 microseconds.
        RateNotMultiple: a fraction of a microsecond, refused before any run as the timing
            contract refuses any period that is no whole number of microseconds (exit 11):
            it was a usage error, while the same latency as clock_master.latency_s was the
            contract's. Refused here, exactly: handed on as seconds, a float could round it
            to whole microseconds (100.00000000000001 ms ran as 100 ms).
    """
    if text is None:
        return 0
    try:
        ms = Decimal(text)
    except InvalidOperation:
        raise ConfigError.single("--latency-ms", "latency", "a number of milliseconds", text) from None
    if not ms.is_finite() or ms < 0:
        raise ConfigError.single("--latency-ms", "latency", "a finite number of milliseconds >= 0", text)
    # exactly, on the digits as given: Decimal's arithmetic keeps 28 digits and rounded
    # 100.00000000000000000000000001 ms, and 1e-99999999 ms, to whole microseconds
    _sign, digits, exponent = ms.as_tuple()
    whole = int("".join(map(str, digits)) or "0")
    shift = int(exponent) + 3  # microseconds = whole * 10**shift
    if whole == 0:
        return 0
    if ms.adjusted() + 3 > 19:  # past int64 microseconds, whatever its fraction
        raise ConfigError.single("--latency-ms", "latency", f"at most {Decimal(INT64[1]) / 1000} ms", text)
    if shift < 0 and (-shift > len(str(whole)) or whole % 10**-shift):
        raise RateNotMultiple(-1, f"--latency-ms {cut_got(text)}: not a whole number of microseconds")
    us = whole * 10**shift if shift >= 0 else whole // 10**-shift
    if us > INT64[1]:  # named as given, not as the microseconds the node would have refused
        raise ConfigError.single("--latency-ms", "latency", f"at most {Decimal(INT64[1]) / 1000} ms", text)
    return us


def _first_missing(path: Path) -> Path | None:
    """The outermost directory of ``path`` not there yet (what --out's checks will make),
    or None when ``path`` is there."""
    missing = None
    for part in (path, *path.parents):
        if part.exists():
            break
        missing = part
    return missing


def _remove_empty(path: Path, up_to: Path | None) -> None:
    """Remove ``path`` and its parents up to ``up_to``, each only while empty: the folders
    --out made for a run refused before it began (a scenario the bridge refused left
    `newout/deep/er` behind, empty)."""
    if up_to is None:
        return
    for part in (path, *path.parents):
        try:
            part.rmdir()  # only an empty directory
        except OSError:
            return
        if part == up_to:
            return


def _refused_before_any_run(scenario: str, err: Refusal) -> dict[str, Any]:
    """`--json`'s object for a refusal of the command line itself, before any run was made
    (--latency-ms): a run's keys, with no run id, no run directory and nothing chained."""
    return {"run_id": None, "scenario": scenario, "steps": 0, "chain_digest": "0" * 64, "frames_digest": None,
            "status": "refused", "refusal": {"code": err.code, "step": err.step, "detail": err.detail},
            "run_dir": None}


def _progress_printer(run_id: str, show_progress: bool) -> Callable[[int, int], None]:
    """The per-step progress callback of one run (bound to that run's id)."""

    def progress(k: int, total: int) -> None:
        if show_progress and (k % 10 == 0 or k + 1 == total or not total):
            of = f"/{total}" if total else ""
            print(f"\r{run_id}: step {k + 1}{of}", end="", file=sys.stderr, flush=True)

    return progress


_PER_RUN = ("run_id", "out_dir")  # RunSpec fields each run has of its own


def _same_option(option: str, a: Any, b: Any) -> bool:
    """Two nodes' values of one run option in a parameter file agree: one scenario spelt two
    ways (rt.yaml, ./rt.yaml, its absolute path) is one, as the launch file judges it."""
    from simforge_ros.engine.catalog import same_scenario

    return same_scenario(str(a), str(b)) if option == "scenario" else bool(a == b)


def _params_file(path: str, given: Collection[str] = ()) -> tuple[dict[str, Any], dict[str, dict[str, Any]],
                                                                   list[str]]:
    """(run options, other parameters, fault specs) from a ROS 2 parameter file.

    A run option is a RunSpec field that the runner turns into node parameters
    (runner.SPEC_PARAMS); the rest of the file goes in as --set, before the command line's.
    ``given``: the run options the command line gives, whose values in the file are not
    used, so not checked (a scenario file the kept params.yaml of a run names, since moved).

    Raises:
        ConfigError: a bad file, or a scenario that differs between sim_bridge and driver.
    """
    from simforge_ros.params import read_params_file

    notes: list[str] = []
    params = read_params_file(Path(path), notes)
    for note in notes:
        print(f"simforge: {note}", file=sys.stderr)
    options: dict[str, Any] = {}
    sets: dict[str, dict[str, Any]] = {}
    faults: list[str] = []
    ignored = []
    for node, values in params.items():
        for name, value in values.items():
            option = SPEC_PARAMS.get(node, {}).get(name)
            if option in _PER_RUN:
                ignored.append(f"{node}.{name}")
            elif option == "faults":
                _check_file_faults(path, f"{node}.{name}", value)
                faults += [f for f in value if f not in faults]
            elif option is not None:
                if option not in given:
                    _check_file_option(path, f"{node}.{name}", option, value)
                # the command line's choice replaces the file's, conflicting or not
                if option in options and option not in given and not _same_option(option, options[option], value):
                    raise ConfigError.single(path, f"{node}.{name}", f"the same {option} as the other nodes",
                                             value)
                options[option] = value
            else:
                sets.setdefault(node, {})[name] = value
    if ignored:
        print(f"simforge: {path}: {', '.join(ignored)} ignored: each run has its own", file=sys.stderr)
    return options, sets, faults


def _check_file_option(path: str, field: str, option: str, value: Any) -> None:
    """A run option a parameter file gives, named as the file's (not as the command-line
    argument it stands for, which the user never typed).

    Raises:
        ConfigError: an unknown driver policy or scenario.
    """
    from simforge_ros.engine import list_scenarios
    from simforge_ros.engine.catalog import names_a_file

    if option == "driver" and value not in DRIVERS:
        raise ConfigError.single(path, field, f"one of {', '.join(DRIVERS)}", value)
    if option == "scenario" and not (Path(str(value)).is_file() if names_a_file(str(value))
                                     else value in list_scenarios()):
        raise ConfigError.single(path, field, f"one of {', '.join(list_scenarios())} or an existing scenario "
                                 "file", value)


def _check_file_faults(path: str, field: str, specs: list[str]) -> None:
    """A parameter file's fault specs, named as its field.

    Raises:
        ConfigError: every malformed spec.
    """
    try:
        FaultPlan.parse(specs)
    except ConfigError as err:
        raise ConfigError([Problem(path, field, p.expected, p.got) for p in err.problems]) from None


def _file_fields(options: Mapping[str, Any], file_sets: Mapping[str, Mapping[str, Any]], args: argparse.Namespace,
                 given_sets: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The ``node.name`` fields whose run value is the --params-file's: a value checked
    with the others (runner.node_params: the cameras' frames, the steps' span, the topics
    waited for) was named as the "run parameters'", though only the file held it."""
    fields = {f"{node}.{name}" for node, values in file_sets.items() for name in values}
    fields |= {f"{node}.{name}" for node, names in SPEC_PARAMS.items() for name, option in names.items()
               if option in options}
    flags = {"clock_master.steps": args.steps, "clock_master.seed": args.seed,
             "clock_master.latency_us": args.latency_ms, "clock_master.real_time_factor": args.real_time_factor,
             "clock_master.hold_at_step": args.hold_at_step, "clock_master.wait_for_readers": args.wait_for_reader,
             "sim_bridge.wait_for_readers": args.wait_for_reader}
    return (fields - {f"{node}.{name}" for node, values in given_sets.items() for name in values}
            - {field for field, value in flags.items() if value is not None and value != []})


def _merged_sets(base: dict[str, dict[str, Any]], over: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``over`` on top of ``base``; a period ``over`` gives in one unit replaces ``base``'s
    in the other (both units in ``over`` itself stay, for params.validate to refuse)."""
    out = {node: dict(values) for node, values in base.items()}
    for node, values in over.items():
        mine = out.setdefault(node, {})
        for name, value in values.items():
            for suffix, other in (("_s", "_us"), ("_us", "_s")):
                twin = name[: -len(suffix)] + other
                if name.endswith(suffix) and twin not in values:
                    mine.pop(twin, None)
            mine[name] = value
    return out


def _check_run_id_from(scenario: str, seed: int, repeat: int) -> None:
    """A run's id starts with its scenario file's name, and verify, info and rerun hold a
    run to the run id rule: a counted run of a 190-character file name was refused by all
    three, a 245-character one ended in "File name too long", and a file name holding a
    newline made a run no tool took."""
    from simforge_ros.record.rundir import RUN_ID_MAX, is_run_id
    from simforge_ros.runner import new_run_id

    longest = new_run_id(scenario, seed, max(repeat - 1, 0))
    if not is_run_id(longest):
        raise ConfigError.single("SCENARIO", "scenario", "a file name that makes a run id: printable, and at most "
                                 f"{RUN_ID_MAX} bytes with the '-s{seed}-NN-xxxxxx' a run adds (rename the file)",
                                 Path(scenario).name)


def _run(args: argparse.Namespace) -> int:
    from simforge_ros.engine import list_scenarios
    from simforge_ros.engine.catalog import names_a_file
    from simforge_ros.runner import RunSpec, new_run_id, node_params, run

    given = [option for option, value in (("scenario", args.scenario), ("driver", args.driver)) if value is not None]
    options, file_sets, file_faults = _params_file(args.params_file, given) if args.params_file else ({}, {}, [])
    scenario = args.scenario if args.scenario is not None else options.get("scenario")
    if scenario is None:
        raise ConfigError.single("SCENARIO", "scenario", "a scenario name or file (or sim_bridge.scenario in "
                                 "--params-file)", None)
    as_file = names_a_file(scenario)  # else a shipped scenario's name, whatever the working directory holds
    if as_file and not Path(scenario).is_file():  # meant as a file: say why it is none
        where = Path(scenario)
        why = "is a directory" if where.is_dir() else "not a regular file" if where.exists() else "no such file"
        raise ConfigError.single("SCENARIO", "scenario", f"an existing scenario file ({why}) or one of "
                                 f"{', '.join(list_scenarios())}", scenario)
    if not as_file and scenario not in list_scenarios():
        raise ConfigError.single("SCENARIO", "scenario", f"one of {', '.join(list_scenarios())} or a scenario "
                                 "file (a path ending in .yaml, or with a directory part)", scenario)
    if args.seed is not None and not 0 <= args.seed <= INT64[1]:
        raise ConfigError.single("--seed", "seed", f"an integer in [0, {INT64[1]}]", args.seed)
    _check_run_id_from(scenario, args.seed if args.seed is not None else options.get("seed", 0), args.repeat)
    if args.steps is not None and not 0 <= args.steps <= INT64[1]:
        raise ConfigError.single("--steps", "steps", f"an integer in [0, {INT64[1]}] (0: the whole scenario)",
                                 args.steps)
    if args.real_time_factor is not None and not (math.isfinite(args.real_time_factor) and args.real_time_factor >= 0):
        raise ConfigError.single("--real-time-factor", "real_time_factor",
                                 "a finite number >= 0 (0: unpaced; 1: real time)", args.real_time_factor)
    if args.hold_at_step is not None and not 0 <= args.hold_at_step <= INT64[1]:
        raise ConfigError.single("--hold-at-step", "hold_at_step", f"a step in [0, {INT64[1]}]", args.hold_at_step)
    if args.repeat < 1:
        raise ConfigError.single("--repeat", "repeat", "an integer >= 1", args.repeat)
    driver = args.driver if args.driver is not None else options.get("driver", "route")
    if args.latency_ms is not None:
        file_sets.get("clock_master", {}).pop("latency_s", None)  # the command line's latency wins
    # derived from the driver, both ways, as the launch file does: the shipped config's `true`
    # (or a kept route run's params.yaml) held Finish for the parameters an external driver
    # never publishes, refused participant_timeout after 30 s; a kept external run's `false`
    # would let a route run's manifest call its driver external
    file_sets.get("recorder", {}).pop("await_driver", None)
    if driver == EXTERNAL:
        file_sets.pop("driver", None)  # no driver of ours starts: its section is not used (as in launch)
    given_sets = _parse_set(args.set)
    if driver == "torch":
        _planner_rig(args.params_file, file_sets, given_sets)
    sets = _merged_sets(file_sets, given_sets)
    if args.latency_ms is not None and "latency_s" in sets.get("clock_master", {}):
        # the seconds replaced --latency-ms's microseconds unsaid (a file's latency_s yields)
        raise ConfigError.single("--set", "clock_master.latency_s", "no latency beside --latency-ms (give one "
                                 "of the two)", sets["clock_master"]["latency_s"])
    weights = sets.get("driver", {}).get("weights")
    if isinstance(weights, str) and weights:
        # named from where simforge was started: a `processes` node runs in the run's
        # directory, and the kept params.yaml must name the same file for `rerun`
        sets["driver"]["weights"] = str(Path(weights).expanduser().resolve())
    if args.real_time_factor is not None:  # the command line's factor wins, as its seed does
        sets.setdefault("clock_master", {})["real_time_factor"] = args.real_time_factor
    if args.hold_at_step is not None:
        sets.setdefault("clock_master", {})["hold_at_step"] = args.hold_at_step
    if args.wait_for_reader:  # both nodes that publish wait, each for its own topics
        wanted = list(dict.fromkeys(args.wait_for_reader))
        for node in ("clock_master", "sim_bridge"):
            sets.setdefault(node, {})["wait_for_readers"] = wanted
    hold_at = sets.get("clock_master", {}).get("hold_at_step", -1)
    try:
        latency_us = _latency_us(args.latency_ms) if args.latency_ms is not None else options.get("latency_us", 0)
    except RateNotMultiple as err:
        if args.json:  # a script reading --json got nothing for it (main says it on stderr)
            print(json.dumps(_refused_before_any_run(scenario, err), sort_keys=True), flush=True)
        raise
    seed = args.seed if args.seed is not None else options.get("seed", 0)
    steps = args.steps if args.steps is not None else options.get("steps", 0)
    record = options.get("record", True)
    out_root = Path(args.out)

    def spec_of(run_id: str) -> RunSpec:
        return RunSpec(
            scenario=str(Path(scenario).resolve()) if as_file else scenario,
            out_dir=(out_root / run_id).resolve(), run_id=run_id, driver=driver, seed=seed,
            steps=steps, latency_us=latency_us, layout=args.layout, sets=sets,
            faults=tuple(file_faults + [f for f in args.inject if f not in file_faults]), record=record,
        )

    try:
        node_params(spec_of(new_run_id(scenario, seed, 0)))  # every parameter checked before --out is made
    except ConfigError as err:  # a fault or a value the file gave is named as the file's
        from_file = _file_fields(options, file_sets, args, given_sets) if args.params_file else set()
        raise ConfigError([Problem(args.params_file, "faults", p.expected, p.got)
                           if p.source == "--inject" and p.field in file_faults and p.field not in args.inject
                           else Problem(args.params_file, p.field, p.expected, p.got)
                           if p.source == RUN_PARAMETERS and p.field in from_file
                           else p for p in err.problems]) from None
    from simforge_ros.params import unread_by_policy

    for name in unread_by_policy(driver, sets.get("driver", {})):
        print(f"simforge: note: driver.{name} is read by the torch planner only (--driver torch); "
              f"the {driver} driver ignores it", file=sys.stderr)
    made = _first_missing(out_root)
    problem = out_dir_problem(args.out)
    if problem is not None:
        raise ConfigError.single("--out", "out", f"a directory simforge can create and write to ({problem})",
                                 args.out)
    results: list[RunResult] = []
    show_progress = sys.stderr.isatty() and not args.json
    with _BetweenRuns(keep=args.own_process) as between:
        for index in range(args.repeat):
            if between.came:
                print(f"simforge: interrupted: the remaining {args.repeat - index} --repeat runs were not started",
                      file=sys.stderr)
                break
            run_id = new_run_id(scenario, seed, index)
            spec = spec_of(run_id)
            with between.run_taking_them():
                try:
                    result = run(spec, _progress_printer(run_id, show_progress))
                except SimforgeError:
                    if not results:  # refused before any run (a scenario the bridge refused at start)
                        _remove_empty(out_root, made)
                    raise
            _report(args, spec, result, hold_at, show_progress)
            results.append(result)
            if result.refusal is not None and result.refusal.get("code") == "aborted":
                break  # interrupted: the remaining --repeat runs are not started
        aborted = results[-1] if results and (results[-1].refusal or {}).get("code") == "aborted" else None
        if not args.json and len(results) > 1 and aborted is None:
            print(_repeat_summary(results), flush=True)
        elif not args.json and args.repeat > 1 and aborted is not None:
            # the user's stop, not runs that failed to repeat ("2 runs, 2 different outcomes")
            done = results[:-1]
            print(f"interrupted: run {len(results)} of {args.repeat} aborted"
                  + (f"; before it, {_repeat_summary(done)}" if len(done) > 1 else ""), flush=True)
        cut_short = bool(between.came)
    failed = [r for r in results if r.status != "counted"]
    if aborted is not None:
        return aborted.exit_code
    if cut_short and len(results) < args.repeat and not failed:
        return 130  # a stop between --repeat runs: not every run asked for was run
    if not failed:
        return 0
    # every run refused alike: that refusal's status (two missing_frame runs exited 1, where
    # an aborted run among them kept its 19); runs that ended otherwise among themselves: 1
    codes = {r.exit_code for r in failed}
    return codes.pop() if len(failed) == len(results) and len(codes) == 1 else EXIT_FAILURE


class _BetweenRuns:
    """Between and after a `simforge run`'s runs, a stop signal is noted, not raised: a
    Ctrl-C just after a run's line was printed made the exit status 130 while its manifest
    said counted. One noted ends a --repeat before its next run. During a run the signals
    are the run's own (runner._stop_signals takes them where Python's defaults are in place).
    Handlers, not a signal mask: a mask is a thread's, and any other thread takes the signal.
    """

    def __init__(self, keep: bool = False) -> None:
        """``keep``: the signals are ignored after the runs (`simforge run` as a command:
        its result is out, and a signal while the interpreter and rclpy end, 0.03-0.23 s,
        made the exit status the signal's beside a counted manifest); the handlers are
        restored when run in a caller's process (a test's, main(argv))."""
        self._noted = NotedStops()  # a run takes the signals over from it (runner._stop_signals)
        self._defaults: dict[int, Any] = {}
        self._keep = keep

    @property
    def came(self) -> list[int]:
        return self._noted.came

    def __enter__(self) -> _BetweenRuns:
        if threading.current_thread() is threading.main_thread():
            defaults = (signal.SIG_DFL, signal.default_int_handler)
            self._defaults = {sig: h for sig in STOP_SIGNALS if (h := signal.getsignal(sig)) in defaults}
            self._hold()
        return self

    def _hold(self) -> None:
        for sig in self._defaults:
            signal.signal(sig, self._noted)

    def __exit__(self, *_exc: object) -> None:
        if not self._keep:
            self._restore()
            return
        # Python puts its own handlers back to the default action as the interpreter ends:
        # a signal in those last 10-30 ms made the exit status the signal's (143, 129, 130)
        # beside a counted manifest, 12 times in 12. An ignored one stays ignored to the end.
        for sig in self._defaults:
            signal.signal(sig, signal.SIG_IGN)

    def _restore(self) -> None:
        for sig, handler in self._defaults.items():
            signal.signal(sig, handler)

    @contextlib.contextmanager
    def run_taking_them(self) -> Iterator[None]:
        """While a run goes on: its own handlers (runner._stop_signals takes them over from
        the noting one, and a signal noted since the last look stops it at once); the
        noting one again after it."""
        try:
            yield
        finally:
            self._hold()


def _report(args: argparse.Namespace, spec: RunSpec, result: RunResult, hold_at: Any, show_progress: bool) -> None:
    """A run's line (or JSON object) and its notes."""
    if show_progress:
        print("\r" + " " * 60 + "\r", end="", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_dict(), sort_keys=True), flush=True)
    else:
        refusal = result.refusal
        status = "counted" if refusal is None else f"refused:{refusal['code']} {where(refusal['step'])}"
        frames = f"  frames={result.frames_digest[:16]}" if result.frames_digest else ""
        chain = result.chain_digest[:16] or "none"  # the recorder chained nothing
        print(f"{result.run_id}  steps={result.steps}  chain={chain}{frames}  {status}", flush=True)
        if refusal is not None:
            print(f"  {refusal['detail']}", flush=True)
    for note in result.notes:
        print(f"simforge: note: {note}", file=sys.stderr)
    if result.status == "counted" and isinstance(hold_at, int) and hold_at >= result.steps:
        print(f"simforge: note: the run never held (clock_master.hold_at_step {hold_at}): its last step was "
              f"{result.steps - 1}", file=sys.stderr)
    if result.status == "counted":
        for fault in FaultPlan.parse(spec.faults).unfired(result.steps):
            why = f"the run ended after {result.steps} steps"
            if fault.kind == "lose_answer" and fault.node == "recorder":  # its one answer is Finish's
                why = f"the recorder's K is the step count its Finish names, and this run's was {result.steps}"
            print(f"simforge: note: {fault.spec()} did not fire: {why}", file=sys.stderr)


def _repeat_summary(results: list[RunResult]) -> str:
    """The line after a --repeat: did the runs repeat bit for bit, and if not, how to see
    how far apart they are. A refusal repeats by its code and step, as `simforge rerun`
    compares it: its detail may name a process id (kill=driver@5: "driver (pid N) is
    gone"), and ten identical killed runs were said to be ten different outcomes."""
    outcomes = {(r.status, (r.refusal or {}).get("code"), (r.refusal or {}).get("step"), r.steps, r.chain_digest,
                 r.frames_digest) for r in results}
    if len(outcomes) == 1:
        first = results[0]
        frames = f", frames {first.frames_digest[:16]}" if first.frames_digest else ""
        return f"all {len(results)} runs repeated bit for bit: chain {first.chain_digest[:16] or 'none'}{frames}"
    # a run whose recorder never finished has no manifest: spread reads its salvaged twin
    # (the command said for them was refused: "manifest.json: missing")
    unfinished = [r.run_dir for r in results if not (Path(r.run_dir) / "manifest.json").is_file()]
    salvage = "".join(f"simforge salvage {shlex.quote(d)} && " for d in unfinished)
    spread = " ".join(shlex.quote(f"{r.run_dir}-salvaged" if r.run_dir in unfinished else r.run_dir)
                      for r in results)
    return f"{len(results)} runs, {len(outcomes)} different outcomes; how far apart: {salvage}simforge spread {spread}"


def _scenarios(_args: argparse.Namespace) -> int:
    from simforge_ros.engine import list_scenarios, load_scenario

    for name in list_scenarios():
        scenario = load_scenario(name)
        print(f"{name:20s} {scenario.duration_us / 1e6:6.1f} s  {scenario.path}")
    return 0


def version_line() -> str:
    """The versions a run's digests depend on: this package's, the engine's, rclpy's,
    numpy's (the engine and the renderer compute with it) and torch's (the torch planner),
    and the machine's (the manifest records these and every other library's)."""
    from importlib.metadata import PackageNotFoundError, version

    import numpy

    import simforge_ros
    from simforge_ros.engine.world import ENGINE_VERSION
    from simforge_ros.record.manifest import cpu

    def installed(dist: str, otherwise: str) -> str:
        try:
            return version(dist)
        except PackageNotFoundError:
            return otherwise

    rclpy_version = installed("ros-rclpy", "from the ROS 2 install")  # a distribution's ROS 2, not the PyPI wheels
    machine = cpu()
    levels = f" ({'/'.join(machine['simd'])})" if machine["simd"] else ""
    return (f"simforge_ros {simforge_ros.__version__} ({ENGINE_VERSION}, rclpy {rclpy_version}, "
            f"numpy {numpy.__version__}, torch {installed('torch', 'not installed')}; {machine['machine']}{levels})")


class _Version(argparse.Action):
    """--version, resolved only when asked (the engine's import is not free)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any) -> None:
        print(version_line())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="simforge", description="Closed-loop driving simulation in exact lockstep on ROS 2.")
    parser.add_argument("--version", action=_Version, help="print the versions a run's digests depend on")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="run a scenario in lockstep", description=f"--json objects carry: {_RUN_FIELDS}")
    parser.set_defaults(command_parser=None)
    run.set_defaults(command_parser=run)  # its own usage for an argument it does not know
    run.add_argument("scenario", nargs="?", default=None,
                     help="a name from `simforge scenarios` or a scenario file (default: the --params-file's)")
    run.add_argument("--params-file", default=None, metavar="FILE",
                     help="a ROS 2 parameter file (node: ros__parameters: ...), e.g. config/simforge.yaml; "
                          "the options and --set given here win over it")
    run.add_argument("--repeat", type=int, default=1, help="run it this many times (each its own run directory)")
    run.add_argument("--driver", choices=DRIVERS, default=None,
                     help="route follower (default), the learned torch planner, or your own node "
                          "(external: see README)")
    run.add_argument("--seed", type=int, default=None,
                     help="the run's seed, default 0 (the same seed repeats bit for bit)")
    run.add_argument("--latency-ms", default=None, help="driver latency; a whole number of steps")
    run.add_argument("--steps", type=int, default=None, help="default 0: the whole scenario")
    run.add_argument("--real-time-factor", type=float, default=None, metavar="FACTOR",
                     help="simulation seconds a wall second may hold: 1 paces the run in real time (to watch "
                          "it live), default 0: as fast as the participants answer; digests are the same")
    run.add_argument("--hold-at-step", type=int, default=None, metavar="K",
                     help="hold the run once step K is done (0: at t(0)), until `simforge pause --resume`")
    run.add_argument("--wait-for-reader", action="append", default=[], metavar="TOPIC",
                     help="start step 0 only once a node not of the run (your stack's) reads TOPIC, a topic the "
                          "run publishes, and its writer has matched it (repeatable; within "
                          "clock_master.startup_timeout_ms)")
    run.add_argument("--layout", choices=("processes", "single"), default="processes",
                     help="one process per node (default), or all four nodes in one process")
    run.add_argument("--set", action="append", default=[], metavar="NODE.PARAM=VALUE",
                     help=f"override a node parameter (repeatable), e.g. {_SET_EXAMPLE}")
    run.add_argument("--inject", action="append", default=[], metavar="SPEC",
                     help=f"inject a fault (repeatable): {', '.join(FORMS.values())}")
    run.add_argument("--out", default="runs", help="directory for run directories")
    run.add_argument("--json", action="store_true", help="print one JSON object per run")
    run.set_defaults(func=_run)
    scen = sub.add_parser("scenarios", help="list the scenarios")
    scen.set_defaults(func=_scenarios, command_parser=scen)
    for name, target, summary in _TOOLS:
        tool = sub.add_parser(name, add_help=False, help=f"{summary} (`simforge {name} --help`)")
        tool.set_defaults(module=target)
    return parser


def main(argv: list[str] | None = None) -> int:
    own_process = argv is None  # the `simforge` command itself, not a caller's main(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv and argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        parser.error(f"unrecognized argument {argv[0]} (the command comes first: simforge COMMAND ...)")
    args, rest = parser.parse_known_args(argv)
    args.own_process = own_process
    try:
        if hasattr(args, "module"):
            import importlib

            module = importlib.import_module(args.module)
            if args.module == "simforge_ros.drivers.probe":
                from simforge_ros.record.inputs import driver_settings, observations_from_run

                return int(module.main(rest, observations_from_run, driver_settings))
            return int(module.main(rest))
        if rest:
            (args.command_parser or parser).error(f"unrecognized arguments: {' '.join(rest)}")
        return int(args.func(args))
    except ConfigError as err:
        print(f"simforge: {err}", file=sys.stderr)
        return EXIT_USAGE
    except Refusal as err:  # the timing contract's, before any run (--latency-ms): its code and status
        print(f"simforge: refused:{err}", file=sys.stderr)
        return err.exit_code
    except SimforgeError as err:
        print(f"simforge: {err}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("simforge: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:  # `simforge info RUN | head -1`: the reader left, as a Unix tool's SIGPIPE
        with contextlib.suppress(OSError):  # the interpreter's last flush would fail the same way
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except Exception as err:  # noqa: BLE001 - one line for the user; the run's logs/ hold the rest
        print(f"simforge: unexpected error: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
