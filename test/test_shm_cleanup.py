"""Shared-memory leftovers of killed Fast DDS participants are found and removed; files in
use, files from before the lease and files being created right now are left alone."""

from __future__ import annotations

import fcntl
import os
import time

from simforge_ros.shm_cleanup import MIN_AGE_S, remove_zombies, zombie_files


def _make(shm, base: str, mtime: float, port: bool = False) -> list:
    files = [shm / f"{base}_el", shm / base] + ([shm / f"sem.{base}_mutex"] if port else [])
    for f in files:
        f.write_bytes(b"")
        os.utime(f, (mtime, mtime))
    return files


def test_only_unlocked_files_of_this_lease_that_are_not_brand_new_go(tmp_path):
    since = time.time() - 60
    zombie = _make(tmp_path, "fastdds_0123456789abcdef", since + 10)
    port = _make(tmp_path, "fastdds_port7411", since + 10, port=True)
    live = _make(tmp_path, "fastdds_fedcba9876543210", since + 10)
    before = _make(tmp_path, "fastdds_00000000000000aa", since - 10)  # from before the lease
    fresh = _make(tmp_path, "fastdds_00000000000000bb", time.time())  # maybe being created
    other = tmp_path / "not_fastdds_el"
    other.write_bytes(b"")
    with live[0].open("ab") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what a live participant does
        found = set(zombie_files(since, tmp_path))
        assert found == set(zombie + port)
        assert remove_zombies(since, tmp_path) == 5
    assert not any(f.exists() for f in zombie + port)
    assert all(f.exists() for f in live + before + fresh) and other.exists()
    # the fresh one goes too once it is older than the creation margin and still unlocked
    assert set(zombie_files(since, tmp_path, now=time.time() + MIN_AGE_S + 1)) >= set(fresh)


def test_a_missing_directory_finds_nothing(tmp_path):
    assert zombie_files(0.0, tmp_path / "absent") == [] and remove_zombies(0.0, tmp_path / "absent") == 0
