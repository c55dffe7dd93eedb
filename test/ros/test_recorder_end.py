"""The recorder's own end of a run: it keeps its record on disk while no step comes (a run
held on /simforge/pause, or a participant working long, must not leave the last steps in a
buffer: a recorder killed then would lose them, and a user reading steps.jsonl would not see
them), and it leaves once the run is over, final status or not."""

from __future__ import annotations

import time

import pytest

from simforge_ros.benchmarks.recorder import step_messages

pytestmark = pytest.mark.ros

FLUSH_S = 0.5  # the recorder's flush interval, lengthened so that the test does not race it


def _lines(path):
    return path.read_text().count("\n") if path.exists() else 0


def test_a_record_chained_after_a_flush_reaches_the_file_without_another_step(tmp_path, monkeypatch):
    import rclpy

    from simforge_ros.nodes import recorder as recorder_module

    monkeypatch.setattr(recorder_module, "_STEPS_FLUSH_S", FLUSH_S)
    messages = step_messages(2)
    steps_file = tmp_path / "run" / "steps.jsonl"
    context = rclpy.Context()
    rclpy.init(args=["--ros-args", "-p", f"out_dir:={tmp_path / 'run'}"], context=context)
    try:
        recorder = recorder_module.Recorder(context)
        for topic, raw in messages[0]:
            recorder.take(topic, raw)
        assert _lines(steps_file) == 1  # the first record is flushed at once
        for topic, raw in messages[1]:
            recorder.take(topic, raw)
        flushed_at = time.monotonic()
        assert recorder.assembler.steps_done == 2
        assert _lines(steps_file) == 1  # within FLUSH_S of the last flush: still buffered
        recorder._on_progress_timer()  # what the recorder's 50 ms timer calls
        assert _lines(steps_file) == 1 or time.monotonic() - flushed_at >= FLUSH_S
        time.sleep(FLUSH_S)
        recorder._on_progress_timer()  # no step came meanwhile: the timer flushes it
        assert _lines(steps_file) == 2
        recorder.close()
        recorder.node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def test_a_recorder_that_missed_the_final_status_leaves_within_the_runners_grace(tmp_path, capfd):
    """After Finish the recorder waits for the run's final status (the clock master may ask
    again until its answer has arrived). One that missed it used to stay 5 s, the whole of
    what `simforge run` gives a node to exit after the clock master: refused as still
    running. It stays 3 s now, and says why it ends (a clock master gone ends it sooner:
    test_clock_master_gone)."""
    import rclpy

    from simforge_ros.nodes.recorder import Recorder

    context = rclpy.Context()
    rclpy.init(args=["--ros-args", "-p", f"out_dir:={tmp_path / 'run'}"], context=context)
    try:
        recorder = Recorder(context)
        assert not recorder.finished  # Finish not answered yet
        recorder._answered_at = time.monotonic()
        assert not recorder.finished  # the clock master may still ask again
        recorder._answered_at = time.monotonic() - 3.0
        assert recorder.finished
        assert "the run's final status never came here; ending 3 s after answering Finish" in capfd.readouterr().err
        recorder.close()
        recorder.node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
