from __future__ import annotations

import pytest

from simforge_ros.core.errors import ConfigError
from simforge_ros.core.faults import Fault, FaultPlan, parse_fault

GOOD = {
    "drop_frame@12": Fault("drop_frame", 12),
    "stale_frame@0": Fault("stale_frame", 0),
    "rig_offset=0.0054,0.134": Fault("rig_offset", offset_m=0.0054, offset_deg=0.134),
    "time_offset=1@30": Fault("time_offset", 30, offset_us=1),
    "time_offset=-250@3": Fault("time_offset", 3, offset_us=-250),
    "jitter=15.0": Fault("jitter", max_jitter_ms=15.0),
    "perturb_action=0.0001@40": Fault("perturb_action", 40, eps=0.0001),
    "perturb_state=1e-06@40": Fault("perturb_state", 40, eps=1e-6),
    "kill=driver@20": Fault("kill", 20, node="driver"),
}


@pytest.mark.parametrize("spec", sorted(GOOD))
def test_parse_good_specs_and_round_trip(spec: str) -> None:
    fault = parse_fault(spec)
    assert fault == GOOD[spec]
    assert parse_fault(fault.spec()) == fault
    assert fault.spec() == spec


def test_other_number_spellings_are_accepted() -> None:
    assert parse_fault("jitter=15").max_jitter_ms == 15.0
    assert parse_fault("rig_offset=-.5,2e-1").offset_deg == 0.2
    assert parse_fault(" drop_frame@3 ").step == 3


@pytest.mark.parametrize(
    "spec",
    [
        "drop_frame@-1",
        "drop_frame@",
        "drop_frame@1.5",
        "drop_frame",
        "stale_frame=3",
        "rig_offset=0.1",
        "rig_offset=a,b",
        "rig_offset=nan,1",
        "rig_offset=1e999,0",
        "time_offset=1.5@3",
        "time_offset=5",
        "jitter=-1",
        "jitter=fast",
        "perturb_action=0.1",
        "perturb_action=x@3",
        "perturb_state=0.1@-4",
        "kill=clock_master@3",
        "kill=driver",
        "lose_answer=driver",
        "lose_answer=clock_master@0",
        "explode@3",
        "",
        # past the arithmetic: 1e300 m overflowed the renderer instead of failing the contract
        "perturb_state=1e300@1",
        "perturb_action=-2e6@1",
        "rig_offset=1000001,0",
        "time_offset=86400000001@1",
    ],
)
def test_bad_specs_are_config_errors(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_fault(spec)
    (problem,) = info.value.problems
    assert problem.source == "--inject" and problem.field == spec
    assert "@" in problem.expected or "=" in problem.expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("drop_frame@x", "drop_frame@K (K a step >= 0)"),
        ("kill=foo@3", "kill=NODE@K (K a step >= 0, NODE in sim_bridge, driver, recorder)"),
        # the forms without a step say nothing about K
        ("jitter=abc", "jitter=MAX_MS"),
        ("jitter=-1", "jitter=MAX_MS with MAX_MS >= 0"),
        ("rig_offset=1", "rig_offset=METRES,DEGREES"),
        ("rig_offset=1e999,0", "rig_offset=METRES,DEGREES (values finite)"),
        ("rig_offset=1000001,0", "rig_offset=METRES,DEGREES (values within ±1000000)"),
        ("perturb_state=1e300@1", "perturb_state=EPS@K (K a step >= 0, values within ±1000000)"),
        ("time_offset=86400000001@1", "time_offset=US@K (K a step >= 0, US within ±86400000000)"),
    ],
)
def test_the_expected_form_names_only_what_the_kind_has(spec: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_fault(spec)
    assert info.value.problems[0].expected == expected


def test_unknown_kind_lists_every_form() -> None:
    with pytest.raises(ConfigError) as info:
        parse_fault("explode@3")
    expected = info.value.problems[0].expected
    for form in ("drop_frame@K", "rig_offset=METRES,DEGREES", "kill=NODE@K", "sim_bridge"):
        assert form in expected


def test_plan_parse_reports_all_problems() -> None:
    with pytest.raises(ConfigError) as info:
        FaultPlan.parse(["drop_frame@1", "oops", "kill=nobody@2", "drop_frame@1"])
    assert [p.field for p in info.value.problems] == ["oops", "kill=nobody@2", "drop_frame@1"]


def test_plan_routing_and_lookup() -> None:
    plan = FaultPlan.parse(sorted(GOOD))
    assert plan.specs() == sorted(GOOD)
    assert FaultPlan.parse(plan.specs()) == plan
    bridge = {f.kind for f in plan.for_node("sim_bridge")}
    assert bridge == {"drop_frame", "stale_frame", "rig_offset", "time_offset", "perturb_state", "jitter"}
    driver = plan.for_node("driver")
    assert {f.kind for f in driver} == {"perturb_action", "jitter", "kill"}
    assert list(plan.for_node("recorder")) == []
    assert plan.at("drop_frame", 12) == Fault("drop_frame", 12)
    assert plan.at("drop_frame", 11) is None
    assert plan.first("rig_offset") == GOOD["rig_offset=0.0054,0.134"]
    assert FaultPlan().first("jitter") is None and not FaultPlan() and len(plan) == len(GOOD)
    with pytest.raises(ValueError):
        plan.at("drop_frames", 12)


def test_kill_goes_only_to_the_named_node() -> None:
    plan = FaultPlan.parse(["kill=recorder@5", "kill=sim_bridge@9"])
    assert plan.for_node("recorder").specs() == ["kill=recorder@5"]
    assert plan.for_node("sim_bridge").specs() == ["kill=sim_bridge@9"]
    assert plan.for_node("driver").specs() == []


def test_a_lost_answer_goes_to_the_named_node_only() -> None:
    plan = FaultPlan.parse(["lose_answer=driver@0", "lose_answer=sim_bridge@0", "lose_answer=driver@7",
                            "lose_answer=recorder@30"])
    assert plan.for_node("driver").specs() == ["lose_answer=driver@0", "lose_answer=driver@7"]
    assert plan.for_node("sim_bridge").specs() == ["lose_answer=sim_bridge@0"]
    assert plan.for_node("recorder").specs() == ["lose_answer=recorder@30"]
    assert parse_fault("lose_answer=driver@7") == Fault("lose_answer", 7, node="driver")


def test_faults_a_counted_run_never_reached_are_named() -> None:
    plan = FaultPlan.parse(["stale_frame@2", "drop_frame@3", "jitter=1", "lose_answer=recorder@3",
                            "lose_answer=driver@9", "kill=recorder@3"])
    assert [f.spec() for f in plan.unfired(3)] == ["drop_frame@3", "lose_answer=driver@9", "kill=recorder@3"]
    # the recorder's one answer is to Finish of K steps: it fires only when the run has K
    assert [f.spec() for f in plan.unfired(4)] == ["lose_answer=recorder@3", "lose_answer=driver@9"]
    assert FaultPlan.parse(["rig_offset=1000000,0", "perturb_state=-1e6@0"])  # the bounds themselves parse


def test_one_node_killed_or_stalled_twice_is_a_collision_and_offsets_are_bounded_both_ways() -> None:
    """A node can die once (kill or stall at two steps collide); a time offset of more than
    a day is refused whichever its sign."""
    with pytest.raises(ConfigError, match="at most one"):
        FaultPlan.parse(["kill=driver@3", "kill=driver@7"])
    assert len(FaultPlan.parse(["kill=driver@3", "kill=sim_bridge@7"]).faults) == 2
    for us in (86_400_000_001, -86_400_000_001):
        with pytest.raises(ConfigError, match="within"):
            parse_fault(f"time_offset={us}@2")
    assert parse_fault("time_offset=-86400000000@2").offset_us == -86_400_000_000
