"""The project's errors: configuration problems and stable, named run refusals.

A run that breaks the timing contract must stop with a code that scripts, manifests and
humans can rely on, so every refusal has a fixed ``code`` string and a fixed process exit
code. Configuration errors are collected and reported all at once, so a user fixes every
problem in one edit instead of one per launch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

EXIT_COUNTED = 0
"""Process exit code of a run that completed and was counted."""
EXIT_FAILURE = 1
"""Process exit code of an unexpected failure that is not a named refusal."""
EXIT_USAGE = 2
"""Process exit code of a usage or configuration error (the argparse convention)."""


class SimforgeError(Exception):
    """Base of every error this project raises on purpose."""


_GOT_LIMIT = 200  # characters of a got's repr shown whole; a longer one is cut to _GOT_SHOWN
_GOT_SHOWN = 120


def cut_got(text: str) -> str:
    """A got's printed form as a problem shows it: whole up to _GOT_LIMIT characters, else
    its start and its length."""
    return text if len(text) <= _GOT_LIMIT else f"{text[:_GOT_SHOWN]}... ({len(text)} characters)"


@dataclass(frozen=True)
class Problem:
    """One configuration problem: where it came from, which field, what was expected."""

    source: str
    field: str
    expected: str
    got: object

    def __str__(self) -> str:
        got = repr(self.got)
        if not isinstance(self.got, Printed):
            # a whole file that is not the form asked for (a parameter file given /etc/passwd)
            # is named by its start, not echoed; a Printed got (another problem) stays whole
            got = cut_got(got)
        return f"{self.source}: {self.field}: expected {self.expected}, got {got}"

    @classmethod
    def parse(cls, line: str) -> Problem | None:
        """A problem back from its one-line form (what another process printed), or None.

        ``got`` comes back as its printed form, so ``str`` gives the same line again.
        """
        match = _PROBLEM_LINE.match(line.rstrip("\n"))
        if match is None:
            return None
        return cls(match["source"], match["field"], match["expected"], Printed(match["got"]))


def one_line(text: str, limit: int = 400) -> str:
    """``text`` on one line (whitespace runs made one space), its middle cut when longer
    than ``limit``: a refusal's detail is printed on one line, and the end of a long
    message (the last line of a TorchScript traceback) is the part that says what failed."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    keep = max(limit - 5, 2) // 2
    return f"{flat[:keep]} ... {flat[-keep:]}"


class Printed:
    """A value known only by how it was printed (its repr), e.g. by another process."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


# A field holds no colon and an expected form no ", got ": a got that quotes another
# problem (a scenario file's own error) stays whole instead of being split inside.
_PROBLEM_LINE = re.compile(r"^(?P<source>[^:\s]+): (?P<field>[^:]+): expected (?P<expected>.*?), got (?P<got>.*)$")


class ConfigError(SimforgeError):
    """Every problem found in a configuration, reported together (one line each)."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        items = tuple(problems)
        if not items:
            raise ValueError("ConfigError needs at least one Problem")
        for item in items:
            if not isinstance(item, Problem):
                raise TypeError(f"ConfigError takes Problem items, got {item!r}")
        # args keeps the constructor argument so the error pickles across processes.
        super().__init__(items)
        self.problems: tuple[Problem, ...] = items

    @classmethod
    def single(cls, source: str, field: str, expected: str, got: object) -> ConfigError:
        """A ConfigError holding exactly one problem."""
        return cls([Problem(source, field, expected, got)])

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)


class Refusal(SimforgeError):
    """A run stopped because it would break the timing contract (or could not go on).

    ``step`` is the step the refusal happened at; -1 means before step 0 (for example, a
    contract that cannot be built). Subclasses fix ``code`` and ``exit_code`` forever.
    """

    code: ClassVar[str]
    exit_code: ClassVar[int]

    def __init__(self, step: int, detail: str) -> None:
        if type(self) is Refusal:
            raise TypeError("Refusal is abstract; raise one of its coded subclasses")
        if isinstance(step, bool) or not isinstance(step, int) or step < -1:
            raise ValueError(f"refusal step must be an int >= -1, got {step!r}")
        # args mirrors the constructor so refusals pickle across processes.
        super().__init__(step, detail)
        self.step = step
        self.detail = detail

    def to_dict(self) -> dict[str, object]:
        """The refusal as plain JSON-able values (for manifests and RunStatus)."""
        return {"code": self.code, "step": self.step, "detail": self.detail}

    def __str__(self) -> str:
        return f"{self.code} {where(self.step)}: {self.detail}"


def where(step: object) -> str:
    """Where a run was refused, in words: "at step K", or "before step 0" for a refusal
    before any step (its manifest's step -1)."""
    return "before step 0" if isinstance(step, int) and step < 0 else f"at step {step}"


class TimeDrift(Refusal):
    """The engine's time is not exactly t(step)."""

    code = "time_drift"
    exit_code = 10


class RateNotMultiple(Refusal):
    """A period is not a whole number of ticks, steps or microseconds."""

    code = "rate_not_multiple"
    exit_code = 11


class MissingFrame(Refusal):
    """A camera frame the contract expects at this step did not come."""

    code = "missing_frame"
    exit_code = 12


class StaleFrame(Refusal):
    """A camera frame is stamped for another time than t(step)."""

    code = "stale_frame"
    exit_code = 13


class PoseTolerance(Refusal):
    """A frame was rendered for a pose too far from the observed state pose."""

    code = "pose_tolerance"
    exit_code = 14


class ParticipantTimeout(Refusal):
    """A participant did not answer within its deadline."""

    code = "participant_timeout"
    exit_code = 15


class ParticipantLost(Refusal):
    """A participant went away (process gone, service vanished) mid-run."""

    code = "participant_lost"
    exit_code = 16


class IncompleteRun(Refusal):
    """The run ended without every expected step recorded."""

    code = "incomplete_run"
    exit_code = 17


class ParticipantError(Refusal):
    """A participant failed unexpectedly."""

    code = "participant_error"
    exit_code = 18


class Aborted(Refusal):
    """The run was interrupted by the user."""

    code = "aborted"
    exit_code = 19


REFUSALS: dict[str, type[Refusal]] = {
    cls.code: cls
    for cls in (
        TimeDrift,
        RateNotMultiple,
        MissingFrame,
        StaleFrame,
        PoseTolerance,
        ParticipantTimeout,
        ParticipantLost,
        IncompleteRun,
        ParticipantError,
        Aborted,
    )
}
"""Every refusal class by its stable code."""


def refusal_from_code(code: str, step: int, detail: str) -> Refusal:
    """Rebuild a refusal reported by another process (e.g. a service's refusal_code).

    An unknown code becomes a ParticipantError whose detail keeps the unknown code text,
    so nothing a participant said is lost.
    """
    cls = REFUSALS.get(code)
    if cls is None:
        if not code:  # ok false and no code: "unknown refusal code '': driver: " before
            return ParticipantError(step, f"refused with no refusal code: {detail}")
        return ParticipantError(step, f"unknown refusal code {code!r}: {detail}")
    return cls(step, detail)
