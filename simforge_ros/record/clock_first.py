"""Put each /clock ahead of the other messages of its time in the bag.

A bag is read back in log-time order, and messages of one log time in the order they are
in the file (rosbag2's MCAP reader, rosbags). The recorder writes messages as they come:
the bridge's state and frames of step k reach it before the clock master's /clock of
step k, which goes out with the Decide request after the Step answer. So `ros2 bag play`
gave a `use_sim_time` node the state stamped t(k) while its clock still read t(k-1), every
step, where a live simulator (CARLA's ROS bridge, Gazebo) sends the clock first.

``ClockFirst`` holds a message stamped later than the last /clock written until the /clock
of its time comes, and writes it right after that. What no /clock reaches (a refused
step's state, the final status) is written when the bag is closed (``release``). At a
checkpoint, what belongs to a complete step goes out whether its /clock came or not
(``release_through``): a killed recorder's bag then holds every step steps.jsonl holds
(salvage); what is still held belongs to a step not yet complete.

Only the order in the file changes: every message is written once, with its own log time,
and no digest depends on the order (record.side_digests sums are order-free; the chains
are kept by step). No rclpy here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from simforge_ros import topics

Write: TypeAlias = Callable[[str, str, int, "bytes | memoryview"], None]
_Held: TypeAlias = "tuple[str, str, int, bytes | memoryview]"  # topic, type, log time, bytes

MAX_HELD = 512
MAX_HELD_BYTES = 64 << 20
"""Messages, and their bytes, held at most (a step's are a few dozen, a few MB with
cameras): past either (a stream no /clock catches up with, a recorder fed a replay without
/clock), what is held is written, in the order it came."""


class ClockFirst:
    """Writes through ``write``, each /clock ahead of the messages of its time."""

    def __init__(self, write: Write, clock_topic: str = topics.CLOCK) -> None:
        self._write = write
        self._clock_topic = clock_topic
        self._clock_ns = -1  # the latest /clock time written
        self._held: list[_Held] = []
        self._held_bytes = 0

    @property
    def held(self) -> int:
        """Messages waiting for their /clock."""
        return len(self._held)

    def write(self, topic: str, msgtype: str, t_ns: int, raw: bytes | memoryview) -> None:
        if topic == self._clock_topic:
            self._write(topic, msgtype, t_ns, raw)
            if t_ns > self._clock_ns:
                self._clock_ns = t_ns
                if self._held:
                    self.release_through(t_ns)
        elif t_ns <= self._clock_ns:
            self._write(topic, msgtype, t_ns, raw)
        else:
            self._held.append((topic, msgtype, t_ns, raw))
            self._held_bytes += len(raw)
            if len(self._held) > MAX_HELD or self._held_bytes > MAX_HELD_BYTES:
                self.release()

    def release(self) -> None:
        """Write everything held, in the order it came (the bag is about to close)."""
        held, self._held, self._held_bytes = self._held, [], 0
        for item in held:
            self._write(*item)

    def release_through(self, t_ns: int) -> None:
        """Write what is held of times up to ``t_ns``, in the order it came: after the
        /clock of ``t_ns``, and at a checkpoint a complete step's, /clock or not (a record
        steps.jsonl holds must be in the bag once it is flushed)."""
        reached: list[_Held] = []
        kept: list[_Held] = []
        for item in self._held:
            (reached if item[2] <= t_ns else kept).append(item)
        if reached:
            self._held = kept
            self._held_bytes -= sum(len(item[3]) for item in reached)
            for item in reached:
                self._write(*item)
