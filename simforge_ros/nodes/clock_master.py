"""clock_master node: owns the one clock and gates every participant step by step.

It publishes /clock = t(k) once per step, calls the bridge's Step service and the
driver's Decide service with a wall-clock timeout each, runs the contract checks, delays
the action by the latency in steps, and publishes the step's vehicle state (the one the
bridge's Step answer carried), timing record, action and applied action (each step's
outputs leave with the next service request, so their publishing overlaps the
participant's work; the last ones before Finish). Any refusal is published as the run
status with its code, step and detail; the process exits with the refusal's exit code.
The loop itself is core.lockstep.run_lockstep; this file only carries its calls over ROS.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import rclpy
from rclpy.client import Client
from rclpy.executors import Executor
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from std_msgs.msg import String, UInt64
from std_srvs.srv import SetBool, Trigger

from simforge_ros import topics
from simforge_ros.core.backlog import RecorderBacklog
from simforge_ros.core.errors import (
    EXIT_COUNTED,
    EXIT_FAILURE,
    EXIT_USAGE,
    REFUSALS,
    Aborted,
    ConfigError,
    IncompleteRun,
    MissingFrame,
    ParticipantError,
    ParticipantLost,
    ParticipantTimeout,
    RateNotMultiple,
    Refusal,
    StaleFrame,
    one_line,
    refusal_from_code,
)
from simforge_ros.core.freeze import FreezeWatch
from simforge_ros.core.lockstep import (
    BridgeObservation,
    DecideRequest,
    LoopConfig,
    LoopProgress,
    StepRequest,
    TimingRecord,
    run_lockstep,
)
from simforge_ros.core.pacing import Pacer
from simforge_ros.core.timing_contract import DEFAULT_DECISION_US
from simforge_ros.core.units import clock_stamp
from simforge_ros.core.values import Action, VehicleState
from simforge_ros.core.wall_times import WallTimes
from simforge_ros.msg import DriverAction, Participant, RunStatus, StepTiming
from simforge_ros.msg import VehicleState as VehicleStateMsg
from simforge_ros.nodes import convert
from simforge_ros.nodes.common import (
    HOST,
    LATCHED_QOS,
    PROGRESS_QOS,
    RECORD_QOS,
    TEARDOWN_S,
    UNNAMED_NODE,
    WALL_POLL_S,
    RCLError,
    close_nodes,
    declare_params,
    exit_if_stuck,
    foreign_readers,
    help_requested,
    ignore_stop_signals,
    in_dds_domain,
    make_executor,
    matchable_readers,
    period,
    process_alive,
    publish_node_params,
    spin_future,
    spin_until,
    start_rclpy,
    unacknowledged,
    watch_node_params,
)
from simforge_ros.process_tuning import (
    dump_stacks_on_signal,
    freeze_startup,
    launcher_pid,
    stopped_for,
    tell_outcome,
    tune_process,
    unblock_held_signals,
    watch_launcher,
)
from simforge_ros.record.rundir import RECORD_FAILED
from simforge_ros.srv import Decide, Finish, Step

NAME = "clock_master"
# The one line a launcher reads from the clock master's stdout for the outcome.
OUTCOME_PREFIX = "SIMFORGE_OUTCOME "
# Wall-clock wait for the recorder to acknowledge the last records before Finish is sent.
ACKED_WAIT_S = 2.0
# Wall-clock wait, at the end, for every reader of the run status to acknowledge the final
# one (a participant ends when it has it); bounded, as a killed participant's reader stays
# matched until its lease runs out and acknowledges nothing.
STATUS_ACKED_WAIT_S = 1.0
# Wall-clock interval between looks at the recorder's process while stepping (it is never
# called until Finish, so nothing else would notice it gone).
RECORDER_WATCH_S = 0.1
# Wall clock: how long a participant's first call (step 0) waits for its answer before the
# request is sent again, doubling each time (see ClockMaster._call). Step 0 normally
# answers in well under this; one that takes longer is answered once and the repeat
# gets the same answer.
RESEND_S = 1.0
# Wall clock: how long the end of a run waits for the ROS graph to name the node serving a
# participant that answered. A service is seen (its endpoints matched) before the graph
# hears which node it belongs to, a separate announcement: a run refused within a few
# steps of its start found none named.
GRAPH_WAIT_S = 1.0
# Wall clock: how long a run refused before any recorder was seen (no Finish service, no
# parameters) waits for one to come before ending without a Finish. It used to send Finish
# to nobody for participant_timeout_ms (10 s past its own refusal, "sending the request
# again" three times), whatever signal came meanwhile.
RECORDER_UNSEEN_WAIT_S = 2.0


@dataclass(frozen=True)
class ClockConfig:
    """The clock master's parameters, read once."""

    loop: LoopConfig
    run_id: str
    participant_timeout_s: float
    startup_timeout_s: float
    record: bool
    recorder_backlog_steps: int
    real_time_factor: float = 0.0
    hold_at_step: int = -1


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended, as the clock master saw it."""

    status: str  # counted | refused
    refusal: Refusal | None
    steps_done: int
    chain_digest: str
    wall: dict[str, Any] | None = None  # wall-clock summary of the loop (never hashed)

    @property
    def exit_code(self) -> int:
        return EXIT_COUNTED if self.refusal is None else self.refusal.exit_code

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status, "steps": self.steps_done, "chain_digest": self.chain_digest,
            "refusal": self.refusal.to_dict() if self.refusal is not None else None,
            "wall": self.wall,
        }


def wall_summary(cycles_ns: WallTimes | Sequence[int], finish_ns: int, recorder_pauses: int = 0,
                 recorder_pause_ns: int = 0, paced_ns: int = 0, held_ns: int = 0) -> dict[str, Any]:
    """The loop's per-step wall times (each step's whole cycle), start-up excluded.

    The first min(50, n // 10) steps are left out (scenario load, DDS discovery settling);
    ``finish_ns`` is how long the recorder took to confirm the run after the last step;
    the loop paused ``recorder_pauses`` times for the recorder (core.backlog), in all
    ``recorder_pause_ns`` (inside the step times), and waited ``paced_ns`` in all to keep
    to ``real_time_factor`` (core.pacing) and was held ``held_ns`` on /simforge/pause (both
    left out of the step times: core.lockstep's wall_step_ns). Past
    core.wall_times.EXACT_STEPS steps the median and p99 are read from a histogram, within
    0.1 %, and ``approximate`` says so.
    """
    times = cycles_ns if isinstance(cycles_ns, WallTimes) else WallTimes.of(cycles_ns)
    skip = min(50, len(times) // 10)
    timed = times.summary(skip)
    out: dict[str, Any] = {"steps": len(times), "skipped": skip, "timed": len(timed), "finish_ns": finish_ns,
                           "recorder_pauses": recorder_pauses, "recorder_pause_ns": recorder_pause_ns,
                           "paced_ns": paced_ns, "held_ns": held_ns}
    if len(timed):
        out.update(
            total_ns=timed.total, mean_ns=timed.total // len(timed), median_ns=timed.at(len(timed) // 2),
            p99_ns=timed.at(min(len(timed) - 1, (len(timed) * 99) // 100)), max_ns=timed.max,
        )
        if not timed.exact:
            out["approximate"] = True
    return out


SERVER_CHECK_S = 0.25
"""Wall-clock seconds of stepping between two counts of a participant service's servers."""
DRIVER_REFUSALS = frozenset({MissingFrame.code, StaleFrame.code, RateNotMultiple.code, ParticipantError.code})
"""What a driver may refuse a step with: a frame it needs that is missing or stale, a camera
period or decision step it cannot work at, or its own error. Another code it gives is its
participant_error."""


def _cancel(futures: Iterable[Any]) -> None:
    for future in futures:
        future.cancel()


def _has_reader(publisher: Any) -> Callable[[], bool]:
    return lambda: bool(publisher.get_subscription_count() > 0)


class _AnswersSeen(dict):
    """A client's pending requests, in place of rclpy's dict (Client._pending_requests,
    sequence number -> future), noting an answer to a request already answered: each
    server of the service answers every request it gets, and only the first answer is
    taken. The servers' count on the graph lags discovery (0.25 to 3 s here): a short run
    beside two external drivers counted (2 of 26), the second's answers dropped unseen.
    Both executors look a response's request up here (EventsExecutor from C++)."""

    KEPT = 64  # the latest requests remembered: a second answer comes within a step or two

    def __init__(self) -> None:
        super().__init__()
        self._recent: dict[int, Any] = {}
        self.second_answers = 0

    def __setitem__(self, sequence: int, future: Any) -> None:
        super().__setitem__(sequence, future)
        self._recent[sequence] = future
        if len(self._recent) > self.KEPT:
            del self._recent[next(iter(self._recent))]

    def __getitem__(self, sequence: int) -> Any:
        """The future of the request a response answers (only an executor taking a
        response looks one up). One already answered means a second answer: it is looked
        up still pending (EventsExecutor takes both answers before the first one's future
        is let go; its result then became the second's) or gone (SingleThreadedExecutor)."""
        future = super().get(sequence)
        seen = future if future is not None else self._recent.get(sequence)
        # a cancelled request's late answer (a resend's first request) is no second one
        if seen is not None and seen.done() and not seen.cancelled():
            self.second_answers += 1
        if future is None:
            raise KeyError(sequence)
        return future


class _Peer:
    """A participant service: its client and, once it has answered, its process."""

    def __init__(self, client: Client, who: str, domain_id: int) -> None:
        self.client, self.who, self.domain_id = client, who, domain_id
        self.answers = _AnswersSeen()
        client._pending_requests = self.answers  # before its first request
        self.pid: int | None = None
        self.host: str | None = None
        self.local = False  # its pid is a process of this host's that is in the run's domain
        self.answered: tuple[int, str] | None = None  # (pid, host) its first answer named
        self.next_server_check = -math.inf  # wall clock (monotonic): when to count its servers again

    def learn(self, pid: int, host: str | None) -> None:
        """Its process, as it named it. Its pid is looked at in /proc only once it is seen
        to be that process: one of this host's in the run's DDS domain. A driver in a
        container (host network, its own pid namespace: the same host name, its own pids)
        named a pid that was no process here, and was refused as gone while it answered;
        one named pid 1 and died unseen. Otherwise the graph says when it has left."""
        self.pid, self.host = pid, host
        self.local = host == HOST and pid > 0 and in_dds_domain(pid, self.domain_id)

    def gone(self) -> bool:
        if self.pid is not None and self.local:
            return not process_alive(self.pid)
        return self.pid is not None and not self.client.service_is_ready()

    def note_answer(self, pid: int, host: str, step: int) -> None:
        """Hold every answer of the run to the process that gave the first.

        Raises:
            ParticipantLost: another process answered: the first one restarted (and lost
                what it held, a planner's memory, say), or two nodes serve the service and
                answer in no fixed order.
        """
        if self.answered is None:
            self.answered = (pid, host)
            self.learn(pid, host)
        elif (pid, host) != self.answered:
            first_pid, first_host = self.answered
            raise ParticipantLost(
                step, f"{self.who} answered step {step} from pid {pid} on host {host!r}, earlier steps from "
                      f"pid {first_pid} on host {first_host!r}: it restarted, or two nodes serve "
                      f"{self.client.srv_name}")


class _Messages:
    """One message object per call and topic, refilled every step.

    rclpy serialises a request in call_async and a message in publish, before they
    return, and every field is set each time: building a fresh message a step (rclpy's
    generated constructors are slow) bought nothing.
    """

    def __init__(self) -> None:
        self.step = Step.Request()
        self.decide = Decide.Request()
        self.clock = Clock()
        self.timing = StepTiming()
        self.action = DriverAction()
        self.applied = DriverAction()


class ClockMaster:
    """The clock master shell; ``node`` is its rclpy node."""

    def __init__(self, context: Any = None) -> None:
        """Raises: ConfigError / RateNotMultiple: bad parameters."""
        self.node = Node(NAME, context=context)
        values = declare_params(self.node, NAME)
        self._wanted_readers: tuple[str, ...] = tuple(values["wait_for_readers"])  # --wait-for-reader
        self._unmatchable_said: set[tuple[str, str, str]] = set()
        # seconds that are no whole number of microseconds: refused once the run has begun
        # (see run), so that the recorder keeps the refusal; before, the clock master
        # exited at start-up and the manifest said incomplete_run
        self._refused_at_start: RateNotMultiple | None = None
        try:
            decision_us = period(values, "decision", NAME)
            latency_us = period(values, "latency", NAME)
        except RateNotMultiple as err:
            self._refused_at_start, decision_us, latency_us = err, None, None
        self.config = ClockConfig(
            loop=LoopConfig(
                decision_us=decision_us if decision_us is not None else DEFAULT_DECISION_US,
                steps=values["steps"],
                latency_us=latency_us if latency_us is not None else 0,
                seed=values["seed"],
                pose_tolerance_m=values["pose_tolerance_m"],
                pose_tolerance_deg=values["pose_tolerance_deg"],
            ),
            run_id=values["run_id"],
            participant_timeout_s=values["participant_timeout_ms"] / 1000.0,
            startup_timeout_s=values["startup_timeout_ms"] / 1000.0,
            record=values["record"],
            recorder_backlog_steps=values["recorder_backlog_steps"],
            real_time_factor=values["real_time_factor"],
            hold_at_step=values["hold_at_step"],
        )
        self._pacer = Pacer(self.config.real_time_factor)
        self._paused = False  # held before the next step (/simforge/pause)
        self._released = 0  # steps a held run may still do before it holds again (/simforge/advance)
        # the step request held by clock_master.hold_at_step (-1: none, or its hold came; step 0 is never held)
        self._hold_before = self.config.hold_at_step + 1 if self.config.hold_at_step >= 0 else -1
        self._ended = False
        self._last_step: int | None = None  # set once every step is done: a hold then ends the run
        self._held_ns = 0  # wall time held paused, for the run's wall summary
        self._pause_srv = self.node.create_service(SetBool, topics.PAUSE_SERVICE, self._on_pause)
        self._advance_srv = self.node.create_service(Trigger, topics.ADVANCE_SERVICE, self._on_advance)
        self._clock_pub = self.node.create_publisher(Clock, topics.CLOCK, RECORD_QOS)
        self._timing_pub = self.node.create_publisher(StepTiming, topics.TIMING, RECORD_QOS)
        self._action_pub = self.node.create_publisher(DriverAction, topics.ACTION, RECORD_QOS)
        self._applied_pub = self.node.create_publisher(DriverAction, topics.APPLIED, RECORD_QOS)
        self._state_pub = self.node.create_publisher(VehicleStateMsg, topics.STATE, RECORD_QOS)
        self._status_pub = self.node.create_publisher(RunStatus, topics.STATUS, LATCHED_QOS)
        self._params_pub = publish_node_params(self.node, NAME, values)
        domain_id = self.node.context.get_domain_id()
        self._bridge = _Peer(self.node.create_client(Step, topics.STEP_SERVICE), "sim_bridge", domain_id)
        self._driver = _Peer(self.node.create_client(Decide, topics.DECIDE_SERVICE), "driver", domain_id)
        self._recorder = _Peer(self.node.create_client(Finish, topics.FINISH_SERVICE), "recorder", domain_id)
        self._peers = {p.who: p for p in (self._bridge, self._driver, self._recorder)}
        self._params_sub = watch_node_params(self.node, self._on_params)
        self._backlog = RecorderBacklog(self.config.recorder_backlog_steps)
        self._pauses = 0  # times the loop waited for the recorder, and how long (wall)
        self._pause_ns = 0
        self._progress_sub = self.node.create_subscription(UInt64, topics.RECORDED, self._on_recorded, PROGRESS_QOS)
        self._recorder_failure: str | None = None
        # the recorder's own wait for late messages before it answers Finish, from its
        # parameters (_on_params): the Finish call outwaits it
        self._recorder_finish_s = 0.0
        self._failure_sub = self.node.create_subscription(
            String, topics.RECORDER_FAILURE, self._on_recorder_failure, LATCHED_QOS)
        self._watch_at = 0.0  # time.monotonic() of the next look at the recorder's process
        self._peers_watch_at = 0.0  # the next look at the bridge's and driver's, while a hold or a pace waits
        self._executor: Executor | None = None
        self._step = -1
        self._cycles_ns = WallTimes()  # wall_step_ns of every step, for the outcome's summary
        self._msgs = _Messages()
        # (publisher, message) held back until the next request is on its way: see _call
        self._pending: list[tuple[Any, Any]] = []
        self.interrupted = False
        self.interrupt_detail = "interrupted"  # the Aborted refusal's detail
        self._freeze = FreezeWatch()  # time this process did not run: no participant's (_call)
        # called, its wall deadline, limit (s), the frozen seconds counted when it was called
        self._waiting: tuple[str, float, float, float] | None = None

    # -- participants over ROS -------------------------------------------------------------
    def _on_recorded(self, msg: UInt64) -> None:
        self._backlog.note_recorded(int(msg.data))

    def _on_recorder_failure(self, msg: String) -> None:
        self._recorder_failure = str(msg.data)

    def _on_params(self, info: dict[str, Any]) -> None:
        """Learn each participant's process from its latched parameters (before it answers)."""
        peer, process = self._peers.get(str(info.get("node"))), info.get("process")
        finish_ms = (info.get("params") or {}).get("finish_timeout_ms")
        if peer is self._recorder and isinstance(finish_ms, int) and finish_ms > 0:
            self._recorder_finish_s = finish_ms / 1000.0
        if peer is not None and peer.pid is None and isinstance(process, dict) and isinstance(process.get("pid"), int):
            peer.learn(process["pid"], process.get("host"))

    def _said(self, peer: _Peer) -> str:
        """What a peer refused for its silence last said of its progress: the recorder's
        steps chained (a Finish unanswered named no step of the run it had stalled at)."""
        return f" (its last report: {self._backlog.recorded} steps chained)" if peer is self._recorder else ""

    def _stopped(self, step: int, where: str = "") -> Refusal:
        """The refusal of a run stopped at ``step`` (interrupted): aborted, or what `simforge
        run` stopped it for (process_tuning.stopped_for: a participant a signal ended before
        step 0), which the final status then says as the manifest does."""
        said = stopped_for()
        if said is not None and said["code"] == ParticipantLost.code:
            return ParticipantLost(said["step"], said["detail"])
        return Aborted(step, f"{self.interrupt_detail}{where}")

    def _watch_recorder(self, step: int) -> None:
        """Refuse at once when the recorder is gone: the run would go on unrecorded, and
        only the Finish call, after every step, would find out. So is one that cannot write
        the record (a full disk)."""
        if self._recorder_failure is not None:
            raise ParticipantError(step, f"recorder: {self._recorder_failure}")
        now = time.monotonic()
        if now < self._watch_at:
            return
        self._watch_at = now + RECORDER_WATCH_S
        self._refuse_if_recorder_gone(step)

    def _refuse_if_recorder_gone(self, step: int) -> None:
        if self._recorder.gone():
            pid = self._recorder.pid
            # found at a look every RECORDER_WATCH_S, some steps on: its last report says where
            # its record stops ("the steps from here on would go unrecorded" named none)
            raise ParticipantLost(step, f"recorder (pid {pid}) is gone, its last report {self._backlog.recorded} "
                                        "steps chained: the steps it had not chained go unrecorded")

    def _keep_up_with_recorder(self, step: int) -> None:
        """Past ``recorder_backlog_steps`` steps ahead of what the recorder has chained,
        wait until it is within half of that: an unbounded lead fills the transport's
        histories until a publish fails (see core.backlog). A recorder that chains nothing
        for participant_timeout_ms meanwhile is refused like any participant that does not
        answer; one that is gone, like any lost participant."""
        published = step + 1  # steps 0..step, once the pending records are out
        if not self._backlog.must_pause(published):
            return
        self._pauses += 1
        pause_start = time.perf_counter_ns()
        try:
            self._wait_for_recorder(step, published)  # refused, at step + 1
        finally:
            self._pause_ns += time.perf_counter_ns() - pause_start

    def _wait_for_recorder(self, done: int, published: int) -> None:
        """Wait after step ``done``, whose records are out: a refusal here is at the step
        the run was to do next, ``published`` (the recorder may yet chain step ``done``;
        a refusal at ``done`` then named a step the manifest counts as recorded)."""
        assert self._executor is not None
        step = published
        self._flush()  # what the recorder needs to chain up to step ``done``
        timeout_s = self.config.participant_timeout_s
        wall_deadline = time.monotonic() + timeout_s
        recorded = self._backlog.recorded
        frozen_from = self._freeze.frozen_s()  # time this process did not run is not the recorder's (_call)
        while not self._backlog.may_resume(published):
            if self.interrupted:
                raise self._stopped(step)
            self._refuse_if_recorder_gone(step)
            if self._recorder_failure is not None:  # it chains nothing more: say why, now
                raise ParticipantError(step, f"recorder: {self._recorder_failure}")
            if self._backlog.recorded != recorded:  # progress: a fresh timeout
                recorded = self._backlog.recorded
                wall_deadline = time.monotonic() + timeout_s
                frozen_from = self._freeze.frozen_s()
            elif self._freeze.past(wall_deadline, frozen_from):
                self._recorder_finish_s = 0.0  # a recorder that chains nothing is not outwaited at Finish either
                raise ParticipantTimeout(
                    step, f"recorder chained no step within {timeout_s:g} s while "
                          f"{self._backlog.behind(published)} steps behind ({recorded} steps chained)"
                )
            self._executor.spin_once(timeout_sec=WALL_POLL_S)

    def _call(self, peer: _Peer, request: Any, step: int, timeout_s: float, first: bool = False,
              interruptible: bool = True) -> Any:
        """Call a participant; refuse with participant_lost/timeout instead of hanging.

        ``interruptible=False`` (Finish): an interrupt does not stop the wait. The recorder
        writes its manifest when it answers, so a run aborted while waiting for that answer
        would say "aborted" here and "counted" in its manifest.

        ``first``: the participant's first call (step 0; the recorder's only one, Finish).
        Its answer, or the request, can be lost while discovery is still matching the
        service's endpoints: the client may see the service before the server's writer of
        answers has matched the client's reader, and rmw then drops the answer after 100 ms
        (measured: 1 run in 40 under load, the driver's log saying "failed to send response
        (timeout)", the run refused 30 s later). So a first call unanswered after RESEND_S
        is sent again, then after twice that, and so on; a participant answers a request it
        has answered with the same answer.
        """
        assert self._executor is not None
        if self.interrupted and interruptible:  # the hot path below looks only when an answer is late
            raise self._stopped(step)
        future = peer.client.call_async(request)
        # The step's outputs go out while the participant works on the request: a
        # publish costs a good part of a hop, and here it overlaps the participant's work
        # (processes layout, 10 interleaved runs: median per-step x0.87). Each topic keeps
        # its order; a topic and a service were never ordered with each other. (The
        # bridge's state goes out here too, see step; a task in the bridge publishing it
        # after the answer measured slower.)
        self._flush()
        wall_deadline = time.monotonic() + timeout_s
        sent = [future]
        resend_s = RESEND_S
        wall_resend = time.monotonic() + resend_s if first else math.inf
        # The answer usually comes well within one poll interval: only when it has not is
        # anything else looked at (interrupt, the peer's process in /proc, the wall_deadline), so
        # the hot path costs one spin and no system call.
        # time this process did not run (stopped, Ctrl-Z, a debugger, a paused VM) is not the
        # participant's: a clock master frozen 12 s refused a bridge that had answered at once,
        # "did not answer within 10 s" (in one process, the freeze fell in its callback)
        frozen_from = self._freeze.counted  # a freeze not looked at yet only widens the allowance
        self._waiting = (peer.who, wall_deadline, timeout_s, frozen_from)  # for overdue()
        while not spin_future(self._executor, future, WALL_POLL_S):
            now = time.monotonic()
            stalled_s = self._freeze.frozen_s() - frozen_from
            answered = next((f for f in sent if f.done()), None)  # an earlier request's answer
            if answered is not None:
                future = answered
                break
            if self.interrupted and interruptible:
                _cancel(sent)
                raise self._stopped(step)
            if peer.gone():
                _cancel(sent)
                # one that left while this process was stopped may have taken the clock
                # master for gone (nodes.common.ClockMasterGone): say so beside its loss
                also = f" (the clock master itself did not run for {stalled_s:.1f} s meanwhile)" if stalled_s else ""
                raise ParticipantLost(step, f"{peer.who} (pid {peer.pid}) is gone{also}")
            if now >= wall_deadline + stalled_s:
                _cancel(sent)
                raise ParticipantTimeout(step, f"{peer.who} did not answer within {timeout_s:g} s{self._said(peer)}")
            if now >= wall_resend:
                # Finish is answered once the record is complete: late messages are waited for
                also = (", or the recorder is still waiting for a step's messages (recorder.finish_timeout_ms)"
                        if peer is self._recorder else "")
                self.node.get_logger().warning(
                    f"no answer from {peer.who} within {resend_s:g} s (step {step}): sending the request again "
                    f"(an answer can be lost while discovery is still matching the service{also})")
                future = peer.client.call_async(request)
                sent.append(future)
                resend_s *= 2
                wall_resend = now + resend_s
        if len(sent) > 1:  # the others' answers, should they come, are not waited for
            _cancel(f for f in sent if f is not future)
        response: Any = future.result()
        if getattr(response, "ok", True) and self._freeze.past(wall_deadline, frozen_from):
            # answered past its limit: in `single` a participant's callback holds this thread
            # (a torch model 40 s a call counted there, and was refused in `processes`); one
            # that refused, its own watchdog's words (SimBridge: "still working after ...") stand
            raise ParticipantTimeout(step, f"{peer.who} did not answer within {timeout_s:g} s{self._said(peer)}")
        self._one_answer_each(peer, step)  # a second answer to this request, or to an earlier one
        if hasattr(response, "pid"):  # Step and Decide answers name their process
            try:
                peer.note_answer(response.pid, response.host, step)
            except ParticipantLost:
                # two servers say more than "another process answered": name them when the graph knows
                self._check_one_server(peer, step, force=True)
                raise
            self._check_one_server(peer, step, force=first)
        return response

    def _one_answer_each(self, peer: _Peer, step: int) -> None:
        """Refuse a run whose requests to ``peer`` were answered twice (_AnswersSeen).

        Raises:
            ParticipantLost: two nodes serve its service.
        """
        if peer.answers.second_answers:
            self._check_one_server(peer, step, force=True)  # the graph's names, where it has them
            srv = peer.client.srv_name
            raise ParticipantLost(step, f"a request to {srv} was answered twice: two nodes serve {srv} (not "
                                        f"named yet on the graph); whichever answers first would be taken; "
                                        f"one {peer.who} per run")

    def _check_one_server(self, peer: _Peer, step: int, force: bool = False) -> None:
        """One node serves each participant's service: with two, whichever answers first is
        taken, and one that never wins the race went unseen by the answers' pids (a counted
        run, the other's answers dropped). The graph is asked at step 0, every
        SERVER_CHECK_S of stepping (a count costs ~4 us) and before Finish. A new clock
        master hears only live participants: a killed one's entry (kept 20 s by a graph that
        knew it) is not announced to a process that starts after its death.

        Raises:
            ParticipantLost: more than one node serves the service.
        """
        now = time.monotonic()
        if not force and now < peer.next_server_check:
            return
        peer.next_server_check = now + SERVER_CHECK_S
        srv = peer.client.srv_name
        count = self.node.count_services(srv)
        if count > 1:
            names = self._serving_nodes(srv, want=count)
            raise ParticipantLost(step, f"{count} nodes serve {srv} ({', '.join(names) or 'not named yet'}): "
                                        f"whichever answers first would be taken; one {peer.who} per run")

    def overdue(self, step: int) -> None:
        """For a participant in this process (the `single` layout), between chunks of a
        long piece of work: raise what ends the call this clock master is waiting on,
        which it cannot see while that participant holds the thread.

        Raises:
            Aborted: a stop signal came.
            ParticipantTimeout: the call is past its wall-clock limit.
        """
        if self.interrupted:
            raise self._stopped(step)
        if self._waiting is None:
            return
        _called, wall_deadline, limit_s, frozen_from = self._waiting
        if self._freeze.past(wall_deadline, frozen_from):
            raise ParticipantTimeout(step, f"still working after {limit_s:g} s, the limit of a call")

    def _on_pause(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        """/simforge/pause: true holds the run before its next step, false lets it go on.
        Only the wall clock notices: the steps, and every digest, are the same."""
        if self._ended:
            response.success, response.message = False, "the run has ended"
            return response
        self._paused = bool(request.data)
        self._released = 0
        response.success = True
        if not self._paused and self._hold_before >= 0:  # a resume before the hold it asked for
            response.message = f"running (clock_master.hold_at_step still holds it after step {self._hold_before - 1})"
        elif not self._paused:
            response.message = "running"
        elif self._last_step is not None:
            response.message = f"paused after the last step ({self._last_step}): resuming ends the run"
        elif self._step < 0:  # step 0 (the reset) is never held: a pause before it holds step 1
            response.message = "paused before step 1 (the run has not started yet: it waits for its participants)"
        else:
            response.message = f"paused before step {self._step + 1}"
        self.node.get_logger().info(f"{topics.PAUSE_SERVICE}: {response.message}")
        return response

    def _on_advance(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """/simforge/advance: a held run does one more step, then holds again (called n
        times, n more steps)."""
        if self._ended:
            response.success, response.message = False, "the run has ended"
        elif not self._paused:
            response.success, response.message = False, f"the run is not held ({topics.PAUSE_SERVICE} true holds it)"
        else:
            self._released += 1
            response.success = True
            if self._last_step is not None:
                response.message = f"the run ends: step {self._last_step} was its last"
            else:
                # said as the step is let go, before it runs: a refusal of it ends the run
                # instead (a user told "holds again before step 41" saw the run end at 40)
                again = max(self._step + 1, 1) + self._released
                response.message = f"holds again before step {again}, unless the run ends at step {again - 1}"
            self.node.get_logger().info(f"{topics.ADVANCE_SERVICE}: {response.message}")
        return response

    def _hold(self, step: int) -> None:
        """Wait while paused, with the previous step's records out (a viewer sees the
        world where it stopped); an interrupt or a participant gone still end the run."""
        assert self._executor is not None
        self._flush()
        if self._last_step is not None:
            self.node.get_logger().info(f"paused after the last step ({self._last_step}): {topics.PAUSE_SERVICE} "
                                        f"false or {topics.ADVANCE_SERVICE} ends the run")
        else:
            self.node.get_logger().info(f"paused before step {step}: {topics.PAUSE_SERVICE} false resumes, "
                                        f"{topics.ADVANCE_SERVICE} does one step")
        start = time.perf_counter_ns()
        while self._paused and not self._released:
            self._spin_waiting(step, WALL_POLL_S)
        if self._released:  # this one step goes; the run is still held before the next
            self._released -= 1
        held_ns = time.perf_counter_ns() - start
        self._held_ns += held_ns
        self._pacer.hold(held_ns)

    def _hold_at_end(self, steps_done: int) -> None:
        """Hold after the last step, before the run ends, when hold_at_step names it or a
        pause came during it: the world stays at its final step for a live look (the
        nodes, and what they publish, are gone once the run ends). Resuming ends the run;
        a stop signal meanwhile ends it as ``aborted`` at step ``steps_done``, as in any hold."""
        if steps_done <= 0 or not (self._paused or self._hold_before == steps_done):
            return
        self._last_step = steps_done - 1
        self._paused = True  # an advance still pending (asked for more steps than there were) ends it at once
        self._hold(steps_done)

    def _pace(self, step: int, t_us: int) -> None:
        """With a real_time_factor, wait until simulation time ``t_us`` is due (core.pacing).
        The previous step's records go out first, so a live viewer sees each step when it
        happens, not a period late; meanwhile the executor spins (the recorder's progress,
        an interrupt, a recorder gone are seen as in any other wait)."""
        assert self._executor is not None
        due = self._pacer.due_ns(t_us)
        if due is None or time.perf_counter_ns() >= due:
            return
        self._flush()
        start = time.perf_counter_ns()
        while (left_ns := due - time.perf_counter_ns()) > 0:
            self._spin_waiting(step, min(left_ns / 1e9, WALL_POLL_S))
        self._pacer.note_wait(time.perf_counter_ns() - start)

    def _spin_waiting(self, step: int, timeout_s: float) -> None:
        """One spin of a wait the loop makes of its own accord (a hold, a pace): an
        interrupt, or a recorder, bridge or driver gone, still end the run (a driver killed
        during a hold went unseen until the resume)."""
        assert self._executor is not None
        if self.interrupted:
            raise self._stopped(step)
        if self.config.record:
            self._watch_recorder(step)
        now = time.monotonic()
        if now >= self._peers_watch_at:  # as often as the recorder is looked at, not every spin of a pace
            self._peers_watch_at = now + RECORDER_WATCH_S
            for peer in (self._bridge, self._driver):
                if peer.gone():
                    raise ParticipantLost(step, f"{peer.who} (pid {peer.pid}) is gone")
        self._executor.spin_once(timeout_sec=timeout_s)

    def wait_turn(self, request: StepRequest) -> None:
        """Hold before this step when asked (/simforge/pause, hold_at_step), and keep to
        real_time_factor; the loop times neither as the bridge's Step."""
        if request.step == 1 and self._pacer.paced:
            # the pace counts from the end of step 0: its time (the scenario's load, a first
            # answer lost while discovery still matches the service, resent 1 s later) is
            # start-up, not a step that took longer than its share; counted from the reset's
            # answer, a slow step 0 left the steps after it unpaced, rushing to catch it up (a
            # CI run of 12 steps at 2x waited 0 ns in all)
            self._pacer.start(time.perf_counter_ns())
        if request.step == self._hold_before:
            self._paused = True
            self._hold_before = -1  # done: a resume now lets the run go to its end
        held = self._paused
        if held:
            self._hold(request.step)
        if self._pacer.paced:
            self._pace(request.step, request.t_us)
            if self._paused and not held:  # a pause that came during the pace holds this step too
                self._hold(request.step)

    def step(self, request: StepRequest) -> BridgeObservation:
        msg = self._msgs.step  # every field is set below; call_async serialises at once
        msg.step, msg.t_us, msg.decision_us = request.step, request.t_us, request.decision_us
        msg.seed, msg.reset = request.seed, request.reset
        convert.action_msg(request.applied, msg.applied)
        self._step = request.step
        response = self._call(self._bridge, msg, request.step, self._timeout_s(request.step), request.step == 0)
        if not response.ok:
            # a period the bridge cannot take is refused as it answers the reset: before step 0
            before = request.reset and response.refusal_code == RateNotMultiple.code
            raise refusal_from_code(response.refusal_code, -1 if before else request.step,
                                    f"sim_bridge: {response.detail or 'no detail'}")
        # The observed state is published from here, not by the bridge before it answers,
        # where it lengthened every step by a publish (2 000-step runs, recorder on, old and
        # new interleaved: processes per-step median x0.92 over 11 pairs, 0.66-1.20 in this
        # noisy VM; single 1.10-1.31x steps/s in 4 of 4 pairs). It leaves with the next
        # request (see _call), also when the contract check then refuses the step.
        self._pending.append((self._state_pub, response.state))
        return BridgeObservation(
            step=request.step, engine_t_us=response.engine_t_us, tick_us=response.tick_us,
            camera_period_us=response.camera_period_us, cameras=tuple(response.cameras),
            scenario_duration_us=response.scenario_duration_us, world_digest=response.world_digest,
            state=convert.state_value(response.state), frames=convert.frame_values(response.frames),
            contacts=convert.contact_values(response.contacts),
        )

    def decide(self, request: DecideRequest) -> Action:
        msg = self._msgs.decide
        msg.step, msg.t_us, msg.decision_us, msg.seed = request.step, request.t_us, request.decision_us, request.seed
        convert.state_msg(request.state, msg.state)
        msg.frames = convert.frame_msgs(request.frames)
        msg.camera_period_us = request.camera_period_us
        response = self._call(self._driver, msg, request.step, self._timeout_s(request.step), request.step == 0)
        if not response.ok:
            code = response.refusal_code
            if code not in DRIVER_REFUSALS and code in REFUSALS:
                # a code that names what only the loop, the bridge or the user can (aborted is
                # the user's interrupt, which rerun runs only up to: the driver's failure
                # would never be sent again): the driver's error, with the code it gave
                raise ParticipantError(request.step, f"driver: refused with {code!r}, not a driver's refusal: "
                                                     f"{one_line(response.detail)}")
            raise refusal_from_code(code, request.step, f"driver: {one_line(response.detail) or 'no detail'}")
        return convert.action_value(response.action)

    # -- loop outputs ----------------------------------------------------------------------
    def _flush(self) -> None:
        """Publish what is held back (each message object is refilled only after this)."""
        pending = self._pending
        try:
            for publisher, msg in pending:
                publisher.publish(msg)
        except RCLError as err:
            # a reader that takes nothing (a stalled recorder of someone else's, say) fills a
            # reliable keep-all writer's history until publishing fails: refuse, by name
            raise ParticipantError(
                self._step, f"publishing on {publisher.topic_name} failed ({err}); a reliable reader "
                            "is not taking messages"
            ) from None
        finally:
            pending.clear()

    def clock(self, step: int, t_us: int) -> None:
        """/clock = t(k): sent with the Decide request of step k (the world is at t(k))."""
        msg = self._msgs.clock
        msg.clock.sec, msg.clock.nanosec = clock_stamp(t_us)
        self._pending.append((self._clock_pub, msg))

    def record(self, timing: TimingRecord, action: Action, applied: Action, state: VehicleState) -> None:
        del state  # published as it came in the Step answer (see step)
        if self.config.record:
            self._watch_recorder(timing.step)
        self._cycles_ns.append(timing.wall_step_ns)
        msgs = self._msgs
        # sent with the next Step request, or at the end of the run (run() flushes)
        self._pending += [
            (self._timing_pub, convert.timing_msg(timing, msgs.timing)),
            (self._action_pub, convert.action_msg(action, msgs.action)),
            (self._applied_pub, convert.action_msg(applied, msgs.applied)),
        ]
        if self.config.record:
            self._keep_up_with_recorder(timing.step)

    def _wait_recorded(self, publishers: tuple[Any, ...]) -> None:
        """Return once every reader matched on ``publishers`` has everything published so
        far (or the wait ran out).

        A topic and a service are not ordered with each other: without this, the Finish
        request could overtake a refused step's /clock and state, which belong to no
        complete step and so are not waited for, and they would be missing from the bag.
        A stack's reader of --wait-for-reader is waited for as well, the run recorded or
        not: one that has not yet matched this writer from its side asks again for what it
        dropped, and only a writer still there can send it (SimBridge._deliver_wanted).
        Without a recorder to wait for, only those topics are waited on, and only once a
        step was done (a dead recorder's readers stay matched and acknowledge nothing).
        """
        for publisher in unacknowledged(publishers, ACKED_WAIT_S):
            # every matched reader is waited for, a stack's too: one stopped or killed
            # (matched until its liveliness lapses) was read as the recorder's fault
            self.node.get_logger().warning(
                f"{publisher.topic_name}: not acknowledged within {ACKED_WAIT_S:g} s by every reader matched "
                f"({publisher.get_subscription_count()}: the recorder's, and any other node's that is "
                "stopped, gone or not taking messages)")

    def deliver_status(self) -> bool:
        """Wait (at most STATUS_ACKED_WAIT_S) until every reader has the final status. A
        fixed 0.3 s of spinning before the node went away was not always enough: in one full
        suite run a driver never heard it, kept spinning, and the runner refused the counted
        run because the driver was still there 5 s later."""
        return not unacknowledged((self._status_pub,), STATUS_ACKED_WAIT_S)

    def _publish_status(self, state: str, steps_done: int, refusal: Refusal | None) -> RunStatus:
        msg = RunStatus()
        msg.run_id, msg.state, msg.steps_done = self.config.run_id, state, steps_done
        if refusal is not None:
            msg.code, msg.step, msg.detail = refusal.code, refusal.step, refusal.detail
        self._status_pub.publish(msg)
        return msg

    # -- the run -----------------------------------------------------------------------------
    def _timeout_s(self, step: int) -> float:
        """A participant's first call (step 0: the bridge loads the scenario, a process warms
        up) may take as long as start-up may; every later call gets participant_timeout_ms.
        A 1.5 s participant timeout failed step 0 of a fresh-clone CI run under load."""
        if step == 0:
            return max(self.config.participant_timeout_s, self.config.startup_timeout_s)
        return self.config.participant_timeout_s

    def _record_publishers(self) -> tuple[Any, ...]:
        """The writers of topics.STEP_TOPICS."""
        return (self._clock_pub, self._timing_pub, self._action_pub, self._applied_pub, self._state_pub)

    def _wait_for_services(self) -> None:
        """Every participant's service, and with the recorder, a reader matched on every
        record topic: a service seen proves nothing about the topics (discovery matches each
        endpoint on its own), and what is published before a reader matched never reaches
        it. The recorder, for its part, offers Finish only once its readers have matched."""
        assert self._executor is not None
        wall_deadline = time.monotonic() + self.config.startup_timeout_s
        peers = [self._bridge, self._driver] + ([self._recorder] if self.config.record else [])
        waits: list[tuple[Callable[[], bool], str]] = [
            (peer.client.service_is_ready, f"{peer.who} service {peer.client.srv_name}") for peer in peers
        ]
        services = {f"{peer.who} service {peer.client.srv_name}": peer.client.srv_name for peer in peers}
        if self.config.record:
            waits += [(_has_reader(pub), f"a recorder reader on {pub.topic_name}") for pub in self._record_publishers()]
            # its process, from its latched parameters: until then a recorder that dies is not
            # seen gone (_Peer.gone) and the loop, paused for it, ends in participant_timeout
            # instead of participant_lost (a recorder killed at step 0, once in a CI run)
            recorder = self._recorder
            waits.append((lambda: recorder.pid is not None, "the recorder's parameters (its process id)"))
        # --wait-for-reader: a stack's node reads each topic named (a viewer, a perception
        # node started before the run, discovered only later: it missed step 0 and more),
        # and this node's writer of it has matched its readers; the bridge waits for its own
        own = {pub.topic_name: pub for pub in self._record_publishers()}
        for topic in self._wanted_readers:
            waits.append((self._read_by_a_stack(topic),
                          f"a reader of {topic} in a node not of the run (--wait-for-reader {topic})"))
            if topic in own:
                waits.append((self._matched(own[topic]),
                              f"the clock master's writer of {topic} matched to its readers (--wait-for-reader)"))
        for ready, what in waits:
            while not ready():
                if self.interrupted:
                    raise self._stopped(-1, " while waiting for participants")
                if time.monotonic() >= wall_deadline:
                    srv = services.get(what)
                    if srv is not None and self.node.count_services(srv) > 0:
                        # on the graph, yet never matched: a best-effort server, say (a
                        # service's endpoints must be reliable)
                        names = ", ".join(self._serving_nodes(srv, want=1)) or "a node not named yet"
                        raise ParticipantTimeout(
                            -1, f"{what} is offered ({names}) but did not match the clock master's client "
                                f"within {self.config.startup_timeout_s:g} s: its QoS may differ (a service's "
                                "endpoints must be reliable)")
                    raise ParticipantTimeout(
                        -1, f"{what} did not appear within {self.config.startup_timeout_s:g} s"
                    )
                self._executor.spin_once(timeout_sec=WALL_POLL_S)

    def _read_by_a_stack(self, topic: str) -> Callable[[], bool]:
        """Whether this node's graph shows a reader of ``topic`` in a node not of the run."""
        return lambda: bool(foreign_readers(self.node, topic))

    def _matched(self, publisher: Any) -> Callable[[], bool]:
        """Whether ``publisher`` has matched every reader its graph shows that can match it."""
        return lambda: bool(publisher.get_subscription_count() >= matchable_readers(
            self.node, publisher, self._unmatchable_said))

    def _participants(self) -> list[Participant]:
        """Who answered Step and Decide, for the manifest: an external driver publishes no
        parameters of its own, and the processes named here are the ones that answered."""
        participants = []
        for peer in (self._bridge, self._driver):
            msg = Participant()
            msg.role = peer.who
            serving = self._serving_nodes(peer.client.srv_name, want=1 if peer.answered is not None else 0)
            # counted by the graph's servers, not by the names: a node that only shares its
            # name with the server (a user's own node called driver) serves nothing
            if (count := self.node.count_services(peer.client.srv_name)) > 1:
                first = peer.answered[0] if peer.answered is not None else None
                self.node.get_logger().warning(
                    f"{count} nodes serve {peer.client.srv_name}: {', '.join(serving)} (the run's first "
                    f"answer came from pid {first}); whichever answers first is taken")
            msg.node = ", ".join(serving)
            if peer.answered is not None:
                msg.pid, msg.host = peer.answered
                msg.pid_watched = peer.local
            participants.append(msg)
        return participants

    def _serving_nodes(self, service: str, want: int) -> list[str]:
        """Full names of the nodes the ROS graph says offer ``service``, waiting up to
        GRAPH_WAIT_S for it to name ``want`` of them (one that answered; those the graph
        counted as servers: it may count a server before it names its node). A second
        server announced later than that goes unnamed here; the servers' count
        (_check_one_server) and the answers' pids (_Peer.note_answer) are the checks."""
        wall_deadline = time.monotonic() + GRAPH_WAIT_S
        requests = topics.requests_topic(service)  # a server's reader of requests names its node
        while True:
            # by the servers' own readers, not by node names: asked by name, a node that only
            # shares the server's name (a user's own node called driver) was credited with its
            # service too, or, in one CI run, the server with none (manifest: node null)
            names = sorted(info.node_namespace.rstrip("/") + "/" + info.node_name  # one a server: two of one name
                           for info in self.node.get_subscriptions_info_by_topic(requests, no_mangle=True)
                           if info.node_name and not info.node_name.startswith(UNNAMED_NODE))
            if len(names) >= want or time.monotonic() >= wall_deadline:
                return names
            time.sleep(0.01)  # the graph is updated by rmw's own threads

    def run(self, executor: Executor, on_step: Any = None) -> RunOutcome:
        """Run the whole loop on ``executor`` (which may also hold the other nodes)."""
        self._freeze.start()
        try:
            return self._run(executor, on_step)
        finally:
            self._freeze.stop()

    def _run(self, executor: Executor, on_step: Any) -> RunOutcome:
        self._executor = executor
        progress = LoopProgress()
        refusal: Refusal | None = None
        self._publish_status("running", 0, None)
        try:
            self._wait_for_services()
            if self._refused_at_start is not None:
                raise self._refused_at_start
            run_lockstep(self.config.loop, self, self, time.perf_counter_ns, progress, on_step)
            self._hold_at_end(progress.steps_done)
            for peer in (self._bridge, self._driver):  # one that came during the last checks' interval
                self._check_one_server(peer, progress.steps_done, force=True)
                self._one_answer_each(peer, progress.steps_done)
        except Refusal as err:
            refusal = err
            self.node.get_logger().error(f"refused: {err}")
            # refused while waiting for the recorder after step K, at K + 1: step K's records
            # are out, though the loop had not yet counted it done
            progress.steps_done = max(progress.steps_done, err.step)
        self._ended = True
        try:
            self._flush()  # the last step's records (or a refused run's last /clock and state)
        except Refusal as err:
            refusal = refusal or err
        if self.config.record and not self._recorder.gone():
            self._wait_recorded(self._record_publishers())
        elif progress.steps_done > 0:  # no recorder to wait for: a stack's readers (--wait-for-reader) still are
            self._wait_recorded(tuple(p for p in self._record_publishers() if p.topic_name in self._wanted_readers))
        chain = ""
        recorded: int | None = None  # the steps the recorder's Finish answer says it chained
        finish_start = time.perf_counter_ns()
        if self.config.record and refusal is not None and not self._recorder_seen():
            self.node.get_logger().warning(
                f"no recorder was seen (no {self._recorder.client.srv_name} service): nothing recorded this run")
        elif (self.config.record and refusal is not None and progress.steps_done == 0
              and not self._recorder.client.service_is_ready()):
            # refused before the recorder offered Finish (it waits for a participant's
            # parameters, and stepping waits for Finish): it writes its record on the final
            # status (nodes.recorder.close). Called, it took the whole Finish limit with its
            # resends, some 20 s more before a run refused at start-up ended.
            self.node.get_logger().info(f"the recorder offers no {self._recorder.client.srv_name} yet: its record "
                                        "is written on the run's final status")
        elif self.config.record:
            status = RunStatus()
            status.run_id = self.config.run_id
            status.state = "refused" if refusal is not None else "counted"
            status.steps_done = progress.steps_done
            if refusal is not None:
                status.code, status.step, status.detail = refusal.code, refusal.step, refusal.detail
            request = Finish.Request()
            request.expected_steps = progress.expected_steps if refusal is None else progress.steps_done
            request.status = status
            request.participants = self._participants()
            request.wall_paced_ns, request.wall_held_ns = self._pacer.waited_ns, self._held_ns
            try:
                # a recorder lost now is refused at the step after the last done (its steps are)
                # the recorder answers once late messages have come, or after finish_timeout_ms:
                # called with the same limit, the call gave up as the recorder answered, and the
                # final status missed the recorder's count of steps
                limit_s = self.config.participant_timeout_s + self._recorder_finish_s
                response = self._call(self._recorder, request, progress.steps_done, limit_s, first=True,
                                      interruptible=False)
                chain = response.chain_digest
                recorded = int(response.steps_recorded)
                failed = response.detail.startswith(f"recorder: {RECORD_FAILED}")
                if refusal is None and not response.counted and failed:
                    # it could not write the record (its manifest, at the end): participant_error,
                    # as one found failing mid-run is (it was "incomplete_run", "recorder: recorder: ...")
                    refusal = ParticipantError(recorded, response.detail)
                elif refusal is None and not response.counted:
                    refusal = IncompleteRun(recorded, f"recorder: {response.detail}")  # where its manifest says
            except Refusal as err:
                if refusal is None:
                    refusal = err
        state = "refused" if refusal is not None else "counted"
        # A refused run's steps are those its record holds: a bridge killed between answering
        # a step and drawing its frames left that step unrecorded, and the final status said
        # one step more than the manifest (`simforge verify` then failed the run's own bag)
        steps_done = progress.steps_done if refusal is None or recorded is None else min(progress.steps_done,
                                                                                         recorded)
        self._publish_status(state, steps_done, refusal)
        wall = wall_summary(self._cycles_ns, time.perf_counter_ns() - finish_start,
                            self._pauses, self._pause_ns, self._pacer.waited_ns, self._held_ns)
        return RunOutcome(state, refusal, steps_done, chain, wall)


    def _recorder_seen(self) -> bool:
        """Whether a recorder has shown itself (its parameters, or its Finish service within
        RECORDER_UNSEEN_WAIT_S): a refused run then asks it to write the record."""
        assert self._executor is not None
        recorder = self._recorder
        return recorder.pid is not None or spin_until(
            self._executor, lambda: recorder.client.service_is_ready() or recorder.pid is not None,
            RECORDER_UNSEEN_WAIT_S)


def main(argv: list[str] | None = None) -> int:
    argv = list(argv if argv is not None else sys.argv)
    if help_requested(NAME, argv):
        return 0
    tune_process()
    dump_stacks_on_signal()
    if (status := start_rclpy(NAME, argv)) is not None:
        return status
    # Taken from rclpy before the node is built: its own handler shut the context down under
    # a Ctrl-C that came while the node was being built, which then failed as an unexpected
    # error ("the given context is not valid"); the run ends as aborted at its first check.
    early: dict[str, Any] = {"interrupted": False, "detail": "interrupted"}
    signal.signal(signal.SIGTERM, lambda *_: early.update(interrupted=True))
    signal.signal(signal.SIGINT, lambda *_: early.update(interrupted=True))
    unblock_held_signals()

    def _launcher_gone() -> None:
        """A `simforge run` killed outright passes no Ctrl-C on: take its going as one."""
        early["detail"] = f"interrupted: simforge run (pid {launcher_pid()}) is gone"
        os.kill(os.getpid(), signal.SIGINT)

    watch_launcher(_launcher_gone)
    try:
        try:
            clock = ClockMaster()
        except (ConfigError, Refusal) as err:
            print(err if isinstance(err, ConfigError) else f"{NAME}: {err}", file=sys.stderr)
            return EXIT_USAGE if isinstance(err, ConfigError) else err.exit_code

        def _on_signal(signum: int, _frame: Any) -> None:
            clock.interrupt_detail = early["detail"]
            clock.interrupted = True

        signal.signal(signal.SIGTERM, _on_signal)
        signal.signal(signal.SIGINT, _on_signal)
        clock.interrupted = clock.interrupted or early["interrupted"]
        clock.interrupt_detail = early["detail"]
        executor = make_executor()
        executor.add_node(clock.node)
        freeze_startup()
        outcome = clock.run(executor)
        # the final status reaches the participants (each ends on it) before the node goes
        # away; and a moment more for whatever else is still on its way
        clock.deliver_status()
        spin_until(executor, lambda: False, 0.1)
        told = OUTCOME_PREFIX + json.dumps(outcome.to_dict())
        tell_outcome(told)  # `simforge run`'s pipe: off the run's disk, which may be full
        try:
            if outcome.refusal is not None:
                print(f"{NAME}: refused: {outcome.refusal}", file=sys.stderr)
            print(told, flush=True)
        except OSError:  # a full disk under the log: the pipe above, or the exit status, tells
            pass
        exit_if_stuck(TEARDOWN_S, outcome.exit_code)  # the outcome is out (see exit_if_stuck)
        close_nodes(executor, [clock.node])
        return outcome.exit_code
    except Exception as err:  # noqa: BLE001 - report, never a bare traceback
        print(f"{NAME}: unexpected error: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        if rclpy.ok():
            rclpy.shutdown()
        # a Ctrl-C as the interpreter ends killed it after it had said the run counted:
        # `simforge run` exited 254 with "participant_error before step 0" beside a counted manifest
        ignore_stop_signals()


if __name__ == "__main__":
    sys.exit(main())
