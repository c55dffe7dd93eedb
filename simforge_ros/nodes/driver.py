"""driver node: serves /simforge/decide with a policy (route follower or torch planner).

A decision is made from the observation of the requested step only: the state comes in
the request, and the frames the policy needs are awaited by their exact stamp (the
request names them), never taken as "the latest image received" — a topic and a service
are not ordered with each other. A frame that does not come in time is `missing_frame`.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from typing import Any, cast

import numpy as np
from rclpy.node import Node
from rclpy.task import Future
from sensor_msgs.msg import Image

from simforge_ros import topics
from simforge_ros.core.errors import ConfigError, MissingFrame, ParticipantError, RateNotMultiple, Refusal, StaleFrame
from simforge_ros.drivers.policy import Observation, first_step_without_frames
from simforge_ros.drivers.registry import make_policy
from simforge_ros.image_codec import imgmsg_to_numpy
from simforge_ros.nodes import convert
from simforge_ros.nodes.common import (
    HOST,
    RECORD_QOS,
    declare_params,
    die_now,
    jitter_sleep,
    losing_answer,
    node_faults,
    period,
    publish_node_params,
    refuse,
    run_participant,
    stall_forever,
    steady_timer,
    unexpected,
    watch_node_params,
    watch_run_status,
)
from simforge_ros.params import FIRST_MESSAGES_WAIT_MS
from simforge_ros.srv import Decide

NAME = "driver"
ALL_CAMERAS = ("chase", "front", "left", "rear", "right")
_MATCH_POLL_S = 0.01  # wall clock: how often the image readers' matches are checked before Decide


class Driver:
    """The driver shell; ``node`` is its rclpy node."""

    def __init__(self, context: Any = None) -> None:
        """Raises: ConfigError: bad parameters."""
        self.node = Node(NAME, context=context)
        values = declare_params(self.node, NAME)
        self._faults = node_faults(values, NAME).for_node(NAME)
        # seconds that are no whole number of microseconds: refused at step 0, its first
        # call, so that the run records the refusal (before, the driver exited at start-up)
        self._refused_at_start: Refusal | None = None
        try:
            planning_period_us = period(values, "planning_period", NAME)
        except RateNotMultiple as err:
            self._refused_at_start, planning_period_us = err, None
        self.policy = make_policy(values["policy"], values, planning_period_us)
        self._frame_timeout_s = values["frame_timeout_ms"] / 1000.0
        jitter = self._faults.first("jitter")
        self._jitter_ms = float(jitter.max_jitter_ms or 0.0) if jitter is not None else 0.0
        self._jitter_rng = np.random.default_rng()  # wall-clock only: deliberately unseeded
        kill, stall = self._faults.first("kill"), self._faults.first("stall")
        self._kill_step = kill.step if kill is not None else None
        self._stall_step = stall.step if stall is not None else None
        self._run_key: tuple[int, int] | None = None
        self._frames: dict[tuple[str, int], np.ndarray] = {}
        self._waiting: dict[tuple[str, int], Future] = {}
        # the last decision answered, and those still awaiting frames (see _on_decide_now)
        self._answered: tuple[tuple[int, int, int], Decide.Response] | None = None
        self._deciding: dict[tuple[int, int, int], Future] = {}
        lose = self._faults.first("lose_answer")
        self._lose_step = lose.step if lose is not None else None
        self.finished = False
        cameras = ALL_CAMERAS if values["policy"] != "route" else ()
        self._subs = {
            c: self.node.create_subscription(Image, topics.image_topic(c), self._frame_cb(c), RECORD_QOS)
            for c in cameras
        }
        self._values = values
        self._params_pub = publish_node_params(
            self.node, NAME, values, {"policy": self.policy.describe(), "faults": self._faults.specs()}
        )
        self._status_sub = watch_run_status(self.node, self._on_final)
        self.offering = False
        if not cameras:
            # A policy that never looks at a camera is served by a plain callback: a
            # coroutine callback costs the executor a Task and its futures on every call.
            self._offer(self._on_decide_now)
            return
        # Decide is offered (and the clock master starts stepping) only once the bridge's
        # image writers have matched these readers: a frame published before that never
        # reaches this node, which would then wait for it and refuse missing_frame. The
        # bridge's parameters name its cameras; their reader is made after the image
        # readers, and discovery announces a participant's readers in the order they were
        # made (as for the recorder's Finish).
        self._bridge_cameras: list[str] | None = None
        self._params_sub = watch_node_params(self.node, self._on_params)
        self._offer_timer: Any = steady_timer(self.node, _MATCH_POLL_S, self._offer_when_matched)

    def _offer(self, handler: Any) -> None:
        if self._lose_step is not None:
            handler = losing_answer(handler, self._lose_step)
        self.node.create_service(Decide, topics.DECIDE_SERVICE, handler)
        self.offering = True

    def _on_params(self, info: dict[str, Any]) -> None:
        params = (info.get("params") or {}) if info.get("node") == "sim_bridge" else {}
        cameras = params.get("cameras")
        if isinstance(cameras, list):
            self._bridge_cameras = [str(c) for c in cameras]
            height, width = params.get("height"), params.get("width")
            if isinstance(height, int) and isinstance(width, int):
                self._fit_frames((height, width))

    def _fit_frames(self, frames_hw: tuple[int, int]) -> None:
        """Tell a policy that plans on pixels the size the bridge renders at, before step 0.
        A model that cannot take that size is refused at step 0 (the run records why)."""
        use = getattr(self.policy, "use_frames_hw", None)
        if use is None:
            return
        try:
            changed = use(frames_hw)
        except ConfigError as err:
            if self._refused_at_start is None:  # a period refused first keeps its code
                # the clock master names the driver: "driver.weights: expected ...", not "driver: driver: ..."
                self._refused_at_start = ParticipantError(0, "; ".join(
                    str(p).removeprefix(f"{p.source}: ") for p in err.problems))
            return
        if changed:  # the manifest describes the size planned on
            publish_node_params(self.node, NAME, self._values, {
                "policy": self.policy.describe(), "faults": self._faults.specs()}, pub=self._params_pub)

    def _offer_when_matched(self) -> None:
        if self.offering or self._bridge_cameras is None:
            return
        if any(self._subs[c].get_publisher_count() < 1 for c in self._bridge_cameras if c in self._subs):
            return
        self.node.destroy_timer(self._offer_timer)
        self._offer(self._on_decide)

    def _on_final(self, _status: Any) -> None:
        self.finished = True

    def _frame_cb(self, camera: str) -> Any:
        def _cb(msg: Image) -> None:
            t_us = msg.header.stamp.sec * 1_000_000 + msg.header.stamp.nanosec // 1000
            key = (camera, t_us)
            self._frames[key] = imgmsg_to_numpy(msg)
            waiter = self._waiting.pop(key, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(True)
        return _cb

    async def _await_frame(self, camera: str, t_us: int, step: int) -> np.ndarray:
        """The frame of ``camera`` stamped ``t_us``, within ``frame_timeout_ms``; at step 0
        FIRST_MESSAGES_WAIT_MS more, the bridge's longest hold of its first messages while
        discovery settles (without it, a short limit could refuse step 0 on a slow start)."""
        key = (camera, t_us)
        if key not in self._frames:
            waiter = self._waiting.setdefault(key, Future())
            def _expire() -> None:
                if not waiter.done():
                    waiter.set_result(False)

            wait_s = self._frame_timeout_s + (FIRST_MESSAGES_WAIT_MS / 1000.0 if step == 0 else 0.0)
            timer = steady_timer(self.node, wait_s, _expire)
            try:
                await waiter
            finally:
                self.node.destroy_timer(timer)
            if key not in self._frames:
                allowance = ", with step 0's allowance for discovery" if step == 0 else ""
                # the driver cannot tell a frame never sent from one drawn slower than its
                # limit: said both ways, as a limit a slow machine may pass
                raise MissingFrame(
                    step, f"no {camera} frame stamped {t_us} us arrived within {wait_s:g} s (driver.frame_timeout_ms"
                          f"{allowance}): not sent, or drawn and sent slower than that"
                )
        return self._frames[key]

    def _begin(self, request: Decide.Request, response: Decide.Response) -> None:
        """What every Decide call does first: name this process, then injected faults."""
        response.pid, response.host = os.getpid(), HOST
        step = request.step
        if self._kill_step is not None and step == self._kill_step:
            die_now()
        if self._stall_step is not None and step == self._stall_step:
            stall_forever()
        jitter_sleep(self._jitter_rng, self._jitter_ms)

    def _answer(self, request: Decide.Request, response: Decide.Response, action: Any) -> Decide.Response:
        perturb = self._faults.at("perturb_action", request.step)
        if perturb is not None:
            action = replace(action, steer_rad=action.steer_rad + float(perturb.eps or 0.0))
        response.ok = True
        convert.action_msg(action, response.action)
        return response

    def _on_decide_now(self, request: Decide.Request, response: Decide.Response) -> Decide.Response:
        """Decide for a policy without cameras (nothing to await); the same request again
        gets the same answer.

        The clock master sends step 0 again when no answer came (DDS can lose one while
        discovery is still matching the service, see ClockMaster._call): the first request
        may have been served, and the policy must not decide (or reset) twice.
        """
        key, answer = self._answered_before(request)
        if answer is not None:
            return answer
        answer = self._decide_now(request, response)
        self._answered = (key, answer)
        return answer

    async def _on_decide(self, request: Decide.Request, response: Decide.Response) -> Decide.Response:
        """Decide for a policy with cameras; a request sent again (see _on_decide_now) gets
        the same answer, also while the first one still awaits its frames."""
        key, answer = self._answered_before(request)
        if answer is not None:
            return answer
        under_way = self._deciding.get(key)
        if under_way is not None:
            return cast("Decide.Response", await under_way)
        self._deciding[key] = under_way = Future()
        try:
            answer = await self._decide_with_frames(request, response)
            self._answered = (key, answer)
        finally:
            del self._deciding[key]
        under_way.set_result(answer)
        return answer

    def _answered_before(self, request: Decide.Request) -> tuple[tuple[int, int, int], Decide.Response | None]:
        """The request's key, and the answer when it is the request answered last."""
        key = (request.seed, request.step, request.t_us)
        answered = self._answered
        return key, answered[1] if answered is not None and answered[0] == key else None

    def _decide_now(self, request: Decide.Request, response: Decide.Response) -> Decide.Response:
        self._begin(request, response)
        try:
            self._start(request)
            for camera in self.policy.cameras_at(request.step):  # none, for such a policy
                raise MissingFrame(request.step, f"{camera} frame asked for by a policy served without cameras")
            action = self._policy_decide(request, {})
        except Refusal as err:
            return refuse(response, err)
        except Exception as err:  # noqa: BLE001 - answer with a named refusal, never die silently
            return refuse(response, unexpected(request.step, err))
        return self._answer(request, response, action)

    async def _decide_with_frames(self, request: Decide.Request, response: Decide.Response) -> Decide.Response:
        """Decide for a policy with cameras: its frames are awaited by their exact stamps."""
        self._begin(request, response)
        try:
            self._start(request)
            step, t_us = request.step, request.t_us
            named = {f.camera: f for f in request.frames}
            frames = {}
            for camera in self.policy.cameras_at(step):
                stamp = named.get(camera)
                if stamp is None:
                    raise MissingFrame(step, _unnamed(self.policy.name, camera, step, t_us, tuple(named)))
                if stamp.t_us != t_us:
                    raise StaleFrame(step, f"{camera} frame is stamped {stamp.t_us} us, the step is at {t_us} us")
                frames[camera] = await self._await_frame(camera, t_us, step)
            action = self._policy_decide(request, frames)
        except Refusal as err:
            return refuse(response, err)
        except Exception as err:  # noqa: BLE001 - answer with a named refusal, never die silently
            return refuse(response, unexpected(request.step, err))
        return self._answer(request, response, action)

    def _start(self, request: Decide.Request) -> None:
        """Reset the policy at step 0 (or a new run key); refuse a run not starting at 0."""
        step = request.step
        key = (request.seed, request.decision_us)
        if step == 0 or self._run_key != key:
            if step != 0:
                raise ParticipantError(step, f"first decision at step {step}; a run starts at step 0")
            if self._refused_at_start is not None:
                raise self._refused_at_start
            self.policy.reset(request.seed, request.decision_us)
            self._check_camera_period(request)
            self._run_key = key  # frames of t(0) may have arrived already: keep them

    def _check_camera_period(self, request: Decide.Request) -> None:
        """Refuse at step 0 a camera period that misses a step the policy needs frames at."""
        period_us, decision_us = request.camera_period_us, request.decision_us
        if period_us <= 0 or not self._subs:  # not said; or a policy that looks at no camera
            return
        every = period_us // decision_us
        step = first_step_without_frames(self.policy, every)
        if step is not None:
            raise RateNotMultiple(-1, (
                f"the {self.policy.name} policy needs frames at step {step} (t={step * decision_us} us), which "
                f"the bridge's camera period misses: it renders every {every} steps (camera_period_us="
                f"{period_us}); give sim_bridge.camera_period_us a period that reaches every step the policy "
                "needs frames at"))

    def _policy_decide(self, request: Decide.Request, frames: dict[str, np.ndarray]) -> Any:
        t_us = request.t_us
        obs = Observation(request.step, t_us, request.decision_us, convert.state_value(request.state), frames)
        action = self.policy.decide(obs)
        if self._frames:
            for old in [k for k in self._frames if k[1] < t_us]:
                del self._frames[old]
        return action


def _unnamed(policy: str, camera: str, step: int, t_us: int, named: tuple[str, ...]) -> str:
    """Why the frame a policy needs is not in the observation: a camera the bridge does not
    render, or a step its camera period does not reach (both a setup mismatch, said so)."""
    needs = f"the {policy} policy needs its {camera} frame at step {step} (t={t_us} us)"
    if named:
        return f"{needs}, and the bridge renders {', '.join(named)}: name {camera} in sim_bridge.cameras"
    return (f"{needs}, and the bridge rendered no frame for this step: its camera period "
            f"(sim_bridge.camera_period_us) must reach every step the policy needs frames at")


def main(argv: list[str] | None = None) -> int:
    return run_participant(Driver, NAME, argv if argv is not None else sys.argv)


if __name__ == "__main__":
    sys.exit(main())
