"""One clock: the decision period and the engine tick are typed once, as defaults, in
core.timing_contract; every node parameter and every tool that drives the engine without a
clock master (render, probe-driver, the benchmark's baseline) takes them from there."""

from __future__ import annotations

import inspect
import io
import tokenize
from pathlib import Path

from simforge_ros.benchmarks import compute
from simforge_ros.core import lockstep, timing_contract
from simforge_ros.core.timing_contract import DEFAULT_DECISION_US, DEFAULT_TICK_US
from simforge_ros.engine import snapshot, world
from simforge_ros.params import NODE_PARAMS

PACKAGE = Path(timing_contract.__file__).resolve().parents[1]


def _typed_periods(source: str) -> list[tuple[int, str]]:
    """(line, text) of every ``<...>decision_us = <non-zero number>`` or ``<...>tick_us``
    likewise in code (an assignment, an annotated default or a keyword argument; strings
    and comments are not code)."""
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
              if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT)]
    found = []
    for i, tok in enumerate(tokens):
        if tok.type != tokenize.NAME or not tok.string.lower().endswith(("decision_us", "tick_us")):
            continue
        j = i + 1
        if j + 1 < len(tokens) and tokens[j].string == ":":  # an annotation: skip its type
            j += 2
        value = tokens[j + 1] if j + 1 < len(tokens) and tokens[j].string == "=" else None
        if value is not None and value.type == tokenize.NUMBER and int(value.string.replace("_", ""), 0) != 0:
            found.append((tok.start[0], tok.line.strip()))
    return found


def test_the_scan_finds_a_typed_period():
    # the test below can fail: these are the forms it must catch
    assert len(_typed_periods("_DECISION_US = 100_000\n")) == 1
    assert len(_typed_periods("def f(tick_us: int = 20_000): pass\n")) == 1
    assert len(_typed_periods("Engine(sc, 0, tick_us=20_000)\n")) == 1
    assert _typed_periods("x = 'decision_us=100000'  # decision_us = 5\nself._decision_us = 0\n") == []


def test_no_module_but_the_timing_contract_types_a_period():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "timing_contract.py" and path.parent.name == "core":
            continue
        offenders += [f"{path.relative_to(PACKAGE)}:{n}: {line}" for n, line in _typed_periods(path.read_text())]
    assert offenders == [], "periods typed outside core.timing_contract:\n" + "\n".join(offenders)


def test_every_default_is_the_one_default():
    defaults = {p.name: p.default for node in NODE_PARAMS.values() for p in node}
    assert defaults["decision_us"] == DEFAULT_DECISION_US
    assert defaults["tick_us"] == DEFAULT_TICK_US
    assert lockstep.LoopConfig().decision_us == DEFAULT_DECISION_US
    assert inspect.signature(world.Engine).parameters["tick_us"].default == DEFAULT_TICK_US
    drive = inspect.signature(snapshot.drive_to_step).parameters
    assert (drive["decision_us"].default, drive["tick_us"].default) == (DEFAULT_DECISION_US, DEFAULT_TICK_US)
    assert (compute._DECISION_US, compute._TICK_US) == (DEFAULT_DECISION_US, DEFAULT_TICK_US)

