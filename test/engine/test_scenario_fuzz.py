"""Mutated seed scenarios: each file is either refused naming a field (ScenarioError) or
loads, drives and renders without an exception. A fuzz of 1 500 such files found a
coordinate of 1e308 that the renderer overflowed on and a zero-length stop line it
divided by; the schema's limits (core.limits) now refuse both."""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from simforge_ros.drivers.route_follower import RouteFollower
from simforge_ros.engine import Engine, ScenarioError, load_scenario

REPO_SCENARIOS = Path(__file__).resolve().parents[2] / "config" / "scenarios"
ODD = [None, "x", -1, 0, 1e308, float("nan"), float("inf"), [], {}, True, -1e9, 2.5, "1", [1, 2]]


def _leaves(obj: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield (*path, key), value
            yield from _leaves(value, (*path, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield (*path, i), value
            yield from _leaves(value, (*path, i))


def _mutated(rng: random.Random, doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    path, value = rng.choice(list(_leaves(doc)))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and rng.random() < 0.5:
        parent[path[-1]] = rng.choice([0 * value, -value, value * 1e3, value + 0.5, value * 1e5])
    elif rng.random() < 0.1:
        del parent[path[-1]]
    else:
        parent[path[-1]] = rng.choice(ODD)
    return doc


@pytest.mark.parametrize("seed", range(4))
def test_a_mutated_scenario_is_refused_by_field_or_runs_and_renders(tmp_path, seed):
    rng = random.Random(seed)
    seeds = {p.stem: yaml.safe_load(p.read_text()) for p in sorted(REPO_SCENARIOS.glob("*.yaml"))}
    loaded = 0
    for i in range(60):
        path = tmp_path / f"m{i}.yaml"
        path.write_text(yaml.safe_dump(_mutated(rng, seeds[rng.choice(sorted(seeds))])))
        try:
            scenario = load_scenario(path)
        except ScenarioError as err:
            assert str(err).startswith(f"{path}: ")  # names the file, then the field
            continue
        loaded += 1
        engine = Engine(scenario, 0, width=32, height=18)
        follower = RouteFollower(scenario)
        for step in range(20):
            steer, accel = follower.command(engine.ego_state(step))
            assert math.isfinite(steer) and math.isfinite(accel)
            engine.advance(steer, accel, 5)
            if step % 10 == 0:
                for camera in engine.cameras:
                    assert engine.render(camera, engine.t_us).pixels.shape == (18, 32, 3)
    assert loaded > 0  # the mutations also leave files that load: the run-and-render half is exercised
