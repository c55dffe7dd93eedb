"""A participant's first answer can be lost while discovery is still matching the service
(rmw drops an answer its writer cannot yet deliver): the clock master then sends step 0
(or the recorder's Finish) again, and a participant answers a request it has answered
with the same answer, never deciding, stepping or confirming twice (the bridge's side:
test_bridge_frames)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.task import Future
from runs import lockstep
from simforge_ros.srv import Decide, Finish

from simforge_ros.nodes.driver import Driver
from simforge_ros.nodes.recorder import Recorder
from simforge_ros.runner import write_params_file

pytestmark = pytest.mark.ros

DECISION_US = 100_000


def _shell(ros_lease, tmp_path, make, params):
    path = tmp_path / "params.yaml"
    write_params_file(path, params)
    context = rclpy.Context()
    rclpy.init(args=["--ros-args", "--params-file", str(path)], context=context, domain_id=ros_lease.domain_id)
    shell = make(context)
    try:
        yield shell
    finally:
        shell.node.destroy_node()
        rclpy.shutdown(context=context)


@pytest.fixture
def driver(ros_lease, tmp_path):
    yield from _shell(ros_lease, tmp_path, Driver, {"driver": {"scenario": "right_turn"}})


@pytest.fixture
def recorder(ros_lease, tmp_path):
    yield from _shell(ros_lease, tmp_path, Recorder, {"recorder": {"out_dir": str(tmp_path / "run")}})


def _request(step: int) -> Decide.Request:
    request = Decide.Request()
    request.step, request.t_us, request.decision_us, request.seed = step, step * DECISION_US, DECISION_US, 0
    request.state.step, request.state.t_us = step, step * DECISION_US
    request.state.speed_mps = 8.0
    return request


def _count_decisions(driver: Driver, monkeypatch) -> list[int]:
    calls: list[int] = []
    decide = driver.policy.decide

    def counted(obs: Any) -> Any:
        calls.append(obs.step)
        return decide(obs)

    monkeypatch.setattr(driver.policy, "decide", counted)
    return calls


def _first_and_again(first: Any, again: Any, release: Future) -> list[Any]:
    """Run a handler's coroutine for a request and for the same request sent again while
    the first still waits on ``release``; both answers, in that order."""
    first.send(None)  # the first now waits on release
    again.send(None)  # the repeat now waits for the first
    release.set_result(True)
    answers = []
    for coroutine in (first, again):
        with pytest.raises(StopIteration) as done:
            coroutine.send(None)
        answers.append(done.value.value)
    return answers


def test_a_decision_asked_again_gets_the_same_answer_and_the_policy_decides_once(driver, monkeypatch):
    calls = _count_decisions(driver, monkeypatch)
    first = driver._on_decide_now(_request(0), Decide.Response())
    again = driver._on_decide_now(_request(0), Decide.Response())
    assert first.ok and again is first
    assert driver._on_decide_now(_request(1), Decide.Response()).ok
    assert calls == [0, 1]


def test_a_decision_asked_again_while_the_first_awaits_its_frames_waits_for_that_one(driver, monkeypatch):
    """The camera policies' handler is a coroutine: a request sent again may come while the
    first one still awaits its frames."""
    frames_in = Future()
    served: list[int] = []

    async def awaiting_frames(request: Decide.Request, response: Decide.Response) -> Decide.Response:
        served.append(request.step)
        await frames_in
        response.ok = True
        response.action.step = request.step
        return response

    monkeypatch.setattr(driver, "_decide_with_frames", awaiting_frames)
    answers = _first_and_again(driver._on_decide(_request(0), Decide.Response()),
                               driver._on_decide(_request(0), Decide.Response()), frames_in)
    assert answers[0].ok and answers[1] is answers[0]
    assert served == [0]


def test_a_finish_sent_again_while_the_first_waits_gets_its_answer_and_the_recorder_stays_for_it(recorder, monkeypatch):
    waiting = Future()
    confirmed: list[int] = []

    async def finishing(request: Finish.Request, response: Finish.Response) -> Finish.Response:
        confirmed.append(int(request.expected_steps))
        await waiting  # late messages
        response.counted = True
        return response

    monkeypatch.setattr(recorder, "_finish", finishing)
    request = Finish.Request()
    request.expected_steps = 3
    answers = _first_and_again(recorder._on_finish(request, Finish.Response()),
                               recorder._on_finish(request, Finish.Response()), waiting)
    assert answers[0].counted and answers[1] is answers[0] and confirmed == [3]
    # answered, but the answer may not have arrived: it stays until the final status says so
    assert not recorder.finished
    from simforge_ros.msg import RunStatus

    # a latched final status of another run (a clock master still ending in the domain) is not this run's
    recorder._on_status(RunStatus(run_id="another-run", state="refused", code="aborted"))
    assert not recorder.finished
    recorder._on_status(RunStatus(run_id=recorder._values["run_id"], state="counted"))
    assert recorder.finished


def test_a_lost_answer_to_step_0_is_asked_again_and_the_run_is_the_same(tmp_path):
    clean = lockstep(tmp_path, steps=10, layout="processes")
    assert clean.status == "counted", clean.refusal
    runs = [lockstep(tmp_path, steps=10, layout="processes", faults=("lose_answer=driver@0",)),
            lockstep(tmp_path, steps=10, layout="single", faults=("lose_answer=sim_bridge@0",)),
            # the recorder's one answer, Finish (expecting 10 steps), is asked for again
            lockstep(tmp_path, steps=10, layout="processes", faults=("lose_answer=recorder@10",))]
    for run in runs:
        assert run.status == "counted", run.refusal
        assert run.chain_digest == clean.chain_digest
    log = (Path(runs[0].run_dir) / "logs" / "clock_master.log").read_text()
    assert "no answer from driver within 1 s (step 0): sending the request again" in log
    log = (Path(runs[2].run_dir) / "logs" / "clock_master.log").read_text()
    assert "no answer from recorder within 1 s (step 10): sending the request again" in log  # after the last step


def test_a_lost_answer_after_step_0_is_a_timeout_not_a_repeat(tmp_path):
    """Once a participant has answered, its service is matched both ways: a later answer
    that does not come is a participant that does not answer."""
    run = lockstep(tmp_path, steps=10, layout="processes", faults=("lose_answer=sim_bridge@3",),
                   sets={"clock_master": {"participant_timeout_ms": 1500}})
    assert (run.refusal or {}).get("code") == "participant_timeout"
    assert run.refusal["step"] == 3 and "sim_bridge did not answer within 1.5 s" in run.refusal["detail"]
