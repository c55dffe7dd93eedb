"""Simulator backends behind the sim bridge, picked by name from a registry.

The bridge node only speaks :class:`SimBackend`; the embedded engine is the default, and a
CARLA 0.10 backend will register here under ``carla``.
"""

from __future__ import annotations

from simforge_ros.backends.base import BackendInfo, RenderedFrame, SimBackend
from simforge_ros.backends.embedded import EmbeddedBackend

BACKENDS: dict[str, type] = {"embedded": EmbeddedBackend}

__all__ = ["BACKENDS", "BackendInfo", "EmbeddedBackend", "RenderedFrame", "SimBackend"]
