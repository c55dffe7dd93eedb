"""The project's canonical, versioned byte encoding of field values, and message flattening.

Digests must be reproducible from a recording on any machine and from any of the three
forms a message takes (an rclpy message, a rosbags dataclass, a simforge_ros.core.values
dataclass). Raw CDR is never hashed: its padding bytes are uninitialised. Instead a
message is flattened to a *plain* value with ``to_plain`` and the plain value is encoded
here, byte for byte the same everywhere.

Encoding, version 1 (``encode`` output starts with MAGIC; nested values do not repeat it).
Lengths and counts are unsigned 64-bit big-endian (``Q``)::

    None            b"N"
    False / True    b"F" / b"T"
    int             b"I" Q(n) n bytes of minimal big-endian two's complement
                    (n = bit_length // 8 + 1; covers int64 and uint64 and beyond)
    float           b"D" 8 bytes IEEE-754 binary64 big-endian (-0.0 != 0.0; NaN payload
                    bytes kept as they are)
    str             b"S" Q(n) utf-8 bytes
    bytes-like      b"B" Q(n) raw bytes (bytes, bytearray, memoryview, array.array('B'),
                    and 1-D numpy uint8 arrays, so a rclpy ``array('B')`` and a rosbags
                    ``np.ndarray[uint8]`` of the same content encode identically)
    numpy array     b"A" str(kind+itemsize, e.g. "f8") Q(ndim) Q(dim)... Q(n) C-order,
                    big-endian element bytes (bool, int, uint, float, complex only;
                    uint8 arrays of ndim != 1 use this form too)
    list / tuple    b"L" Q(count) items (a tuple encodes like a list: JSON has no tuple)
    array.array     other typecodes encode like the list of their items
    mapping         b"M" Q(count) then, by key in code point order, str(key) value
                    (keys must be str)

numpy scalars encode as the Python scalar they equal. Anything else is a TypeError: call
``to_plain`` first.
"""

from __future__ import annotations

import array
import dataclasses
import re
import struct
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

CANONICAL_VERSION = 1
MAGIC = b"SFC\x01"
"""Prefix of every top-level encoding: format name and version."""

_Q = struct.Struct(">Q")
_D = struct.Struct(">d")
_BIG = 4096  # chunks at least this long go to the hasher directly, never copied
_FLUSH = 65536  # small chunks are batched into one hasher.update of about this size

_BYTE_SEQ_TYPE = re.compile(r"^(?:sequence<(?:uint8|octet)(?:,\s*\d+)?>|(?:uint8|octet)\[\d+\])$")
_ROSBAGS_EMPTY_FIELD = "structure_needs_at_least_one_member"


class Hasher(Protocol):
    """What feed needs of a hashlib object."""

    def update(self, data: Any, /) -> None: ...


class _BufferSink:
    def __init__(self) -> None:
        self.buf = bytearray()

    def write(self, chunk: bytes | memoryview) -> None:
        self.buf += chunk


class _HashSink:
    def __init__(self, hasher: Hasher) -> None:
        self.hasher = hasher
        self.buf = bytearray()

    def write(self, chunk: bytes | memoryview) -> None:
        if len(chunk) >= _BIG:
            self.flush()
            self.hasher.update(chunk)
            return
        self.buf += chunk
        if len(self.buf) >= _FLUSH:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.hasher.update(self.buf)
            self.buf = bytearray()


def encode(value: object) -> bytes:
    """The canonical bytes of a plain value (MAGIC first).

    Built-in plain types (dict, list, tuple, str, int, float, bool, None, bytes) take a
    fast path that joins pre-encoded chunks; anything else (numpy, array.array, mapping
    subclasses, memoryview, ...) is written by the general walker that ``feed`` uses.
    Both write the format documented above; tests hold them to the same bytes.

    Raises:
        TypeError: the value (or something inside it) has no canonical encoding.
    """
    out = [MAGIC]
    _fast_walk(value, out)
    return b"".join(out)


def encode_general(value: object) -> bytes:
    """``encode`` through the general walker only (the reference the fast path is held to)."""
    sink = _BufferSink()
    sink.write(MAGIC)
    _walk(value, sink)
    return bytes(sink.buf)


_KEYS: dict[str, bytes] = {}  # encoded mapping keys: field names, a small fixed set
_KEYS_MAX = 4096


def _key(key: object) -> bytes:
    cached = _KEYS.get(key) if type(key) is str else None
    if cached is not None:
        return cached
    if not isinstance(key, str):
        raise TypeError(f"canonical mappings need str keys, got {key!r}")
    raw = key.encode("utf-8")
    chunk = b"S" + _Q.pack(len(raw)) + raw
    if type(key) is str and len(_KEYS) < _KEYS_MAX:
        _KEYS[key] = chunk
    return chunk


_PACK_FLOAT = struct.Struct(">cd").pack  # b"D" + binary64, one call
_INT_HEADS = tuple(b"I" + _Q.pack(n) for n in range(17))  # b"I" Q(n) for ints up to 128 bits
_ORDERS: dict[tuple[str, ...], tuple[tuple[str, bytes], ...]] = {}  # a dict's keys -> sorted, encoded
_ORDERS_MAX = 1024


def _order(value: dict[Any, Any]) -> tuple[tuple[str, bytes], ...]:
    """The dict's keys in code point order with their encodings (cached per key set: a
    record's dicts come in a few fixed shapes)."""
    keys = tuple(value)
    order = _ORDERS.get(keys)
    if order is None:
        order = tuple((key, _KEYS.get(key) or _key(key)) for key in sorted(value))  # mixed keys fail here
        if len(_ORDERS) < _ORDERS_MAX:
            _ORDERS[keys] = order
    return order


def _fast_walk(value: Any, out: list[bytes]) -> None:
    put = out.append
    t = type(value)
    if t is float:
        put(_PACK_FLOAT(b"D", value))
    elif t is dict:
        put(b"M" + _Q.pack(len(value)))
        for key, key_bytes in _order(value):
            put(key_bytes)
            item = value[key]
            it = type(item)
            # the scalars a record is made of, inline: a call per leaf is most of the cost
            if it is float:
                put(_PACK_FLOAT(b"D", item))
            elif it is int:
                raw = item.to_bytes(item.bit_length() // 8 + 1, "big", signed=True)
                put(_INT_HEADS[len(raw)] + raw if len(raw) < 17 else b"I" + _Q.pack(len(raw)) + raw)
            else:
                _fast_walk(item, out)
    elif t is int:
        raw = value.to_bytes(value.bit_length() // 8 + 1, "big", signed=True)
        put(_INT_HEADS[len(raw)] + raw if len(raw) < 17 else b"I" + _Q.pack(len(raw)) + raw)
    elif t is str:
        raw = value.encode("utf-8")
        put(b"S" + _Q.pack(len(raw)) + raw)
    elif t is list or t is tuple:
        put(b"L" + _Q.pack(len(value)))
        for item in value:
            _fast_walk(item, out)
    elif t is bool:
        put(b"T" if value else b"F")
    elif value is None:
        put(b"N")
    elif t is bytes:
        put(b"B" + _Q.pack(len(value)))
        put(value)
    else:
        sink = _BufferSink()
        _walk(value, sink)
        put(bytes(sink.buf))


def feed(hasher: Hasher, value: object) -> None:
    """Stream ``encode(value)`` into a hashlib object; large byte buffers are not copied.

    Raises:
        TypeError: the value (or something inside it) has no canonical encoding.
    """
    sink = _HashSink(hasher)
    sink.write(MAGIC)
    _walk(value, sink)
    sink.flush()


def byte_view(data: object) -> memoryview:
    """A flat, zero-copy byte view of a bytes-like object or contiguous numpy array.

    Falls back to one copy only for non-contiguous buffers.

    Raises:
        TypeError: ``data`` does not expose a buffer.
    """
    if isinstance(data, np.ndarray):
        arr = data if data.flags.c_contiguous else np.ascontiguousarray(data)
        return arr.reshape(-1).view(np.uint8).data  # the same view as memoryview(); typed for Python < 3.12
    view = memoryview(data)  # type: ignore[arg-type]
    if view.c_contiguous:
        return view if view.format == "B" and view.ndim == 1 else view.cast("B")
    return memoryview(view.tobytes())


def _write_len(sink: _BufferSink | _HashSink, tag: bytes, n: int) -> None:
    sink.write(tag + _Q.pack(n))


def _write_bytes(sink: _BufferSink | _HashSink, data: memoryview | bytes) -> None:
    sink.write(b"B" + _Q.pack(len(data)))
    sink.write(data)


def _write_str(sink: _BufferSink | _HashSink, text: str) -> None:
    raw = text.encode("utf-8")
    sink.write(b"S" + _Q.pack(len(raw)) + raw)


def _walk(value: object, sink: _BufferSink | _HashSink) -> None:
    if value is None:
        sink.write(b"N")
    elif isinstance(value, (bool, np.bool_)):
        sink.write(b"T" if value else b"F")
    elif isinstance(value, (int, np.integer)):
        n = int(value)
        raw = n.to_bytes(n.bit_length() // 8 + 1, "big", signed=True)
        sink.write(b"I" + _Q.pack(len(raw)) + raw)
    elif isinstance(value, (float, np.floating)):
        sink.write(b"D" + _D.pack(float(value)))
    elif isinstance(value, str):
        _write_str(sink, value)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        _write_bytes(sink, byte_view(value))
    elif isinstance(value, np.ndarray):
        _walk_array(value, sink)
    elif isinstance(value, array.array):
        if value.typecode == "B":
            _write_bytes(sink, byte_view(value))
        else:
            _walk(value.tolist(), sink)
    elif isinstance(value, (list, tuple)):
        _write_len(sink, b"L", len(value))
        for item in value:
            _walk(item, sink)
    elif isinstance(value, Mapping):
        keys = list(value.keys())
        for key in keys:
            if not isinstance(key, str):
                raise TypeError(f"canonical mappings need str keys, got {key!r}")
        _write_len(sink, b"M", len(keys))
        for key in sorted(keys):
            _write_str(sink, key)
            _walk(value[key], sink)
    else:
        raise TypeError(f"no canonical encoding for {type(value).__name__}; call to_plain first")


def _walk_array(arr: np.ndarray, sink: _BufferSink | _HashSink) -> None:
    if arr.dtype == np.uint8 and arr.ndim == 1:
        _write_bytes(sink, byte_view(arr))
        return
    kind = arr.dtype.kind
    if kind not in "biufc":
        raise TypeError(f"no canonical encoding for numpy dtype {arr.dtype}")
    if arr.dtype.itemsize > 1 and arr.dtype.byteorder != ">":
        arr = arr.astype(arr.dtype.newbyteorder(">"))
    sink.write(b"A")
    _write_str(sink, f"{kind}{arr.dtype.itemsize}")
    sink.write(_Q.pack(arr.ndim) + b"".join(_Q.pack(d) for d in arr.shape))
    data = byte_view(arr)
    sink.write(_Q.pack(len(data)))
    sink.write(data)


def to_plain(msg: object) -> object:
    """Flatten a message (rclpy, rosbags or core.values form) to a plain value.

    Nested messages become dicts keyed by field name; uint8/octet sequences become
    bytes; other numeric sequences become lists of Python int/float/bool; numpy scalars
    become Python scalars. The same message gives the same plain value in all forms.
    Dataclass fields annotated ``float`` holding an int are turned into floats (the
    message would hold a float64). Dunder fields and rosbags' placeholder field of empty
    messages are dropped.

    Raises:
        TypeError: something has no plain form (or a mapping has a non-str key).
    """
    spec = _ROSBAGS_FIELDS.get(type(msg))
    if spec is not None:
        return _rosbags_to_plain(msg, spec)
    if msg is None or isinstance(msg, (bool, str)):
        return msg
    if isinstance(msg, int):
        return int(msg)  # IntEnum and friends become plain ints
    if isinstance(msg, float):
        return float(msg)
    if isinstance(msg, np.generic):
        return to_plain(msg.item())
    if isinstance(msg, bytes):
        return msg
    if isinstance(msg, (bytearray, memoryview)):
        return bytes(byte_view(msg))
    if isinstance(msg, np.ndarray):
        if msg.dtype == np.uint8 and msg.ndim == 1:
            return msg.tobytes()
        if msg.dtype.kind == "O":
            return [to_plain(x) for x in msg.tolist()]
        return msg.tolist()
    if isinstance(msg, array.array):
        return msg.tobytes() if msg.typecode == "B" else msg.tolist()
    if isinstance(msg, Mapping):
        out: dict[str, object] = {}
        for key, val in msg.items():
            if not isinstance(key, str):
                raise TypeError(f"plain mappings need str keys, got {key!r}")
            out[key] = to_plain(val)
        return out
    if isinstance(msg, (list, tuple)):
        return [to_plain(x) for x in msg]
    fields_of = getattr(type(msg), "get_fields_and_field_types", None)
    if callable(fields_of):
        return _rclpy_to_plain(msg, fields_of())
    if dataclasses.is_dataclass(msg) and not isinstance(msg, type):
        return _dataclass_to_plain(msg)
    raise TypeError(f"no plain form for {type(msg).__name__}")


def _rclpy_to_plain(msg: object, field_types: Mapping[str, str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, typ in field_types.items():
        val = getattr(msg, name)
        if _BYTE_SEQ_TYPE.match(typ):
            out[name] = _as_bytes(val)
        elif typ in ("octet", "byte") and isinstance(val, (bytes, bytearray)):
            out[name] = val[0] if len(val) == 1 else int.from_bytes(val, "big")
        else:
            out[name] = to_plain(val)
    return out


def _as_bytes(val: object) -> bytes:
    if isinstance(val, (list, tuple)):
        if all(isinstance(x, (bytes, bytearray)) for x in val):
            return b"".join(val)
        return bytes(int(x) for x in val)
    if isinstance(val, np.ndarray):
        return np.ascontiguousarray(val, dtype=np.uint8).tobytes()
    return bytes(byte_view(val))


# rosbags message class -> (field name, annotated float) of its fields, in order. The
# recorder flattens four rosbags messages a step; dataclasses.fields() each time cost more
# than the rest of its work.
_ROSBAGS_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {}


def _rosbags_to_plain(msg: Any, spec: tuple[tuple[str, bool], ...]) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, is_float in spec:
        value = getattr(msg, name)
        t = type(value)
        if t is int:
            out[name] = float(value) if is_float else value
        elif t is float or t is str or t is bool:
            out[name] = value
        else:
            out[name] = to_plain(value)
    return out


def _dataclass_to_plain(msg: object) -> dict[str, object]:
    is_rosbags = hasattr(type(msg), "__msgtype__")
    if is_rosbags and type(msg) not in _ROSBAGS_FIELDS:
        _ROSBAGS_FIELDS[type(msg)] = tuple(
            (f.name, f.type in ("float", float))
            for f in dataclasses.fields(msg)  # type: ignore[arg-type]
            if not f.name.startswith("__") and f.name != _ROSBAGS_EMPTY_FIELD
        )
    out: dict[str, object] = {}
    for f in dataclasses.fields(msg):  # type: ignore[arg-type]
        name = f.name
        if name.startswith("__") or (is_rosbags and name == _ROSBAGS_EMPTY_FIELD):
            continue
        val = getattr(msg, name)
        if f.type in ("float", float) and isinstance(val, int) and not isinstance(val, bool):
            val = float(val)
        out[name] = to_plain(val)
    return out


def strip_wall(plain: Mapping[str, object]) -> dict[str, object]:
    """A copy without any key starting with ``wall_``, at any depth (lists included).

    Wall-clock readings differ on every run, so they never enter a digest.
    """
    return {k: _strip(v) for k, v in plain.items() if not (isinstance(k, str) and k.startswith("wall_"))}


_LEAVES = (float, int, str, bool, bytes, type(None))  # exact types: no ABC check for them


def _strip(value: object) -> object:
    t = type(value)
    if t in _LEAVES:
        return value
    if t is dict or isinstance(value, Mapping):
        return strip_wall(value)  # type: ignore[arg-type]
    if t is list or t is tuple or isinstance(value, (list, tuple)):
        return [_strip(v) for v in value]  # type: ignore[attr-defined]
    return value
