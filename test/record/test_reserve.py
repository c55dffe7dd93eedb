"""record.reserve: the room the recorder holds for the end of a run that fills its disk,
and record.rundir.kept_chain: what a steps.jsonl keeps when not all that was chained is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simforge_ros.core.digest import GENESIS
from simforge_ros.record.reserve import RESERVE_BYTES, RoomReserve
from simforge_ros.record.rundir import kept_chain


def test_the_reserve_holds_its_bytes_until_released(tmp_path: Path) -> None:
    reserve = RoomReserve(tmp_path / ".reserved-room").hold()
    assert reserve.held and reserve.path.stat().st_size == RESERVE_BYTES
    reserve.release()
    assert not reserve.held and not reserve.path.exists()
    reserve.release()  # twice: nothing to give back, no error


def test_a_reserve_that_cannot_be_written_is_not_held_and_leaves_nothing(tmp_path: Path) -> None:
    reserve = RoomReserve(tmp_path / "no-such-dir" / ".reserved-room").hold()
    assert not reserve.held and not reserve.path.exists()


def test_an_existing_file_is_never_taken_for_the_reserve(tmp_path: Path) -> None:
    path = tmp_path / ".reserved-room"
    path.write_text("someone's")
    reserve = RoomReserve(path).hold()
    reserve.release()
    assert not reserve.held and path.read_text() == "someone's"  # neither overwritten nor removed


def _record(step: int, frames: str | None) -> dict[str, object]:
    return {"step": step, "t_us": step * 100_000, "digest": f"{step:064x}", "frames_digest": frames, "frames": {},
            "timing": {}, "action": {}, "applied": {}, "state": {}, "wall": {}}


@pytest.mark.parametrize("cut", [False, True])
def test_kept_chain_is_the_complete_records(tmp_path: Path, cut: bool) -> None:
    steps = tmp_path / "steps.jsonl"
    lines = [json.dumps(_record(0, "a" * 64)), json.dumps(_record(1, None)), json.dumps(_record(2, None))]
    steps.write_text("\n".join(lines) + ("" if cut else "\n"))  # cut: the last line never finished
    kept = kept_chain(steps)
    count = 2 if cut else 3
    assert (kept.steps, kept.chain_digest, kept.frames_digest) == (count, f"{count - 1:064x}", "a" * 64)
    assert kept.last is not None and kept.last["step"] == count - 1


def test_kept_chain_of_nothing_is_the_empty_chain(tmp_path: Path) -> None:
    for path in (tmp_path / "missing.jsonl", tmp_path / "empty.jsonl"):
        if path.name == "empty.jsonl":
            path.write_text("")
        kept = kept_chain(path)
        assert (kept.steps, kept.chain_digest, kept.frames_digest, kept.last) == (0, GENESIS.hex(), None, None)
