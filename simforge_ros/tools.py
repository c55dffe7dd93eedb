"""What every `simforge` tool does with its command line and its errors: argparse's own
exit code for a bad command line (0 for --help), and bad input said in one line on
stderr, named by the tool, never a traceback."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from simforge_ros.core.errors import EXIT_USAGE


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code to return now (--help: 0, a bad option: 2)."""
    try:
        return parser.parse_args(argv)
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE


def say(tool: str, err: BaseException | str) -> None:
    """``err`` (an error or what to say) as one line on stderr: "simforge TOOL: ..."."""
    print(f"simforge {tool}: {str(err).replace(chr(10), ' ')}", file=sys.stderr)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def stop_on_sigterm() -> None:
    """Make SIGTERM end a tool as Ctrl-C does (its "interrupted" line and exit status).
    Called before rclpy.init, whose handler shuts the context down on SIGTERM and then
    calls this one: without it, the tool's next rclpy call failed on the dead context and
    the tool said "unexpected error: RCLError: ... context is invalid"."""
    import signal

    signal.signal(signal.SIGTERM, _interrupt)
