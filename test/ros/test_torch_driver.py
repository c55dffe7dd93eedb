"""The learned torch planner in the lockstep loop: repeatable with its determinism option
in both layouts, and one changed camera pixel changes the plan at that step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runs import lockstep, manifest_of, simforge, steps_of

from simforge_ros.record.diff_runs import diff_runs

pytestmark = pytest.mark.ros
pytest.importorskip("torch")


def test_torch_driver_repeats_in_both_layouts(tmp_path):
    runs = [lockstep(tmp_path, steps=25, driver="torch", layout=layout)
            for layout in ("single", "single", "processes", "processes")]
    assert {r.status for r in runs} == {"counted"}, [r.refusal for r in runs]
    assert len({r.chain_digest for r in runs}) == 1
    records = steps_of(runs[0])
    assert records[5]["action"]["has_plan"] and records[5]["action"]["plan_step"] == 5
    assert set(records[0]["frames"]) == {"front", "left", "rear", "right"}
    policy = manifest_of(runs[0])["nodes"]["driver"]["policy"]
    assert policy["deterministic"] is True and manifest_of(runs[0])["digests"]["weights"]


def test_one_changed_pixel_changes_the_plan_at_that_step(tmp_path):
    base = lockstep(tmp_path, steps=20, driver="torch", layout="single")
    flipped = lockstep(tmp_path, steps=20, driver="torch", layout="single", faults=("flip_pixel=front@10",))
    result = diff_runs(Path(base.run_dir), Path(flipped.run_dir))
    assert (result.step, result.first) == (10, "controller")
    assert result.field.startswith("action.")
    assert result.frames_differ
    out = simforge("diff", base.run_dir, flipped.run_dir, cwd=tmp_path)
    assert "step 10: controller output differed first" in out.stdout


def test_probe_driver_replays_inputs_saved_in_a_run(tmp_path):
    run = lockstep(tmp_path, steps=6, driver="torch", layout="single")
    out = simforge("probe-driver", "--calls", "6", "--deterministic", "on", "--inputs", run.run_dir, "--json",
                   cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    assert row["mode"] == "on" and row["calls"] == row["identical"] == 6
    # a run directory is read as every tool reads one: named when missing or broken
    missing = simforge("probe-driver", "--inputs", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert missing.returncode == 2 and f"{tmp_path / 'nowhere'}: no such run directory" in missing.stderr
    manifest = Path(run.run_dir) / "manifest.json"
    manifest.write_text(manifest.read_text()[:40])
    broken = simforge("probe-driver", "--inputs", run.run_dir, cwd=tmp_path)
    assert broken.returncode == 2 and "manifest.json: not valid JSON (truncated?)" in broken.stderr, broken.stderr


@pytest.mark.parametrize(
    ("sets", "code", "detail"),
    [
        # the planner plans every 5 steps, the bridge renders every 3: named at step 0, not
        # refused missing_frame at step 5
        ({"sim_bridge": {"camera_period_us": 300_000}}, "rate_not_multiple",
         "driver: the torch policy needs frames at step 5 (t=500000 us), which the bridge's camera period "
         "misses: it renders every 3 steps (camera_period_us=300000)"),
        # a rig set for the bridge itself that leaves out a camera the planner looks at
        ({"sim_bridge": {"cameras": ["front", "left"]}, "driver": {"cameras": ["front", "rear"]}}, "missing_frame",
         "driver: the torch policy needs its rear frame at step 0 (t=0 us), and the bridge renders front, left: "
         "name rear in sim_bridge.cameras"),
    ],
)
def test_a_frame_the_planner_needs_and_the_bridge_does_not_render_is_named_at_step_0(tmp_path, sets, code, detail):
    result = lockstep(tmp_path, steps=8, driver="torch", layout="single", sets=sets)
    assert result.status == "refused"
    assert (result.refusal["code"], result.refusal["step"]) == (code, 0)
    assert result.refusal["detail"].startswith(detail)


def test_a_camera_period_that_meets_every_planning_step_runs(tmp_path):
    result = lockstep(tmp_path, steps=11, driver="torch", layout="single",
                      sets={"sim_bridge": {"camera_period_us": 500_000}})
    assert result.status == "counted", result.refusal
    records = steps_of(result)
    assert [k for k, r in enumerate(records) if r["frames"]] == [0, 5, 10]
    assert records[10]["action"]["plan_step"] == 10


def test_the_bridge_renders_the_cameras_the_planner_is_given(tmp_path):
    result = lockstep(tmp_path, steps=6, driver="torch", layout="single",
                      sets={"driver": {"cameras": ["chase", "front"]}})
    assert result.status == "counted", result.refusal
    assert set(steps_of(result)[5]["frames"]) == {"chase", "front"}


def test_the_planner_plans_at_the_size_the_bridge_renders(tmp_path):
    """It once took 320x180 frames only: any other size was refused participant_error at
    step 0 with a ValueError, and the manifest said [180, 320] whatever the bridge drew."""
    sets = {"sim_bridge": {"width": 160, "height": 90}}
    runs = [lockstep(tmp_path, steps=6, driver="torch", layout=layout, sets=sets)
            for layout in ("processes", "single")]
    assert [r.status for r in runs] == ["counted", "counted"], [r.refusal for r in runs]
    assert runs[0].chain_digest == runs[1].chain_digest
    assert manifest_of(runs[0])["nodes"]["driver"]["policy"]["frames_hw"] == [90, 160]


def _only_size(path: Path, height: int, width: int) -> str:
    """A TorchScript model that takes four frames of ``height`` x ``width`` and no other size."""
    import warnings

    import torch

    class OnlySize(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.height, self.width = height, width

        def forward(self, images: torch.Tensor, speed_mps: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
            return images.reshape(4, self.height, self.width, 3)[:1, :10, :2, 0].float()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(OnlySize()), str(path))
    return str(path)


def test_a_model_that_cannot_take_the_bridges_size_is_refused_at_step_0(tmp_path):
    small = {"width": 160, "height": 90}
    result = lockstep(tmp_path, steps=6, driver="torch", layout="single",
                      sets={"sim_bridge": small, "driver": {"weights": _only_size(tmp_path / "fixed.pt", 180, 320)}})
    assert result.status == "refused"
    assert (result.refusal["code"], result.refusal["step"]) == ("participant_error", 0)
    assert "driver.weights: expected a model answering (1, 10, 2) to 4 cameras of 160x90" in result.refusal["detail"]
    assert "\n" not in result.refusal["detail"] and "driver: driver: " not in result.refusal["detail"]
    # and one that takes only the bridge's size runs: the driver checks it at that size,
    # not at the default one before it knows the bridge's (refused at start-up once)
    counted = lockstep(tmp_path, steps=6, driver="torch", layout="processes",
                       sets={"sim_bridge": small, "driver": {"weights": _only_size(tmp_path / "fits.pt", 90, 160)}})
    assert counted.status == "counted", counted.refusal


def test_a_relative_weights_path_names_the_file_from_where_simforge_was_started(tmp_path):
    """A `processes` node runs in the run's directory: a relative driver.weights once ran in
    `single` and was refused as "no such file" in `processes` and by `rerun`."""
    import torch

    from simforge_ros.drivers.torch_planner import TorchPlanner, TorchPlannerConfig

    (tmp_path / "w").mkdir()
    torch.save(TorchPlanner(TorchPlannerConfig(weights_seed=3)).model.state_dict(), tmp_path / "w" / "planner.pt")
    out = simforge("run", "right_turn", "--driver", "torch", "--steps", "3", "--layout", "processes",
                   "--set", "driver.weights=w/planner.pt", "--out", "runs", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    run_dir = Path(json.loads(out.stdout.splitlines()[0])["run_dir"])
    params = (run_dir / "params.yaml").read_text()
    assert f"weights: '{tmp_path / 'w' / 'planner.pt'}'" in params, params
    rerun = simforge("rerun", str(run_dir), cwd=Path("/"))  # named whatever the directory
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr


def test_a_planner_camera_the_bridge_has_not_is_named_as_the_drivers(tmp_path):
    out = simforge("run", "right_turn", "--driver", "torch", "--steps", "2", "--set", "driver.cameras=[top]",
                   "--out", "runs", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.startswith("simforge: --set: driver.cameras: expected a list of distinct cameras from "
                                 "front, left, rear, right, chase, got ['top']"), out.stderr
    assert not (tmp_path / "runs").exists()
