"""A stack's node, as a user's would be: reads /clock and the front camera's camera_info
with default QoS (keep last 10, reliable, volatile), writes each stamp it got as "TOPIC NS" lines to
argv[1] and exits once it has /clock and the front camera_info of step argv[2] (or gives up on
each after 60 s and 10 s). With argv[3] "stop" it stops itself (SIGSTOP) once it has the
first camera_info: a reader matched that acknowledges nothing more."""

from __future__ import annotations

import os
import signal
import sys
import time

import rclpy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo


def main() -> int:
    out, last_ns = sys.argv[1], int(sys.argv[2])
    stop = sys.argv[3:] == ["stop"]
    rclpy.init()
    node = rclpy.create_node("stack_listener")
    got: list[tuple[str, int]] = []
    node.create_subscription(Clock, "/clock", lambda m: got.append(("clock", m.clock.sec * 10**9 + m.clock.nanosec)),
                             10)

    def on_info(m: CameraInfo) -> None:
        got.append(("front", m.header.stamp.sec * 10**9 + m.header.stamp.nanosec))
        if stop:
            os.kill(os.getpid(), signal.SIGSTOP)

    node.create_subscription(CameraInfo, "/simforge/camera/front/camera_info", on_info, 10)
    print("up", flush=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and ("clock", last_ns) not in got:
        rclpy.spin_once(node, timeout_sec=0.1)
    end = time.monotonic() + 10  # the camera's, up to the last step's
    while time.monotonic() < end and ("front", last_ns) not in got:
        rclpy.spin_once(node, timeout_sec=0.05)
    with open(out, "w") as f:
        f.writelines(f"{topic} {ns}\n" for topic, ns in got)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
