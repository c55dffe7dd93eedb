"""`simforge play`'s choices and refusals, before anything is published (no ROS needed);
test/ros/test_play.py plays a real run to a subscriber."""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from simforge_ros import topics
from simforge_ros.record.play import (
    NOT_PLAYED_BY_DEFAULT,
    PlayError,
    _count,
    bag_topics,
    choose_topics,
    clock_first,
    latched_topics,
    main,
    message_class,
    paced,
    wall_offset_s,
)

MakeRun = Callable[..., Path]


def test_pacing_follows_simulation_time_scaled_by_the_rate() -> None:
    assert wall_offset_s(2_100_000_000, 100_000_000, 1.0) == 2.0
    assert wall_offset_s(2_100_000_000, 100_000_000, 4.0) == 0.5
    assert wall_offset_s(2_100_000_000, 100_000_000, 0.0) == 0.0  # no pacing


def test_the_pacing_starts_when_the_first_message_has_been_read() -> None:
    """Reading a bag's first chunk took a quarter of a second; paced from before it, the
    first steps went out back to back and a keep-last-10 reader lost some at --rate 10."""
    from types import SimpleNamespace as Item

    wall = [100.0]
    sent: list[tuple[int, float]] = []

    def sleep(seconds: float) -> None:
        wall[0] += seconds

    def slow_bag():
        wall[0] += 0.25  # the bag opened and its first chunk decoded
        for k in range(4):
            yield Item(t_ns=k * 100_000_000)

    for item in paced(slow_bag(), 10.0, now=lambda: wall[0], sleep=sleep):
        sent.append((item.t_ns, round(wall[0], 9)))
    assert sent == [(0, 100.25), (100_000_000, 100.26), (200_000_000, 100.27), (300_000_000, 100.28)]
    wall[0] = 0.0
    unpaced = [item.t_ns for item in paced(slow_bag(), 0.0, now=lambda: wall[0], sleep=sleep)]
    assert unpaced == [k * 100_000_000 for k in range(4)] and wall[0] == 0.25  # rate 0: only the reading took time


def test_each_log_time_plays_its_clock_first() -> None:
    """The recorder logs a step's messages as they came, the state often before /clock:
    played so, a node on use_sim_time got them stamped ahead of its clock."""
    from types import SimpleNamespace as Item

    logged = [Item(topic=t, t_ns=n) for t, n in [
        (topics.STATE, 0), (topics.CLOCK, 0), ("/img", 0), (topics.STATE, 5), ("/img", 5), (topics.CLOCK, 5),
        ("/tf_static", 7), (topics.CLOCK, 9)]]
    assert [(i.topic, i.t_ns) for i in clock_first(logged)] == [
        (topics.CLOCK, 0), (topics.STATE, 0), ("/img", 0), (topics.CLOCK, 5), (topics.STATE, 5), ("/img", 5),
        ("/tf_static", 7), (topics.CLOCK, 9)]
    assert list(clock_first([])) == []


def test_status_and_parameters_are_played_only_when_named(make_run: MakeRun) -> None:
    available = bag_topics(make_run("a") / "bag")
    assert {topics.CLOCK, topics.STATE, topics.NODE_PARAMS} <= set(available)
    default = choose_topics(available, [])
    assert topics.CLOCK in default and not set(NOT_PLAYED_BY_DEFAULT) & set(default)
    assert choose_topics(available, [topics.NODE_PARAMS, topics.CLOCK]) == {
        topics.NODE_PARAMS: "std_msgs/msg/String", topics.CLOCK: "rosgraph_msgs/msg/Clock"}
    with pytest.raises(PlayError, match=r"--topic /nope: not in this run's bag; it has /clock, "):
        choose_topics(available, ["/nope"])


def test_topics_are_latched_as_their_recorded_publishers_offered(make_run: MakeRun, monkeypatch) -> None:
    """As `ros2 bag play` does: the bag's offered QoS, not a table of simforge's own; a bag
    written before the offers were recorded falls back to that table."""
    from rosbags.interfaces import QosDurability

    from simforge_ros.record import bag

    assert latched_topics(make_run("a") / "bag") == {topics.STATUS, topics.NODE_PARAMS}
    offered = bag.offered_qos

    def state_latched(topic: str):
        qos = offered(topics.STATUS if topic == topics.STATE else topic)
        return qos if topic != topics.STATUS else ()  # and the status offered nothing

    monkeypatch.setattr(bag, "offered_qos", state_latched)
    run = make_run("b")
    assert offered(topics.STATUS)[0].durability == QosDurability.TRANSIENT_LOCAL
    # STATE offered transient_local; STATUS recorded with no offers: simforge latches it
    assert latched_topics(run / "bag") == {topics.STATE, topics.STATUS, topics.NODE_PARAMS}


def test_message_types_resolve_to_the_installed_classes() -> None:
    from sensor_msgs.msg import Image
    from simforge_ros.msg import StepTiming

    assert message_class("sensor_msgs/msg/Image") is Image
    assert message_class("simforge_ros/msg/StepTiming") is StepTiming
    with pytest.raises(PlayError, match=r"^acme_msgs/msg/Radar: no such message type is installed here"):
        message_class("acme_msgs/msg/Radar")


def test_a_span_of_steps_is_the_log_times_of_those_steps(make_run: MakeRun) -> None:
    from simforge_ros.record.play import Steps, chosen_steps
    from simforge_ros.record.rundir import load_run

    counted = load_run(make_run("a"))  # 60 steps of 50 ms
    assert chosen_steps(counted, None, None) == Steps(0, None)
    assert chosen_steps(counted, 59, 59) == Steps(59, 59)
    assert Steps(12, 15).window_ns(50_000) == (600_000_000, 800_000_000)
    assert Steps(3).window_ns(50_000) == (150_000_000, None)
    refused = load_run(make_run("b", refuse_at=10))  # steps 0-9 recorded; the bag may hold step 10's /clock
    assert chosen_steps(refused, 10, None) == Steps(10, None)
    with pytest.raises(PlayError, match=r"^--from-step: expected a step of this run \(steps 0 to 10\), got 11$"):
        chosen_steps(refused, 11, None)
    # a salvaged run is refused where the run was (step 71 of a killed recorder's), its bag
    # ending where the recorder was killed: the steps the bag holds
    assert chosen_steps(refused, 9, None, bag_end_ns=9 * 50_000_000 + 1) == Steps(9, None)
    with pytest.raises(PlayError, match=r"^--from-step: expected a step of this run \(steps 0 to 9\), got 10$"):
        chosen_steps(refused, 10, None, bag_end_ns=9 * 50_000_000 + 1)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["{missing}"], "no such run directory"),
        (["{run}", "--rate", "-1"], "argument --rate: expected a number >= 0.001 (simulation seconds per wall "
                                    "second), or 0 for no pacing, got '-1'"),
        (["{run}", "--rate", "fast"], "argument --rate: expected a number >= 0.001"),
        (["{run}", "--rate", "1e-300"], "argument --rate: expected a number >= 0.001"),  # never ended
        (["{run}", "--from-step", "-1"], "argument --from-step: expected a step, an integer >= 0, got '-1'"),
        (["{run}", "--to-step", "x"], "argument --to-step: expected a step, an integer >= 0, got 'x'"),
        (["{run}", "--from-step", "60"], "--from-step: expected a step of this run (steps 0 to 59), got 60"),
        (["{run}", "--to-step", "60"], "--to-step: expected a step of this run (steps 0 to 59), got 60"),
        (["{run}", "--from-step", "9", "--to-step", "8"],
         "--to-step: expected a step at or after --from-step 9, got 8"),
        (["{run}", "--wait-s", "nan"], "argument --wait-s: expected seconds >= 0"),
        (["{run}", "--topic", "/nope"], "--topic /nope: not in this run's bag"),
        (["{run}", "--wait-for-reader", topics.STATUS], f"--wait-for-reader {topics.STATUS}: not a played topic"),
    ],
)
def test_bad_input_exits_2_in_one_line(make_run: MakeRun, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       args: list[str], needle: str) -> None:
    run = make_run("a")
    argv = [a.format(run=run, missing=tmp_path / "nothing") for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_a_bag_that_is_gone_is_named(make_run: MakeRun, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run("a")
    for item in (run / "bag").iterdir():
        item.unlink()
    assert main([str(run)]) == 2
    assert capsys.readouterr().err == f"simforge play: {run / 'bag'}: not a rosbag2 directory (metadata.yaml missing)\n"


def test_play_refuses_a_domain_a_simforge_run_is_in(make_run: MakeRun, monkeypatch, capsys) -> None:
    """A second /clock in a running run's domain would break that run: nothing is played."""
    from simforge_ros.isolation import _held_for_a_run, hold_domain

    run_dir = make_run("a")
    domain = next(d for d in range(171, 199) if not _held_for_a_run(d))
    monkeypatch.setenv("ROS_DOMAIN_ID", str(domain))
    with hold_domain(domain, "simforge run busy-run"):
        assert main([str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("simforge play: environment: ROS_DOMAIN_ID: expected a domain no other simforge run or play "
                          "on this machine is in (play uses ROS_DOMAIN_ID, 0 when unset), got ")
    assert f"got '{domain}, held by simforge run busy-run (pid " in err


def test_a_bag_whose_indexes_do_not_match_its_messages_is_not_played(make_run: MakeRun, bag_file_of,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """rosbags picks a chunk by its index's times: one index off by a nanosecond and the
    player published none of that chunk's messages, and said nothing."""
    run = make_run("a")
    path = bag_file_of(run)
    blob = bytearray(path.read_bytes())
    pos = 8
    while blob[pos] != 0x08:  # the first chunk index record
        pos += 9 + struct.unpack_from("<Q", blob, pos + 1)[0]
    struct.pack_into("<Q", blob, pos + 9, struct.unpack_from("<Q", blob, pos + 9)[0] + 1)  # its start time
    path.write_bytes(bytes(blob))
    assert main([str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"simforge play: {run / 'bag'}: not played: bag.mcap: the chunk index of the chunk at byte ")
    assert err.endswith("(`simforge verify` checks the whole run)\n") and err.count("\n") == 1


def test_play_verify_plays_nothing_of_a_bag_that_differs_from_its_run(make_run: MakeRun, flip_state_byte, monkeypatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A bag edited after the run (one byte of step 5's state) decodes as well as any: only
    its digests tell. With --verify, play checks them first and sends nothing."""
    run = make_run("a")
    flip_state_byte(run, 5)
    assert main([str(run), "--verify"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"simforge play: {run}: not played: MISMATCH at step 5: field state.speed_mps: bag ")
    assert err.count("\n") == 1
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # on a terminal: the check's progress, then taken away
    assert main([str(run), "--verify"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"\rplay {run}: verify: step 0/60\r\033[K"
                          f"simforge play: {run}: not played: MISMATCH at step 5")


def test_the_closing_line_counts_in_words_that_agree():
    """"played 1 messages on 1 topics" read oddly."""
    assert _count(1, "message") == "1 message" and _count(0, "topic") == "0 topics"
    assert _count(2, "topic") == "2 topics"
