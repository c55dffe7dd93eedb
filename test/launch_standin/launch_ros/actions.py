"""Stand-in for launch_ros.actions (test double; see ../README.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# what launch_ros's Node hands on to launch's ExecuteProcess (its **kwargs)
_EXECUTE_PROCESS = frozenset({"output", "sigterm_timeout", "sigkill_timeout", "additional_env", "env", "cwd",
                              "emulate_tty", "respawn", "respawn_delay", "respawn_max_retries", "shell", "prefix",
                              "log_cmd", "on_exit", "cached_output", "name", "output_format"})


class Node:
    def __init__(self, *, executable: str, package: str | None = None, name: str | None = None,
                 namespace: str | None = None, exec_name: str | None = None,
                 parameters: Iterable[Any] | None = None, remappings: Iterable[Any] | None = None,
                 ros_arguments: Iterable[Any] | None = None, arguments: Iterable[Any] | None = None,
                 **kwargs: Any) -> None:
        unknown = set(kwargs) - _EXECUTE_PROCESS
        if unknown:
            raise TypeError(f"Node() got unexpected keyword arguments {sorted(unknown)}")
        self.executable, self.package, self.name = executable, package, name
        self.parameters = list(parameters or [])
        self.kwargs = kwargs
