"""`simforge diff RUN_A RUN_B`: the first step where two recorded runs differ, and what
part of the loop moved first.

Only runs of the same scenario under the same timing contract are comparable step by
step; anything else differs everywhere for a trivial reason, so it is refused unless the
user insists (--force). Wall-clock readings differ on every run and are never compared.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simforge_ros.core.diffing import MISSING, DiffResult, describe, diff_steps, format_value
from simforge_ros.core.errors import EXIT_FAILURE, EXIT_USAGE, SimforgeError
from simforge_ros.record.rundir import MANIFEST, RunDir, load_run, step_records

WALL_KEYS = ("wall",)
"""Step record keys holding wall-clock readings: different on every run, never compared."""


class DiffRefused(SimforgeError):
    """Two runs that are not comparable step by step (other scenario or contract)."""


def check_comparable(a: RunDir, b: RunDir) -> None:
    """Refuse runs of different scenarios or timing contracts.

    Raises:
        DiffRefused: the manifests' scenario or contract differ (both named).
    """
    for key in ("scenario", "contract"):
        if a.manifest[key] != b.manifest[key]:
            raise DiffRefused(
                f"{a.path / MANIFEST} and {b.path / MANIFEST}: different {key} "
                f"({format_value(a.manifest[key])} vs {format_value(b.manifest[key])}); pass --force to compare anyway"
            )


def diff_runs(a: Path, b: Path, force: bool = False) -> DiffResult:
    """Compare two run directories' steps.jsonl and report the first difference.

    Raises:
        RunDirError: a manifest.json or steps.jsonl is missing, corrupt or truncated.
        DiffRefused: different scenario or contract and not ``force``.
    """
    run_a, run_b = load_run(Path(a)), load_run(Path(b))
    if not force:
        check_comparable(run_a, run_b)
    return diff_steps(step_records(run_a, WALL_KEYS), step_records(run_b, WALL_KEYS))


def _json_value(value: object) -> object:
    return None if value is MISSING else value


def to_json(result: DiffResult) -> dict[str, Any]:
    """The --json form; a value one run does not have is null."""
    return {
        "identical": result.identical,
        "step": result.step,
        "first": result.first,
        "field": result.field,
        "a": _json_value(result.a),
        "b": _json_value(result.b),
        "frames_differ": result.frames_differ,
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


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 when identical, 1 when different, 2 on bad input, refusal or bad usage."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    try:
        result = diff_runs(args.run_a, args.run_b, force=args.force)
    except SimforgeError as err:  # RunDirError, DiffRefused: one line, never a traceback
        print(f"simforge diff: {str(err).replace(chr(10), ' ')}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(to_json(result)) if args.json else describe(result))
    return 0 if result.identical else EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
