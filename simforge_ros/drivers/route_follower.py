"""A blind route follower: pure pursuit on the authored route, speed from its profile.

It never looks at pixels. Everything it "knows" about traffic is in the route's speed profile:
a waypoint's ``speed_mps`` is the target from that waypoint to the next; a waypoint held with
``hold_until_us`` counts as speed 0 until then (waiting for the van, a gap, a green light).
Slowing for a lower target ahead starts early enough to arrive at it braking at
``comfort_decel_mps2``, harder when needed; below ``creep_mps`` with a zero target it brakes
to a full stop. Deterministic: plain float arithmetic, no RNG.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from simforge_ros.core.values import Action, VehicleState
from simforge_ros.drivers.policy import Observation
from simforge_ros.engine.geometry import clamp
from simforge_ros.engine.route import RouteGeometry
from simforge_ros.engine.scenario import Scenario


@dataclass(frozen=True)
class FollowerGains:
    """Tuning of the pure-pursuit steering and the speed controller."""

    lookahead_min_m: float = 4.0
    lookahead_time_s: float = 0.6
    speed_kp: float = 1.5
    comfort_decel_mps2: float = 2.0
    stop_margin_m: float = 0.5
    creep_mps: float = 0.5


class RouteFollower:
    """Policy following one scenario's ego route; ignores cameras."""

    name = "route"

    def __init__(self, scenario: Scenario, gains: FollowerGains = FollowerGains()) -> None:
        self._scenario = scenario
        self._gains = gains
        self._route = RouteGeometry(scenario.ego.route)
        self._vehicle = scenario.ego.vehicle
        self._decision_us = 0

    def reset(self, seed: int, decision_us: int) -> None:
        """Start a run; the follower has no planning period of its own, so any positive step works."""
        if isinstance(decision_us, bool) or not isinstance(decision_us, int) or decision_us <= 0:
            raise ValueError(f"decision_us must be a positive integer, got {decision_us!r}")
        self._decision_us = decision_us

    def cameras_at(self, step: int) -> tuple[str, ...]:
        return ()

    def decide(self, obs: Observation) -> Action:
        steer, accel = self.command(obs.state)
        return Action(
            step=obs.step,
            decided_step=obs.step,
            t_us=obs.t_us,
            steer_rad=steer,
            accel_mps2=accel,
            has_plan=False,
        )

    def command(self, state: VehicleState) -> tuple[float, float]:
        """(steer_rad, accel_mps2) for a vehicle state at state.t_us."""
        pose = state.pose
        s, _ = self._route.project(pose.x_m, pose.y_m, pose.yaw_rad)
        return self._steer(state, s), self._accel(state, s)

    def _steer(self, state: VehicleState, s: float) -> float:
        g = self._gains
        lookahead = max(g.lookahead_min_m, g.lookahead_time_s * state.speed_mps)
        tx, ty = self._route.point_at(s + lookahead)
        p = state.pose
        dx, dy = tx - p.x_m, ty - p.y_m
        c, sn = math.cos(p.yaw_rad), math.sin(p.yaw_rad)
        lx = c * dx + sn * dy
        ly = -sn * dx + c * dy
        dist = math.hypot(lx, ly)
        if dist < 1e-6:
            return 0.0
        alpha = math.atan2(ly, lx)
        steer = math.atan(2.0 * self._vehicle.wheelbase_m * math.sin(alpha) / dist)
        return clamp(steer, -self._vehicle.max_steer_rad, self._vehicle.max_steer_rad)

    def _target(self, index: int, t_us: int) -> float:
        w = self._route.waypoints[index]
        return 0.0 if t_us < w.hold_until_us else w.speed_mps

    def _accel(self, state: VehicleState, s: float) -> float:
        g = self._gains
        v = state.speed_mps
        s_wp = self._route.s_m
        passed = 0
        for i, sw in enumerate(s_wp):
            if sw <= s:
                passed = i
        target = self._target(passed, state.t_us)
        need = 0.0
        for j in range(passed + 1, len(s_wp)):
            vj = self._target(j, state.t_us)
            room = s_wp[j] - s - g.stop_margin_m
            target = min(target, math.sqrt(vj * vj + 2.0 * g.comfort_decel_mps2 * max(room, 0.0)))
            if vj < v:
                need = max(need, (v * v - vj * vj) / (2.0 * max(room, 0.1)))
        accel = g.speed_kp * (target - v)
        if target == 0.0 and v < g.creep_mps:
            accel = -g.comfort_decel_mps2  # finish the stop instead of creeping up to the line
        if need > g.comfort_decel_mps2:
            accel = min(accel, -need)
        return clamp(accel, -self._vehicle.max_brake_mps2, self._vehicle.max_accel_mps2)

    def describe(self) -> dict[str, Any]:
        return {
            "policy": self.name,
            "scenario": self._scenario.name,
            "scenario_sha256": self._scenario.source_sha256,
            "gains": asdict(self._gains),
        }
