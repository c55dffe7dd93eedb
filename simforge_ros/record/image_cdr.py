"""Reading a sensor_msgs/Image's header and pixel bytes straight from its CDR bytes (and
the stamp of a message that starts with one).

The recorder needs the stamp, the size, the encoding and a zero-copy view of the pixels
to hash a frame, nothing else; deserialising the whole message would copy ~170 KB per
camera per step. Of /clock and camera_info it needs only the stamp. The frame hash is
over those field values (core.digest.frame_hash), never over the CDR bytes themselves, so
`simforge verify`, which deserialises with rosbags, recomputes the same hash.
"""

from __future__ import annotations

import dataclasses
import struct

# -- sensor_msgs/Image straight from CDR ----------------------------------------------------
_U32 = struct.Struct("<I").unpack_from
_I32U32 = struct.Struct("<iI").unpack_from
_CDR_LE = (b"\x00\x01", b"\x00\x03")  # CDR / PL_CDR little endian


def leading_stamp_ns(raw: bytes | memoryview) -> int | None:
    """The stamp (ns) a serialised message starts with: rosgraph_msgs/Clock's clock, or a
    std_msgs/Header's stamp (CameraInfo, Image, ...).

    Returns None for anything but plain little-endian CDR long enough to hold a stamp
    (the caller then deserialises the message the ordinary way, which says what is wrong).
    """
    if len(raw) < 12 or bytes(raw[:2]) not in _CDR_LE:
        return None
    sec, nanosec = _I32U32(raw, 4)
    return int(sec) * 1_000_000_000 + int(nanosec)


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
