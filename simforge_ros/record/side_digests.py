"""What a run's messages hold that no chain does, so `simforge verify` can hold the bag to
it: the cameras' (below), and the bridge's odometry, /tf and /tf_static, and ground truth
and markers,
each kept the same way (counts and a digest of every field) under its own manifest key.

The frames chain hashes each image's encoding, size, row step and pixels; the
camera_info published with each image, and an image's own frame_id and is_bigendian,
were in no chain: changed in the bag, they passed verify (a byte-flip fuzz of a
four-camera bag: 29 of 400 flips went unnoticed in camera_info alone). The recorder now
keeps, per camera, how many such messages it recorded and a digest of their field values,
and verify recomputes both from the bag:

- ``camera_info``: every field of each CameraInfo (stamp included);
- ``image_headers``: each Image's stamp, frame_id and is_bigendian.

A digest is the sum modulo 2**256 of each message's SHA-256 over its canonical field
values (core.canonical). A sum does not depend on the order the messages came in: a bag
is read back in log-time order, and a message stamped earlier than the one before it (a
stale frame's) is recorded after it. The sums stand beside the step and frame chains, not
in them, so every chain digest stays what it was.

No rclpy here: the recorder and verify both feed it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from simforge_ros.core.canonical import encode, to_plain
from simforge_ros.record.image_cdr import leading_stamp_ns

_MOD = 1 << 256
_CACHE_MAX = 256  # distinct camera_info contents remembered (a camera's rarely changes)


class OrderFreeDigests:
    """Per camera: the messages noted and the sum of their SHA-256 digests.

    A message noted with its stamp (``t_ns``: one of a step's) is also remembered by it until
    ``settle`` says its step is recorded, so that ``summary(before_ns)`` can leave out what
    came of a step no chain holds: a refused run's refused step, whose frames the bridge
    sends after it answers, reached the recorder before it closed in some runs and not in
    others (repeats of one refused run then differed, 10 vs 11 camera_info messages).
    """

    def __init__(self, by_stamp: bool = True, cut_ns: int | None = None) -> None:
        """``by_stamp`` false: never asked for a summary before a time, so nothing is
        remembered by stamp. ``cut_ns``: messages stamped at or after it are not noted at
        all (verify, which knows a refused run's cut beforehand)."""
        self._sums: dict[str, int] = {}
        self._counts: dict[str, int] = {}
        self._by_stamp: dict[str, dict[int, list[int]]] | None = {} if by_stamp else None  # key -> t_ns -> part
        self._cut_ns = cut_ns

    def note(self, camera: str, item: bytes, t_ns: int | None = None) -> None:
        """One message, as the canonical bytes of what is kept of it; ``t_ns``: its stamp,
        for a message of a step (None: one sent once, as /tf_static)."""
        if self._cut_ns is not None and t_ns is not None and t_ns >= self._cut_ns:
            return
        digest = int.from_bytes(hashlib.sha256(item).digest(), "big")
        self._sums[camera] = (self._sums.get(camera, 0) + digest) % _MOD
        self._counts[camera] = self._counts.get(camera, 0) + 1
        if t_ns is None or self._by_stamp is None:
            return
        recent = self._by_stamp.setdefault(camera, {})
        part = recent.setdefault(t_ns, [0, 0])
        part[0], part[1] = (part[0] + digest) % _MOD, part[1] + 1

    def settle(self, through_ns: int) -> None:
        """Forget the stamps of recorded steps, at or before ``through_ns``: a cut is never
        before them. (Remembering only the latest 64 stamps left stamps past a cut counted
        once the recorder lagged further, as recorder_backlog_steps, 128, lets it.)"""
        if not self._by_stamp:
            return
        for recent in self._by_stamp.values():
            for t_ns in [t for t in recent if t <= through_ns]:
                del recent[t_ns]

    def messages(self, key: str) -> int:
        """How many messages were noted under ``key``."""
        return self._counts.get(key, 0)

    def summary(self, before_ns: int | None = None) -> dict[str, dict[str, Any]]:
        """{camera: {"messages": n, "digest": 64 hex digits}}, cameras sorted; with
        ``before_ns``, of the messages stamped before it (and those noted with no stamp)."""
        out = {}
        for camera in sorted(self._counts):
            total, count = self._sums[camera], self._counts[camera]
            if before_ns is not None:
                if self._by_stamp is None:
                    raise ValueError("a summary before a time of digests kept without their stamps")
                for t_ns, (part_sum, part_count) in self._by_stamp.get(camera, {}).items():
                    if t_ns >= before_ns:
                        total, count = (total - part_sum) % _MOD, count - part_count
            if count:
                out[camera] = {"messages": count, "digest": total.to_bytes(32, "big").hex()}
        return out


def split_stamp(plain: Mapping[str, Any]) -> tuple[int, int, dict[str, Any]]:
    """(sec, nanosec, the rest): a plain message with its header's stamp taken out."""
    header = dict(plain["header"])
    stamp = header.pop("stamp")
    rest = dict(plain)
    rest["header"] = header
    return int(stamp["sec"]), int(stamp["nanosec"]), rest


class CameraInfoDigests(OrderFreeDigests):
    """Every field of each camera's CameraInfo messages.

    ``deserialize(raw)`` turns a serialised CameraInfo into a message ``to_plain`` takes;
    ``add_raw`` needs it only for contents not seen before (the bytes after the stamp key
    a cache, so a camera whose info never changes is deserialised once).
    """

    def __init__(self, deserialize: Callable[[bytes], Any] | None = None, by_stamp: bool = True,
                 cut_ns: int | None = None) -> None:
        super().__init__(by_stamp, cut_ns)
        self._deserialize = deserialize
        self._rest: dict[bytes, bytes] = {}  # CDR after the stamp -> canonical bytes of the rest

    def add(self, camera: str, plain: Mapping[str, Any]) -> None:
        """A camera_info message as plain field values (how verify reads the bag)."""
        sec, nanosec, rest = split_stamp(plain)
        self.note(camera, encode([sec, nanosec]) + encode(rest), sec * 1_000_000_000 + nanosec)

    def add_raw(self, camera: str, raw: bytes | memoryview) -> None:
        """A camera_info as received (little-endian CDR; how the recorder takes it).

        Raises:
            ValueError: not little-endian CDR holding a stamp (deserialise it, use ``add``).
        """
        stamp_ns = leading_stamp_ns(raw)
        if stamp_ns is None:
            raise ValueError("a camera_info that is not little-endian CDR: pass it to add()")
        key = bytes(raw[:2]) + bytes(raw[12:])  # encapsulation, then all that follows the stamp
        rest_bytes = self._rest.get(key)
        if rest_bytes is None:
            if self._deserialize is None:
                raise ValueError("CameraInfoDigests.add_raw needs a deserialize function")
            plain = to_plain(self._deserialize(bytes(raw)))
            assert isinstance(plain, dict)  # a message flattens to a dict
            rest_bytes = encode(split_stamp(plain)[2])
            if len(self._rest) >= _CACHE_MAX:
                self._rest.clear()
            self._rest[key] = rest_bytes
        sec, nanosec = divmod(stamp_ns, 1_000_000_000)
        self.note(camera, encode([sec, nanosec]) + rest_bytes, stamp_ns)


ODOM_TYPE = "nav_msgs/msg/Odometry"  # what topics.ODOM carries


class OdometryDigests(OrderFreeDigests):
    """Every field of each nav_msgs/Odometry on topics.ODOM (sim_bridge.odometry): the ego
    state /simforge/state carries, in a standard type, kept under the key ``ego``."""

    KEY = "ego"

    def add(self, plain: Mapping[str, Any], t_ns: int | None = None) -> None:
        self.note(self.KEY, encode(plain), t_ns)


class TopicDigests(OrderFreeDigests):
    """Every field of each message on a topic, kept under the topic's name."""

    def add(self, topic: str, plain: Mapping[str, Any], t_ns: int | None = None) -> None:
        """``t_ns``: the step time the message was logged at (None: one sent once, /tf_static)."""
        self.note(topic, encode(plain), t_ns)


TF_TYPE = "tf2_msgs/msg/TFMessage"  # what topics.TF and topics.TF_STATIC carry


class TransformDigests(TopicDigests):
    """/tf (sim_bridge.tf: the ego in map_frame, once a step) and /tf_static
    (sim_bridge.camera_tf: the cameras on the ego, once): what places the ego and the
    cameras' frames, in no chain."""


TRUTH_TYPE = "simforge_ros/msg/GroundTruth"  # what topics.GROUND_TRUTH carries


class GroundTruthDigests(TopicDigests):
    """/simforge/ground_truth (sim_bridge.ground_truth: every scripted actor and signal,
    once a step) and /simforge/markers (sim_bridge.markers: the same drawn as markers), in
    no chain."""


MARKERS_TYPE = "visualization_msgs/msg/MarkerArray"  # what topics.MARKERS carries


class ImageHeaderDigests(OrderFreeDigests):
    """What of each Image the frames chain leaves out: its stamp, frame_id, is_bigendian."""

    def add(self, camera: str, sec: int, nanosec: int, frame_id: str, is_bigendian: int) -> None:
        self.note(camera, encode([int(sec), int(nanosec), str(frame_id), int(is_bigendian)]),
                  int(sec) * 1_000_000_000 + int(nanosec))


SIDE_BEFORE = "side_digests_before_ns"
"""The manifest key of a refused run: its side digests count the messages stamped before
this time, its first unrecorded step's (OrderFreeDigests.summary); absent: all of them."""

SIDE_DIGESTS = (("camera_info", "camera_info messages", "camera"), ("image_headers", "image headers", "camera"),
                ("odometry", "odometry messages", "vehicle"), ("transforms", "transform messages", "topic"),
                ("ground_truth", "ground-truth and marker messages", "topic"))
"""What of a run no chain holds, kept in its manifest: (manifest key, what it counts, what
its keys name); verify holds the bag to them, rerun a rerun."""


def first_difference(recorded: Mapping[str, Any], replayed: Mapping[str, Any], what: str,
                     names: tuple[str, str] = ("the manifest", "the bag"), label: str = "camera") -> str | None:
    """What first differs between two summaries of ``what`` (e.g. "camera_info messages"),
    or None; ``names`` say whose they are (verify: the manifest's, the bag's), ``label``
    what a summary's keys name."""
    mine, theirs = names
    for key in sorted(set(recorded) | set(replayed)):
        who = f"{label} {key}"
        want, got = recorded.get(key), replayed.get(key)
        if want == got:
            continue
        if not isinstance(want, Mapping) or got is None:
            return (f"{who}: {mine} has {want!r}, {theirs} "
                    f"{'holds none of its ' + what if got is None else repr(got)}")
        if want.get("messages") != got["messages"]:
            return (f"{who}: {mine} counts {want.get('messages')!r} {what}, "
                    f"{theirs} holds {got['messages']}")
        return (f"{who}: {theirs}'s {what} are not those recorded "
                f"(digest {got['digest'][:16]}, {mine} {str(want.get('digest'))[:16]})")
    return None
