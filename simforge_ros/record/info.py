"""`simforge info RUN`: what a kept run is, on one screen, as `ros2 bag info` is for a bag.

A run directory answers "what ran, how did it end, what did it record" only to someone who
reads its manifest's JSON; this says it in a few lines: the scenario and seed, the driver
and the bridge's rig, the timing contract, the faults, how the run ended, its digests, its
wall-clock time (recorded apart, in no digest) and its bag's topics with their message
counts. It reads the manifest, steps.jsonl (validated, as every tool does) and the bag's
index only, never a message, so it takes as long for a four-camera run as for any other.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from simforge_ros.core.errors import EXIT_USAGE, SimforgeError, one_line, where
from simforge_ros.record.bag import bag_index
from simforge_ros.record.rundir import RunDir, layout_of, load_run
from simforge_ros.tools import parse, say


def _at(value: object, *keys: str) -> Mapping[str, Any]:
    """The object at ``keys`` below ``value``; empty where a level is missing or is not an
    object (a hand-edited manifest is described as far as it can be, never a traceback)."""
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def settings(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Each node parameter the run had at another value than its default, but the run
    options said apart (scenario, seed, steps, latency, driver, faults, names): what made
    this run other than a plain `simforge run SCENARIO`."""
    from simforge_ros.params import NODE_PARAMS
    from simforge_ros.runner import DERIVED_PARAMS, SPEC_PARAMS

    found: dict[str, Any] = {}
    driver = _at(manifest, "nodes", "driver", "params")
    for node, specs in NODE_PARAMS.items():
        params = _at(manifest, "nodes", node, "params")
        said_apart = {*SPEC_PARAMS.get(node, {}), *DERIVED_PARAMS.get(node, ())}
        if (node == "sim_bridge" and driver.get("policy") == "torch"
                and params.get("cameras") == driver.get("cameras", params.get("cameras"))):
            said_apart.add("cameras")  # --driver torch has the bridge render what the planner looks at
        for spec in specs:
            # None: a period given in the other spelling (decision_s), shown by that one
            if (spec.name in params and spec.name not in said_apart and params[spec.name] is not None
                    and params[spec.name] != spec.default):
                found[f"{node}.{spec.name}"] = params[spec.name]
    return found


def _period_us(params: Mapping[str, Any], name: str) -> int | None:
    """A period the node was given as ``name_us`` or ``name_s``, in microseconds (None:
    unset, or not readable): a camera_period_s run was described as a frame every step."""
    from simforge_ros.core.units import resolve_period

    try:
        return resolve_period({k: v for k, v in params.items() if k in (f"{name}_us", f"{name}_s") and v is not None},
                              name)
    except SimforgeError:
        return None


def _steps_asked(manifest: Mapping[str, Any]) -> int | None:
    """The run's --steps (clock_master.steps), None for the whole scenario: said with the
    status, as a refused run's recorded steps tell nothing of how long it was to be."""
    asked = _at(manifest, "nodes", "clock_master", "params").get("steps")
    return asked if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0 else None


_PROCESS_KEYS = ("node", "pid", "host", "pid_watched")
"""What the manifest says of a participant's process (Participant.msg)."""


def run_info(run: RunDir) -> dict[str, Any]:
    """What `simforge info --json` prints: the manifest's answers, named plainly."""
    manifest = run.manifest
    bridge = _at(manifest, "nodes", "sim_bridge", "params")
    driver = _at(manifest, "participants", "driver")
    nodes = _at(manifest, "nodes")
    # a run whose nodes' parameters never reached the recorder (a salvage of a recorder
    # killed before its first flush) says nothing of its driver: not "external"
    external = driver.get("external") or (bool(nodes) and "driver" not in nodes)
    wall = _at(manifest, "wall")
    try:
        bag: dict[str, Any] | None = {"storage": manifest["bag"]["storage"], **bag_index(run.bag_path)}
        bag_problem = None
    except SimforgeError as err:  # a bag the recorder could not finish: said, the rest shown
        bag, bag_problem = None, str(err)
    return {
        "run_id": manifest["run_id"],
        "run_dir": str(run.path),
        "scenario": manifest.get("scenario"),
        # which file, and which bytes of it: a copy of a shipped scenario with its name kept
        # was said as that scenario, and `info` named no file and no digest
        "scenario_file": {"given": bridge.get("scenario"),
                          "sha256": _at(manifest, "digests").get("scenario_file")},
        "seed": manifest.get("seed"),
        "status": manifest["status"],
        "refusal": manifest["refusal"],
        "steps": manifest["steps"],
        "expected_steps": manifest["expected_steps"],
        "steps_asked": _steps_asked(manifest),
        "layout": layout_of(run),
        "driver": {"policy": "external" if external else _at(manifest, "nodes", "driver", "params").get("policy"),
                   **{k: driver.get(k) for k in _PROCESS_KEYS}},
        "bridge": {**{k: bridge.get(k) for k in ("backend", "cameras", "width", "height")},
                   "camera_period_us": _period_us(bridge, "camera_period"),
                   **{k: _at(manifest, "participants", "sim_bridge").get(k) for k in _PROCESS_KEYS}},
        "contract": manifest.get("contract"),
        "settings": settings(manifest),
        "faults": manifest.get("faults") or [],
        "contacts": {k: _at(manifest, "contacts").get(k) for k in ("total", "harness_faults")},
        "chain_digest": manifest["chain_digest"],
        "frames_digest": manifest["frames_digest"],
        "world_digest": manifest.get("world_digest"),
        "wall": {k: wall.get(k) for k in ("start_ns", "end_ns", "step_ns", "paced_ns", "held_ns")},
        "record_failure": manifest.get("record_failure"),
        "bag": bag,
        "bag_problem": bag_problem,
        "versions": dict(_at(manifest, "versions")),
    }


def _scenario_file(name: object, file: Mapping[str, Any]) -> str:
    """" (file PATH, sha256 ABC...)" of a run's scenario: the path where one was given, not
    a shipped scenario's name; nothing where neither is known (a salvage of nothing)."""
    given, sha = file.get("given"), file.get("sha256")
    parts = ([f"file {given}"] if isinstance(given, str) and given and given != name else []) + (
        [f"sha256 {sha[:16]}"] if isinstance(sha, str) and sha else [])
    return f" ({', '.join(parts)})" if parts else ""


def _shown(value: object) -> str:
    """A parameter's value as `--set` takes it."""
    if isinstance(value, list):
        return f"[{_listed(value)}]"
    return json.dumps(value) if isinstance(value, bool) or value is None else str(value)


def _listed(items: object) -> str:
    return ", ".join(map(str, items)) if isinstance(items, list) else str(items)


def _ms(ns: object) -> str:
    return f"{ns / 1e6:.2f} ms" if isinstance(ns, int) else "?"


def _process(part: Mapping[str, Any]) -> str:
    # as an external driver answered them: on one line, whatever it sent (a newline in its
    # host printed a line of its own choosing, "status     counted", under a refused run)
    where = [f"node {one_line(str(part['node']), 200)}"] if part.get("node") else []
    if part.get("pid") is not None:
        # a pid no process of this host's run domain had is the participant's word alone
        said = ", as it said (not seen here: watched on the graph)" if part.get("pid_watched") is False else ""
        where.append(f"pid {part['pid']} on {one_line(str(part.get('host') or '?'), 200)}{said}")
    return f" ({', '.join(where)})" if where else ""


def _contacts(counts: Mapping[str, Any]) -> str:
    total, harness = counts.get("total"), counts.get("harness_faults")
    if total is None:
        return "?"
    if not harness:
        return str(total)
    return f"{total} ({harness} the harness's fault: the scripted traffic's, not the driver's)"


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def describe(info: Mapping[str, Any]) -> list[str]:
    """The lines `simforge info` prints."""
    refusal = info["refusal"]
    status = f"counted, {info['steps']} steps" if refusal is None else (
        f"refused: {refusal.get('code')} {where(refusal.get('step'))}; {info['steps']} steps recorded")
    if info.get("steps_asked") is not None:
        status += f" (--steps {info['steps_asked']})"
    bridge, contract = info["bridge"], info["contract"]
    cameras = bridge.get("cameras")
    rig = "no camera" if not cameras else (
        f"cameras {_listed(cameras)}, "
        + ("every step" if not bridge.get("camera_period_us") else f"every {bridge['camera_period_us']} us")
        + (f", {bridge['width']}x{bridge['height']}" if bridge.get("width") else ""))
    lines = [
        f"run        {info['run_id']}",
        f"status     {status}",
    ]
    if refusal is not None and refusal.get("detail"):
        lines.append(f"           {one_line(str(refusal['detail']), 2000)}")
    lines += [
        f"scenario   {info['scenario']}{_scenario_file(info['scenario'], info['scenario_file'])}, seed {info['seed']}",
        f"driver     {info['driver']['policy'] or '?'}{_process(info['driver'])}",
        f"bridge     {bridge.get('backend') or '?'}: {rig}{_process(bridge)}",
        f"layout     {info['layout']}",
        "settings   " + (", ".join(f"{k}={_shown(v)}" for k, v in info["settings"].items()) or "the defaults"),
    ]
    if contract:
        lines.append(f"contract   a step is {contract['decision_us']} us = {contract.get('ticks_per_step')} ticks of "
                     f"{contract.get('tick_us')} us; latency {contract.get('latency_steps')} step"
                     + ("" if contract.get("latency_steps") == 1 else "s"))
    lines += [
        f"faults     {_listed(info['faults']) or 'none'}",
        f"contacts   {_contacts(info['contacts'])}",
        f"digests    chain {info['chain_digest'][:16]}  frames {(info['frames_digest'] or 'none')[:16]}  "
        f"world {(info['world_digest'] or 'none')[:16]}",
    ]
    wall = info["wall"]
    step = _at(wall, "step_ns")
    steps_took = (f"a step: median {_ms(step.get('median'))}, p99 {_ms(step.get('p99'))}, max {_ms(step.get('max'))} "
                  "(wall-clock time, in no digest)")
    if isinstance(wall.get("start_ns"), int) and isinstance(wall.get("end_ns"), int):
        began = datetime.fromtimestamp(wall["start_ns"] / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        waited = "".join(f"; {what} {wall[key] / 1e9:.1f} s of it"
                         for key, what in (("paced_ns", "paced"), ("held_ns", "held"))
                         if isinstance(wall.get(key), int) and wall[key] > 0)
        lines.append(f"wall       {began}, {(wall['end_ns'] - wall['start_ns']) / 1e9:.1f} s{waited}; {steps_took}")
    elif isinstance(step.get("n"), int) and step["n"] > 0:  # a salvaged run: when it ran is not known
        lines.append(f"wall       when it ran is not known (salvaged); {steps_took}")
    if info.get("record_failure"):
        lines.append(f"record     failed: {info['record_failure']}")
    bag = info["bag"]
    if bag is None:
        lines.append(f"bag        {info['bag_problem']}")
    else:
        span = "" if bag["start_ns"] is None else f", {(bag['end_ns'] - bag['start_ns']) / 1e9:g} s of simulation time"
        lines.append(f"bag        {bag['storage']}, {_size(bag['bytes'])}: {bag['messages']} messages on "
                     f"{len(bag['topics'])} topics{span}")
        width = max((len(t["topic"]) for t in bag["topics"]), default=0)
        kinds = max((len(t["type"]) for t in bag["topics"]), default=0)
        lines += [f"             {t['topic']:{width}s}  {t['type']:{kinds}s}  {t['messages']:>7d}"
                  for t in bag["topics"]]
    versions = info["versions"]
    shown = [f"{name} {versions[name]}" for name in ("simforge_ros", "python", "rclpy", "numpy") if name in versions]
    torch = _at(versions, "packages").get("torch")
    if torch:
        shown.append(f"torch {torch}")
    cpu = _at(versions, "cpu")
    if cpu.get("machine"):
        simd = cpu.get("simd")
        levels = f" ({'/'.join(map(str, simd))})" if isinstance(simd, list) and simd else ""
        shown.append(f"on {cpu['machine']}{levels}")
    if shown:
        lines.append(f"versions   {', '.join(shown)}")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simforge info", description="Say what a kept run is: its setup, its end, its digests and its bag."
    )
    parser.add_argument("run", type=Path, help="the run directory")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 when the run could be read (whatever its status), 2 when it could not."""
    args = parse(build_parser(), argv)
    if isinstance(args, int):
        return args
    try:
        info = run_info(load_run(args.run))
    except SimforgeError as err:  # RunDirError: one line, never a traceback
        say("info", err)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(info, sort_keys=True))
    else:
        print("\n".join(describe(info)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
