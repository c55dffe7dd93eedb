"""The interface a simulator must offer the bridge: load, advance whole ticks, observe."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from simforge_ros.core.values import (
    CameraExtrinsics,
    CameraIntrinsics,
    ContactEvent,
    FrameStamp,
    GroundTruth,
    VehicleState,
)


class BackendUnavailable(RuntimeError):
    """The backend cannot be used on this machine (its simulator's Python API is not
    installed): the bridge names it as a bad ``backend`` parameter."""


@dataclass(frozen=True)
class BackendInfo:
    """What a backend reports after loading a scenario."""

    tick_us: int
    scenario: str
    scenario_sha256: str
    duration_us: int
    version: str
    contacts: tuple[ContactEvent, ...] = ()
    """The contacts of tick 0: pairs that overlap as the scenario is placed (the bridge
    reports them at step 0; before, they were dropped, and a pair that stayed overlapped
    was never reported at all)."""
    code_sha256: str = ""
    """SHA-256 of the simulator's own code where it runs in this package (the embedded
    engine's sources, engine.code_sha256), "" where it does not (a CARLA server: its
    ``version``). An engine changed under the same version string was not named by
    ``diff``'s setup differences."""


class RenderedFrame:
    """A frame with the stamp and the pose it is rendered for; its pixels come on first use.

    A backend that renders in-process (the embedded engine) names and poses a frame when
    the step is observed and captures that time's scene, so the pixels can be drawn later,
    by whoever asks first, and are the same whenever: the bridge answers the step with the
    stamps and draws while the driver decides. A backend whose frames arrive from elsewhere
    (a simulator server) passes the pixels it received.
    """

    __slots__ = ("_draw", "_pixels", "stamp")

    def __init__(self, stamp: FrameStamp, pixels: np.ndarray | None = None,
                 draw: Callable[[], np.ndarray] | None = None) -> None:
        if (pixels is None) == (draw is None):
            raise ValueError("a RenderedFrame needs either its pixels or a way to draw them")
        self.stamp = stamp
        self._pixels = pixels
        self._draw = draw

    @property
    def drawn(self) -> bool:
        return self._pixels is not None

    @property
    def pixels(self) -> np.ndarray:
        """HxWx3 uint8 rgb, read-only; drawn now if it was not yet."""
        if self._pixels is None:
            assert self._draw is not None
            self._pixels, self._draw = self._draw(), None
        return self._pixels


class SimBackend(Protocol):
    """A simulator that the bridge drives in whole engine ticks."""

    camera_names: tuple[str, ...]
    """The cameras ``render`` knows: the bridge refuses any other at start-up."""

    def load(self, seed: int) -> BackendInfo:
        """(Re)load the scenario at t(0) with this seed."""

    def time_us(self) -> int:
        """The engine's own time (tick count x tick_us)."""

    def advance(self, steer_rad: float, accel_mps2: float, n_ticks: int) -> list[ContactEvent]:
        """Apply the command for exactly n_ticks ticks; contacts that started."""

    def state(self, step: int) -> VehicleState:
        """The ego state now."""

    def render(self, camera: str, t_us: int, rig_offset: tuple[float, float]) -> RenderedFrame:
        """A frame of ``camera`` for t_us (which must be the engine's time), named and posed
        now; its pixels may be drawn on first use, from the scene of t_us.

        Raises:
            StaleFrame: t_us is a time the world has not reached.
        """

    def yaw_rate_radps(self) -> float:
        """The ego's yaw rate now (rad/s, counter-clockwise): its odometry's angular speed."""

    def intrinsics(self, camera: str) -> CameraIntrinsics:
        """The pinhole model ``camera`` renders with, at the backend's image size: what the
        bridge's CameraInfo says, so a stack projecting with it lands on the drawn pixels."""

    def ground_truth(self) -> GroundTruth:
        """Every other actor and signal now (sim_bridge.ground_truth): what a planning stack
        without perception is given instead of detections."""

    def extrinsics(self, camera: str) -> CameraExtrinsics:
        """Where ``camera``'s optical frame sits on the ego: what the bridge publishes on
        /tf_static (sim_bridge.camera_tf), from base_frame to the camera's frame_id."""

    def world_digest(self) -> str:
        """The engine's chained per-tick world digest (hex)."""

    def perturb_ego(self, dx_m: float) -> None:
        """Shift the ego (fault injection only)."""

    def close(self) -> None:
        """Release what ``load`` took (a server's actors and settings); the bridge calls it
        when it stops. Nothing to do for a backend that holds only memory."""
