"""The per-tick world digest: SHA-256 chained over a canonical state encoding.

digest_0   = sha256(scenario file bytes || seed as big-endian uint64)   (the run's root)
digest_k   = sha256(digest_{k-1} || encode(state after k ticks))         k = 0, 1, 2, ...

So the digest at tick k covers the state at tick 0..k (tick 0 is chained when the engine is
built). encode() packs, big-endian: tick, t_us (int64); ego x, y, yaw, speed, steer, accel,
steer command, accel command (float64); every actor x, y, yaw in scenario order (float64);
every signal state code in scenario order (int64: red 0, yellow 1, green 2). Two runs agree
on the digest at a tick only if every one of those bits agrees at every tick so far.
"""

from __future__ import annotations

import hashlib
import struct

from simforge_ros.core.values import Pose2D
from simforge_ros.engine.vehicle import EgoState


def root_digest(source_bytes: bytes, seed: int) -> bytes:
    """The chain's start: the scenario content and the seed."""
    return hashlib.sha256(source_bytes + struct.pack(">Q", seed)).digest()


def encode_state(tick: int, t_us: int, ego: EgoState, actors: list[Pose2D], signal_codes: list[int]) -> bytes:
    """Canonical bytes of the world state at one tick."""
    parts = [
        struct.pack(">qq", tick, t_us),
        struct.pack(
            ">8d",
            ego.pose.x_m,
            ego.pose.y_m,
            ego.pose.yaw_rad,
            ego.speed_mps,
            ego.steer_rad,
            ego.accel_mps2,
            ego.steer_cmd_rad,
            ego.accel_cmd_mps2,
        ),
    ]
    parts += [struct.pack(">3d", p.x_m, p.y_m, p.yaw_rad) for p in actors]
    parts.append(struct.pack(f">{len(signal_codes)}q", *signal_codes))
    return b"".join(parts)


def chain(previous: bytes, payload: bytes) -> bytes:
    """Next link of the chain."""
    return hashlib.sha256(previous + payload).digest()
