"""A planner of your own that sees the other traffic: simforge_ros's ground truth, awaited
by the step's exact time, in lockstep.

Start a run with the bridge's ground truth on and this node in the same ROS domain:

    ROS_DOMAIN_ID=42 simforge run right_turn --driver external --set sim_bridge.ground_truth=true &
    ROS_DOMAIN_ID=42 ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST .venv/bin/python examples/ground_truth_driver.py --once

Like examples/external_driver.py (read that one first: what a driver owes the clock
master), it uses nothing of simforge_ros but its interfaces. What it adds is a named input
besides the request: the bridge publishes every actor and signal of step k on
``/simforge/ground_truth`` with ``t_us`` = the step's time, and a topic is not ordered with
the Decide call (it may come before the request or after it). So the node keeps what has
come by ``t_us`` and, for a request, awaits the message whose ``t_us`` is the request's:
never the latest one, which may be the step before. One that does not come within
WAIT_S (wall clock) is refused by name (``missing_frame``), never decided without.

The policy: drive straight at TARGET_SPEED_MPS, and brake hard while any actor's box
centre is in the corridor ahead of the ego (CORRIDOR_AHEAD_M ahead, CORRIDOR_HALF_WIDTH_M
to either side of its heading). ``decide`` is a pure function of the request's state and
that step's ground truth: the run repeats bit for bit, in either layout.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import socket
import sys
import time
from collections import OrderedDict

import rclpy
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from simforge_ros.msg import GroundTruth, RunStatus, VehicleState
from simforge_ros.srv import Decide

TARGET_SPEED_MPS = 5.0
SPEED_GAIN_PER_S = 0.8
MAX_ACCEL_MPS2 = 2.0
BRAKE_MPS2 = -4.0
CORRIDOR_AHEAD_M = 15.0
CORRIDOR_HALF_WIDTH_M = 2.0
WAIT_S = 5.0  # wall clock: how long a request waits for its step's ground truth
KEPT = 64  # ground-truth messages kept by t_us (a few steps ahead of the requests at most)


def blocking(state: VehicleState, truth: GroundTruth) -> list[str]:
    """The actors whose box centre is in the corridor ahead of the ego, in the ego's frame."""
    c, s = math.cos(state.pose.yaw_rad), math.sin(state.pose.yaw_rad)
    ahead = []
    for actor in truth.actors:
        dx, dy = actor.pose.x_m - state.pose.x_m, actor.pose.y_m - state.pose.y_m
        forward, left = c * dx + s * dy, -s * dx + c * dy
        if 0.0 < forward <= CORRIDOR_AHEAD_M and abs(left) <= CORRIDOR_HALF_WIDTH_M:
            ahead.append(actor.id)
    return ahead


def decide(state: VehicleState, truth: GroundTruth) -> float:
    """The acceleration for this step: brake for an actor ahead, else hold the speed."""
    if blocking(state, truth):
        return BRAKE_MPS2 if state.speed_mps > 0.0 else 0.0
    error = TARGET_SPEED_MPS - state.speed_mps
    return max(-MAX_ACCEL_MPS2, min(MAX_ACCEL_MPS2, SPEED_GAIN_PER_S * error))


class GroundTruthDriver:
    def __init__(self) -> None:
        self.node = Node("ground_truth_driver")
        self._truth: OrderedDict[int, GroundTruth] = OrderedDict()  # by t_us, oldest first
        self._waiting: dict[int, Future] = {}  # t_us -> the request awaiting it
        self._answered: tuple[Decide.Request, Decide.Response] | None = None
        self.ended: RunStatus | None = None  # the final status of a run this driver served
        self._running: str | None = None  # the run id of the last "running" status seen
        # A Decide awaiting its ground truth holds the node's default callback group until it
        # answers; the message it awaits (and the timer that gives up on it) must be taken
        # meanwhile, so they are in a group of their own, or the node waits on itself.
        self._inputs = MutuallyExclusiveCallbackGroup()
        reliable = QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.RELIABLE)
        self.node.create_subscription(GroundTruth, "/simforge/ground_truth", self._on_truth, reliable,
                                      callback_group=self._inputs)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.node.create_subscription(RunStatus, "/simforge/status", self._on_status, latched)
        # offered after the subscriptions: discovery announces them first, and the bridge
        # waits for readers it has seen until it has seen this service's (its first messages
        # would otherwise go out before this node's readers were matched, and be lost)
        self.node.create_service(Decide, "/simforge/decide", self._on_decide)

    def _on_status(self, status: RunStatus) -> None:
        # as examples/external_driver.py: the run it answered, or one it saw running (refused
        # before its first request), not one that ended before it started
        if status.state == "running":
            self._running = status.run_id
        elif status.state in ("counted", "refused") and (self._answered is not None
                                                         or status.run_id == self._running):
            self.ended = status

    def _on_truth(self, truth: GroundTruth) -> None:
        self._truth[truth.t_us] = truth
        while len(self._truth) > KEPT:
            self._truth.popitem(last=False)
        waiting = self._waiting.pop(truth.t_us, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(truth)

    async def _await_truth(self, t_us: int) -> GroundTruth | None:
        """The ground truth stamped exactly ``t_us`` (None: not within WAIT_S)."""
        if t_us in self._truth:
            return self._truth[t_us]
        # shared: the same request can come twice while the first still waits (step 0)
        future = self._waiting.setdefault(t_us, Future())
        wall_deadline = time.monotonic() + WAIT_S

        def _give_up() -> None:
            if time.monotonic() >= wall_deadline and not future.done():
                future.set_result(None)
        timer = self.node.create_timer(0.05, _give_up, callback_group=self._inputs)
        try:
            return await future
        finally:
            self.node.destroy_timer(timer)
            if future.done() and self._waiting.get(t_us) is future:
                del self._waiting[t_us]

    async def _on_decide(self, request: Decide.Request, response: Decide.Response) -> Decide.Response:
        if self._answered is not None and self._answered[0] == request:
            return self._answered[1]  # the same request again: the same answer
        response.pid = os.getpid()
        response.host = socket.gethostname()
        truth = await self._await_truth(request.t_us)
        if truth is None:
            response.ok = False
            response.refusal_code = "missing_frame"
            response.detail = (f"ground_truth_driver: no /simforge/ground_truth with t_us={request.t_us} "
                               f"within {WAIT_S:g} s (is sim_bridge.ground_truth on?)")
            self._answered = (request, response)  # asked again: refused again
            return response
        response.ok = True
        response.action.step = request.step
        response.action.decided_step = request.step
        response.action.t_us = request.t_us
        response.action.steer_rad = 0.0
        response.action.accel_mps2 = decide(request.state, truth)
        self._answered = (request, response)
        return response


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A driver that brakes for the traffic simforge's ground truth shows.")
    parser.add_argument("--once", action="store_true",
                        help="exit once the run it served has ended (0: counted, 1: refused)")
    args = parser.parse_args(argv)
    rclpy.init()
    driver = GroundTruthDriver()
    # a run that ended before this node started, or one in another domain, is never served:
    # say where this one waits, so a script that waits on it can tell
    print(f"ground_truth_driver: serving /simforge/decide on ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}"
          + (", until the run it serves ends" if args.once else ""), file=sys.stderr, flush=True)
    # one executor for the node's life: a Decide awaiting its ground truth is a task of it,
    # resumed once the message has come
    executor = SingleThreadedExecutor()
    executor.add_node(driver.node)
    try:
        while rclpy.ok() and not (args.once and driver.ended is not None):
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        # DDS teardown was seen to hang for good (1 stop in 51, in rcl_node_fini, with the
        # interpreter lock held): the kernel ends the process 5 s on, no Python needed
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.setitimer(signal.ITIMER_REAL, 5.0)
        executor.shutdown()
        driver.node.destroy_node()
        rclpy.try_shutdown()
        signal.setitimer(signal.ITIMER_REAL, 0)
    if driver.ended is None or not args.once:
        return 0
    print(f"run {driver.ended.run_id}: {driver.ended.state} {driver.ended.code}".rstrip())
    return 0 if driver.ended.state == "counted" else 1


if __name__ == "__main__":
    sys.exit(main())
