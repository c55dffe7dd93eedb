"""malloc tuning: large temporaries stop costing fresh pages on every use."""

from __future__ import annotations

import subprocess
import sys

import pytest

from simforge_ros.process_tuning import tune_process

_PROBE = """
import resource, sys
if sys.argv[1] == "tuned":
    from simforge_ros.process_tuning import tune_process
    assert tune_process()
from simforge_ros.benchmarks import compute
compute.direct_loop(3, ("front",))  # imports and first frames out of the way
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
compute.direct_loop(20, ("front", "left"))  # engine, renderer, hashing: what a bridge does
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, timeout=60,
                          check=True)
    return int(done.stdout.strip())


def test_tuning_applies_on_glibc():
    assert tune_process() is True


def test_tuned_process_reuses_large_blocks_instead_of_faulting_them_in():
    plain, tuned = _faults("plain"), _faults("tuned")
    assert plain > 10_000  # ~40 frames' numpy temporaries of fresh pages without tuning
    assert tuned < plain / 10


def test_tune_process_sets_the_collector_thresholds():
    import gc

    from simforge_ros.process_tuning import GC_THRESHOLDS

    before = gc.get_threshold()
    try:
        tune_process()
        assert gc.get_threshold() == GC_THRESHOLDS
    finally:
        gc.set_threshold(*before)


@pytest.mark.ros
def test_a_single_layout_run_freezes_its_nodes_and_thaws_after(tmp_path):
    """The run freezes what exists once its nodes are built; a process that goes on (the
    CLI with --repeat, this test process) gets every object back into collection."""
    import gc

    from simforge_ros.process_tuning import freeze_startup
    from simforge_ros.runner import RunSpec, run

    freeze_startup()
    assert gc.get_freeze_count() > 0
    spec = RunSpec(scenario="right_turn", out_dir=tmp_path / "r", run_id="r", steps=5, layout="single",
                   sets={"sim_bridge": {"cameras": []}})
    assert run(spec).status == "counted"
    assert gc.get_freeze_count() == 0
