"""A bridge killed between answering a step and drawing its frames never sends them: the
recorder's Finish waited out finish_timeout_ms (10 s) for that step, the clock master resent
its request meanwhile (blaming discovery), and the run ended 11 s after the kill. The
recorder now stops waiting for a step's messages once the bridge's process is gone."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

rclpy = pytest.importorskip("rclpy")

from simforge_ros.msg import Participant
from simforge_ros.srv import Finish

from simforge_ros.benchmarks.recorder import step_messages
from simforge_ros.nodes.common import close_nodes, make_executor
from simforge_ros.nodes.recorder import Recorder
from simforge_ros.runner import write_params_file

pytestmark = pytest.mark.ros

FINISH_TIMEOUT_MS = 30_000


def _finish(ros_lease, tmp_path, bridge_pid: int, finish_timeout_ms: int = FINISH_TIMEOUT_MS,
            ) -> tuple[Finish.Response, float]:
    """Three steps expected, two recorded and the third's /clock only; the bridge named
    as ``bridge_pid`` of this host: Finish's answer, and how long it took."""
    path = tmp_path / "params.yaml"
    write_params_file(path, {"recorder": {"out_dir": str(tmp_path / "run"), "await_driver": False,
                                          "finish_timeout_ms": finish_timeout_ms}})
    context = rclpy.Context()
    rclpy.init(args=["--ros-args", "--params-file", str(path)], context=context, domain_id=ros_lease.domain_id)
    executor = make_executor(context)
    recorder = Recorder(context)
    try:
        executor.add_node(recorder.node)
        messages = step_messages(3)
        for topic, raw in messages[0] + messages[1] + messages[2][:1]:
            recorder.take(topic, raw)
        assert recorder.assembler.steps_done == 2
        request = Finish.Request()
        request.expected_steps = 3
        request.status.state, request.status.code, request.status.step = "refused", "participant_lost", 3
        bridge = Participant()
        bridge.role, bridge.pid, bridge.host, bridge.pid_watched = "sim_bridge", bridge_pid, "here", True
        request.participants = [bridge]
        started = time.monotonic()
        task = executor.create_task(recorder._finish(request, Finish.Response()))
        while not task.done() and time.monotonic() - started < finish_timeout_ms / 1000 + 5:
            executor.spin_once(timeout_sec=0.05)
        assert task.done()
        return task.result(), time.monotonic() - started
    finally:
        recorder.close()
        close_nodes(executor, [recorder.node])
        rclpy.shutdown(context=context)


def test_finish_stops_waiting_for_a_step_once_the_bridge_s_process_is_gone(ros_lease, tmp_path, capfd):
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its pid names no process
    answer, took = _finish(ros_lease, tmp_path, gone.pid)
    assert answer.steps_recorded == 2 and not answer.counted
    assert took < FINISH_TIMEOUT_MS / 1000 / 3, took  # about 0.5 s, not 30
    assert f"sim_bridge (pid {gone.pid}) is gone: step 2's messages are waited for 0.5 s more" in capfd.readouterr().err


def test_finish_waits_for_a_step_while_the_bridge_runs(ros_lease, tmp_path):
    # this process stands for the bridge, still there: its step is waited for, to the limit
    answer, took = _finish(ros_lease, tmp_path, os.getpid(), finish_timeout_ms=2_000)
    assert answer.steps_recorded == 2 and took >= 2.0, took
