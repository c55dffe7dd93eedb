"""`simforge diff RUN_A RUN_B`: the first step where two recorded runs differ, and what
part of the loop moved first; and, from the manifests, how the runs were set up
differently (seed, parameters, digests of what drove them, versions).

Only runs of the same scenario under the same timing contract are comparable step by
step; anything else differs everywhere for a trivial reason, so it is refused unless the
user insists (--force). Wall-clock readings differ on every run and are never compared.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simforge_ros.core.diffing import MISSING, DiffResult, describe, diff_steps, first_field_diff, format_value
from simforge_ros.core.errors import (
    EXIT_FAILURE,
    EXIT_USAGE,
    MissingFrame,
    PoseTolerance,
    RateNotMultiple,
    SimforgeError,
    StaleFrame,
    TimeDrift,
    where,
)
from simforge_ros.record.rundir import MANIFEST, RunDir, load_run, step_records
from simforge_ros.record.side_digests import SIDE_DIGESTS
from simforge_ros.tools import given_twice, json_text, parse, say

WALL_KEYS = ("wall",)
"""Step record keys holding wall-clock readings: different on every run, never compared."""

RUN_SPECIFIC = frozenset({"run_id", "out_dir", "pid", "host", "pid_watched"})
"""Manifest keys that differ between any two runs (names, places, processes): never
reported as a difference in setup."""
_SHOWN = 5  # setup differences on the text line; --json lists them all
# said already by the manifest's "seed" and "faults" (the faults of every node's parameters)
_SAID = frozenset({"nodes.clock_master.params.seed"})
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")  # whole (fullmatch)


class DiffRefused(SimforgeError):
    """Two runs that are not comparable step by step (other scenario or contract)."""


def check_comparable(a: RunDir, b: RunDir) -> None:
    """Refuse runs of different scenarios or timing contracts.

    Raises:
        DiffRefused: the manifests' scenario or contract differ (both named).
    """
    for key in ("scenario", "contract"):
        va, vb = a.manifest[key], b.manifest[key]
        if key == "contract" and (va is None or vb is None):
            continue  # a run of no step ran under no contract: nothing to hold the other's to
        if va != vb:
            if isinstance(va, dict) and isinstance(vb, dict):  # the fields that differ, not the whole contract
                fields = sorted(set(va) | set(vb), key=str)
                said = ", ".join(f"{f}: {format_value(va.get(f, MISSING))} vs {format_value(vb.get(f, MISSING))}"
                                 for f in fields if va.get(f, MISSING) != vb.get(f, MISSING))
            else:
                said = f"{format_value(va)} vs {format_value(vb)}"
            raise DiffRefused(
                f"{a.path / MANIFEST} and {b.path / MANIFEST}: different {key} ({said}); pass --force to compare anyway"
            )


def diff_runs(a: Path, b: Path, force: bool = False) -> DiffResult:
    """Compare two run directories' steps.jsonl and report the first difference.

    Raises:
        RunDirError: a manifest.json or steps.jsonl is missing, corrupt or truncated.
        DiffRefused: different scenario or contract and not ``force``.
    """
    return compare_runs(load_run(Path(a)), load_run(Path(b)), force)[0]


def compare_runs(run_a: RunDir, run_b: RunDir,
                 force: bool = False) -> tuple[DiffResult, list[tuple[str, object, object]]]:
    """The first difference of two loaded runs' steps, and how they were set up differently
    (setup_differences).

    Raises:
        DiffRefused: different scenario or contract and not ``force``.
    """
    if not force:
        check_comparable(run_a, run_b)
    steps = diff_steps(step_records(run_a, WALL_KEYS), step_records(run_b, WALL_KEYS))
    if steps.identical:
        steps = manifest_difference(run_a.manifest, run_b.manifest, steps.steps) or steps
    return steps, setup_differences(run_a.manifest, run_b.manifest)


def ending(refusal: object, status: object = "counted") -> str:
    """How a run ended: "counted" (its ``status`` when it has no refusal) or "refused:CODE
    at step N" (diff, spread and rerun say it so)."""
    if not isinstance(refusal, Mapping):
        return str(status)
    return f"refused:{refusal.get('code')} {where(refusal.get('step'))}"


def outcome(manifest: Mapping[str, Any]) -> str:
    """How the run of ``manifest`` ended (ending)."""
    return ending(manifest.get("refusal"), manifest.get("status"))


MEASURED = tuple(kind.code for kind in (TimeDrift, RateNotMultiple, MissingFrame, StaleFrame, PoseTolerance))
"""The timing contract's refusals, whose detail says what the run measured (an engine
1 us off and one 20 000 us off): two runs refused alike with other measures differ. The
other refusals' details name a pid or a wall time, and never repeat."""


def _measured(manifest: Mapping[str, Any]) -> str | None:
    refusal = manifest.get("refusal")
    if isinstance(refusal, Mapping) and refusal.get("code") in MEASURED:
        return str(refusal.get("detail"))
    return None


def manifest_difference(a: Mapping[str, Any], b: Mapping[str, Any], steps: int) -> DiffResult | None:
    """What differs between two runs whose ``steps`` step records are all the same: how
    they ended (a run refused at step 40 and a counted 40-step run record the same steps),
    then what of their messages no chain holds (record.side_digests); None: nothing."""
    end_a, end_b = outcome(a), outcome(b)
    if end_a == end_b and _measured(a) != _measured(b):  # the same breach, measured otherwise
        end_a, end_b = f"{end_a}: {_measured(a)}", f"{end_b}: {_measured(b)}"
    if end_a != end_b:
        return DiffResult(False, steps, "end", "end", end_a, end_b, steps)
    for key, _what, _label in SIDE_DIGESTS:
        if key in a and key in b:  # a run recorded before a key was kept has none to compare
            found = first_field_diff(key, _messages_first(a[key]), _messages_first(b[key]))
            if found is not None:
                return DiffResult(False, None, "messages", found[0], found[1], found[2], steps)
    return None


def _messages_first(summary: object) -> object:
    """A side-digest summary with each entry's count ahead of its digest: "50 vs 51
    messages" says what two 64-hex digests do not (the manifest keeps keys sorted)."""
    if not isinstance(summary, Mapping):
        return summary
    return {name: ({"messages": entry.get("messages"), **entry} if isinstance(entry, Mapping) else entry)
            for name, entry in summary.items()}


def chain_disagreement(run: RunDir) -> str | None:
    """What is wrong when a run's manifest names another chain digest than its last step
    record's (an edited or mixed-up record): two such runs were called identical, their
    manifests' disagreement unsaid."""
    if not run.steps:
        return None
    last = run.steps[-1].get("digest")
    if run.manifest["chain_digest"] == last:
        return None
    return (f"{run.path / MANIFEST}: chain_digest {_short(run.manifest['chain_digest'])} is not its last step's "
            f"({_short(last)}): the record was edited or mixed up; `simforge verify {run.path}` holds it to its bag")


def setup_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, object, object]]:
    """How two runs were set up differently, from their manifests: seed, injected faults,
    the digests of what drove them (driver configuration, weights, scenario file, engine,
    bridge), every node's parameters, who answered the clock master's calls, and the
    package and library versions. (field as a dotted path, a, b), in that order; MISSING
    where one manifest has no such field. Told alongside the first differing step, never
    a reason to refuse: runs set up differently are what a diff is often asked about."""
    found: list[tuple[str, object, object]] = []
    for key in ("seed", "faults"):
        _compare(key, a.get(key, MISSING), b.get(key, MISSING), found)
    nodes_a, nodes_b = a.get("nodes") or {}, b.get("nodes") or {}
    for node in sorted(set(nodes_a) | set(nodes_b)):
        _compare(f"nodes.{node}.params", _params(nodes_a.get(node)), _params(nodes_b.get(node)), found)
    for key in ("participants", "digests", "versions"):
        if key == "participants" and not (a.get(key) and b.get(key)):
            continue  # a salvaged run's are not known (its clock master never said): no difference to tell
        _compare(key, a.get(key, MISSING), b.get(key, MISSING), found)
    # a run stopped before its first step never recorded what step 0 reports (the engine's
    # digests, the bridge's backend): that is no difference in how it was set up
    unrecorded = (a.get("steps") == 0, b.get("steps") == 0)
    return [d for d in found if d[0] not in _SAID and not d[0].endswith(".params.faults")
            and not (_from_step_0(d[0]) and ((unrecorded[0] and _absent(d[1])) or (unrecorded[1] and _absent(d[2]))))]


_STEP_0_FIELDS = ("digests.engine", "digests.engine_version", "digests.scenario_file", "nodes.sim_bridge/backend")
"""Manifest fields filled from what the bridge reports at step 0 (its backend's parameters
and digests): absent from a run stopped before it."""


def _from_step_0(field: str) -> bool:
    return any(field == f or field.startswith(f + ".") for f in _STEP_0_FIELDS)


def _absent(value: object) -> bool:
    return value is None or value is MISSING


def _params(node: object) -> object:
    """A manifest node entry's parameters (MISSING without any; a hand-edited entry that is
    not an object is compared as it is)."""
    if node is None:
        return MISSING
    return node.get("params", MISSING) if isinstance(node, Mapping) else node


def _compare(path: str, a: object, b: object, found: list[tuple[str, object, object]]) -> None:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in sorted(set(a) | set(b)):
            if key not in RUN_SPECIFIC:
                _compare(f"{path}.{key}", a.get(key, MISSING), b.get(key, MISSING), found)
    elif a != b:  # one side a whole entry the other lacks: shown without what differs on every run
        found.append((path, _without_run_specific(a), _without_run_specific(b)))


def _without_run_specific(value: object) -> object:
    if isinstance(value, Mapping):
        return {k: _without_run_specific(v) for k, v in value.items() if k not in RUN_SPECIFIC}
    return value


def describe_setup(differences: Sequence[tuple[str, object, object]]) -> str:
    """One line, e.g. "set up differently: seed (0 vs 3); nodes.driver.params.policy
    ('route' vs 'torch')", the first few only; empty when there are none."""
    if not differences:
        return ""
    shown = "; ".join(f"{field} ({_short(x)} vs {_short(y)})" for field, x, y in differences[:_SHOWN])
    more = len(differences) - _SHOWN
    return f"set up differently: {shown}" + (f"; and {more} more (--json lists all)" if more > 0 else "")


def _short(value: object) -> str:
    """A SHA-256 digest by its first 16 hex digits (as `simforge run` prints a chain)."""
    if isinstance(value, str) and _HEX_DIGEST.fullmatch(value):
        return repr(value[:16])
    return format_value(value)


def json_value(value: object) -> object:
    """A value as --json gives it: null where a run does not have it."""
    return None if value is MISSING else value


def to_json(result: DiffResult, setup: Sequence[tuple[str, object, object]] = ()) -> dict[str, Any]:
    """The --json form; a value one run does not have is null."""
    return {
        "identical": result.identical,
        "step": result.step,
        "first": result.first,
        "field": result.field,
        "a": json_value(result.a),
        "b": json_value(result.b),
        "frames_differ": result.frames_differ,
        "setup": [{"field": field, "a": json_value(x), "b": json_value(y)} for field, x, y in setup],
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simforge diff", description="Find the first step where two recorded runs differ."
    )
    parser.add_argument("run_a", type=Path, help="the first run directory")
    parser.add_argument("run_b", type=Path, help="the second run directory")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--force", action="store_true", help="compare even across scenarios or contracts")
    return parser


_REPLAY_BEFORE = 10
"""Steps before the first difference the suggested `simforge play` starts at: a second at the
default 100 ms step, for a viewer to have the scene before it."""


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 when identical, 1 when different, 2 on bad input, refusal or bad usage."""
    args = parse(build_parser(), argv)
    if isinstance(args, int):
        return args
    if given_twice([args.run_a, args.run_b]) is not None:
        say("diff", f"RUN: expected two different run directories, got {str(args.run_a)!r} and "
                    f"{str(args.run_b)!r}, one directory given twice")
        return EXIT_USAGE
    try:
        runs = (load_run(args.run_a), load_run(args.run_b))
        result, setup = compare_runs(*runs, force=args.force)
    except SimforgeError as err:  # RunDirError, DiffRefused: one line, never a traceback
        say("diff", err)
        return EXIT_USAGE
    for run in runs:  # diff reads steps.jsonl: a manifest at odds with it is another story, told apart
        if (said := chain_disagreement(run)) is not None:
            say("diff", f"note: {said}")
    if args.json:
        print(json_text(to_json(result, setup)))
    else:
        print(describe(result))
        if setup:
            print(describe_setup(setup))
        if not result.identical:
            for run in runs:
                if (why := unrepeatable(run.manifest)) is not None:
                    say("diff", f"note: {run.path}: {why}")
        # a step to look at: in the second run where it did that step or was refused there,
        # else in the first; none where neither did (a run refused before step 0 did none)
        step = result.step
        look = _where_to_look(runs, step) if not result.identical and result.first != "steps" else None
        if look is not None and step is not None:
            # stderr: stdout stays the one line (two, with setup differences) scripts read
            index, hold, then_step = look
            which, path = ("second", args.run_b) if index == 1 else ("first", args.run_a)
            path = shlex.quote(str(path))
            if not then_step:
                print(f"simforge diff: to look at step {result.step} live, rerun the {which} run held there: "
                      f"simforge rerun {path} --hold-at-step {hold}", file=sys.stderr)
            else:  # its refused step: a hold there is never reached (refused: hold_at_step)
                print(f"simforge diff: to look at step {result.step} live, rerun the {which} run held at step "
                      f"{hold}, the last it did, and let it do the next (`simforge pause --step`): "
                      f"simforge rerun {path} --hold-at-step {hold}", file=sys.stderr)
            # its bag holds the step, or the refused step's /clock
            print(f"simforge diff: or replay what it recorded up to there: simforge play "
                  f"{path} --from-step {max(0, step - _REPLAY_BEFORE)} --to-step {step}",
                  file=sys.stderr)
    return 0 if result.identical else EXIT_FAILURE


def _where_to_look(runs: Sequence[Any], step: int | None) -> tuple[int, int, bool] | None:
    """Which run shows ``step`` live, and how: (its index, the step to hold it at, whether
    to let it do one more step from there), or None.

    The second run where it did ``step``, or was refused at it (held at the step before,
    then one step more); else the first run, the same way. A counted 5-step run against one
    refused at step 5 part at step 5, which only the refused run reached: a hold at step 4
    of the counted one, then a step, showed its end ("step 4 was its last")."""
    if step is None:
        return None
    for index in (1, 0):
        manifest = runs[index].manifest
        did = manifest.get("steps")
        if not isinstance(did, int) or did <= 0:
            continue
        if step < did:
            return index, step, False
        if (manifest.get("refusal") or {}).get("step") == step:
            return index, did - 1, True
    return None


def unrepeatable(manifest: Mapping[str, Any]) -> str | None:
    """Why a run is not meant to repeat, or None: its torch planner sampled unseeded
    (driver.deterministic false). Its rerun "did not repeat" and diff pointed at a hold to
    hunt a divergence the setting made on purpose."""
    driver = ((manifest.get("nodes") or {}).get("driver") or {}).get("params") or {}
    if driver.get("policy") == "torch" and driver.get("deterministic") is False:
        return ("its driver.deterministic is false: the torch planner samples unseeded, so its runs are not meant "
                "to repeat")
    return None


if __name__ == "__main__":
    sys.exit(main())
