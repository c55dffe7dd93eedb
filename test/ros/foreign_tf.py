"""A user's tf2 node in a run's domain, as a process of its own: publishes /tf_static once
(latched, as tf2 does: base_link -> lidar) and /tf every 20 ms (odom -> base_footprint),
both stamped with the wall clock, as a stack not on sim time does. Exits after `--seconds`."""

from __future__ import annotations

import sys
import time

import rclpy
from geometry_msgs.msg import TransformStamped
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from tf2_msgs.msg import TFMessage


def transform(parent: str, child: str) -> TransformStamped:
    t = TransformStamped()
    now = time.time_ns()
    t.header.stamp.sec, t.header.stamp.nanosec = divmod(now, 1_000_000_000)
    t.header.frame_id, t.child_frame_id = parent, child
    t.transform.translation.x = 0.5
    return t


def main() -> int:
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
    rclpy.init()
    node = Node("users_stack")
    static = node.create_publisher(TFMessage, "/tf_static", QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    static.publish(TFMessage(transforms=[transform("base_link", "lidar")]))
    dynamic = node.create_publisher(TFMessage, "/tf", 100)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        dynamic.publish(TFMessage(transforms=[transform("odom", "base_footprint")]))
        time.sleep(0.02)
    node.destroy_node()
    rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
