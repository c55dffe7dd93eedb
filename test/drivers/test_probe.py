"""The determinism probe: counts on identical inputs, its CLI, and the injectable inputs loader."""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from simforge_ros.drivers.policy import Observation
from simforge_ros.drivers.probe import (
    NO_LOADER_MESSAGE,
    ProbeResult,
    generated_inputs,
    main,
    probe,
)
from simforge_ros.drivers.torch_planner import SURROUND_CAMERAS, TorchPlanner, TorchPlannerConfig


def test_deterministic_on_is_n_of_n_identical() -> None:
    result = probe(TorchPlannerConfig(samples=2), generated_inputs(1), 12)
    assert isinstance(result, ProbeResult)
    assert (result.mode, result.calls, result.identical) == ("on", 12, 12)
    assert result.ms_per_call > 0.0


def test_off_with_samples_draws_unseeded_noise_each_call() -> None:
    result = probe(TorchPlannerConfig(deterministic=False, samples=4), generated_inputs(1), 12)
    assert result.mode == "off" and result.calls == 12
    assert 1 <= result.identical < 12  # call 0 matches itself; fresh noise every other call


def test_probe_uses_one_input_for_every_call() -> None:
    inputs = generated_inputs(2, count=3)
    assert probe(TorchPlannerConfig(), inputs, 6).identical == 6  # cycling would differ


def test_generated_inputs_are_deterministic() -> None:
    cams, hw = ("front", "rear"), (36, 64)
    a, b = generated_inputs(5, cams, hw, count=2), generated_inputs(5, cams, hw, count=2)
    c = generated_inputs(6, cams, hw, count=2)
    assert [o.step for o in a] == [0, 1] and a[1].t_us == 100_000
    assert a[0].frames["front"].shape == (36, 64, 3) and a[0].frames["front"].dtype == np.uint8
    for x, y in zip(a, b, strict=True):
        assert x.state == y.state
        assert all(np.array_equal(x.frames[k], y.frames[k]) for k in x.frames)
    assert not np.array_equal(a[0].frames["front"], c[0].frames["front"])


def test_main_json_lists_both_modes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--calls", "3", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["mode"] for r in rows] == ["on", "off"]
    for row in rows:
        assert {"mode", "calls", "identical", "ms_per_call"} <= set(row)
        assert row["calls"] == 3 and isinstance(row["ms_per_call"], float)
    assert rows[0]["identical"] == 3


def test_main_prints_modes_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--calls", "2", "--samples", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("model: seeded:0 (sha256 ") and out[0].endswith("), samples 2, float32")
    assert out[1].split() == ["mode", "on", "off"]
    assert out[2].split()[0] == "identical" and out[2].split()[1] == "2/2"
    assert out[3].startswith("ms/call") and out[4].startswith("cost ratio on/off: ")


def test_inputs_without_a_bag_reader_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--inputs", str(tmp_path), "--calls", "2"]) == 2
    assert NO_LOADER_MESSAGE in capsys.readouterr().err


def test_inputs_come_from_the_injected_loader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[Path] = []

    def loader(run_dir: Path) -> list[Observation]:
        seen.append(run_dir)
        return generated_inputs(3, ("cam_a", "cam_b"), (90, 160))

    argv = ["--inputs", str(tmp_path), "--calls", "2", "--deterministic", "on", "--json"]
    assert main(argv, loader) == 0
    assert seen == [tmp_path]
    assert json.loads(capsys.readouterr().out)[0]["identical"] == 2


def test_inputs_probe_the_runs_own_model_unless_the_command_line_names_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--inputs RUN alone once probed the default seeded planner on a run made with another
    model, and said nothing of which: a run that sampled at random passed."""
    run = {"policy": "torch", "weights": "", "weights_seed": 5, "samples": 2, "dtype": "float32",
           "cameras": ["cam_b", "cam_a"]}

    def loader(_run_dir: Path) -> list[Observation]:
        return generated_inputs(3, ("cam_a", "cam_b"), (90, 160))

    argv = ["--inputs", str(tmp_path), "--calls", "2", "--deterministic", "on", "--json"]
    assert main(argv, loader, lambda _run_dir: run) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert (row["weights"], row["samples"], row["dtype"]) == ("seeded:5", 2, "float32")
    seeded5 = row["weights_sha256"]
    assert main([*argv, "--weights-seed", "1", "--samples", "1"], loader, lambda _run_dir: run) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert (row["weights"], row["samples"]) == ("seeded:1", 1) and row["weights_sha256"] != seeded5
    route_run = {"policy": "route", "scenario": "right_turn"}
    assert main(argv, loader, lambda _run_dir: route_run) == 0  # not the planner's: the defaults
    row = json.loads(capsys.readouterr().out)[0]
    assert (row["weights"], row["samples"]) == ("seeded:0", 1)


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--samples", "0"]) == 2
    assert capsys.readouterr().err == "simforge probe-driver: --samples: expected an integer from 1 to 1024, got 0\n"
    assert main(["--seed", "-3"]) == 2
    assert capsys.readouterr().err == ("simforge probe-driver: --seed: expected an integer from 0 to "
                                       "9223372036854775807, got -3\n")
    # past what the planner takes: 100 000 threads ended the process (SIGSEGV), 10^8 samples
    # asked torch for 51 GB, a seed past int64 said only "Overflow when unpacking long long"
    for flag, value, expected in (("--threads", "100000", "from 1 to 256"),
                                  ("--samples", "100000000", "from 1 to 1024"),
                                  ("--weights-seed", "99999999999999999999", "from 0 to 9223372036854775807")):
        assert main([flag, value]) == 2
        said = capsys.readouterr().err
        assert said == f"simforge probe-driver: {flag}: expected an integer {expected}, got {value}\n"
    for calls in ("0", "99999999999999999999"):  # 10^20 ran on, its list of plans growing, until killed
        assert main(["--calls", calls]) == 2
        assert capsys.readouterr().err == (f"simforge probe-driver: --calls: expected an integer from 1 to 1000000, "
                                           f"got {calls}\n")
    assert main(["--deterministic", "maybe"]) == 2
    assert main(["--weights", "/nonexistent/planner.pt", "--calls", "1"]) == 2
    assert "driver.weights:" in capsys.readouterr().err


class _RaisesOnFrames(torch.nn.Module):
    """Passes the planner's start-up check (black frames), raises on a drawn one."""

    def forward(self, images: torch.Tensor, speed_mps: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        if bool(images.abs().sum() > 0):
            raise RuntimeError("boom on a real frame")
        return torch.zeros((noise.shape[0], 10, 2))


def test_a_model_that_fails_when_probed_is_named_by_its_weights(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """TorchScript's 17-line traceback, exit 1 (which says a deterministic call differed)."""
    path = tmp_path / "raises.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(_RaisesOnFrames()), str(path))
    assert main(["--weights", str(path), "--calls", "2"]) == 2
    said = capsys.readouterr().err
    assert said.startswith("simforge probe-driver: driver: driver.weights: expected a model the planner can call, got ")
    assert str(path) in said and "boom on a real frame" in said and said.count("\n") == 1


def test_inputs_hold_the_weights_file_to_the_runs_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Overwritten since the run, the file was probed as "the run's own model" unsaid."""
    path = tmp_path / "w.pt"
    torch.save(TorchPlanner(TorchPlannerConfig()).model.state_dict(), path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    run = {"policy": "torch", "weights": str(path), "weights_seed": 0, "samples": 1, "dtype": "float32",
           "weights_sha256": digest}

    def loader(_run_dir: Path) -> list[Observation]:
        return generated_inputs(3, SURROUND_CAMERAS)

    argv = ["--inputs", str(tmp_path), "--calls", "1", "--deterministic", "on"]
    assert main(argv, loader, lambda _run_dir: run) == 0
    capsys.readouterr()
    torch.save(TorchPlanner(TorchPlannerConfig(weights_seed=9)).model.state_dict(), path)  # other weights
    assert main(argv, loader, lambda _run_dir: run) == 2
    assert (f"expected the run's model (sha256 {digest[:16]}), or --weights, got '{path}: sha256 "
            in capsys.readouterr().err)
    assert main([*argv, "--weights", str(path)], loader, lambda _run_dir: run) == 0  # named: probed as asked


def test_inputs_hold_seeded_weights_to_the_runs_model(capsys: pytest.CaptureFixture[str]) -> None:
    """A run kept before the planner drew its seeded weights with numpy had other weights
    for the same weights_seed: probed as "the run's own model", unsaid."""
    ours = TorchPlanner(TorchPlannerConfig(weights_seed=4)).weights_sha256
    run = {"policy": "torch", "weights": "", "weights_seed": 4, "samples": 1, "dtype": "float32"}

    def loader(_run_dir: Path) -> list[Observation]:
        return generated_inputs(3, SURROUND_CAMERAS)

    argv = ["--inputs", "RUN", "--calls", "1", "--deterministic", "on"]
    assert main(argv, loader, lambda _run_dir: {**run, "weights_sha256": ours}) == 0
    capsys.readouterr()
    assert main(argv, loader, lambda _run_dir: {**run, "weights_sha256": "d" * 64}) == 2
    err = capsys.readouterr().err
    assert "expected the run's model (sha256 dddddddddddddddd), or --weights, got \"seeded:4: sha256 " in err
    assert "other weights than the run's" in err
    # another seed asked for on the command line is probed as asked
    assert main([*argv, "--weights-seed", "4"], loader, lambda _run_dir: {**run, "weights_sha256": "d" * 64}) == 0
