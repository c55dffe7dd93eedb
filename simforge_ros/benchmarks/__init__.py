"""Pieces of `simforge bench`: statistics, the transport floor, loop runs, hashing, engine."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

_SCRATCH: set[Path] = set()


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A temporary directory of the bench, removed after its block, and by ``remove_scratch``
    when the bench is ended at once (its deadline, a stop signal: os._exit skips every
    ``finally``, and each stopped bench left its runs and logs in /tmp)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    _SCRATCH.add(path)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        _SCRATCH.discard(path)


def remove_scratch() -> None:
    """Remove every scratch directory still there (the bench is about to end at once)."""
    for path in list(_SCRATCH):
        shutil.rmtree(path, ignore_errors=True)
