"""Driver policies by name. torch is imported only when the torch planner is asked for,
so the route-follower path (and the default demo) never pays for it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from simforge_ros.core.errors import ConfigError, Printed
from simforge_ros.drivers.policy import Policy

POLICIES = ("route", "torch")


def check_planner_cameras(cameras: Sequence[str]) -> None:
    """The torch planner's cameras are distinct cameras a bridge renders. Checked before
    they are handed to the bridge too (its own check would name sim_bridge.cameras,
    which the user never set).

    Raises:
        ConfigError: naming driver.cameras.
    """
    from simforge_ros.engine import CAMERA_NAMES

    if not cameras or any(c not in CAMERA_NAMES for c in cameras) or len(set(cameras)) != len(cameras):
        raise ConfigError.single("driver", "cameras", f"a non-empty list of distinct cameras from "
                                 f"{', '.join(CAMERA_NAMES)}", list(cameras))


def make_policy(name: str, params: Mapping[str, Any], planning_period_us: int | None) -> Policy:
    """Build the policy the driver node runs, from its validated parameters.

    Raises:
        ConfigError: unknown policy, bad policy parameters, or a bad scenario.
    """
    if name == "route":
        from simforge_ros.drivers.route_follower import RouteFollower
        from simforge_ros.engine import load_scenario

        try:
            scenario = load_scenario(params["scenario"])
        except ValueError as err:
            raise ConfigError.single("driver", "scenario", "a valid scenario name or file", Printed(str(err))) from None
        return RouteFollower(scenario)
    if name == "torch":
        from simforge_ros.drivers.torch_planner import TorchPlanner, from_params

        check_planner_cameras(list(params["cameras"]))

        config = from_params({
            "cameras": list(params["cameras"]),
            "planning_period_us": planning_period_us if planning_period_us is not None else 500_000,
            "deterministic": params["deterministic"],
            "samples": params["samples"],
            "dtype": params["dtype"],
            "weights_path": params["weights"],
            "weights_seed": params["weights_seed"],
        }, source="driver")
        return TorchPlanner(config, frames_hw=None)  # checked at the bridge's size (Driver._fit_frames)
    raise ConfigError.single("driver", "policy", f"one of {', '.join(POLICIES)}", name)
