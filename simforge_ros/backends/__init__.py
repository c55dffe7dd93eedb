"""Simulator backends behind the sim bridge, picked by name.

The bridge node only speaks :class:`SimBackend`. ``embedded`` (the default) is this
package's own engine; ``carla`` drives a CARLA 0.10 server in synchronous mode
(backends.carla_backend), imported only when asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simforge_ros.backends.base import BackendInfo, BackendUnavailable, RenderedFrame, SimBackend
from simforge_ros.backends.embedded import EmbeddedBackend

BACKENDS: tuple[str, ...] = ("embedded", "carla")


def make_backend(name: str, values: Mapping[str, Any], tick_us: int) -> SimBackend:
    """The backend ``name`` for the bridge's parameters ``values``.

    Raises: ValueError: an unknown name; ScenarioError (a ValueError) for a scenario the
        backend cannot load; BackendUnavailable: no CARLA Python API.
    """
    if name == "embedded":
        return EmbeddedBackend(values["scenario"], tick_us, values["width"], values["height"])
    if name == "carla":
        from simforge_ros.backends.carla_backend import CarlaBackend, CarlaOptions, carla_cameras

        options = CarlaOptions(
            host=values["carla_host"], port=values["carla_port"], timeout_ms=values["carla_timeout_ms"],
            town=values["carla_town"], vehicle=values["carla_vehicle"], cameras=carla_cameras(values["cameras"]))
        return CarlaBackend(values["scenario"], tick_us, values["width"], values["height"], options)
    raise ValueError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}")


__all__ = [
    "BACKENDS", "BackendInfo", "BackendUnavailable", "EmbeddedBackend", "RenderedFrame", "SimBackend", "make_backend",
]
