"""Stand-in for launch.actions (test double; see ../README.md): each records its arguments."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


class DeclareLaunchArgument:
    def __init__(self, name: str, *, default_value: Any = None, description: str | None = None,
                 choices: Iterable[str] | None = None, **kwargs: Any) -> None:
        self.name, self.default_value, self.description = name, default_value, description


class EmitEvent:
    def __init__(self, *, event: Any, **kwargs: Any) -> None:
        self.event = event


class LogInfo:
    def __init__(self, *, msg: Any, **kwargs: Any) -> None:
        self.msg = msg


class OpaqueFunction:
    def __init__(self, *, function: Callable[..., Any], args: Iterable[Any] | None = None,
                 kwargs: dict[str, Any] | None = None, **left_over_kwargs: Any) -> None:
        self.function, self.args, self.kwargs = function, list(args or []), dict(kwargs or {})


class RegisterEventHandler:
    def __init__(self, event_handler: Any, **kwargs: Any) -> None:
        self.event_handler = event_handler


class SetEnvironmentVariable:
    def __init__(self, name: Any, value: Any, **kwargs: Any) -> None:
        self.name, self.value = name, value
