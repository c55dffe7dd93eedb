"""verify and diff read a run one step at a time: their memory does not grow with its length.

A run of 20 000 steps made `simforge verify` hold about 260 MB and `simforge diff` 320 MB
(every record of steps.jsonl and of the bag as Python objects); a run of hours would not
fit. The step records are now read from the file as they are compared, so the peak
allocation over a run three times as long may only grow by the line offsets kept per step.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from simforge_ros.core.diffing import diff_steps
from simforge_ros.record.diff_runs import diff_runs
from simforge_ros.record.manifest import wall_summary
from simforge_ros.record.rundir import RunDirError, load_run
from simforge_ros.record.verify import verify_run

MakeRun = Callable[..., Path]
PER_STEP_BYTES = 200  # what each extra step may add to the peak (the held records were ~10 KB)


def _peak(call: Callable[[], object]) -> tuple[object, int]:
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_verify_and_diff_peak_memory_does_not_grow_with_the_run(make_run: MakeRun) -> None:
    # three frames a step fill the bag's 1 MB chunks early: the reader's chunk buffer,
    # which is bounded, is at its largest in both runs
    short, long = 800, 2400
    rig = (("front", 1), ("rear", 1), ("top", 1))
    runs = {n: make_run(f"run{n}", steps=n, cameras=rig) for n in (short, long)}
    peaks = {}
    for n, run in runs.items():
        verified, peaks["verify", n] = _peak(lambda run=run: verify_run(run))
        assert verified.ok and verified.steps_checked == n  # type: ignore[attr-defined]
        diffed, peaks["diff", n] = _peak(lambda run=run: diff_runs(run, run))
        assert diffed.identical and diffed.steps == n  # type: ignore[attr-defined]
    for tool in ("verify", "diff"):
        growth = (peaks[tool, long] - peaks[tool, short]) / (long - short)
        assert growth < PER_STEP_BYTES, f"{tool}: {growth:.0f} bytes more peak memory per step ({peaks})"


def test_step_records_read_from_the_file_match_the_parsed_file(make_run: MakeRun) -> None:
    run_dir = make_run(steps=12)
    run = load_run(run_dir)
    parsed = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    assert len(run.steps) == len(parsed) == 12
    assert list(run.steps) == parsed
    assert run.steps[0] == parsed[0] and run.steps[-1] == parsed[-1] and run.steps[5] == parsed[5]
    assert list(run.steps[3:7]) == parsed[3:7]
    with pytest.raises(IndexError):
        run.steps[12]


def test_steps_changed_after_loading_are_named_not_misread(make_run: MakeRun) -> None:
    run_dir = make_run(steps=6)
    run = load_run(run_dir)
    path = run_dir / "steps.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[2])
    record["step"] = 7
    lines[2] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RunDirError, match=r"steps.jsonl: line 3: "):
        list(run.steps)
    with pytest.raises(RunDirError, match=r"steps.jsonl: line 3: "):
        run.steps[2]


def test_diff_of_streams_counts_the_longer_run() -> None:
    records = [{"step": k, "t_us": k * 10, "digest": f"{k:064x}"} for k in range(5)]
    longer = diff_steps(iter(records), iter(records[:3]))
    assert (longer.identical, longer.first, longer.step, longer.a, longer.b) == (False, "steps", 3, 5, 3)
    shorter = diff_steps((r for r in records[:2]), (r for r in records))
    assert (shorter.first, shorter.step, shorter.a, shorter.b, shorter.steps) == ("steps", 2, 2, 5, 2)
    empty = diff_steps(iter([]), iter(records))
    assert (empty.first, empty.step, empty.a, empty.b) == ("steps", 0, 0, 5)
    same = diff_steps(iter(records), iter(list(records)))
    assert same.identical and same.steps == 5


def test_the_manifest_sums_up_the_steps_wall_times_instead_of_listing_them():
    """A 20 000-step run's manifest was 292 KB, 168 KB of it every step's wall time again."""
    assert wall_summary([]) == {"n": 0}
    assert wall_summary([7]) == {"n": 1, "median": 7, "p99": 7, "max": 7}
    times = list(range(1000, 0, -1))  # 1..1000, in any order
    assert wall_summary(times) == {"n": 1000, "median": 500, "p99": 990, "max": 1000}
    assert len(json.dumps(wall_summary(range(20_000)))) < 100
