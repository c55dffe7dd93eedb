"""The driver policy interface: what the driver node asks of any policy.

A policy decides from the observation of one step only (state and the frames stamped for
that step's exact time). It never sees a clock other than the step's t_us, and every random
number it draws comes from a generator built from the run seed given to ``reset``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from simforge_ros.core.values import Action, VehicleState


@dataclass(frozen=True)
class Observation:
    """Everything a policy may use at step ``step``: named, never 'the latest'."""

    step: int
    t_us: int
    decision_us: int
    state: VehicleState
    frames: Mapping[str, np.ndarray]  # camera name -> HxWx3 uint8 rgb, stamped exactly t_us


class Policy(Protocol):
    """A driver policy. Implementations: route follower, torch planner, test doubles."""

    name: str

    def reset(self, seed: int, decision_us: int) -> None:
        """Start a run. Validates periods against decision_us.

        Raises:
            RateNotMultiple: a planning period is not a whole number of steps.
        """

    def cameras_at(self, step: int) -> tuple[str, ...]:
        """Cameras whose frames this policy needs at ``step`` (empty: it ignores pixels)."""

    def decide(self, obs: Observation) -> Action:
        """The action for step obs.step, decided from obs only."""

    def describe(self) -> dict[str, Any]:
        """Configuration for the run manifest (JSON-able; hashed into the driver digest)."""


FRAME_CHECK_STEPS = 100_000
"""How far ahead ``first_step_without_frames`` looks (2.8 hours of 0.1 s steps)."""


def first_step_without_frames(policy: Policy, camera_period_steps: int,
                              horizon: int = FRAME_CHECK_STEPS) -> int | None:
    """The first step at which ``policy`` needs frames that a bridge rendering every
    ``camera_period_steps`` steps does not render, or None.

    A planner that plans every 5 steps with cameras every 3 would otherwise be refused
    ``missing_frame`` at step 5, or at step 101 for other periods: the mismatch is in the
    setup, so it is named at step 0, after ``reset``, like a period that is not a whole
    number of steps. Steps past ``horizon`` are not looked at (a need there is still
    refused when it comes).
    """
    if camera_period_steps <= 1:
        return None
    return next((k for k in range(horizon) if k % camera_period_steps and policy.cameras_at(k)), None)
