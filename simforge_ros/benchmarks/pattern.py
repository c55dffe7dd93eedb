"""The lockstep's own message pattern with participants that do nothing: the per-step time
no implementation of this step contract on rclpy and Fast DDS can go under on this machine.

A recorded step sends exactly this: a Step round trip to the bridge (its answer carrying
the observed state), a Decide round trip to the driver (its request carrying that state),
and five messages to the recorder (/clock, the state, the step's timing, the action and the
applied action), each with the real interface types and QoS. Here the bridge and the driver
answer at once with a state filled in beforehand, the recorder takes its messages raw and
drops them, and the asking side does nothing but ask, wait and publish. What the lockstep
loop costs beyond this is the simulation's, the driver's, the contract's and the recorder's
own work; what this costs is the transport's and rclpy's, at the pattern the contract needs.

Layouts as the loop's: ``single`` (four nodes, one process, one EventsExecutor) and
``processes`` (the bridge, the driver and the recorder each a process of their own, run
as this module with ``--peer``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from simforge_ros.benchmarks.stats import summary

STEP_SERVICE, DECIDE_SERVICE = "/simforge_bench/pattern/step", "/simforge_bench/pattern/decide"
STOP = "/simforge_bench/pattern/stop"
RECORD_TOPICS = ("clock", "state", "timing", "action", "applied")
PEERS = ("bridge", "driver", "recorder")
LAYOUTS = ("single", "processes")
_ANSWER_TIMEOUT_S = 2.0
_DIGEST = "0" * 64  # the Step answer's world digest: a SHA-256 in hex, as the bridge sends


def _topic(name: str) -> str:
    return f"/simforge_bench/pattern/{name}"


def _record_types() -> dict[str, Any]:
    from rosgraph_msgs.msg import Clock

    from simforge_ros.msg import DriverAction, StepTiming, VehicleState

    return {"clock": Clock, "state": VehicleState, "timing": StepTiming, "action": DriverAction,
            "applied": DriverAction}


def _filled(msg: Any) -> Any:
    """``msg`` with every number set, nested messages too, and a digest where it has one:
    a step's messages as they are sent, not defaults."""
    for name, kind in msg.get_fields_and_field_types().items():
        if kind in ("double", "float"):
            setattr(msg, name, 1.2345678901)
        elif kind.startswith(("int", "uint")):
            setattr(msg, name, 123456)
        elif kind == "string" and name == "world_digest":
            setattr(msg, name, _DIGEST)
        elif "/" in kind and not kind.startswith("sequence"):
            _filled(getattr(msg, name))
    return msg


class Bridge:
    """Answers Step at once, with the state a step's answer carries."""

    def __init__(self, context: Any) -> None:
        from rclpy.node import Node

        from simforge_ros.msg import VehicleState
        from simforge_ros.srv import Step

        self.node = Node("bench_pattern_bridge", context=context)
        self._state = _filled(VehicleState())
        self.node.create_service(Step, STEP_SERVICE, self._on_step)

    def _on_step(self, request: Any, response: Any) -> Any:
        response.ok = True
        response.engine_t_us = request.t_us
        response.world_digest = _DIGEST
        response.state = self._state
        return response


class Driver:
    """Answers Decide at once."""

    def __init__(self, context: Any) -> None:
        from rclpy.node import Node

        from simforge_ros.msg import DriverAction
        from simforge_ros.srv import Decide

        self.node = Node("bench_pattern_driver", context=context)
        self._action = _filled(DriverAction())
        self.node.create_service(Decide, DECIDE_SERVICE, self._on_decide)

    def _on_decide(self, _request: Any, response: Any) -> Any:
        response.ok = True
        response.action = self._action
        return response


class Recorder:
    """Takes the five record topics raw (as the recorder node does) and drops them."""

    def __init__(self, context: Any) -> None:
        from rclpy.node import Node

        from simforge_ros.nodes.common import RECORD_QOS

        self.node = Node("bench_pattern_recorder", context=context)
        self.taken = 0
        for name, msg_type in _record_types().items():
            self.node.create_subscription(msg_type, _topic(name), self._on_message, RECORD_QOS, raw=True)

    def _on_message(self, _raw: bytes) -> None:
        self.taken += 1


class Master:
    """The asking side: a step's two calls and five publishes, timed step by step."""

    def __init__(self, context: Any, executor: Any, record: bool) -> None:
        from rclpy.node import Node
        from std_msgs.msg import UInt64

        from simforge_ros.nodes.common import RECORD_QOS
        from simforge_ros.srv import Decide, Step

        self.node = Node("bench_pattern_master", context=context)
        self.executor = executor
        self.record = record
        self._step: Any = self.node.create_client(Step, STEP_SERVICE)
        self._decide: Any = self.node.create_client(Decide, DECIDE_SERVICE)
        self._step_request, self._decide_request = Step.Request(), Decide.Request()
        self._step_request.applied = _filled(self._step_request.applied)
        types = _record_types()
        self._pubs = {name: self.node.create_publisher(types[name], _topic(name), RECORD_QOS)
                      for name in RECORD_TOPICS} if record else {}
        self._msgs = {name: _filled(types[name]()) for name in RECORD_TOPICS if name != "clock"}
        self._msgs["clock"] = types["clock"]()
        self._stop = self.node.create_publisher(UInt64, STOP, RECORD_QOS)

    def wait_ready(self, timeout_s: float) -> None:
        """Until both services answer and, recorded, every record topic has its reader.

        Raises:
            TimeoutError: a peer did not appear in time.
        """
        from simforge_ros.nodes.common import spin_until

        def ready() -> bool:
            return (self._step.service_is_ready() and self._decide.service_is_ready()
                    and all(p.get_subscription_count() > 0 for p in self._pubs.values()))

        deadline = time.monotonic() + timeout_s
        if not spin_until(self.executor, ready, timeout_s):
            raise TimeoutError(f"the pattern's peers did not appear within {timeout_s:g} s")
        # a service is "ready" once its request reader matched; an answer sent before its
        # own writer matched this client is lost (seen here on a first call): ask until
        # each answers before anything is timed
        for client, request in ((self._step, self._step_request), (self._decide, self._decide_request)):
            while not self._answered(client, request, min(1.0, max(0.0, deadline - time.monotonic()))):
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"{client.srv_name} did not answer within {timeout_s:g} s")

    def _answered(self, client: Any, request: Any, timeout_s: float) -> bool:
        from simforge_ros.nodes.common import spin_future

        future = client.call_async(request)
        if spin_future(self.executor, future, timeout_s):
            return True
        client.remove_pending_request(future)
        return False

    def _call(self, client: Any, request: Any) -> Any:
        from simforge_ros.nodes.common import spin_future

        future = client.call_async(request)
        if not spin_future(self.executor, future, _ANSWER_TIMEOUT_S):
            raise TimeoutError(f"no answer on {client.srv_name} within {_ANSWER_TIMEOUT_S:g} s")
        return future.result()

    def one_step(self, step: int, decision_us: int) -> None:
        t_us = step * decision_us
        self._step_request.step, self._step_request.t_us = step, t_us
        answer = self._call(self._step, self._step_request)
        if self.record:
            self._pubs["state"].publish(answer.state)
            clock = self._msgs["clock"]
            clock.clock.sec, clock.clock.nanosec = divmod(t_us * 1000, 1_000_000_000)
            self._pubs["clock"].publish(clock)
        self._decide_request.step, self._decide_request.t_us = step, t_us
        self._decide_request.state = answer.state
        self._call(self._decide, self._decide_request)
        if self.record:
            for name in ("timing", "action", "applied"):
                self._pubs[name].publish(self._msgs[name])

    def steps(self, n: int, warmup: int) -> list[float]:
        """n steps' wall times in microseconds, after ``warmup`` untimed ones (the stamps
        those of the timing contract's default period: their values cost nothing here)."""
        from simforge_ros.core.timing_contract import DEFAULT_DECISION_US as decision_us

        out = []
        for step in range(warmup + n):
            t0 = time.perf_counter_ns()
            self.one_step(step, decision_us)
            if step >= warmup:
                out.append((time.perf_counter_ns() - t0) / 1000.0)
        return out

    def stop_peers(self) -> None:
        from std_msgs.msg import UInt64

        self._stop.publish(UInt64())


@contextmanager
def _context(domain_id: int) -> Iterator[Any]:
    import rclpy

    context = rclpy.Context()
    rclpy.init(args=[], context=context, domain_id=domain_id)
    try:
        yield context
    finally:
        rclpy.shutdown(context=context)


def measure(lease: Any, layout: str, record: bool, n: int, warmup: int = 300) -> dict[str, Any]:
    """The pattern's per-step time in ``layout``, with or without the recorder's reader, on
    the leased domain: {"layout", "record", "per_step_us": summary, "steps_per_s"}.

    Raises:
        TimeoutError: a peer never appeared or stopped answering.
        ValueError: an unknown layout.
    """
    from simforge_ros.benchmarks.transport import _end_peer
    from simforge_ros.nodes.common import close_nodes, make_executor, spin_until

    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    roles = [r for r in PEERS if record or r != "recorder"]
    peers: list[subprocess.Popen[bytes]] = []
    if layout == "processes":
        peers = [subprocess.Popen(
            # -P: the installed package, not a source tree in the current directory (no generated
            # interfaces there)
            [sys.executable, "-P", "-m", "simforge_ros.benchmarks.pattern", "--peer", role, "--seconds", "300"],
            env=dict(lease.env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        ) for role in roles]
    try:
        with _context(lease.domain_id) as context:
            executor = make_executor(context)
            master = Master(context, executor, record)
            here = [] if peers else [_ROLES[role](context) for role in roles]
            nodes = [master.node, *(role.node for role in here)]
            for node in nodes:
                executor.add_node(node)
            try:
                master.wait_ready(30.0)
                per_step = master.steps(n, warmup)
                master.stop_peers()
                spin_until(executor, lambda: False, 0.2)  # the stop message leaves, the last records arrive
            finally:
                close_nodes(executor, nodes)
    finally:
        for peer in peers:
            _end_peer(peer)
    took: int | None = None
    if record:  # what the recorder's reader took: every message sent reached it
        if peers:
            out = peers[roles.index("recorder")].communicate()[0].decode(errors="replace").split()
            took = int(out[1]) if len(out) == 2 and out[0] == "taken" and out[1].isdigit() else None
        else:
            took = next(role.taken for role in here if isinstance(role, Recorder))
    stats = summary(per_step)
    return {"layout": layout, "record": record, "per_step_us": stats, "messages_per_step": len(RECORD_TOPICS),
            "steps_sent": warmup + n, "recorder_took": took,
            "steps_per_s": 1e6 / stats["mean"] if stats.get("mean") else None}


_ROLES: dict[str, Any] = {"bridge": Bridge, "driver": Driver, "recorder": Recorder}


def _peer_main(args: argparse.Namespace) -> int:
    from std_msgs.msg import UInt64

    from simforge_ros.benchmarks.transport import PeerNode, serve_peer
    from simforge_ros.nodes.common import RECORD_QOS, make_executor

    stopped: list[bool] = []

    def build() -> PeerNode:
        role = _ROLES[args.peer](None)
        role.node.create_subscription(UInt64, STOP, lambda _m: stopped.append(True), RECORD_QOS)
        said = (lambda: f"taken {role.taken}") if isinstance(role, Recorder) else None
        return PeerNode(role.node, make_executor(None), lambda: bool(stopped), said)

    serve_peer(build, args.seconds, linger_s=0.2)  # 0.2 s: a record message the stop overtook


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simforge_ros.benchmarks.pattern")
    parser.add_argument("--peer", choices=PEERS, help="run one participant of the processes layout")
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    if args.peer:
        return _peer_main(args)
    parser.error("only --peer is run directly; `simforge bench` runs the rest")
    return 2


if __name__ == "__main__":
    sys.exit(main())
