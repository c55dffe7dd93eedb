"""Start a simforge_ros lockstep run on a real ROS 2 install:

    ros2 launch simforge_ros simforge.launch.py scenario:=right_turn driver:=route \
        latency_us:=0 seed:=0 out_dir:=/tmp/simforge-run

and against a CARLA 0.10 server (a scenario written in its town's coordinates):

    ros2 launch simforge_ros simforge.launch.py backend:=carla carla_host:=localhost \
        scenario:=/path/to/town10_scenario.yaml

The same four executables and parameter names as `simforge run --layout processes`. The
parameter file (``params_file``, config/simforge.yaml by default) holds the parameters; a
launch argument given overrides the file's value, one left empty leaves it to the file.
The arguments, the scenario, the run directory and the file are checked before any node
starts (simforge_ros.launch_plan, as `simforge run` checks its options); an argument
name within a typo of one of these is named in the launch's log (launch takes any
``name:=value``, and an including file's own arguments may come close to these). Without
``out_dir`` (in neither), each run goes to /tmp/simforge-run, or /tmp/simforge-run-2,
-3, ... once that holds one; the launch's log says which. The clock master ends the run;
its exit ends the launch, as does a participant's exit with a start-up error (status 2,
its line said).

Ctrl-C reaches every node of the launch at once: the clock master aborts the run at its
next step, and the participants (SIMFORGE_UNDER_LAUNCH=1) serve until it has, so the run
is kept `aborted`, as `simforge run` keeps it. `ros2 launch` itself exits 0 whatever the
run's end: the run's status is in its manifest.json (and the clock master's exit status).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

from ament_index_python.packages import get_package_share_directory
from launch import LaunchContext, LaunchDescription
from launch.actions import (
    DeclareLaunchArgument,
    EmitEvent,
    LogInfo,
    OpaqueFunction,
    RegisterEventHandler,
)
from launch.event_handlers import OnProcessExit, OnShutdown
from launch.events import Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from simforge_ros.core.errors import EXIT_USAGE
from simforge_ros.launch_plan import ARGS, plan
from simforge_ros.params import params_yaml
from simforge_ros.under_launch import LAUNCH_INTERRUPT_S, UNDER_LAUNCH_ENV

# launch's SIGTERM after Ctrl-C, then its SIGKILL: after a participant's own wait for the
# run's end (LAUNCH_INTERRUPT_S), so an aborted run's Finish is not cut short
SIGTERM_TIMEOUT_S = str(int(LAUNCH_INTERRUPT_S) + 5)


def _nodes(context: LaunchContext, default_params_file: str) -> list[Any]:
    """The nodes, once the launch arguments are known: each handed the parameter file and
    then the arguments given, typed as its parameters are declared. A bad argument or file
    ends the launch here, named, before any node starts."""
    planned = plan({arg: LaunchConfiguration(arg).perform(context) for arg in ARGS}, Path(default_params_file),
                   others=list(context.launch_configurations))
    # a file of our own, not a dict: launch_ros writes a dict's strings unquoted, and rcl
    # reads run_id 08 as a double (params.params_yaml)
    fd, handed = tempfile.mkstemp(prefix="simforge_launch_", suffix=".yaml")
    with os.fdopen(fd, "w") as file:
        file.write(params_yaml(planned.nodes))
    nodes = {name: Node(package="simforge_ros", executable=name, name=name, output="screen",
                        parameters=[str(planned.params_file), handed], sigterm_timeout=SIGTERM_TIMEOUT_S,
                        additional_env={} if name == "clock_master" else {UNDER_LAUNCH_ENV: "1"})
             for name in planned.nodes}
    end_with_clock = RegisterEventHandler(OnProcessExit(target_action=nodes["clock_master"],
                                                        on_exit=[EmitEvent(event=Shutdown())]))
    # a participant that could not start (a bad parameter, a module missing) said why and
    # exited 2: the launch ends there, not at the clock master's start-up limit
    ends = [RegisterEventHandler(OnProcessExit(target_action=node, on_exit=_start_failed(name)))
            for name, node in nodes.items() if name != "clock_master"]
    forget = RegisterEventHandler(OnShutdown(on_shutdown=lambda _event, _context: _remove(handed)))
    said = [LogInfo(msg=note) for note in planned.notes]
    said.append(LogInfo(msg=f"simforge: the run goes to {planned.out_dir}"))
    return [*said, *nodes.values(), end_with_clock, *ends, forget]


def _start_failed(name: str) -> Any:
    def on_exit(event: Any, _context: LaunchContext) -> Any:
        if event.returncode != EXIT_USAGE:
            return None
        return [EmitEvent(event=Shutdown(reason=f"{name} could not start (its line above says why)"))]

    return on_exit


def _remove(path: str) -> None:
    """The launch's own parameter file, once the launch ends."""
    with contextlib.suppress(OSError):
        os.unlink(path)


def generate_launch_description() -> LaunchDescription:
    share = get_package_share_directory("simforge_ros")
    declared = [DeclareLaunchArgument(arg, default_value=item.default, description=item.doc)
                for arg, item in ARGS.items()]
    # each node takes the Fast DDS profile `simforge run` gives its node processes (a
    # shared-memory segment a four-camera step fits in, writers' heartbeats every 100 ms)
    # itself, unless one of yours is named (nodes.common.start_rclpy): set here, in the
    # launch's environment, it also reached every process a launch file including this one
    # started after it
    nodes = OpaqueFunction(function=_nodes, args=[os.path.join(share, "config", "simforge.yaml")])
    return LaunchDescription([*declared, nodes])
