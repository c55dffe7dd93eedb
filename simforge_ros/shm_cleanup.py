"""Remove the shared-memory files Fast DDS leaves behind when a process dies without
closing its participant.

A Fast DDS participant keeps segments and ports in /dev/shm (RAM): 0.5-17 MB each. A
process that ends normally removes them; one that is killed (a `kill=` fault, a stuck
participant SIGKILLed at teardown, the bench's transport peer leaving with os._exit) does
not, and nothing else ever does: 300 such files (300 MB of RAM) had piled up on this
machine after 90 minutes of tests, benches and killed experiments. Fast DDS's own `fastdds shm clean` does this
sweep but needs psutil; the rule is the same: each segment or port has a lock file
(`..._el` / `..._sl`) that its live owner holds flock()ed, so an unlocked one is a zombie.

Only this user's files older than a moment are touched, never what another process is
still creating. Every lease sweeps them all when it ends, not only those that appeared
during it: a run whose `simforge run` was itself SIGKILLed never ended its lease, and
what its killed nodes left stayed in RAM for good (every later lease passed it over as
older than itself).
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from pathlib import Path

SHM_DIR = Path("/dev/shm")
_SEGMENT_LOCK = re.compile(r"^fastdds_[0-9a-z]{16}_(el|sl)$")
_PORT_LOCK = re.compile(r"^fastdds_port\d{1,5}_(el|sl)$")
MIN_AGE_S = 0.5  # wall clock: a lock file younger than this may be being created and locked


def _locked(lock_file: Path) -> bool:
    """Whether a live process holds the lock file (its segment or port is in use)."""
    try:
        with lock_file.open("ab") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when closed
    except BlockingIOError:
        return True
    except OSError:
        return True  # unreadable: not ours to judge
    return False


def _zombie_groups(since: float, shm_dir: Path, now: float | None, uid: int | None) -> list[list[Path]]:
    """Each zombie's files, its lock file first (see zombie_files)."""
    now = time.time() if now is None else now
    uid = os.getuid() if uid is None else uid
    try:
        names = os.listdir(shm_dir)
    except OSError:
        return []
    groups: list[list[Path]] = []
    for name in names:
        port = _PORT_LOCK.match(name)
        if not (port or _SEGMENT_LOCK.match(name)):
            continue
        lock_file = shm_dir / name
        try:
            stat = lock_file.stat()
        except OSError:
            continue
        created = stat.st_mtime
        if stat.st_uid != uid or created < since or now - created < MIN_AGE_S or _locked(lock_file):
            continue
        base = name[:-3]
        groups.append([lock_file, shm_dir / base] + ([shm_dir / f"sem.{base}_mutex"] if port else []))
    return groups


def zombie_files(since: float = 0.0, shm_dir: Path = SHM_DIR, now: float | None = None,
                 uid: int | None = None) -> list[Path]:
    """The files of Fast DDS segments and ports whose lock file appeared at or after
    ``since`` (time.time()), is older than MIN_AGE_S, belongs to ``uid`` (default: this
    process's user) and is held by no process."""
    return [path for group in _zombie_groups(since, shm_dir, now, uid) for path in group]


def remove_zombies(since: float = 0.0, shm_dir: Path = SHM_DIR) -> int:
    """Remove what zombie_files finds; returns how many files were removed. Each zombie's
    files go while its lock file is held here: a participant that opens the same port in
    the meantime (a new run in that domain) finds it taken, not its files gone under it."""
    removed = 0
    for group in _zombie_groups(since, shm_dir, None, None):
        try:
            handle = group[0].open("ab")
        except OSError:
            continue
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # taken since it was looked at: in use again
            for path in group:
                try:
                    path.unlink()
                    removed += 1
                except OSError:
                    pass  # gone already, or not ours to remove
    return removed
