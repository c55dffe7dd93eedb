from __future__ import annotations

import copy
import hashlib

import numpy as np
import pytest

from simforge_ros.core.canonical import encode, strip_wall
from simforge_ros.core.digest import (
    GENESIS,
    FramesChain,
    StepChain,
    frame_hash,
    frames_record_bytes,
    next_digest,
    step_record,
    step_record_bytes,
)


def record(k: int) -> dict[str, dict[str, object]]:
    return {
        "timing": {"step": k, "t_us": k * 100_000, "engine_t_us": k * 100_000, "wall_step_ns": 123 + k},
        "action": {"step": k, "decided_step": k, "steer_rad": 0.01 * k},
        "applied": {"step": k, "decided_step": max(0, k - 2), "steer_rad": 0.01 * max(0, k - 2)},
        "state": {"step": k, "pose": {"x_m": 1.0 * k, "y_m": 0.0, "yaw_rad": 0.0}, "speed_mps": 3.0},
    }


def run(records: list[dict[str, dict[str, object]]]) -> list[str]:
    chain = StepChain()
    return [chain.add(k, **r) for k, r in enumerate(records)]  # type: ignore[arg-type]


def test_empty_chain_is_genesis() -> None:
    chain = StepChain()
    assert chain.hexdigest == GENESIS.hex() == "0" * 64 and chain.steps == 0


def test_chain_matches_manual_sha256() -> None:
    r = record(0)
    chain = StepChain()
    got = chain.add(0, r["timing"], r["action"], r["applied"], r["state"])
    body = encode({"step": 0, "timing": strip_wall(r["timing"]), "action": r["action"],
                   "applied": r["applied"], "state": r["state"]})
    assert got == hashlib.sha256(GENESIS + body).hexdigest() == chain.hexdigest
    assert body == step_record_bytes(0, r["timing"], r["action"], r["applied"], r["state"])
    assert next_digest(GENESIS, body).hex() == got


def test_one_change_at_step_k_changes_k_and_after_not_before() -> None:
    base = [record(k) for k in range(10)]
    changed = copy.deepcopy(base)
    changed[4]["state"]["speed_mps"] = 3.0000000001
    a, b = run(base), run(changed)
    assert a[:4] == b[:4]
    assert all(x != y for x, y in zip(a[4:], b[4:], strict=True))


def test_wall_fields_never_enter_the_digest() -> None:
    base = [record(k) for k in range(3)]
    changed = copy.deepcopy(base)
    changed[1]["timing"]["wall_step_ns"] = 99_999_999
    assert run(base) == run(changed)


def test_a_step_record_kept_by_the_caller_chains_to_the_same_digest() -> None:
    records = [record(k) for k in range(3)]
    chain = StepChain()
    kept = [step_record(k, **r) for k, r in enumerate(records)]  # type: ignore[arg-type]
    assert [chain.add_record(k, v) for k, v in enumerate(kept)] == run(records)
    assert "wall_step_ns" not in kept[1]["timing"]  # type: ignore[operator]
    with pytest.raises(ValueError, match="a record of step 2 added as step 3"):
        chain.add_record(3, kept[2])
    assert chain.steps == 3


def test_steps_must_be_consecutive_from_zero() -> None:
    chain = StepChain()
    r = record(0)
    with pytest.raises(ValueError):
        chain.add(1, r["timing"], r["action"], r["applied"], r["state"])
    chain.add(0, r["timing"], r["action"], r["applied"], r["state"])
    with pytest.raises(ValueError):
        chain.add(0, r["timing"], r["action"], r["applied"], r["state"])
    assert chain.steps == 1


def test_frame_hash_equals_manual_computation_for_every_buffer_kind() -> None:
    pixels = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    raw = pixels.tobytes()
    manual = hashlib.sha256(encode(["rgb8", 6, 4, 18]) + raw).hexdigest()
    assert frame_hash("rgb8", 6, 4, 18, raw) == manual
    assert frame_hash("rgb8", 6, 4, 18, pixels) == manual
    assert frame_hash("rgb8", 6, 4, 18, pixels.reshape(-1)) == manual
    assert frame_hash("rgb8", 6, 4, 18, memoryview(raw)) == manual
    assert frame_hash("rgb8", 6, 4, 18, bytearray(raw)) == manual
    assert frame_hash("bgr8", 6, 4, 18, raw) != manual
    assert frame_hash("rgb8", 6, 4, 18, np.asfortranarray(pixels)) == manual


def test_frames_chain() -> None:
    chain = FramesChain()
    d0 = chain.add(0, {"front": "aa", "chase": "bb"})
    manual = hashlib.sha256(GENESIS + encode([0, [["chase", "bb"], ["front", "aa"]]])).hexdigest()
    assert d0 == manual
    assert frames_record_bytes(0, {"chase": "bb", "front": "aa"}) == encode([0, [["chase", "bb"], ["front", "aa"]]])
    d2 = chain.add(2, {"front": "cc"})
    assert chain.hexdigest == d2 and chain.steps == 2 and chain.last_step == 2
    with pytest.raises(ValueError):
        chain.add(2, {})


def test_guards_the_chains_and_the_frame_header_cache_document() -> None:
    """Each guard a docstring promises, held to: found unheld by removing it (test audit)."""
    from simforge_ros.core.digest import FramesChain, StepChain, frame_header

    # the cache is typed: a header of width True must not be served the one of width 1
    assert frame_header("rgb8", 1, 2, 3) == encode(["rgb8", 1, 2, 3])
    assert frame_header("rgb8", True, 2, 3) == encode(["rgb8", True, 2, 3]) != frame_header("rgb8", 1, 2, 3)
    chain = StepChain()
    with pytest.raises(ValueError, match="step False added to a chain expecting step 0"):
        chain.add_record(False, {"step": False})  # bool is no step, though False == 0
    frames = FramesChain()
    for bad in (-1, True):
        with pytest.raises(ValueError, match="step must be an int >= 0"):
            frames.add(bad, {"front": "ab"})
