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

import functools
import hashlib
import struct

from simforge_ros.core.values import Pose2D
from simforge_ros.engine.vehicle import EgoState


def root_digest(source_bytes: bytes, seed: int) -> bytes:
    """The chain's start: the scenario content and the seed."""
    return hashlib.sha256(source_bytes + struct.pack(">Q", seed)).digest()


@functools.lru_cache(maxsize=64)
def state_struct(n_actors: int, n_signals: int) -> struct.Struct:
    """The whole encode() layout for a world of that many actors and signals, compiled once.

    Big-endian standard sizes have no padding, so one pack gives the same bytes as packing
    the parts one by one and joining them.
    """
    return struct.Struct(f">qq8d{3 * n_actors}d{n_signals}q")


def encode_state(tick: int, t_us: int, ego: EgoState, actors: list[Pose2D], signal_codes: list[int]) -> bytes:
    """Canonical bytes of the world state at one tick."""
    p = ego.pose
    return state_struct(len(actors), len(signal_codes)).pack(
        tick,
        t_us,
        p.x_m,
        p.y_m,
        p.yaw_rad,
        ego.speed_mps,
        ego.steer_rad,
        ego.accel_mps2,
        ego.steer_cmd_rad,
        ego.accel_cmd_mps2,
        *[v for a in actors for v in (a.x_m, a.y_m, a.yaw_rad)],
        *signal_codes,
    )


def chain(previous: bytes, payload: bytes) -> bytes:
    """Next link of the chain."""
    return hashlib.sha256(previous + payload).digest()
