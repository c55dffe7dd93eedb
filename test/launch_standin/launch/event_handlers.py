"""Stand-in for launch.event_handlers (test double; see ../README.md)."""

from __future__ import annotations

from typing import Any


class OnProcessExit:
    def __init__(self, *, target_action: Any = None, on_exit: Any, **kwargs: Any) -> None:
        self.target_action, self.on_exit = target_action, on_exit


class OnShutdown:
    def __init__(self, *, on_shutdown: Any, **kwargs: Any) -> None:
        self.on_shutdown = on_shutdown
