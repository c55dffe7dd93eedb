"""The clock master's outcome line reaches `simforge run` through a pipe as well as its
log (process_tuning.tell_outcome, runner._OutcomePipe): the log is on the run's disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from simforge_ros.process_tuning import OUTCOME_FD_ENV, tell_outcome
from simforge_ros.runner import OUTCOME_PREFIX, _OutcomePipe

OUTCOME = {"status": "refused", "steps": 57, "chain_digest": "ab" * 32,
           "refusal": {"code": "participant_error", "step": 57, "detail": "recorder: writing ... failed"}}

CHILD = f"""
import json
from simforge_ros.process_tuning import tell_outcome
tell_outcome("noise " * 40_000)  # 240 KB: more than a pipe holds, read while it is written
tell_outcome({OUTCOME_PREFIX!r} + json.dumps({OUTCOME!r}))
"""


def test_the_outcome_comes_through_a_pipe_fuller_than_its_buffer() -> None:
    told = _OutcomePipe()
    child = subprocess.Popen([sys.executable, "-c", CHILD], env={**os.environ, OUTCOME_FD_ENV: str(told.write_fd)},
                             pass_fds=(told.write_fd,), stdout=subprocess.DEVNULL)
    told.close_write()
    wall_deadline = time.monotonic() + 60
    while child.poll() is None:
        assert time.monotonic() < wall_deadline, "the child blocked on a full pipe"
        told.drain()
        time.sleep(0.01)
    told.close()
    assert child.returncode == 0
    assert told.outcome() == OUTCOME


def test_no_pipe_no_outcome_and_no_error() -> None:
    told = _OutcomePipe()
    told.close()
    assert told.outcome() is None
    tell_outcome(OUTCOME_PREFIX + json.dumps(OUTCOME), environ={})  # started by ros2 launch: no pipe, no error
    tell_outcome("x", environ={OUTCOME_FD_ENV: "999"})  # a closed descriptor: nothing to tell, no error


def test_a_line_cut_off_is_no_outcome() -> None:
    told = _OutcomePipe()
    os.write(told.write_fd, (OUTCOME_PREFIX + json.dumps(OUTCOME))[:-5].encode())
    told.close()
    assert told.outcome() is None
