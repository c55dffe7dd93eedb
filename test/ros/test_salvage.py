"""`simforge salvage` keeps only what the kept record vouches for: a bag whose bytes were
changed, one that holds no step of the run, a steps.jsonl that verify would reject and an
input it cannot read are each refused with one line, and nothing is written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from runs import lockstep, simforge

from simforge_ros import topics
from simforge_ros.record.bag import read_bag

pytestmark = pytest.mark.ros

DECISION_NS = 100_000_000  # right_turn's step


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One short right_turn run with two cameras (three MCAP chunks), recorded whole."""
    result = lockstep(tmp_path_factory.mktemp("runs"), steps=5, layout="single")
    assert result.status == "counted" and result.steps == 5
    return Path(result.run_dir)


@pytest.fixture
def killed(finished: Path, tmp_path: Path) -> Path:
    """A copy of the run as a killed recorder leaves it: no manifest."""
    run = tmp_path / "killed"
    shutil.copytree(finished, run)
    (run / "manifest.json").unlink()
    return run


def _refused(run: Path, code: int = 1) -> str:
    out = simforge("salvage", str(run), cwd=run.parent)
    assert out.returncode == code, (out.stdout, out.stderr)
    assert not run.with_name(run.name + "-salvaged").exists()
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    return out.stderr


def _flip_in_message(run: Path, topic: str, step: int, at: int) -> None:
    """Flip the low bit of the byte ``at`` (from its end, when negative) of the bytes of
    step ``step``'s message on ``topic``, in the bag file itself."""
    (item,) = [m for m in read_bag(run / "bag") if m.topic == topic and m.t_ns == step * DECISION_NS]
    path = run / "bag" / "bag.mcap"
    blob = bytearray(path.read_bytes())
    start = blob.find(item.raw)
    assert start >= 0 and blob.find(item.raw, start + 1) < 0
    blob[start + (at % len(item.raw))] ^= 0x01
    path.write_bytes(bytes(blob))


def test_a_flipped_bit_in_a_frame_is_refused_naming_the_step_and_camera(killed):
    """The step chain hashes no pixel: a bag whose image bytes had changed chained to the
    kept digests and was salvaged, and the salvaged run (its own steps.jsonl made from
    the changed bag) then passed verify."""
    _flip_in_message(killed, topics.image_topic("front"), 1, -1000)  # a pixel of step 1's front frame
    said = _refused(killed)
    assert "step 1: field frames.front: the bag gives '" in said and "the bag and the record disagree" in said


def test_a_flipped_bit_in_a_state_message_is_refused_naming_the_field(killed):
    _flip_in_message(killed, topics.STATE, 2, -1)
    said = _refused(killed)
    assert "step 2: field state." in said, said
