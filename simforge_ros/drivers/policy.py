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
