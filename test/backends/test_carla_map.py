"""`simforge carla-map` against the CARLA test double (no CARLA server can run here): the
town's spawn points and traffic lights in the map frame, read without changing the world."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simforge_ros.backends.carla_map import main

DOUBLE = Path(__file__).resolve().parents[1] / "carla_double"


def _cli(*args: str, double: bool = True, faults: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CARLA_DOUBLE_FAULTS")}
    if double:
        env["PYTHONPATH"] = str(DOUBLE)
    if faults:
        env["CARLA_DOUBLE_FAULTS"] = faults
    exe = Path(sys.executable).with_name("simforge")
    return subprocess.run([str(exe), "carla-map", *args], capture_output=True, text=True, env=env, timeout=120)


def test_it_lists_spawn_points_and_lights_mirrored_into_the_map_frame():
    out = _cli()
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "carla 0.10.0-double at localhost:2000, map Carla/Maps/Double"
    # the double's spawn points: CARLA (-50, 1.75) yaw 0 and (1.75, -120) yaw 90 degrees
    assert "  0: {x_m: -50.0, y_m: -1.75, yaw_rad: 0.0}" in lines  # not -0.0
    assert "  1: {x_m: 1.75, y_m: 120.0, yaw_rad: -1.5708}" in lines
    # its lights at CARLA (9, 5), (5, -9), (300, 300): red_signal's signals stand at the first two
    assert [line.split(": ", 1)[1] for line in lines if "carla id" in line] == [
        "{x_m: 9.0, y_m: -5.0}", "{x_m: 5.0, y_m: 9.0}", "{x_m: 300.0, y_m: -300.0}"]


def test_json_carries_the_same(tmp_path):
    out = _cli("--json")
    assert out.returncode == 0, out.stderr
    town = json.loads(out.stdout)
    assert town["map"] == "Carla/Maps/Double" and len(town["spawn_points"]) == 2
    assert [(t["x_m"], t["y_m"]) for t in town["traffic_lights"]] == [(9.0, -5.0), (5.0, 9.0), (300.0, -300.0)]


def test_no_server_is_one_line_and_exit_1():
    out = _cli("--port", "2010", faults="down")
    assert out.returncode == 1
    assert out.stderr.startswith("simforge carla-map: no answer from a CARLA server at localhost:2010")
    assert "Traceback" not in out.stderr and len(out.stderr.splitlines()) == 1


def test_without_the_carla_module_it_says_what_to_install():
    out = _cli(double=False)
    assert out.returncode == 2 and "CARLA 0.10 Python API" in out.stderr and "Traceback" not in out.stderr


def test_it_leaves_the_world_as_it_was(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(DOUBLE))
    monkeypatch.delenv("CARLA_DOUBLE_FAULTS", raising=False)
    sys.modules.pop("carla", None)
    try:
        import carla

        world = carla.Client().get_world()
        before = (world.get_settings().synchronous_mode, world.get_snapshot().frame, len(world.get_actors()))
        assert main([]) == 0
        assert (world.get_settings().synchronous_mode, world.get_snapshot().frame, len(world.get_actors())) == before
        assert "traffic lights (3;" in capsys.readouterr().out
    finally:
        sys.modules.pop("carla", None)


@pytest.mark.parametrize("argv", [["--help"], ["--port", "x"]])
def test_its_command_line(argv):
    assert main(argv) == (0 if argv == ["--help"] else 2)


@pytest.mark.parametrize(("argv", "said"), [
    (["--port", "70000"], "--port: sim_bridge.carla_port: expected an integer in [1, 65535], got 70000"),
    (["--port", "0"], "--port: sim_bridge.carla_port: expected an integer in [1, 65535], got 0"),
    (["--timeout-ms", "-1"], "--timeout-ms: sim_bridge.carla_timeout_ms: expected an integer > 0, got -1"),
])
def test_a_bad_port_or_time_out_is_said_before_the_carla_module_is_looked_for(argv, said):
    """Said only once the carla module was installed (here, without it: what to install)."""
    out = _cli(*argv, double=False)
    assert out.returncode == 2 and out.stderr == f"simforge carla-map: {said}\n"
