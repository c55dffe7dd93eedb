"""A bridge killed between answering a step and drawing its frames never sends them: the
recorder's Finish waited out finish_timeout_ms (10 s) for that step, the clock master resent
its request meanwhile (blaming discovery), and the run ended 11 s after the kill. The
recorder now stops waiting for a step's messages once the bridge's process is gone and
nothing more comes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

rclpy = pytest.importorskip("rclpy")

from simforge_ros.srv import Finish

from simforge_ros.benchmarks.recorder import step_messages
from simforge_ros.nodes.common import HOST, close_nodes, make_executor
from simforge_ros.nodes.recorder import Recorder
from simforge_ros.runner import write_params_file

pytestmark = pytest.mark.ros

FINISH_TIMEOUT_MS = 30_000
# a process with a DDS participant in the run's domain, as the bridge's is
PARTICIPANT = ("import sys, rclpy; rclpy.init(domain_id=int(sys.argv[1])); node = rclpy.create_node('bridge_like'); "
               "print('up', flush=True); sys.stdin.read()")


def _finish(ros_lease, tmp_path, bridge_pid: int, before_finish: Callable[[], None] = lambda: None,
            finish_timeout_ms: int = FINISH_TIMEOUT_MS, expected: int = 3,
            late: Callable[[Recorder, list, float], None] = lambda *_: None) -> tuple[Finish.Response, float]:
    """``expected`` steps expected, two recorded and the third's /clock only, the bridge's
    parameters naming ``bridge_pid`` of this host: Finish's answer, and how long it took.
    ``late(recorder, messages, seconds)`` is called as Finish waits."""
    path = tmp_path / "params.yaml"
    write_params_file(path, {"recorder": {"out_dir": str(tmp_path / "run"), "await_driver": False,
                                          "finish_timeout_ms": finish_timeout_ms}})
    context = rclpy.Context()
    rclpy.init(args=["--ros-args", "--params-file", str(path)], context=context, domain_id=ros_lease.domain_id)
    executor = make_executor(context)
    recorder = Recorder(context)
    try:
        executor.add_node(recorder.node)
        messages = step_messages(expected)
        for topic, raw in messages[0] + messages[1] + messages[2][:1]:
            recorder.take(topic, raw)
        assert recorder.assembler.steps_done == 2
        recorder._watch_bridge({"pid": bridge_pid, "host": HOST})  # as its latched parameters say
        before_finish()
        request = Finish.Request()
        request.expected_steps = expected
        request.status.state, request.status.code, request.status.step = "refused", "participant_lost", expected
        started = time.monotonic()
        task = executor.create_task(recorder._finish(request, Finish.Response()))
        while not task.done() and time.monotonic() - started < finish_timeout_ms / 1000 + 5:
            executor.spin_once(timeout_sec=0.05)
            late(recorder, messages, time.monotonic() - started)
        assert task.done()
        return task.result(), time.monotonic() - started
    finally:
        recorder.close()
        close_nodes(executor, [recorder.node])
        rclpy.shutdown(context=context)


def test_finish_stops_waiting_for_a_step_once_the_bridge_s_process_is_gone(ros_lease, tmp_path, capfd):
    bridge = subprocess.Popen([sys.executable, "-c", PARTICIPANT, str(ros_lease.domain_id)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert bridge.stdout is not None and bridge.stdout.readline().strip() == "up"
        time.sleep(0.5)  # its DDS sockets bound

        def kill() -> None:
            bridge.kill()
            bridge.wait()  # reaped: its pid names no process

        answer, took = _finish(ros_lease, tmp_path, bridge.pid, kill)
    finally:
        bridge.kill()
        bridge.wait()
    assert answer.steps_recorded == 2 and not answer.counted
    assert took < FINISH_TIMEOUT_MS / 1000 / 3, took  # about 0.5 s, not 30
    assert f"sim_bridge (pid {bridge.pid}) is gone: the messages of step 2 on are waited for" in capfd.readouterr().err


def test_finish_waits_for_a_step_while_the_bridge_runs(ros_lease, tmp_path):
    # this process stands for the bridge, still there: its step is waited for, to the limit
    answer, took = _finish(ros_lease, tmp_path, os.getpid(), finish_timeout_ms=2_000)
    assert answer.steps_recorded == 2 and took >= 2.0, took


def test_a_bridge_pid_not_seen_in_the_run_s_domain_is_not_watched(ros_lease, tmp_path):
    """A pid another host's or pid namespace's bridge named is no process of this node's to
    watch: counted as gone, its last steps would be cut short while it runs."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    answer, took = _finish(ros_lease, tmp_path, gone.pid, finish_timeout_ms=2_000)
    assert answer.steps_recorded == 2 and took >= 2.0, took


def test_steps_still_coming_in_after_the_bridge_is_gone_are_waited_for(ros_lease, tmp_path):
    """What the bridge sent before it died can still be coming in (the recorder runs up to
    recorder_backlog_steps behind): the grace counts from the last step completed."""
    fed: set[str] = set()

    def late(recorder: Recorder, messages: list, seconds: float) -> None:
        for name, at, batch in (("step 2", 1.0, messages[2][1:] + messages[3][:1]), ("step 3", 2.5, messages[3][1:])):
            if seconds >= at and name not in fed:
                fed.add(name)
                for topic, raw in batch:
                    recorder.take(topic, raw)

    gone = subprocess.Popen(["true"])
    gone.wait()
    # watched as gone (this test's stand-in is no DDS participant)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("simforge_ros.nodes.recorder.in_dds_domain", lambda pid, domain: True)
        patch.setattr("simforge_ros.nodes.recorder._LOST_WRITER_GRACE_S", 2.0)  # steps come 1.0 and 1.5 s apart
        answer, took = _finish(ros_lease, tmp_path, gone.pid, expected=4, late=late)
    assert answer.steps_recorded == 4, (answer.steps_recorded, took)
