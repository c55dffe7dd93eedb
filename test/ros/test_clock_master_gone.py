"""A participant ends when the clock master has left, even if the run's final status never
reached it: a driver that missed it kept a counted run from counting (the runner refused
it, the driver still there 5 s after the run). Real node processes and DDS; the clock
master is a stand-in that offers the status topic and leaves without a final status."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros

WRITER = Path(__file__).with_name("status_writer.py")


@pytest.mark.parametrize(("node", "how", "why"), [
    ("driver", "leaves", "its status writer has left the graph"),
    ("sim_bridge", "leaves", "its status writer has left the graph"),
    ("driver", "vanishes", "its process (pid {pid}) has exited"),
    ("recorder", "vanishes", "its process (pid {pid}) has exited"),
])
def test_a_participant_ends_cleanly_once_the_clock_master_has_left(ros_lease, tmp_path, node, how, why):
    """``leaves``: the stand-in takes its node off the graph; ``vanishes``: its process ends
    without that (killed, or stuck in teardown), and the graph would hold its writer until
    the lease runs out, long past the runner's grace."""
    env = dict(ros_lease.env)
    args = ["--ros-args", "-p", f"out_dir:={tmp_path / 'run'}"] if node == "recorder" else []
    participant = subprocess.Popen([sys.executable, "-m", f"simforge_ros.nodes.{node}", *args], env=env,
                                   cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    vanish = ["--vanish"] if how == "vanishes" else []
    writer = subprocess.Popen([sys.executable, str(WRITER), "--seconds", "4", *vanish], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(3.0)
        assert participant.poll() is None  # the status writer is there: the run goes on
        writer_out, _ = writer.communicate(timeout=60)
        assert writer.returncode == 0 and "status writer gone" in writer_out, writer_out
        left = time.monotonic()
        out, _ = participant.communicate(timeout=30)
        assert time.monotonic() - left < 5.0  # well within the runner's 5 s grace
        assert participant.returncode == 0, out
        said = f"{node}: the clock master has left ({why.format(pid=writer.pid)}) and its final status never came"
        assert said in out, out
        assert "Traceback" not in out
        if node == "recorder":  # what it kept says why it ended before the run's end
            manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
            assert manifest["refusal"]["detail"] == ("the recorder stopped before the clock master finished the run: "
                                                     f"the clock master has left ({why.format(pid=writer.pid)}) and "
                                                     "its final status never came")
    finally:
        for proc in (participant, writer):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
