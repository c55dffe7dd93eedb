"""The embedded engine (simforge_ros.engine) as a bridge backend: the default simulator."""

from __future__ import annotations

import math

from simforge_ros.backends.base import BackendInfo, RenderedFrame
from simforge_ros.core.errors import StaleFrame
from simforge_ros.core.values import CameraExtrinsics, CameraIntrinsics, ContactEvent, GroundTruth, VehicleState
from simforge_ros.engine import (
    CAMERA_NAMES,
    CAMERAS,
    ENGINE_VERSION,
    Engine,
    StaleRenderError,
    extrinsics,
    intrinsics,
    load_scenario,
)
from simforge_ros.engine.world import code_sha256


class EmbeddedBackend:
    """Wraps one Engine; ``load`` starts a fresh one so a run never inherits state."""

    camera_names: tuple[str, ...] = CAMERA_NAMES

    def __init__(self, scenario: str, tick_us: int, width: int = 320, height: int = 180) -> None:
        """Raises: ScenarioError: the scenario cannot be found or is invalid."""
        self._scenario = load_scenario(scenario)
        self._tick_us = tick_us
        self._size = (width, height)
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            raise RuntimeError("EmbeddedBackend used before load()")
        return self._engine

    def load(self, seed: int) -> BackendInfo:
        width, height = self._size
        self._engine = Engine(self._scenario, seed=seed, tick_us=self._tick_us, width=width, height=height)
        return BackendInfo(
            tick_us=self._tick_us,
            scenario=self._scenario.name,
            scenario_sha256=self._scenario.source_sha256,
            duration_us=self._scenario.duration_us,
            version=ENGINE_VERSION,
            contacts=self._engine.contacts,
            code_sha256=code_sha256(),
        )

    def time_us(self) -> int:
        return self.engine.t_us

    def advance(self, steer_rad: float, accel_mps2: float, n_ticks: int) -> list[ContactEvent]:
        return self.engine.advance(steer_rad, accel_mps2, n_ticks)

    def state(self, step: int) -> VehicleState:
        return self.engine.ego_state(step)

    def render(self, camera: str, t_us: int, rig_offset: tuple[float, float]) -> RenderedFrame:
        try:
            job = self.engine.frame_job(camera, t_us, rig_offset=rig_offset)
        except StaleRenderError as err:
            raise StaleFrame(-1, str(err)) from err
        return RenderedFrame(job.stamp, draw=lambda: job.draw().pixels)

    def yaw_rate_radps(self) -> float:
        ego = self.engine.ego  # the kinematic bicycle's own rate at its rear axle
        return ego.speed_mps * math.tan(ego.steer_rad) / self._scenario.ego.vehicle.wheelbase_m

    def intrinsics(self, camera: str) -> CameraIntrinsics:
        return intrinsics(CAMERAS[camera], *self._size)

    def ground_truth(self) -> GroundTruth:
        return self.engine.ground_truth()

    def extrinsics(self, camera: str) -> CameraExtrinsics:
        return extrinsics(CAMERAS[camera])

    def world_digest(self) -> str:
        return self.engine.world_digest

    def perturb_ego(self, dx_m: float) -> None:
        self.engine.perturb_ego(dx_m)

    def close(self) -> None:
        """Nothing to release: the engine is memory only."""
