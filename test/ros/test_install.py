"""The install provides what `ros2 run` and launch_ros look for on a real ROS 2 install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from simforge_ros.params import NODE_PARAMS

PREFIX = Path(sys.prefix)


def test_ament_index_marks_the_package():
    marker = PREFIX / "share" / "ament_index" / "resource_index" / "packages" / "simforge_ros"
    assert marker.is_file()
    assert (PREFIX / "share" / "ament_index" / "resource_index" / "rosidl_interfaces" / "simforge_ros").is_file()
    package_xml = (PREFIX / "share" / "simforge_ros" / "package.xml").read_text()
    assert "<name>simforge_ros</name>" in package_xml
    for scenario in ("right_turn", "unprotected_left", "red_signal", "handover_parked"):
        assert (PREFIX / "share" / "simforge_ros" / "config" / "scenarios" / f"{scenario}.yaml").is_file()
    assert (PREFIX / "share" / "simforge_ros" / "launch" / "simforge.launch.py").is_file()
    for example in ("external_driver.py", "ground_truth_driver.py"):
        assert (PREFIX / "share" / "simforge_ros" / "examples" / example).is_file()


@pytest.mark.parametrize("node", sorted(NODE_PARAMS))
def test_node_executable_starts_and_answers_help(node, tmp_path):
    exe = PREFIX / "lib" / "simforge_ros" / node
    assert exe.is_file() and os.access(exe, os.X_OK)
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"simforge_ros {node} node" in out.stdout
    lines = {line.split()[0]: line for line in out.stdout.splitlines() if line.startswith("  ")}
    for item in NODE_PARAMS[node]:
        assert item.name in lines
        # the range `ros2 param describe` shows, where there is one
        assert not item.limits() or f" [{item.limits()}]: " in lines[item.name], lines[item.name]
    if node == "sim_bridge":
        assert "default 320 [2..8192]: camera image width" in lines["width"]


def test_console_scripts_installed():
    for script in ("simforge", "simforge-clock-master", "simforge-sim-bridge", "simforge-driver", "simforge-recorder"):
        assert (PREFIX / "bin" / script).is_file(), script
