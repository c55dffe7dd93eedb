"""What the sim bridge does with a Step request, without ROS: advance whole ticks to the
requested time, observe, render the frames that time is due, apply injected faults.

The bridge keeps no copy of the decision interval: each request carries t_us and
decision_us from the clock master, and the camera period defaults to that interval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from simforge_ros.backends.base import BackendInfo, RenderedFrame, SimBackend
from simforge_ros.core.errors import ParticipantError, RateNotMultiple, Refusal
from simforge_ros.core.faults import FaultPlan
from simforge_ros.core.lockstep import BridgeObservation, StepRequest
from simforge_ros.core.values import Action, ContactEvent


@dataclass(frozen=True)
class BridgeConfig:
    """The bridge's validated parameters."""

    cameras: tuple[str, ...] = ("chase", "front")
    camera_period_us: int | None = None  # None: every decision step
    faults: FaultPlan = field(default_factory=FaultPlan)

    def __post_init__(self) -> None:
        """The rig in camera-name order, the frames chain's: a list given in another order
        is the same rig, and its step chain must be the same (``[front, chase]`` chained
        other timing records than ``[chase, front]``, and ``diff`` named camera frames)."""
        object.__setattr__(self, "cameras", tuple(sorted(self.cameras)))


def _with_flipped_pixel(frame: RenderedFrame) -> RenderedFrame:
    """Fault injection `flip_pixel=CAMERA@K`: one bit of the centre pixel's red channel."""

    def draw() -> np.ndarray:
        pixels = frame.pixels.copy()
        height, width = pixels.shape[:2]
        pixels[height // 2, width // 2, 0] ^= 0x10
        pixels.setflags(write=False)
        return pixels

    return RenderedFrame(frame.stamp, draw=draw)


ADVANCE_CHUNK_TICKS = 10_000
"""Ticks advanced between two looks at ``BridgeCore.watchdog`` (about 0.1 s of engine
work here); the same ticks in chunks give the same world, bit for bit."""


class BridgeCore:
    """Serves Step requests over one backend.

    ``watchdog``, when set, is called with the step between chunks of a long advance and
    raises the Refusal that ends it. In one process with the clock master (the `single`
    layout) nothing else can: the clock master's timeout and Ctrl-C are only looked at
    when the bridge gives the thread back, and a step of 10^8 ticks held it for minutes.
    """

    def __init__(self, backend: SimBackend, config: BridgeConfig,
                 watchdog: Callable[[int], None] | None = None) -> None:
        self._backend = backend
        self._config = config
        self.watchdog = watchdog
        self._info: BackendInfo | None = None
        self._last_step = -1
        self._previous_frames: dict[str, RenderedFrame] = {}
        rig = config.faults.first("rig_offset")
        self._rig_offset = (float(rig.offset_m or 0.0), float(rig.offset_deg or 0.0)) if rig is not None else (0.0, 0.0)

    @property
    def info(self) -> BackendInfo | None:
        return self._info

    @property
    def last_step(self) -> int:
        """The last step served (-1 before the first)."""
        return self._last_step

    def step(self, request: StepRequest) -> tuple[BridgeObservation, list[RenderedFrame]]:
        """Advance to request.t_us and observe; returns the observation and its frames.

        Raises:
            RateNotMultiple: the time to advance is not a whole number of ticks, or the
                decision period is not positive.
            ParticipantError: steps out of order, or a step before reset.
            Refusal: what the backend refused (a simulator server's clock drifting, a frame
                that never came), at this step: a backend does not know the step number.
        """
        try:
            return self._step(request)
        except Refusal as err:
            if err.step >= 0:
                raise
            raise type(err)(request.step, err.detail) from err

    def _step(self, request: StepRequest) -> tuple[BridgeObservation, list[RenderedFrame]]:
        step = request.step
        faults = self._config.faults
        if request.decision_us <= 0:  # the frames' period defaults to it: no step without it
            raise RateNotMultiple(step, f"decision_us={request.decision_us} must be > 0")
        if request.reset:
            self._info = self._backend.load(request.seed)
            self._last_step = -1
            self._previous_frames = {}
            if request.t_us != 0 or step != 0:
                raise ParticipantError(step, f"reset must be at step 0, t_us 0; got step {step}, t_us {request.t_us}")
            contacts = list(self._info.contacts)  # tick 0's: pairs placed overlapping
        else:
            if self._info is None or step != self._last_step + 1:
                raise ParticipantError(step, f"step {step} requested after step {self._last_step} (reset first)")
            delta_us = request.t_us - self._backend.time_us()
            tick_us = self._info.tick_us
            if delta_us <= 0 or delta_us % tick_us:
                raise RateNotMultiple(
                    step, f"advancing {delta_us} us to t_us={request.t_us} is not a whole number of {tick_us} us ticks"
                )
            contacts = self._advance(step, request.applied, delta_us // tick_us)
        self._last_step = step
        perturb = faults.at("perturb_state", step)
        if perturb is not None:
            self._backend.perturb_ego(float(perturb.eps or 0.0))
        info = self._info
        assert info is not None
        engine_t_us = self._backend.time_us()
        period_us = self._config.camera_period_us or request.decision_us
        frames = self._frames(step, engine_t_us, period_us)
        offset = faults.at("time_offset", step)
        reported_t_us = engine_t_us + (int(offset.offset_us or 0) if offset is not None else 0)
        observation = BridgeObservation(
            step=step,
            engine_t_us=int(reported_t_us),
            tick_us=info.tick_us,
            camera_period_us=period_us,
            cameras=self._config.cameras,
            scenario_duration_us=info.duration_us,
            world_digest=self._backend.world_digest(),
            state=self._backend.state(step),
            frames=tuple(f.stamp for f in frames),
            contacts=tuple(contacts),
        )
        return observation, frames

    def _advance(self, step: int, applied: Action, n_ticks: int) -> list[ContactEvent]:
        """Hold the applied action for n_ticks ticks; with a watchdog, in chunks."""
        watchdog = self.watchdog
        if watchdog is None or n_ticks <= ADVANCE_CHUNK_TICKS:
            return self._backend.advance(applied.steer_rad, applied.accel_mps2, n_ticks)
        contacts: list[ContactEvent] = []
        done = 0
        while done < n_ticks:
            chunk = min(ADVANCE_CHUNK_TICKS, n_ticks - done)
            contacts += self._backend.advance(applied.steer_rad, applied.accel_mps2, chunk)
            done += chunk
            if done < n_ticks:
                try:
                    watchdog(step)
                except Refusal as err:
                    raise type(err)(err.step, f"{err.detail} (had advanced {done} of its {n_ticks} ticks)") from None
        return contacts

    def _frames(self, step: int, t_us: int, period_us: int) -> list[RenderedFrame]:
        if t_us % period_us:
            return []
        faults = self._config.faults
        dropped = self._config.cameras[0] if faults.at("drop_frame", step) is not None and self._config.cameras \
            else None
        stale = faults.at("stale_frame", step) is not None
        frames = []
        for camera in self._config.cameras:
            if camera == dropped:
                continue
            if stale and camera in self._previous_frames:
                frames.append(self._previous_frames[camera])  # an old frame, stamped for its own time
                continue
            frame = self._backend.render(camera, t_us, self._rig_offset)
            flip = faults.at("flip_pixel", step)
            if flip is not None and flip.camera == camera:
                frame = _with_flipped_pixel(frame)
            frames.append(frame)
        self._previous_frames = {f.stamp.camera: f for f in frames}
        return frames
