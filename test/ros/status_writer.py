"""A stand-in for a clock master that leaves without its final status: it offers
/simforge/status (latched, as the clock master does), says the run is running, and after
`--seconds` goes away without saying how it ended."""

from __future__ import annotations

import sys
import time

import rclpy
from rclpy.node import Node
from simforge_ros.msg import RunStatus

from simforge_ros import topics
from simforge_ros.nodes.common import LATCHED_QOS


def main() -> int:
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
    rclpy.init()
    node = Node("status_writer")
    writer = node.create_publisher(RunStatus, topics.STATUS, LATCHED_QOS)
    writer.publish(RunStatus(run_id="gone", state="running"))
    time.sleep(seconds)
    node.destroy_node()
    rclpy.shutdown()
    print("status writer gone", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
