"""The simulation time a recorded message carries, which the recorder logs it at and verify
holds the bag's log times to (one rule for both, so they cannot drift apart).

No rclpy here: the recorder passes messages deserialised with the bag's typestore, verify
the bag's own; both have the same field names.
"""

from __future__ import annotations

from typing import Any


def stamp_ns(stamp: Any) -> int:
    """A builtin_interfaces/Time as integer nanoseconds."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def carried_ns(msg: Any) -> int | None:
    """The time ``msg`` carries, in ns: its ``t_us``, its header's stamp, or the stamp of
    the first transform (a TFMessage) or marker (a MarkerArray); None for one that carries
    none (/clock is read apart: its time is ``clock``; the run's status and parameters)."""
    if hasattr(msg, "t_us"):
        return int(msg.t_us) * 1000
    if hasattr(msg, "header"):
        return stamp_ns(msg.header.stamp)
    for field in ("transforms", "markers"):  # /tf and /tf_static's (the run's origin), /simforge/markers
        items = getattr(msg, field, None)
        if items:
            return stamp_ns(items[0].header.stamp)
    return None
