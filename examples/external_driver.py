"""Your own driver in lockstep with simforge_ros: the smallest node that answers Decide.

Start a run that waits for it, then this node in the same ROS domain:

    ROS_DOMAIN_ID=42 simforge run right_turn --driver external &
    ROS_DOMAIN_ID=42 ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST .venv/bin/python examples/external_driver.py --once

It uses nothing of simforge_ros but its interfaces (simforge_ros/srv/Decide and the
messages in it), as a node of another stack, or the bridge to an ECU, would. What the
clock master asks of a driver (the README's "Bring your own driver"):

* Offer ``/simforge/decide``. Each request names the step, its exact time ``t_us``, the
  decision period, the seed, the vehicle state of that step and the frames of that step
  (camera + exact stamp: await that stamp on the camera's topic, never take the latest),
  and the bridge's ``camera_period_us``: a driver that needs frames at steps that period
  misses refuses at step 0 (``rate_not_multiple``) rather than when the first one comes.
* Answer with ``ok`` and an action for exactly that step: ``action.step`` and
  ``action.decided_step`` = ``request.step``, ``action.t_us`` = ``request.t_us``; anything
  else is refused (``participant_error``). To refuse, answer ``ok = false`` with a refusal
  code (e.g. ``missing_frame``) and a detail: the run stops there, by name.
* The same request may come twice (a first answer can be lost while discovery is still
  matching the service): answer it with the same answer, without deciding again.
* Decide from the request alone, never from the wall clock or from an earlier step's
  state kept aside: then the same run repeats bit for bit.
* Fill ``pid`` (and ``host``) so the clock master can tell at once that this process died.

It serves one run after another (``--repeat``) until it is stopped (Ctrl-C); with
``--once`` it exits once the run it served has ended, as the run's final status on
``/simforge/status`` (latched: a late subscriber still gets it) says, exit 0 for a counted
run and 1 for a refused one: what a CI job driving an ECU in lockstep waits for. A run
whose clock master left without a final status reaching this node (stopped meanwhile, the
status writer gone with it) ends it too, exit 1: it waited for ever.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from simforge_ros.msg import RunStatus
from simforge_ros.srv import Decide

TARGET_SPEED_MPS = 4.0
SPEED_GAIN_PER_S = 0.8
MAX_ACCEL_MPS2 = 2.0


class CruiseDriver:
    """Keeps the wheel straight and holds a speed: simple, and the same every time."""

    def __init__(self) -> None:
        self.node = Node("external_driver")
        self._answered: tuple[Decide.Request, Decide.Response] | None = None
        self.node.create_service(Decide, "/simforge/decide", self._on_decide)
        self.ended: RunStatus | None = None  # the final status of a run this driver served
        self._running: str | None = None  # the run id of the last "running" status seen
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self._status = self.node.create_subscription(RunStatus, "/simforge/status", self._on_status, latched)
        self._status_writer_seen = False

    def clock_master_left(self) -> bool:
        """The run this driver served has lost its status writer (its clock master) without a
        final status here."""
        writers = self._status.get_publisher_count()
        self._status_writer_seen = self._status_writer_seen or writers > 0
        served = self._answered is not None or self._running is not None
        return served and self._status_writer_seen and writers == 0

    def _on_status(self, status: RunStatus) -> None:
        # A final status ends the run this driver served: one it answered, or one it saw
        # running (refused before its first request, at a driver's own step-0 check or
        # by a fault of the bridge's) -- not a run that ended before this driver started.
        if status.state == "running":
            self._running = status.run_id
        elif status.state in ("counted", "refused") and (self._answered is not None
                                                         or status.run_id == self._running):
            self.ended = status

    def _on_decide(self, request: Decide.Request, response: Decide.Response) -> Decide.Response:
        if self._answered is not None and self._answered[0] == request:
            return self._answered[1]  # the same request again (every field): the same answer
        error = TARGET_SPEED_MPS - request.state.speed_mps
        accel = max(-MAX_ACCEL_MPS2, min(MAX_ACCEL_MPS2, SPEED_GAIN_PER_S * error))
        response.ok = True
        response.action.step = request.step
        response.action.decided_step = request.step
        response.action.t_us = request.t_us
        response.action.steer_rad = 0.0
        response.action.accel_mps2 = accel
        response.pid = os.getpid()
        response.host = socket.gethostname()
        self._answered = (request, response)
        return response


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A driver answering simforge's Decide calls.")
    parser.add_argument("--once", action="store_true",
                        help="exit once the run it served has ended (0: counted, 1: refused)")
    args = parser.parse_args(argv)
    rclpy.init()
    driver = CruiseDriver()
    left = False  # the run's clock master left without a final status here
    # a run that ended before this node started, or one in another domain, is never served:
    # say where this one waits, so a script that waits on it can tell
    print(f"external_driver: serving /simforge/decide on ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}"
          + (", until the run it serves ends" if args.once else ""), file=sys.stderr, flush=True)
    try:
        while rclpy.ok() and not (args.once and driver.ended is not None):
            rclpy.spin_once(driver.node, timeout_sec=0.1)
            if args.once and driver.ended is None and driver.clock_master_left():
                for _ in range(10):  # a final status already on its way is taken first
                    rclpy.spin_once(driver.node, timeout_sec=0.1)
                left = driver.ended is None
                break
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        # DDS teardown was seen to hang for good (1 stop in 51, in rcl_node_fini, with the
        # interpreter lock held): the kernel ends the process 5 s on, no Python needed
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.setitimer(signal.ITIMER_REAL, 5.0)
        driver.node.destroy_node()
        rclpy.try_shutdown()
        signal.setitimer(signal.ITIMER_REAL, 0)
    if left:
        print("external_driver: the run's clock master left without a final status", file=sys.stderr)
        return 1
    if driver.ended is None or not args.once:
        return 0
    print(f"run {driver.ended.run_id}: {driver.ended.state} {driver.ended.code}".rstrip())
    return 0 if driver.ended.state == "counted" else 1


if __name__ == "__main__":
    sys.exit(main())
