"""A second OS process for the interface round-trip test: echoes every simforge_ros
message back on <topic>/echo and answers every service with a response derived from the
request. Exits after `--seconds`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import rclpy
import simforge_ros.msg as msgs
import simforge_ros.srv as srvs
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

QOS = QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.RELIABLE)
# every message of the package, as msg/ defines them: a new one round-trips too
MESSAGES = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "msg").glob("*.msg"))


def main() -> int:
    rclpy.init()
    node = Node("echo_peer")
    keep = []
    for name in MESSAGES:
        cls = getattr(msgs, name)
        pub = node.create_publisher(cls, f"/rt/{name}/echo", QOS)
        keep.append(pub)
        keep.append(node.create_subscription(cls, f"/rt/{name}", lambda m, p=pub: p.publish(m), QOS))

    def step(req, res):
        res.ok, res.engine_t_us, res.state.step = True, req.t_us, req.step
        res.frames = [msgs.FrameInfo(camera="c", t_us=req.t_us)]
        res.cameras, res.world_digest, res.pid, res.host = ["c"], f"d{req.applied.steer_rad}", 7, "h"
        return res

    def decide(req, res):
        res.ok, res.action.step, res.action.steer_rad = True, req.step, req.state.pose.x_m
        res.action.trajectory = [msgs.TrajectoryPoint(dt_us=1, x_m=2.0, y_m=3.0)]
        return res

    def finish(req, res):
        res.counted, res.chain_digest = req.status.state == "counted", req.status.run_id
        res.steps_recorded, res.detail = req.expected_steps, req.status.detail
        res.frames_digest = ",".join(f"{p.role}:{p.node}@{p.pid}/{p.host}" for p in req.participants)
        return res

    node.create_service(srvs.Step, "/rt/step", step)
    node.create_service(srvs.Decide, "/rt/decide", decide)
    node.create_service(srvs.Finish, "/rt/finish", finish)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    end = time.monotonic() + float(sys.argv[sys.argv.index("--seconds") + 1])
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.05)
    node.destroy_node()
    rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
