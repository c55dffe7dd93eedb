"""malloc tuning: large temporaries stop costing fresh pages on every use."""

from __future__ import annotations

import subprocess
import sys

from simforge_ros.malloc_tuning import tune_malloc

_PROBE = """
import resource, sys
if sys.argv[1] == "tuned":
    from simforge_ros.malloc_tuning import tune_malloc
    assert tune_malloc()
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
    assert tune_malloc() is True


def test_tuned_process_reuses_large_blocks_instead_of_faulting_them_in():
    plain, tuned = _faults("plain"), _faults("tuned")
    assert plain > 10_000  # ~40 frames' numpy temporaries of fresh pages without tuning
    assert tuned < plain / 10
