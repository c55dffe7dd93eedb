"""Every custom message and service round-trips over real DDS between two OS processes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")

import simforge_ros.msg as msgs
import simforge_ros.srv as srvs

from simforge_ros.core.canonical import to_plain

# every message of the package, as msg/ defines them: a new one round-trips too
MESSAGES = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "msg").glob("*.msg"))


def filled(cls, salt: int = 1):
    """An instance with every field set away from its default."""
    msg = cls()
    for name, kind in msg.get_fields_and_field_types().items():
        if kind.startswith("sequence<"):
            inner = kind[len("sequence<"):-1]
            if "/" in inner:
                _pkg, _, typ = inner.partition("/")
                item_cls = getattr(msgs, typ)
                setattr(msg, name, [filled(item_cls, salt + 1), filled(item_cls, salt + 2)])
            elif inner == "string":
                setattr(msg, name, [f"s{salt}", "t"])
            else:
                setattr(msg, name, [salt, salt + 1] if "int" in inner else [0.5 * salt, -1.25])
        elif "/" in kind:
            _pkg, _, typ = kind.partition("/")
            setattr(msg, name, filled(getattr(msgs, typ), salt + 3))
        elif kind == "string":
            setattr(msg, name, f"{name}-{salt}")
        elif kind == "boolean":
            setattr(msg, name, True)
        elif kind in ("double", "float"):
            setattr(msg, name, 0.1 * salt + 1.0 / 3.0)
        else:
            setattr(msg, name, 40 + salt)
    return msg


@pytest.fixture
def peer(ros_lease):
    script = Path(__file__).with_name("echo_peer.py")
    proc = subprocess.Popen([sys.executable, str(script), "--seconds", "60"], env=dict(ros_lease.env))
    yield proc
    proc.kill()
    proc.wait()


def test_every_message_and_service_round_trips_between_processes(ros_lease, peer):
    assert {"GroundTruth", "ActorState", "SignalState", "VehicleState"} <= set(MESSAGES)  # msg/ was found
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    qos = QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.RELIABLE)
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_lease.domain_id)
    try:
        node = Node("round_trip", context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        received: dict[str, object] = {}
        sent = {name: filled(getattr(msgs, name)) for name in MESSAGES}
        pubs = {}
        for name in MESSAGES:
            cls = getattr(msgs, name)
            pubs[name] = node.create_publisher(cls, f"/rt/{name}", qos)
            node.create_subscription(cls, f"/rt/{name}/echo", lambda m, n=name: received.__setitem__(n, m), qos)
        clients = {n: node.create_client(getattr(srvs, n), f"/rt/{n.lower()}") for n in ("Step", "Decide", "Finish")}
        deadline = time.monotonic() + 30
        while not all(c.service_is_ready() for c in clients.values()) or any(
            p.get_subscription_count() == 0 for p in pubs.values()
        ):
            assert time.monotonic() < deadline, "peer process did not appear"
            executor.spin_once(timeout_sec=0.05)
        # Seeing the peer proves only our side of each match: until the peer's side has
        # matched too, an echo or an answer can be lost (rmw drops an answer it cannot
        # deliver within 100 ms). What has not come back within a second is sent again,
        # as the clock master sends step 0 again (ClockMaster._call).
        futures: dict[str, list] = {name: [] for name in clients}
        resend_at = 0.0
        while len(received) < len(MESSAGES) or not all(any(f.done() for f in fs) for fs in futures.values()):
            assert time.monotonic() < deadline, f"missing echoes: {set(MESSAGES) - set(received)}"
            if time.monotonic() >= resend_at:
                resend_at = time.monotonic() + 1.0
                for name, pub in pubs.items():
                    if name not in received:
                        pub.publish(sent[name])
                for name, client in clients.items():
                    if not any(f.done() for f in futures[name]):
                        futures[name].append(client.call_async(filled(getattr(srvs, name).Request)))
            executor.spin_once(timeout_sec=0.05)
        answers = {name: next(f for f in fs if f.done()).result() for name, fs in futures.items()}
        for name in MESSAGES:
            assert to_plain(received[name]) == to_plain(sent[name]), name
        step = answers["Step"]
        assert step.ok and step.engine_t_us == 41 and step.frames[0].t_us == 41
        assert step.world_digest == f"d{0.1 * 4 + 1.0 / 3.0}"
        decide = answers["Decide"]
        assert decide.action.step == 41 and decide.action.trajectory[0].y_m == 3.0
        finish = answers["Finish"]
        assert finish.chain_digest == "run_id-4" and finish.steps_recorded == 41
        assert finish.frames_digest == "role-2:node-2@42/host-2,role-3:node-3@43/host-3"
    finally:
        rclpy.shutdown(context=context)
