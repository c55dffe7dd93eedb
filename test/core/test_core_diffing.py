from __future__ import annotations

import copy
import json

from simforge_ros.core.diffing import MISSING, DiffResult, describe, diff_steps


def rec(k: int) -> dict[str, object]:
    return {
        "step": k,
        "t_us": k * 100_000,
        "digest": f"{k:064x}",
        "frames_digest": None if k % 2 else f"{k + 1:064x}",
        "frames": {} if k % 2 else {"chase": f"c{k}", "front": f"f{k}"},
        "timing": {"step": k, "t_us": k * 100_000, "engine_t_us": k * 100_000, "ticks_per_step": 10},
        "action": {"step": k, "decided_step": k, "steer_rad": 0.1, "accel_mps2": 0.0},
        "applied": {"step": k, "decided_step": k, "steer_rad": 0.1, "accel_mps2": 0.0},
        "state": {"step": k, "t_us": k * 100_000, "pose": {"x_m": float(k), "y_m": 0.0, "yaw_rad": 0.0}},
    }


def runs(n: int = 60) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    a = [rec(k) for k in range(n)]
    return a, copy.deepcopy(a)


def test_identical() -> None:
    a, b = runs()
    result = diff_steps(a, b)
    assert result == DiffResult(True, steps=60)
    assert describe(result) == "identical (60 steps)"


def test_perturbed_action_is_controller_at_that_step() -> None:
    a, b = runs()
    b[40]["action"]["steer_rad"] = 0.1001  # type: ignore[index]
    for later in b[41:]:
        later["state"]["pose"]["x_m"] += 1e-3  # type: ignore[index]
    result = diff_steps(a, b)
    assert (result.step, result.first, result.field, result.a, result.b) == (
        40, "controller", "action.steer_rad", 0.1, 0.1001
    )
    assert describe(result) == (
        "first difference at step 40: controller output differed first (action.steer_rad: 0.1 vs 0.1001)"
    )


def test_perturbed_state_is_state_even_if_the_action_follows() -> None:
    a, b = runs()
    b[40]["state"]["pose"]["x_m"] = 40.001  # type: ignore[index]
    b[40]["action"]["steer_rad"] = 0.2  # type: ignore[index]
    result = diff_steps(a, b)
    assert (result.step, result.first, result.field) == (40, "state", "state.pose.x_m")
    assert "state differed first" in describe(result)


def test_timing_before_state_and_frames() -> None:
    a, b = runs()
    b[12]["timing"]["engine_t_us"] = 1_200_001  # type: ignore[index]
    b[12]["state"]["t_us"] = 1  # type: ignore[index]
    b[12]["frames"]["chase"] = "x"  # type: ignore[index]
    assert (diff_steps(a, b).first, diff_steps(a, b).field) == ("timing", "timing.engine_t_us")


def test_frames_named_by_camera() -> None:
    a, b = runs()
    b[8]["frames"]["chase"] = "other"  # type: ignore[index]
    result = diff_steps(a, b)
    assert (result.step, result.first, result.field) == (8, "frames", "frames.chase")


def test_applied_counts_as_controller() -> None:
    a, b = runs()
    b[3]["applied"]["decided_step"] = 2  # type: ignore[index]
    result = diff_steps(a, b)
    assert (result.first, result.field) == ("controller", "applied.decided_step")


def test_missing_field_and_type_difference() -> None:
    a, b = runs()
    del b[5]["state"]["pose"]["yaw_rad"]  # type: ignore[index]
    result = diff_steps(a, b)
    assert result.field == "state.pose.yaw_rad" and result.b is MISSING
    assert "0.0 vs missing" in describe(result)
    a, b = runs()
    b[5]["action"]["accel_mps2"] = 0  # type: ignore[index]
    assert diff_steps(a, b).field == "action.accel_mps2"
    a, b = runs()
    b[5]["action"]["accel_mps2"] = -0.0  # type: ignore[index]
    assert diff_steps(a, b).field == "action.accel_mps2"


def test_different_lengths_with_equal_prefix() -> None:
    a, b = runs()
    result = diff_steps(a, b[:45])
    assert (result.step, result.first, result.field, result.a, result.b) == (45, "steps", "steps", 60, 45)
    assert "45" in describe(result)


def test_only_digest_differs() -> None:
    a, b = runs()
    b[7]["digest"] = "f" * 64
    result = diff_steps(a, b)
    assert (result.step, result.first, result.field) == (7, "digest", "digest")


def test_json_round_trip_is_identical() -> None:
    a, _ = runs()
    b = [json.loads(json.dumps(r)) for r in a]
    assert diff_steps(a, b).identical


def test_describe_says_when_frames_differ_too() -> None:
    """The CLI prints this line: frames differing at the same step are worth knowing."""
    both = DiffResult(False, 40, "state", "state.pose.x_m", 1.0, 1.5, 40, frames_differ=True)
    assert describe(both) == (
        "first difference at step 40: vehicle state differed first (state.pose.x_m: 1.0 vs 1.5); "
        "camera frames differ at this step too"
    )
    frames = DiffResult(False, 40, "frames", "frames.front", "aa", "bb", 40, frames_differ=True)
    assert "too" not in describe(frames)
    long = DiffResult(False, 3, "controller", "action.steer_rad", MISSING, "x" * 200, 3)
    assert "(action.steer_rad: missing vs 'xxx" in describe(long) and describe(long).endswith("...)")


def test_a_world_digest_alone_is_the_world_not_the_vehicle_state() -> None:
    """A comment edited into a scenario file changes the world digest (its bytes start the
    chain) and nothing of the ego: diff said "vehicle state differed first". The category
    (JSON's `first`) stays the documented "state"."""
    a, b = runs()
    for k, record in enumerate(a):
        record["timing"]["world_digest"] = f"{k:016x}"  # type: ignore[index]
    b = copy.deepcopy(a)
    for later in b:
        later["timing"]["world_digest"] = "f" * 16  # type: ignore[index]
    result = diff_steps(a, b)
    assert (result.step, result.first, result.field) == (0, "state", "timing.world_digest")
    assert describe(result) == (
        "first difference at step 0: the world (the vehicle state the same; actors, signals, the scenario file "
        f"or the seed) differed first (timing.world_digest: '{0:016x}' vs '{'f' * 16}')")
