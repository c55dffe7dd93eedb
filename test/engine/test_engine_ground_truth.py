"""Engine.ground_truth: every scripted actor and signal as the world steps with them, at
the engine's own time (what sim_bridge.ground_truth publishes)."""

from __future__ import annotations

import pytest

from simforge_ros.backends.embedded import EmbeddedBackend
from simforge_ros.engine import Engine, load_scenario
from simforge_ros.engine.paths import PathReplay
from simforge_ros.engine.signals import signal_state


@pytest.mark.parametrize("name", ["red_signal", "right_turn"])
def test_ground_truth_is_what_the_world_steps_with(name):
    scenario = load_scenario(name)
    engine = Engine(scenario, seed=0, tick_us=20_000)
    seen_states = set()
    for _ in range(40):
        engine.advance(0.0, 1.0, 10)  # 0.2 s a look
        truth = engine.ground_truth()
        assert truth.t_us == engine.t_us
        assert [a.id for a in truth.actors] == [a.id for a in scenario.actors]
        poses = engine.actor_poses()
        for actor, spec in zip(truth.actors, scenario.actors, strict=True):
            assert actor.pose == poses[actor.id]
            assert (actor.vx_mps, actor.vy_mps) == PathReplay(spec.path).velocity_at(truth.t_us)
            assert (actor.kind, actor.length_m, actor.width_m, actor.height_m) == (
                spec.kind, spec.length_m, spec.width_m, spec.height_m)
        assert [(s.id, s.state) for s in truth.signals] == list(engine.signal_states().items())
        for head, spec in zip(truth.signals, scenario.signals, strict=True):
            assert (head.x_m, head.y_m) == (spec.x_m, spec.y_m)
            assert head.state == signal_state(spec, truth.t_us)
            seen_states.add(head.state)
    assert any(a.vx_mps or a.vy_mps for a in truth.actors)  # something moves
    if name == "red_signal":
        assert len(seen_states) > 1  # and a light changes within the 8 s looked at


def test_the_backend_gives_the_engines_ground_truth():
    backend = EmbeddedBackend("red_signal", 20_000)
    backend.load(0)
    backend.advance(0.0, 0.5, 25)
    assert backend.ground_truth() == backend.engine.ground_truth()
    assert backend.ground_truth().t_us == 500_000
