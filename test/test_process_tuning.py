"""malloc tuning: large temporaries stop costing fresh pages on every use; a node started
by `simforge run` notices that run gone."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from simforge_ros.process_tuning import LAUNCHER_ENV, launcher_pid, tune_process, watch_launcher

_PROBE = """
import resource, sys
if sys.argv[1] == "tuned":
    from simforge_ros.process_tuning import LAUNCHER_ENV, launcher_pid, tune_process, watch_launcher
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


# A launcher that starts a "node" and exits at once, as a `simforge run` killed outright
# would: the node's watcher must notice within a few polls and call its on_gone.
_LAUNCHER = """
import os, subprocess, sys
env = dict(os.environ, SIMFORGE_LAUNCHER_PID=str(os.getpid()))
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], env=env, start_new_session=True)
"""
_NODE = """
import sys, threading, time
from simforge_ros.process_tuning import watch_launcher
gone = threading.Event()
started = time.monotonic()
assert watch_launcher(gone.set, grace_s=0.3, poll_s=0.02) is not None
assert gone.wait(20)
with open(sys.argv[1], "w") as out:
    out.write(f"{time.monotonic() - started:.3f}")
"""


def test_a_node_notices_its_launcher_gone_after_the_grace(tmp_path):
    mark = tmp_path / "gone"
    subprocess.run([sys.executable, "-c", _LAUNCHER, _NODE, str(mark)], check=True, timeout=30)
    deadline = time.monotonic() + 30
    while not mark.exists() or not mark.read_text():
        assert time.monotonic() < deadline, "the node never noticed its launcher had gone"
        time.sleep(0.05)
    assert float(mark.read_text()) >= 0.3  # the grace was waited


def test_a_node_started_otherwise_watches_nothing(monkeypatch):
    monkeypatch.delenv(LAUNCHER_ENV, raising=False)
    assert watch_launcher(lambda: None) is None


@pytest.mark.parametrize(("raw", "pid"), [("1234", 1234), ("", None), ("1", None), ("0", None),
                                          ("-5", None), ("12ab", None), (" 12", None)])
def test_launcher_pid_reads_only_a_plausible_pid(raw, pid):
    assert launcher_pid({LAUNCHER_ENV: raw}) == pid
