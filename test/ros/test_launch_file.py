"""The installed launch file (share/simforge_ros/launch/simforge.launch.py, found through
the ament index as `ros2 launch` finds it), run with a stand-in for the launch API, and the
nodes it describes started as launch_ros starts them: a counted run that verifies.

launch and launch_ros do not install from PyPI: test/launch_standin stands in for the
names the launch file uses, with upstream's signatures, and only records what it is given
(a test double; see its README). Before, the launch file itself never ran here: only
simforge_ros.launch_plan, which it calls, did."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from runs import simforge

from simforge_ros.launch_plan import ARGS, NODES
from simforge_ros.under_launch import LAUNCH_INTERRUPT_S, UNDER_LAUNCH_ENV

pytestmark = pytest.mark.ros
STANDIN = Path(__file__).resolve().parents[1] / "launch_standin"
PREFIX = Path(sys.prefix)

_TRACE = """\
import json, runpy, sys
sys.path.insert(0, {standin!r})
from launch import LaunchContext
from launch.actions import (DeclareLaunchArgument, EmitEvent, LogInfo, OpaqueFunction, RegisterEventHandler,
                            SetEnvironmentVariable)
from launch.event_handlers import OnProcessExit, OnShutdown
from launch_ros.actions import Node
from ament_index_python.packages import get_package_share_directory

path = get_package_share_directory("simforge_ros") + "/launch/simforge.launch.py"
described = runpy.run_path(path)["generate_launch_description"]()
declared = {{e.name: e.default_value for e in described.entities if isinstance(e, DeclareLaunchArgument)}}
context = LaunchContext()
context.launch_configurations.update({{**declared, **{given!r}}})  # as launch sets them
(opaque,) = [e for e in described.entities if isinstance(e, OpaqueFunction)]
actions = opaque.function(context, *opaque.args)
nodes = [a for a in actions if isinstance(a, Node)]
handlers = [a.event_handler for a in actions if isinstance(a, RegisterEventHandler)]


class Exited:  # launch's ProcessExited event, as far as the handlers read it
    def __init__(self, returncode):
        self.returncode = returncode


def ends(handler, returncode):
    got = handler.on_exit if isinstance(handler.on_exit, list) else handler.on_exit(Exited(returncode), context)
    return [type(a.event).__name__ for a in got or [] if isinstance(a, EmitEvent)]


print(json.dumps({{
    "launch_file": path,
    "declared": sorted(declared),
    "env": [[e.name, e.value.perform(context)] for e in described.entities if isinstance(e, SetEnvironmentVariable)],
    "said": [a.msg for a in actions if isinstance(a, LogInfo)],
    "nodes": [{{"package": n.package, "executable": n.executable, "name": n.name, "parameters": n.parameters,
                **n.kwargs}} for n in nodes],
    "on_exit": {{h.target_action.name: {{"2": ends(h, 2), "0": ends(h, 0)}}
                for h in handlers if isinstance(h, OnProcessExit)}},
    "shutdown_handlers": len([h for h in handlers if isinstance(h, OnShutdown)]),
}}))
for h in handlers:  # the launch ends: its own parameter file goes
    if {shut_down} and isinstance(h, OnShutdown):
        h.on_shutdown(None, context)
"""


def _describe(given: dict[str, str], env: dict[str, str], shut_down: bool = False) -> dict[str, Any]:
    """What the launch file describes with the launch arguments ``given``; ``shut_down``:
    and then the launch ends (its OnShutdown handlers run)."""
    script = _TRACE.format(standin=str(STANDIN), given=given, shut_down=shut_down)
    traced = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert traced.returncode == 0, traced.stderr
    return json.loads(traced.stdout)


def test_the_installed_launch_file_starts_the_four_nodes_to_a_counted_run(ros_lease, tmp_path):
    run_dir = tmp_path / "run"
    env = {**ros_lease.env, "AMENT_PREFIX_PATH": str(PREFIX)}
    env.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)  # the launch file names the package's own
    given = {"steps": "12", "out_dir": str(run_dir), "run_id": "launched"}
    described = _describe(given, env)
    assert described["launch_file"] == str(PREFIX / "share" / "simforge_ros" / "launch" / "simforge.launch.py")
    assert described["declared"] == sorted(ARGS)
    # nothing in the launch's environment (an including launch file's later processes got
    # the Fast DDS profile too): the nodes take it themselves (nodes.common.start_rclpy)
    assert described["env"] == []
    assert described["said"] == [f"simforge: the run goes to {run_dir}"]
    nodes = described["nodes"]
    assert [n["name"] for n in nodes] == list(NODES) and all(n["package"] == "simforge_ros" for n in nodes)
    for node in nodes:
        # ros2 launch runs <prefix>/lib/<package>/<executable>, as ros2 run does
        assert (PREFIX / "lib" / "simforge_ros" / node["executable"]).is_file(), node
        assert node["parameters"][0] == str(PREFIX / "share" / "simforge_ros" / "config" / "simforge.yaml")
        assert float(node["sigterm_timeout"]) > LAUNCH_INTERRUPT_S  # after a participant's own wait
        assert node["additional_env"] == ({} if node["name"] == "clock_master" else {UNDER_LAUNCH_ENV: "1"})
    # the clock master's exit ends the launch whatever its status; a participant's only at start-up (2)
    assert described["on_exit"] == {"clock_master": {"2": ["Shutdown"], "0": ["Shutdown"]},
                                    **{n: {"2": ["Shutdown"], "0": []} for n in NODES if n != "clock_master"}}
    assert described["shutdown_handlers"] == 1

    # each node started as launch_ros starts it: `<exe> --ros-args -r __node:=NAME --params-file ...`
    procs: dict[str, subprocess.Popen[str]] = {}
    for node in nodes:
        files = [arg for path in node["parameters"] for arg in ("--params-file", path)]
        procs[node["name"]] = subprocess.Popen(
            [str(PREFIX / "lib" / "simforge_ros" / node["executable"]), "--ros-args", "-r", f"__node:={node['name']}",
             *files], env={**env, **node["additional_env"]},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        logs = {"clock_master": procs["clock_master"].communicate(timeout=120)[0]}
        for proc in procs.values():  # launch's Shutdown: SIGINT to every node still running
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        wall_deadline = time.monotonic() + 60
        for name, proc in procs.items():
            logs[name] = proc.communicate(timeout=max(1.0, wall_deadline - time.monotonic()))[0]
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    assert {name: p.returncode for name, p in procs.items()} == dict.fromkeys(NODES, 0), logs
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert (manifest["status"], manifest["steps"], manifest["run_id"]) == ("counted", 12, "launched"), logs
    checked = simforge("verify", str(run_dir), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # a launched run has no params.yaml (simforge run writes it): its rerun asks what its
    # nodes reported in the manifest (it was refused, the file missing)
    assert not (run_dir / "params.yaml").exists()
    again = simforge("rerun", str(run_dir), "--out", str(tmp_path / "reruns"), cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.endswith("repeated bit for bit\n"), again.stdout + again.stderr
    assert "params.yaml is missing (a run not started by simforge run" in again.stderr

    # the launch file's own parameter file stays until the launch ends, and then goes
    handed = Path(nodes[0]["parameters"][1])
    assert handed.is_file()
    again = _describe(given | {"out_dir": str(tmp_path / "next")}, env, shut_down=True)
    assert not Path(again["nodes"][0]["parameters"][1]).exists()
    handed.unlink()
    # an argument name within a typo of one is named in the launch's log, before the rest
    said = _describe(given | {"out_dir": str(tmp_path / "third"), "scenaro": "unprotected_left"}, env,
                     shut_down=True)["said"]
    assert said == ["simforge: launch argument scenaro is none of simforge's (did you mean scenario?); it sets "
                    "nothing here", f"simforge: the run goes to {tmp_path / 'third'}"]
