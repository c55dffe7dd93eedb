"""What a run's camera_info messages held, so `simforge verify` can hold the bag to it.

A step record chains each frame's pixels, not the camera_info published with it: a
CameraInfo changed in the bag (its intrinsics, distortion, frame_id) passed verify (a
byte-flip fuzz of a four-camera bag: 29 of 400 flips went unnoticed, all of them there).
The recorder now keeps, per camera, how many camera_info messages it recorded and a digest
of their field values, and verify recomputes both from the bag.

The digest is the sum modulo 2**256 of each message's SHA-256 over its canonical field
values (core.canonical), stamp included. A sum does not depend on the order the messages
came in: a bag is read back in log-time order, and a camera_info stamped earlier than the
one before it (a stale frame's) is recorded after it. It stands beside the step and frame
chains, not in them, so every chain digest stays what it was.

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


def split_stamp(plain: Mapping[str, Any]) -> tuple[int, int, dict[str, Any]]:
    """(sec, nanosec, the rest): a plain CameraInfo with its header's stamp taken out."""
    header = dict(plain["header"])
    stamp = header.pop("stamp")
    rest = dict(plain)
    rest["header"] = header
    return int(stamp["sec"]), int(stamp["nanosec"]), rest


def item_digest(sec: int, nanosec: int, rest_bytes: bytes) -> bytes:
    """One message's SHA-256: its stamp's canonical bytes, then the rest's."""
    return hashlib.sha256(encode([sec, nanosec]) + rest_bytes).digest()


class CameraInfoDigests:
    """Per camera: the camera_info messages seen and the sum of their digests.

    ``deserialize(raw)`` turns a serialised CameraInfo into a message ``to_plain`` takes;
    ``add_raw`` needs it only for contents not seen before (the bytes after the stamp key
    a cache, so a camera whose info never changes is deserialised once).
    """

    def __init__(self, deserialize: Callable[[bytes], Any] | None = None) -> None:
        self._deserialize = deserialize
        self._sums: dict[str, int] = {}
        self._counts: dict[str, int] = {}
        self._rest: dict[bytes, bytes] = {}  # CDR after the stamp -> canonical bytes of the rest

    def add(self, camera: str, plain: Mapping[str, Any]) -> None:
        """A camera_info message as plain field values (how verify reads the bag)."""
        sec, nanosec, rest = split_stamp(plain)
        self._note(camera, item_digest(sec, nanosec, encode(rest)))

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
        self._note(camera, item_digest(sec, nanosec, rest_bytes))

    def _note(self, camera: str, digest: bytes) -> None:
        self._sums[camera] = (self._sums.get(camera, 0) + int.from_bytes(digest, "big")) % _MOD
        self._counts[camera] = self._counts.get(camera, 0) + 1

    def summary(self) -> dict[str, dict[str, Any]]:
        """{camera: {"messages": n, "digest": 64 hex digits}}, cameras sorted."""
        return {
            camera: {"messages": self._counts[camera], "digest": self._sums[camera].to_bytes(32, "big").hex()}
            for camera in sorted(self._counts)
        }


def first_difference(recorded: Mapping[str, Any], replayed: Mapping[str, Any]) -> str | None:
    """What first differs between two summaries (the manifest's, the bag's), or None."""
    for camera in sorted(set(recorded) | set(replayed)):
        want, got = recorded.get(camera), replayed.get(camera)
        if want == got:
            continue
        if not isinstance(want, Mapping) or got is None:
            return (f"camera {camera}: the manifest has {want!r}, the bag "
                    f"{'holds no camera_info of it' if got is None else repr(got)}")
        if want.get("messages") != got["messages"]:
            return (f"camera {camera}: the manifest counts {want.get('messages')!r} camera_info messages, "
                    f"the bag holds {got['messages']}")
        return (f"camera {camera}: the bag's camera_info messages are not those recorded "
                f"(digest {got['digest'][:16]}, the manifest {str(want.get('digest'))[:16]})")
    return None
