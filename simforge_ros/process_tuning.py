"""Process-wide settings every simforge process applies: the allocator and the collector.

**malloc.** A camera frame is rendered through numpy temporaries of 0.2-1.4 MB and travels
as 173 KB byte buffers. With glibc's defaults such blocks are mmap()ed and munmap()ed (or
the heap top trimmed) on every use, so every step touches fresh pages: measured here, a
fresh process rendering four 320x180 cameras took ~3 200 minor page faults and 12.7 ms a
step, against ~0 faults and 6.7 ms with the thresholds below (same frames). The blocks are
reused, not accumulated: memory stays flat.

**gc.** A node allocates many small containers a step (messages, dicts, futures), so
Python's cyclic collector runs often, and its older generations walk every object the
process holds (rclpy, numpy, the rosbags typestore...): py-spy put a quarter of the
recorder's time in gc_collect_main. ``freeze_startup`` moves what exists once a node is
built into the permanent generation (never scanned again), and the young-generation
threshold is raised so the per-step garbage is swept in larger, rarer batches.

**signals.** `simforge run` starts each node with the stop signals blocked, and the node
takes them once its handlers are in place (``HELD_SIGNALS``).

**the launcher.** The nodes run in sessions of their own, so a `simforge run` killed
outright (SIGKILL, the OOM killer) can pass nothing on: its nodes used to run the run to
its end, unwatched. A node it started watches it instead (``watch_launcher``).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 << 20  # the largest value glibc accepts on 64-bit
TRIM_THRESHOLD_BYTES = 128 << 20
GC_THRESHOLDS = (20_000, 20, 20)  # CPython's defaults: (700, 10, 10)


def tune_malloc() -> bool:
    """Raise glibc's mmap and trim thresholds for this process; False where the C library
    has no mallopt (not glibc) or refuses the values (nothing is changed then)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )


DEPENDENCY_DEPRECATIONS = (r"module 'sre_parse' is deprecated", r"module 'sre_constants' is deprecated")
"""Deprecation warnings of the ROS wheels' own imports (rosidl's parser imports lark, which
imports sre_parse when rclpy loads a message's type support): not ours to mend."""


def tolerate_dependency_warnings() -> None:
    """Let the dependencies' deprecations (DEPENDENCY_DEPRECATIONS) pass under
    PYTHONWARNINGS=error or -W error, which a strict CI sets: every run died of the first
    ("unexpected error: DeprecationWarning: module 'sre_parse' is deprecated", or refused
    participant_error at step -1 in the processes layout). Every other warning stays an
    error there."""
    import warnings

    for message in DEPENDENCY_DEPRECATIONS:
        warnings.filterwarnings("ignore", message=message, category=DeprecationWarning)


def tune_process() -> bool:
    """What a simforge process does first: malloc thresholds and gc thresholds, and the
    dependencies' deprecations let pass. Returns whether the malloc part applied (the gc
    part always does)."""
    tolerate_dependency_warnings()
    gc.set_threshold(*GC_THRESHOLDS)
    return tune_malloc()


STACKS_SIGNAL = signal.SIGUSR1
"""What `simforge run` sends a node process still running past the run's end, before it
stops it: the node writes every thread's stack to its log (dump_stacks_on_signal)."""


def dump_stacks_on_signal() -> None:
    """Write every thread's Python stack to stderr (a node's log) on STACKS_SIGNAL. A node
    that missed the run's end was stopped with an empty log, and where it was stuck was
    lost (a full suite's sim_bridge, once in some hundred runs)."""
    import faulthandler

    faulthandler.register(STACKS_SIGNAL, file=sys.stderr, all_threads=True)


def freeze_startup() -> None:
    """Once the nodes are built: collect, then keep every object alive now out of all
    later collections (they live as long as the run; a process that goes on after the
    run calls gc.unfreeze())."""
    gc.collect()
    gc.freeze()


TEARDOWN_CUT = "teardown did not finish within"
"""How a node's log says its teardown watchdog's timer ended it (nodes.common.exit_if_stuck)."""

TEARDOWN_SIGNAL = signal.SIGALRM
"""What ends a node process whose teardown hung holding the interpreter lock (end_after):
its exit status is -TEARDOWN_SIGNAL, which `simforge run` reads as that and nothing else."""


_ARMED = [False]  # end_after's handler is in place: a watch nested in a longer one keeps it


def end_after(seconds: float) -> None:
    """End this process by TEARDOWN_SIGNAL after ``seconds``, every thread's Python stack
    written to stderr first.

    No Python runs on the way, so it works where exit_after cannot: rclpy's teardown was
    seen stuck in C++ with the interpreter lock held (the main thread in
    EventHandler.__exit__ under EventsExecutor.shutdown), and exit_after's timer thread,
    which needs that lock to run, never ran. The kernel's interval timer raises the signal;
    faulthandler's handler (C) writes the stacks and re-raises it with its default action,
    which ends the process."""
    import faulthandler

    if not _ARMED[0]:  # armed already (a watch nested in a longer one): its handler stays
        signal.signal(TEARDOWN_SIGNAL, signal.SIG_DFL)  # what faulthandler's handler chains to
        faulthandler.register(TEARDOWN_SIGNAL, file=_stderr_with_fd(), all_threads=True, chain=True)
        _ARMED[0] = True
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _stderr_with_fd() -> Any:
    """sys.stderr, or the process's own where it was replaced by an object with no file
    descriptor (a test's capture), which faulthandler cannot write to."""
    try:
        sys.stderr.fileno()
        return sys.stderr
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__


@contextlib.contextmanager
def ended_if_stuck(seconds: float) -> Iterator[None]:
    """end_after for a stretch of a process that goes on after it (the `single` layout's
    teardown, in the process that ran the run; a whole bench): past ``seconds`` the
    process ends with its stacks written, instead of hanging for good; done in time, the
    timer is disarmed and what was there before put back: the signal's handling and any
    interval timer of the caller's own, or the longer watch this one is nested in. Outside
    the main thread, where no signal handler can be set, it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    import faulthandler

    previous = signal.getsignal(TEARDOWN_SIGNAL)
    outer = _ARMED[0]
    earlier_delay, earlier_interval = signal.getitimer(signal.ITIMER_REAL)
    start = time.monotonic()
    end_after(seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if not outer:
            faulthandler.unregister(TEARDOWN_SIGNAL)
            signal.signal(TEARDOWN_SIGNAL, previous if previous is not None else signal.SIG_DFL)
            _ARMED[0] = False
        if earlier_delay > 0:
            signal.setitimer(signal.ITIMER_REAL, max(earlier_delay - (time.monotonic() - start), 1e-6),
                             earlier_interval)


def exit_after(seconds: float, code: int, last_words: Callable[[], None]) -> threading.Timer:
    """Leave the process with ``code`` after ``seconds`` unless the returned timer is
    cancelled; ``last_words`` runs first (say why, kill children).

    os._exit from a daemon thread: what it guards against (rclpy spinning forever in C
    code or in a loop during teardown) cannot be interrupted by an exception."""
    def _leave() -> None:
        last_words()
        os._exit(code)

    timer = threading.Timer(seconds, _leave)
    timer.daemon = True
    timer.start()
    return timer


HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals `simforge run` blocks while it starts a node (see runner._start_node): one
that comes before the node has its handlers stays pending until unblock_held_signals()."""


def unblock_held_signals() -> None:
    """Take the stop signals once this node's handlers are in place: one that came while the
    node started (held by the mask it inherited from `simforge run`) is delivered now, to
    them. Started otherwise (ros2 run, launch), nothing was held and this changes nothing."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD_SIGNALS)


LAUNCHER_ENV = "SIMFORGE_LAUNCHER_PID"
"""Set by `simforge run` for the nodes it starts: its own pid (see watch_launcher)."""
LAUNCHER_POLL_S = 0.2  # wall clock: how often a node looks for its launcher

OUTCOME_FD_ENV = "SIMFORGE_OUTCOME_FD"
"""Set by `simforge run` for the clock master it starts: a pipe's write end that the clock
master's outcome line also goes to. Its log is on the run's disk: a full disk kept the line
from the log, and a run refused at step 57 for that disk read "participant_error before
step 0"."""


def process_state(pid: int) -> str | None:
    """The state letter of local process ``pid`` in /proc (R, S, T: stopped, Z: a zombie,
    ...), or None where there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


STOPPED_FOR_ENV = "SIMFORGE_STOPPED_FOR"
"""Set by `simforge run` for the clock master it starts: a file that, once there, holds
the refusal the run is stopped for (a participant a signal ended before step 0) before
the clock master is told to stop; its final status then says that refusal, not
"aborted": the recorder keeps that status in the bag, which `verify` compares with the
manifest that says the same."""


def stopped_for(environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The refusal in the STOPPED_FOR_ENV file (``code``, ``step``, ``detail``), or None:
    no such file, or not one of those."""
    path = (os.environ if environ is None else environ).get(STOPPED_FOR_ENV, "")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            said = json.load(handle)
    except (OSError, ValueError):
        return None
    if (isinstance(said, dict) and isinstance(said.get("code"), str) and type(said.get("step")) is int
            and isinstance(said.get("detail"), str)):
        return said
    return None


def tell_outcome(line: str, environ: Mapping[str, str] | None = None) -> None:
    """Write ``line`` to the OUTCOME_FD_ENV pipe, if this process was given one."""
    raw = (os.environ if environ is None else environ).get(OUTCOME_FD_ENV, "")
    if not raw.isdigit():
        return
    data = (line + "\n").encode()
    with contextlib.suppress(OSError):  # the runner gone: nobody to tell
        while data:
            data = data[os.write(int(raw), data):]


def launcher_pid(environ: Mapping[str, str] | None = None) -> int | None:
    """The pid of the `simforge run` that started this process, or None (started by
    ros2 run, a launch file, a test)."""
    raw = (os.environ if environ is None else environ).get(LAUNCHER_ENV, "")
    return int(raw) if raw.isdigit() and int(raw) > 1 else None


def watch_launcher(on_gone: Callable[[], None], grace_s: float = 0.0,
                   poll_s: float = LAUNCHER_POLL_S) -> threading.Thread | None:
    """Call ``on_gone`` (from a daemon thread) ``grace_s`` after the `simforge run` that
    started this node is gone without having stopped it: this process then has another
    parent. Nothing is watched for a node started otherwise (returns None).

    The clock master takes it as a Ctrl-C at once (the run ends as aborted at its step,
    its record kept); a participant waits ``grace_s`` for that run's end first, so the
    recorder can confirm what it holds. Polled (``poll_s``) rather than
    PR_SET_PDEATHSIG, which fires when the parent *thread* ends and cannot wait.
    """
    launcher = launcher_pid()
    if launcher is None:
        return None

    def _watch() -> None:
        while os.getppid() == launcher:
            time.sleep(poll_s)
        time.sleep(grace_s)
        on_gone()

    thread = threading.Thread(target=_watch, name="simforge-launcher-watch", daemon=True)
    thread.start()
    return thread
