"""A stand-in for a clock master that leaves without its final status: it offers
/simforge/status (latched, as the clock master does), says the run is running, and after
`--seconds` goes away without saying how it ended. With `--vanish` it also publishes its
latched parameters as the clock master (naming its process, as publish_node_params does)
and its process ends without taking its node off the graph, as a process that is killed
or stuck in teardown does: only its process's end tells that it has left."""

from __future__ import annotations

import json
import os
import sys
import time

import rclpy
from rclpy.node import Node
from simforge_ros.msg import RunStatus
from std_msgs.msg import String

from simforge_ros import topics
from simforge_ros.nodes.common import HOST, LATCHED_QOS

MATCH_LIMIT_S = 30.0


def main() -> int:
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
    rclpy.init()
    node = Node("status_writer")
    writer = node.create_publisher(RunStatus, topics.STATUS, LATCHED_QOS)
    writer.publish(RunStatus(run_id="gone", state="running"))
    publishers = [writer]
    if "--vanish" in sys.argv:
        params = node.create_publisher(String, topics.NODE_PARAMS, LATCHED_QOS)
        params.publish(String(data=json.dumps({"node": "clock_master", "params": {},
                                               "process": {"pid": os.getpid(), "host": HOST}})))
        publishers.append(params)
    # `--seconds` count from the participant's having matched (a loaded machine may take
    # longer to start it than that): one that never saw the writer could not see it go
    wall_deadline = time.monotonic() + MATCH_LIMIT_S
    while not all(p.get_subscription_count() for p in publishers):
        if time.monotonic() > wall_deadline:
            print(f"no participant matched within {MATCH_LIMIT_S:g} s", flush=True)
            return 1
        time.sleep(0.05)
    if "--vanish" in sys.argv:
        time.sleep(seconds)
        print("status writer gone", flush=True)
        os._exit(0)  # no teardown: the graph still holds the writer until its lease runs out
    time.sleep(seconds)
    node.destroy_node()
    rclpy.shutdown()
    print("status writer gone", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
