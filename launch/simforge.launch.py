"""Start a simforge_ros lockstep run on a real ROS 2 install:

    ros2 launch simforge_ros simforge.launch.py scenario:=right_turn driver:=route \
        latency_us:=0 seed:=0 out_dir:=/tmp/simforge-run

and against a CARLA 0.10 server (a scenario written in its town's coordinates):

    ros2 launch simforge_ros simforge.launch.py backend:=carla carla_host:=localhost \
        scenario:=/path/to/town10_scenario.yaml

The same four executables and parameter names as `simforge run --layout processes`. The
parameter file (``params_file``, config/simforge.yaml by default) holds the parameters; a
launch argument given overrides the file's value, one left empty leaves it to the file.
The arguments and the file are checked before any node starts (simforge_ros.launch_plan,
as `simforge run` checks its options). The clock master ends the run; its exit ends the
launch.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from ament_index_python.packages import get_package_share_directory
from launch import LaunchContext, LaunchDescription
from launch.actions import (
    DeclareLaunchArgument,
    EmitEvent,
    OpaqueFunction,
    RegisterEventHandler,
    SetEnvironmentVariable,
)
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown
from launch.substitutions import EnvironmentVariable, LaunchConfiguration
from launch_ros.actions import Node

from simforge_ros.launch_plan import ARGS, plan
from simforge_ros.params import params_yaml


def _nodes(context: LaunchContext, default_params_file: str) -> list[Any]:
    """The nodes, once the launch arguments are known: each handed the parameter file and
    then the arguments given, typed as its parameters are declared. A bad argument or file
    ends the launch here, named, before any node starts."""
    planned = plan({arg: LaunchConfiguration(arg).perform(context) for arg in ARGS}, Path(default_params_file))
    # a file of our own, not a dict: launch_ros writes a dict's strings unquoted, and rcl
    # reads run_id 08 as a double (params.params_yaml)
    fd, handed = tempfile.mkstemp(prefix="simforge_launch_", suffix=".yaml")
    with os.fdopen(fd, "w") as file:
        file.write(params_yaml(planned.nodes))
    nodes = {name: Node(package="simforge_ros", executable=name, name=name, output="screen",
                        parameters=[str(planned.params_file), handed])
             for name in planned.nodes}
    end_with_clock = RegisterEventHandler(OnProcessExit(target_action=nodes["clock_master"],
                                                        on_exit=[EmitEvent(event=Shutdown())]))
    return [*nodes.values(), end_with_clock]


def generate_launch_description() -> LaunchDescription:
    share = get_package_share_directory("simforge_ros")
    declared = [DeclareLaunchArgument(arg, default_value=item.default, description=item.doc)
                for arg, item in ARGS.items()]
    # the Fast DDS profile `simforge run` gives its node processes (a shared-memory segment a
    # four-camera step fits in, writers' heartbeats every 100 ms), unless one of yours is named
    profile = os.path.join(share, "config", "fastdds_shm.xml")
    fastdds = SetEnvironmentVariable("FASTDDS_DEFAULT_PROFILES_FILE",
                                     EnvironmentVariable("FASTDDS_DEFAULT_PROFILES_FILE", default_value=profile))
    nodes = OpaqueFunction(function=_nodes, args=[os.path.join(share, "config", "simforge.yaml")])
    return LaunchDescription([*declared, fastdds, nodes])
