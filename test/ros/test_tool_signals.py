"""SIGTERM (a supervisor's stop, `timeout`, `kill`) and SIGHUP (the terminal closed) end a ROS-side tool as Ctrl-C does:
its "interrupted" line, exit 130, never "unexpected error" from rclpy's context going away."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runs import lockstep, wait_for_nodes

from simforge_ros.isolation import lease_domain

pytestmark = pytest.mark.ros


@pytest.mark.parametrize("tool", ["pause", "play"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_stop_signal_while_a_tool_waits_on_ros_ends_it_as_interrupted(tmp_path, tool, sig):
    exe = Path(sys.executable).with_name("simforge")
    if tool == "pause":
        args = ["pause", "--wait-s", "60"]  # no run in the domain: it waits for the service
    else:
        kept = lockstep(tmp_path / "runs", steps=3, layout="single")
        args = ["play", kept.run_dir, "--wait-for-reader", "/clock", "--wait-s", "60"]  # no reader comes
    with lease_domain(tmp_path / "lease") as lease:
        env = {**os.environ, "ROS_DOMAIN_ID": str(lease.domain_id)}
        proc = subprocess.Popen([str(exe), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # well into the wait: its node is on the graph (a loaded machine may take seconds to start it)
        wait_for_nodes(lease.domain_id, "simforge_pause" if tool == "pause" else "simforge_player", proc=proc)
        time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()
        start = time.monotonic()
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=30)
    assert time.monotonic() - start < 5.0
    assert proc.returncode == 130, err  # as a Ctrl-C anywhere else in the CLI
    assert err.strip() == f"simforge {tool}: interrupted", err


def test_a_tool_started_under_nohup_keeps_going_when_the_terminal_closes(tmp_path):
    """SIGHUP was made an interrupt whatever its handler was: `nohup simforge play` ended
    (130, "interrupted") when the terminal closed, as nohup is there to prevent."""
    exe = Path(sys.executable).with_name("simforge")
    with lease_domain(tmp_path / "lease") as lease:
        env = {**os.environ, "ROS_DOMAIN_ID": str(lease.domain_id)}
        proc = subprocess.Popen([str(exe), "pause", "--wait-s", "60"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))  # as nohup does
        wait_for_nodes(lease.domain_id, "simforge_pause", proc=proc)
        proc.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)  # still a stop signal it hears
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and err.strip() == "simforge pause: interrupted", err


@pytest.mark.parametrize("tool", ["pause", "play"])
def test_a_tool_whose_sigint_is_ignored_keeps_going_on_one(tmp_path, tool):
    """A background job of a script (`simforge play RUN &`) starts with SIGINT ignored;
    rclpy's handler took it anyway and shut the context down under the tool: play went on
    and blamed a reader ("publishing on /clock failed (... context is invalid); a reliable
    reader is not taking messages", exit 1, 7 times in 7)."""
    exe = Path(sys.executable).with_name("simforge")
    if tool == "pause":
        args = ["pause", "--wait-s", "60"]
    else:
        kept = lockstep(tmp_path / "runs", steps=3, layout="single")
        args = ["play", kept.run_dir, "--wait-for-reader", "/clock", "--wait-s", "60"]
    with lease_domain(tmp_path / "lease") as lease:
        env = {**os.environ, "ROS_DOMAIN_ID": str(lease.domain_id)}
        proc = subprocess.Popen([str(exe), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))  # as `&` in sh does
        wait_for_nodes(lease.domain_id, "simforge_pause" if tool == "pause" else "simforge_player", proc=proc)
        proc.send_signal(signal.SIGINT)
        time.sleep(1.0)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)  # still a stop signal it hears, on a live context
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and err.strip() == f"simforge {tool}: interrupted", err
