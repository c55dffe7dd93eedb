"""Where a `single` step's time goes, recorder on and off (a development tool: it prints
figures, it asserts nothing; docs/benchmark-history.md, 2026-12-04 evening).

    .venv/bin/python tools/step_breakdown.py loop [--steps 3000] [--rounds 2] [--cameras front,left,rear,right]
    .venv/bin/python tools/step_breakdown.py feed [--steps 150] [--rounds 6]

``loop`` runs the bench's own lockstep runs (benchmarks.loop.run_loop, `single` layout)
with every rclpy call on a step's path, and the nodes' handlers, wrapped in a timer; it
prints their time per step. A wrapped call costs a little more than a bare one, so the
figures are for comparing recorder on with recorder off, not for the README's table.

``feed`` records one four-camera run, then feeds its bag's messages to a recorder node's
handler with no transport (as `simforge salvage` does), in three modes taken in turns:
the bag written by the recorder's writer thread (as shipped), written in the handler, and
not written at all. It prints the handler's µs per step in each mode.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_Totals = collections.defaultdict[str, list[int]]


def _wrap(owner: Any, name: str, key: str, totals: _Totals) -> None:
    """Time every call of ``owner.name`` into ``totals[key]`` (ns, calls)."""
    inner = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return inner(*args, **kwargs)
        finally:
            entry = totals[key]
            entry[0] += time.perf_counter_ns() - t0
            entry[1] += 1

    setattr(owner, name, timed)


def loop(steps: int, rounds: int, cameras: tuple[str, ...]) -> None:
    import rclpy.client
    import rclpy.publisher
    import rclpy.service

    from simforge_ros.benchmarks.loop import run_loop
    from simforge_ros.nodes import clock_master, driver, recorder, sim_bridge
    from simforge_ros.record import bag

    totals: _Totals = collections.defaultdict(lambda: [0, 0])
    for owner, name, key in (
        (rclpy.publisher.Publisher, "publish", "publish"),
        (rclpy.client.Client, "call_async", "call_async"),
        (rclpy.service.Service, "send_response", "send_response"),
        (clock_master, "spin_future", "executor wait (spin_future)"),
        (sim_bridge.SimBridge, "_on_step", "bridge handler"),
        (driver.Driver, "_on_decide_now", "driver handler"),  # a policy without cameras (the route follower)
        (recorder.Recorder, "_on_message", "recorder handler"),
        (bag.BagWriter, "write", "bag writer thread"),
    ):
        _wrap(owner, name, key, totals)
    for rnd in range(rounds):
        for record in (True, False):
            totals.clear()
            out = run_loop("single", cameras, record, steps)
            per_step = out["per_step_us"]
            print(f"round {rnd}, recorder {'on' if record else 'off'}: step median {per_step['median']:,.0f} µs, "
                  f"mean {per_step['mean']:,.0f} µs ({out['status']})")
            for key, (ns, calls) in sorted(totals.items()):
                print(f"  {key:<30} {ns / steps / 1000:>9,.0f} µs a step ({calls / steps:.1f} calls)")


def feed(steps: int, rounds: int) -> None:
    import os

    from rosbags.rosbag2 import Reader

    from simforge_ros.benchmarks.recorder import feed_recorder
    from simforge_ros.isolation import lease_domain
    from simforge_ros.record import bag
    from simforge_ros.runner import RunSpec, run

    with tempfile.TemporaryDirectory(prefix="simforge-breakdown-") as tmp:
        spec = RunSpec(scenario="right_turn", out_dir=Path(tmp) / "cam4", run_id="cam4", steps=steps,
                       layout="single", sets={"sim_bridge": {"cameras": ["front", "left", "rear", "right"]}})
        result = run(spec)
        if result.status != "counted":
            sys.exit(f"the four-camera run was refused: {result.refusal}")
        with Reader(spec.out_dir / "bag") as reader:
            messages = [(conn.topic, bytes(raw)) for conn, _t, raw in reader.messages()]

        shipped = {name: getattr(bag.BackgroundBagWriter, name)
                   for name in ("open", "write", "flush", "checkpoint", "close")}

        def inline_close(self: Any) -> None:
            if self._open:
                self._open = False
                self._bag.close()

        def inline_open(self: Any) -> None:
            self._bag.open()
            self._open = True

        def nothing_open(self: Any) -> None:
            self._open = True

        modes: dict[str, dict[str, Callable[..., None]]] = {
            "writer thread (as shipped)": shipped,
            "written in the handler": {
                "open": inline_open, "write": lambda self, *item: self._bag.write(*item),
                "flush": lambda self: None, "checkpoint": lambda self: self._bag.checkpoint(), "close": inline_close},
            "not written": {
                "open": nothing_open, "write": lambda self, *item: None, "flush": lambda self: None,
                "checkpoint": lambda self: None, "close": lambda self: None},
        }
        times: dict[str, list[float]] = {mode: [] for mode in modes}
        with lease_domain() as lease:  # the recorder nodes below: an isolated domain
            os.environ.update(lease.env)
            for rnd in range(rounds):
                order = list(modes) if rnd % 2 == 0 else list(reversed(modes))
                for mode in order:
                    for name, method in modes[mode].items():
                        setattr(bag.BackgroundBagWriter, name, method)
                    out_dir = Path(tmp) / f"feed-{rnd}-{order.index(mode)}"
                    elapsed, chained = feed_recorder(messages, out_dir)
                    times[mode].append(elapsed / 1000 / max(chained, 1))
        for name, method in shipped.items():
            setattr(bag.BackgroundBagWriter, name, method)
    print(f"{len(messages)} messages of a {steps}-step four-camera run, fed to a recorder's handler "
          f"({rounds} rounds, median):")
    for mode, values in times.items():
        print(f"  {mode:<28} {statistics.median(values):>7,.0f} µs a step  "
              f"({' '.join(f'{v:.0f}' for v in values)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("loop", "feed"))
    parser.add_argument("--steps", type=int, default=None, help="default: 3000 (loop), 150 (feed)")
    parser.add_argument("--rounds", type=int, default=None, help="default: 2 (loop), 6 (feed)")
    parser.add_argument("--cameras", default="", help="loop only: comma-separated, e.g. front,left,rear,right")
    args = parser.parse_args()
    if args.what == "loop":
        cameras = tuple(c for c in args.cameras.split(",") if c)
        loop(args.steps or 3000, args.rounds or 2, cameras)
    else:
        feed(args.steps or 150, args.rounds or 6)


if __name__ == "__main__":
    main()
