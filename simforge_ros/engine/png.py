"""A tiny PNG encoder (zlib + struct), so snapshots need no imaging library.

RGB 8-bit, every row filtered with 'Up' (difference to the row above), which keeps flat
synthetic images small. The output depends only on the pixels and the zlib level.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def encode_png(pixels: np.ndarray, level: int = 9) -> bytes:
    """PNG bytes of an H x W x 3 uint8 RGB image."""
    if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ValueError(f"expected H x W x 3 uint8, got {pixels.dtype} {pixels.shape}")
    height, width, _ = pixels.shape
    rows = pixels.reshape(height, width * 3)
    up = rows.copy()
    up[1:] = rows[1:] - rows[:-1]  # uint8 arithmetic wraps mod 256, as the Up filter wants
    filters = np.full((height, 1), 2, dtype=np.uint8)
    filters[0, 0] = 0
    up[0] = rows[0]
    raw = np.hstack([filters, up]).tobytes()
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        _SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(raw, level))
        + _chunk(b"IEND", b"")
    )


def write_png(path: str | Path, pixels: np.ndarray) -> Path:
    """Write pixels as a PNG file; returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(encode_png(pixels))
    return out


def decode_png(data: bytes) -> np.ndarray:
    """Decode what encode_png writes (RGB 8-bit, filters None/Up only); used by tests."""
    if not data.startswith(_SIGNATURE):
        raise ValueError("not a PNG")
    pos = len(_SIGNATURE)
    idat = b""
    width = height = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, 1 + width * 3)
    rows = raw[:, 1:].copy()
    for r in range(height):
        if raw[r, 0] == 2 and r > 0:
            rows[r] = rows[r] + rows[r - 1]
        elif raw[r, 0] not in (0, 2):
            raise ValueError(f"unsupported PNG filter {raw[r, 0]}")
    return rows.reshape(height, width, 3)
