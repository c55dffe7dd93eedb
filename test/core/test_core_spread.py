"""core.spread: how far apart runs are, from their step records alone."""

from __future__ import annotations

import math
from typing import Any

import pytest

from simforge_ros.core.spread import QUANTITIES, spread


def _record(k: int, x: float = 0.0, y: float = 0.0, speed: float = 5.0, steer: float = 0.0,
            wall: int = 0) -> dict[str, Any]:
    pose = {"x_m": x + k, "y_m": y, "yaw_rad": 0.0}
    return {
        "step": k, "t_us": k * 100_000,
        "timing": {"step": k, "world_digest": "w"},
        "state": {"step": k, "pose": pose, "speed_mps": speed, "steer_rad": steer, "accel_mps2": 0.0},
        "action": {"step": k, "steer_rad": steer, "accel_mps2": 0.5},
        "applied": {"step": k, "steer_rad": steer, "accel_mps2": 0.5},
        "frames": {"front": f"h{k}"},
        "digest": f"d{k}",
        "wall": {"step_ns": wall},
    }


def _run(n: int, **at: dict[str, float]) -> list[dict[str, Any]]:
    """n records; ``at`` maps "k<step>" to the record's changed values."""
    return [_record(k, **at.get(f"k{k}", {})) for k in range(n)]


def test_identical_runs_have_a_floor_of_zero_whatever_their_wall_time():
    runs = [_run(10), _run(10), [dict(r, wall={"step_ns": 99}) for r in _run(10)]]
    result = spread(runs)
    assert result.identical and result.first_step is None and result.differing_steps == 0
    assert (result.common, result.lengths) == (10, (10, 10, 10))
    assert result.position.value == 0.0 and all(s.value == 0.0 and s.step is None for s in result.fields)


def test_the_largest_spread_of_each_quantity_and_where():
    a = _run(8)
    b = _run(8, k3={"steer": 0.002}, k5={"x": 0.03, "y": 0.04, "speed": 5.1})
    c = _run(8, k5={"x": -0.01}, k6={"speed": 4.95})
    result = spread([a, b, c])
    assert not result.identical
    assert (result.first_step, result.differing_steps) == (3, 3)  # steps 3, 5 and 6
    assert result.first_field == "state.steer_rad"  # the sections in diff's order: timing, state, action
    by = {s.field: s for s in result.fields}
    assert [s.field for s in result.fields] == [path for path, _ in QUANTITIES]
    assert (by["state.pose.x_m"].value, by["state.pose.x_m"].step) == (pytest.approx(0.04), 5)
    assert (by["state.speed_mps"].value, by["state.speed_mps"].step) == (pytest.approx(0.1), 5)
    assert (by["action.steer_rad"].value, by["action.steer_rad"].step) == (0.002, 3)
    assert by["state.pose.yaw_rad"].step is None  # never apart
    # b and c at step 5: (5.03, 0.04) and (4.99, 0.0)
    assert result.position.step == 5
    assert result.position.value == pytest.approx(math.hypot(0.04, 0.04))


def test_a_difference_outside_the_quantities_still_counts_as_a_differing_step():
    a, b = _run(4), _run(4)
    b[2] = dict(b[2], frames={"front": "other"})
    result = spread([a, b])
    assert (result.first_step, result.differing_steps, result.first_field) == (2, 1, "frames.front")
    assert all(s.step is None for s in result.fields)


def test_runs_of_other_lengths_are_compared_over_their_common_steps():
    result = spread([_run(6), _run(4)])
    assert (result.lengths, result.common) == ((6, 4), 4)
    assert result.first_step is None and not result.identical


def test_one_run_is_not_a_spread():
    with pytest.raises(ValueError):
        spread([_run(3)])


def test_the_first_field_is_the_one_diff_names():
    """Spread compared the whole timing record first, so a moved ego was named by the pose
    a camera frame was rendered for (timing.frames.0.pose.x_m), where diff names the state."""
    from simforge_ros.core.diffing import diff_steps

    def moved(record: dict[str, Any]) -> dict[str, Any]:
        pose = dict(record["state"]["pose"], x_m=record["state"]["pose"]["x_m"] + 0.05)
        return dict(record, state=dict(record["state"], pose=pose),
                    timing=dict(record["timing"], frames=[{"camera": "front", "pose": pose}]))

    a = [dict(r, timing=dict(r["timing"], frames=[{"camera": "front", "pose": r["state"]["pose"]}])) for r in _run(5)]
    b = a[:3] + [moved(r) for r in a[3:]]
    result = spread([a, b])
    assert (result.first_step, result.first_field) == (3, "state.pose.x_m")
    assert result.first_field == diff_steps(a, b).field


def test_a_step_whose_only_difference_is_its_digest_is_named_but_not_counted():
    """One stored digest edited: diff names it; spread called the runs identical."""
    a, b = _run(5), _run(5)
    b[2] = dict(b[2], digest="edited")
    result = spread([a, b])
    assert not result.identical
    assert (result.first_step, result.first_field, result.differing_steps) == (2, "digest", 0)


def test_the_chains_digests_that_differ_after_a_difference_are_not_differing_steps():
    a, b = _run(6), _run(6, k2={"steer": 0.01})
    for k in range(2, 6):  # a chain: every digest from the first difference on
        b[k] = dict(b[k], digest=f"other{k}", frames_digest=f"fother{k}")
        a[k] = dict(a[k], frames_digest=f"f{k}")
    result = spread([a, b])
    assert (result.first_step, result.first_field, result.differing_steps) == (2, "state.steer_rad", 1)


def test_an_estimate_gives_the_mean_its_sample_sd_and_its_95_percent_interval():
    """The uncertainty to rank on (the article: "an uncertainty estimate for the metric
    being ranked, never a single run"): Student's t with n - 1 degrees of freedom."""
    from simforge_ros.core.spread import estimate

    got = estimate("distance", "m", [10.0, 12.0, 14.0])
    assert (got.mean, got.sd) == (12.0, 2.0)
    assert got.ci95 == pytest.approx(4.303 * 2.0 / math.sqrt(3))  # t(0.975, 2 df)
    assert estimate("d", "m", [1.0, 1.0]).ci95 == 0.0
    many = estimate("d", "m", [float(i % 2) for i in range(50)])  # past 30 df: 30's t, a little wide
    assert many.ci95 == pytest.approx(2.042 * many.sd / math.sqrt(50))
    with pytest.raises(ValueError):
        estimate("d", "m", [1.0])


def test_per_run_metrics_are_over_each_runs_own_steps():
    """Distance travelled and mean speed of each run, over all of its own recorded steps
    (a run refused early has travelled less), and how many it recorded."""
    short = [_record(k, speed=2.0) for k in range(5)]  # x = k
    long = [_record(k, x=float(k), speed=4.0) for k in range(9)]  # x = 2k
    result = spread([short, long])
    by_name = {m.name: m for m in result.metrics}
    assert by_name["distance travelled"].values == (4.0, 16.0)
    assert by_name["mean speed"].values == (2.0, 4.0)
    assert by_name["steps recorded"].values == (5.0, 9.0)
    assert by_name["distance travelled"].mean == 10.0


def test_two_fields_of_one_section_are_ranked_as_diff_walks_the_record():
    """One run's speed and another's x differing at one step: the first field is the one
    diff would name (the pose before the speed), whichever run is given first (the state
    section tied, and the run given first won)."""
    base = _run(6)
    speed = _run(6, k3={"speed": 5.5})
    x = _run(6, k3={"x": 0.25})
    named = {(spread([base, *order]).first_step, spread([base, *order]).first_field)
             for order in ((speed, x), (x, speed))}
    assert named == {(3, "state.pose.x_m")}
