"""Room held on the run's disk for the end of a run that fills it.

A disk that fills up mid-run stops the record where it filled (the recorder's failure is
the run's refusal). What the run still has to write then is small but essential: the
last step records still buffered, the manifest that says why the record stops, the
clock master's outcome line in its log. With no byte free, none of it was written: the
run kept one record fewer than it had chained, no manifest, and `simforge salvage` told
of a killed recorder. The recorder writes this file as its first act and deletes it as
its last, before the records and the manifest are written out: a full disk then still has
this much room for them.

On a copy-on-write file system (btrfs) the room given back holds data, but creating the
manifest's file also needs metadata room, which may be gone: there the run's line and
steps.jsonl still say how it ended and what was kept, and salvage is told of a killed
recorder.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

RESERVE = ".reserved-room"
"""In the run directory while the recorder runs. One a killed recorder left is removed by
`simforge run` (processes layout), and read by no tool."""
RESERVE_BYTES = 256 * 1024
"""A four-camera manifest is about 10 KB, a node's last lines a few hundred bytes, and
steps.jsonl's unwritten buffer at most 8 KB."""


class RoomReserve:
    """The reserve file: held (written out in full) or not; released once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.held = False

    def hold(self, size: int = RESERVE_BYTES) -> RoomReserve:
        """Write the reserve; a disk without that much room holds none (the run's record
        then fails at its first write, as it would have)."""
        try:
            handle = self.path.open("xb")  # never someone else's file
        except OSError:
            return self
        try:
            with handle:  # not zeros: a compressing file system (btrfs compress=zstd) kept 8 KB of them
                handle.write(os.urandom(size))
            self.held = True
        except OSError:  # what of it was written goes back
            with contextlib.suppress(OSError):
                self.path.unlink(missing_ok=True)
        return self

    def release(self) -> None:
        """Give the room back to the disk (never raises)."""
        if self.held:
            with contextlib.suppress(OSError):
                self.path.unlink(missing_ok=True)
        self.held = False
