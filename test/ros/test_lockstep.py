"""The lockstep loop over real ROS 2: identical digests across runs and layouts, and
every named refusal firing at the right step (and not otherwise)."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import statistics
import time
import warnings
from pathlib import Path

import pytest
from runs import lockstep, manifest_of, processes_mentioning, simforge, steps_of

from simforge_ros import topics
from simforge_ros.core.errors import ConfigError
from simforge_ros.record.bag import read_bag
from simforge_ros.shm_cleanup import zombie_files

pytestmark = pytest.mark.ros


def _refusal(result):
    return (result.refusal["code"], result.refusal["step"]) if result.refusal else None


def test_single_and_processes_layouts_give_the_same_digest(tmp_path):
    single = lockstep(tmp_path, steps=40, layout="single")
    processes = lockstep(tmp_path, steps=40, layout="processes")
    assert single.status == processes.status == "counted"
    assert single.steps == processes.steps == 40
    assert single.chain_digest == processes.chain_digest
    assert len(single.chain_digest) == 64
    # the recorder acknowledged the last records at once (config/fastdds_shm.xml: writers'
    # heartbeats every 100 ms); before, every processes run waited 2 s here and said so
    log = (Path(processes.run_dir) / "logs" / "clock_master.log").read_text()
    assert "not acknowledged" not in log, log


def test_decision_not_a_whole_number_of_ticks_is_refused_before_step_0(tmp_path):
    result = lockstep(tmp_path, steps=10, layout="single", sets={"sim_bridge": {"tick_us": 30_000}})
    assert _refusal(result) == ("rate_not_multiple", -1)
    assert "30000" in result.refusal["detail"]
    assert result.exit_code == 11


def test_hand_typed_camera_period_is_refused_at_start_not_at_step_101(tmp_path):
    result = lockstep(tmp_path, steps=150, layout="single", sets={"sim_bridge": {"camera_period_s": 0.0999}})
    assert _refusal(result) == ("rate_not_multiple", -1)
    assert "99900" in result.refusal["detail"]
    assert manifest_of(result)["steps"] == 0


@pytest.mark.parametrize(("node", "name", "step", "layout"), [
    ("clock_master", "decision_s", -1, "processes"), ("clock_master", "decision_s", -1, "single"),
    ("clock_master", "latency_s", -1, "single"), ("sim_bridge", "tick_s", -1, "single"),
    ("sim_bridge", "camera_period_s", -1, "processes"), ("driver", "planning_period_s", 0, "single"),
])
def test_seconds_no_whole_number_of_microseconds_are_a_recorded_refusal(tmp_path, node, name, step, layout):
    """The node that reads the period refuses it once the run has begun, so that the
    recorder keeps the refusal. Before, the node exited at start-up: `processes` said
    "clock master exited with 11" with a manifest saying incomplete_run, or refused
    participant_error; `single` ended with exit 1 and no run line."""
    value = {"decision_s": 0.1000005, "latency_s": 0.0000005, "tick_s": 0.0200005}.get(name, 0.5000005)
    result = lockstep(tmp_path, steps=5, layout=layout, sets={node: {name: value}})
    assert _refusal(result) == ("rate_not_multiple", step)
    assert f"{name}={value} s is not a whole number of microseconds" in result.refusal["detail"]
    assert result.exit_code == 11
    manifest = manifest_of(result)
    assert (manifest["status"], manifest["refusal"]["code"], manifest["refusal"]["step"]) == (
        "refused", "rate_not_multiple", step)
    assert manifest["steps"] == 0


def test_each_single_run_in_one_process_logs_into_its_own_run_directory(tmp_path):
    """As each node process of the processes layout does. In one process (`simforge run
    --layout single --repeat N`) every run's log went into the first run's logs/."""
    import os

    before = os.environ["ROS_LOG_DIR"]
    runs = [lockstep(tmp_path, steps=10, layout="single", faults=(f"drop_frame@{k}",)) for k in (3, 6)]
    assert os.environ["ROS_LOG_DIR"] == before  # given back
    for result, k in zip(runs, (3, 6), strict=True):
        assert _refusal(result) == ("missing_frame", k)
        text = "".join(p.read_text() for p in (Path(result.run_dir) / "logs").glob("*.log"))
        assert f"refused: missing_frame at step {k}:" in text and "missing_frame at step" in text
        assert text.count("refused: missing_frame at step") == 1  # its own refusal only


def test_a_whole_number_camera_period_in_seconds_is_accepted(tmp_path):
    result = lockstep(tmp_path, steps=12, layout="single", sets={"sim_bridge": {"camera_period_s": 0.2}})
    assert result.status == "counted"
    frames = [len(s["frames"]) for s in steps_of(result)]
    assert frames == [2 if k % 2 == 0 else 0 for k in range(12)]


@pytest.mark.parametrize(
    ("fault", "code", "step"),
    [
        ("time_offset=1@7", "time_drift", 7),
        ("drop_frame@5", "missing_frame", 5),
        ("stale_frame@6", "stale_frame", 6),
        ("rig_offset=0.0054,0.134", "pose_tolerance", 0),
    ],
)
@pytest.mark.parametrize("layout", ["single", "processes"])
def test_each_contract_refusal_fires_at_its_step_and_keeps_the_records(tmp_path, fault, code, step, layout):
    """In processes the bridge draws a step's frames after its answer: those of the steps
    before the refusal are in the bag all the same."""
    result = lockstep(tmp_path, steps=20, layout=layout, faults=(fault,))
    assert _refusal(result) == (code, step)
    manifest = manifest_of(result)
    assert manifest["status"] == "refused" and manifest["refusal"]["code"] == code
    assert manifest["steps"] == step  # every step before the refusal is kept, chained
    assert [s["step"] for s in steps_of(result)] == list(range(step))
    assert fault in manifest["faults"]
    # the refused step's observation and /clock are in the bag too: what it was refused on
    bag = read_bag(Path(result.run_dir) / "bag")
    by_topic: dict[str, list[int]] = {}
    for item in bag:
        if item.topic == topics.STATE:
            by_topic.setdefault("state", []).append(int(item.msg.step))
        elif item.topic == topics.CLOCK:
            stamp = item.msg.clock
            by_topic.setdefault("clock", []).append(int(stamp.sec * 1_000_000 + stamp.nanosec // 1000))
        elif item.topic in (topics.image_topic("chase"), topics.image_topic("front")):
            stamp = item.msg.header.stamp
            by_topic.setdefault(item.topic, []).append(int(stamp.sec * 1_000_000 + stamp.nanosec // 1000))
    assert by_topic["state"] == list(range(step + 1))
    assert by_topic["clock"] == [k * 100_000 for k in range(step + 1)]
    for camera in ("chase", "front"):
        assert sorted(by_topic.get(topics.image_topic(camera), []))[:step] == [k * 100_000 for k in range(step)]


def test_a_rig_error_within_tolerance_does_not_trip_the_pose_guard(tmp_path):
    result = lockstep(tmp_path, steps=20, layout="single", faults=("rig_offset=0.005,0.05",))
    assert result.status == "counted", result.refusal


def test_a_hung_participant_is_refused_with_participant_timeout(tmp_path):
    result = lockstep(tmp_path, steps=20, layout="processes", faults=("stall=driver@4",),
                      sets={"clock_master": {"participant_timeout_ms": 1500}})
    assert _refusal(result) == ("participant_timeout", 4)
    assert manifest_of(result)["steps"] == 4
    assert processes_mentioning(result.run_dir) == []


def test_step_0_may_take_as_long_as_start_up_later_steps_only_the_participant_timeout(tmp_path):
    result = lockstep(tmp_path, steps=20, layout="processes", faults=("stall=driver@0",),
                      sets={"clock_master": {"participant_timeout_ms": 500, "startup_timeout_ms": 15000}})
    assert _refusal(result) == ("participant_timeout", 0)  # started within 15 s, even on a loaded machine
    assert "within 15 s" in result.refusal["detail"]  # not 0.5 s


def test_a_killed_driver_is_named_participant_lost_and_leaves_no_process(tmp_path):
    wall_start = time.time()
    result = lockstep(tmp_path, steps=30, layout="processes", faults=("kill=driver@5",),
                      sets={"clock_master": {"participant_timeout_ms": 20_000}})
    assert _refusal(result) == ("participant_lost", 5)
    assert "driver" in result.refusal["detail"]
    manifest = manifest_of(result)
    assert manifest["steps"] == 5 and manifest["refusal"]["code"] == "participant_lost"
    assert processes_mentioning(result.run_dir) == []
    # nor its shared memory: a SIGKILLed participant cannot remove it, the lease does
    assert zombie_files(wall_start, now=time.time() + 10) == []


def test_a_recorder_killed_at_its_first_step_leaves_a_run_salvage_keeps(tmp_path):
    """Killed on taking step 0's timing record, the recorder has written nothing to its bag
    (a file of 0 bytes) and salvage refused it as "not an MCAP file": the run's refusal
    could not be kept where the tools read runs. It is salvaged now as a run of no step."""
    result = lockstep(tmp_path, steps=300, layout="processes", faults=("kill=recorder@0",))
    assert result.status == "refused" and result.refusal["code"] == "participant_lost"
    assert (Path(result.run_dir) / "bag" / "bag.mcap").stat().st_size < 8  # not even the magic
    # nothing chained: the empty chain, as a manifest of no step says it (it said "")
    assert (result.steps, result.chain_digest, result.frames_digest) == (0, "0" * 64, None)
    salvaged = simforge("salvage", result.run_dir, "--json", cwd=tmp_path)
    assert salvaged.returncode == 0, salvaged.stderr
    report = json.loads(salvaged.stdout)
    assert report["steps"] == 0
    check = simforge("verify", report["out"], cwd=tmp_path)
    assert check.returncode == 0 and f"verified: {report['steps']} steps" in check.stdout, check.stderr
    manifest = json.loads((Path(report["out"]) / "manifest.json").read_text())
    assert (manifest["refusal"]["code"], manifest["refusal"]["step"]) == ("participant_lost", result.refusal["step"])


def _signal_at_start(tmp_path: Path, node: str, sig: str) -> tuple[int, dict, float, int]:
    """A 20-step run whose ``node`` is sent ``sig`` as soon as its process is there (held
    until its handlers are in place: runner._start_node): (its pid, the run's --json line,
    the seconds from the signal to the run's end, its exit status)."""
    import os
    import signal
    import subprocess
    import sys

    out = tmp_path / "runs"
    exe = Path(sys.executable).with_name("simforge")
    run = subprocess.Popen([str(exe), "run", "right_turn", "--out", str(out), "--json", "--steps", "20"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    wall_deadline = time.monotonic() + 60
    while not (found := [pid for pid in processes_mentioning(str(out))
                         if f"nodes.{node}".encode() in Path(f"/proc/{pid}/cmdline").read_bytes()]):
        assert run.poll() is None and time.monotonic() < wall_deadline, run.communicate()
        time.sleep(0.005)
    os.kill(found[0], getattr(signal, sig))
    killed_at = time.monotonic()
    stdout, stderr = run.communicate(timeout=60)
    took = time.monotonic() - killed_at
    assert processes_mentioning(str(out)) == []
    assert stdout, stderr
    return found[0], json.loads(stdout), took, run.returncode


def test_a_participant_killed_before_step_0_ends_the_run_at_once_naming_it(tmp_path):
    """A recorder SIGKILLed as it started left the clock master waiting out its start-up
    limit for /simforge/finish (40 s here) and then blaming the service for not appearing."""
    pid, result, took, code = _signal_at_start(tmp_path, "recorder", "SIGKILL")
    assert took < 15, result  # not the 30 s start-up limit
    assert code == 16 and result["refusal"] == {
        "code": "participant_lost", "step": -1,
        "detail": f"recorder (pid {pid}) was ended by signal SIGKILL before step 0"}, result


@pytest.mark.parametrize(("node", "sig"), [("sim_bridge", "SIGTERM"), ("driver", "SIGINT")])
def test_a_participant_that_took_a_stop_signal_at_its_start_ends_the_run_naming_it(tmp_path, node, sig):
    """A bridge or driver that took a SIGTERM or SIGINT (its handler: it says so and
    leaves) exited 0 and, before step 0, was not seen at all: the run waited 30 s for its
    service and refused participant_timeout, and the recorder, waiting for the bridge's
    parameters, was kept incomplete_run beside it (`verify` failed the run's own bag). It
    exits 128 + the signal's number now and is named as a killed one is: before step 0
    by the runner, once called by the clock master (which of the two depends on when its
    handler took the signal)."""
    pid, result, took, code = _signal_at_start(tmp_path, node, sig)
    assert took < 15, result
    assert code == 16 and result["refusal"]["code"] == "participant_lost", result
    step, detail = result["refusal"]["step"], result["refusal"]["detail"]
    assert (step, detail) == (-1, f"{node} (pid {pid}) was ended by signal {sig} before step 0") or (
        step >= 0 and detail == f"{node} (pid {pid}) is gone"), result
    manifest = json.loads((Path(result["run_dir"]) / "manifest.json").read_text())
    assert manifest["refusal"] == result["refusal"]
    check = simforge("verify", result["run_dir"], cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_run_refused_before_the_recorder_offered_finish_keeps_that_refusal_at_once(tmp_path):
    """A bridge frozen as it started (SIGSTOP: it never publishes its parameters, which the
    recorder waits for before it offers Finish) is refused participant_timeout at the
    start-up limit. The clock master then called the unoffered Finish with its resends for
    some 20 s, and the recorder, which had the final status, waited for the clock master to
    leave and kept the run incomplete_run, "its final status never came": `verify` failed
    the run's own bag, whose status said participant_timeout."""
    import os
    import signal
    import subprocess
    import sys

    out = tmp_path / "runs"
    exe = Path(sys.executable).with_name("simforge")
    run = subprocess.Popen([str(exe), "run", "right_turn", "--out", str(out), "--json", "--steps", "20",
                            "--set", "clock_master.startup_timeout_ms=3000"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    wall_deadline = time.monotonic() + 60
    while not (found := [pid for pid in processes_mentioning(str(out))
                         if b"nodes.sim_bridge" in Path(f"/proc/{pid}/cmdline").read_bytes()]):
        assert run.poll() is None and time.monotonic() < wall_deadline, run.communicate()
        time.sleep(0.002)
    os.kill(found[0], signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        stdout, stderr = run.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(found[0], signal.SIGCONT)
    assert time.monotonic() - stopped_at < 15, stderr  # 3 s, the recorder's record, 5 s for the frozen bridge
    result = json.loads(stdout)
    assert result["refusal"] == {"code": "participant_timeout", "step": -1,
                                 "detail": "sim_bridge service /simforge/step did not appear within 3 s"}, result
    manifest = json.loads((Path(result["run_dir"]) / "manifest.json").read_text())
    assert manifest["refusal"] == result["refusal"] and manifest["steps"] == 0
    check = simforge("verify", result["run_dir"], cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert processes_mentioning(str(out)) == []


def test_a_recorder_stopped_by_a_signal_mid_run_keeps_the_refusal_the_run_exits_with(tmp_path):
    """A recorder that took a SIGTERM mid-run kept its run incomplete_run (exit 17 for info,
    diff and rerun, which read the folder) while `simforge run` exited 16, participant_lost,
    the clock master's refusal once it missed the recorder: the manifest says that now."""
    import os
    import signal
    import subprocess
    import sys

    out = tmp_path / "runs"
    exe = Path(sys.executable).with_name("simforge")
    run = subprocess.Popen([str(exe), "run", "right_turn", "--out", str(out), "--json", "--steps", "3000"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    wall_deadline = time.monotonic() + 120
    while not (steps := list(out.glob("*/steps.jsonl"))) or steps[0].read_text().count("\n") < 30:
        assert run.poll() is None and time.monotonic() < wall_deadline, run.communicate()
        time.sleep(0.01)
    (recorder,) = [pid for pid in processes_mentioning(str(out))
                   if b"nodes.recorder" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    os.kill(recorder, signal.SIGTERM)
    stdout, stderr = run.communicate(timeout=120)
    result = json.loads(stdout)
    assert run.returncode == 16 and result["refusal"]["code"] == "participant_lost", (result, stderr)
    assert result["refusal"]["detail"].startswith(f"recorder (pid {recorder}) is gone"), result
    manifest = json.loads((Path(result["run_dir"]) / "manifest.json").read_text())
    assert manifest["refusal"] == result["refusal"] and manifest["steps"] == result["steps"] >= 30
    check = simforge("verify", result["run_dir"], cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    info = simforge("info", result["run_dir"], cwd=tmp_path)
    assert "refused: participant_lost" in info.stdout, info.stdout


@pytest.mark.parametrize("layout", ["processes", "single"])
def test_a_clock_master_stopped_for_a_while_blames_no_participant(tmp_path, layout):
    """The clock master frozen (SIGSTOP: a debugger, Ctrl-Z, a paused VM) past
    participant_timeout_ms while a participant's answer was on its way refused that
    participant, "did not answer within 3 s", though it had answered at once: time this
    process did not run is not the participant's (core.freeze). In one process the freeze
    falls in a participant's callback. The run goes on and counts, with the chain of a run
    nobody stopped."""
    import os
    import signal
    import subprocess
    import sys

    sets = ["--set", "clock_master.participant_timeout_ms=3000", "--steps", "600", "--layout", layout]
    plain = lockstep(tmp_path / "plain", steps=600, layout=layout,
                     sets={"clock_master": {"participant_timeout_ms": 3000}})
    out = tmp_path / "runs"
    exe = Path(sys.executable).with_name("simforge")
    run = subprocess.Popen([str(exe), "run", "right_turn", "--out", str(out), "--json", *sets],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    wall_deadline = time.monotonic() + 120
    while not (steps := list(out.glob("*/steps.jsonl"))) or steps[0].read_text().count("\n") < 30:
        assert run.poll() is None and time.monotonic() < wall_deadline, run.communicate()
        time.sleep(0.01)
    if layout == "single":
        frozen = run.pid
    else:
        (frozen,) = [pid for pid in processes_mentioning(str(out))
                     if b"nodes.clock_master" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    os.kill(frozen, signal.SIGSTOP)
    time.sleep(5.0)
    os.kill(frozen, signal.SIGCONT)
    stdout, stderr = run.communicate(timeout=120)
    result = json.loads(stdout)
    assert (run.returncode, result["status"], result["steps"]) == (0, "counted", 600), (result, stderr)
    assert result["chain_digest"] == plain.chain_digest


def test_in_one_process_a_run_refused_before_finish_was_offered_keeps_its_refusal(tmp_path, monkeypatch):
    """The recorder offers Finish only once every participant's parameters have come (here:
    never); a run refused before then (a Ctrl-C at start-up, 2 runs in 30) was kept
    incomplete_run, "the recorder stopped before the clock master finished the run", while
    its exit status said the run's refusal: in one process the recorder was closed after the
    result was taken, knowing nothing of it."""
    from simforge_ros.nodes.recorder import Recorder

    monkeypatch.setattr(Recorder, "_offer_finish", lambda self: None)
    result = lockstep(tmp_path, steps=5, layout="single", sets={"clock_master": {"startup_timeout_ms": 2000}})
    assert result.refusal == {"code": "participant_timeout", "step": -1,
                              "detail": "recorder service /simforge/finish did not appear within 2 s"}
    assert manifest_of(result)["refusal"] == result.refusal
    assert simforge("verify", result.run_dir, cwd=tmp_path).returncode == 0


def test_a_killed_recorder_stops_the_run_as_participant_lost_and_leaves_no_process(tmp_path):
    """The recorder is never called while stepping: the clock master knows its process
    from its latched parameters and refuses while stepping, not after the last step."""
    # It dies on taking step 300's timing record. The records of a step come on several
    # topics, which its executor may take in batches of one topic: a recorder killed at
    # step 5 was once seen to have taken step 5's timing before any step was whole. Step
    # 300's records are published only once it has reported more than 300 - 128
    # (recorder_backlog_steps) steps chained, so by then some are.
    result = lockstep(tmp_path, steps=2000, layout="processes", faults=("kill=recorder@300",))
    assert result.status == "refused" and result.refusal["code"] == "participant_lost"
    assert "recorder (pid " in result.refusal["detail"] and "unrecorded" in result.refusal["detail"]
    assert 300 <= result.refusal["step"] < 2000
    assert processes_mentioning(result.run_dir) == []
    # what it chained before it died is kept (flushed at the first record, then every 0.2 s)
    kept = steps_of(result)
    assert 1 <= len(kept) <= 300 and [s["step"] for s in kept] == list(range(len(kept)))
    # found some steps on, it names where its record stops: its last report of steps chained
    # ("the steps from here on would go unrecorded" named none, and those before were too)
    import re

    reported = re.fullmatch(r"recorder \(pid \d+\) is gone, its last report (\d+) steps chained: the steps it had "
                            r"not chained go unrecorded", result.refusal["detail"])
    # (at most the 300 it chained before step 300; steps.jsonl, flushed every 0.2 s, may keep fewer)
    assert reported is not None and 1 <= int(reported[1]) <= 300, result.refusal
    # the run's result says what was chained: its steps, chain and frames (frames were
    # recorded; the result said null, "no frame was recorded")
    assert (result.steps, result.chain_digest, result.frames_digest) == (
        len(kept), kept[-1]["digest"], kept[-1]["frames_digest"])
    assert result.frames_digest is not None
    # and the tools say what happened to the manifest, not only that it is missing
    out = simforge("verify", result.run_dir, cwd=tmp_path)
    assert out.returncode == 2
    assert (f"manifest.json: missing: the recorder did not finish this run (killed?); steps.jsonl keeps "
            f"the {len(kept)} steps it chained") in out.stderr
    # its bag, checkpointed with steps.jsonl, makes a run every tool can read: the same records
    salvaged = simforge("salvage", result.run_dir, "--json", cwd=tmp_path)
    assert salvaged.returncode == 0, salvaged.stderr
    report = json.loads(salvaged.stdout)
    assert report["steps"] >= 1 and report["agree"] == min(report["steps"], len(kept))
    check = simforge("verify", report["out"], cwd=tmp_path)
    assert check.returncode == 0 and f"verified: {report['steps']} steps" in check.stdout, check.stderr
    manifest = json.loads((Path(report["out"]) / "manifest.json").read_text())
    assert (manifest["status"], manifest["refusal"]["code"]) == ("refused", "participant_lost")
    assert manifest["refusal"]["step"] == result.refusal["step"]
    again = [json.loads(line) for line in (Path(report["out"]) / "steps.jsonl").read_text().splitlines()]
    same = min(len(again), len(kept))
    assert [s["digest"] for s in again[:same]] == [s["digest"] for s in kept[:same]]
    # a kept record the bag does not chain to is never papered over
    tampered = tmp_path / "tampered"
    shutil.copytree(result.run_dir, tampered)
    lines = (tampered / "steps.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["digest"] = "0" * 64
    (tampered / "steps.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    refused = simforge("salvage", str(tampered), cwd=tmp_path)
    assert refused.returncode == 1 and "step 0: the bag's records chain to" in refused.stderr
    assert not (tmp_path / "tampered-salvaged").exists()
    # a line the kill cut off in the middle is not a record, and no reason to give up
    cut = tmp_path / "cut"
    shutil.copytree(result.run_dir, cut)
    with (cut / "steps.jsonl").open("a") as handle:
        handle.write('{"step": 999, "dig')
    assert simforge("salvage", str(cut), cwd=tmp_path).returncode == 0


def test_wall_clock_jitter_changes_nothing_in_the_digest(tmp_path):
    calm = lockstep(tmp_path, steps=25, layout="single")
    jittery = lockstep(tmp_path, steps=25, layout="single", faults=("jitter=15",))
    assert jittery.status == "counted"
    assert jittery.chain_digest == calm.chain_digest
    calm_wall = [s["wall"]["wall_step_ns"] for s in steps_of(calm)]
    jitter_wall = [s["wall"]["wall_step_ns"] for s in steps_of(jittery)]
    # it did take longer: steps after 0 (a reset, whose time a loaded machine varies by more)
    assert statistics.median(jitter_wall[1:]) > statistics.median(calm_wall[1:])


def test_latency_runs_repeat_and_differ_from_no_latency(tmp_path):
    none = lockstep(tmp_path, steps=60, layout="single")
    first = lockstep(tmp_path, steps=60, layout="single", latency_us=200_000)
    second = lockstep(tmp_path, steps=60, layout="single", latency_us=200_000)
    assert first.chain_digest == second.chain_digest != none.chain_digest
    applied = {s["step"]: s["applied"] for s in steps_of(first)}
    actions = {s["step"]: s["action"] for s in steps_of(first)}
    for k in range(2, 60):
        assert applied[k]["decided_step"] == k - 2
        assert applied[k]["steer_rad"] == actions[k - 2]["steer_rad"]
    assert applied[0]["steer_rad"] == 0.0 and applied[1]["accel_mps2"] == 0.0


def test_latency_that_is_not_a_whole_number_of_steps_is_refused(tmp_path):
    result = lockstep(tmp_path, steps=10, layout="single", latency_us=150_000)
    assert _refusal(result) == ("rate_not_multiple", -1)


@pytest.mark.parametrize("scenario", ["right_turn", "unprotected_left", "red_signal", "handover_parked"])
def test_every_scenario_completes_with_the_route_follower_without_a_real_contact(tmp_path, scenario):
    result = lockstep(tmp_path, scenario, layout="single")
    assert result.status == "counted", result.refusal
    manifest = manifest_of(result)
    # the whole scenario: its duration in decision steps (pinned: ">= 150" let an off-by-one pass)
    from simforge_ros.engine import load_scenario

    assert manifest["steps"] == manifest["expected_steps"] == load_scenario(scenario).duration_us // 100_000 >= 150
    contacts = manifest["contacts"]["events"]
    assert [c for c in contacts if not c["harness_fault"]] == []


def test_cli_run_json_and_exit_codes(tmp_path):
    ok = simforge("run", "right_turn", "--steps", "8", "--layout", "single", "--repeat", "2", "--json",
                  "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    rows = [json.loads(line) for line in ok.stdout.splitlines()]
    assert len(rows) == 2 and rows[0]["chain_digest"] == rows[1]["chain_digest"]
    keys = {"run_id", "scenario", "steps", "chain_digest", "frames_digest", "status", "refusal", "run_dir"}
    assert keys <= set(rows[0])
    # the step chain holds no pixel: the frames chain is shown beside it, as the manifest has it
    manifest = json.loads((Path(rows[0]["run_dir"]) / "manifest.json").read_text())
    assert rows[0]["frames_digest"] == rows[1]["frames_digest"] == manifest["frames_digest"] is not None
    text = simforge("run", "right_turn", "--steps", "8", "--layout", "single", "--out", str(tmp_path / "runs"),
                    cwd=tmp_path)
    assert f"chain={rows[0]['chain_digest'][:16]}  frames={rows[0]['frames_digest'][:16]}  counted" in text.stdout
    refused = simforge("run", "right_turn", "--steps", "8", "--layout", "single", "--inject", "drop_frame@3",
                       "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert refused.returncode == 12
    assert "refused:missing_frame at step 3" in refused.stdout
    # `simforge info` of a live run: who answered, the rig, the layout, the bag's topics
    said = simforge("info", rows[0]["run_dir"], cwd=tmp_path)
    assert said.returncode == 0, said.stderr
    lines = said.stdout.splitlines()
    assert lines[1] == "status     counted, 8 steps (--steps 8)"
    assert re.fullmatch(r"driver     route \(node /driver, pid \d+ on .+\)", lines[3]), lines[3]
    assert lines[4].startswith("bridge     embedded: cameras chase, front, every step, 320x180 (node /sim_bridge, ")
    assert "layout     single" in lines and "settings   the defaults" in lines
    assert any(line.split() == ["/clock", "rosgraph_msgs/msg/Clock", "8"] for line in lines)
    # two repeats of a lockstep run: the noise floor is zero
    floor = simforge("spread", rows[0]["run_dir"], rows[1]["run_dir"], cwd=tmp_path)
    assert floor.returncode == 0, floor.stdout + floor.stderr
    assert floor.stdout.splitlines()[1].endswith("the noise floor is 0")
    kept = tmp_path / "runs" / refused.stdout.split()[0]
    said = simforge("info", str(kept), cwd=tmp_path)
    assert said.stdout.splitlines()[1] == "status     refused: missing_frame at step 3; 3 steps recorded (--steps 8)"
    # a fault the run never reached is named, not silently counted as injected
    unfired = simforge("run", "right_turn", "--steps", "3", "--layout", "single", "--inject", "drop_frame@7",
                       "--inject", "lose_answer=recorder@1", "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert unfired.returncode == 0
    assert "simforge: note: drop_frame@7 did not fire: the run ended after 3 steps" in unfired.stderr
    assert ("simforge: note: lose_answer=recorder@1 did not fire: the recorder's K is the step count its Finish "
            "names, and this run's was 3") in unfired.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "nowhere"], "SCENARIO: scenario: expected one of"),
        (["run", "right_turn", "--set", "clock_master.decison_us=5"], "clock_master.decison_us"),
        (["run", "right_turn", "--set", "clock_master.decision_us=fast"], "expected a value of type int"),
        (["run", "right_turn", "--inject", "drop_frame@x"], "drop_frame@K"),
        (["run", "right_turn", "--latency-ms", "-1"], "--latency-ms"),
        (["run", "right_turn", "--latency-ms", "nan"], "--latency-ms: latency: expected a finite number"),
        (["run", "right_turn", "--seed", "-1"], "--seed: seed: expected an integer in [0, "),
        (["run", "right_turn", "--steps", "-1"], "--steps: steps: expected an integer in [0, 9223372036854775807]"),
        (["run", "right_turn", "--set", "sim_bridge.width=100000"], "sim_bridge.width: expected an integer in [2,"),
        (["run", "right_turn", "--layout", "single", "--inject", "kill=driver@3"], "only with --layout processes"),
        (["run", "right_turn", "--repeat", "zero"], "invalid int value"),
        (["run", "right_turn", "--set", "sim_bridge.tick_us=-5"], "sim_bridge.tick_us: expected an integer > 0"),
        (["run", "right_turn", "--set", "clock_master.decision_us=0"], "decision_us: expected an integer > 0"),
        (["run", "right_turn", "--set", "clock_master.pose_tolerance_m=-1"], "tolerance_m: expected a number >= 0"),
        (["run", "right_turn", "--out", "/proc/runs"], "--out: out: expected a directory simforge can create"),
        (["run", "right_turn", "--real-time-factor", "-1"],
         "--real-time-factor: real_time_factor: expected a finite number >= 0"),
        (["run", "right_turn", "--real-time-factor", "nan"], "--real-time-factor: real_time_factor: expected a finite"),
        (["run", "right_turn", "--real-time-factor", "fast"], "argument --real-time-factor: invalid float value"),
        (["run", "right_turn", "--set", "clock_master.real_time_factor=-2"],
         "clock_master.real_time_factor: expected a number >= 0"),
        (["run", "right_turn", "--hold-at-step", "-1"], "--hold-at-step: hold_at_step: expected a step in [0, "),
        (["run", "right_turn", "--steps", "5", "--hold-at-step", "5"],
         "clock_master.hold_at_step: expected a step of the run (0 to 4; -1: never), got 5"),
        (["run", "right_turn", "--set", "clock_master.hold_at_step=-2"],
         "clock_master.hold_at_step: expected an integer"),
        # both units of a period: the seconds were taken, the microseconds dropped unsaid
        (["run", "right_turn", "--steps", "2", "--set", "clock_master.decision_us=200000", "--set",
          "clock_master.decision_s=0.1"], "--set: clock_master.decision_us and clock_master.decision_s: expected one "
                                          "of the two (a period in microseconds or in seconds, never both)"),
        (["run", "right_turn", "--steps", "2", "--set", "sim_bridge.tick_us=20000", "--set", "sim_bridge.tick_s=0.02"],
         "--set: sim_bridge.tick_us and sim_bridge.tick_s: expected one of the two"),
        (["run", "right_turn", "--set", "sim_bridge.cameras=front"],
         "--set: sim_bridge.cameras: expected a list of camera names, like [front,chase], got 'front'"),
        (["run", "right_turn", "--set", "clock_master.real_time_factor=nan"],
         "--set: clock_master.real_time_factor: expected a finite number, got nan"),
        (["run", "/nonexistent.yaml"], "SCENARIO: scenario: expected an existing scenario file (no such file) or "
                                       "one of handover_parked, red_signal, right_turn"),
        (["run", "right_turn", "--steps", "1", "--set", "sim_bridge.cameras=[]", "--out", ""],
         "--out: out: expected a directory simforge can create and write to (an empty name names none; "
         ". is the current directory), got ''"),
    ],
)
def test_bad_arguments_get_a_clear_usage_error(tmp_path, args, needle):
    out = simforge(*args, *([] if "--out" in args else ["--out", str(tmp_path / "runs")]), cwd=tmp_path)
    assert out.returncode == 2
    assert needle in out.stderr
    assert "Traceback" not in out.stderr + out.stdout


@pytest.mark.parametrize("layout", ["single", "processes"])
@pytest.mark.parametrize(("setting", "needle"), [
    # found only by the node, at its start
    ("sim_bridge.backend=carla", "sim_bridge: backend: expected a backend whose simulator API is installed"),
    # node checks once, now named with the types before anything starts
    ("sim_bridge.cameras=[bogus]", "--set: sim_bridge.cameras: expected a list of distinct cameras"),
    ("recorder.storage=zip", "--set: recorder.storage: expected one of mcap, sqlite3"),
])
def test_a_configuration_a_node_refuses_at_start_leaves_no_run_directory(tmp_path, layout, setting, needle):
    """The error is the whole story: a run directory left behind said another cause in its
    manifest (incomplete_run), or had none (so every tool took it for a run whose recorder
    was killed)."""
    out = simforge("run", "right_turn", "--steps", "2", "--layout", layout, "--set", setting,
                   "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert needle in out.stderr and "Traceback" not in out.stderr + out.stdout
    assert not list((tmp_path / "runs").glob("*"))  # no run directory (nor --out, when refused first)


@pytest.mark.parametrize("layout", ["single", "processes"])
def test_a_participant_that_fails_answers_participant_error_instead_of_hanging(tmp_path, layout):
    """A user's TorchScript planner that loads, passes the start-up call on black frames,
    then answers the wrong shape on a real scene: the driver refuses its first plan and
    says so in its answer."""
    torch = pytest.importorskip("torch")

    class WrongShape(torch.nn.Module):
        def forward(self, images: torch.Tensor, speed: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
            if bool(images.any()):
                return torch.zeros(noise.shape[0], 3)
            return torch.zeros(noise.shape[0], 10, 2)

    weights = tmp_path / "wrong_shape.pt"
    with warnings.catch_warnings():  # torch.jit is deprecated in torch 2.13; it still loads
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(WrongShape()), str(weights))
    result = lockstep(tmp_path, steps=5, layout=layout, driver="torch",
                      sets={"driver": {"weights": str(weights)}})
    assert _refusal(result) == ("participant_error", 0)
    assert "the torch planner's model answered shape (1, 3), want (1, 10, 2) finite" in result.refusal["detail"]
    assert result.exit_code == 18


_NO_BACKEND = "sim_bridge.backend: expected one of embedded, carla, got 'carla9'"


@pytest.mark.parametrize(
    ("layout", "sets", "needle"),
    [
        ("processes", {"sim_bridge": {"backend": "carla9"}}, _NO_BACKEND),
        ("single", {"sim_bridge": {"backend": "carla9"}}, _NO_BACKEND),
        ("processes", {"sim_bridge": {"cameras": ["front", "sky"]}},
         "sim_bridge.cameras: expected a list of distinct cameras from front, left, rear, right, chase, "
         "got ['front', 'sky']"),
        ("single", {"sim_bridge": {"cameras": ["front", "front"]}}, "got ['front', 'front']"),
        ("processes", {"clock_master": {"steps": -3}},
         "steps: expected an integer in [0, 9223372036854775807], got -3"),
        ("processes", {"recorder": {"storage": "parquet"}},
         "recorder.storage: expected one of mcap, sqlite3, got 'parquet'"),
        # found only by the node: no CARLA Python API here
        ("processes", {"sim_bridge": {"backend": "carla"}},
         "sim_bridge: backend: expected a backend whose simulator API is installed"),
        # a fault on a camera the bridge does not render never fired, and the run was counted
        ("single", {"sim_bridge": {"faults": ["flip_pixel=left@1"]}},
         "sim_bridge: faults: expected flip_pixel=CAMERA@K with CAMERA one of the cameras it renders (chase, front)"),
        # with no camera, drop_frame failed the bridge at its step (IndexError: participant_error)
        ("processes", {"sim_bridge": {"cameras": [], "faults": ["drop_frame@2"]}},
         "sim_bridge: faults: expected a camera fault with a camera to act on (cameras is []), got ['drop_frame@2']"),
    ],
)
def test_a_node_that_cannot_start_is_a_config_error_naming_its_field_at_once(tmp_path, layout, sets, needle):
    """In either layout a configuration problem comes back as the same ConfigError, before
    the nodes start or as soon as the node that found it has exited: not a
    participant_timeout 30 s later."""
    started = time.monotonic()
    with pytest.raises(ConfigError) as err:
        lockstep(tmp_path, steps=3, layout=layout, sets=sets)
    assert needle in str(err.value)
    assert time.monotonic() - started < 20
    assert not processes_mentioning(str(tmp_path))


def test_a_stalled_recorder_pauses_the_loop_and_is_refused_not_outrun(tmp_path):
    """The loop may run only recorder_backlog_steps ahead of what the recorder has chained;
    a recorder that chains nothing meanwhile is a participant that does not answer. Before,
    the loop ran on until the transport's histories were full and a publish failed."""
    wall_start = time.monotonic()
    result = lockstep(tmp_path, steps=400, layout="processes", faults=("stall=recorder@5",),
                      sets={"clock_master": {"recorder_backlog_steps": 20, "participant_timeout_ms": 1500}})
    assert result.status == "refused" and result.refusal["code"] == "participant_timeout"
    assert "recorder chained no step within 1.5 s" in result.refusal["detail"]
    assert 21 <= result.refusal["step"] <= 26  # the step after the 20 past what it had chained (0 to 5 steps)
    assert time.monotonic() - wall_start < 60
    assert processes_mentioning(result.run_dir) == []


def test_a_recorder_stalled_before_its_finish_is_refused_saying_how_far_it_had_chained(tmp_path):
    """A run shorter than the recorder's lead reaches Finish before a stalled recorder is
    missed: refused then "recorder did not answer within 1.5 s" at the run's last step,
    naming no step it had stalled at. Its last report of steps chained says now."""
    result = lockstep(tmp_path, steps=15, layout="processes", faults=("stall=recorder@5",),
                      sets={"clock_master": {"participant_timeout_ms": 1500}, "recorder": {"finish_timeout_ms": 500}})
    assert result.status == "refused" and result.refusal["code"] == "participant_timeout", result.refusal
    import re

    said = re.fullmatch(r"recorder did not answer within [\d.]+ s \(its last report: (\d+) steps chained\)",
                        result.refusal["detail"])
    assert said is not None and int(said[1]) <= 5, result.refusal  # stalled taking step 5's records


def test_in_one_process_the_recorder_never_falls_behind_and_the_run_is_the_same(tmp_path):
    """In single the recorder is served by the loop's own executor, in the order things
    were sent: a step's records are taken while the next request is answered, so even a
    lead of one step never makes the loop wait (on a thread of its own the recorder fell
    behind: with a lead of 2, ~150 waits in 600 steps). Same run, same digest."""
    no_cameras = {"sim_bridge": {"cameras": []}}
    free = lockstep(tmp_path, steps=300, layout="single", sets=no_cameras)
    held = lockstep(tmp_path, steps=300, layout="single",
                    sets={**no_cameras, "clock_master": {"recorder_backlog_steps": 1}})
    assert free.status == held.status == "counted"
    assert held.chain_digest == free.chain_digest
    assert held.wall["recorder_pauses"] == 0

_SMALL_HISTORIES = """<?xml version="1.0" encoding="UTF-8" ?>
<dds xmlns="http://www.eprosima.com"><profiles>
  <data_writer profile_name="small_writer" is_default_profile="true"><topic><resourceLimitsQos>
    <max_samples>100</max_samples><max_instances>1</max_instances>
    <max_samples_per_instance>100</max_samples_per_instance><allocated_samples>100</allocated_samples>
  </resourceLimitsQos></topic></data_writer>
  <data_reader profile_name="small_reader" is_default_profile="true"><topic><resourceLimitsQos>
    <max_samples>100</max_samples><max_instances>1</max_instances>
    <max_samples_per_instance>100</max_samples_per_instance><allocated_samples>100</allocated_samples>
  </resourceLimitsQos></topic></data_reader>
</profiles></dds>
"""


def test_a_publish_the_transport_refuses_is_a_named_refusal_not_a_traceback(tmp_path, monkeypatch):
    """A reliable reader that takes nothing fills the writers' histories until publishing
    fails. The clock master's own bound keeps its recorder from getting there (lifted
    here), but any reader can; Fast DDS histories of 100 samples (an XML profile) get there
    within a few hundred steps instead of ~10 000."""
    profile = tmp_path / "small_histories.xml"
    profile.write_text(_SMALL_HISTORIES)
    monkeypatch.setenv("FASTDDS_DEFAULT_PROFILES_FILE", str(profile))
    result = lockstep(tmp_path, steps=1000, layout="processes", faults=("stall=recorder@5",),
                      sets={"sim_bridge": {"cameras": []},
                            "clock_master": {"recorder_backlog_steps": 100_000, "participant_timeout_ms": 3000}})
    assert result.status == "refused" and result.refusal["code"] == "participant_error"
    assert "publishing on /simforge/" in result.refusal["detail"]
    assert "a reliable reader is not taking messages" in result.refusal["detail"]
    assert 100 <= result.refusal["step"] < 1000
    assert result.exit_code == 18
    assert processes_mentioning(result.run_dir) == []


def test_a_latency_of_a_fraction_of_a_microsecond_is_refused_by_the_contract(tmp_path):
    """--latency-ms 100.0001 was a usage error (exit 2) while the same latency given as
    clock_master.latency_s was rate_not_multiple (exit 11), as the step contract says of
    every seconds input that is not exactly convertible."""
    said = simforge("run", "right_turn", "--steps", "3", "--layout", "single", "--latency-ms", "100.0001",
                    "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert said.returncode == 11, said.stdout + said.stderr
    assert said.stderr == ("simforge: refused:rate_not_multiple before step 0: --latency-ms 100.0001: not a whole "
                           "number of microseconds\n")
    assert not (tmp_path / "runs").exists()  # refused before any run


def test_a_repeat_refused_alike_every_time_exits_with_that_refusals_status(tmp_path):
    """Two missing_frame runs of a --repeat exited 1, where one run exits 12 (and an aborted
    run among repeats kept its 19)."""
    said = simforge("run", "right_turn", "--steps", "6", "--layout", "single", "--repeat", "2", "--inject",
                    "drop_frame@2", "--json", "--out", str(tmp_path / "runs"), cwd=tmp_path)
    runs = [json.loads(line) for line in said.stdout.splitlines()]
    assert [r["refusal"]["code"] for r in runs] == ["missing_frame"] * 2, said.stdout + said.stderr
    assert said.returncode == 12


def test_a_rig_listed_in_another_order_makes_an_identical_run(tmp_path):
    """The bridge's rig is a set: [front, chase] and [chase, front] gave the same chain
    once BridgeConfig sorted it, yet diff still said "set up differently" (the node's
    /tf_static and its published parameters kept the order given)."""
    from simforge_ros.record.diff_runs import diff_runs

    runs = [lockstep(tmp_path, steps=4, layout="single", sets={"sim_bridge": {"cameras": cameras}})
            for cameras in (["front", "chase"], ["chase", "front"])]
    assert runs[0].chain_digest == runs[1].chain_digest
    assert manifest_of(runs[0])["nodes"]["sim_bridge"]["params"]["cameras"] == ["chase", "front"]
    assert diff_runs(Path(runs[0].run_dir), Path(runs[1].run_dir)).identical
