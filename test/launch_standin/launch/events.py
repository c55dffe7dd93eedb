"""Stand-in for launch.events (test double; see ../README.md)."""

from __future__ import annotations


class Shutdown:
    def __init__(self, *, reason: str = "reason not given", due_to_sigint: bool = False) -> None:
        self.reason, self.due_to_sigint = reason, due_to_sigint
