"""numpy <-> sensor_msgs/Image, in place of cv_bridge.

The PyPI ``cv-bridge`` is a repackaged ROS 1 build that fails on numpy 2 (``tostring``) and
OpenCV 5, and no ROS 2 cv_bridge installs from PyPI; this small codec covers the encodings
the product uses, with an honest ``step`` and clear refusals. Names follow cv_bridge.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# encoding -> (channels, dtype)
ENCODINGS: dict[str, tuple[int, np.dtype[Any]]] = {
    "rgb8": (3, np.dtype(np.uint8)),
    "bgr8": (3, np.dtype(np.uint8)),
    "mono8": (1, np.dtype(np.uint8)),
    "32FC1": (1, np.dtype("<f4")),
}


class ImageCodecError(ValueError):
    """An array or message that does not fit the encoding it claims."""


def _layout(encoding: str) -> tuple[int, np.dtype[Any]]:
    try:
        return ENCODINGS[encoding]
    except KeyError:
        raise ImageCodecError(
            f"encoding {encoding!r} is not supported; expected one of {sorted(ENCODINGS)}"
        ) from None


def numpy_to_imgmsg(array: np.ndarray, encoding: str = "rgb8", msg: Any = None) -> Any:
    """Fill a sensor_msgs/Image (a new one unless ``msg`` is given) from an HxW[xC] array.

    Raises:
        ImageCodecError: unknown encoding, or an array whose shape or dtype does not match.
    """
    channels, dtype = _layout(encoding)
    if array.ndim == 2 and channels == 1:
        height, width = array.shape
    elif array.ndim == 3 and array.shape[2] == channels:
        height, width = array.shape[:2]
    else:
        raise ImageCodecError(
            f"array of shape {array.shape} does not fit {encoding!r}: expected HxW"
            + ("" if channels == 1 else f"x{channels}")
        )
    if array.dtype.newbyteorder("<") != dtype.newbyteorder("<") or array.dtype.kind != dtype.kind:
        raise ImageCodecError(f"array dtype {array.dtype} does not fit {encoding!r}: expected {dtype}")
    if msg is None:
        from sensor_msgs.msg import Image  # ROS message type: imported only where needed

        msg = Image()
    data = np.ascontiguousarray(array, dtype=dtype)
    msg.height = int(height)
    msg.width = int(width)
    msg.encoding = encoding
    msg.is_bigendian = 0
    msg.step = int(width * channels * dtype.itemsize)
    msg.data = data.tobytes()
    return msg


def imgmsg_to_numpy(msg: Any) -> np.ndarray:
    """A read-only HxW[xC] view of an Image message's pixels (rclpy or rosbags message).

    Raises:
        ImageCodecError: unknown encoding, or a size/step that does not match the data.
    """
    channels, dtype = _layout(str(msg.encoding))
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    row = width * channels * dtype.itemsize
    if step < row:
        raise ImageCodecError(f"step {step} is shorter than a row of {row} bytes ({msg.encoding})")
    raw = msg.data
    buf = np.frombuffer(raw if not isinstance(raw, np.ndarray) else raw.tobytes(), dtype=np.uint8)
    if buf.size != step * height:
        raise ImageCodecError(
            f"data holds {buf.size} bytes; expected step*height = {step}*{height} = {step * height}"
        )
    if msg.is_bigendian and dtype.itemsize > 1:
        dtype = dtype.newbyteorder(">")
    rows = buf.reshape(height, step)[:, :row]
    pixels = np.ascontiguousarray(rows).view(dtype)
    shape = (height, width) if channels == 1 else (height, width, channels)
    return pixels.reshape(shape)
