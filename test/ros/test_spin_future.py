"""nodes.common.spin_future, how every node waits for an answer: done when the answer
comes, False at its wall-clock limit, and back at once when the context is shut down.
It spins one event at a time: rclpy's EventsExecutor keeps about 37 bytes a call of
``spin_until_future_complete`` that it never frees (the clock master grew 4.5 MB over a
60 000-step run); the figures are the benchmark's (`simforge bench`, rss_growth)."""

from __future__ import annotations

import time

import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.node import Node
from rclpy.task import Future
from std_srvs.srv import Trigger

from simforge_ros.nodes.common import make_executor, spin_future

pytestmark = pytest.mark.ros


def test_spin_future_is_done_on_the_answer_false_at_its_limit_and_back_on_shutdown(ros_lease):
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_lease.domain_id)
    executor = make_executor(context)
    node = Node("spin_future_probe", context=context)
    try:
        executor.add_node(node)
        node.create_service(Trigger, "spin_future_probe", lambda _request, response: response)
        client = node.create_client(Trigger, "spin_future_probe")
        assert client.wait_for_service(timeout_sec=10.0)
        for _ in range(50):  # every answer is taken, one spin_future each
            answered = client.call_async(Trigger.Request())
            assert spin_future(executor, answered, 10.0) and answered.done()
        never = Future()
        started = time.monotonic()
        assert not spin_future(executor, never, 0.3)
        assert 0.3 <= time.monotonic() - started < 5.0
        context.shutdown()
        started = time.monotonic()
        assert not spin_future(executor, never, 30.0)
        assert time.monotonic() - started < 5.0
    finally:
        node.destroy_node()
        if context.ok():
            context.shutdown()
