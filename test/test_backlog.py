"""core.backlog: when the loop pauses for the recorder and when it goes on."""

import pytest

from simforge_ros.core.backlog import RecorderBacklog


def test_the_loop_pauses_only_past_the_limit_and_resumes_within_half_of_it() -> None:
    backlog = RecorderBacklog(limit=8)
    assert not backlog.must_pause(8)  # 8 steps behind: at the limit, not past it
    assert backlog.must_pause(9)
    backlog.note_recorded(4)  # 5 behind: within the limit, not yet within half of it
    assert not backlog.must_pause(9)
    assert not backlog.may_resume(9)
    backlog.note_recorded(5)
    assert backlog.may_resume(9)
    assert backlog.behind(9) == 4


def test_late_or_repeated_reports_never_move_the_count_back() -> None:
    backlog = RecorderBacklog(limit=4)
    assert backlog.note_recorded(10)
    assert not backlog.note_recorded(7)  # a late report
    assert not backlog.note_recorded(10)  # the same one twice
    assert backlog.recorded == 10
    assert backlog.behind(3) == 0  # never negative


def test_a_limit_of_one_step_resumes_only_when_the_recorder_has_everything() -> None:
    backlog = RecorderBacklog(limit=1)
    assert backlog.must_pause(2)
    backlog.note_recorded(1)
    assert not backlog.may_resume(2)
    backlog.note_recorded(2)
    assert backlog.may_resume(2)


def test_a_limit_below_one_step_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one step"):
        RecorderBacklog(0)
