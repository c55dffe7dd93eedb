"""`simforge rerun RUN`: run a kept run again from its own parameter file, and say whether
it repeated bit for bit; if not, name the first step that differs and how the setups differ.

A kept failure is only worth keeping if it can be run again on demand. The run directory
holds everything asked of the nodes (params.yaml: scenario, driver, seed, steps, latency,
faults, every --set), so the rerun asks the same, in the layout the run used (one process
when all its nodes named one pid; --layout overrides: both layouts give the same digest).
The rerun is a new run directory next to the kept one; the kept one is never touched. A
refused run repeats when the rerun is refused with the same code at the same step over the
same chain: the failure reproduces. A run interrupted (``aborted``: a Ctrl-C, its simforge run
killed) recorded what it had done when the user stopped it, which nothing in the run decided:
its rerun runs as many steps and repeats it when those steps repeat bit for bit.
Three wall-clock settings are not taken from the kept run:
a rerun is not paced (clock_master.real_time_factor) and does not hold at a step
(hold_at_step) unless asked here, nor wait for a stack's reader (wait_for_readers), so a
rerun never waits for someone to resume it; none
changes a digest.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import secrets
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simforge_ros.core.errors import EXIT_FAILURE, EXIT_USAGE, Aborted, ConfigError, Printed, Problem, SimforgeError
from simforge_ros.params import NODE_PARAMS, read_params_file, validate
from simforge_ros.record.rundir import PARAMS, RunDir, RunDirError, layout_of, load_run
from simforge_ros.runner import EXTERNAL, LAYOUTS, SPEC_PARAMS, RunResult, RunSpec
from simforge_ros.tools import out_dir_problem, parse, say


def read_params(path: Path, notes: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """A run's ROS 2 parameter file as {node: {param: value}}, read as `simforge run
    --params-file` reads one (params.read_params_file): a bad value, or a section within a
    typo of a simforge node's, is named with the file and the field; a section for another
    node is left out, with a line in ``notes`` saying so.

    Raises:
        RunDirError: missing, or without the clock master's parameters and the scenario.
        ConfigError: not YAML, not ``node: ros__parameters: {...}`` throughout, or a value
            the nodes would refuse.
    """
    if not path.exists():
        raise RunDirError(path, "missing (the run's parameter file; a rerun needs it)")
    params = read_params_file(path, notes)
    if "clock_master" not in params or "scenario" not in params.get("sim_bridge", {}):
        raise RunDirError(path, "expected the clock_master's parameters and the sim_bridge's scenario")
    return params


def params_from_manifest(run: RunDir) -> dict[str, dict[str, Any]] | None:
    """The parameters each of the run's nodes reported (the manifest's nodes.NAME.params),
    for a run made without `simforge run` (``ros2 launch``, ``ros2 run``), which leaves no
    params.yaml: its rerun was refused for the file missing. A period's unit left unset
    (null) and the run's own out_dir and run_id are left out; None when the manifest holds
    no clock master's parameters and bridge's scenario.

    Raises:
        ConfigError: a value the nodes would refuse (a manifest edited since).
    """
    nodes = run.manifest.get("nodes")
    if not isinstance(nodes, Mapping):
        return None
    params: dict[str, dict[str, Any]] = {}
    for name in NODE_PARAMS:  # the bridge's backend entry (sim_bridge/backend) is no node's parameters
        entry = nodes.get(name)
        values = entry.get("params") if isinstance(entry, Mapping) else None
        if isinstance(values, Mapping):
            params[name] = {k: v for k, v in values.items() if v is not None and k not in ("out_dir", "run_id")}
    if "clock_master" not in params or "scenario" not in params.get("sim_bridge", {}):
        return None
    return validate(params, f"{run.path / 'manifest.json'} (its nodes' parameters)")


def spec_for(run: RunDir, params: Mapping[str, Mapping[str, Any]], out_dir: Path, run_id: str,
             layout: str) -> RunSpec:
    """The RunSpec that asks the nodes for exactly what ``params`` holds (but run_id and
    out_dir, the new run's own)."""
    clock = params["clock_master"]
    bridge = params["sim_bridge"]
    sets = {
        # what runner.node_params derives from RunSpec fields; the rest goes in as --set
        node: {name: value for name, value in values.items() if name not in SPEC_PARAMS.get(node, {})}
        for node, values in params.items()
    }
    # every node's faults, as `simforge run --params-file` takes them: a fault edited into
    # the driver's section only was dropped without a word, and the rerun "repeated"
    faults: list[str] = []
    for node in ("sim_bridge", *(n for n in params if n != "sim_bridge")):
        given = params.get(node, {}).get("faults") or []
        if not isinstance(given, list) or not all(isinstance(f, str) for f in given):
            raise RunDirError(run.path / PARAMS, f"{node}.faults: expected a list of fault specs, got {given!r}")
        faults += [f for f in given if f not in faults]
    # values go in as read_params checked them (naming the file); runner.node_params checks them together
    return RunSpec(
        scenario=bridge["scenario"],
        out_dir=out_dir,
        run_id=run_id,
        driver=params["driver"].get("policy", "route") if "driver" in params else EXTERNAL,
        seed=clock.get("seed", 0),
        steps=clock.get("steps", 0),
        latency_us=clock.get("latency_us", 0),
        layout=layout,
        sets={node: values for node, values in sets.items() if values},
        faults=tuple(faults),
        record=clock.get("record", True),
    )


WALL_SETTINGS = ("nodes.clock_master.params.real_time_factor", "nodes.clock_master.params.hold_at_step",
                 "nodes.clock_master.params.wait_for_readers", "nodes.sim_bridge.params.wait_for_readers")
"""The rerun's own settings, never the kept run's (no digest depends on them): no setup
difference to tell."""


def interrupted_after(kept: RunDir) -> int | None:
    """How many steps a run ended from outside had recorded: one the user interrupted, or
    one salvaged from a killed recorder's bag (None: neither, or it recorded no step to
    repeat). Nothing in the run decided where it ended, so its rerun runs those steps."""
    refusal = kept.manifest.get("refusal") or {}
    steps = kept.manifest.get("steps")
    outside = refusal.get("code") == Aborted.code or kept.manifest.get("salvaged") is True
    if outside and isinstance(steps, int) and steps > 0:
        return steps
    return None


def side_difference(kept: Mapping[str, Any], rerun: Mapping[str, Any] | None) -> str | None:
    """What of the side digests differs between a kept run's manifest and its rerun's
    (None: nothing, or a run recorded before they were kept)."""
    from simforge_ros.record.side_digests import SIDE_DIGESTS, first_difference

    for key, what, label in SIDE_DIGESTS:
        if rerun is not None and key in kept and key in rerun:
            said = first_difference(kept[key], rerun[key], what, ("the kept run", "the rerun"), label)
            if said is not None:
                return said
    return None


def repeated(kept: RunDir, rerun: RunResult, recorded: bool = True,
             rerun_manifest: Mapping[str, Any] | None = None) -> bool:
    """The same outcome over the same chains (repeated_outcome), or, for a run the user
    interrupted, its recorded steps over the same chains: the rerun ran that many steps
    and counted. (What of its messages no chain holds is not compared then: the interrupt
    may have come after a step's frames went out.)"""
    steps = interrupted_after(kept)
    if steps is None:
        return repeated_outcome(kept, rerun, recorded, rerun_manifest)
    manifest = kept.manifest
    return (rerun.status == "counted" and rerun.steps == steps and rerun.chain_digest == manifest["chain_digest"]
            and (not recorded or rerun.frames_digest == manifest.get("frames_digest")))


def repeated_outcome(kept: RunDir, rerun: RunResult, recorded: bool = True,
                     rerun_manifest: Mapping[str, Any] | None = None) -> bool:
    """The same outcome over the same chains: status, refusal code and step, steps, the
    step chain's digest and, when the rerun was ``recorded``, the frames chain's (the step
    chain holds no pixel, so a renderer that drew one pixel otherwise repeated every step
    digest) and what of the camera messages no chain holds (``rerun_manifest``)."""
    manifest = kept.manifest
    kept_refusal = manifest.get("refusal") or {}
    rerun_refusal = rerun.refusal or {}
    frames_same = not recorded or rerun.frames_digest == manifest.get("frames_digest")
    return (rerun.status == manifest["status"] and rerun.steps == manifest["steps"]
            and rerun.chain_digest == manifest["chain_digest"] and frames_same
            and side_difference(manifest, rerun_manifest) is None
            and (kept_refusal.get("code"), kept_refusal.get("step")) == (rerun_refusal.get("code"),
                                                                        rerun_refusal.get("step")))


def _outcome(refusal: Mapping[str, Any] | None, steps: int, chain: str) -> str:
    """One line of a run's outcome; a run whose recorder chained nothing (it never began,
    or it was killed before its first record) has no chain to show."""
    from simforge_ros.record.diff_runs import ending

    return f"{ending(refusal)}, {steps} steps, chain {chain[:16] or 'none'}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simforge rerun",
        description="Run a kept run again from its parameter file and say whether it repeated bit for bit.",
    )
    parser.add_argument("run", type=Path, help="the kept run directory")
    parser.add_argument("--layout", choices=LAYOUTS, default=None,
                        help="default: the layout the kept run used (both give the same digest)")
    parser.add_argument("--out", default=None, help="directory for the new run (default: the kept run's)")
    parser.add_argument("--real-time-factor", type=float, default=0.0, metavar="F",
                        help="pace the rerun (1: real time, to watch it live); default 0, whatever the kept run's")
    parser.add_argument("--hold-at-step", type=int, default=-1, metavar="K",
                        help="hold the rerun once step K is done, until `simforge pause --resume`; "
                             "default: never, whatever the kept run's")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _check_same_scenario(kept: RunDir, scenario: str) -> None:
    """Refuse a rerun whose scenario file is no longer the one the kept run had (its digest
    in the manifest): run in full, it then "did not repeat" from step 0, blaming the vehicle
    state for a comment edited into the file.

    Raises:
        ConfigError: the file's bytes changed (a file that is gone or unreadable is left to
            the run, which names it).
    """
    from simforge_ros.engine.catalog import scenario_digest

    was = (kept.manifest.get("digests") or {}).get("scenario_file")
    now = scenario_digest(scenario)
    if isinstance(was, str) and was and now is not None and now != was:
        raise ConfigError.single(
            "RUN", "scenario", f"its scenario file as the run had it (sha256 {was[:16]}); to run the file as it is "
            f"now: simforge run --params-file {kept.path / PARAMS}", Printed(f"{scenario}, changed since (sha256 "
                                                                          f"{now[:16]})"))


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 when the rerun repeated the kept run, 1 when it did not, 2 on bad input."""
    from simforge_ros.record.diff_runs import compare_runs, describe_setup, to_json, unrepeatable
    from simforge_ros.runner import run as start_run

    args = parse(build_parser(), argv)
    if isinstance(args, int):
        return args
    try:
        kept = load_run(args.run)
        refusal = kept.manifest.get("refusal") or {}
        if refusal.get("code") == Aborted.code and kept.manifest.get("steps") == 0:
            # a rerun of the whole scenario "did not repeat" a run of none, with differences
            # made up of what its nodes never got to record
            raise ConfigError.single("RUN", str(args.run), "a run that did a step (this one was interrupted before "
                                     "step 0: nothing to run again)", refusal.get("detail"))
        if not (math.isfinite(args.real_time_factor) and args.real_time_factor >= 0):
            raise ConfigError.single("--real-time-factor", "real_time_factor",
                                     "a finite number >= 0 (0: unpaced; 1: real time)", args.real_time_factor)
        if args.hold_at_step < -1:
            raise ConfigError.single("--hold-at-step", "hold_at_step", "a step >= 0 (-1: never)", args.hold_at_step)
        notes: list[str] = []
        reported = params_from_manifest(kept) if not (kept.path / PARAMS).exists() else None
        if reported is not None:
            params = reported
            notes.append(f"{kept.path / PARAMS} is missing (a run not started by simforge run: ros2 launch, ros2 "
                         "run): the parameters its nodes reported, in its manifest, are asked again")
        else:
            params = read_params(kept.path / PARAMS, notes)
        for note in notes:
            say("rerun", note)  # as `simforge run --params-file` says its own
        # wall-clock settings of this rerun's own (validated with the rest by the runner)
        params["clock_master"].update(real_time_factor=args.real_time_factor, hold_at_step=args.hold_at_step)
        for node in ("clock_master", "sim_bridge"):  # a stack's reader the kept run waited for is not here
            params.setdefault(node, {}).pop("wait_for_readers", None)
        if isinstance(scenario := params.get("sim_bridge", {}).get("scenario"), str):
            _check_same_scenario(kept, scenario)  # before --out is made
        # next to the kept run unless told (its parent as given: `rerun .` from inside it wrote into it)
        into = args.out if args.out is not None else os.path.dirname(os.path.abspath(kept.path))
        if (problem := out_dir_problem(into)) is not None:  # as `simforge run`'s
            raise ConfigError.single("--out", "out", f"a directory simforge can create and write to ({problem})"
                                     + ("" if args.out is not None else ": the kept run's, unless --out names one"),
                                     into)
        run_id = f"{kept.manifest['run_id']}-rerun-{secrets.token_hex(3)}"
        out_dir = (Path(into) / run_id).resolve()
        spec = spec_for(kept, params, out_dir, run_id, args.layout or layout_of(kept))
        upto = interrupted_after(kept)
        if upto is not None:  # the steps it had done when it was stopped
            spec = dataclasses.replace(spec, steps=upto)
        result = start_run(spec)
    except ConfigError as err:  # the kept params.yaml's faults are its own, not a --inject of this command
        say("rerun", ConfigError([Problem(str(Path(args.run) / PARAMS), "faults", p.expected, p.got)
                                  if p.source == "--inject" else p for p in err.problems]))
        return EXIT_USAGE
    except SimforgeError as err:  # RunDirError: one line, never a traceback
        say("rerun", err)
        return EXIT_USAGE
    rerun_manifest = None
    if spec.record:
        with contextlib.suppress(SimforgeError):  # no manifest: its outcome and chains are compared
            rerun_manifest = load_run(Path(result.run_dir)).manifest
    same = repeated(kept, result, spec.record, rerun_manifest)
    diff = setup = None
    kept_record_differs = False
    if same and rerun_manifest is not None:
        # the manifests agree; the step records must too: a kept steps.jsonl edited or
        # damaged after its manifest was written was called "repeated bit for bit" while
        # `simforge diff` of the same two runs named a step
        with contextlib.suppress(SimforgeError):
            diff, setup = compare_runs(kept, load_run(Path(result.run_dir)), force=True)
        told_apart = upto is not None and diff is not None and diff.first == "end"
        if diff is not None and not diff.identical and not told_apart:  # an interrupted run ends apart
            same, kept_record_differs = False, True
    if not same and diff is None:
        try:
            diff, setup = compare_runs(kept, load_run(Path(result.run_dir)), force=True)
        except SimforgeError as err:  # a rerun that left no record (it refused before recording)
            say("rerun", f"no step-by-step diff: {err}")
    said_apart = {*WALL_SETTINGS, *(("nodes.clock_master.params.steps",) if upto is not None else ())}
    setup = [d for d in setup or [] if d[0] not in said_apart]  # the rerun's own, not a difference to tell
    if args.json:
        print(json.dumps({
            "repeated": same,
            "up_to_interrupt": upto,
            "kept": {k: kept.manifest.get(k)
                     for k in ("run_id", "status", "refusal", "steps", "chain_digest", "frames_digest")},
            "rerun": result.to_dict(),
            "layout": spec.layout,
            "diff": to_json(diff, setup or []) if diff is not None and not same else None,
            # what no chain holds is not compared for an interrupted or salvaged run (repeated):
            # said anyway, it contradicted "repeated": true
            "side_difference": side_difference(kept.manifest, rerun_manifest) if upto is None else None,
        }, sort_keys=True))
    else:
        manifest = kept.manifest
        print(f"kept  {manifest['run_id']}: "
              f"{_outcome(manifest.get('refusal'), manifest['steps'], manifest['chain_digest'])}")
        print(f"rerun {result.run_id}: {_outcome(result.refusal, result.steps, result.chain_digest)} ({spec.layout})")
        if same and upto is not None and kept.manifest.get("salvaged") is True:
            print(f"repeated bit for bit up to where its record ends: the {upto} steps salvaged from its bag "
                  "(a rerun runs no further)")
        elif same and upto is not None:
            print(f"repeated bit for bit up to the interrupt: the {upto} steps the kept run had done when it was "
                  "stopped (a rerun runs no further)")
        elif same:
            print("repeated bit for bit" + ("" if result.refusal is None else ", the refusal too"))
        elif diff is None:
            print("did not repeat")
        elif diff.identical:
            side = side_difference(kept.manifest, rerun_manifest)
            print(f"did not repeat: every recorded step is the same ({diff.steps}), "
                  + (f"but {side}" if side else "the outcome is not"))
        else:
            from simforge_ros.core.diffing import describe

            print(f"did not repeat: {describe(diff)}")
            if kept_record_differs:
                print(f"the kept manifest's outcome and chain digests match the rerun, its step records do not: "
                      f"`simforge verify {args.run}` holds them to its bag")
        if setup and not same:
            print(describe_setup(setup))
        if not same and (why := unrepeatable(kept.manifest)) is not None:
            print(f"(not a fault: {why})")
    return 0 if same else EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
