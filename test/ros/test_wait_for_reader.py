"""`simforge run --wait-for-reader TOPIC`: a stack's node reading a run's topics gets them
from step 0. Discovery here takes 0.25 to 3 s: a listener started 2 to 6 s before a run
(held at step 0, even) missed step 0's image and /clock in 8 of 12 runs, the run having
started once its own nodes had matched."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from runs import simforge

pytestmark = pytest.mark.ros

LISTENER = Path(__file__).with_name("stack_listener.py")
# the front camera's camera_info, a bridge topic like its image, and small
WANTED = ("/clock", "/simforge/camera/front/camera_info")
STEPS, DECISION_NS = 10, 100_000_000


def _listener(env: dict[str, str], out: Path, *mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(LISTENER), str(out), str((STEPS - 1) * DECISION_NS), *mode],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _run(env: dict[str, str], out: Path, *extra: str) -> subprocess.Popen[str]:
    exe = Path(sys.executable).with_name("simforge")
    return subprocess.Popen([str(exe), "run", "right_turn", "--steps", str(STEPS), "--out", str(out),
                             *[arg for topic in WANTED for arg in ("--wait-for-reader", topic)], *extra],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("first", ["listener", "run"])
def test_a_stack_node_gets_every_step_from_step_0(ros_lease, tmp_path, first):
    env = dict(ros_lease.env)
    got = tmp_path / "got.txt"
    said: list[str] = []  # what the run said on stderr before the listener was started
    if first == "listener":
        listener = _listener(env, got)
        assert listener.stdout is not None and listener.stdout.readline().strip() == "up"
        run = _run(env, tmp_path / "runs")
    else:
        run = _run(env, tmp_path / "runs")
        assert run.stderr is not None
        while not any("waiting up to" in line for line in said):  # the run waits for it now (a fixed
            line = run.stderr.readline()                           # sleep could start it before)
            assert line, (said, run.poll())
            said.append(line)
        listener = _listener(env, got)
    out, err = run.communicate(timeout=120)
    err = "".join(said) + err
    listener.wait(timeout=60)
    assert run.returncode == 0, (out, err)
    assert f"simforge: waiting up to 30 s for a node of yours reading {', '.join(WANTED)} on ROS_DOMAIN_ID=" in err
    lines = got.read_text().split()
    stamps = {topic: sorted(int(ns) for t, ns in zip(lines[::2], lines[1::2], strict=True) if t == topic)
              for topic in ("clock", "front")}
    logs = {log.name: log.read_text() for log in (tmp_path / "runs").glob("*/logs/*.log")}
    assert stamps["clock"] == [k * DECISION_NS for k in range(STEPS)], (stamps, logs)
    # a frame every step: about one loop in eight on a loaded machine, and twice in CI, got
    # none of them while the bridge, which had seen its writer match, left before the
    # listener's side had matched it (SimBridge._deliver_wanted)
    assert stamps["front"] == [k * DECISION_NS for k in range(STEPS)], (stamps, logs)
    # a run that waited is the same run
    plain = simforge("run", "right_turn", "--steps", str(STEPS), "--out", str(tmp_path / "plain"), cwd=tmp_path)
    chain = out.split("chain=")[1].split()[0]
    assert plain.returncode == 0 and f"chain={chain}" in plain.stdout


def test_no_reader_within_the_start_up_limit_is_refused_naming_the_topic(ros_lease, tmp_path):
    # 10 s: the run's own nodes come first, and on a loaded machine they can take seconds
    run = _run(dict(ros_lease.env), tmp_path / "runs", "--set", "clock_master.startup_timeout_ms=10000")
    out, err = run.communicate(timeout=120)
    assert run.returncode == 15, (out, err)  # participant_timeout
    assert "refused:participant_timeout before step 0" in out
    assert "a reader of /clock in a node not of the run (--wait-for-reader /clock) did not appear within 10 s" in out


@pytest.mark.parametrize("record", ["true", "false"])
def test_a_stopped_reader_of_yours_holds_the_run_s_end_a_bounded_while_and_is_named(ros_lease, tmp_path, record):
    # the nodes writing a --wait-for-reader topic wait, at their end, for its readers to
    # acknowledge what they were sent (one not yet matched from its side asks for it again);
    # a reader that never does (stopped here once it has step 0's camera_info) is waited
    # for 2 s and named, and the run counts
    env = dict(ros_lease.env)
    listener = _listener(env, tmp_path / "got.txt", "stop")
    try:
        assert listener.stdout is not None and listener.stdout.readline().strip() == "up"
        params = tmp_path / "params.yaml"
        params.write_text(f"clock_master:\n  ros__parameters:\n    record: {record}\n")
        run = _run(env, tmp_path / "runs", "--real-time-factor", "1", "--params-file", str(params))
        out, err = run.communicate(timeout=120)
    finally:
        listener.kill()
        listener.wait(timeout=30)
    assert run.returncode == 0, (out, err)
    logs = "".join(log.read_text() for log in (tmp_path / "runs").glob("*/logs/*.log"))
    # counted once the recorder, done, may have left: 1 or 2 readers
    assert re.search(r"/simforge/camera/front/camera_info: not acknowledged within 2 s by every reader matched "
                     r"\([12]\): a reader that is stopped, gone or not taking messages may have missed some",
                     logs), logs
    assert "/clock: not acknowledged within 2 s by every reader matched" in logs, logs
