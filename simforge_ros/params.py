"""Every node's parameters, declared once: name, type, default and meaning.

The nodes declare exactly these (rclpy) and read them once at start-up into a frozen
config; the CLI validates ``--set NODE.PARAM=VALUE`` against them before anything starts,
and the launch file and config/*.yaml use the same names. A period may be given in
microseconds (``<name>_us``, int) or in seconds (``<name>_s``), never both; seconds are
converted exactly or refused with ``rate_not_multiple``. A default of ``None`` means
"unset" (for ``_s`` twins, and for values derived from the clock master or the scenario).
"""

from __future__ import annotations

import contextlib
import difflib
import math
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from simforge_ros.core.errors import ConfigError, Printed, Problem, RateNotMultiple
from simforge_ros.core.limits import IMAGE_SIDE, INT64, MAX_STAMP_US, MAX_TIME_US, PLANNER_SAMPLES
from simforge_ros.core.timing_contract import DEFAULT_DECISION_US, DEFAULT_TICK_US
from simforge_ros.core.units import resolve_period
from simforge_ros.core.yaml_file import RclLoader, UnreadableYaml, WholePastInt64, load_yaml_file


@dataclass(frozen=True)
class ParamSpec:
    """One declared parameter."""

    name: str
    kind: str  # "int" | "float" | "bool" | "str" | "str_list"
    default: Any
    doc: str
    positive: bool = False  # a size, a count or a wall-clock limit: must be > 0
    minimum: int | None = None  # an int's range with maximum; a float's lower bound
    maximum: int | float | None = None  # an int's range with minimum; a float's upper bound
    form: str = ""  # the expected form said to a user where the kind's own would be unclear
    choices: tuple[str, ...] = ()  # a str's values, or a str_list's (each at most once); () = any

    def expected(self) -> str:
        """The form a value of the wrong type is told to take (the user's words, not the kind's)."""
        if self.form:
            return self.form
        return "a list of strings, like [a,b]" if self.kind == "str_list" else f"a value of type {self.kind}"

    def int_range(self) -> tuple[int, int]:
        """An int parameter's inclusive range: its bounds, else 1 (a positive one) or int64's."""
        low = self.minimum if self.minimum is not None else (1 if self.positive else INT64[0])
        return low, int(self.maximum) if self.maximum is not None else INT64[1]

    def limits(self) -> str:
        """The range as `ros2 param describe` and a node's --help show it ("" when none)."""
        if self.kind == "int" and (self.minimum is not None or self.maximum is not None or self.positive):
            low = self.minimum if self.minimum is not None else (1 if self.positive else None)
            return f"{low if low is not None else ''}..{self.maximum if self.maximum is not None else ''}"
        if self.choices:
            return " | ".join(self.choices)
        above = "> 0" if self.positive else f">= {self.minimum}" if self.minimum is not None else ""
        below = f"<= {self.maximum:g}" if self.maximum is not None else ""
        return ", ".join(part for part in (above, below) if part)


def _period(name: str, default_us: int | None, doc: str, positive: bool = False,
            minimum: int | None = None) -> tuple[ParamSpec, ParamSpec]:
    # at most a day, as a scenario's times: decision_s=1e13 passed every check and its
    # microseconds overflowed the messages' int64 (SystemError deep in rclpy, a run
    # directory left, "incomplete_run")
    return (
        ParamSpec(f"{name}_us", "int", default_us, f"{doc} (integer microseconds)", positive, minimum,
                  MAX_TIME_US),
        ParamSpec(f"{name}_s", "float", None, f"{doc} in seconds; must convert exactly", positive, minimum,
                  MAX_TIME_US / 1_000_000),
    )


_CAMERAS_FORM = "a list of camera names, like [front,chase]"
CAMERA_CHOICES = ("front", "left", "rear", "right", "chase")
"""The cameras of the rig (engine.cameras.CAMERA_NAMES, which the CARLA backend mounts too):
each node's own check of its choices came one at a time as the nodes started, where a
parameter file's type and range problems were all named at once."""
_FAULTS_FORM = "a list of fault specs, like [drop_frame@3]"

WAIT_FOR_READERS_DOC = ("topics the run publishes that a node not of the run (a stack's) must read before "
                        "step 0, its reader matched (simforge run --wait-for-reader); [] = none")
_TOPICS_FORM = "a list of topics the run publishes, e.g. [/clock, /simforge/camera/front/image_raw]"


NODE_PARAMS: dict[str, tuple[ParamSpec, ...]] = {
    "clock_master": (
        # a period of 0 or less, or a negative latency, is a bad value like any other: named
        # at start-up (exit 2), not a run begun and refused at step 0 by the bridge
        *_period("decision", DEFAULT_DECISION_US, "decision interval: step k is at k * decision_us", positive=True),
        ParamSpec("steps", "int", 0, "steps to run; 0 = the scenario's duration / decision_us", minimum=0),
        *_period("latency", 0, "driver latency, a whole number of steps", minimum=0),
        ParamSpec("seed", "int", 0, "run seed, handed to every participant", minimum=0),
        ParamSpec("run_id", "str", "", "run id (bookkeeping only; never hashed)"),
        ParamSpec("participant_timeout_ms", "int", 10_000, "wall-clock limit of one call after step 0", positive=True),
        ParamSpec("startup_timeout_ms", "int", 30_000,
                  "wall-clock limit for participants to appear and answer step 0", positive=True),
        ParamSpec("pose_tolerance_m", "float", 0.01, "frame pose vs simulated pose, metres", minimum=0),
        ParamSpec("pose_tolerance_deg", "float", 0.1, "frame pose vs simulated pose, degrees", minimum=0),
        ParamSpec("record", "bool", True, "wait for the recorder to confirm the run"),
        ParamSpec("recorder_backlog_steps", "int", 128,
                  "steps the loop may run ahead of the recorder before it pauses for it", positive=True),
        ParamSpec("real_time_factor", "float", 0.0,
                  "simulation seconds a wall second may hold: 0 = unpaced, 1 = no faster than real time",
                  minimum=0),
        ParamSpec("hold_at_step", "int", -1,
                  "hold the run once step K is done (0: at t(0); the last step: before the run ends) until "
                  "resumed on /simforge/pause; -1 = never",
                  minimum=-1),
        ParamSpec("wait_for_readers", "str_list", [], WAIT_FOR_READERS_DOC, form=_TOPICS_FORM),
    ),
    "sim_bridge": (
        ParamSpec("backend", "str", "embedded", "simulator backend: embedded | carla",
                  choices=("embedded", "carla")),
        ParamSpec("carla_host", "str", "localhost", "carla backend: the server's host"),
        ParamSpec("carla_port", "int", 2000, "carla backend: the server's RPC port", minimum=1, maximum=65535),
        ParamSpec("carla_timeout_ms", "int", 10_000,
                  "carla backend: wall-clock limit of a server call and of the wait for a frame's image",
                  positive=True),
        ParamSpec("carla_town", "str", "", "carla backend: map to load; empty = the one the server has loaded"),
        ParamSpec("carla_vehicle", "str", "vehicle.lincoln.mkz", "carla backend: the ego's blueprint"),
        ParamSpec("scenario", "str", "right_turn", "scenario name or path of a scenario file"),
        *_period("tick", DEFAULT_TICK_US, "engine tick", positive=True),
        *_period("camera_period", None, "camera capture period; unset = every step", positive=True),
        ParamSpec("cameras", "str_list", ["chase", "front"], "cameras to render and publish",
                  form=_CAMERAS_FORM, choices=CAMERA_CHOICES),
        ParamSpec("width", "int", 320, "camera image width, pixels", minimum=IMAGE_SIDE[0], maximum=IMAGE_SIDE[1]),
        ParamSpec("height", "int", 180, "camera image height, pixels", minimum=IMAGE_SIDE[0], maximum=IMAGE_SIDE[1]),
        ParamSpec("odometry", "bool", False, "publish the ego state as nav_msgs/Odometry on /simforge/odom"),
        ParamSpec("tf", "bool", False, "publish map_frame -> base_frame on /tf once a step"),
        ParamSpec("ground_truth", "bool", False,
                  "publish every scripted actor and signal on /simforge/ground_truth once a step"),
        ParamSpec("markers", "bool", False,
                  "publish the actors' boxes and the signals as visualization_msgs/MarkerArray on "
                  "/simforge/markers once a step"),
        ParamSpec("camera_tf", "bool", True,
                  "publish base_frame -> each rendered camera's frame (its images' frame_id) on /tf_static"),
        ParamSpec("map_frame", "str", "map", "odometry and /tf: the frame the ego's pose is in"),
        ParamSpec("base_frame", "str", "base_link",
                  "odometry and tf: the ego's frame (rear axle, on the ground, x forward, z up)"),
        ParamSpec("faults", "str_list", [], "fault-injection specs (see README)", form=_FAULTS_FORM),
        ParamSpec("wait_for_readers", "str_list", [], WAIT_FOR_READERS_DOC, form=_TOPICS_FORM),
    ),
    "driver": (
        ParamSpec("policy", "str", "route", "route | torch"),
        ParamSpec("scenario", "str", "right_turn", "scenario the route follower tracks"),
        ParamSpec("frame_timeout_ms", "int", 5_000, "wall-clock wait for a named frame", positive=True),
        *_period("planning_period", 500_000, "torch planner: planning period", positive=True),
        ParamSpec("deterministic", "bool", True, "torch planner: deterministic algorithms"),
        ParamSpec("samples", "int", 1, "torch planner: trajectory samples", minimum=PLANNER_SAMPLES[0],
                  maximum=PLANNER_SAMPLES[1]),
        ParamSpec("dtype", "str", "float32", "torch planner: float32 | bfloat16", choices=("float32", "bfloat16")),
        ParamSpec("weights", "str", "", "torch planner: weights file; empty = seeded init"),
        ParamSpec("weights_seed", "int", 0, "torch planner: seed of the initial weights", minimum=0),
        ParamSpec("cameras", "str_list", ["front", "left", "rear", "right"], "torch planner cameras",
                  form=_CAMERAS_FORM, choices=CAMERA_CHOICES),
        ParamSpec("faults", "str_list", [], "fault-injection specs (see README)", form=_FAULTS_FORM),
    ),
    "recorder": (
        ParamSpec("out_dir", "str", "", "run directory; required"),
        ParamSpec("run_id", "str", "", "run id"),
        ParamSpec("storage", "str", "mcap", "bag storage: mcap | sqlite3", choices=("mcap", "sqlite3")),
        ParamSpec("finish_timeout_ms", "int", 10_000, "wall-clock wait for late messages", positive=True),
        ParamSpec("await_driver", "bool", True,
                  "before step 0, wait for the driver node's parameters too, as for the clock master's and the "
                  "bridge's (false for an external driver, which publishes none: simforge run and the launch "
                  "file set it so)"),
        ParamSpec("faults", "str_list", [], "fault-injection specs (see README)", form=_FAULTS_FORM),
    ),
}


def spec(node: str, name: str, source: str = "--set") -> ParamSpec:
    """The spec of ``node.name`` (``source``: where the name came from, for the error).

    Raises:
        ConfigError: unknown node or parameter.
    """
    if node not in NODE_PARAMS:
        meant = meant_as(node, NODE_PARAMS)
        hint = f" (did you mean {meant}?)" if meant is not None else ""
        raise ConfigError.single(source, f"{node}.{name}", f"a node in {sorted(NODE_PARAMS)}{hint}", node)
    for item in NODE_PARAMS[node]:
        if item.name == name:
            return item
    meant = meant_as(name, {s.name for s in NODE_PARAMS[node]})
    elsewhere = [other for other, specs in NODE_PARAMS.items() if any(s.name == name for s in specs)]
    if meant is None and elsewhere:  # tick_us under clock_master: sim_bridge's
        names = f" ({' and '.join(f'{other}.{name}' for other in elsewhere)} " + (
            "is another node's)" if len(elsewhere) == 1 else "are other nodes')")
    else:
        names = f" (did you mean {meant}?)" if meant is not None else ": " + ", ".join(
            s.name for s in NODE_PARAMS[node])
    raise ConfigError.single(source, f"{node}.{name}", f"a parameter of {node}{names}", name)


# A float written with an exponent and no dot ("1e-3", "2E5"): a double to ROS 2's own
# parameter parser (rcl), a string to PyYAML, which follows YAML 1.1 here.
_EXPONENT_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)[eE][-+]?[0-9]+")


def _non_finite(text: str) -> bool:
    """Whether ``text`` is a float that is not finite ("nan", "-inf", "Infinity")."""
    try:
        return not math.isfinite(float(text))
    except ValueError:
        return False


def coerce(node: str, name: str, value: Any, source: str = "--set") -> Any:
    """Check a value against its spec (ints are accepted for floats, nothing else widens).

    Raises:
        ConfigError: unknown parameter or a value of the wrong type.
    """
    item = spec(node, name, source)
    if item.kind == "float" and isinstance(value, str) and _EXPONENT_FLOAT.fullmatch(value.strip()):
        value = float(value)  # "1e-3": PyYAML reads a string (YAML 1.1 wants a dot), rcl a double
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "str": isinstance(value, str),
        "str_list": isinstance(value, list) and all(isinstance(v, str) for v in value),
    }[item.kind]
    if not ok and item.kind == "float" and isinstance(value, str) and _non_finite(value):
        # "nan", "inf": strings to PyYAML (its floats are .nan, .inf), floats all the same
        raise ConfigError.single(source, f"{node}.{name}", "a finite number", value)
    if item.kind == "int" and isinstance(value, WholePastInt64):
        # an integer past int64, which rcl reads as a double: "expected a value of type int,
        # got 9.223372036854776e+18" named a float the user never typed
        low, high = item.int_range()
        raise ConfigError.single(source, f"{node}.{name}", f"an integer in [{low}, {high}] (one past int64 is read "
                                 "as a double by ROS 2)", Printed(value.text))
    if not ok:
        raise ConfigError.single(source, f"{node}.{name}", item.expected(), value)
    if item.kind == "float" and not math.isfinite(value):
        raise ConfigError.single(source, f"{node}.{name}", "a finite number", value)
    if item.kind == "float" and value != 0 and abs(value) < sys.float_info.min:
        # subnormal: C's strtod, which rcl reads a parameter file with, says ERANGE, and the
        # node was handed a string ("1e-320" for real_time_factor, refused by its type)
        raise ConfigError.single(source, f"{node}.{name}", f"a finite number, 0 or at least "
                                 f"{sys.float_info.min:.1e} in size (ROS 2 reads no smaller one)", value)
    if item.positive and value <= 0:
        form = "an integer > 0" if item.kind == "int" else "a number > 0"
        raise ConfigError.single(source, f"{node}.{name}", form, value)
    if item.kind == "float" and item.minimum is not None and value < item.minimum:
        raise ConfigError.single(source, f"{node}.{name}", f"a number >= {item.minimum}", value)
    if item.kind == "float" and item.maximum is not None and value > item.maximum:
        raise ConfigError.single(source, f"{node}.{name}", f"a number <= {item.maximum:g}", value)
    if item.kind == "str" and item.choices and value not in item.choices:
        raise ConfigError.single(source, f"{node}.{name}", f"one of {', '.join(item.choices)}", value)
    if item.kind == "str_list" and item.choices and (any(v not in item.choices for v in value)
                                                     or len(set(value)) != len(value)):
        raise ConfigError.single(source, f"{node}.{name}", f"a list of distinct cameras from "
                                 f"{', '.join(item.choices)}", value)
    if item.kind == "int":
        low, high = item.int_range()
        if not low <= value <= high:
            raise ConfigError.single(source, f"{node}.{name}", f"an integer in [{low}, {high}]", value)
    return float(value) if item.kind == "float" else value


def periods(node: str) -> list[str]:
    """The periods ``node`` declares in two units (``<name>_us`` and ``<name>_s``), by name."""
    names = {item.name for item in NODE_PARAMS.get(node, ())}
    return [name[: -len("_us")] for name in sorted(names) if name.endswith("_us") and name[:-3] + "_s" in names]


def both_units(node: str, values: Mapping[str, Any], source: str) -> list[Problem]:
    """A period of ``node`` given both in microseconds and in seconds: one problem each,
    naming both fields. A node took one of the two and dropped the other without a word."""
    problems = []
    for name in periods(node):
        us, s = values.get(f"{name}_us"), values.get(f"{name}_s")
        if us is not None and s is not None:
            problems.append(Problem(source, f"{node}.{name}_us and {node}.{name}_s",
                                    "one of the two (a period in microseconds or in seconds, never both)",
                                    {f"{name}_us": us, f"{name}_s": s}))
    return problems


def validate(params: Mapping[str, Mapping[str, Any]], source: str) -> dict[str, dict[str, Any]]:
    """Validate a whole {node: {param: value}} mapping, reporting every problem at once.

    Raises:
        ConfigError: listing each bad node, parameter or value.
    """
    problems: list[Problem] = []
    out: dict[str, dict[str, Any]] = {}
    for node, values in params.items():
        for name, value in values.items():
            try:
                out.setdefault(node, {})[name] = coerce(node, name, value, source)
            except ConfigError as err:
                problems.extend(err.problems)
        problems += both_units(node, values, source)
    if problems:
        raise ConfigError(problems)
    return out


# Parameters rclpy declares on every node itself. A stack's parameter file often sets them
# for all nodes (``/**``); simforge's nodes time nothing by them, so a file may give them
# and they are left out of the run (with a note), where any other unknown name is refused.
# (`ros2 param dump` of a running simforge node writes both.)
RCLPY_PARAMS: Mapping[str, tuple[type, str]] = {
    "use_sim_time": (bool, "simforge's nodes take each step's time from the request that names it, never from /clock"),
    "start_type_description_service": (bool, "simforge's nodes start with rclpy's default (true)"),
}


def meant_as(name: str, known: Iterable[str]) -> str | None:
    """The known name ``name`` was most likely meant as: itself or its last component
    (``/simforge/sim_bridge``) within a typo's distance; None when it names something else."""
    last = name.rsplit("/", 1)[-1]
    close = difflib.get_close_matches(last, sorted(known), n=1, cutoff=0.8)
    if close:
        return close[0]
    # ClockMaster, SIM-BRIDGE: case and separators only (a ClockMaster section was left
    # out as another node's, and the run counted on the defaults)
    folded = {_folded(k): k for k in known}
    return folded.get(_folded(last))


def _folded(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


QOS_OVERRIDES = "qos_overrides"
"""rclpy's QoS override parameters (``qos_overrides./topic.publisher.depth``), declared by
rclpy for an endpoint made with overriding options; simforge's endpoints take none, and a
stack's file may give them."""


def section_matches(key: str, node: str) -> bool:
    """Whether a parameter file's section ``key`` applies to the node ``node`` in the root
    namespace, as rclpy matches them: ``/**`` any number of namespace tokens (so every
    node), ``/*`` exactly one (``/*`` is every node in the root namespace), a leading slash
    optional (``/clock_master``, ``/**/clock_master``, ``/**/clock_master/**``)."""
    text = key if key.startswith("/") else "/" + key
    regex = "".join(r"(/\w+)*" if piece == "/**" else r"(/\w+)" if piece == "/*" else re.escape(piece)
                    for piece in re.split(r"(/\*\*|/\*)", text))
    return re.fullmatch(regex, "/" + node) is not None


def rcl_said(err: BaseException) -> str:
    """What rcl says in an RCLError, on one line: its "Error: ..." without where in rcl's
    source it was raised (the whole text when it has no such part)."""
    text = " ".join(str(err).split())
    said = re.search(r"(?:Error|error): (.*?)(?:, at /|$)", text)
    return said[1] if said else text


def rcl_refusal(path: Path) -> str | None:
    """What rcl, the parser every ROS 2 node reads ``--params-file`` with, says of the
    file when it refuses it (None: it takes it, or rclpy is not installed to ask). A section
    for another node of the stack that rcl cannot parse (``x: [1, a]``, a node name with a
    dash) was left out with a note here, and under `ros2 launch` every node, ours too, then
    died at start-up with rcl's traceback."""
    from simforge_ros.isolation import check_rmw

    # an RMW not installed: rcl would end the process (exit 102), said as the environment's.
    # Before importing rclpy: its import alone loads rcl, which checks RMW_IMPLEMENTATION
    check_rmw()
    try:
        from rclpy.context import Context
    except ImportError:
        return None
    context = Context()
    with _quiet_stderr():  # rcl logs "Failed to parse global arguments" on fd 2 as well
        try:  # domain 0 and no logging: the environment's ROS_DOMAIN_ID and log dir are not this check's
            context.init(["--ros-args", "--params-file", str(path)], initialize_logging=False, domain_id=0)
        except Exception as err:  # noqa: BLE001 - RCLError: rcl's own message is what is said
            if "Couldn't parse params file" not in " ".join(str(err).split()):
                return None  # not the file's: what starts the run says it in its own words
            return rcl_said(err)
    context.shutdown()
    return None


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null meanwhile (what C code writes there)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def read_params_file(path: Path, notes: list[str] | None = None, ask_rcl: bool = True) -> dict[str, dict[str, Any]]:
    """A ROS 2 parameter file (``node: ros__parameters: {param: value}``), read as every
    ROS 2 node reads it (rcl: core.yaml_file.RclLoader types its values) and validated
    against the nodes' declarations; every problem is named with the file.

    A section applies to each node its name matches (section_matches: ``clock_master``,
    ``/clock_master``, ``/**/clock_master``, ``/**`` and ``/*`` for every node), and the
    sections apply in the file's order, a later one's value replacing an earlier one's, as
    rclpy applies them. A wildcard section's parameters go to the nodes that declare them.
    rclpy's own parameters (RCLPY_PARAMS, QOS_OVERRIDES) are checked and left out;
    ``notes`` gets a line saying so.

    A stack's file holds other nodes' sections and shared parameters for them: as a ROS 2
    node takes only its own, those are left out with a note, unless the name is within a
    typo of a simforge node's (``sim_brige``) or parameter's: that is refused, naming it.
    ``ask_rcl=False``: rcl is not asked (a node about to start rclpy with the file, which
    says rcl's refusal itself).

    Raises:
        ConfigError: the file is missing, not YAML, not in that form, or names an unknown
            node or parameter or a value of the wrong type.
    """
    source = str(path)
    try:
        doc = load_yaml_file(path, RclLoader)
    except FileNotFoundError:
        raise ConfigError.single(source, "file", "an existing ROS 2 parameter file", source) from None
    except UnreadableYaml as err:  # where PyYAML stopped, "not UTF-8 text", "a directory"
        raise ConfigError.single(source, "file", "a YAML ROS 2 parameter file", err.got) from None
    form = "node: ros__parameters: {param: value}"
    if not isinstance(doc, dict) or not doc:
        raise ConfigError.single(source, "file", f"a mapping of {form}", doc)
    params: dict[str, dict[str, Any]] = {}
    problems: list[Problem] = []
    for key, body in doc.items():  # in the file's order: a later section's value replaces an earlier one's
        values = body.get("ros__parameters") if isinstance(body, dict) else None
        if not isinstance(values, dict) or set(body) != {"ros__parameters"}:
            problems.append(Problem(source, str(key), f"ros__parameters: a mapping of param: value ({form})", body))
            continue
        key = str(key)
        nodes = [node for node in NODE_PARAMS if section_matches(key, node)]
        shared = "*" in key.rstrip("/").rsplit("/", 1)[-1]  # /**, /*, /**/clock_master/**: for whoever declares
        if not nodes:
            meant = meant_as(key, NODE_PARAMS)
            if meant is not None:  # a typo, or a namespaced name simforge's nodes do not run under
                problems.append(Problem(source, key, f"a node in {sorted(NODE_PARAMS)} (did you mean "
                                                     f"{meant}?)", key))
            elif notes is not None:
                notes.append(f"{source}: {key} left out: not a simforge node (a section for another node "
                             "of the stack)")
            continue
        label = key if shared else nodes[0]
        for param, value in values.items():
            param = str(param)
            if param in RCLPY_PARAMS:
                (kind, why), field = RCLPY_PARAMS[param], f"{label}.{param}"
                if type(value) is not kind:
                    problems.append(Problem(source, field, f"a value of type {kind.__name__}", value))
                elif notes is not None:
                    notes.append(f"{source}: {field} ignored: rclpy's own parameter; {why}")
                continue
            if param == QOS_OVERRIDES or param.startswith(QOS_OVERRIDES + "."):
                if notes is not None:
                    notes.append(f"{source}: {label}.{param} ignored: simforge's publishers and subscriptions "
                                 "take no QoS overrides (their QoS is the run's, README: Architecture)")
                continue
            if not shared:
                params.setdefault(nodes[0], {})[param] = value
                continue
            declaring = [node for node in nodes if any(i.name == param for i in NODE_PARAMS[node])]
            if not declaring:
                meant = meant_as(param, {i.name for node in nodes for i in NODE_PARAMS[node]})
                if meant is not None:
                    problems.append(Problem(source, f"{key}.{param}",
                                            f"a parameter some node declares (did you mean {meant}?)", param))
                elif notes is not None:
                    notes.append(f"{source}: {key}.{param} left out: no simforge node declares it (a parameter "
                                 "for other nodes of the stack)")
            for node in declaring:
                params.setdefault(node, {})[param] = value
    try:
        checked = validate(params, source)
    except ConfigError as err:
        problems.extend(err.problems)
    if problems:
        raise ConfigError(problems)
    refused = rcl_refusal(path) if ask_rcl else None  # what only rcl says: another node's section it cannot parse
    if refused is not None:
        raise ConfigError.single(source, "file", "a file ROS 2's parameter parser (rcl) reads, as every node "
                                                 "is given it", Printed(f"one it refuses: {refused}"))
    return checked


FIRST_MESSAGES_WAIT_MS = 5_500
"""Wall clock: the longest the bridge holds step 0's first messages back while discovery
settles (the driver's Decide reader seen, 3.5 s at most, then every reader shown matched,
the topics' waits sharing what is left: 2 s after a full wait for the driver; 4.5 s, with
1 s left, could leave a camera no wait for the recorder's reader; SimBridge._await_readers).
The torch driver's wait for step 0's frames adds it to ``frame_timeout_ms``: a limit below
it could refuse step 0 as ``missing_frame`` whenever discovery was slow, a limit meant for
the frames drawn later on."""


def check_frame_wait(params: Mapping[str, Mapping[str, Any]], source: str) -> None:
    """The torch driver waits up to ``frame_timeout_ms`` for a frame before it answers
    ``missing_frame`` (at step 0, FIRST_MESSAGES_WAIT_MS more); a clock master that gives
    up on the call first refuses the run as ``participant_timeout`` of the driver instead,
    naming the wrong cause.

    Raises:
        ConfigError: ``driver.frame_timeout_ms`` not below ``clock_master.participant_timeout_ms``,
            or, with the step 0 allowance, not below step 0's limit (the larger of that and
            ``clock_master.startup_timeout_ms``).
    """
    driver = params.get("driver")
    if driver is None or driver.get("policy") != "torch":
        return  # the route follower waits for no frame; an external driver's waits are its own
    frame_ms = driver.get("frame_timeout_ms", spec("driver", "frame_timeout_ms").default)
    clock = params.get("clock_master", {})
    limit_ms = clock.get("participant_timeout_ms", spec("clock_master", "participant_timeout_ms").default)
    if frame_ms >= limit_ms:
        raise ConfigError.single(
            source, "driver.frame_timeout_ms",
            f"less than clock_master.participant_timeout_ms ({limit_ms}): the clock master must outwait the "
            "driver's wait for a frame, or a frame that never comes is refused as participant_timeout", frame_ms)
    first_ms = max(limit_ms, clock.get("startup_timeout_ms", spec("clock_master", "startup_timeout_ms").default))
    if frame_ms + FIRST_MESSAGES_WAIT_MS >= first_ms:
        raise ConfigError.single(
            source, "driver.frame_timeout_ms",
            f"less than {first_ms - FIRST_MESSAGES_WAIT_MS}: step 0's call limit (the larger of "
            f"clock_master.participant_timeout_ms and clock_master.startup_timeout_ms, {first_ms}) must outwait "
            f"the driver's wait for step 0's frames, frame_timeout_ms + {FIRST_MESSAGES_WAIT_MS} while discovery "
            "settles", frame_ms)


TORCH_ONLY = "torch planner"
"""How a driver parameter's doc starts when only the torch planner reads it."""


def unread_by_policy(policy: str, driver_params: Mapping[str, Any]) -> list[str]:
    """The torch planner's parameters given other than as their defaults to a driver of
    another ``policy``: a ``driver.weights`` with the route follower was ignored without a
    word, the run counted, and the user believed the weights had driven it."""
    if policy == "torch":
        return []
    specs = {p.name: p for p in NODE_PARAMS["driver"]}
    # a default is no choice: the shipped config spells every one out (7 notes a route run)
    return [name for name, value in driver_params.items()
            if name in specs and specs[name].doc.startswith(TORCH_ONLY) and value != specs[name].default]


FRAME_FORM = "a tf2 frame name (not empty, no leading '/', no spaces)"


def frame_problems(values: Mapping[str, Any], source: str) -> list[Problem]:
    """The bridge's frames, one tf tree: map_frame -> base_frame on /tf, base_frame -> each
    camera on /tf_static, a camera's frame being its name. Equal names made a frame its own
    parent (map -> map) or a loop (chase -> base_link -> chase), counted runs whose tf tree
    tf2 cannot use. ``values``: the bridge's parameters (defaults where absent)."""
    def get(name: str) -> Any:
        return values.get(name, spec("sim_bridge", name).default)

    problems = []
    map_frame, base_frame, cameras = get("map_frame"), get("base_frame"), get("cameras")
    for key, frame in (("map_frame", map_frame), ("base_frame", base_frame)):
        if not frame or frame.startswith("/") or any(c.isspace() for c in frame):
            problems.append(Problem(source, f"sim_bridge.{key}", FRAME_FORM, frame))
        elif frame in cameras:
            problems.append(Problem(source, f"sim_bridge.{key}", "a frame other than a rendered camera's "
                                    f"(each camera's frame is its name: {', '.join(cameras)})", frame))
    if map_frame == base_frame:
        problems.append(Problem(source, "sim_bridge.base_frame", f"another frame than map_frame ({map_frame}): "
                                "/tf gives the ego's pose in map_frame", base_frame))
    return problems


def check_run_span(params: Mapping[str, Mapping[str, Any]], source: str) -> None:
    """A run's last step time, ``(steps - 1) * decision_us``, must fit the messages' stamps
    (builtin_interfaces/Time: int32 seconds, 68 years; within the int64 microseconds of
    Step and StepTiming): a decision of 9.2e18 us (its tick too) overflowed at step 1, and
    one of a day stamped step 24 856 at -2147408896 s. A hold must be at a step the run has.

    Raises:
        ConfigError: the run would end past the last stamp, or hold_at_step is past its
            last step (``steps`` given).
    """
    clock = params.get("clock_master", {})
    try:
        decision_us = resolve_period(clock, "decision") or DEFAULT_DECISION_US
    except (ConfigError, RateNotMultiple):
        return  # the clock master refuses such a period itself (rate_not_multiple), naming it
    steps = clock.get("steps", 0)
    if steps > 0 and (steps - 1) * decision_us > MAX_STAMP_US:  # the last step's time
        raise ConfigError.single(source, "clock_master.steps", f"at most {MAX_STAMP_US // decision_us + 1} steps of "
                                 f"{decision_us} us (a run's stamps are builtin_interfaces/Time, int32 seconds: "
                                 "68 years)", steps)
    hold_at = clock.get("hold_at_step", -1)
    if steps > 0 and hold_at >= steps:  # a step the run never reaches: never held (launch said nothing)
        raise ConfigError.single(source, "clock_master.hold_at_step", f"a step of the run (0 to {steps - 1}; "
                                 "-1: never)", hold_at)


def published_topics(params: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The topics a run of ``params`` publishes once a step or as things happen: the clock
    master's step topics, the bridge's contacts, its cameras' images and camera_info, and
    the side topics it was asked for."""
    from simforge_ros import topics

    bridge = params.get("sim_bridge", {})

    def get(name: str) -> Any:
        return bridge.get(name, spec("sim_bridge", name).default)

    out = [*topics.STEP_TOPICS, topics.CONTACTS]
    for camera in get("cameras"):
        out += [topics.image_topic(str(camera)), topics.camera_info_topic(str(camera))]
    out += [topic for flag, topic in (("odometry", topics.ODOM), ("tf", topics.TF),
                                      ("ground_truth", topics.GROUND_TRUTH), ("markers", topics.MARKERS)) if get(flag)]
    return out


def check_wanted_readers(params: Mapping[str, Mapping[str, Any]], source: str) -> None:
    """--wait-for-reader names topics this run publishes, and both nodes that wait are told
    the same ones: a typo waited startup_timeout_ms for a reader of a topic nobody writes.

    Raises:
        ConfigError: a topic the run does not publish, or the two nodes' lists differ.
    """
    clock = list(params.get("clock_master", {}).get("wait_for_readers", []))
    bridge = list(params.get("sim_bridge", {}).get("wait_for_readers", []))
    if sorted(clock) != sorted(bridge):
        raise ConfigError.single(source, "sim_bridge.wait_for_readers", f"the same topics as "
                                 f"clock_master.wait_for_readers ({clock}): both nodes wait for them", bridge)
    published = published_topics(params)
    for topic in clock:
        if topic not in published:
            raise ConfigError.single(source, "clock_master.wait_for_readers", "a topic this run publishes "
                                     "(--wait-for-reader): " + ", ".join(published), topic)


class _Quoted(str):
    """A string value to be written in quotes (params_yaml)."""


class _ParamsDumper(yaml.SafeDumper):
    """PyYAML's safe dumper, writing every string value in quotes."""


_ParamsDumper.add_representer(
    _Quoted, lambda dumper, data: dumper.represent_scalar("tag:yaml.org,2002:str", str(data), style="'"))


def _quoted(value: Any) -> Any:
    if isinstance(value, str):
        return _Quoted(value)
    if isinstance(value, list):
        return [_quoted(v) for v in value]
    return value


def params_yaml(params: Mapping[str, Mapping[str, Any]]) -> str:
    """``{node: {param: value}}`` as a ROS 2 parameter file that rcl reads back with the
    same types: every string value in quotes.

    PyYAML leaves a string unquoted where its own YAML 1.1 rules read it as a string, and
    rcl reads such text by its look: ``08``, ``1e3`` or ``inf`` became doubles and ``y`` a
    bool, so a string parameter given ``run_id:=08`` (a launch argument) or ``--set
    sim_bridge.carla_town=08`` was refused by its node at start-up as the wrong type.
    """
    doc = {node: {"ros__parameters": {name: _quoted(v) for name, v in values.items()}}
           for node, values in params.items()}
    return yaml.dump(doc, Dumper=_ParamsDumper, sort_keys=True)
