"""`--driver external`: a driver node of the user's own (examples/external_driver.py, which
uses nothing of simforge_ros but its interfaces) steps in lockstep in place of ours."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest
from runs import lockstep, manifest_of, simforge, steps_of, wait_for_nodes

from simforge_ros.isolation import lease_domain
from simforge_ros.process_tuning import LAUNCHER_ENV

pytestmark = pytest.mark.ros

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "external_driver.py"
RESTARTED = Path(__file__).with_name("restarted_driver.py")  # the example, answering as another process from step 5
LATE_PARAMS = Path(__file__).with_name("late_params_driver.py")  # publishing its parameters after the last step
# the example's controller, to check the recorded actions against
TARGET_SPEED_MPS, SPEED_GAIN_PER_S, MAX_ACCEL_MPS2 = 4.0, 0.8, 2.0


@contextmanager
def external_driver(env: Mapping[str, str], log: Path, script: Path = EXAMPLE) -> Iterator[subprocess.Popen[bytes]]:
    """The example driver as a process of its own, stopped afterwards."""
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, str(script)], env=dict(env), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _discovery_of_nodes(launcher_pid: int, seen: dict[int, str], stop: threading.Event) -> None:
    """Note the ROS_AUTOMATIC_DISCOVERY_RANGE each node process of ``launcher_pid``'s run
    was started with, until ``stop``."""
    tag = f"{LAUNCHER_ENV}={launcher_pid}".encode()
    while not stop.is_set():
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in seen:
                continue
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:  # gone, or not ours
                continue
            if tag in environ:
                found = [v for v in environ if v.startswith(b"ROS_AUTOMATIC_DISCOVERY_RANGE=")]
                seen[int(entry.name)] = found[0].split(b"=", 1)[1].decode() if found else ""
        stop.wait(0.02)


def test_a_run_asked_for_the_subnet_starts_its_nodes_on_it_and_steps_a_driver_there(tmp_path, monkeypatch, capsys):
    """ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET, with a ROS_DOMAIN_ID of the user's own, is how a
    driver on another machine (an ECU) joins a run: every node of the run is started with it,
    and a driver found through it steps the run in lockstep (here on this machine, the one
    the subnet has)."""
    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "SUBNET")
        seen: dict[int, str] = {}
        stop = threading.Event()
        watch = threading.Thread(target=_discovery_of_nodes, args=(os.getpid(), seen, stop), daemon=True)
        watch.start()
        try:
            with external_driver({**lease.env, "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"}, tmp_path / "driver.log"):
                result = lockstep(tmp_path, steps=20, layout="processes", driver="external")
        finally:
            stop.set()
            watch.join()
    assert result.status == "counted", (result.refusal, (tmp_path / "driver.log").read_text())
    assert len(seen) == 3 and set(seen.values()) == {"SUBNET"}, seen  # clock master, bridge, recorder
    assert f"on ROS_DOMAIN_ID={lease.domain_id}, this subnet\n" in capsys.readouterr().err


def test_an_external_driver_steps_in_lockstep_and_repeats_bit_for_bit(tmp_path, monkeypatch):
    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))  # the run joins the driver's domain
        log = tmp_path / "driver.log"
        with external_driver(lease.env, log) as driver:  # one driver serves run after run
            results = [lockstep(tmp_path, steps=40, layout=layout, driver="external")
                       for layout in ("processes", "single")]
            assert driver.poll() is None, "the driver should still be running"
    for result in results:
        assert result.status == "counted", (result.refusal, log.read_text())
    assert results[0].steps == 40
    assert results[0].chain_digest == results[1].chain_digest
    for step in steps_of(results[0]):  # every action is the example's decision on that step's state
        speed = step["state"]["speed_mps"]
        accel = max(-MAX_ACCEL_MPS2, min(MAX_ACCEL_MPS2, SPEED_GAIN_PER_S * (TARGET_SPEED_MPS - speed)))
        assert step["action"]["steer_rad"] == 0.0
        assert step["action"]["accel_mps2"] == accel
    for result in results:
        manifest = manifest_of(result)
        assert "driver" not in manifest["nodes"]  # no driver of ours ran
        # but the manifest names the one that answered, and the bridge of ours
        assert manifest["participants"]["driver"] == {
            "node": "/external_driver", "pid": driver.pid, "host": socket.gethostname(), "external": True,
            "pid_watched": True}  # a process of this host in the run's domain
        assert manifest["participants"]["sim_bridge"]["node"] == "/sim_bridge"
        assert manifest["participants"]["sim_bridge"]["external"] is False
    route = lockstep(tmp_path, steps=40, layout="single")
    assert route.status == "counted" and route.chain_digest != results[0].chain_digest


def test_the_shipped_config_runs_an_external_driver(tmp_path, monkeypatch):
    """config/simforge.yaml spells out recorder.await_driver: true; given with --driver
    external it held Finish for the parameters an external driver never publishes, and the
    run was refused participant_timeout after 30 s. --driver decides it, as in launch."""
    config = Path(__file__).resolve().parents[2] / "config" / "simforge.yaml"
    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        with external_driver(lease.env, tmp_path / "driver.log"):
            done = simforge("run", "right_turn", "--params-file", str(config), "--driver", "external",
                            "--steps", "5", "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr, (tmp_path / "driver.log").read_text())
    assert "steps=5" in done.stdout and "counted" in done.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert "await_driver: false" in (run_dir / "params.yaml").read_text()


@pytest.mark.parametrize(("faults", "state", "code"), [
    ((), "counted", 0), (("kill=sim_bridge@3",), "refused", 1), (("drop_frame@0",), "refused", 1)])
def test_the_example_with_once_exits_when_the_run_it_served_ends(tmp_path, monkeypatch, faults, state, code):
    """Without --once it serves run after run until stopped: a CI job driving an ECU in
    lockstep needs the driver to end with the run, and say how the run ended. A run refused
    before the driver's first answer (drop_frame@0) ends it too: it waited for ever."""
    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        driver = subprocess.Popen([sys.executable, str(EXAMPLE), "--once"], env=dict(lease.env), text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            result = lockstep(tmp_path, steps=12, layout="processes", driver="external", faults=faults)
            said, _ = driver.communicate(timeout=30)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
    assert result.status == state, (result.refusal, said)
    assert driver.returncode == code, said
    assert f"run {result.run_id}: {state}" in said


def test_the_example_with_once_ends_when_the_clock_master_left_without_its_final_status(tmp_path, monkeypatch):
    """The example stopped (SIGSTOP) until after the run it served had ended missed the final
    status, which left with the clock master (latched by a writer that is gone): continued,
    it waited for ever. It ends now once that writer has left, exit 1, saying so."""
    import signal

    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        driver = subprocess.Popen([sys.executable, str(EXAMPLE), "--once"], env=dict(lease.env), text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        stopped = threading.Event()

        def stop_it(step: int, _total: int) -> None:
            if step >= 3 and not stopped.is_set():
                stopped.set()
                driver.send_signal(signal.SIGSTOP)

        try:
            result = lockstep(tmp_path, steps=300, layout="processes", driver="external", on_step=stop_it,
                              sets={"clock_master": {"participant_timeout_ms": 1000}})
            driver.send_signal(signal.SIGCONT)
            said, _ = driver.communicate(timeout=30)
        finally:
            if driver.poll() is None:
                driver.send_signal(signal.SIGCONT)
                driver.kill()
                driver.wait()
    assert stopped.is_set() and result.status == "refused", (result.refusal, said)
    assert driver.returncode == 1, said
    # the final status, if it was taken before the writer's leaving was seen, says so itself
    assert ("external_driver: the run's clock master left without a final status" in said
            or f"run {result.run_id}: refused" in said), said


def test_an_answer_from_another_process_mid_run_is_refused_by_name(tmp_path, monkeypatch):
    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        log = tmp_path / "driver.log"
        with external_driver(lease.env, log, RESTARTED) as driver:
            result = lockstep(tmp_path, steps=20, layout="single", driver="external")
    assert result.refusal is not None, log.read_text()
    assert result.refusal["code"] == "participant_lost" and result.refusal["step"] == 5
    assert f"answered step 5 from pid {driver.pid + 1}" in result.refusal["detail"]
    assert f"earlier steps from pid {driver.pid}" in result.refusal["detail"]
    manifest = manifest_of(result)
    assert manifest["status"] == "refused" and manifest["steps"] == 5  # what came before is kept
    assert manifest["participants"]["driver"]["pid"] == driver.pid  # the run's first answerer


def test_a_drivers_parameters_that_come_after_the_last_step_are_waited_for(tmp_path, monkeypatch):
    """Only the clock master's and the bridge's parameters are awaited before step 0. A
    short run could end before the driver's reached the recorder (about 1 run in 25 of 40
    steps): its manifest then had no driver and called the run's driver external."""
    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        log = tmp_path / "driver.log"
        with external_driver(lease.env, log, LATE_PARAMS) as driver:
            result = lockstep(tmp_path, steps=20, layout="processes", driver="external")
    assert result.status == "counted", (result.refusal, log.read_text())
    manifest = manifest_of(result)
    assert manifest["nodes"]["driver"]["process"] == {"pid": driver.pid, "host": socket.gethostname()}
    assert manifest["participants"]["driver"]["external"] is False
    assert manifest["digests"]["scenario_file"] is not None  # the bridge's backend, published at its reset


def test_a_recorder_told_to_await_the_drivers_parameters_does_not_start_the_run_without_them(tmp_path, monkeypatch):
    """recorder.await_driver (set whenever simforge run or the launch file starts the
    driver node) holds Finish, and so step 0, until the driver's parameters have come: an
    external driver publishes none, so a run told to await them never starts, and the
    recorder says why."""
    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        with external_driver(lease.env, tmp_path / "driver.log"):
            wait_for_nodes(lease.domain_id, "external_driver", 1)  # Finish is the one service missing
            result = lockstep(tmp_path, steps=5, layout="processes", driver="external",
                              sets={"recorder": {"await_driver": True}, "clock_master": {"startup_timeout_ms": 10000}})
    assert (result.refusal["code"], result.refusal["step"]) == ("participant_timeout", -1)
    assert "recorder service /simforge/finish did not appear within 10 s" in result.refusal["detail"]
    log = (Path(result.run_dir) / "logs" / "recorder.log").read_text()
    assert ("Finish is not offered until the parameters of driver have come on /simforge/node_params "
            "(recorder.await_driver is true: an external driver publishes none)") in log


def _slow_driver(tmp_path: Path) -> Path:
    """The example, 30 ms slower to answer: as a second server it never wins the race."""
    slow = tmp_path / "slow_driver.py"
    slow.write_text(EXAMPLE.read_text().replace(
        "    def _on_decide(self, request: Decide.Request, response: Decide.Response) -> Decide.Response:\n",
        "    def _on_decide(self, request: Decide.Request, response: Decide.Response) -> Decide.Response:\n"
        "        __import__('time').sleep(0.03)\n", 1))
    return slow


def _refusing_driver(tmp_path: Path, code: str, detail: str) -> Path:
    """The example, refusing step 5 with ``code`` and ``detail``."""
    script = tmp_path / "refusing_driver.py"
    script.write_text(EXAMPLE.read_text().replace(
        "        response.pid = os.getpid()\n",
        f"        if request.step == 5:\n"
        f"            response.ok, response.refusal_code, response.detail = False, {code!r}, {detail!r}\n"
        "        response.pid = os.getpid()\n", 1))
    return script


@pytest.mark.parametrize(("code", "refused"), [("aborted", "participant_error"), ("time_drift", "participant_error"),
                                                ("missing_frame", "missing_frame")])
def test_a_driver_refuses_with_a_drivers_code_only(tmp_path, monkeypatch, code, refused):
    """A driver answering `aborted` made its failure the user's interrupt (exit 19), which
    rerun runs only up to: the failing step was never sent to it again. Its detail is told
    on one line (a newline in it printed a fake result line)."""
    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        with external_driver(lease.env, tmp_path / "driver.log",
                             _refusing_driver(tmp_path, code, "no\nright_turn  steps=60  counted")):
            result = lockstep(tmp_path, steps=10, layout="single", driver="external")
    assert (result.refusal["code"], result.refusal["step"]) == (refused, 5), result.refusal
    told = "" if code == refused else f"refused with {code!r}, not a driver's refusal: "
    assert result.refusal["detail"] == f"driver: {told}no right_turn steps=60 counted"


@pytest.mark.parametrize("named", ["a dead pid", "pid 0"])
def test_a_driver_naming_a_pid_that_is_not_its_process_here_is_not_refused_as_gone(tmp_path, monkeypatch, named):
    """A driver in a container (host network, its own pid namespace) names the same host
    and a pid of its own namespace: a late answer (0.3 s at step 5) was refused as "driver
    (pid 12) is gone" while it answered. Its pid is looked at only once it is seen to be a
    process of the run's domain here; otherwise the graph says when it has left."""
    script = tmp_path / "namespaced_driver.py"
    script.write_text(EXAMPLE.read_text().replace(
        "        response.pid = os.getpid()\n",
        "        if request.step == 5:\n"
        "            __import__('time').sleep(0.3)\n"
        "        response.pid = int(os.environ['NAMED_PID'])\n", 1))
    if named == "pid 0":
        pid = 0
    else:
        gone = subprocess.Popen(["true"])
        gone.wait()
        pid = gone.pid  # no process here now
    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        with external_driver({**lease.env, "NAMED_PID": str(pid)}, tmp_path / "driver.log", script):
            result = lockstep(tmp_path, steps=10, layout="single", driver="external")
    assert result.status == "counted", result.refusal
    driver = manifest_of(result)["participants"]["driver"]
    assert driver["pid"] == (pid or None)  # as it named it (0: unsaid)
    # and said to be its word alone: the manifest and info presented it as fact
    assert driver["pid_watched"] is (False if pid else None)  # pid 0: none said, none to watch
    if pid:
        info = simforge("info", result.run_dir, cwd=tmp_path)
        assert f"pid {pid} on " in info.stdout and "as it said (not seen here: watched on the graph)" in info.stdout


def test_two_drivers_serving_decide_are_refused_naming_both(tmp_path, monkeypatch):
    """Either answers a request first: the run was refused only when their answers
    alternated, and counted when one always won (a slower second one). The clock master
    counts the servers at step 0 and every SERVER_CHECK_S of stepping (its own graph may
    hear of the second after step 0)."""
    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        with external_driver(lease.env, tmp_path / "one.log") as one, \
                external_driver(lease.env, tmp_path / "two.log", _slow_driver(tmp_path)) as two:
            wait_for_nodes(lease.domain_id, "external_driver", 2)  # both announced before the run starts
            result = lockstep(tmp_path, steps=100, layout="single", driver="external",
                              sets={"clock_master": {"real_time_factor": 1.0}})
    assert result.refusal is not None and result.refusal["code"] == "participant_lost", result.refusal
    detail = result.refusal["detail"]
    if detail.startswith("driver answered step"):
        # the slower one won a race (a loaded machine) while the clock master's graph had not
        # yet heard of its service (it is asked again then): the answers' pids name both
        assert {int(p) for p in re.findall(r"pid (\d+)", detail)} == {one.pid, two.pid}, detail
        assert detail.endswith("it restarted, or two nodes serve /simforge/decide"), detail
        return
    assert detail.startswith(
        "2 nodes serve /simforge/decide (/external_driver, /external_driver): whichever answers first would be "
        "taken; one driver per run"), result.refusal
    assert manifest_of(result)["participants"]["driver"]["node"] == "/external_driver, /external_driver"


def test_a_second_driver_that_never_answers_first_is_refused_once_it_serves(tmp_path, monkeypatch):
    """One slower than the first never wins the race: its answers were dropped unsaid and
    the run counted. It is seen by the servers' count within SERVER_CHECK_S of stepping."""
    slow = _slow_driver(tmp_path)
    started: list[int] = []
    with lease_domain(tmp_path / "lease") as lease, contextlib.ExitStack() as later:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))

        def start_the_second(k: int, _total: int) -> None:
            if k == 3 and not started:
                started.append(later.enter_context(external_driver(lease.env, tmp_path / "two.log", slow)).pid)
                # on a loaded machine its start-up may outlast the run: it serves before step 4
                wait_for_nodes(lease.domain_id, "external_driver", 2)

        with external_driver(lease.env, tmp_path / "one.log") as one:
            result = lockstep(tmp_path, steps=100, layout="single", driver="external", on_step=start_the_second,
                              sets={"clock_master": {"real_time_factor": 1.0}})
    assert result.refusal is not None and result.refusal["code"] == "participant_lost", result.refusal
    assert result.refusal["step"] > 3
    detail = result.refusal["detail"]
    if detail.startswith("driver answered step"):  # it won a race before the graph counted it
        assert {int(p) for p in re.findall(r"pid (\d+)", detail)} == {one.pid, *started}, detail
        assert detail.endswith("it restarted, or two nodes serve /simforge/decide"), detail
    else:
        assert detail.startswith("2 nodes serve /simforge/decide ("), detail


def test_a_second_driver_the_graph_has_not_shown_is_refused_by_its_second_answers(tmp_path, monkeypatch):
    """The servers' count on the clock master's graph lags discovery (0.25 to 3 s here): a
    20-step run at full speed beside two drivers counted (2 of 26). Each server answers
    every request it gets, so a request answered twice names a second server whatever the
    graph says; here the graph's count is not asked at all."""
    from simforge_ros.nodes import clock_master

    monkeypatch.setattr(clock_master.ClockMaster, "_check_one_server", lambda self, peer, step, force=False: None)
    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        with external_driver(lease.env, tmp_path / "one.log"), \
                external_driver(lease.env, tmp_path / "two.log", _slow_driver(tmp_path)):
            wait_for_nodes(lease.domain_id, "external_driver", 2)
            # 4 s at real time: time for the second's endpoints to match the clock master's
            # client (one not matched by the run's end answers nothing, and is not seen)
            result = lockstep(tmp_path, steps=40, layout="single", driver="external",
                              sets={"clock_master": {"real_time_factor": 1.0}})
    assert result.refusal is not None and result.refusal["code"] == "participant_lost", result.refusal
    detail = result.refusal["detail"]
    if not detail.startswith("driver answered step"):  # the slower one won a race: named by the pids
        assert detail == ("a request to /simforge/decide was answered twice: two nodes serve /simforge/decide (not "
                          "named yet on the graph); whichever answers first would be taken; one driver per run")


def test_a_driver_whose_service_cannot_match_is_named_not_said_absent(tmp_path, monkeypatch):
    """A best-effort /simforge/decide server is on the graph, yet the clock master's client
    never matches it: the run said the service "did not appear"."""
    script = tmp_path / "best_effort_driver.py"
    script.write_text(EXAMPLE.read_text().replace(
        'self.node.create_service(Decide, "/simforge/decide", self._on_decide)',
        'self.node.create_service(Decide, "/simforge/decide", self._on_decide, qos_profile=__import__('
        '"rclpy.qos").qos.QoSProfile(depth=10, reliability=__import__("rclpy.qos").qos.ReliabilityPolicy.BEST_EFFORT))',
        1))
    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        with external_driver(lease.env, tmp_path / "driver.log", script):
            wait_for_nodes(lease.domain_id, "external_driver", 1)
            result = lockstep(tmp_path, steps=5, layout="single", driver="external",
                              sets={"clock_master": {"startup_timeout_ms": 5000}})
    assert (result.refusal["code"], result.refusal["step"]) == ("participant_timeout", -1), result.refusal
    assert result.refusal["detail"] == (
        "driver service /simforge/decide is offered (/external_driver) but did not match the clock master's client "
        "within 5 s: its QoS may differ (a service's endpoints must be reliable)")


def test_no_external_driver_is_refused_by_name_within_the_start_up_limit(tmp_path):
    result = lockstep(tmp_path, steps=5, layout="single", driver="external",
                      sets={"clock_master": {"startup_timeout_ms": 5000}})
    assert result.refusal is not None and result.refusal["code"] == "participant_timeout"
    assert "/simforge/decide" in result.refusal["detail"]
    # nothing answered: the manifest says so rather than naming a process
    assert manifest_of(result)["participants"]["driver"] == {"node": None, "pid": None, "host": None,
                                                             "external": True, "pid_watched": None}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--inject", "kill=driver@3"], "kill=driver@3: expected a fault on a node simforge starts"),
        (["--set", "driver.samples=2"], "driver.samples: expected a parameter of a node simforge starts"),
    ],
)
def test_nothing_can_be_set_on_or_injected_into_an_external_driver(tmp_path, args, needle):
    out = simforge("run", "right_turn", "--driver", "external", *args, "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert out.returncode == 2
    assert needle in out.stderr and "Traceback" not in out.stderr
