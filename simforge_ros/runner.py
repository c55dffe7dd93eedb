"""Start a run the way a launch file would, in one of two layouts, and read its outcome.

``processes``: one OS process per node (recorder, bridge, driver, then the clock master),
each started with this interpreter and a ROS 2 parameter file. ``single``: the same four
node classes in one process, on one executor and one thread. Either way every run gets its own leased
ROS_DOMAIN_ID, localhost discovery and log dir, and leaves no process behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import gc
import json
import math
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from simforge_ros import topics
from simforge_ros.core.errors import (
    EXIT_FAILURE,
    EXIT_USAGE,
    REFUSALS,
    Aborted,
    ConfigError,
    ParticipantError,
    ParticipantLost,
    Problem,
    RateNotMultiple,
)
from simforge_ros.core.faults import CAMERA_FAULTS, FaultPlan
from simforge_ros.core.timing_contract import DEFAULT_DECISION_US
from simforge_ros.core.units import resolve_period
from simforge_ros.drivers.registry import check_planner_cameras
from simforge_ros.isolation import (
    DISCOVERY_VAR,
    DomainLease,
    NoFreeDomain,
    check_rmw,
    discovery_range,
    environ_set,
    hold_domain,
    lease_domain,
    user_domain,
)
from simforge_ros.params import (
    check_frame_wait,
    check_run_span,
    check_wanted_readers,
    frame_problems,
    params_yaml,
    validate,
)
from simforge_ros.params import spec as spec_of
from simforge_ros.process_tuning import (
    HELD_SIGNALS,
    LAUNCHER_ENV,
    OUTCOME_FD_ENV,
    STACKS_SIGNAL,
    STOPPED_FOR_ENV,
    TEARDOWN_CUT,
    TEARDOWN_SIGNAL,
    ended_if_stuck,
    process_state,
)
from simforge_ros.record.manifest import write_json
from simforge_ros.record.reserve import RESERVE
from simforge_ros.record.rundir import DOMAIN, PARAMS, RUNNER_REFUSAL, STOPPED_FIRST, kept_chain
from simforge_ros.resources import use_fastdds_profile

NODES = ("recorder", "sim_bridge", "driver", "clock_master")
DRIVERS = ("route", "torch", "external")  # drivers.registry.POLICIES, then EXTERNAL (a test holds it)
EXTERNAL = "external"
"""--driver external: no driver node is started; the user's own node offers the Decide
service (topics.DECIDE_SERVICE) in the run's ROS domain (examples/external_driver.py)."""
LAYOUTS = ("processes", "single")
SURROUND = ["front", "left", "rear", "right"]
OUTCOME_PREFIX = "SIMFORGE_OUTCOME "
_GRACE_S = 5.0
# Wall clock: how long a participant a signal ended before step 0 is chained is left to the
# clock master to name (it does at once if it was calling it) before the run is stopped for it.
_KILLED_WAIT_S = 2.0
# Wall clock: how long the clock master, stopped for such a node, may take to end the run
# (it calls the recorder's Finish: a dead recorder's would be waited on to the call limit).
_KILLED_STOP_S = 1.5
# Wall clock: how long the `single` layout's ROS teardown may take before the process that
# ran it is ended (SIGALRM, its stacks on stderr) rather than left hanging (ended_if_stuck).
SINGLE_TEARDOWN_S = 20.0


@dataclass(frozen=True)
class RunSpec:
    """One run as the user asked for it."""

    scenario: str
    out_dir: Path
    run_id: str
    driver: str = "route"
    seed: int = 0
    steps: int = 0
    latency_us: int = 0
    layout: str = "processes"
    sets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    faults: tuple[str, ...] = ()
    record: bool = True


@dataclass(frozen=True)
class RunResult:
    """What a run ended with: the keys of `simforge run --json`."""

    run_id: str
    scenario: str
    steps: int
    chain_digest: str
    status: str  # counted | refused
    refusal: dict[str, Any] | None
    run_dir: str
    exit_code: int
    wall: dict[str, Any] | None = None  # the clock master's loop timing summary (benchmarks)
    # the recorder's frames chain (None: no frame, or nothing recorded): the step chain
    # holds no pixel, so two runs repeat bit for bit only if both digests do
    frames_digest: str | None = None
    # what the user should hear that no refusal says (a node's teardown that had to be cut
    # short); `simforge run` prints each on stderr, and --json leaves them out
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("exit_code", "wall", "notes")}


def new_run_id(scenario: str, seed: int, index: int) -> str:
    """A run id: bookkeeping only, never hashed."""
    return f"{Path(scenario).stem}-s{seed}-{index:02d}-{secrets.token_hex(3)}"


# parameters node_params derives from the run options, not settings of their own
# (`simforge info` leaves them out): node -> names
DERIVED_PARAMS: dict[str, tuple[str, ...]] = {"recorder": ("await_driver",)}

# the parameters node_params takes from RunSpec fields: node -> {parameter: field}
SPEC_PARAMS: dict[str, dict[str, str]] = {
    "clock_master": {"seed": "seed", "steps": "steps", "latency_us": "latency_us", "run_id": "run_id",
                     "record": "record"},
    "sim_bridge": {"scenario": "scenario", "faults": "faults"},
    "driver": {"policy": "driver", "scenario": "scenario", "faults": "faults"},
    "recorder": {"out_dir": "out_dir", "run_id": "run_id", "faults": "faults"},
}


RUN_PARAMETERS = "run parameters"
"""The source named by a problem of the run's parameters checked together (node_params)."""


def node_params(spec: RunSpec) -> dict[str, dict[str, Any]]:
    """Every node's parameters for this run: the spec's choices, then --set overrides.

    Raises:
        ConfigError: a bad --set name or value, or a bad fault spec.
    """
    plan = FaultPlan.parse(list(spec.faults))
    if spec.driver not in DRIVERS:
        raise ConfigError.single("--driver", "driver", f"one of {', '.join(DRIVERS)}", spec.driver)
    if spec.driver == EXTERNAL:
        # nothing of ours runs as the driver: nothing to inject into or to set on it
        on_driver = plan.for_node("driver").faults
        if on_driver:
            raise ConfigError.single("--inject", on_driver[0].spec(), "a fault on a node simforge starts "
                                     "(the driver is external)", on_driver[0].spec())
        if "driver" in spec.sets:
            name = next(iter(spec.sets["driver"]), "")
            raise ConfigError.single("--set", f"driver.{name}", "a parameter of a node simforge starts "
                                     "(the driver is external)", f"driver.{name}")
    for kind in ("kill", "stall"):
        fault = plan.first(kind)
        if spec.layout == "single" and fault is not None:
            # one process: a killed or hung node would take the clock master with it
            raise ConfigError.single(
                "--inject", fault.spec(), f"{kind}=NODE@K only with --layout processes", spec.layout
            )
    params: dict[str, dict[str, Any]] = {
        "clock_master": {"seed": spec.seed, "steps": spec.steps, "latency_us": spec.latency_us,
                         "run_id": spec.run_id, "record": spec.record},
        "sim_bridge": {"scenario": spec.scenario, "faults": plan.specs()},
        "driver": {"policy": spec.driver, "scenario": spec.scenario, "faults": plan.specs()},
        "recorder": {"out_dir": str(spec.out_dir), "run_id": spec.run_id, "faults": plan.specs(),
                     "await_driver": spec.driver != EXTERNAL},
    }
    sets = validate(spec.sets, "--set")
    if spec.driver == "torch":  # the bridge renders what the planner looks at (a --set of its own wins)
        cameras = list(sets.get("driver", {}).get("cameras", SURROUND))
        check_planner_cameras(cameras)
        params["sim_bridge"]["cameras"] = cameras
    if spec.driver == EXTERNAL:
        del params["driver"]
    for node, values in sets.items():
        for name, value in values.items():
            if name.endswith("_s"):
                params[node].pop(name[:-2] + "_us", None)  # seconds replace a default in us
            params[node][name] = value
    checked = validate(params, RUN_PARAMETERS)
    problems = frame_problems(checked["sim_bridge"], RUN_PARAMETERS)
    if problems:
        raise ConfigError(problems)
    check_frame_wait(checked, RUN_PARAMETERS)
    check_run_span(checked, RUN_PARAMETERS)
    check_wanted_readers(checked, RUN_PARAMETERS)
    check_camera_faults(checked, plan)
    return checked


def check_camera_faults(params: Mapping[str, Mapping[str, Any]], plan: FaultPlan, source: str = "--inject",
                        field: str | None = None) -> None:
    """A camera fault must be able to fire: the bridge renders a camera, and frames at the
    fault's step; a stale frame needs an earlier one. Such a plan broke nothing and the run
    counted, unsaid (with no camera, drop_frame failed the bridge with an IndexError).
    ``source`` and ``field`` name where the faults came from (default: the fault's spec
    given to --inject).

    Raises:
        ConfigError: naming the fault and the step it can act at.
    """
    def problem(fault: Any, expected: str) -> ConfigError:
        return ConfigError.single(source, field or fault.spec(), expected, fault.spec())

    faults = [f for f in plan.faults if f.kind in CAMERA_FAULTS]
    if not faults:
        return
    bridge = params.get("sim_bridge", {})
    if not bridge.get("cameras", spec_of("sim_bridge", "cameras").default):
        raise problem(faults[0], "a camera fault with a camera to act on (sim_bridge.cameras is [])")
    try:
        decision_us = resolve_period(params.get("clock_master", {}), "decision") or DEFAULT_DECISION_US
        camera_us = resolve_period(bridge, "camera_period")
    except (ConfigError, RateNotMultiple):
        return  # named where the periods are checked
    if camera_us is not None and camera_us % decision_us:
        return  # refused rate_not_multiple at the bridge's reset
    every = camera_us // decision_us if camera_us is not None else 1
    for fault in faults:
        assert fault.step is not None
        if fault.step % every:
            raise problem(fault, f"{fault.kind}@K at a step the bridge renders frames at (every {every} steps, "
                                 f"camera_period_us={camera_us})")
        if fault.kind == "stale_frame" and fault.step < every:
            raise problem(fault, f"stale_frame@K at a step after the first frames (K >= {every}: at step "
                                 f"{fault.step} no earlier frame exists)")


def write_params_file(path: Path, params: Mapping[str, Mapping[str, Any]]) -> None:
    """A ROS 2 parameter file (node: ros__parameters: ...), as launch files use, that rcl
    reads with the types given (params.params_yaml)."""
    path.write_text(params_yaml(params))


DISK_FULL_BYTES = 1 << 20
"""Less free space than this on a refused run's disk: the likely reason, said with it."""


def _disk_full(out_dir: Path, detail: str = "") -> str:
    """A note that the run's disk is (nearly) full, or "". ``detail``: the refusal's, whose
    ENOSPC says so whatever the free space reads (btrfs said 1.8 MB free when full)."""
    from simforge_ros.record.room import free_bytes

    free = free_bytes(out_dir)
    if free >= DISK_FULL_BYTES and os.strerror(errno.ENOSPC) not in detail:
        return ""
    return f"the disk of {out_dir} is full ({free} bytes free): what could be written is kept"


def _kept(steps_file: Path) -> dict[str, Any]:
    """What a steps.jsonl whose recorder wrote no manifest kept (record.rundir.kept_chain),
    as a result's steps, chain digest and frames digest."""
    kept = kept_chain(steps_file)
    return {"steps": kept.steps, "chain_digest": kept.chain_digest, "frames_digest": kept.frames_digest}


def _result(spec: RunSpec, outcome: Mapping[str, Any] | None, exit_code: int,
            recorder_apart: bool = False) -> RunResult:
    """The run's result from the clock master's outcome (None: it left none), its exit
    code and the recorder's manifest. ``recorder_apart``: the recorder was a process of its
    own (processes layout), whose steps.jsonl is all it wrote when it left no manifest; in
    the single layout it is closed (and flushed) only after this."""
    manifest_path = spec.out_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else None
    notes: tuple[str, ...] = ()
    if outcome is None:
        exited = f"clock master exited with {_exit_status(exit_code)}"
        if manifest is not None and manifest.get("refusal") is not None:
            # the recorder saw the clock master leave: its manifest's refusal is the run's,
            # and so is the exit status (a SIGKILL is no exit status: it read as 247)
            outcome = {"status": "refused", "steps": manifest["steps"], "chain_digest": manifest["chain_digest"],
                       "refusal": manifest["refusal"]}
            notes = (f"the {exited} before saying how the run ended: the refusal is the recorder's "
                     f"({manifest_path})",)
            named = REFUSALS.get(str(manifest["refusal"].get("code")))
            exit_code = named.exit_code if named is not None else EXIT_FAILURE
        else:
            code = next((c for c, cls in REFUSALS.items() if cls.exit_code == exit_code), "participant_error")
            kept = ({"steps": manifest["steps"], "chain_digest": manifest["chain_digest"], "frames_digest": None}
                    if manifest else _kept(spec.out_dir / "steps.jsonl"))
            outcome = {"status": "refused", **kept, "refusal": {"code": code, "step": -1, "detail": exited}}
            exit_code = REFUSALS[code].exit_code
    else:
        if outcome.get("status") == "counted" and outcome.get("refusal") is None and exit_code < 0:
            # killed by a signal once it had said how the run ended (a Ctrl-C as its
            # interpreter ended): its teardown, not the run, which stays counted (exit 254
            # and "participant_error before step 0" beside a counted manifest, before)
            notes = (f"the clock master was ended by {_exit_status(exit_code)} after it had said the run counted",)
            exit_code = 0
        if manifest is None and recorder_apart and (spec.out_dir / "steps.jsonl").is_file():
            # no manifest (the recorder was killed): what it chained, not what the clock master stepped
            outcome = {**outcome, **_kept(spec.out_dir / "steps.jsonl")}
    refusal = outcome["refusal"]
    if refusal is not None and (full := _disk_full(spec.out_dir, str(refusal.get("detail", "")))):
        refusal = {**refusal, "detail": f"{refusal['detail']}; {full}"}
    if manifest is not None and refusal is None and manifest["refusal"] is not None:
        refusal = manifest["refusal"]
    elif manifest is not None and refusal is not None and (
            manifest.get("status") == "counted" or _stopped_first(manifest.get("refusal"), refusal)):
        # the recorder wrote its manifest, then the clock master refused the run (its Finish
        # answer came too late): exit 15 and a manifest, info and verify saying counted.
        # Or the recorder, stopped by a signal mid-run, kept the run incomplete_run, knowing
        # no more, and the clock master then named the loss: exit 16 and a manifest saying
        # incomplete_run (17), which info, diff and rerun read
        _refuse_in_manifest(spec, refusal)
        manifest = {**manifest, "status": "refused", "refusal": refusal}
    status = "counted" if refusal is None and exit_code == 0 else "refused"
    if status == "refused" and refusal is None:  # a crash after the loop: never reported as counted
        refusal = {"code": "participant_error", "step": int(outcome.get("steps") or 0),
                   "detail": f"clock master exited with {_exit_status(exit_code)}"}
        exit_code = REFUSALS["participant_error"].exit_code  # not the raw status (-2 exited 254)
    if status == "refused" and exit_code == 0:  # the manifest's refusal: a refused run never exits 0
        named = REFUSALS.get(str(refusal.get("code")))
        exit_code = named.exit_code if named is not None else EXIT_FAILURE
    return RunResult(
        run_id=spec.run_id,
        scenario=manifest["scenario"] if manifest and manifest.get("scenario") else Path(spec.scenario).stem,
        steps=manifest["steps"] if manifest else int(outcome["steps"]),
        chain_digest=manifest["chain_digest"] if manifest else outcome["chain_digest"],
        status=status,
        refusal=refusal,
        run_dir=str(spec.out_dir),
        exit_code=exit_code if status == "refused" else 0,
        wall=outcome.get("wall"),
        frames_digest=manifest.get("frames_digest") if manifest else outcome.get("frames_digest"),
        notes=notes,
    )


def run(spec: RunSpec, on_step: Callable[[int, int], None] | None = None) -> RunResult:
    """Run once in the spec's layout.

    Raises:
        ConfigError: bad parameters (nothing was started).
    """
    params = node_params(spec)  # hold_at_step past the last step included (params.check_run_span)
    hold_at = params["clock_master"].get("hold_at_step", -1)
    who = f"simforge run {spec.run_id or spec.out_dir.name}"
    created = not spec.out_dir.exists()
    # A stop signal from here on ends the run as `aborted`: at step -1 until its clock master
    # is built (single, _StopRelay) or told (processes, _EarlyStop), at its next step after.
    # Before, the processes layout took them only once its nodes were being started: a
    # SIGTERM just before (a --repeat's second run) ended `simforge run` there, its run
    # directory left with no manifest.
    relay: _StopRelay | _EarlyStop = _StopRelay() if spec.layout == "single" else _EarlyStop()
    try:
        with contextlib.ExitStack() as held:
            held.enter_context(_stop_signals(relay))
            # the user's environment, before anything is written
            if user := os.environ.get("ROS_DOMAIN_ID", "").strip():
                held.enter_context(hold_domain(user_domain(user), who))
            check_rmw()
            discovery = discovery_range()
            _check_memory(params)
            if spec.record:
                _check_room(spec.out_dir, params)
            spec.out_dir.mkdir(parents=True, exist_ok=True)
            params_file = spec.out_dir / PARAMS
            write_params_file(params_file, params)
            lease = held.enter_context(lease_domain(spec.out_dir / "logs"))
            lease = dataclasses.replace(lease, env={**lease.env, DISCOVERY_VAR: discovery})
            # where to find the run while it runs (`simforge pause --run`): a leased domain is no one's guess
            (spec.out_dir / DOMAIN).write_text(f"{lease.domain_id}\n")
            if not user:  # leased: free of runs in a user's domain too (lease_domain looks); held all the same
                held.enter_context(hold_domain(lease.domain_id, who))
            if spec.driver == EXTERNAL:
                _announce_external_driver(params, lease.domain_id, discovery)
            if params["clock_master"].get("wait_for_readers"):
                _announce_wanted_readers(params, lease.domain_id, discovery)
            if hold_at >= 0:
                _announce_paused(hold_at, lease.domain_id, spec.out_dir)
            elif (factor := params["clock_master"].get("real_time_factor", 0.0)) > 0:
                _announce_paced(factor, lease.domain_id)
            if isinstance(relay, _StopRelay):
                return _run_single(spec, params_file, lease, on_step, relay)
            if spec.layout == "processes":
                return _run_processes(spec, params_file, lease, on_step, relay)
    except (_StoppedAtStart, RuntimeError) as err:
        if not _stopped_at_start(err):  # before any node was made (the lease, rclpy's import, its init)
            raise
        return _result(spec, {"status": "refused", "steps": 0, "chain_digest": "", "refusal": _ABORTED_AT_START},
                       Aborted.exit_code)
    except (ConfigError, NoFreeDomain):
        # a node refused its configuration at start (the single layout builds them here;
        # processes: runner._not_started), or no domain was free: nothing was recorded, and
        # the error says all. A run directory left behind held a manifest naming another
        # cause, or none, which every tool then took for a run whose recorder was killed.
        if created:
            _remove_unstarted(spec.out_dir)
        raise
    raise ConfigError.single("--layout", "layout", f"one of {', '.join(LAYOUTS)}", spec.layout)


def _remove_unstarted(out_dir: Path) -> None:
    """Remove the run directory of a run refused at start by a node's configuration
    check, unless it chained a step (then it is a record, and kept)."""
    steps = out_dir / "steps.jsonl"
    with contextlib.suppress(OSError):
        if steps.is_file() and steps.stat().st_size > 0:
            return
        shutil.rmtree(out_dir)


def _announce_paced(factor: float, domain_id: int) -> None:
    """A paced run is one to watch live: say in which domain (a leased one is no one's guess)."""
    print(f"simforge: the run is paced at {factor:g}x real time: watch it in ROS_DOMAIN_ID={domain_id}, localhost "
          "(`simforge pause` holds it there)", file=sys.stderr, flush=True)


def _announce_paused(hold_at: int, domain_id: int, out_dir: Path) -> None:
    """Tell the user where the run will hold (clock_master.hold_at_step), and how to let it go on."""
    # commands that work as printed: a bare `simforge pause` needs ROS_DOMAIN_ID, and a leased
    # run's domain is in no one's environment
    print(f"simforge: the run holds once step {hold_at} is done until resumed: "
          f"`simforge pause --resume --run {shlex.quote(str(out_dir))}`, `ROS_DOMAIN_ID={domain_id} simforge pause "
          f"--resume`, or a {topics.PAUSE_SERVICE} call (std_srvs/SetBool, data false) on ROS_DOMAIN_ID={domain_id}, "
          "localhost", file=sys.stderr, flush=True)


def _check_room(out_dir: Path, params: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse a recorded run whose record clearly cannot fit on its disk, before it starts.

    Raises:
        ConfigError: on ``--out``, with the estimate and the free space.
    """
    from simforge_ros.record.room import estimate, free_bytes, megabytes

    need = estimate(params)
    free = free_bytes(out_dir)
    if need is not None and need.bytes > free:
        raise ConfigError.single("--out", "out", f"a disk with room for the run's record ({need.describe()}; "
                                 f"{megabytes(free)} free: fewer --steps or cameras, or another --out)",
                                 str(out_dir.parent))


def _check_memory(params: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse cameras whose drawing clearly cannot fit in the machine's memory, before the
    run starts: four 8192x8192 cameras (within each side's range) need about 19 GB, and a
    run began and ended in MemoryError or the kernel's OOM killer.

    Raises:
        ConfigError: on sim_bridge.width and height, with the estimate and what is available.
    """
    from simforge_ros.engine.render import drawing_bytes
    from simforge_ros.record.room import megabytes

    bridge = params.get("sim_bridge", {})
    if bridge.get("backend", "embedded") != "embedded":
        return  # a simulator server draws the frames
    cameras = bridge.get("cameras", spec_of("sim_bridge", "cameras").default)
    width = bridge.get("width", spec_of("sim_bridge", "width").default)
    height = bridge.get("height", spec_of("sim_bridge", "height").default)
    need = drawing_bytes(len(cameras), width, height)
    available = available_memory()
    if available is not None and need > available:
        raise ConfigError.single(
            RUN_PARAMETERS, "sim_bridge.width x height",
            f"images the machine's memory can draw ({len(cameras)} cameras at {width}x{height} take about "
            f"{megabytes(need)}; {megabytes(available)} available: fewer cameras or smaller images)",
            f"{width}x{height}")


def available_memory() -> int | None:
    """MemAvailable of /proc/meminfo in bytes, None where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _announce_external_driver(params: Mapping[str, Mapping[str, Any]], domain_id: int, discovery: str) -> None:
    """Tell the user where the clock master looks for their driver, and for how long."""
    name = "startup_timeout_ms"
    startup_s = params["clock_master"].get(name, spec_of("clock_master", name).default) / 1000
    print(f"simforge: waiting up to {startup_s:g} s for your driver: a {topics.DECIDE_SERVICE} service "
          f"(simforge_ros/srv/Decide) on ROS_DOMAIN_ID={domain_id}, "
          f"{'localhost' if discovery == 'LOCALHOST' else 'this subnet'}", file=sys.stderr, flush=True)


def _announce_wanted_readers(params: Mapping[str, Mapping[str, Any]], domain_id: int, discovery: str) -> None:
    """Tell the user where and how long the run waits for their stack's readers (a leased
    domain is no one's guess)."""
    name = "startup_timeout_ms"
    startup_s = params["clock_master"].get(name, spec_of("clock_master", name).default) / 1000
    wanted = ", ".join(params["clock_master"]["wait_for_readers"])
    print(f"simforge: waiting up to {startup_s:g} s for a node of yours reading {wanted} on ROS_DOMAIN_ID="
          f"{domain_id}, {'localhost' if discovery == 'LOCALHOST' else 'this subnet'}", file=sys.stderr, flush=True)


def _run_single(spec: RunSpec, params_file: Path, lease: DomainLease, on_step: Any,
                relay: _StopRelay | None = None) -> RunResult:
    from simforge_ros.process_tuning import tune_process

    os.environ.setdefault("RMW_IMPLEMENTATION", lease.env["RMW_IMPLEMENTATION"])
    os.environ[DISCOVERY_VAR] = lease.env[DISCOVERY_VAR]  # the range the user asked for, or LOCALHOST
    tune_process()  # what every node process does first (see process_tuning)
    # this run's log directory, as a node process of the processes layout gets it: rclpy
    # configures logging at a run's first context and ends it with its last, so each run of
    # a --repeat logs into its own logs/ (they all went into the first run's)
    with environ_set({"ROS_LOG_DIR": lease.env["ROS_LOG_DIR"], "ROS_HOME": lease.env["ROS_HOME"]}), \
            _thread_deaths() as died:
        result = _step_single(spec, params_file, lease.domain_id, on_step, relay)
    steps_file = spec.out_dir / "steps.jsonl"
    if result.status == "refused" and spec.record and steps_file.is_file() and \
            not (spec.out_dir / "manifest.json").is_file():
        # its recorder, closed now, could write no manifest (a full disk): what it chained
        # and kept, as the processes layout says, not what the clock master stepped
        result = replace(result, **_kept(steps_file))
    if result.status == "counted" and died:  # the clean-exit guard, as _abort_lines in processes
        return _refuse_unclean(spec, result, died)
    return result


@contextmanager
def _thread_deaths() -> Iterator[list[str]]:
    """What threads of this process died of an exception meanwhile, and what exceptions
    Python could not raise (in a ``__del__`` or a callback of the collector: "Exception
    ignored in ..."), each still printed as before: in the single layout the nodes' threads
    (the bag writer's, rclpy's) and objects are this process's, and those tracebacks are
    what abort lines are in a node's log. (Four varied single runs, torch included, gave
    none of either.)"""
    died: list[str] = []
    previous, previous_unraisable = threading.excepthook, sys.unraisablehook

    def note(args: threading.ExceptHookArgs) -> None:
        name = args.thread.name if args.thread is not None else "a thread"
        died.append(f"{name} died of {args.exc_type.__name__}: {args.exc_value}")
        previous(args)

    def note_unraisable(unraisable: Any) -> None:
        died.append(f"an exception was ignored ({unraisable.exc_type.__name__}: {unraisable.exc_value}, "
                    f"in {unraisable.object!r})")
        previous_unraisable(unraisable)

    threading.excepthook, sys.unraisablehook = note, note_unraisable
    try:
        yield died
    finally:
        threading.excepthook, sys.unraisablehook = previous, previous_unraisable


_ABORTED_AT_START = {"code": Aborted.code, "step": -1, "detail": "interrupted while the nodes were starting"}


class _StoppedAtStart(BaseException):
    """A stop signal came while the single layout's nodes were being built. A
    BaseException, as KeyboardInterrupt is: an ``except Exception`` it passes through (the
    torch planner's weights loading) must not take it for a bad configuration."""


def _stopped_at_start(err: BaseException) -> bool:
    """Whether ``err`` is, or was raised by, _StoppedAtStart: raised while a class was made
    (a dataclass's fields, as a node module is first imported), Python wraps it in
    "RuntimeError: Error calling __set_name__ on 'Field' instance ..." (a Ctrl-C then was
    an unexpected error, exit 1, in a CI run)."""
    seen: BaseException | None = err
    for _ in range(8):  # a chain, not a loop
        if seen is None:
            return False
        if isinstance(seen, _StoppedAtStart):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class _StopRelay:
    """A stop signal in the single layout: to the clock master once it is built (it ends
    the run at its next step, ClockMaster.interrupted); before that, _StoppedAtStart ends
    the building (a CARLA backend may take minutes to connect), once."""

    def __init__(self) -> None:
        self.asked = False
        self._clock: Any = None
        self._deferring = False

    def __call__(self) -> None:
        if self._clock is not None:
            self._clock.interrupted = True
        elif not self.asked and not self._deferring:
            self.asked = True
            raise _StoppedAtStart
        self.asked = True

    def attach(self, clock: Any) -> None:
        self._clock = clock

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """A stop signal while the recorder is built is acted on once it is: raised inside
        its constructor, it left a run directory with the record's files begun and no
        manifest, which no tool could read (verify: "the recorder did not finish this run
        (killed?)"), where the processes layout leaves a refused one."""
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False
        if self.asked:
            raise _StoppedAtStart


class _EarlyStop:
    """A stop signal in the processes layout: kept until the run can act on it, then passed
    to what it does with one (``taking``): tell the clock master (``stop_asked`` before it
    is there), or nothing while the nodes end. Outside ``taking`` a signal is only noted."""

    def __init__(self) -> None:
        self.asked = False
        self._stop: Callable[[], None] | None = None

    def __call__(self) -> None:
        self.asked = True
        if self._stop is not None:
            self._stop()

    @contextmanager
    def taking(self, stop: Callable[[], None]) -> Iterator[None]:
        self._stop = stop
        if self.asked:
            stop()
        try:
            yield
        finally:
            self._stop = None


def _step_single(spec: RunSpec, params_file: Path, domain_id: int, on_step: Any,
                 relay: _StopRelay | None = None) -> RunResult:
    """The single layout's nodes on one executor, stepped by the clock master; closed after."""
    import rclpy

    from simforge_ros.nodes.clock_master import ClockMaster
    from simforge_ros.nodes.common import close_nodes, make_executor
    from simforge_ros.nodes.driver import Driver
    from simforge_ros.nodes.recorder import Recorder
    from simforge_ros.nodes.sim_bridge import SimBridge
    from simforge_ros.process_tuning import freeze_startup

    context = rclpy.Context()
    rclpy.init(args=["--ros-args", "--params-file", str(params_file)], context=context, domain_id=domain_id)
    shells: list[Any] = []
    recorder: Recorder | None = None
    executor = make_executor(context)
    try:
        try:
            if spec.record:
                with relay.deferred() if relay is not None else contextlib.nullcontext():
                    recorder = Recorder(context)
            # one thread for everything: the bridge draws its frames before answering
            # (drawing after overlaps nothing here; see SimBridge._answer)
            bridge = SimBridge(context, frames_after_answer=False)
            driver = Driver(context) if spec.driver != EXTERNAL else None
            shells = [s for s in (recorder, bridge, driver) if s is not None]
            clock = ClockMaster(context)
            if relay is not None:
                relay.attach(clock)
            bridge.core.watchdog = clock.overdue  # its timeout and Ctrl-C end a long step
        except ConfigError as err:
            raise ConfigError([Problem(p.source, p.field, p.expected, p.got) for p in err.problems]) from None
        shells.append(clock)
        # The recorder shares the loop's thread too. On a thread of its own it only took the
        # interpreter lock in turns with the loop, each hand-over costing a wake-up: with the
        # loop's lead over it bounded (recorder_backlog_steps), one thread sustained x1.09-1.21
        # the steps/s without cameras (8 interleaved pairs of 3 000-step runs) and x1.07-1.18
        # with four (3 pairs of 200). (On its own thread it had looked faster only while its
        # backlog was unbounded and its work left for after the last step.)
        for shell in shells:
            executor.add_node(shell.node)
        freeze_startup()
        outcome = clock.run(executor, on_step)
        told = outcome.to_dict()
        if recorder is not None and told.get("refusal") is not None:
            # refused before the recorder was asked to write (it offers Finish only once every
            # participant's parameters have come): it keeps the run's refusal, as the exit
            # status says; closed below, it kept "incomplete_run" (a Ctrl-C at start-up)
            recorder.close(refusal=told["refusal"])
        return _result(spec, told, outcome.exit_code)
    except (_StoppedAtStart, RuntimeError) as err:
        if not _stopped_at_start(err):  # as the processes layout says of a signal before its clock master ran
            raise
        if recorder is not None:
            recorder.close(refusal=_ABORTED_AT_START)  # what it kept says so, as the run's exit status does
        return _result(spec, {"status": "refused", "steps": 0, "chain_digest": "", "refusal": _ABORTED_AT_START},
                       Aborted.exit_code)
    finally:
        for shell in shells:
            close = getattr(shell, "close", None)
            if close is not None:
                close()
        # what was recorded is written; the ROS teardown can hang holding the interpreter
        # lock (nodes.common.exit_if_stuck), and this process would then never end
        with ended_if_stuck(SINGLE_TEARDOWN_S):
            close_nodes(executor, [shell.node for shell in shells])
            rclpy.shutdown(context=context)
        gc.unfreeze()  # this process may run more: what the run froze may be collected again


class _StepsFollower:
    """Counts the records the recorder has written to steps.jsonl (for a progress display
    of a run in other processes); reads only what is new each time."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._handle: Any = None
        self.count = 0

    def poll(self) -> int:
        if self._handle is None:
            if not self._path.exists():
                return self.count
            self._handle = self._path.open("rb")
        self.count += self._handle.read().count(b"\n")
        return self.count

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()


def _run_processes(spec: RunSpec, params_file: Path, lease: DomainLease, on_step: Any = None,
                   relay: _EarlyStop | None = None) -> RunResult:
    logs = spec.out_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    handles = []
    not_started: str | None = None  # a node that exited with a configuration error
    killed: str | None = None  # a participant a signal ended before step 0, for which the run was stopped
    dead_since: dict[str, float] = {}  # wall clock: when each participant a signal ended was seen so
    killed_stop_by = math.inf  # wall clock: the clock master, stopped for a killed node, has ended by then
    order = [n for n in NODES if (spec.record or n != "recorder") and (spec.driver != EXTERNAL or n != "driver")]
    env = dict(lease.env)
    use_fastdds_profile(env)
    env[LAUNCHER_ENV] = str(os.getpid())  # killed outright, this process is missed (watch_launcher)
    stop_asked = threading.Event()
    told = _OutcomePipe()
    stopped_for_file = logs / "stopped_for.json"  # process_tuning.STOPPED_FOR_ENV

    def stop() -> None:
        stop_asked.set()
        if "clock_master" in procs:
            procs["clock_master"].send_signal(signal.SIGINT)

    try:
        # the nodes run in sessions of their own: a signal to this process reaches the
        # clock master only through here, from before the first of them starts (one that
        # came while they were started used to end this process alone, the nodes waiting on)
        taking = relay.taking if relay is not None else _stop_signals
        with taking(stop):
            for node in order:
                log = (logs / f"{node}.log").open("wb")
                handles.append(log)
                if node == "clock_master":
                    procs[node] = _start_node(node, params_file, {**env, OUTCOME_FD_ENV: str(told.write_fd),
                                                                  STOPPED_FOR_ENV: str(stopped_for_file)},
                                              spec.out_dir, log, pass_fds=(told.write_fd,))
                    told.close_write()  # its end is the clock master's alone: read to the end once it ends
                else:
                    procs[node] = _start_node(node, params_file, env, spec.out_dir, log)
            clock = procs["clock_master"]
            if stop_asked.is_set():  # asked before the clock master was there to be told:
                clock.send_signal(signal.SIGINT)  # held until its handler is in place
            follower = _StepsFollower(spec.out_dir / "steps.jsonl")
            shown = 0
            try:
                while clock.poll() is None:
                    chained = follower.poll() if spec.record else None
                    for name, proc in procs.items():
                        # reap a dead participant at once, so it is seen as gone; one that
                        # could not start (its configuration, or an unexpected error before
                        # any step was chained) ends the run now, not after the clock
                        # master's wait for its service
                        code = proc.poll()
                        if not_started is None and (code == EXIT_USAGE or (code in (EXIT_FAILURE, -TEARDOWN_SIGNAL)
                                                                             and chained == 0)):
                            not_started = name
                        elif (name != "clock_master" and code is not None and _stop_signal(code) is not None
                              and chained == 0):
                            # killed, or stopped by a signal it took, from outside before step 0
                            # was chained: one the clock master is not yet calling it waits for
                            # to its start-up limit, then blames the service ("did not appear",
                            # 40 s later, or another node's); one it calls, it names
                            dead_since.setdefault(name, time.monotonic())
                    if chained:  # step 0 is chained: the clock master was calling them, and names a loss
                        dead_since.clear()
                    if killed is None and (killed := next((name for name, since in dead_since.items()
                                                           if time.monotonic() - since >= _KILLED_WAIT_S), None)):
                        # it ends the run as it does any, its outcome told: for this loss, not
                        # "aborted", in its final status too (the bag's, which verify compares)
                        with contextlib.suppress(OSError):
                            write_json(stopped_for_file, _lost_before_step_0(killed, procs[killed]))
                        clock.send_signal(signal.SIGINT)
                        killed_stop_by = time.monotonic() + _KILLED_STOP_S
                    if not_started is not None or (killed is not None and time.monotonic() > killed_stop_by):
                        break  # (one that waits on the dead node's Finish is not waited for)
                    if on_step is not None and follower.count > shown:
                        shown = follower.count
                        on_step(shown - 1, spec.steps)  # total 0: the scenario decides
                    told.drain()
                    time.sleep(0.05)
            finally:
                follower.close()
            if killed is not None and clock.poll() is None:  # its outcome is not waited for: the loss is the run's
                with contextlib.suppress(OSError):
                    os.killpg(clock.pid, signal.SIGKILL)
            # a participant that could not start, seen only now: the clock master ended
            # between two looks (its refusal is a symptom; the node's problem is the cause)
            not_started = not_started or next(
                (name for name, proc in procs.items() if name != "clock_master" and proc.poll() == EXIT_USAGE), None)
        with taking(lambda: None):  # the nodes are ending: a signal now must not orphan them
            ending = not_started is None and killed is None
            wall_deadline = time.monotonic() + (_GRACE_S if ending else 1.0 if killed is not None else 0.0)
            # a node stopped (SIGSTOP, a debugger) cannot end by itself: not waited for (a
            # Ctrl-C took 9.7 s to end a run whose participant was stopped)
            while (any(p.poll() is None and not _frozen(p.pid) for p in procs.values())
                   and time.monotonic() < wall_deadline):
                time.sleep(0.05)
            lingering = {name for name, proc in procs.items() if proc.poll() is None}
            if lingering and ending:
                _dump_stacks(procs, lingering)
    finally:
        _stop_all(procs)
        for handle in handles:
            handle.close()
        told.close()
        with contextlib.suppress(OSError):  # a killed recorder's (record.reserve): room back
            (spec.out_dir / RESERVE).unlink(missing_ok=True)
    notes = _teardowns_cut_short(procs, logs)
    outcome = told.outcome() or read_outcome(logs / "clock_master.log")
    clock_code = procs["clock_master"].returncode
    if clock_code == -TEARDOWN_SIGNAL and outcome is not None:
        clock_code = 0  # its outcome was out: the exit status it meant follows from it (_result)
    if outcome is None and clock_code == EXIT_USAGE:
        not_started = "clock_master"
    if outcome is None and not_started is None and stop_asked.is_set():  # before its Python had started
        return _result(spec, {"status": "refused", "steps": 0, "chain_digest": "", "refusal": _ABORTED_AT_START},
                       Aborted.exit_code)
    if not_started is not None:
        return _not_started(spec, not_started, procs[not_started].returncode, logs / f"{not_started}.log")
    if killed is not None and (outcome is None or (outcome.get("refusal") or {}).get("code") == Aborted.code):
        # stopped for it (aborted, before step 0): the loss is the run's refusal. One the
        # clock master named itself (it was calling the node: kill=recorder@0) stands.
        lost = _lost_before_step_0(killed, procs[killed])
        _refuse_in_manifest(spec, lost)
        return _result(spec, {"status": "refused", "steps": 0, "chain_digest": "", "refusal": lost},
                       ParticipantLost.exit_code)
    result = _result(spec, outcome, clock_code, recorder_apart=True)
    result = replace(result, notes=(*result.notes, *notes))
    if result.status != "counted":
        return result  # its refusal names what went wrong; a node's exit or log follows from it
    unclean = _unclean_exits(procs, lingering, logs) + _abort_lines(logs, list(procs))
    return _refuse_unclean(spec, result, unclean) if unclean else result


def _teardowns_cut_short(procs: Mapping[str, subprocess.Popen[bytes]], logs: Path) -> tuple[str, ...]:
    """A note for each node whose ROS teardown its watchdog had to cut short (the run
    counts all the same: its results were out): rare, an rclpy/Fast DDS fault, and worth
    knowing about when it comes back.

    One ended by TEARDOWN_SIGNAL also gets a last line in its log saying so: its stacks
    are the lines before, written by a handler that could run no Python to say why."""
    notes = []
    for name, proc in procs.items():
        log = logs / f"{name}.log"
        if proc.returncode == -TEARDOWN_SIGNAL:
            with contextlib.suppress(OSError), log.open("a", encoding="utf-8") as handle:
                handle.write(f"simforge run: {name}'s teardown hung after its work was done, holding Python's "
                             f"interpreter lock; its watchdog ended it ({TEARDOWN_SIGNAL.name}); the stacks above "
                             "show where it was\n")
            notes.append(f"{name}'s ROS teardown hung after the run, holding the interpreter lock, and its watchdog "
                         f"ended it (where it was: {log})")
            continue
        with contextlib.suppress(OSError):
            if log.is_file() and TEARDOWN_CUT in log.read_text(errors="replace"):
                notes.append(f"{name}'s ROS teardown did not finish in time after the run, and its watchdog ended it "
                             f"(see {log})")
    return tuple(notes)


def _unclean_exits(procs: Mapping[str, subprocess.Popen[bytes]], lingering: set[str], logs: Path) -> list[str]:
    """Each participant that exited non-zero after the run, or had to be stopped, with its
    log. A participant whose teardown hangs leaves by itself with 0, or by TEARDOWN_SIGNAL
    where the hang holds the interpreter lock (exit_if_stuck), both clean; one still there
    past _GRACE_S is stuck where neither can reach it."""
    unclean = []
    for name, proc in procs.items():
        if name == "clock_master":
            continue
        log = logs / f"{name}.log"
        if name in lingering:
            unclean.append(f"{name} was still running {_GRACE_S:g} s after the run ended and was stopped (see {log}, "
                           "which ends with where its threads were)")
        elif proc.returncode not in (0, -TEARDOWN_SIGNAL):
            unclean.append(f"{name} exited with {_exit_status(proc.returncode)} after the run ended (see {log})")
    return unclean


# What a node prints only when something broke that no refusal named: a Python traceback
# (an exception escaped a thread or a callback), rcutils' FATAL level, an interpreter abort.
ABORT_MARKERS = ("Traceback (most recent call last):", "Exception in thread", "Fatal Python error", "[FATAL]")


def _abort_lines(logs: Path, names: list[str]) -> list[str]:
    """The first abort line (ABORT_MARKERS) of each node's log, with its line number: a run
    counts only with none, as the seed article's clean-exit guard has it."""
    found = []
    for name in names:
        log = logs / f"{name}.log"
        with contextlib.suppress(OSError), log.open(encoding="utf-8", errors="replace") as lines:
            for number, line in enumerate(lines, 1):
                if any(marker in line for marker in ABORT_MARKERS):
                    found.append(f"{log} line {number}: {line.strip()[:200]!r}")
                    break
    return found


def _refuse_unclean(spec: RunSpec, result: RunResult, unclean: list[str]) -> RunResult:
    """A run counts only with a clean exit of every node and no abort line in their logs
    (the seed article's third guard): a node that crashed or hung on its way out, or printed
    a traceback, is a fault of the stack, even with every step recorded. The run is refused
    participant_error after its last step; the manifest says so, its records stay as they
    are. Before, the runner stopped such a node and said nothing, and the run counted."""
    refusal = {"code": ParticipantError.code, "step": result.steps,
               "detail": "; ".join(unclean) + ": a run counts only with a clean exit of every node and no abort line"}
    _refuse_in_manifest(spec, refusal)
    return replace(result, status="refused", refusal=refusal, exit_code=ParticipantError.exit_code)


def _refuse_in_manifest(spec: RunSpec, refusal: dict[str, Any]) -> None:
    """Write the runner's refusal into the recorder's manifest, where there is one: the
    manifest and the exit status always agree. Where there is none (a killed recorder), into
    logs/refusal.json, for `simforge salvage` to keep: the clock master, stopped for the
    loss, may have ended before it said its own outcome (a salvaged run then said
    incomplete_run where the run's exit status said participant_lost)."""
    manifest_path = spec.out_dir / "manifest.json"
    if not manifest_path.exists():
        with contextlib.suppress(OSError):
            write_json(spec.out_dir / RUNNER_REFUSAL, refusal)
        return
    with contextlib.suppress(OSError, ValueError):  # unreadable or unwritable: the exit status still says it
        manifest = json.loads(manifest_path.read_text())
        manifest["status"], manifest["refusal"] = "refused", refusal
        write_json(manifest_path, manifest)


def _stopped_first(kept: object, refusal: Mapping[str, Any]) -> bool:
    """Whether the recorder's refusal ``kept`` is its own incomplete_run of a run it left
    before the final status (record.rundir.STOPPED_FIRST; its bag then holds no final
    status), where the clock master's ``refusal`` says another code: how the run ended."""
    return (isinstance(kept, dict) and kept.get("code") == "incomplete_run"
            and str(kept.get("detail", "")).startswith(STOPPED_FIRST) and refusal.get("code") != "incomplete_run")


def _lost_before_step_0(name: str, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    """The refusal of a run stopped for participant ``name``, a signal ended before step 0."""
    said = _stop_signal(proc.returncode) if proc.returncode is not None else None
    return {"code": ParticipantLost.code, "step": -1,
            "detail": f"{name} (pid {proc.pid}) was ended by signal {said} before step 0"}


def _stop_signal(code: int) -> str | None:
    """The signal that ended a participant, by name (``SIGKILL``), from its exit status: a
    signal's own (negative), or 128 + a stop signal's number, a participant's exit once it
    took SIGINT or SIGTERM before the run's end (nodes.common.run_participant); else None."""
    number = -code if code < 0 else code - 128 if code - 128 in (signal.SIGINT, signal.SIGTERM) else 0
    if number <= 0:
        return None
    with contextlib.suppress(ValueError):
        return signal.Signals(number).name
    return str(number)


def _exit_status(code: int) -> str:
    """``1``, or ``signal SIGSEGV`` for a process a signal ended."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
        return f"signal {-code}"
    return str(code)


def _start_node(
    node: str, params_file: Path, env: Mapping[str, str], cwd: Path, log: IO[bytes], pass_fds: tuple[int, ...] = ()
) -> subprocess.Popen[bytes]:
    """Start one node process, the stop signals blocked in it until its handlers are in place.

    A signal the runner passes on right after the start (a Ctrl-C while the nodes start)
    was lost or misread otherwise: dropped where SIGINT came ignored from the shell, or a
    KeyboardInterrupt in the node's imports, or rclpy's handler shutting the context under
    the node being built ("the given context is not valid"). The node unblocks them
    (nodes.common.unblock_held_signals); here they are blocked only while forking, so
    this process still takes its own.
    """
    held = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", f"simforge_ros.nodes.{node}", "--ros-args", "--params-file", str(params_file)],
            env=env, cwd=str(cwd), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, pass_fds=pass_fds,
        )
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Ctrl-C, `kill`/`timeout`/a CI runner cancelling the job, the terminal going away: each
stops the run at its next step as `aborted`, its records kept. (SIGTERM used to end
`simforge run` alone: its nodes, in sessions of their own, ran the run to its end.)"""


class NotedStops:
    """A handler that only notes stop signals, for a caller between runs (`simforge run
    --repeat`); a run takes the signals over from it, and one it noted stops the run at
    once. The caller used to put Python's defaults back before each run: a signal after its
    last look and before that was noted and forgotten (the run went on and counted, exit
    0), and one just after killed `simforge run` with no line at all (143)."""

    def __init__(self) -> None:
        self.came: list[int] = []

    def __call__(self, signum: int, _frame: Any) -> None:
        self.came.append(signum)


@contextmanager
def _stop_signals(stop: Callable[[], None]) -> Iterator[None]:
    """Call ``stop`` on any of STOP_SIGNALS while the run goes on. Only on the main thread
    (a run started from another thread, a test's, leaves signals alone), and only for a
    signal nobody else handles (or a NotedStops, whose noted signal stops the run now): a
    caller with its own handler (`simforge bench`, which stops as a whole) keeps it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    defaults = (signal.SIG_DFL, signal.default_int_handler)
    previous = {sig: handler for sig in STOP_SIGNALS
                if (handler := signal.getsignal(sig)) in defaults or isinstance(handler, NotedStops)}
    for sig in previous:
        signal.signal(sig, lambda *_: stop())
    try:
        if any(isinstance(h, NotedStops) and h.came for h in previous.values()):
            stop()  # came after the caller's last look
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def read_outcome(log: Path) -> dict[str, Any] | None:
    """The outcome the clock master process printed last in its log, or None."""
    return _last_outcome(log.read_text(errors="replace")) if log.is_file() else None


def _last_outcome(text: str) -> dict[str, Any] | None:
    outcome = None
    for line in text.splitlines():
        if line.startswith(OUTCOME_PREFIX):
            outcome = json.loads(line[len(OUTCOME_PREFIX):])
    return outcome


class _OutcomePipe:
    """The clock master's outcome line, told through a pipe (process_tuning.OUTCOME_FD_ENV)
    as well as its log: the log is on the run's disk, and a full disk kept it out of there."""

    KEEP_BYTES = 1 << 20  # the last this many: an outcome is a line of a few hundred bytes

    def __init__(self) -> None:
        self._read, self.write_fd = os.pipe()
        os.set_blocking(self._read, False)
        self._data = bytearray()
        self._write_open = True

    def close_write(self) -> None:
        """Close this process's copy of the write end, once the clock master has its own."""
        if self._write_open:
            os.close(self.write_fd)
            self._write_open = False

    def drain(self) -> None:
        """Take what is in the pipe now (never waits): the clock master never blocks on a full pipe."""
        while True:
            try:
                chunk = os.read(self._read, 65536)
            except (BlockingIOError, OSError):
                return
            if not chunk:
                return
            self._data += chunk
            del self._data[:-self.KEEP_BYTES]

    def close(self) -> None:
        self.close_write()
        if self._read >= 0:
            self.drain()
            os.close(self._read)
            self._read = -1

    def outcome(self) -> dict[str, Any] | None:
        try:
            return _last_outcome(self._data.decode(errors="replace"))
        except ValueError:  # a line cut off (never written whole): the log's, or none
            return None


def _not_started(spec: RunSpec, node: str, code: int | None, log: Path) -> RunResult:
    """A node that exited at start-up: its configuration problems, raised as the
    ConfigError the same node raises in the single layout; anything else it said (a
    refusal while building it, an unexpected error), a refused run naming the node.

    Raises:
        ConfigError: the node printed its configuration problems.
    """
    lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
    problems = []
    for line in lines:  # the node printed f"{node}: {error}": one problem a line, the first prefixed
        stripped = line.removeprefix(f"{node}: ")
        problem = (Problem.parse(stripped) if stripped != line else None) or Problem.parse(line)
        if problem is not None and problem.source == node:
            problems.append(problem)
    if problems:
        raise ConfigError(problems)
    said = next((line for line in reversed(lines) if line.strip()), "nothing")
    detail = f"{node} did not start (exit {code}): {said}"
    refusal = {"code": ParticipantError.code, "step": -1, "detail": detail}
    _refuse_in_manifest(spec, refusal)  # the recorder's says only that the run did not finish
    return _result(spec, {"status": "refused", "steps": 0, "chain_digest": "", "refusal": refusal},
                   ParticipantError.exit_code)


def _dump_stacks(procs: Mapping[str, subprocess.Popen[bytes]], names: set[str]) -> None:
    """Have each node still running past the run's end write its threads' stacks to its
    log (process_tuning.STACKS_SIGNAL), before it is stopped: where it was stuck."""
    for name in names:
        with contextlib.suppress(ProcessLookupError):
            procs[name].send_signal(STACKS_SIGNAL)
    time.sleep(0.3)  # faulthandler writes from the signal handler: at once


def _frozen(pid: int) -> bool:
    """Whether process ``pid`` is stopped (SIGSTOP, SIGTSTP): it runs nothing, its handlers
    included, until continued. Not a tracing stop ("t"): a sampling profiler or strace puts
    a live node there many times a second."""
    return process_state(pid) == "T"


def _stop_all(procs: Mapping[str, subprocess.Popen[bytes]]) -> None:
    """SIGTERM, then SIGKILL, every process still running; reap them all. One stopped is
    continued after its SIGTERM, so that it takes it (and leaves as a node does, its shared
    memory removed) rather than being killed 3 s later."""
    for proc in procs.values():
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGCONT)
    wall_deadline = time.monotonic() + 3.0
    for proc in procs.values():
        try:
            proc.wait(timeout=max(0.0, wall_deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
