"""Lockstep runs with sim_bridge.backend=carla, against the CARLA test double
(test/carla_double: no CARLA server can run here). Real nodes, DDS, recorder and bag; only
the server is a double. The runs count, repeat bit for bit on a server that does, and each
failure of the server's side is refused by name at the step it happened."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runs import lockstep, manifest_of, simforge, steps_of

from simforge_ros import topics
from simforge_ros.engine import load_scenario
from simforge_ros.engine.paths import PathReplay
from simforge_ros.engine.signals import signal_state
from simforge_ros.record.bag import read_bag
from simforge_ros.record.verify import verify_run

pytestmark = pytest.mark.ros

DOUBLE = Path(__file__).resolve().parents[1] / "carla_double"
CARLA = {"sim_bridge": {"backend": "carla", "carla_timeout_ms": 2000}}


@pytest.fixture
def carla_double(monkeypatch) -> Iterator[None]:
    """The double importable as ``carla``: in this process (the single layout's bridge) and
    in the node processes the runner starts (they inherit PYTHONPATH)."""
    monkeypatch.syspath_prepend(str(DOUBLE))
    monkeypatch.setenv("PYTHONPATH", str(DOUBLE))
    monkeypatch.delenv("CARLA_DOUBLE_FAULTS", raising=False)
    sys.modules.pop("carla", None)
    yield
    sys.modules.pop("carla", None)


def carla_run(tmp_path: Path, steps: int, layout: str, **kwargs: Any) -> Any:
    return lockstep(tmp_path, steps=steps, layout=layout, sets=CARLA, **kwargs)


@pytest.mark.parametrize("layout", ["processes", "single"])
def test_a_carla_run_counts_records_its_frames_and_repeats(tmp_path, layout, carla_double):
    first = carla_run(tmp_path, 30, layout)
    again = carla_run(tmp_path, 30, layout)
    assert first.status == again.status == "counted", (first.refusal, again.refusal)
    assert first.exit_code == 0 and first.steps == 30
    assert (first.chain_digest, first.frames_digest) == (again.chain_digest, again.frames_digest)
    steps = steps_of(first)
    assert [s["t_us"] for s in steps] == [k * 100_000 for k in range(30)]
    assert all(set(s["frames"]) == {"chase", "front"} for s in steps)
    # the route follower drove it: the ego moved along the scenario's road
    assert steps[-1]["state"]["pose"]["x_m"] > steps[0]["state"]["pose"]["x_m"] + 10.0
    backend = manifest_of(first)["nodes"]["sim_bridge/backend"]["params"]
    assert backend["engine_version"].startswith("carla 0.10.0") and backend["tick_us"] == 20_000
    assert manifest_of(first)["digests"]["engine"] is None  # the server's code is not ours to hash
    assert verify_run(Path(first.run_dir)).ok


def test_red_signal_on_carla_drives_the_towns_lights_on_the_scenarios_phases(tmp_path, carla_double):
    """Past the change at 12 s: every recorded ground truth is the phases at its t_us, as
    the lights showed them."""
    sets = {"sim_bridge": {**CARLA["sim_bridge"], "ground_truth": True, "cameras": []}}
    run = lockstep(tmp_path, "red_signal", steps=130, layout="single", sets=sets)
    assert run.status == "counted", run.refusal
    scenario = load_scenario("red_signal")
    truth = [item.msg for item in read_bag(Path(run.run_dir) / "bag") if item.topic == topics.GROUND_TRUTH]
    assert [m.t_us for m in truth] == [k * 100_000 for k in range(130)]
    states = []
    for msg in truth:
        assert [(s.id, s.state) for s in msg.signals] == [(s.id, signal_state(s, msg.t_us)) for s in scenario.signals]
        states.append(msg.signals[0].state)
    assert states[0] == "red" and states[-1] == "green"
    assert verify_run(Path(run.run_dir)).ok


def test_the_same_scenario_on_carla_and_on_the_engine_differs_and_says_where(tmp_path, carla_double):
    """Two simulators, two chains: nothing in the record passes one off as the other."""
    carla = carla_run(tmp_path, 10, "single")
    engine = lockstep(tmp_path, steps=10, layout="single")
    assert carla.status == engine.status == "counted"
    assert carla.chain_digest != engine.chain_digest


# A fresh double's world is at frame 0; load ticks 1 s (50 ticks) for the ego to settle,
# then tick 0 is frame 51, and step k (5 ticks a step) is frame 51 + 5 k.
@pytest.mark.parametrize(("faults", "code", "step", "exit_code", "detail"), [
    # the 0.0999 s typed for a 0.1 s tick: refused at the first tick, not at step 101
    ("delta_s=0.0199", "time_drift", 1, 10, "not the 20000 us tick"),
    ("extra_tick@72", "time_drift", 5, 10, "another client advances the world"),  # step 5: frames 72-76
    ("drop_image=front@66", "missing_frame", 3, 12, "no image of camera 'front'"),  # step 3's frame
    ("gone@62", "participant_error", 3, 18, "got no answer"),  # the server stops during step 3's ticks
    ("rig_error_m=0.02", "pose_tolerance", 0, 14, ""),
    ("down", "participant_error", 0, 18, "no server answered at localhost:2000"),
])
def test_a_carla_failure_is_refused_by_name_at_its_step_and_keeps_the_record(
        tmp_path, carla_double, monkeypatch, faults, code, step, exit_code, detail):
    monkeypatch.setenv("CARLA_DOUBLE_FAULTS", faults)
    result = carla_run(tmp_path, 12, "single")
    assert result.status == "refused"
    assert (result.refusal["code"], result.refusal["step"], result.exit_code) == (code, step, exit_code)
    assert detail in result.refusal["detail"]
    manifest = manifest_of(result)
    assert manifest["refusal"]["code"] == code
    assert len(steps_of(result)) == manifest["steps"]  # what was recorded before it is kept


def test_handover_parked_on_carla_replays_the_recorded_drive_then_the_driver_drives(tmp_path, carla_double):
    run = lockstep(tmp_path, "handover_parked", steps=70, layout="processes",
                   sets={"sim_bridge": {**CARLA["sim_bridge"], "cameras": []}})
    assert run.status == "counted", run.refusal
    scenario = load_scenario("handover_parked")
    assert scenario.handover is not None
    path = PathReplay(scenario.handover.path)
    steps = steps_of(run)
    for record in steps[:51]:  # up to the hand-over at 5 s
        x, y, _ = path.xyz_at(record["t_us"])
        assert (record["state"]["pose"]["x_m"], record["state"]["pose"]["y_m"]) == pytest.approx((x, y), abs=1e-9)
    x, y, _ = path.xyz_at(steps[-1]["t_us"])  # after it, the route follower's, not the recording's
    assert (steps[-1]["state"]["pose"]["x_m"], steps[-1]["state"]["pose"]["y_m"]) != pytest.approx((x, y), abs=1e-3)


def test_the_cli_says_what_to_install_without_the_carla_module(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    out = simforge("run", "right_turn", "--set", "sim_bridge.backend=carla", "--steps", "3",
                   "--out", str(tmp_path), cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "sim_bridge: backend: expected a backend whose simulator API is installed" in out.stderr
    assert "CARLA 0.10 Python API" in out.stderr
    assert "Traceback" not in out.stderr
