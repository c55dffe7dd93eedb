"""examples/external_driver.py, except that it also publishes a simforge node's latched
parameters (as the driver node does), and only once the run has stopped calling it: what
the recorder got when discovery matched its reader to a driver's late, after a short
run's last step. Run as a process of its own by test_external_driver.py."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sys
import time
from pathlib import Path

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "external_driver.py"
QUIET_S = 0.5  # published once no Decide came for this long, after one did

_spec = importlib.util.spec_from_file_location("external_driver", EXAMPLE)
assert _spec is not None and _spec.loader is not None
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)


class LateParamsDriver(example.CruiseDriver):
    def __init__(self) -> None:
        super().__init__()
        latched = QoSProfile(depth=16, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self._params_pub = self.node.create_publisher(String, "/simforge/node_params", latched)
        self._last_answer: float | None = None
        self._published = False
        self.node.create_timer(0.05, self._publish_when_quiet)

    def _on_decide(self, request, response):
        self._last_answer = time.monotonic()
        return super()._on_decide(request, response)

    def _publish_when_quiet(self) -> None:
        if self._published or self._last_answer is None or time.monotonic() - self._last_answer < QUIET_S:
            return
        process = {"pid": os.getpid(), "host": socket.gethostname()}
        self._params_pub.publish(String(data=json.dumps({"node": "driver", "params": {}, "process": process})))
        self._published = True


example.CruiseDriver = LateParamsDriver  # what the example's main() starts

if __name__ == "__main__":
    sys.exit(example.main())
