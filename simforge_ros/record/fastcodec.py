"""The recorder's hot path: the same values and bytes as core.canonical, computed faster.

core.canonical is the reference: ``to_plain`` flattens any message form and ``encode``
writes the canonical bytes. Per recorded step the recorder flattens four small rosbags
messages and encodes one step record, and the generic versions (isinstance chains, a
dataclasses.fields() call per message, a sink object per chunk) cost more than the rest of
the recorder together. The functions here handle exactly the shapes the recorder meets
(rosbags dataclasses, and plain dict/list/str/int/float/bool/None/bytes values) and hand
anything else to the reference implementation, so their output is the reference output by
construction for the rest; tests compare the two on every message type.

Also here: reading a sensor_msgs/Image's header and pixel bytes straight from its CDR
bytes, without deserialising the message (the recorder needs the stamp, the size, the
encoding and a zero-copy view of the pixels, nothing else).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Mapping
from typing import Any

from simforge_ros.core.canonical import MAGIC, encode, strip_wall, to_plain
from simforge_ros.core.digest import GENESIS, next_digest

_Q = struct.Struct(">Q").pack
_D = struct.Struct(">d").pack
_KEYS: dict[str, bytes] = {}  # canonical bytes of mapping keys (field names: a small, fixed set)
_KEYS_MAX = 4096
_ROSBAGS_EMPTY_FIELD = "structure_needs_at_least_one_member"


def _key(key: object) -> bytes:
    cached = _KEYS.get(key) if type(key) is str else None
    if cached is not None:
        return cached
    if not isinstance(key, str):
        raise TypeError(f"canonical mappings need str keys, got {key!r}")
    raw = key.encode("utf-8")
    out = b"S" + _Q(len(raw)) + raw
    if type(key) is str and len(_KEYS) < _KEYS_MAX:
        _KEYS[key] = out
    return out


def _walk(value: Any, out: list[bytes]) -> None:
    put = out.append
    t = type(value)
    if t is dict:
        put(b"M" + _Q(len(value)))
        keys = _KEYS
        for key in sorted(value):  # mixed key types fail here; non-str keys in _key
            put(keys.get(key) or _key(key))
            item = value[key]
            ti = type(item)
            if ti is float:
                put(b"D" + _D(item))
            elif ti is str:
                raw = item.encode("utf-8")
                put(b"S" + _Q(len(raw)) + raw)
            else:
                _walk(item, out)
    elif t is float:
        put(b"D" + _D(value))
    elif t is int:
        raw = value.to_bytes(value.bit_length() // 8 + 1, "big", signed=True)
        put(b"I" + _Q(len(raw)) + raw)
    elif t is str:
        raw = value.encode("utf-8")
        put(b"S" + _Q(len(raw)) + raw)
    elif t is list or t is tuple:
        put(b"L" + _Q(len(value)))
        for item in value:
            _walk(item, out)
    elif t is bool:
        put(b"T" if value else b"F")
    elif value is None:
        put(b"N")
    elif t is bytes:
        put(b"B" + _Q(len(value)))
        put(value)
    else:  # anything else (numpy, arrays, Mapping subclasses, int subclasses): the reference
        put(encode(value)[len(MAGIC):])


def _walk_stripped(value: Any, out: list[bytes]) -> None:
    """_walk of ``strip_wall(value)``: keys starting with wall_ left out at any depth."""
    t = type(value)
    if t is dict:
        keys = [k for k in value if not (type(k) is str and k.startswith("wall_"))]
        out.append(b"M" + _Q(len(keys)))
        for key in sorted(keys):
            out.append(_KEYS.get(key) or _key(key))
            _walk_stripped(value[key], out)
    elif t is list or t is tuple:
        out.append(b"L" + _Q(len(value)))
        for item in value:
            _walk_stripped(item, out)
    elif isinstance(value, (Mapping, list, tuple)):
        _walk(strip_wall(value) if isinstance(value, Mapping) else [strip_wall({"v": v})["v"] for v in value], out)
    else:
        _walk(value, out)


def encode_plain(value: object) -> bytes:
    """Exactly ``core.canonical.encode(value)``, faster for plain values.

    Raises:
        TypeError: as ``encode`` does.
    """
    out = [MAGIC]
    _walk(value, out)
    return b"".join(out)


def step_record_bytes(step: int, timing: Any, action: Any, applied: Any, state: Any) -> bytes:
    """Exactly ``core.digest.step_record_bytes``; plain dict parts are not copied first."""
    parts = [p if type(p) is dict else to_plain(p) for p in (timing, action, applied, state)]
    if not isinstance(parts[0], dict):
        raise TypeError(f"timing must be a mapping or message, got {type(timing).__name__}")
    # the record {"step", "timing" (wall_* stripped), "action", "applied", "state"} is
    # written key by key in sorted order, without building it or copying its parts
    out = [MAGIC, b"M" + _Q(5)]
    out.append(_key("action"))
    _walk(parts[1], out)
    out.append(_key("applied"))
    _walk(parts[2], out)
    out.append(_key("state"))
    _walk(parts[3], out)
    out.append(_key("step"))
    _walk(step, out)
    out.append(_key("timing"))
    _walk_stripped(parts[0], out)
    return b"".join(out)


def frames_record_bytes(step: int, frames: Mapping[str, str]) -> bytes:
    """Exactly ``core.digest.frames_record_bytes``."""
    return encode_plain([step, [[cam, frames[cam]] for cam in sorted(frames)]])


class RecordChain:
    """core.digest.StepChain with the faster encoding (same digests, same interface)."""

    def __init__(self) -> None:
        self._digest = GENESIS
        self._steps = 0

    @property
    def digest(self) -> bytes:
        return self._digest

    @property
    def hexdigest(self) -> str:
        return self._digest.hex()

    @property
    def steps(self) -> int:
        return self._steps

    def add(self, step: int, timing: Any, action: Any, applied: Any, state: Any) -> str:
        """Chain step ``step``; raises ValueError out of order, TypeError on a bad part."""
        if isinstance(step, bool) or not isinstance(step, int) or step != self._steps:
            raise ValueError(f"step {step!r} added to a chain expecting step {self._steps}")
        self._digest = next_digest(self._digest, step_record_bytes(step, timing, action, applied, state))
        self._steps += 1
        return self._digest.hex()


class FramesRecordChain:
    """core.digest.FramesChain with the faster encoding (same digests, same interface)."""

    def __init__(self) -> None:
        self._digest = GENESIS
        self._steps = 0
        self._last_step: int | None = None

    @property
    def digest(self) -> bytes:
        return self._digest

    @property
    def hexdigest(self) -> str:
        return self._digest.hex()

    @property
    def steps(self) -> int:
        return self._steps

    @property
    def last_step(self) -> int | None:
        return self._last_step

    def add(self, step: int, frames: Mapping[str, str]) -> str:
        """Chain a step's frame hashes; raises ValueError for a step not after the last."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be an int >= 0, got {step!r}")
        if self._last_step is not None and step <= self._last_step:
            raise ValueError(f"frames for step {step} after step {self._last_step}")
        self._digest = next_digest(self._digest, frames_record_bytes(step, frames))
        self._steps += 1
        self._last_step = step
        return self._digest.hex()


# -- rosbags messages -> plain values ------------------------------------------------------
_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {}


def _fields(cls: type) -> tuple[tuple[str, bool], ...] | None:
    spec = _FIELDS.get(cls)
    if spec is None:
        if not (dataclasses.is_dataclass(cls) and hasattr(cls, "__msgtype__")):
            return None
        spec = tuple(
            (f.name, f.type in ("float", float))
            for f in dataclasses.fields(cls)
            if not f.name.startswith("__") and f.name != _ROSBAGS_EMPTY_FIELD
        )
        _FIELDS[cls] = spec
    return spec


def plain(msg: Any) -> Any:
    """Exactly ``core.canonical.to_plain(msg)``, faster for rosbags messages."""
    spec = _fields(type(msg))
    if spec is None:
        return to_plain(msg)
    out: dict[str, Any] = {}
    for name, is_float in spec:
        value = getattr(msg, name)
        t = type(value)
        if t is int:
            out[name] = float(value) if is_float else value
        elif t is float or t is str or t is bool:
            out[name] = value
        elif t is list:
            out[name] = [plain(v) for v in value]
        elif t in _FIELDS or hasattr(t, "__msgtype__"):
            out[name] = plain(value)
        else:
            out[name] = to_plain(value)
    return out


# -- sensor_msgs/Image straight from CDR ----------------------------------------------------
_U32 = struct.Struct("<I").unpack_from
_I32U32 = struct.Struct("<iI").unpack_from
_CDR_LE = (b"\x00\x01", b"\x00\x03")  # CDR / PL_CDR little endian


@dataclasses.dataclass(frozen=True)
class ImageView:
    """What the recorder needs of an Image: stamp, size, encoding and the pixel bytes."""

    sec: int
    nanosec: int
    frame_id: str
    height: int
    width: int
    encoding: str
    is_bigendian: int
    step: int
    data: memoryview


def image_view(raw: bytes | memoryview) -> ImageView | None:
    """Parse a serialised sensor_msgs/Image without copying its pixels.

    Returns None for anything but plain little-endian CDR (the caller then deserialises
    the message the ordinary way). Raises ValueError on truncated data.
    """
    buf = memoryview(raw)
    if len(buf) < 4 or bytes(buf[:2]) not in _CDR_LE:
        return None
    body = buf[4:]

    def align4(pos: int) -> int:
        return (pos + 3) & ~3

    def string(pos: int) -> tuple[str, int]:
        n = _U32(body, pos)[0]
        start = pos + 4
        if n == 0 or start + n > len(body):
            raise ValueError("truncated or malformed CDR string")
        return bytes(body[start:start + n - 1]).decode("utf-8"), start + n

    try:
        sec, nanosec = _I32U32(body, 0)
        frame_id, pos = string(8)
        pos = align4(pos)
        height, width = _U32(body, pos)[0], _U32(body, pos + 4)[0]
        encoding, pos = string(pos + 8)
        is_bigendian = body[pos]
        pos = align4(pos + 1)
        step = _U32(body, pos)[0]
        n = _U32(body, pos + 4)[0]
    except struct.error as err:
        raise ValueError(f"truncated Image CDR: {err}") from None
    start = pos + 8
    if start + n > len(body):
        raise ValueError(f"Image data of {n} bytes runs past the message ({len(body) - start} left)")
    return ImageView(sec, nanosec, frame_id, height, width, encoding, is_bigendian, step, body[start:start + n])
