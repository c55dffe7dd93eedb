"""`simforge pause [--resume | --step]`: hold a running run before its next step, let it go
on, or let a held run do one more step.

What `ros2 service call /simforge/pause std_srvs/srv/SetBool "{data: true}"` (and
`/simforge/advance std_srvs/srv/Trigger`) does on a full ROS 2 install, for a machine with
the PyPI wheels only (no ros2cli). It joins the run's
ROS_DOMAIN_ID (from the environment: `simforge run` names it when a run starts held; or
read from the run's directory, --run, where `simforge run` keeps it while the run goes on) with
the localhost discovery the run's nodes use, calls the clock master's service once, and
prints its answer. Holding touches the wall clock only: the run's steps and digests are
the same (README, "Watching a run live, holding it").
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simforge_ros import topics
from simforge_ros.command import INTERRUPTED
from simforge_ros.core.errors import EXIT_FAILURE, EXIT_USAGE, ConfigError
from simforge_ros.isolation import MAX_DOMAIN_ID, check_rmw, domain_holder, tool_discovery_range, user_domain
from simforge_ros.record.rundir import DOMAIN, MANIFEST, holds_run
from simforge_ros.tools import parse, rclpy_signal_options, say, stop_on_signals

_LOOK_S = 0.25  # wall clock: how often a wait looks whether the run (--run) has ended


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simforge pause",
        description=f"Hold a running run before its next step ({topics.PAUSE_SERVICE}, std_srvs/SetBool), "
                    f"with --resume let it go on, with --step let a held one do one step ({topics.ADVANCE_SERVICE}, "
                    "std_srvs/Trigger); in the ROS_DOMAIN_ID of the environment, localhost.",
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--resume", action="store_true", help="let a held run go on")
    what.add_argument("--step", action="store_true", help="let a held run do one more step, then hold again")
    parser.add_argument("--run", default=None, metavar="RUN_DIR",
                        help="the running run's directory: its ROS domain is read there (in place of ROS_DOMAIN_ID)")
    parser.add_argument("--wait-s", type=float, default=10.0,
                        help="how long to wait for the run's clock master, in seconds (default 10)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 when the clock master took the call, 1 when no run answered or it had ended,
    2 on bad usage or environment, 130 when interrupted (Ctrl-C, SIGTERM, SIGHUP)."""
    args = parse(build_parser(), argv)
    if isinstance(args, int):
        return args
    stop_on_signals()  # from here on a stop signal is said and exits as Ctrl-C does
    try:
        if not (args.wait_s > 0 and args.wait_s < float("inf")):
            raise ConfigError.single("--wait-s", "wait_s", "a number of seconds > 0", args.wait_s)
        if args.run is not None:
            domain_id = _domain_of(Path(args.run))
        else:
            text = os.environ.get("ROS_DOMAIN_ID", "").strip()
            if not text:
                raise ConfigError.single("environment", "ROS_DOMAIN_ID", "the run's domain (simforge run names it "
                                         "when a run starts held; set it for the run to choose it; or --run "
                                         "RUN_DIR)", "unset")
            domain_id = user_domain(text)
        check_rmw()
        tool_discovery_range()
    except ConfigError as err:
        say("pause", err)
        return EXIT_USAGE
    return _call(domain_id, "step" if args.step else "resume" if args.resume else "hold", args.wait_s,
                 None if args.run is None else Path(args.run))


def _domain_of(run: Path) -> int:
    """The ROS domain a running run's nodes are in, from its directory (runner writes it).

    Raises:
        ConfigError: not the directory of a run started by `simforge run`, or one that ended.
    """
    if (run / MANIFEST).exists():
        raise ConfigError.single("--run", "run", "the directory of a run still going on (this one has ended: "
                                 f"its {MANIFEST} is written)", str(run))
    try:
        path = run / DOMAIN
        if path.exists() and not path.is_file():  # a FIFO there: read_text waited forever
            raise OSError(0, "not a regular file")
        with path.open("rb") as handle:
            text = handle.read(64).decode(errors="replace").strip()
        domain_id = user_domain(text)
    except OSError as err:
        raise ConfigError.single("--run", "run", f"the directory of a run `simforge run` started ({DOMAIN}: "
                                 f"{err.strerror or err})", str(run)) from None
    except ConfigError:  # user_domain words it as the environment's ROS_DOMAIN_ID, which it is not
        raise ConfigError.single("--run", "run", f"the directory of a run `simforge run` started ({DOMAIN}: "
                                 f"expected a domain from 0 to {MAX_DOMAIN_ID}, got {text!r})", str(run)) from None
    gone = _not_its_domain(run, domain_id)
    if gone is not None:
        raise ConfigError.single("--run", "run", f"the directory of a run still going on ({gone})", str(run))
    return domain_id


def _not_its_domain(run: Path, domain_id: int) -> str | None:
    """Why ``domain_id`` is no longer the run's (None: it is). A run killed before its
    manifest leaves its directory as it was, and the domain may be another run's by now
    (an audit held an unrelated run that way)."""
    holder = domain_holder(domain_id)
    if holder is None:
        return (f"no run holds its ROS_DOMAIN_ID={domain_id}: it was stopped before writing its {MANIFEST}; "
                "`simforge salvage` keeps what it recorded")
    if not holds_run(holder, run):
        return f"its ROS_DOMAIN_ID={domain_id} is now {holder}'s"
    return None


def _ended(domain_id: int, run: Path | None) -> str | None:
    """Why the run this call is for has ended meanwhile (None: not that we know). A call
    racing a run's end waited out --wait-s and then blamed the service."""
    if run is None:
        return None
    if (run / MANIFEST).exists():
        return f"the run ended meanwhile (its {MANIFEST} is written)"
    gone = _not_its_domain(run, domain_id)
    return None if gone is None else f"the run ended meanwhile ({gone})"


def _why_unseen(domain_id: int) -> str:
    """Why no clock master offered its pause service in ``domain_id``. A run's clock master
    stopped (SIGSTOP, Ctrl-Z, a debugger) cannot answer discovery either, and the run that
    held the domain was said not to be going on."""
    holder = domain_holder(domain_id)
    if holder is None:
        return "no run is going on there"
    if holder.startswith("simforge run "):
        return (f"{holder} holds that domain, but its clock master did not answer: it is stopped (SIGSTOP, "
                "Ctrl-Z, a debugger), overloaded or still starting; nothing was changed")
    return f"{holder} holds that domain, not a run"


def _call(domain_id: int, what: str, wait_s: float, run: Path | None = None) -> int:
    import rclpy
    from rclpy.node import Node
    from std_srvs.srv import SetBool, Trigger

    stop_on_signals()
    rclpy.init(args=None, domain_id=domain_id, signal_handler_options=rclpy_signal_options())
    try:
        node = Node("simforge_pause")
        service = topics.ADVANCE_SERVICE if what == "step" else topics.PAUSE_SERVICE
        client: Any = node.create_client(Trigger if what == "step" else SetBool, service)
        found_by = time.monotonic() + wait_s
        while not client.wait_for_service(timeout_sec=min(_LOOK_S, max(0.0, found_by - time.monotonic()))):
            if (ended := _ended(domain_id, run)) is not None:
                say("pause", ended)
                return EXIT_FAILURE
            if time.monotonic() >= found_by:
                say("pause", f"no {service} in ROS_DOMAIN_ID={domain_id} within {wait_s:g} s: {_why_unseen(domain_id)}")
                return EXIT_FAILURE
        # An answer can be lost while discovery is still matching the service's endpoints
        # (see ClockMaster._call): unanswered, the request goes again after 1 s, then 2, ...
        # Asking twice is harmless for hold and resume: the clock master is held or not, as
        # the last call says. A step asked twice could be two steps: it is not sent again.
        request = Trigger.Request() if what == "step" else SetBool.Request(data=what == "hold")
        wall_deadline = time.monotonic() + wait_s
        resend_s = 1.0
        sent = [client.call_async(request)]
        sent_at = time.monotonic()
        while True:
            left_s = max(0.0, wall_deadline - time.monotonic())
            rclpy.spin_until_future_complete(node, sent[-1], timeout_sec=min(resend_s, left_s, _LOOK_S))
            future = next((f for f in sent if f.done()), sent[-1])
            if future.done() or time.monotonic() >= wall_deadline:
                break
            if (ended := _ended(domain_id, run)) is not None:
                say("pause", ended)
                return EXIT_FAILURE
            if time.monotonic() < sent_at + resend_s:
                continue
            if what == "step":
                continue
            sent.append(client.call_async(request))
            sent_at = time.monotonic()
            resend_s *= 2
        if not future.done():
            say("pause", f"no answer from {service} within {wait_s:g} s")
            return EXIT_FAILURE
        answer: Any = future.result()
        if not answer.success:
            say("pause", answer.message)
            return EXIT_FAILURE
        print(answer.message, flush=True)
        return 0
    except KeyboardInterrupt:
        say("pause", "interrupted")
        return INTERRUPTED
    finally:
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
