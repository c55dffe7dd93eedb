"""Fault-injection specs: the scripted ways a run is broken on purpose to prove it refuses.

Each refusal must be shown to fire at the right step; a fault names what to break and at
which step, and each node reads only the faults it injects. Specs round-trip through
``specs()`` so a manifest or a ROS string-array parameter carries exactly the plan.

Accepted forms (K is a step >= 0)::

    drop_frame@K                 the bridge drops the camera frames of step K
    stale_frame@K                the bridge stamps step K's frames with another time
    rig_offset=METRES,DEGREES    frames are rendered this far off the state pose
    time_offset=US@K             the engine's time is off by US microseconds at step K
    jitter=MAX_MS                up to MAX_MS of wall-clock delay in bridge and driver
    perturb_action=EPS@K         the driver perturbs its action by EPS at step K
    perturb_state=EPS@K          the bridge perturbs the observed state by EPS at step K
    kill=NODE@K                  NODE (sim_bridge, driver, recorder) dies at step K
    stall=NODE@K                 NODE stops answering (hangs) at step K
    lose_answer=NODE@K           NODE's answer at step K is lost once on its way (the recorder
                                 answers once, Finish: K is the number of steps it expects)
    flip_pixel=CAMERA@K          the bridge changes one pixel of CAMERA's frame at step K
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from simforge_ros.core.errors import ConfigError, Problem
from simforge_ros.core.limits import MAX_MAGNITUDE
from simforge_ros.core.limits import MAX_TIME_US as MAX_OFFSET_US

NODES: tuple[str, ...] = ("sim_bridge", "driver", "recorder")
"""The nodes a kill, stall or lose_answer fault may name."""

_NODE_KINDS = ("kill", "stall", "lose_answer")
"""The fault kinds that name a node (one of NODES)."""

FORMS: dict[str, str] = {
    "drop_frame": "drop_frame@K",
    "stale_frame": "stale_frame@K",
    "rig_offset": "rig_offset=METRES,DEGREES",
    "time_offset": "time_offset=US@K",
    "jitter": "jitter=MAX_MS",
    "perturb_action": "perturb_action=EPS@K",
    "perturb_state": "perturb_state=EPS@K",
    "kill": "kill=NODE@K",
    "stall": "stall=NODE@K",
    "lose_answer": "lose_answer=NODE@K",
    "flip_pixel": "flip_pixel=CAMERA@K",
}
"""The accepted form of each fault kind."""

KINDS: tuple[str, ...] = tuple(FORMS)

_TARGETS: dict[str, tuple[str, ...]] = {
    "drop_frame": ("sim_bridge",),
    "stale_frame": ("sim_bridge",),
    "rig_offset": ("sim_bridge",),
    "time_offset": ("sim_bridge",),
    "perturb_state": ("sim_bridge",),
    "perturb_action": ("driver",),
    "jitter": ("sim_bridge", "driver"),
    "flip_pixel": ("sim_bridge",),
}

_STEP = r"(?P<step>\d+)"
_REAL = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_PATTERNS: dict[str, re.Pattern[str]] = {
    "drop_frame": re.compile(rf"drop_frame@{_STEP}"),
    "stale_frame": re.compile(rf"stale_frame@{_STEP}"),
    "rig_offset": re.compile(rf"rig_offset=(?P<m>{_REAL}),(?P<deg>{_REAL})"),
    "time_offset": re.compile(rf"time_offset=(?P<us>[+-]?\d+)@{_STEP}"),
    "jitter": re.compile(rf"jitter=(?P<ms>{_REAL})"),
    "perturb_action": re.compile(rf"perturb_action=(?P<eps>{_REAL})@{_STEP}"),
    "perturb_state": re.compile(rf"perturb_state=(?P<eps>{_REAL})@{_STEP}"),
    "kill": re.compile(rf"kill=(?P<node>[A-Za-z_]+)@{_STEP}"),
    "stall": re.compile(rf"stall=(?P<node>[A-Za-z_]+)@{_STEP}"),
    "lose_answer": re.compile(rf"lose_answer=(?P<node>[A-Za-z_]+)@{_STEP}"),
    "flip_pixel": re.compile(rf"flip_pixel=(?P<camera>[A-Za-z0-9_]+)@{_STEP}"),
}
_ALL_FORMS = "one of " + ", ".join(FORMS.values()) + f" (K a step >= 0, NODE in {', '.join(NODES)})"


@dataclass(frozen=True)
class Fault:
    """One injected fault; only the value fields of its kind are set."""

    kind: str
    step: int | None = None
    offset_m: float | None = None
    offset_deg: float | None = None
    offset_us: int | None = None
    max_jitter_ms: float | None = None
    eps: float | None = None
    node: str | None = None
    camera: str | None = None

    def spec(self) -> str:
        """The spec string that parses back to this fault."""
        at = f"@{self.step}"
        if self.kind in ("drop_frame", "stale_frame"):
            return f"{self.kind}{at}"
        if self.kind == "rig_offset":
            return f"rig_offset={self.offset_m!r},{self.offset_deg!r}"
        if self.kind == "time_offset":
            return f"time_offset={self.offset_us}{at}"
        if self.kind == "jitter":
            return f"jitter={self.max_jitter_ms!r}"
        if self.kind in ("perturb_action", "perturb_state"):
            return f"{self.kind}={self.eps!r}{at}"
        if self.kind in _NODE_KINDS:
            return f"{self.kind}={self.node}{at}"
        if self.kind == "flip_pixel":
            return f"flip_pixel={self.camera}{at}"
        raise ValueError(f"unknown fault kind {self.kind!r}")

    def targets(self) -> tuple[str, ...]:
        """The nodes that inject this fault."""
        if self.kind in _NODE_KINDS:
            return (self.node,) if self.node else ()
        return _TARGETS[self.kind]


def _bad(spec: str, expected: str) -> ConfigError:
    return ConfigError.single("--inject", spec, expected, spec)


def parse_fault(spec: str) -> Fault:
    """Parse one fault spec.

    Raises:
        ConfigError: (source "--inject", field = the spec) the spec is malformed: unknown
            kind, negative or non-whole step, non-numeric or non-finite value, negative
            jitter, or unknown node.
    """
    if not isinstance(spec, str):
        raise ConfigError.single("--inject", repr(spec), _ALL_FORMS, spec)
    text = spec.strip()
    kind = re.split(r"[@=]", text, maxsplit=1)[0]
    pattern = _PATTERNS.get(kind)
    if pattern is None:
        raise _bad(spec, _ALL_FORMS)
    terms = (["K a step >= 0"] if "@K" in FORMS[kind] else []) + (
        [f"NODE in {', '.join(NODES)}"] if kind in _NODE_KINDS else []
    )
    expected = f"{FORMS[kind]} ({', '.join(terms)})" if terms else FORMS[kind]

    def bounded(bound: str) -> str:  # the expected form with one more bound in its parentheses
        return f"{FORMS[kind]} ({', '.join([*terms, bound])})"

    match = pattern.fullmatch(text)
    if match is None:
        raise _bad(spec, expected)
    groups = match.groupdict()
    reals = [groups[k] for k in ("m", "deg", "ms", "eps") if groups.get(k) is not None]
    if not all(math.isfinite(float(r)) for r in reals):
        raise _bad(spec, bounded("values finite"))
    if any(abs(float(groups[k])) > MAX_MAGNITUDE for k in ("m", "eps") if groups.get(k) is not None):
        raise _bad(spec, bounded(f"values within ±{MAX_MAGNITUDE:.0f}"))
    if groups.get("us") is not None and abs(int(groups["us"])) > MAX_OFFSET_US:
        raise _bad(spec, bounded(f"US within ±{MAX_OFFSET_US}"))
    step = int(groups["step"]) if groups.get("step") is not None else None
    if kind == "rig_offset":
        return Fault(kind, offset_m=float(groups["m"]), offset_deg=float(groups["deg"]))
    if kind == "time_offset":
        return Fault(kind, step, offset_us=int(groups["us"]))
    if kind == "jitter":
        max_ms = float(groups["ms"])
        if max_ms < 0:
            raise _bad(spec, "jitter=MAX_MS with MAX_MS >= 0")
        return Fault(kind, max_jitter_ms=max_ms)
    if kind in ("perturb_action", "perturb_state"):
        return Fault(kind, step, eps=float(groups["eps"]))
    if kind in _NODE_KINDS:
        if groups["node"] not in NODES:
            raise _bad(spec, expected)
        return Fault(kind, step, node=groups["node"])
    if kind == "flip_pixel":
        return Fault(kind, step, camera=groups["camera"])
    return Fault(kind, step)


CAMERA_FAULTS = ("drop_frame", "stale_frame", "flip_pixel")
"""The faults that act on a camera's frames: they need a camera, and a step with frames."""


@dataclass(frozen=True)
class FaultPlan:
    """The faults of a run, in the order given."""

    faults: tuple[Fault, ...] = ()

    @classmethod
    def parse(cls, specs: Sequence[str]) -> FaultPlan:
        """Parse every spec; all malformed specs are reported in one ConfigError.

        Raises:
            ConfigError: a spec is malformed, or two faults would collide (the same
                kind twice at one step, the same node killed twice, or a second
                rig_offset or jitter).
        """
        if isinstance(specs, str):
            specs = [specs]
        faults: list[Fault] = []
        problems: list[Problem] = []
        seen: set[tuple[str, int | None, str | None]] = set()
        for spec in specs:
            try:
                fault = parse_fault(spec)
            except ConfigError as err:
                problems.extend(err.problems)
                continue
            key = (fault.kind, None if fault.kind in ("kill", "stall") else fault.step, fault.node)
            if key in seen:
                problems.append(
                    Problem("--inject", spec, f"at most one {FORMS[fault.kind]} per step/node", spec)
                )
                continue
            seen.add(key)
            faults.append(fault)
        if problems:
            raise ConfigError(problems)
        return cls(tuple(faults))

    def specs(self) -> list[str]:
        """The spec strings of the plan (parse(specs()) == self)."""
        return [f.spec() for f in self.faults]

    def for_node(self, node_name: str) -> FaultPlan:
        """The faults ``node_name`` injects (empty for a node that injects none)."""
        return FaultPlan(tuple(f for f in self.faults if node_name in f.targets()))

    def unfired(self, steps: int) -> list[Fault]:
        """The faults a run of ``steps`` counted steps never reached: a plan that was meant
        to break the run and did not, which a user should hear about."""
        def reached(f: Fault) -> bool:
            if f.step is None:
                return True
            if f.kind == "lose_answer" and f.node == "recorder":
                return f.step == steps  # the recorder's one answer, to Finish of `steps` steps
            return f.step < steps

        return [f for f in self.faults if not reached(f)]

    def at(self, kind: str, step: int) -> Fault | None:
        """The fault of ``kind`` at ``step``, or None.

        Raises:
            ValueError: ``kind`` is not a fault kind (a typo would silently inject nothing).
        """
        _check_kind(kind)
        return next((f for f in self.faults if f.kind == kind and f.step == step), None)

    def first(self, kind: str) -> Fault | None:
        """The first fault of ``kind`` in the plan, or None.

        Raises:
            ValueError: ``kind`` is not a fault kind.
        """
        _check_kind(kind)
        return next((f for f in self.faults if f.kind == kind), None)

    def __iter__(self) -> Iterator[Fault]:
        return iter(self.faults)

    def __len__(self) -> int:
        return len(self.faults)

    def __bool__(self) -> bool:
        return bool(self.faults)


def _check_kind(kind: str) -> None:
    if kind not in FORMS:
        raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(KINDS)}")
