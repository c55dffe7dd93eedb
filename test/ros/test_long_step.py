"""A step that takes the bridge far longer than a call may (a decision period of a day,
the longest a period may be, is 4.32 * 10^6 engine ticks) is refused
`participant_timeout` in both layouts, and Ctrl-C ends it. In the `single` layout the
bridge's step holds the one thread the clock master waits on: such a run ran for minutes
past its timeout and ignored Ctrl-C, until the bridge began to look at the clock master's
timeout and stop flag between chunks of ticks."""

from __future__ import annotations

import pytest
from runs import lockstep, manifest_of, simforge

from simforge_ros.backends.embedded import EmbeddedBackend
from simforge_ros.bridge_core import ADVANCE_CHUNK_TICKS
from simforge_ros.nodes.clock_master import ClockMaster

pytestmark = pytest.mark.ros

LONG_STEP = {"clock_master": {"decision_s": 86400, "participant_timeout_ms": 1500}, "sim_bridge": {"cameras": []}}
TICKS = 4_320_000  # a day (the longest period) of 20 ms ticks (right_turn)


@pytest.mark.parametrize("layout", ["processes", "single"])
def test_a_step_past_the_call_limit_is_refused_participant_timeout(tmp_path, layout):
    result = lockstep(tmp_path, steps=3, layout=layout, sets=LONG_STEP)
    assert result.status == "refused", result
    assert result.refusal is not None
    assert (result.refusal["code"], result.refusal["step"], result.exit_code) == ("participant_timeout", 1, 15)
    assert result.steps == 1  # step 0 is kept
    manifest = manifest_of(result)
    assert manifest["refusal"]["code"] == "participant_timeout"
    if layout == "single":
        assert result.refusal["detail"].startswith("sim_bridge: still working after 1.5 s, the limit of a call (had "
                                                   "advanced "), result.refusal
        assert result.refusal["detail"].endswith(f" of its {TICKS} ticks)")
    check = simforge("verify", result.run_dir, cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr


def test_ctrl_c_during_a_long_step_in_one_process_ends_it(tmp_path, monkeypatch):
    """The stop-signal handler of the single layout sets ``interrupted`` on the clock master;
    here it is set as the bridge's third chunk of ticks begins."""
    clocks: list[ClockMaster] = []
    chunks: list[int] = []
    step, advance = ClockMaster.step, EmbeddedBackend.advance

    def noting(self, request):
        clocks.append(self)
        return step(self, request)

    def advancing(self, steer_rad, accel_mps2, n_ticks):
        chunks.append(n_ticks)
        if len(chunks) == 3:
            clocks[-1].interrupted = True  # what the SIGINT handler does
        return advance(self, steer_rad, accel_mps2, n_ticks)

    monkeypatch.setattr(ClockMaster, "step", noting)
    monkeypatch.setattr(EmbeddedBackend, "advance", advancing)
    sets = {**LONG_STEP, "clock_master": {"decision_s": 86400, "participant_timeout_ms": 600_000}}
    result = lockstep(tmp_path, steps=3, layout="single", sets=sets)
    assert result.refusal is not None
    assert (result.refusal["code"], result.refusal["step"], result.exit_code) == ("aborted", 1, 19)
    done = 3 * ADVANCE_CHUNK_TICKS
    assert result.refusal["detail"] == f"sim_bridge: interrupted (had advanced {done} of its {TICKS} ticks)"
    assert chunks == [ADVANCE_CHUNK_TICKS] * 3
    assert result.steps == 1


@pytest.mark.parametrize("layout", ["processes", "single"])
def test_an_answer_past_the_call_limit_is_refused_in_both_layouts(tmp_path, layout):
    """A participant busy in one call it cannot cut into chunks (a torch model taking 40 s,
    a sleep) answered late in `single`, and the run counted there while `processes`
    refused it: in one process the clock master waits on the thread that participant holds."""
    result = lockstep(tmp_path, steps=40, layout=layout, faults=("jitter=80",),
                      sets={"clock_master": {"participant_timeout_ms": 30}, "sim_bridge": {"cameras": []}})
    assert result.status == "refused", result
    assert result.refusal is not None and result.refusal["code"] == "participant_timeout", result.refusal
    assert result.refusal["detail"].endswith("did not answer within 0.03 s")
