"""Stand-in for launch.substitutions (test double; see ../README.md)."""

from __future__ import annotations

import os
from typing import Any


class EnvironmentVariable:
    def __init__(self, name: str, *, default_value: str = "") -> None:
        self.name, self.default_value = name, default_value

    def perform(self, context: Any) -> str:
        return os.environ.get(self.name, self.default_value)


class LaunchConfiguration:
    def __init__(self, variable_name: str, *, default: str | None = None) -> None:
        self.variable_name, self.default = variable_name, default

    def perform(self, context: Any) -> str:
        """Upstream raises for a configuration never set; every one here is declared with a default."""
        return str(context.launch_configurations[self.variable_name])
