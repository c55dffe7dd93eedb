"""The embedded driving-simulation engine: lockstep world, scenarios, cameras, digest.

Pure numpy/python (no rclpy, no wall clock, no global RNG). See world.Engine for the API and
docs/scenarios.md for the scenario file schema.
"""

from __future__ import annotations

from simforge_ros.engine.cameras import (
    CAMERA_NAMES,
    CAMERAS,
    SURROUND_RIG,
    CameraMount,
    extrinsics,
    intrinsics,
    optical_quaternion,
)
from simforge_ros.engine.catalog import list_scenarios, load_scenario, scenario_dirs
from simforge_ros.engine.contacts import EGO_ID, EGO_STOPPED_MPS, ContactEvent, is_harness_fault
from simforge_ros.engine.scenario import Actor, RouteWaypoint, Scenario, ScenarioError, Signal, VehicleParams
from simforge_ros.engine.vehicle import EgoState
from simforge_ros.engine.world import ENGINE_VERSION, Engine, Frame, StaleRenderError

__all__ = [
    "CAMERAS",
    "CAMERA_NAMES",
    "EGO_ID",
    "EGO_STOPPED_MPS",
    "ENGINE_VERSION",
    "SURROUND_RIG",
    "Actor",
    "CameraMount",
    "ContactEvent",
    "EgoState",
    "Engine",
    "Frame",
    "RouteWaypoint",
    "Scenario",
    "ScenarioError",
    "Signal",
    "StaleRenderError",
    "VehicleParams",
    "extrinsics",
    "intrinsics",
    "is_harness_fault",
    "list_scenarios",
    "load_scenario",
    "optical_quaternion",
    "scenario_dirs",
]
