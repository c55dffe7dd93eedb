"""`simforge play RUN`: publish a recorded run's bag on its topics again, paced by its
simulation time, for nodes of your own (a perception stack, a visualiser) to take the
very messages of a kept run.

It does what `ros2 bag play` does, where rosbag2 is not installed (it does not come with
the PyPI wheels). The recorded CDR bytes are published as they are (rclpy
publishes serialised messages), so a subscriber receives what the recorder received (the
transport may pad the end to a multiple of 4 bytes, as on a live run's wire). /clock is
in the bag, so nodes with use_sim_time follow the run's time. Each message is checked to
decode before it goes out: a damaged bag stops with an error naming the topic and time,
never sends garbage. The run's status and node parameters are not played unless asked
for by --topic: live simforge nodes act on a run's status.

The wall clock only paces the publishing (--rate); nothing it reads is published.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simforge_ros import topics
from simforge_ros.command import INTERRUPTED
from simforge_ros.core.errors import EXIT_FAILURE, EXIT_USAGE, ConfigError, SimforgeError
from simforge_ros.isolation import check_rmw, hold_domain, tool_discovery_range, user_domain
from simforge_ros.record.bag import BagError, bag_connections, bag_index, read_bag
from simforge_ros.record.bag_structure import bag_problem
from simforge_ros.record.rundir import RunDir, load_run
from simforge_ros.record.verify import verify_run
from simforge_ros.tools import StepLine, parse, rclpy_signal_options, say, stop_on_signals

NOT_PLAYED_BY_DEFAULT = (topics.STATUS, topics.NODE_PARAMS)
"""Run control, not data: a replayed final status would end a live run's nodes."""
_ACK_WAIT_S = 5.0  # wall clock: how long the last messages may take to be acknowledged
_SLEEP_SLICE_S = 0.05  # wall clock: the longest single sleep, so Ctrl-C is heard promptly


class PlayError(SimforgeError):
    """A run that cannot be played: a type not installed here, a topic not in the bag."""


@dataclass(frozen=True)
class Steps:
    """The steps to play, ``first`` to ``last`` inclusive (None: to the run's end): the
    messages logged from t(first) up to t(last + 1), as the run's diff and refusals name steps."""

    first: int = 0
    last: int | None = None

    def window_ns(self, decision_us: int) -> tuple[int, int | None]:
        """[start, stop) of the log times these steps' messages have, in ns."""
        stop = None if self.last is None else (self.last + 1) * decision_us * 1000
        return self.first * decision_us * 1000, stop


def last_step(run: RunDir, bag_end_ns: int | None = None) -> int:
    """The last step whose messages the run's bag may hold (-1: none): its last recorded
    step, or the step it was refused at; no later than the bag's last message
    (``bag_end_ns``, its log time), where that is known. A salvaged run refused at step 71
    whose bag ends at step 59 took --from-step 65 ("played 1 messages ... 0 s")."""
    refusal = run.manifest.get("refusal") or {}
    refused_at = refusal.get("step") if isinstance(refusal, dict) else None
    final = max(int(run.manifest["steps"]) - 1, refused_at if isinstance(refused_at, int) else -1)
    if bag_end_ns is not None:
        final = min(final, bag_end_ns // (run.decision_us * 1000))
    return final


def chosen_steps(run: RunDir, first: int | None, last: int | None, bag_end_ns: int | None = None) -> Steps:
    """--from-step / --to-step checked against the run: each a step it recorded (a refused
    run's bag may also hold its refused step's /clock and state), and its bag holds.

    Raises:
        PlayError: a step the run does not have, or --to-step before --from-step.
    """
    final = last_step(run, bag_end_ns)
    for option, step in (("--from-step", first), ("--to-step", last)):
        if step is not None and step > final:
            have = f"steps 0 to {final}" if final >= 0 else "no step"
            raise PlayError(f"{option}: expected a step of this run ({have}), got {step}")
    if first is not None and last is not None and last < first:
        raise PlayError(f"--to-step: expected a step at or after --from-step {first}, got {last}")
    return Steps(first or 0, last)


@dataclass(frozen=True)
class Played:
    """What was played: messages per topic, and the span of simulation time they covered."""

    counts: dict[str, int]
    sim_ns: int


def wall_offset_s(t_ns: int, t0_ns: int, rate: float) -> float:
    """When a message logged at ``t_ns`` goes out, in wall seconds after the first one
    (logged at ``t0_ns``); ``rate`` 0 does not pace: each goes out as soon as the writer
    may send it (a reliable writer keeps every message until its readers have it), and a
    reader that keeps only its last N loses what it has not taken in time."""
    return 0.0 if rate == 0 else (t_ns - t0_ns) / 1e9 / rate


def paced(items: Iterable[Any], rate: float, now: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep) -> Iterator[Any]:
    """Bag messages (with ``t_ns``), each when it is due (wall_offset_s). The pacing starts
    when the first message has come: started before the bag's first chunk was read (a
    quarter of a second for a run with cameras), the first steps went out back to back to
    make that time up, and a reader keeping its last 10 messages lost some at --rate 10."""
    t0_ns: int | None = None
    wall_start = 0.0
    for item in items:
        if t0_ns is None:
            t0_ns, wall_start = item.t_ns, now()
        while (left := wall_start + wall_offset_s(item.t_ns, t0_ns, rate) - now()) > 0:
            sleep(min(left, _SLEEP_SLICE_S))
        yield item


def clock_first(items: Iterable[Any]) -> Iterator[Any]:
    """Bag messages (with ``topic`` and ``t_ns``) in the same log-time order, each log
    time's /clock first: a step's messages all carry its time, and the recorder logged
    them in the order they came, often the state before the clock (60 of 60 steps of a
    run), so a node on use_sim_time got messages stamped ahead of its clock. One log
    time's messages are held at a time."""
    held: list[Any] = []
    for item in items:
        if held and item.t_ns != held[0].t_ns:
            yield from _clock_then_rest(held)
            held = []
        held.append(item)
    yield from _clock_then_rest(held)


def _clock_then_rest(same_time: list[Any]) -> Iterator[Any]:
    yield from (item for item in same_time if item.topic == topics.CLOCK)
    yield from (item for item in same_time if item.topic != topics.CLOCK)


def message_class(type_name: str) -> Any:
    """The installed rclpy class of a "pkg/msg/Type" name.

    Raises:
        PlayError: no such message type is installed (its package is named).
    """
    package, _, name = type_name.rpartition("/")
    try:
        return getattr(importlib.import_module(package.replace("/", ".")), name)
    except (ImportError, AttributeError, ValueError):
        raise PlayError(f"{type_name}: no such message type is installed here (its package "
                        f"{package.split('/')[0]!r} provides it)") from None


def bag_topics(bag: Path) -> dict[str, str]:
    """topic -> message type of every connection in a rosbag2 directory.

    Raises:
        BagError: not a readable rosbag2 directory.
    """
    return {conn.topic: conn.msgtype for conn in bag_connections(bag)}


def latched_topics(bag: Path) -> frozenset[str]:
    """The topics whose recorded publisher offered transient_local durability (a reader that
    comes late still gets the last messages), as `ros2 bag play` reads the bag's offers; a
    topic recorded with no offers (a bag from before they were written) is latched when
    simforge latches it (topics.LATCHED).

    Raises:
        BagError: not a readable rosbag2 directory.
    """
    from rosbags.interfaces import QosDurability

    latched = set()
    for conn in bag_connections(bag):
        offered = getattr(conn.ext, "offered_qos_profiles", None) or ()
        if any(q.durability == QosDurability.TRANSIENT_LOCAL for q in offered) if offered else (
                conn.topic in topics.LATCHED):
            latched.add(conn.topic)
    return frozenset(latched)


def choose_topics(available: dict[str, str], wanted: Sequence[str]) -> dict[str, str]:
    """The topics to play: ``wanted`` (each must be in the bag), or every one but
    NOT_PLAYED_BY_DEFAULT.

    Raises:
        PlayError: a wanted topic is not in the bag (the bag's topics are listed).
    """
    if not wanted:
        return {t: m for t, m in available.items() if t not in NOT_PLAYED_BY_DEFAULT}
    missing = [t for t in wanted if t not in available]
    if missing:
        raise PlayError(f"--topic {missing[0]}: not in this run's bag; it has {', '.join(sorted(available))}")
    return {t: available[t] for t in wanted}


class Player:
    """The rclpy side: one publisher per played topic, latched where the recorded publisher
    was (``latched``), reliable and keeping all otherwise."""

    def __init__(self, chosen: dict[str, str], latched: frozenset[str] = frozenset(topics.LATCHED),
                 context: Any = None) -> None:
        from rclpy.node import Node

        from simforge_ros.nodes.common import LATCHED_QOS, RECORD_QOS

        classes = {topic: message_class(type_name) for topic, type_name in chosen.items()}
        self.latched = latched
        self.node = Node("simforge_player", context=context)
        self.publishers = {
            topic: self.node.create_publisher(cls, topic, LATCHED_QOS if topic in latched else RECORD_QOS)
            for topic, cls in classes.items()
        }

    def wait_for_readers(self, topics_: Iterable[str], limit_s: float) -> list[str]:
        """Wait until each topic has a reader (at most ``limit_s`` wall seconds in all);
        return those that have none."""
        wall_deadline = time.monotonic() + limit_s
        waiting = list(topics_)
        while waiting and time.monotonic() < wall_deadline:
            waiting = [t for t in waiting if self.publishers[t].get_subscription_count() < 1]
            if waiting:
                time.sleep(0.01)
        return waiting

    def play(self, bag: Path, rate: float, window_ns: tuple[int, int | None] = (0, None),
             progress: Callable[[int], None] | None = None) -> Played:
        """Publish every chosen message logged in ``window_ns`` ([start, stop) ns) in
        log-time order, paced by ``rate``. A latched topic's messages from before the start
        go out first, unpaced: a reader that joins a live run gets them too (/tf_static).
        ``progress`` is told each paced message's log time before it goes out.

        Raises:
            BagError: a message cannot be decoded (nothing of it is published).
            PlayError: a publish failed (a reliable reader that takes nothing).
        """
        start_ns, stop_ns = window_ns
        counts = {topic: 0 for topic in self.publishers}
        if start_ns > 0:
            for item in read_bag(bag, [t for t in self.publishers if t in self.latched], stop_ns=start_ns):
                self._publish(item.topic, item.raw)
                counts[item.topic] += 1
        t0_ns: int | None = None
        last_ns = 0
        # each message decodes before it is published
        for item in paced(clock_first(read_bag(bag, list(self.publishers), start_ns=start_ns or None,
                                               stop_ns=stop_ns)), rate):
            t0_ns = item.t_ns if t0_ns is None else t0_ns
            last_ns = item.t_ns
            if progress is not None:
                progress(item.t_ns)
            self._publish(item.topic, item.raw)
            counts[item.topic] += 1
        self._wait_acked()
        return Played(counts, last_ns - (t0_ns if t0_ns is not None else last_ns))

    def _publish(self, topic: str, raw: bytes) -> None:
        from rclpy._rclpy_pybind11 import RCLError

        try:
            self.publishers[topic].publish(raw)
        except RCLError as err:
            raise PlayError(f"publishing on {topic} failed ({err}); a reliable reader is not "
                            "taking messages") from None

    def _wait_acked(self) -> None:
        """Let reliable readers have the last messages before the node goes away."""
        from simforge_ros.nodes.common import unacknowledged

        unacknowledged(self.publishers.values(), _ACK_WAIT_S)


MIN_RATE = 1e-3
"""The slowest pacing --rate takes (1 000 wall seconds a simulation second): 1e-300 was
taken and a bag's second message was due after the universe's end, the play never ending."""


def _rate(text: str) -> float:
    """An argparse type for --rate: 0 (no pacing) or a finite number >= MIN_RATE."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (value == 0 or MIN_RATE <= value < float("inf")):
        raise argparse.ArgumentTypeError(
            f"expected a number >= {MIN_RATE:g} (simulation seconds per wall second), or 0 for no pacing, "
            f"got {text!r}")
    return value


def _non_negative(expected: str) -> Callable[[str], float]:
    """An argparse type: a finite number >= 0, else ``expected`` in the error."""

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not 0 <= value < float("inf"):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return convert


def _count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless n is 1 ("played 1 messages" read oddly)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _step(text: str) -> int:
    """An argparse type: a step number, an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a step, an integer >= 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simforge play",
        description="Publish a recorded run's bag on its topics again, paced by its simulation time "
                    "(as `ros2 bag play` would), in the ROS domain of the environment.",
    )
    parser.add_argument("run", type=Path, help="the run directory")
    parser.add_argument("--rate", type=_rate, default=1.0,
                        help="simulation seconds per wall second, at least 0.001 (default 1; 0: no pacing, as "
                             "fast as the transport goes: a reader keeping only its last N messages loses those "
                             "it does not take in time, one with keep-all history none)")
    parser.add_argument("--topic", action="append", default=[], metavar="TOPIC",
                        help="play only this topic (repeatable; default: every one but the run's status "
                             "and node parameters)")
    parser.add_argument("--wait-for-reader", action="append", default=[], metavar="TOPIC",
                        help="start once this topic has a reader (repeatable)")
    parser.add_argument("--wait-s", type=_non_negative("seconds >= 0"), default=30.0,
                        help="how long to wait for those readers, in seconds (default 30)")
    parser.add_argument("--from-step", type=_step, default=None, metavar="K",
                        help="start at step K's messages (default 0), as `simforge diff` and a refusal name steps; "
                             "the latched topics' earlier messages (/tf_static) go out first")
    parser.add_argument("--to-step", type=_step, default=None, metavar="K",
                        help="end with step K's messages (default: the run's last step)")
    parser.add_argument("--verify", action="store_true",
                        help="first check the bag against the run's digests, as `simforge verify` does, and play "
                             "nothing if they differ (exit 1)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 once everything is played, 1 when a reader never came, a publish failed or
    --verify found the bag differs from the run's records, 2 on unreadable input or bad usage,
    130 when interrupted (Ctrl-C, SIGTERM, SIGHUP)."""
    args = parse(build_parser(), argv)
    if isinstance(args, int):
        return args
    stop_on_signals()  # from here on a stop signal is said and exits as Ctrl-C does
    shown = sys.stderr.isatty()  # a progress line: a long run verifies for minutes, plays for longer
    checked = None
    try:
        check_rmw()
        run = load_run(args.run)
        chosen = choose_topics(bag_topics(run.bag_path), args.topic)
        latched = latched_topics(run.bag_path)
        bag_end_ns = bag_index(run.bag_path)["end_ns"]
        steps = chosen_steps(run, args.from_step, args.to_step, bag_end_ns)
        for topic in args.wait_for_reader:
            if topic not in chosen:
                raise PlayError(f"--wait-for-reader {topic}: not a played topic; played: {', '.join(sorted(chosen))}")
        for type_name in chosen.values():
            message_class(type_name)
        broken = bag_problem(run.bag_path)  # rosbags would read such a bag wrong, silently
        if broken is not None:
            raise BagError(f"{run.bag_path}: not played: {broken} (`simforge verify` checks the whole run)")
        if args.verify:
            line = StepLine(f"play {run.path}: verify", shown)
            try:
                checked = verify_run(run.path, line if shown else None)
            finally:
                line.clear()
    except SimforgeError as err:  # RunDirError, BagError, PlayError: one line, never a traceback
        say("play", err)
        return EXIT_USAGE
    if checked is not None:
        if not checked.ok:  # a bag edited, or damaged where nothing else shows it: its messages are not the run's
            assert checked.first_mismatch is not None
            print(f"simforge play: {run.path}: not played: MISMATCH at step {checked.first_mismatch['step']}: "
                  f"{checked.detail}", file=sys.stderr)
            return EXIT_FAILURE
        print(f"simforge play: {checked.detail}", file=sys.stderr)
    held = contextlib.ExitStack()
    try:  # a second /clock in a running simforge run's domain would break that run
        domain_id = user_domain(os.environ.get("ROS_DOMAIN_ID", "").strip() or "0")
        tool_discovery_range(unset_as=None)  # the user's nodes': ROS's default when unset
        held.enter_context(hold_domain(domain_id, f"simforge play {run.path}", "play uses ROS_DOMAIN_ID, 0 when unset"))
    except ConfigError as err:  # the domain is another run's, or the environment bad: nothing is played
        say("play", err)
        return EXIT_USAGE
    line = StepLine(f"play {run.path}", shown)
    step_ns, total = run.decision_us * 1000, steps.last if steps.last is not None else last_step(run, bag_end_ns)
    with held:
        return _play(run.bag_path, chosen, latched, steps.window_ns(run.decision_us), args,
                     (lambda t_ns: line(t_ns // step_ns, total)) if shown else None, line.clear, domain_id)


# config/fastdds_play.xml: Fast DDS's writers heartbeat every 3 s, and a reader acknowledges
# only when asked by one, so the wait for the last messages' acknowledgement (_wait_acked)
# took up to 3 s after the last message; with writers heartbeating every 100 ms, 0.1 s. It
# sets nothing else: the transports are Fast DDS's defaults, as for the user's own nodes.
PLAY_PROFILE = "fastdds_play.xml"


def _play(bag: Path, chosen: dict[str, str], latched: frozenset[str], window_ns: tuple[int, int | None],
          args: argparse.Namespace, progress: Callable[[int], None] | None, clear: Callable[[], None],
          domain_id: int) -> int:
    import rclpy

    from simforge_ros.resources import use_fastdds_profile

    use_fastdds_profile(os.environ, PLAY_PROFILE)  # before rclpy makes this process's participant
    stop_on_signals()
    # as checked: rcl read " " as no number ("unexpected error")
    rclpy.init(args=None, domain_id=domain_id, signal_handler_options=rclpy_signal_options())
    player: Player | None = None
    try:
        player = Player(chosen, latched)  # a stop signal from here on ends it as "interrupted"
        absent = player.wait_for_readers(args.wait_for_reader, args.wait_s)
        if absent:
            print(f"simforge play: no reader on {', '.join(absent)} within {args.wait_s:g} s", file=sys.stderr)
            return EXIT_FAILURE
        wall_start = time.monotonic()
        try:
            played = player.play(bag, args.rate, window_ns, progress)
        finally:
            clear()
    except KeyboardInterrupt:
        print("simforge play: interrupted", file=sys.stderr)
        return INTERRUPTED
    except SimforgeError as err:  # BagError mid-bag, PlayError: what went out stays out
        say("play", err)
        return EXIT_USAGE if isinstance(err, BagError) else EXIT_FAILURE
    finally:
        if player is not None:
            player.node.destroy_node()
        rclpy.try_shutdown()
    total = sum(played.counts.values())
    print(f"played {_count(total, 'message')} on {_count(len(played.counts), 'topic')}: "
          f"{played.sim_ns / 1e9:g} s of simulation time "
          f"in {time.monotonic() - wall_start:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
