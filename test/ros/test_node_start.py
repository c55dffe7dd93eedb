"""A node started by hand (`ros2 run`, a shell), as a robotics engineer starts one: what
it says of bad start-up input, of a missing recorder, and of a stop signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from runs import wait_for_nodes

from simforge_ros.process_tuning import LAUNCHER_ENV
from simforge_ros.under_launch import UNDER_LAUNCH_ENV

pytestmark = pytest.mark.ros


def _env(ros_lease) -> dict[str, str]:
    env = {k: v for k, v in {**os.environ, **ros_lease.env}.items() if k not in (LAUNCHER_ENV, UNDER_LAUNCH_ENV)}
    env.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)
    return env


def _node(ros_lease, tmp_path, node: str, *ros_args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", f"simforge_ros.nodes.{node}", "--ros-args", *ros_args],
                          env=_env(ros_lease), cwd=tmp_path, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(("text", "said"), [
    ("clock_mastr:\n  ros__parameters:\n    steps: 5\n",
     "f.yaml: clock_mastr: expected a node in ['clock_master', 'driver', 'recorder', 'sim_bridge'] (did you "
     "mean clock_master?), got 'clock_mastr'"),
    ("just a string\n", "f.yaml: file: expected a mapping of node: ros__parameters: {param: value}, got "
                        "'just a string'"),
    ("", "f.yaml: file: expected a mapping of node: ros__parameters: {param: value}, got None"),
    ("- a\n- b\n", "f.yaml: file: expected a mapping of node: ros__parameters: {param: value}, got ['a', 'b']"),
])
def test_a_parameter_file_that_gives_the_node_nothing_is_refused(ros_lease, tmp_path, text, said):
    """rcl takes a typo'd section, a scalar and an empty file: the node started on its
    defaults without a word (a list was rcl's traceback)."""
    (tmp_path / "f.yaml").write_text(text)
    out = _node(ros_lease, tmp_path, "clock_master", "--params-file", "f.yaml")
    assert out.returncode == 2, out.stderr
    assert out.stderr == f"clock_master: cannot start:\n{said}\n"


def test_what_rcl_refuses_is_one_line_not_its_traceback(ros_lease, tmp_path):
    out = _node(ros_lease, tmp_path, "recorder", "-p", "out_dir")
    assert out.returncode == 2, out.stderr
    assert "recorder: cannot start: rcl refused the ROS arguments: " in out.stderr
    assert "Traceback" not in out.stderr


def test_a_bad_fault_or_type_is_named_as_the_nodes_parameter(ros_lease, tmp_path):
    """Not as `--inject` (an option of `simforge run`), and with the value given, not
    rclpy's exception text."""
    out = _node(ros_lease, tmp_path, "sim_bridge", "-p", "faults:=[bogus]")
    assert out.returncode == 2
    assert out.stderr.startswith("sim_bridge: faults: expected one of drop_frame@K, "), out.stderr
    assert out.stderr.rstrip().endswith("got 'bogus'")
    out = _node(ros_lease, tmp_path, "clock_master", "-p", "steps:=1.5", "-p", "run_id:=08")
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        "clock_master: steps: expected a value of type int, got 1.5",
        "clock_master: run_id: expected a value of type str (a number or true/false meant as text "
        "is quoted: -p run_id:=\"'08'\"), got 8.0"]


def test_a_run_refused_before_any_recorder_came_does_not_wait_out_finish(ros_lease, tmp_path):
    """Finish went to no recorder for participant_timeout_ms, "sending the request again",
    whatever signal came: here 60 s past the start-up refusal."""
    out = _node(ros_lease, tmp_path, "clock_master", "-p", "startup_timeout_ms:=1000",
                "-p", "participant_timeout_ms:=60000", timeout=45)
    assert out.returncode == 15, out.stderr
    assert "no recorder was seen (no /simforge/finish service): nothing recorded this run" in out.stderr
    assert "sending the request again" not in out.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_participant_stopped_by_a_signal_says_so(ros_lease, tmp_path, sig):
    """... and exits 128 + the signal's number, as a shell reports a process a signal ended:
    it exited 0, and `simforge run` could not tell it from one that ended with the run
    (a bridge stopped so before step 0 was waited for 30 s, then another node blamed)."""
    proc = subprocess.Popen([sys.executable, "-m", "simforge_ros.nodes.driver"], env=_env(ros_lease),
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_nodes(ros_lease.domain_id, "driver", proc=proc)  # its handlers are in place before its node
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, err
    assert "driver: a stop signal came before the run's final status; ending" in err


@pytest.mark.parametrize("layout", ["single", "processes"])
def test_a_scenario_file_that_cannot_be_read_is_a_usage_error(tmp_path, layout):
    """It was "unexpected error: PermissionError" (single, exit 1) or "driver did not start"
    (processes, exit 18), each leaving a run directory that salvage took for a killed one."""
    scenario = tmp_path / "noperm.yaml"
    scenario.write_bytes((Path(__file__).parents[2] / "config" / "scenarios" / "right_turn.yaml").read_bytes())
    scenario.chmod(0)
    # root reads anything: without the two capabilities that let it, as any user
    unprivileged = (["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps",
                     "-dac_override,-dac_read_search"] if os.geteuid() == 0 else [])
    exe = Path(sys.executable).with_name("simforge")
    out = subprocess.run([*unprivileged, str(exe), "run", str(scenario), "--steps", "2", "--layout", layout,
                          "--out", str(tmp_path / "runs")], capture_output=True, text=True, cwd=tmp_path,
                         timeout=300, env=dict(os.environ))
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines()[-1].endswith(
        f"got {scenario}: <file>: expected a scenario file that can be read, got Permission denied"), out.stderr
    assert "Traceback" not in out.stderr and "unexpected error" not in out.stderr
    assert not any((tmp_path / "runs").glob("*"))  # nothing of a run left behind


@pytest.mark.parametrize(("under_launch", "yours"), [(False, None), (True, None), (True, "/x/mine.xml")])
def test_a_node_not_started_by_simforge_run_takes_its_fast_dds_profile_unless_one_is_named(
        ros_lease, tmp_path, under_launch, yours):
    """Started by hand or by the launch file (which sets nothing in the launch's own
    environment: an including launch file's later processes got it too), a node names the
    package's Fast DDS profile itself before its participant is made; one of yours stays."""
    from simforge_ros.resources import fastdds_profile

    env = _env(ros_lease)
    if under_launch:
        env[UNDER_LAUNCH_ENV] = "1"
    if yours:
        env["FASTDDS_DEFAULT_PROFILES_FILE"] = yours
    code = ("import os, sys; from simforge_ros.nodes.common import start_rclpy; "
            "status = start_rclpy('driver', ['driver']); print(os.environ.get('FASTDDS_DEFAULT_PROFILES_FILE'))")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (yours or str(fastdds_profile()))
