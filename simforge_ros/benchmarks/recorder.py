"""The recorder's own work per step, apart from the transport: what part of the time the
recorder adds to a `single` run is its handling of the messages, and what part is their
way through DDS and the executor.

The messages of each step are built and serialised as the clock master publishes them
(rclpy's own serialisation: the bytes a subscription hands over) and fed, in the order a
run publishes them, to a real recorder node's message handler; its bag writer thread runs
as in a run. Nothing crosses a transport and no executor dispatches them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from simforge_ros.benchmarks import scratch_dir


def step_messages(steps: int, scenario: str = "right_turn") -> list[list[tuple[str, bytes]]]:
    """Per step, (topic, serialised message) as a no-camera run publishes them: /clock,
    then timing, action, applied action and state."""
    from rclpy.serialization import serialize_message
    from rosgraph_msgs.msg import Clock

    from simforge_ros import topics
    from simforge_ros.benchmarks.compute import _Direct
    from simforge_ros.core.lockstep import LoopConfig, TimingRecord, run_lockstep
    from simforge_ros.core.units import clock_stamp
    from simforge_ros.nodes import convert

    participants = _Direct(scenario, ())
    out: list[list[tuple[str, bytes]]] = []

    class _Serialise:
        def clock(self, step: int, t_us: int) -> None:
            msg = Clock()
            msg.clock.sec, msg.clock.nanosec = clock_stamp(t_us)
            out.append([(topics.CLOCK, serialize_message(msg))])

        def record(self, timing: TimingRecord, action: Any, applied: Any, state: Any) -> None:
            out[-1] += [
                (topics.TIMING, serialize_message(convert.timing_msg(timing))),
                (topics.ACTION, serialize_message(convert.action_msg(action))),
                (topics.APPLIED, serialize_message(convert.action_msg(applied))),
                (topics.STATE, serialize_message(convert.state_msg(state))),
            ]

    run_lockstep(LoopConfig(steps=steps), participants, _Serialise(), time.perf_counter_ns)
    return out


def feed_recorder(messages: Iterable[tuple[str, bytes]], out_dir: Path,
                  before: Iterable[tuple[str, bytes]] = ()) -> tuple[int, int]:
    """Hand serialised (topic, message) pairs, in order, to a fresh recorder node's handler
    writing its run into ``out_dir`` (no transport, no executor; its bag writer thread runs
    as in a run): (ns the ``messages`` took, steps chained). ``before`` is handed over
    first and not timed."""
    import rclpy

    from simforge_ros.nodes.recorder import Recorder

    context = rclpy.Context()
    rclpy.init(args=["--ros-args", "-p", f"out_dir:={out_dir}"], context=context)
    try:
        recorder = Recorder(context)
        for topic, raw in before:
            recorder.take(topic, raw)
        t0 = time.perf_counter_ns()
        for topic, raw in messages:
            recorder.take(topic, raw)
        elapsed_ns = time.perf_counter_ns() - t0
        chained = recorder.assembler.steps_done
        recorder.close()
        recorder.node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    return elapsed_ns, chained


def recorder_alone(steps: int, backlog_steps: int = 64) -> dict[str, Any]:
    """Feed ``steps`` no-camera steps to a recorder node's handler; µs per step.

    ``backlog_steps``: the clock master's recorder_backlog_steps, from which the recorder
    paces its progress reports (its latched parameters come first, as in a run).
    """
    from rclpy.serialization import serialize_message
    from std_msgs.msg import String

    from simforge_ros import topics

    messages = step_messages(steps)
    params = String(data=json.dumps({"node": "clock_master", "params": {"recorder_backlog_steps": backlog_steps}}))
    with scratch_dir("simforge-bench-recorder-") as tmp:
        elapsed_ns, chained = feed_recorder((m for step in messages for m in step), tmp / "run",
                                            before=[(topics.NODE_PARAMS, serialize_message(params))])
    return {"steps": steps, "steps_chained": chained, "us_per_step": elapsed_ns / 1000.0 / steps,
            "messages_per_step": len(messages[0]) if messages else 0}
