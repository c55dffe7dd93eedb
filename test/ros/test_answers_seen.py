"""The clock master's note of a request answered twice (clock_master._AnswersSeen), on
real rclpy clients and servers, with both executors the nodes spin: a second server of a
service answers every request it gets, and rclpy drops the answer it does not wait for."""

from __future__ import annotations

import time

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.experimental import EventsExecutor
from rclpy.node import Node
from std_srvs.srv import Trigger

from simforge_ros.nodes.clock_master import _AnswersSeen

pytestmark = pytest.mark.ros


@pytest.mark.parametrize("executor_kind", [EventsExecutor, SingleThreadedExecutor])
@pytest.mark.parametrize("servers", [1, 2])
def test_a_request_answered_twice_is_noted(ros_lease, executor_kind, servers):
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_lease.domain_id)
    try:
        executor = executor_kind(context=context)
        for i in range(servers):
            node = Node(f"server_{i}", context=context)
            node.create_service(Trigger, "/answered", lambda _req, resp: resp)
            executor.add_node(node)
        caller = Node("caller", context=context)
        executor.add_node(caller)
        client = caller.create_client(Trigger, "/answered")
        answers = client._pending_requests = _AnswersSeen()
        deadline = time.monotonic() + 20
        while caller.count_services("/answered") < servers or not client.service_is_ready():
            assert time.monotonic() < deadline
            executor.spin_once(timeout_sec=0.05)
        time.sleep(0.5)  # every server's endpoints matched too
        for _ in range(5):
            future = client.call_async(Trigger.Request())
            executor.spin_until_future_complete(future, timeout_sec=10)
            assert future.done() and future.result() is not None
            settle = time.monotonic() + 0.2  # a second answer, when there is one
            while time.monotonic() < settle:
                executor.spin_once(timeout_sec=0.02)
        # a cancelled request's late answer is no second one
        cancelled = client.call_async(Trigger.Request())
        cancelled.cancel()
        settle = time.monotonic() + 0.3
        while time.monotonic() < settle:
            executor.spin_once(timeout_sec=0.02)
        if servers == 1:
            assert answers.second_answers == 0
        else:
            assert answers.second_answers >= 4  # each of the five, give or take a match still to come
    finally:
        rclpy.try_shutdown(context=context)
