"""Shared helpers for the engine tests, exposed as fixtures (robust to any import mode)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from simforge_ros.drivers.policy import Observation
from simforge_ros.drivers.route_follower import RouteFollower
from simforge_ros.engine import Engine, Scenario

DECISION_US = 100_000


def _minimal_doc() -> dict[str, Any]:
    """A small valid scenario: ego at the origin heading east on a straight road."""
    return {
        "schema": 1,
        "name": "case",
        "duration_us": 15_000_000,
        "ego": {
            "start": {"x_m": 0.0, "y_m": 0.0, "yaw_rad": 0.0, "speed_mps": 0.0},
            "route": [
                {"x_m": 0.0, "y_m": 0.0, "yaw_rad": 0.0, "speed_mps": 5.0},
                {"x_m": 100.0, "y_m": 0.0, "yaw_rad": 0.0, "speed_mps": 5.0},
            ],
        },
        "roads": [{"id": "main", "points": [[-100.0, 0.0], [200.0, 0.0]], "width_m": 7.0}],
        "actors": [
            {
                "id": "car",
                "kind": "vehicle",
                "path": [
                    {"t_us": 0, "x_m": 30.0, "y_m": 0.0, "yaw_rad": 0.0},
                    {"t_us": 1_000_000, "x_m": 31.0, "y_m": 0.0, "yaw_rad": 0.0},
                ],
            }
        ],
    }


@pytest.fixture
def minimal_doc() -> Callable[[], dict[str, Any]]:
    return lambda: copy.deepcopy(_minimal_doc())


@pytest.fixture
def write_doc(tmp_path: Path) -> Callable[..., Path]:
    """Write a document (dict or raw text) as <tmp>/<name>.yaml and return its path."""

    def write(doc: dict[str, Any] | str, name: str = "case") -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
        return path

    return write


def _drive(
    scenario: Scenario, seed: int = 0, ticks_per_step: int = 5
) -> tuple[Engine, list[tuple[float, float]]]:
    """Run the RouteFollower in lockstep over the full duration; the engine and the controls."""
    engine = Engine(scenario, seed, keep_history=True)
    policy = RouteFollower(scenario)
    policy.reset(seed, DECISION_US)
    controls: list[tuple[float, float]] = []
    step = 0
    while engine.t_us < scenario.duration_us:
        action = policy.decide(Observation(step, engine.t_us, DECISION_US, engine.ego_state(step), {}))
        controls.append((action.steer_rad, action.accel_mps2))
        engine.advance(action.steer_rad, action.accel_mps2, ticks_per_step)
        step += 1
    return engine, controls


@pytest.fixture
def drive() -> Callable[..., tuple[Engine, list[tuple[float, float]]]]:
    return _drive
