"""What every simforge_ros node shares: parameter declaration, QoS, process plumbing.

Kept small on purpose: a node is a thin adapter between ROS and a core object.
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.clock import Clock, ClockType
from rclpy.duration import Duration
from rclpy.exceptions import InvalidParameterTypeException, ParameterUninitializedException
from rclpy.executors import Executor
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, LivelinessPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from simforge_ros import topics
from simforge_ros.core.errors import (
    EXIT_FAILURE,
    EXIT_USAGE,
    ConfigError,
    ParticipantError,
    Problem,
    Refusal,
    one_line,
)
from simforge_ros.core.faults import FaultPlan
from simforge_ros.core.units import resolve_period
from simforge_ros.params import NODE_PARAMS, RCLPY_PARAMS, ParamSpec, coerce, meant_as, rcl_said, read_params_file
from simforge_ros.process_tuning import (
    LAUNCHER_ENV,
    TEARDOWN_CUT,
    dump_stacks_on_signal,
    end_after,
    exit_after,
    freeze_startup,
    process_state,
    tune_process,
    unblock_held_signals,
    watch_launcher,
)
from simforge_ros.resources import use_fastdds_profile
from simforge_ros.under_launch import LAUNCH_INTERRUPT_S, UNDER_LAUNCH_ENV

RCLError = _rclpy.RCLError
_TYPES = {
    "int": Parameter.Type.INTEGER,
    "float": Parameter.Type.DOUBLE,
    "bool": Parameter.Type.BOOL,
    "str": Parameter.Type.STRING,
    "str_list": Parameter.Type.STRING_ARRAY,
}

# Every record must arrive: reliable, and no history depth that could overwrite one.
RECORD_QOS = QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.RELIABLE)
# The recorder's progress (topics.RECORDED): only the latest count matters, and a reader
# that matched late gets it too (a count sent before it matched is not sent again).
PROGRESS_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
# Run status and node parameters reach late joiners too.
LATCHED_QOS = QoSProfile(
    depth=16, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
# /tf_static as tf2's StaticTransformBroadcaster offers it: the last message, latched
TF_STATIC_QOS = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
HOST = socket.gethostname()
# How long a wait on the executor may block before a wall-clock watchdog looks again.
WALL_POLL_S = 0.05


def _descriptor(item: ParamSpec, read_only: bool = True) -> ParameterDescriptor:
    """What `ros2 param describe` shows: the parameter's meaning and range. Read-only: a
    node reads its parameters once, at start-up, so a `ros2 param set` mid-run would
    change nothing and is refused instead. (The range is checked by params.coerce, which
    names the node and field, not by rclpy.)"""
    return ParameterDescriptor(description=item.doc, additional_constraints=item.limits(), read_only=read_only,
                               type=_TYPES[item.kind].value)


def declare_params(node: Node, node_name: str) -> dict[str, Any]:
    """Declare ``node_name``'s parameters (params.NODE_PARAMS) and read them once.

    Raises:
        ConfigError: a parameter was given with the wrong type (all reported together).
    """
    values: dict[str, Any] = {}
    problems: list[Problem] = _overrides_checked(node, node_name)
    defaulted: set[str] = set()  # not given: the declared default stands
    for item in NODE_PARAMS[node_name]:
        try:  # writable until its value is settled below
            node.declare_parameter(item.name, _TYPES[item.kind], _descriptor(item, read_only=False))
        except InvalidParameterTypeException:
            given = node._parameter_overrides.get(item.name)
            expected = item.expected() + (
                f" (a number or true/false meant as text is quoted: -p {item.name}:=\"'08'\")"
                if item.kind == "str" and given is not None and not isinstance(given.value, str) else "")
            problems.append(Problem(node_name, item.name, expected,
                                    given.value if given is not None else None))
            continue
        try:
            value = node.get_parameter(item.name).value
        except ParameterUninitializedException:
            value = [] if item.kind == "str_list" and _given_empty(node, item.name) else item.default
            defaulted.add(item.name)
        values[item.name] = list(value) if item.kind == "str_list" and value is not None else value
        if value is not None:
            try:
                coerce(node_name, item.name, values[item.name], source=node_name)
            except ConfigError as err:  # a zero size, count or time limit
                problems.extend(err.problems)
    for name in list(values):
        # a period given in seconds replaces its default in microseconds (both given: an error)
        twin = name[:-2] + "_us"
        if name.endswith("_s") and name not in defaulted and twin in defaulted and values[name] is not None:
            values[twin] = None
    if problems:
        raise ConfigError(problems)
    _settle(node, node_name, values)
    return values


def node_faults(values: Mapping[str, Any], node_name: str) -> FaultPlan:
    """The node's ``faults`` parameter, parsed; a bad one named as the node's parameter
    (core.faults says ``--inject``, an option of `simforge run` a node started by hand or
    by a launch file never had).

    Raises:
        ConfigError: a fault spec that does not parse.
    """
    try:
        return FaultPlan.parse(values["faults"])
    except ConfigError as err:
        raise ConfigError([Problem(node_name, "faults", p.expected, p.got) if p.source == "--inject" else p
                           for p in err.problems]) from None


def _overrides_checked(node: Node, node_name: str) -> list[Problem]:
    """The values given to the node (``-p``, ``--params-file``, a launch file), before they
    are declared: an int for a float parameter widened, as `simforge run` widens it, and a
    name the node does not declare refused when it is within a typo of one it does.

    Before, ``-p real_time_factor:=1`` (launch_ros types ``:=1`` as an int too) was refused
    as the wrong type, and ``-p decison_us:=50000`` was ignored without a word: the run
    went on at the default period. A name that is no typo is left out with a warning (a
    stack's shared ``/**`` section gives every node parameters meant for others). rclpy
    keeps the overrides in ``Node._parameter_overrides`` and offers no public reader.
    """
    overrides = getattr(node, "_parameter_overrides", None)
    if not isinstance(overrides, dict):
        return []
    specs = {item.name: item for item in NODE_PARAMS[node_name]}
    problems: list[Problem] = []
    for name, given in list(overrides.items()):
        item = specs.get(name)
        if item is not None:
            if item.kind == "float" and given.type_ == Parameter.Type.INTEGER:
                overrides[name] = Parameter(name, Parameter.Type.DOUBLE, float(given.value))
            continue
        if name in RCLPY_PARAMS or name.startswith("qos_overrides."):
            continue  # rclpy's own, declared by rclpy where it applies
        others = [other for other, items in NODE_PARAMS.items()
                  if other != node_name and any(i.name == name for i in items)]
        meant = None if others else meant_as(name, specs)
        if meant is not None:
            problems.append(Problem(node_name, name, f"a parameter of {node_name} (did you mean {meant}?)",
                                    given.value))
        else:
            whose = f"{', '.join(others)}'s, not {node_name}'s" if others else f"not one {node_name} declares"
            node.get_logger().warning(f"parameter {name} left out: {whose}")
    return problems


def _settle(node: Node, node_name: str, values: Mapping[str, Any]) -> None:
    """Leave each declared parameter holding the value the node runs with, then read-only.

    A parameter declared with its type and given no value stays "not initialized" in rclpy:
    `ros2 param get` failed on it, and rclpy answers a GetParameters naming any such one
    with no values at all, so `ros2 param dump` of a simforge node showed nothing. A
    default now becomes the parameter's value; one unset (a period's other unit, an
    optional period) is undeclared, as if never offered, so that a dumped file reads back.
    """
    for item in NODE_PARAMS[node_name]:
        if not node.has_parameter(item.name):
            continue
        value = values.get(item.name)
        if value is None:
            node.undeclare_parameter(item.name)
            continue
        if node.get_parameter_or(item.name).type_ == Parameter.Type.NOT_SET:  # given no value: the default
            value = float(value) if item.kind == "float" else value  # a default written as an int
            (result,) = node.set_parameters([Parameter(item.name, _TYPES[item.kind], value)])
            if not result.successful:
                raise ConfigError.single(node_name, item.name, f"a value rclpy takes ({result.reason})", value)
        node.set_descriptor(item.name, _descriptor(item))


def steady_timer(node: Node, period_s: float, callback: Callable[[], None]) -> Any:
    """A timer on the steady clock, for what the nodes time by the wall: polling the graph
    for a match, progress reports, a frame's deadline. Never simulation time.

    On the node's own clock these timers would follow ``/clock`` under
    ``use_sim_time: true`` (the usual shared ``/**`` section of a stack's parameter file):
    they would not fire before the first ``/clock``, and no step is taken before they have,
    so such a run used to time out at start-up.
    """
    return node.create_timer(period_s, callback, clock=Clock(clock_type=ClockType.STEADY_TIME))


def refuse(response: Any, err: Refusal) -> Any:
    """Fill a Step/Decide answer with a refusal (ok=false, its code and detail)."""
    response.ok, response.refusal_code, response.detail = False, err.code, err.detail
    return response


def unexpected(step: int, err: Exception) -> Refusal:
    """An unexpected failure inside a participant, as the refusal the clock master gets:
    the participant answers `participant_error` instead of dying or hanging the run."""
    return ParticipantError(step, one_line(f"{type(err).__name__}: {err}"))


def _given_empty(node: Node, name: str) -> bool:
    """Whether the parameter file gave ``name: []``.

    rcl's YAML parser cannot type an empty sequence: it hands rclpy an override of type
    NOT_SET, and declaring the parameter as a string array then reads as "uninitialized".
    Without this, ``--set sim_bridge.cameras=[]`` silently kept the default cameras.
    """
    override = getattr(node, "_parameter_overrides", {}).get(name)
    return override is not None and override.type_ == Parameter.Type.NOT_SET


def period(values: Mapping[str, Any], name: str, node_name: str) -> int | None:
    """A period given as ``name_us`` or ``name_s`` (exactly converted); None when unset.

    Raises:
        ConfigError: both spellings given. RateNotMultiple: seconds not exact in us.
    """
    given = {k: v for k, v in values.items() if k.startswith(name + "_") and v is not None}
    try:
        return resolve_period(given, name)
    except ConfigError as err:
        raise ConfigError([Problem(node_name, p.field, p.expected, p.got) for p in err.problems]) from None


def publish_node_params(
    node: Node, node_name: str, values: Mapping[str, Any], extra: Mapping[str, Any] | None = None,
    pub: Any = None,
) -> Any:
    """Publish this node's effective parameters (latched) for the run manifest, with the
    process it runs in: the clock master watches a participant by its pid on this host,
    also one it never calls while stepping (the recorder). Never part of a digest.

    ``pub``: the writer to publish on (one returned before), else a new one. A writer made
    for one message and dropped at once may be gone before a reader has matched it: the
    bridge's backend information was lost that way in about 1 run in 25.
    """
    if pub is None:
        pub = node.create_publisher(String, topics.NODE_PARAMS, LATCHED_QOS)
    msg = String()
    process = {"pid": os.getpid(), "host": HOST}
    msg.data = json.dumps({"node": node_name, "params": dict(values), "process": process, **(extra or {})},
                          sort_keys=True)
    pub.publish(msg)
    return pub


def watch_node_params(node: Node, on_params: Callable[[dict[str, Any]], None]) -> Any:
    """Call ``on_params(info)`` with each node's latched parameters (publish_node_params);
    a message that is not such a JSON object is skipped (the recorder keeps it as it came)."""

    def _cb(msg: String) -> None:
        try:
            info = json.loads(msg.data)
        except ValueError:
            return
        if isinstance(info, dict):
            on_params(info)

    return node.create_subscription(String, topics.NODE_PARAMS, _cb, LATCHED_QOS)


def watch_run_status(node: Node, on_final: Callable[[Any], None]) -> Any:
    """Call ``on_final(status)`` when the run's final RunStatus (counted/refused) arrives."""
    from simforge_ros.msg import RunStatus

    def _cb(msg: RunStatus) -> None:
        if msg.state in ("counted", "refused"):
            on_final(msg)

    return node.create_subscription(RunStatus, topics.STATUS, _cb, LATCHED_QOS)


def process_alive(pid: int) -> bool:
    """Whether a local process runs (a zombie counts as dead)."""
    return process_state(pid) not in (None, "Z", "X")


def in_dds_domain(pid: int, domain_id: int) -> bool:
    """Whether local process ``pid`` holds a UDP socket on one of ``domain_id``'s DDS
    ports (7400 + 250 * domain_id and the 249 after, the RTPS port mapping): a participant
    of that domain, not whatever process of this host a pid from another pid namespace
    names. False where its sockets cannot be read (another user's process)."""
    low = 7400 + 250 * domain_id
    inodes: set[str] = set()
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(table) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and low <= int(fields[1].rsplit(":", 1)[1], 16) < low + 250:
                inodes.add(fields[9])
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            return True
    return False


def die_now() -> None:
    """Fault injection `kill=NODE@K`: end this process at once, as a crash would."""
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


# Set by SIGTERM/SIGINT in a participant process; a process concern, not simulation state.
STOP = threading.Event()


TEARDOWN_S = 3.0
# Wall clock: how long a participant whose `simforge run` was killed outright waits for
# the clock master to end the run (it aborts at once; the recorder then writes its record).
ORPHAN_GRACE_S = 30.0


# How long after exit_if_stuck's own deadline its lock-free backstop ends the process.
BACKSTOP_S = 0.5


def exit_if_stuck(seconds: float, code: int) -> threading.Timer:
    """Leave the process with ``code`` if it is still here after ``seconds``; end it by
    TEARDOWN_SIGNAL BACKSTOP_S later if even that could not run.

    Armed before a node is torn down: rclpy's teardown was seen to spin at 100% CPU
    forever (in Node.destroy_node / EventHandler.__exit__ after an EventsExecutor spun the
    node), and a node that never exits is worse than one that skips its cleanup. The timer
    is a Python thread: where the teardown hangs in C with the interpreter lock held (seen
    in EventsExecutor.shutdown), it never runs, and the kernel's timer (end_after) ends the
    process instead, its stacks in its log. Call it only once the node's results are out
    (answers sent, files written). The likely cause lies below rclpy: lock-order
    inversions between rmw_fastrtps's QoS-event callbacks and Fast DDS's endpoints, met
    when peers leave the graph while a node tears down, as at every run's end
    (see ros2/rmw_fastrtps#890 and eProsima/Fast-DDS#6193)."""
    def _say() -> None:
        print(f"{TEARDOWN_CUT} {seconds:g} s: exiting without it", file=sys.stderr, flush=True)

    end_after(seconds + BACKSTOP_S)
    return exit_after(seconds, code, _say)


def close_nodes(executor: Executor, nodes: Iterable[Node]) -> None:
    """Detach each node from ``executor`` (if it holds it), destroy it, then shut the
    executor down: destroying a node still held by a shut-down EventsExecutor was seen
    to spin at 100% CPU for hours inside Node.destroy_node (bench --quick, 2026-12-02)."""
    held = set(executor.get_nodes())
    for node in nodes:
        if node in held:
            executor.remove_node(node)
        node.destroy_node()
    executor.shutdown()


def stall_forever() -> None:
    """Fault injection `stall=NODE@K`: stop answering, as a hung process would, until
    the launcher stops this process."""
    while not STOP.wait(0.05):
        pass


def losing_answer(handler: Callable[[Any, Any], Any], step: int,
                  step_of: Callable[[Any], int] = lambda request: int(request.step)) -> Callable[[Any, Any], Any]:
    """Fault injection `lose_answer=NODE@K`: a service handler whose answer at step K
    (``step_of(request)``) is lost once, as DDS loses one while discovery is still matching
    the service's endpoints (the server's writer of answers has not yet matched the
    client's reader: rmw drops it after 100 ms). The answer is made as usual, then never
    sent: the coroutine waits on a future nothing completes. A request sent again gets the
    answer (see ClockMaster._call)."""
    from rclpy.task import Future

    lost = False

    async def _serve(request: Any, response: Any) -> Any:
        nonlocal lost
        answer = handler(request, response)
        if inspect.isawaitable(answer):
            answer = await answer
        if step_of(request) == step and not lost:
            lost = True
            await Future()
        return answer

    return _serve


def jitter_sleep(rng: Any, max_ms: float) -> None:
    """Fault injection `jitter=MAX_MS`: wall-clock delay only; never touches the simulation."""
    if max_ms > 0:
        time.sleep(float(rng.uniform(0.0, max_ms)) / 1000.0)


def make_executor(context: Any = None) -> Executor:
    """The executor every simforge node spins: rclpy's EventsExecutor.

    It dispatches from C++ without rebuilding a wait set in Python for every wake-up,
    which halved the loop's per-step time against SingleThreadedExecutor. Its ``spin()``
    hangs in this build: spin it only with ``spin_once``/``spin_future`` and a timeout.
    """
    from rclpy.experimental import EventsExecutor

    return EventsExecutor(context=context)


def spin_future(executor: Executor, future: Any, timeout_s: float) -> bool:
    """Spin until ``future`` is done (True) or ``timeout_s`` passed (False).

    One event at a time (``spin_once``), not ``spin_until_future_complete``: the
    EventsExecutor's keeps about 37 bytes a call it never frees, two calls a step, and the
    clock master grew 4.5 MB over a 60 000-step run (40 000 calls in a bare loop: +1 260 KB
    against +4 KB, and 38.8 against 33.6 us a call).
    """
    if future.done():
        return True
    wall_deadline = time.monotonic() + timeout_s
    context_ok, spin_once, now = executor.context.ok, executor.spin_once, time.monotonic  # a step's hot loop
    while not future.done():
        if not context_ok():
            return bool(future.done())
        left_s = wall_deadline - now()
        if left_s <= 0:
            break
        spin_once(timeout_sec=left_s)
    # past the limit, what is already here is still taken: in one process a bridge busy past
    # it (its own watchdog then refuses the step) answers while the wait is over, and its
    # answer, naming what it had done, must not be passed over for "did not answer"
    for _ in range(_DRAIN_MAX):
        if future.done() or not context_ok():
            break
        spin_once(timeout_sec=0.0)
    return bool(future.done())


_DRAIN_MAX = 64  # events taken at most once a wait is over (a step's messages and the answer)


def spin_until(executor: Executor, done: Callable[[], bool], timeout_s: float | None = None) -> bool:
    """Spin until ``done()`` (True) or the wall-clock timeout (False)."""
    wall_deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not done():
        if not rclpy.ok(context=executor.context):
            return done()
        if wall_deadline is not None and time.monotonic() >= wall_deadline:
            return False
        executor.spin_once(timeout_sec=WALL_POLL_S)
    return True


def help_requested(node_name: str, argv: list[str]) -> bool:
    """Print the node's usage and parameters for -h/--help (before any ROS argument)."""
    user_args = argv[1:argv.index("--ros-args")] if "--ros-args" in argv else argv[1:]
    if not {"-h", "--help"} & set(user_args):
        return False
    print(f"usage: {node_name} [--ros-args -p NAME:=VALUE ... --params-file FILE]\n")
    print(f"simforge_ros {node_name} node. Parameters:")
    for item in NODE_PARAMS[node_name]:
        default = "unset" if item.default is None else repr(item.default)
        limits = f" [{item.limits()}]" if item.limits() else ""
        print(f"  {item.name:24s} {item.kind:9s} default {default}{limits}: {item.doc}")
    return True


# Wall clock: how often a participant looks whether the clock master has left (ClockMasterGone).
GONE_POLL_S = 0.1


class ClockMasterGone:
    """Whether the clock master has left: its process (on this host, named by its latched
    parameters) has exited, or its status writer was seen on the graph and is now gone. The
    run is over then, whether or not its final status reached this node (``why`` says which).

    Every participant ends on that final status. In two runs of some hundreds (the demo,
    a full test suite) a driver never heard it, kept spinning, and the runner refused the
    counted run because the driver was still there 5 s later; the clock master had waited
    for every matched reader to acknowledge the status. A clock master that leaves cleanly
    announces its writer's removal, which ends such a participant all the same; but a
    recorder that missed the status was once still there 5 s later without having seen the
    writer go, so the process is looked at too.
    """

    def __init__(self, node: Node) -> None:
        self._node = node
        self._seen = False
        self._next_look = 0.0  # time.monotonic() of the next look at the graph
        self._pid: int | None = None  # the clock master's, on this host, from its parameters
        self.why = ""
        self._params_sub = watch_node_params(node, self._on_params)

    def _on_params(self, info: dict[str, Any]) -> None:
        process = info.get("process")
        if info.get("node") == "clock_master" and isinstance(process, dict):
            pid = process.get("pid")
            if isinstance(pid, int) and process.get("host") == HOST and pid != os.getpid():
                self._pid = pid

    def __call__(self) -> bool:
        now = time.monotonic()
        if now < self._next_look:
            return False
        self._next_look = now + GONE_POLL_S
        if self._pid is not None and not process_alive(self._pid):
            self.why = f"its process (pid {self._pid}) has exited"
            return True
        if self._node.count_publishers(topics.STATUS):
            self._seen = True
            return False
        if self._seen:
            self.why = "its status writer has left the graph"
        return self._seen


def params_files(argv: list[str]) -> list[str]:
    """The ``--params-file`` paths of ``argv``'s ROS arguments (after ``--ros-args``, up to
    a ``--``), in their order."""
    files: list[str] = []
    inside = False
    for i, arg in enumerate(argv):
        if arg == "--ros-args":
            inside = True
        elif arg == "--":
            inside = False
        elif inside and arg == "--params-file" and i + 1 < len(argv):
            files.append(argv[i + 1])
    return files


def start_rclpy(node_name: str, argv: list[str]) -> int | None:
    """rclpy.init for a node's main(); None once done, else the exit status (the problem is
    on stderr, one line each: never rcl's traceback).

    A node started by hand (``ros2 run``, a shell; not by `simforge run` nor the launch
    file, which check the files themselves) reads its
    parameter files as `simforge run --params-file` does first: a file rcl takes that gives
    the node nothing (a scalar, an empty file, a section ``clock_mastr``) started it on its
    defaults without a word. Such a node, and one the launch file starts, also gets the
    package's Fast DDS profile where none is named: without its heartbeats every
    hand-started run ended 2 s late, each record topic "not acknowledged" (`simforge run`
    names it in its nodes' environment).
    """
    if not os.environ.get(LAUNCHER_ENV):  # started by hand or by the launch file
        use_fastdds_profile(os.environ)  # before rclpy makes this process's participant
    if not (os.environ.get(LAUNCHER_ENV) or os.environ.get(UNDER_LAUNCH_ENV)):
        try:
            for path in params_files(argv):
                read_params_file(Path(path), ask_rcl=False)  # rcl's own refusal: below
        except ConfigError as err:
            print(f"{node_name}: cannot start:\n{err}", file=sys.stderr, flush=True)
            return EXIT_USAGE
    try:
        rclpy.init(args=argv)
    except RCLError as err:  # a file or argument rcl refuses: its "Error: ..." said, not its traceback
        print(f"{node_name}: cannot start: rcl refused the ROS arguments: {rcl_said(err)}", file=sys.stderr,
              flush=True)
        return EXIT_USAGE
    return None


def run_participant(build: Callable[[], Any], node_name: str, argv: list[str] | None) -> int:
    """main() of a participant node: build it, spin until the run ends or a signal comes.

    A participant's object has ``.node`` and ``.finished`` (set when the run's final status
    arrives; the participant also ends when the clock master has left, ClockMasterGone),
    and may have ``.close(why)``, called on the way out (``why``: empty once the final
    status came, else what ended it first); a configuration error exits 2 with the error,
    never a traceback.
    """
    argv = list(argv if argv is not None else sys.argv)
    if help_requested(node_name, argv):
        return 0
    tune_process()
    dump_stacks_on_signal()
    if (status := start_rclpy(node_name, argv)) is not None:
        return status
    stop = {"signal": 0}  # the stop signal's number, once one came
    # Under `ros2 launch` the terminal's Ctrl-C reaches every node of the launch at once
    # (launch's children share its process group). The clock master then aborts the run at
    # its next step; a participant that left at once took the step it was serving with it,
    # and a recorder closed before the Finish: every interrupted launch was kept as
    # incomplete_run, never `aborted`. There, a first SIGINT leaves it serving until the
    # run's end, the clock master gone, or LAUNCH_INTERRUPT_S.
    defer_sigint = os.environ.get(UNDER_LAUNCH_ENV) == "1"
    interrupted_at: list[float] = []

    def _on_signal(signum: int, _frame: Any) -> None:
        if signum == signal.SIGINT and defer_sigint and not interrupted_at:
            interrupted_at.append(time.monotonic())
            return
        stop["signal"] = signum
        STOP.set()

    def _interrupt_outlasted() -> bool:
        if interrupted_at and time.monotonic() - interrupted_at[0] >= LAUNCH_INTERRUPT_S:
            stop["signal"] = signal.SIGINT
            STOP.set()  # as a SIGTERM: a long piece of work in hand stops too
            return True
        return False

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    unblock_held_signals()
    # a `simforge run` killed outright: its clock master aborts the run and ends it (the
    # usual way out, below); a participant still here ORPHAN_GRACE_S later leaves anyway
    watch_launcher(lambda: os.kill(os.getpid(), signal.SIGTERM), ORPHAN_GRACE_S)
    try:
        try:
            shell = build()
        except (ConfigError, Refusal, ImportError) as err:
            # a module missing (torch for the planner) is a start-up failure like a bad
            # parameter: exit 2 with its line, which ends a launch at once
            said = f"{node_name}: cannot start: {err}" if isinstance(err, ImportError) else f"{node_name}: {err}"
            print(err if isinstance(err, ConfigError) else said, file=sys.stderr, flush=True)
            # the half-built node's teardown can hang like any other (exit_if_stuck): the
            # problem is said, and `simforge run` waits for this exit status to name it
            exit_if_stuck(TEARDOWN_S, EXIT_USAGE)
            return EXIT_USAGE
        executor = make_executor()
        executor.add_node(shell.node)
        freeze_startup()
        why = ""  # why the participant ends before the run's final status came, for close()
        # a stop signal before the run's end: 128 + its number, as a shell reports a process
        # a signal ended (`simforge run` names a participant stopped so before step 0; it
        # exited 0, and a run waited 30 s for its service, then blamed another node)
        code = 0
        try:
            gone = ClockMasterGone(shell.node)
            spin_until(executor, lambda: bool(stop["signal"]) or shell.finished or gone() or _interrupt_outlasted())
            if not (stop["signal"] or shell.finished):
                why = f"the clock master has left ({gone.why}) and its final status never came"
                print(f"{node_name}: {why} here; ending", file=sys.stderr, flush=True)
            elif stop["signal"] and not shell.finished:
                why, code = "a stop signal came", 128 + stop["signal"]
                print(f"{node_name}: {why} before the run's final status; ending", file=sys.stderr, flush=True)
            # let the last answers and publications leave before the node goes away
            spin_until(executor, lambda: False, 0.2)
        finally:
            close = getattr(shell, "close", None)
            if close is not None:
                close(why)
            exit_if_stuck(TEARDOWN_S, code)  # what was recorded is written by now
            close_nodes(executor, [shell.node])
        return code
    except Exception as err:  # noqa: BLE001 - the one place a node reports an unexpected error
        print(f"{node_name}: unexpected error: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        if rclpy.ok():
            rclpy.shutdown()
        ignore_stop_signals()


def ignore_stop_signals() -> None:
    """On the way out, once the node is gone: a SIGINT or SIGTERM from here on is ignored.

    Python puts a handler of its own back to the default action as the interpreter ends, so
    a signal in those last milliseconds killed the process (exit -2) after it had done its
    part. `ros2 launch` sends one to every node still running once the clock master has
    exited (its Shutdown), and logged 3 counted runs in 17 with "[ERROR] [recorder-1]:
    process has died [... exit code -2]". An ignored signal stays ignored to the end.
    """
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)


RUN_NODES = frozenset({"clock_master", "sim_bridge", "driver", "recorder"})
"""The names of a run's own nodes: a reader of any other node is a stack's (a viewer, a
perception node) for --wait-for-reader."""

UNNAMED_NODE = "_NODE_NAME_UNKNOWN_"  # an endpoint's node before the graph has heard which it is


def unacknowledged(writers: Iterable[Any], wait_s: float) -> list[Any]:
    """The ``writers`` whose matched readers have not all acknowledged what was sent them
    within ``wait_s`` (wall clock, one budget for all: a dead or stopped reader
    acknowledges nothing). A node about to go away waits here: a reliable reader that
    missed a message asks for it again, and only a writer still there can send it."""
    wall_deadline = time.monotonic() + wait_s
    late = []
    for writer in writers:
        left_ns = max(0, int((wall_deadline - time.monotonic()) * 1e9))
        if not writer.wait_for_all_acked(Duration(nanoseconds=left_ns)):
            late.append(writer)
    return late


def foreign_readers(node: Node, topic: str) -> list[str]:
    """The full names of the nodes not of the run (RUN_NODES) that the graph of ``node``
    shows reading ``topic``."""
    return [f"{info.node_namespace.rstrip('/')}/{info.node_name}"
            for info in node.get_subscriptions_info_by_topic(topic)
            if info.node_name and not info.node_name.startswith(UNNAMED_NODE)
            and not (info.node_namespace == "/" and info.node_name in RUN_NODES)]


def _finite_ns(duration: Any) -> int:
    """A QoS duration in nanoseconds, 0 where it is none: a profile's 0 (the default) and
    the graph's int64 maximum both mean infinite."""
    ns = int(duration.nanoseconds)
    return ns if 0 < ns < 2**63 - 1 else 0


def matchable_readers(node: Node, writer: Any, said: set[tuple[str, str, str]]) -> int:
    """The readers on ``writer``'s topic that can match it: its type, and no reliability,
    durability, deadline or liveliness its writer does not offer (the offer must be at
    least what is asked, as DDS has it). One that cannot (a viewer's transient-local
    reader of a volatile topic) was waited for, a second on each topic in turn: with a
    stack's listener on six of them a torch run's driver gave up on step 0's front frame
    (missing_frame). It is named once (``said`` keeps who was) in a warning of ``node``.
    (rclpy's qos_check_compatible is not used: on the graph's profiles it called the
    recorder's readers incompatible, the graph giving an infinite duration as int64's
    maximum where the writer's profile has 0.)"""
    cls = writer.msg_type
    kind = f"{cls.__module__.split('.')[0]}/msg/{cls.__name__}"
    offered = writer.qos_profile
    count = 0
    for reader in node.get_subscriptions_info_by_topic(writer.topic_name):
        asked = reader.qos_profile
        reliable = asked.reliability == ReliabilityPolicy.RELIABLE
        kept = asked.durability == DurabilityPolicy.TRANSIENT_LOCAL
        why = (f"it reads {reader.topic_type}, the topic carries {kind}" if reader.topic_type != kind
               else "it asks for reliable delivery, the writer is best effort"
               if reliable and offered.reliability == ReliabilityPolicy.BEST_EFFORT
               else "it asks for transient-local durability, the writer's is volatile"
               if kept and offered.durability == DurabilityPolicy.VOLATILE
               else f"it asks for a deadline of {_finite_ns(asked.deadline) / 1e9:g} s, the writer offers "
                    + (f"{_finite_ns(offered.deadline) / 1e9:g} s" if _finite_ns(offered.deadline) else "none")
               if _finite_ns(asked.deadline) and not 0 < _finite_ns(offered.deadline) <= _finite_ns(asked.deadline)
               else "it asks for manual liveliness, the writer's is automatic"
               if asked.liveliness == LivelinessPolicy.MANUAL_BY_TOPIC
               and offered.liveliness != LivelinessPolicy.MANUAL_BY_TOPIC
               else f"it asks for a liveliness lease of {_finite_ns(asked.liveliness_lease_duration) / 1e9:g} s, "
                    "the writer's is longer"
               if _finite_ns(asked.liveliness_lease_duration) and not 0 < _finite_ns(
                   offered.liveliness_lease_duration) <= _finite_ns(asked.liveliness_lease_duration)
               else "")
        if not why:
            count += 1
            continue
        key = (writer.topic_name, reader.node_namespace, reader.node_name)
        if key not in said:
            said.add(key)
            name = f"{reader.node_namespace.rstrip('/')}/{reader.node_name}"
            node.get_logger().warning(f"{writer.topic_name}: the reader of {name} cannot match ({why}); "
                                      "not waited for")
    return count
