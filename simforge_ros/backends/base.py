"""The interface a simulator must offer the bridge: load, advance whole ticks, observe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from simforge_ros.core.values import ContactEvent, FrameStamp, VehicleState


@dataclass(frozen=True)
class BackendInfo:
    """What a backend reports after loading a scenario."""

    tick_us: int
    scenario: str
    scenario_sha256: str
    duration_us: int
    version: str


@dataclass(frozen=True)
class RenderedFrame:
    """A frame with the stamp and the pose it was rendered for."""

    stamp: FrameStamp
    pixels: np.ndarray  # HxWx3 uint8 rgb


class SimBackend(Protocol):
    """A simulator that the bridge drives in whole engine ticks."""

    def load(self, seed: int) -> BackendInfo:
        """(Re)load the scenario at t(0) with this seed."""

    def time_us(self) -> int:
        """The engine's own time (tick count x tick_us)."""

    def advance(self, steer_rad: float, accel_mps2: float, n_ticks: int) -> list[ContactEvent]:
        """Apply the command for exactly n_ticks ticks; contacts that started."""

    def state(self, step: int) -> VehicleState:
        """The ego state now."""

    def render(self, camera: str, t_us: int, rig_offset: tuple[float, float]) -> RenderedFrame:
        """A frame of ``camera`` for t_us (which must be the engine's time).

        Raises:
            StaleFrame: t_us is a time the world has not reached.
        """

    def world_digest(self) -> str:
        """The engine's chained per-tick world digest (hex)."""

    def perturb_ego(self, dx_m: float) -> None:
        """Shift the ego (fault injection only)."""
