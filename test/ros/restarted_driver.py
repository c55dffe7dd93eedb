"""examples/external_driver.py, except that from step SWITCH_STEP on its answers name
another process, as they would after the driver restarted mid-run (or with a second driver
serving the same service). Run as a process of its own by test_external_driver.py."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "external_driver.py"
SWITCH_STEP = 5

_spec = importlib.util.spec_from_file_location("external_driver", EXAMPLE)
assert _spec is not None and _spec.loader is not None
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)


class RestartedDriver(example.CruiseDriver):
    def _on_decide(self, request, response):
        response = super()._on_decide(request, response)
        response.pid = os.getpid() + (1 if request.step >= SWITCH_STEP else 0)
        return response


example.CruiseDriver = RestartedDriver  # what the example's main() starts

if __name__ == "__main__":
    sys.exit(example.main())
