"""`simforge spread RUN RUN [RUN ...]`: how far apart repeated runs are, the noise floor
to know before ranking anything on them.

Runs of an exact loop are identical and the floor is zero; otherwise this names the first
step where one differs from the first run, how many steps differ, and the largest spread
of the ego's pose, speed and the driver's commands over the runs at any one step
(core.spread). Like `diff`, it compares runs of one scenario and timing contract only, and
of one seed, as repeats are (--force to insist), says how the runs were set up differently, and never compares
wall-clock time.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simforge_ros.core.diffing import describe as describe_difference
from simforge_ros.core.errors import EXIT_FAILURE, EXIT_USAGE, SimforgeError
from simforge_ros.core.spread import Estimate, SpreadResult, estimate, spread
from simforge_ros.record.diff_runs import (
    WALL_KEYS,
    DiffRefused,
    chain_disagreement,
    check_comparable,
    describe_setup,
    json_value,
    manifest_difference,
    outcome,
    setup_differences,
)
from simforge_ros.record.rundir import RunDir, load_run, step_records
from simforge_ros.tools import given_twice, json_text, parse, say


def spread_runs(runs: Sequence[RunDir], force: bool = False) -> SpreadResult:
    """The spread of loaded runs' common steps.

    Raises:
        DiffRefused: runs of another scenario, contract or seed than the first, and not ``force``.
    """
    if not force:
        for run in runs[1:]:
            check_comparable(runs[0], run)
            seeds = (runs[0].manifest.get("seed"), run.manifest.get("seed"))
            if seeds[0] != seeds[1]:
                # repeats are runs of one seed: across seeds the spread is the seeds', not the
                # noise floor (it said "first difference at step 0 (timing.world_digest)")
                raise DiffRefused(f"{runs[0].path} and {run.path}: different seed ({seeds[0]} vs {seeds[1]}): a "
                                  "noise floor is taken over repeats of one seed; pass --force to compare anyway")
    return spread([step_records(run, WALL_KEYS) for run in runs])


def apart_from_steps(runs: Sequence[RunDir], result: SpreadResult) -> list[str]:
    """What makes runs whose common steps are all the same differ all the same, as diff
    says it: how each ended, then what of its messages no chain holds (empty: nothing)."""
    if result.first_step is not None:
        return []
    outcomes = [outcome(run.manifest) for run in runs]
    if len(set(outcomes)) > 1:
        return [f"the runs ended differently: {', '.join(outcomes)}"]
    if not result.identical:  # other lengths: said already, and what no chain holds differs with them
        return []
    found = (manifest_difference(runs[0].manifest, run.manifest, result.common) for run in runs[1:])
    return [f"{run.manifest['run_id']}: {describe_difference(d)}" for run, d in zip(runs[1:], found, strict=True)
            if d is not None]


def _contacts(runs: Sequence[RunDir], harness: bool = False) -> list[object]:
    """Each run's contacts the driver is counted for (its manifest's total less the harness
    faults, which every rate keeps out), or with ``harness`` those caused by the scripted
    traffic; None where the manifest has no count. A rear-ending scripted car and an ego
    driving into a car counted the same ([1, 1]) and their spread hid the difference."""
    counts: list[object] = []
    for run in runs:
        contacts = run.manifest.get("contacts")
        total = contacts.get("total") if isinstance(contacts, dict) else None
        faults = contacts.get("harness_faults", 0) if isinstance(contacts, dict) else None
        if not isinstance(total, int) or not isinstance(faults, int):
            counts.append(None)
        else:
            counts.append(faults if harness else total - faults)
    return counts


def metrics(runs: Sequence[RunDir], result: SpreadResult) -> list[Estimate]:
    """The per-run metrics with their uncertainty over the runs: those of the step records
    (core.spread), and the driver's contacts where every manifest counts them."""
    contacts = _contacts(runs)
    counted = [c for c in contacts if isinstance(c, int)]
    more = [estimate("contacts (the driver's)", "", counted)] if len(counted) == len(runs) else []
    return [*result.metrics, *more]


def to_json(runs: Sequence[RunDir], result: SpreadResult, apart: Sequence[str] | None = None) -> dict[str, Any]:
    """The --json form; ``apart`` is apart_from_steps(runs, result), found here when not given."""
    apart = apart_from_steps(runs, result) if apart is None else apart
    return {
        "runs": [run.manifest["run_id"] for run in runs],
        "lengths": list(result.lengths),
        "outcomes": [outcome(run.manifest) for run in runs],
        "common_steps": result.common,
        "identical": result.identical and not apart,
        "apart": list(apart),
        "first_step": result.first_step,
        "first_field": result.first_field,
        "differing_steps": result.differing_steps,
        "position": {"value": result.position.value, "unit": "m", "step": result.position.step},
        "spread": {s.field: {"value": s.value, "unit": s.unit, "step": s.step} for s in result.fields},
        "contacts": _contacts(runs),
        "harness_contacts": _contacts(runs, harness=True),
        "metrics": {m.name: {"unit": m.unit, "values": list(m.values), "mean": m.mean, "sd": m.sd, "ci95": m.ci95}
                    for m in metrics(runs, result)},
        "setup": [[{"field": f, "a": json_value(a), "b": json_value(b)}
                   for f, a, b in setup_differences(runs[0].manifest, run.manifest)] for run in runs[1:]],
    }


def describe(runs: Sequence[RunDir], result: SpreadResult, apart: Sequence[str] | None = None) -> list[str]:
    """The lines `simforge spread` prints; ``apart`` is apart_from_steps(runs, result), found
    here when not given."""
    apart = apart_from_steps(runs, result) if apart is None else apart
    lengths = "" if len(set(result.lengths)) == 1 else f" (recorded: {', '.join(map(str, result.lengths))})"
    lines = [f"{result.runs} runs of {runs[0].manifest['scenario']}, {result.common} steps in common{lengths}"]
    if apart:
        lines.append("no step in common" if result.common == 0 else "the common steps are the same in every run"
                     + ("" if result.identical else ", and the runs' lengths differ"))
        lines += apart
    elif result.identical and result.common == 0:  # "the noise floor is 0" of no step said nothing
        lines.append("no step in common: no noise floor to give (the runs ended alike before any step)")
    elif result.identical:
        lines.append(f"identical: every step is the same in every run (chain {runs[0].manifest['chain_digest'][:16]}); "
                     "the noise floor is 0")
    elif result.first_step is None:
        lines.append("the common steps are the same in every run; only the runs' lengths differ")
    else:
        lines.append(f"first difference at step {result.first_step} ({result.first_field}); "
                     f"{result.differing_steps} of {result.common} steps differ")
        if result.first_field in ("digest", "frames_digest"):
            lines.append("every field of that step is the same but its stored digest: an edited record? "
                         "`simforge verify RUN` holds a run to its bag")
        spread_out = [s for s in (result.position, *result.fields) if s.step is not None]
        if not spread_out:
            lines.append("the ego's pose and speed and the driver's commands are the same in every run")
        else:
            lines.append("largest spread over the runs at one step (max - min):")
            lines += [f"  {'ego position' if s.field == 'position' else s.field:20s} {s.value:.6g} {s.unit}"
                      + (" apart" if s.field == "position" else "") + f" at step {s.step}" for s in spread_out]
    if result.common and (not result.identical or apart):  # (identical: every one the same, said above)
        lines.append(f"per run, over the {result.runs} runs (mean ± the half-width of its 95 % interval; sd; lowest "
                     "to highest): rank on these, never on one run")
        lines += [f"  {m.name:24s} {m.mean:.6g}{' ' + m.unit if m.unit else ''} ± {m.ci95:.3g} (sd {m.sd:.3g}; "
                  f"{min(m.values):.6g} to {max(m.values):.6g})" for m in metrics(runs, result)]
    contacts = _contacts(runs)
    if len(set(contacts)) > 1:
        lines.append(f"contacts differ (the driver's; harness faults kept out): {', '.join(map(str, contacts))}")
    harness = _contacts(runs, harness=True)
    if len(set(harness)) > 1:
        lines.append(f"contacts the scripted traffic caused (harness faults) differ: {', '.join(map(str, harness))}")
    for run in runs[1:]:
        setup = describe_setup(setup_differences(runs[0].manifest, run.manifest))
        if setup:
            lines.append(f"{run.manifest['run_id']}: {setup}")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simforge spread",
        description="How far apart repeated runs are: the noise floor to know before ranking on them.",
    )
    parser.add_argument("runs", type=Path, nargs="+", metavar="RUN", help="two run directories or more")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--force", action="store_true", help="compare even across scenarios, contracts or seeds")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 when the runs are identical, 1 when they are not, 2 on bad input or usage."""
    args = parse(build_parser(), argv)
    if isinstance(args, int):
        return args
    if len(args.runs) < 2:
        say("spread", f"RUN: expected two run directories or more, got {len(args.runs)}")
        return EXIT_USAGE
    if (twice := given_twice(args.runs)) is not None:
        say("spread", f"RUN: expected different run directories, got {str(twice[0])!r} and {str(twice[1])!r}, "
                      "one directory given twice")
        return EXIT_USAGE
    try:
        runs = [load_run(path) for path in args.runs]
        result = spread_runs(runs, force=args.force)
    except SimforgeError as err:  # RunDirError, DiffRefused: one line, never a traceback
        say("spread", err)
        return EXIT_USAGE
    for run in runs:  # spread reads steps.jsonl: a manifest at odds with it is another story, told apart
        if (said := chain_disagreement(run)) is not None:
            say("spread", f"note: {said}")
    apart = apart_from_steps(runs, result)  # manifests compared once, for the output and the exit status
    if args.json:
        print(json_text(to_json(runs, result, apart), sort_keys=True))
    else:
        print("\n".join(describe(runs, result, apart)))
    return 0 if result.identical and not apart else EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
