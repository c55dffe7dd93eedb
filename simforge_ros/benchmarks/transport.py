"""The transport floor: a bare service round trip and a topic ping-pong, timed sample by sample.

Between two processes the peer is this module run as a script (``--peer``) with the same
interpreter and the leased domain's environment; within one process both nodes share one
context and one executor. Executors: ``events`` (rclpy.experimental.EventsExecutor, what
the simforge nodes spin) and ``single`` (SingleThreadedExecutor, for reference).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

from simforge_ros.benchmarks.stats import summary

EXECUTORS = ("events", "single")
SERVICE = "/simforge_bench/trigger"
PING, PONG = "/simforge_bench/ping", "/simforge_bench/pong"
_SAMPLE_TIMEOUT_S = 2.0


def make_executor(kind: str, context: Any) -> Any:
    """An executor of ``kind`` on ``context``."""
    from simforge_ros.nodes.common import make_executor as node_executor

    if kind == "events":
        return node_executor(context)
    if kind == "single":
        from rclpy.executors import SingleThreadedExecutor

        return SingleThreadedExecutor(context=context)
    raise ValueError(f"executor must be one of {EXECUTORS}, got {kind!r}")


class Echo:
    """The answering side: a Trigger service and a ping -> pong relay."""

    def __init__(self, context: Any) -> None:
        from rclpy.node import Node
        from std_msgs.msg import UInt64
        from std_srvs.srv import Trigger

        from simforge_ros.nodes.common import RECORD_QOS

        self.node = Node("bench_echo", context=context)
        self.stop = False
        pong = self.node.create_publisher(UInt64, PONG, RECORD_QOS)
        self._keep = [
            pong,
            self.node.create_subscription(UInt64, PING, pong.publish, RECORD_QOS),
            self.node.create_subscription(UInt64, PING + "/stop", lambda _m: setattr(self, "stop", True), RECORD_QOS),
            self.node.create_service(Trigger, SERVICE, self._on_trigger),
        ]

    @staticmethod
    def _on_trigger(_request: Any, response: Any) -> Any:
        response.success = True
        return response


class Prober:
    """The asking side: times service calls and ping-pongs against an Echo."""

    def __init__(self, context: Any, executor: Any) -> None:
        from rclpy.node import Node
        from std_msgs.msg import UInt64
        from std_srvs.srv import Trigger

        from simforge_ros.nodes.common import RECORD_QOS

        self._msg_type = UInt64
        self.node = Node("bench_prober", context=context)
        self.executor = executor
        self._client: Any = self.node.create_client(Trigger, SERVICE)
        self._request = Trigger.Request()
        self._ping = self.node.create_publisher(UInt64, PING, RECORD_QOS)
        self._stop = self.node.create_publisher(UInt64, PING + "/stop", RECORD_QOS)
        self._pong = self.node.create_subscription(UInt64, PONG, self._on_pong, RECORD_QOS)
        self._waiting: Any = None
        self._seq = 0

    def _on_pong(self, msg: Any) -> None:
        if self._waiting is not None and msg.data == self._seq and not self._waiting.done():
            self._waiting.set_result(True)

    def wait_ready(self, timeout_s: float) -> None:
        """Wait until the service answers and the ping/pong topics are matched both ways.

        Raises:
            TimeoutError: the peer did not appear in time.
        """
        from simforge_ros.nodes.common import spin_until

        def ready() -> bool:
            return (self._client.service_is_ready() and self._ping.get_subscription_count() > 0
                    and self._pong_matched())

        if not spin_until(self.executor, ready, timeout_s):
            raise TimeoutError(f"the bench peer did not appear within {timeout_s:g} s")

    def _pong_matched(self) -> bool:
        return self.node.count_publishers(PONG) > 0

    def _wait(self, future: Any) -> None:
        from simforge_ros.nodes.common import spin_future

        if not spin_future(self.executor, future, _SAMPLE_TIMEOUT_S):
            raise TimeoutError(f"no answer within {_SAMPLE_TIMEOUT_S:g} s")

    def service_round_trips(self, n: int, warmup: int) -> list[float]:
        """n service round trips in microseconds (after ``warmup`` untimed ones)."""
        out = []
        for i in range(warmup + n):
            t0 = time.perf_counter_ns()
            future = self._client.call_async(self._request)
            self._wait(future)
            dt = time.perf_counter_ns() - t0
            if i >= warmup:
                out.append(dt / 1000.0)
        return out

    def ping_pongs(self, n: int, warmup: int) -> list[float]:
        """n topic ping-pongs (publish, await the echo) in microseconds."""
        from rclpy.task import Future

        out = []
        msg = self._msg_type()
        for i in range(warmup + n):
            self._seq += 1
            msg.data = self._seq
            self._waiting = Future()
            t0 = time.perf_counter_ns()
            self._ping.publish(msg)
            self._wait(self._waiting)
            dt = time.perf_counter_ns() - t0
            if i >= warmup:
                out.append(dt / 1000.0)
        return out

    def stop_peer(self) -> None:
        self._stop.publish(self._msg_type())


@dataclass(frozen=True)
class FloorResult:
    """One transport measurement: where, which executor, and its two samples (µs)."""

    where: str  # "two_processes" | "one_process"
    executor: str
    service_us: dict[str, Any]
    topic_us: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"where": self.where, "executor": self.executor, "service_us": self.service_us,
                "topic_us": self.topic_us}


@contextmanager
def _context(domain_id: int) -> Iterator[Any]:
    import rclpy

    context = rclpy.Context()
    rclpy.init(args=[], context=context, domain_id=domain_id)
    try:
        yield context
    finally:
        rclpy.shutdown(context=context)


def measure(lease: Any, where: str, executor_kind: str, n: int, warmup: int = 200) -> FloorResult:
    """Measure one (where, executor) cell on the leased domain.

    Raises:
        TimeoutError: the peer never appeared or stopped answering.
    """
    peer: subprocess.Popen[bytes] | None = None
    if where == "two_processes":
        peer = subprocess.Popen(
            [sys.executable, "-m", "simforge_ros.benchmarks.transport", "--peer", "--executor", executor_kind,
             "--seconds", "120"],
            env=dict(lease.env), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
    elif where != "one_process":
        raise ValueError(f"where must be two_processes or one_process, got {where!r}")
    from simforge_ros.nodes.common import close_nodes, spin_until

    try:
        with _context(lease.domain_id) as context:
            executor = make_executor(executor_kind, context)
            prober = Prober(context, executor)
            nodes = [prober.node]
            if peer is None:
                nodes.append(Echo(context).node)
            for node in nodes:
                executor.add_node(node)
            try:
                prober.wait_ready(30.0)
                service = prober.service_round_trips(n, warmup)
                topic = prober.ping_pongs(n, warmup)
                prober.stop_peer()
                spin_until(executor, lambda: False, 0.1)  # let the last answers leave
            finally:
                close_nodes(executor, nodes)
    finally:
        if peer is not None:
            _end_peer(peer)
    return FloorResult(where, executor_kind, summary(service), summary(topic))


def _end_peer(peer: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """Reap the peer; one that does not leave after its stop message is terminated, then
    killed (a peer once hung in its teardown: the figures are taken by then)."""
    for stop in (None, peer.terminate, peer.kill):
        if stop is not None:
            print(f"[bench] the transport peer (pid {peer.pid}) did not exit: {stop.__name__}", file=sys.stderr)
            stop()
        try:
            peer.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue
    peer.wait()


def serve_peer(build: Callable[[], PeerNode], seconds: float, linger_s: float = 0.1) -> NoReturn:
    """A bench peer process's life (this floor's echo, the message pattern's participants):
    the node ``build`` makes, spun until it is told to stop or ``seconds`` pass, then
    ``linger_s`` more for what is still on its way (its last answers out, a message the
    stop overtook in), then what it has to say on stdout.

    It leaves without tearing the node down: destroying it (even detached first) was seen
    to spin at 100% CPU in rclpy's EventHandler.__exit__ until killed, and this process has
    nothing left to keep. Its answers are out; the OS reclaims the rest.
    """
    import rclpy

    from simforge_ros.nodes.common import spin_until

    rclpy.init(args=[])
    try:
        peer = build()
        peer.executor.add_node(peer.node)
        spin_until(peer.executor, peer.stopped, seconds)
        spin_until(peer.executor, lambda: False, linger_s)
        if peer.last_words is not None:
            print(peer.last_words(), flush=True)
    except BaseException:
        if rclpy.ok():
            rclpy.shutdown()
        raise
    sys.stderr.flush()
    os._exit(0)


@dataclass(frozen=True)
class PeerNode:
    """What serve_peer spins: a node, its executor, whether it was told to stop, and what
    it says as it leaves (None: nothing)."""

    node: Any
    executor: Any
    stopped: Callable[[], bool]
    last_words: Callable[[], str] | None = None


def _peer_main(args: argparse.Namespace) -> int:
    def build() -> PeerNode:
        echo = Echo(None)
        return PeerNode(echo.node, make_executor(args.executor, None), lambda: echo.stop)

    serve_peer(build, args.seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simforge_ros.benchmarks.transport")
    parser.add_argument("--peer", action="store_true", help="run the answering side")
    parser.add_argument("--executor", choices=EXECUTORS, default="events")
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    if args.peer:
        return _peer_main(args)
    parser.error("only --peer is run directly; `simforge bench` runs the rest")
    return 2


if __name__ == "__main__":
    sys.exit(main())
