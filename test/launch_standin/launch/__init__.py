"""Stand-in for ros2/launch's top level (test double; see ../README.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class LaunchDescription:
    def __init__(self, initial_entities: Iterable[Any] | None = None, *, deprecated_reason: str | None = None) -> None:
        self.entities = list(initial_entities or [])


class LaunchContext:
    """Upstream's is made by the launch service; of it, the launch configurations (a dict)."""

    def __init__(self, *, argv: Iterable[str] | None = None, noninteractive: bool = False) -> None:
        self.launch_configurations: dict[str, str] = {}
