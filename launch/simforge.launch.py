"""Start a simforge_ros lockstep run on a real ROS 2 install:

    ros2 launch simforge_ros simforge.launch.py scenario:=right_turn driver:=route \
        latency_us:=0 seed:=0 out_dir:=/tmp/simforge-run

and against a CARLA 0.10 server (a scenario written in its town's coordinates):

    ros2 launch simforge_ros simforge.launch.py backend:=carla carla_host:=localhost \
        scenario:=/path/to/town10_scenario.yaml

The same four executables and parameter names as `simforge run --layout processes`; the
parameter file (config/simforge.yaml by default) holds every other parameter. The clock
master ends the run; its exit ends the launch.
"""

from __future__ import annotations

import os
from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from launch import LaunchContext, LaunchDescription
from launch.actions import (
    DeclareLaunchArgument,
    EmitEvent,
    OpaqueFunction,
    RegisterEventHandler,
    SetEnvironmentVariable,
)
from launch.conditions import IfCondition, UnlessCondition
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown
from launch.substitutions import EnvironmentVariable, LaunchConfiguration, PythonExpression
from launch_ros.actions import Node

from simforge_ros.params import planner_cameras

# what the bridge takes from the launch arguments besides the parameter file
_BRIDGE_ARGS = ("scenario", "base_frame", "camera_tf", "tf", "backend", "carla_host", "carla_port")


def _bridge_for_torch(context: LaunchContext) -> list[Node]:
    """The bridge, rendering the cameras the torch planner looks at: the parameter file's
    driver.cameras (read when the launch runs), as `simforge run --driver torch` does."""
    params_file = LaunchConfiguration("params_file").perform(context)
    cameras = planner_cameras(Path(params_file))
    return [Node(package="simforge_ros", executable="sim_bridge", name="sim_bridge", output="screen",
                 parameters=[params_file, {**{k: LaunchConfiguration(k) for k in _BRIDGE_ARGS}, "cameras": cameras}])]


def generate_launch_description() -> LaunchDescription:
    share = get_package_share_directory("simforge_ros")
    args = {
        "scenario": ("right_turn", "scenario name or scenario file"),
        "driver": ("route", "driver policy: route | torch | external (start your own node offering "
                            "/simforge/decide; see the README)"),
        "latency_us": ("0", "driver latency in microseconds (a whole number of steps)"),
        "seed": ("0", "run seed"),
        "steps": ("0", "steps to run; 0 = the whole scenario"),
        "real_time_factor": ("0.0", "simulation seconds a wall second may hold: 1 = real time (to watch the run "
                                    "live), 0 = as fast as the participants answer (clock_master.real_time_factor)"),
        "hold_at_step": ("-1", "hold the run once step K is done (0: at t(0)) until /simforge/pause "
                               "(std_srvs/SetBool) is called with false; -1: never (clock_master.hold_at_step)"),
        "out_dir": ("/tmp/simforge-run", "run directory (must not exist yet)"),
        "run_id": ("launch", "run id"),
        "params_file": (os.path.join(share, "config", "simforge.yaml"), "ROS 2 parameter file"),
        "camera_tf": ("true", "the bridge publishes each rendered camera's frame (its images' frame_id) "
                              "on /tf_static, from base_frame (sim_bridge.camera_tf)"),
        "tf": ("false", "the bridge publishes map_frame -> base_frame on /tf once a step (sim_bridge.tf)"),
        "backend": ("embedded", "the simulator: embedded (this package's engine) | carla (a CARLA 0.10 server, "
                                "run synchronous; sim_bridge.backend, the other carla_* in the parameter file)"),
        "carla_host": ("localhost", "carla backend: the server's host (sim_bridge.carla_host)"),
        "carla_port": ("2000", "carla backend: the server's RPC port (sim_bridge.carla_port)"),
        "base_frame": ("base_link", "the ego's frame: its rear axle on the ground, x forward, y left, z up "
                                    "(the pose /simforge/state carries); the cameras' parent, and the "
                                    "child frame of the bridge's odometry and /tf (sim_bridge.base_frame)"),
    }
    declared = [DeclareLaunchArgument(k, default_value=v, description=d) for k, (v, d) in args.items()]
    # the Fast DDS profile `simforge run` gives its node processes (a shared-memory segment a
    # four-camera step fits in, writers' heartbeats every 100 ms), unless one of yours is named
    profile = os.path.join(share, "config", "fastdds_shm.xml")
    fastdds = SetEnvironmentVariable("FASTDDS_DEFAULT_PROFILES_FILE",
                                     EnvironmentVariable("FASTDDS_DEFAULT_PROFILES_FILE", default_value=profile))
    cfg = {k: LaunchConfiguration(k) for k in args}
    params_file = cfg["params_file"]
    recorder = Node(package="simforge_ros", executable="recorder", name="recorder", output="screen",
                    parameters=[params_file, {"out_dir": cfg["out_dir"], "run_id": cfg["run_id"]}])
    # with driver:=torch the bridge renders what the planner looks at (driver.cameras in the
    # parameter file, or the four surround cameras), whatever the file's rig for the bridge
    is_torch = PythonExpression(["'", cfg["driver"], "' == 'torch'"])
    bridge = Node(package="simforge_ros", executable="sim_bridge", name="sim_bridge", output="screen",
                  parameters=[params_file, {k: cfg[k] for k in _BRIDGE_ARGS}],
                  condition=UnlessCondition(is_torch))
    bridge_for_torch = OpaqueFunction(function=_bridge_for_torch, condition=IfCondition(is_torch))
    driver = Node(package="simforge_ros", executable="driver", name="driver", output="screen",
                  parameters=[params_file, {"policy": cfg["driver"], "scenario": cfg["scenario"]}],
                  condition=UnlessCondition(PythonExpression(["'", cfg["driver"], "' == 'external'"])))
    clock = Node(package="simforge_ros", executable="clock_master", name="clock_master", output="screen",
                 parameters=[params_file, {"latency_us": cfg["latency_us"], "seed": cfg["seed"],
                                           "steps": cfg["steps"], "run_id": cfg["run_id"],
                                           "real_time_factor": cfg["real_time_factor"],
                                           "hold_at_step": cfg["hold_at_step"]}])
    end_with_clock = RegisterEventHandler(OnProcessExit(target_action=clock, on_exit=[EmitEvent(event=Shutdown())]))
    return LaunchDescription([*declared, fastdds, recorder, bridge, bridge_for_torch, driver, clock, end_with_clock])
