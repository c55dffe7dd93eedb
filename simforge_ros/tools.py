"""What every `simforge` tool does with its command line and its errors: argparse's own
exit code for a bad command line (0 for --help), and bad input said in one line on
stderr, named by the tool, never a traceback."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simforge_ros.core.errors import EXIT_USAGE
from simforge_ros.record.rundir import MANIFEST, STEPS


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code to return now (--help: 0, a bad option: 2)."""
    try:
        return parser.parse_args(argv)
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE


def say(tool: str, err: BaseException | str) -> None:
    """``err`` (an error or what to say) as one line on stderr: "simforge TOOL: ...";
    a configuration error a line per problem, as `simforge run` prints them (run together,
    several problems read as one)."""
    from simforge_ros.core.errors import ConfigError

    lines = [str(p) for p in err.problems] if isinstance(err, ConfigError) else [str(err)]
    for line in lines:
        print(f"simforge {tool}: {line.replace(chr(10), ' ')}", file=sys.stderr)


def out_dir_problem(text: str) -> str | None:
    """Why ``text`` (an --out option) cannot be the directory a tool writes into, or None
    when it can: it is then created (with its parents). An empty --out named no directory,
    and runs were written into the current one unasked."""
    if not text:
        return "an empty name names none; . is the current directory"
    kept = kept_run_around(Path(text))
    if kept is not None:  # `--out runs/R/logs` wrote a new run into R
        return f"it is in the kept run {kept}, which is never changed"
    try:
        Path(text).mkdir(parents=True, exist_ok=True)
        if not os.access(text, os.W_OK):
            if os.statvfs(text).f_flag & os.ST_RDONLY:  # access() says no for a read-only mount too
                return "Read-only file system"
            raise PermissionError(13, "Permission denied")
    except FileExistsError:  # mkdir's own "File exists" read as if a directory were fine
        return "a file of that name is there, not a directory"
    except OSError as err:
        return err.strerror or type(err).__name__
    return None


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value).replace("nan", "NaN").replace("inf", "Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def json_text(value: Any, sort_keys: bool = False) -> str:
    """A tool's --json object: a number that is no JSON number (a NaN or an infinity in a
    tampered steps.jsonl) written as the string "NaN", "Infinity" or "-Infinity"; Python's
    json wrote a bare NaN, which no JSON parser reads."""
    return json.dumps(_finite(value), sort_keys=sort_keys, allow_nan=False)


def given_twice(paths: Sequence[Path]) -> tuple[Path, Path] | None:
    """Two of ``paths`` that are one directory (``runs/a``, ``runs/a/``, ``./runs/a``, a link
    to it), or None. `simforge spread runs/a runs/a/` found a noise floor of 0 in one run."""
    seen: dict[tuple[int, int], Path] = {}
    for path in paths:
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            continue  # loading it says what is wrong with it
        key = (info.st_dev, info.st_ino)
        if key in seen:
            return seen[key], path
        seen[key] = path
    return None


def kept_run_around(path: Path) -> Path | None:
    """The run directory (one with a manifest.json or a steps.jsonl) ``path`` is, or is in;
    None when there is none (or the path cannot be looked up: whoever uses it says why)."""
    try:
        here = Path(os.path.abspath(path)).resolve()
        for folder in (here, *here.parents):
            if (folder / MANIFEST).is_file() or (folder / STEPS).is_file():
                return folder
    except (OSError, RuntimeError):  # a name too long, a loop of symbolic links
        return None
    return None


class StepLine:
    """One progress line on stderr, "LABEL: step K/N", rewritten in place, for a tool that
    may take minutes (verifying or playing a long camera run); nothing when ``shown`` is
    false (stderr not a terminal: a script's or a test's output stays its own lines)."""

    def __init__(self, label: str, shown: bool) -> None:
        self.label, self.shown = label, shown
        self._last: int | None = None

    def __call__(self, k: int, total: int) -> None:
        if self.shown and k != self._last:
            self._last = k
            print(f"\r{self.label}: step {k}/{total}", end="", file=sys.stderr, flush=True)

    def clear(self) -> None:
        """Take the line away, before anything else is said."""
        if self.shown and self._last is not None:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
        self._last = None


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def stop_on_signals() -> None:
    """Make SIGTERM and SIGHUP end a tool as Ctrl-C does (its "interrupted" line and exit
    status 130), so that its node and rclpy are shut down. Called at the tool's start and
    before rclpy.init, whose handler shuts the context down on SIGTERM and then calls this
    one: without it, the tool's next rclpy call failed on the dead context and the tool said
    "unexpected error: RCLError: ... context is invalid"; a SIGHUP (the terminal closed)
    ended it at once, its teardown never run."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:  # `nohup simforge play ...` keeps playing
            signal.signal(sig, _interrupt)


def rclpy_signal_options() -> Any:
    """rclpy.init's signal_handler_options for a tool: rclpy's handlers shut the context
    down, so none for a signal this process ignores. `simforge play &` from a script (its
    SIGINT ignored, as a shell leaves a background job's) took a SIGINT, kept going on a
    dead context, and blamed a reader: "publishing on /clock failed (... context is
    invalid); a reliable reader is not taking messages", exit 1."""
    import signal

    from rclpy.signals import SignalHandlerOptions

    ignored = {sig for sig in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(sig) is signal.SIG_IGN}
    if ignored == {signal.SIGINT, signal.SIGTERM}:
        return SignalHandlerOptions.NO
    # (rclpy's type stub spells these two SigInt and SigTerm; the module has SIGINT and SIGTERM)
    if signal.SIGINT in ignored:
        return SignalHandlerOptions.SIGTERM  # type: ignore[attr-defined]
    if signal.SIGTERM in ignored:
        return SignalHandlerOptions.SIGINT  # type: ignore[attr-defined]
    return SignalHandlerOptions.ALL
