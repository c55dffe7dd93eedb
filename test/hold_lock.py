"""What rclpy's teardown was seen to do (the main thread in EventsExecutor.shutdown, in C++,
the interpreter lock held, forever), for tests of the watchdog that still ends such a node.

Importable by a test process (its own directory is on sys.path) and by node processes a
test starts (through a sitecustomize module that puts this directory on theirs)."""

from __future__ import annotations

import ctypes
import signal


def hold_interpreter_lock() -> None:
    """Stop in C with the interpreter lock held, every signal but SIGALRM (the watchdog's,
    process_tuning.TEARDOWN_SIGNAL) blocked: only that signal, or SIGKILL, ends it."""
    libc = ctypes.CDLL(None, use_errno=True)
    mask = ctypes.create_string_buffer(1024)  # larger than any sigset_t
    libc.sigfillset(mask)
    libc.sigdelset(mask, int(signal.SIGALRM))
    ctypes.PyDLL(None).sigsuspend(mask)  # a PyDLL function keeps the lock through the call
