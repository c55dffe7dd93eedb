"""Find and load scenario files: repo layout and installed (ament / pip) layouts.

A name resolves to ``<dir>/<name>.yaml`` in the first of ``scenario_dirs()`` that has it.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import yaml

from simforge_ros.core.errors import Printed, one_line
from simforge_ros.core.yaml_file import UniqueKeyLoader, not_utf8, yaml_problem
from simforge_ros.engine.scenario import Scenario, ScenarioError
from simforge_ros.engine.schema import build_scenario
from simforge_ros.resources import find_dirs


class _Loader(UniqueKeyLoader):
    """PyYAML's safe loader, reading a number with an exponent and no dot (``5e1``), or a
    sign before its dot (``-.5``), as a float, as YAML 1.2 does (PyYAML follows YAML 1.1
    there and read the strings '5e1' and '-.5', refused as "expected a finite number"), and
    refusing a key given twice (the last one was kept silently)."""


_EXPONENT_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)[eE][-+]?[0-9]+$")
# Integers are decimal digits (underscores allowed: the docs write 9_000_000) or 0x hex:
# YAML 1.1's octal (0300, read as 192) and base 60 (1:40:00, read as 6000; 0:7.0 as the
# float 7.0) are no numbers here, and are refused where a number is expected.
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_INT_FORM = re.compile(r"^[-+]?(0|[1-9][0-9_]*|0x[0-9a-fA-F][0-9a-fA-F_]*)$")
_FLOAT_FORM = re.compile(r"""^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?
                    |[-+]?\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$""", re.X)
# a dict and lists of _Loader's own: the inherited ones are every other loader's too
_Loader.yaml_implicit_resolvers = {first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_INT, _FLOAT)]
                                   for first, resolvers in UniqueKeyLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(_INT, _INT_FORM, list("-+0123456789"))
_Loader.add_implicit_resolver(_FLOAT, _FLOAT_FORM, list("-+0123456789."))
_Loader.add_implicit_resolver(_FLOAT, _EXPONENT_FLOAT, list("-+.0123456789"))


def _construct_int(loader: _Loader, node: yaml.ScalarNode) -> int:
    """An integer in the forms above (an explicit !!int too: `!!int 020` was 16)."""
    text = loader.construct_scalar(node)
    if not _INT_FORM.match(text):
        raise yaml.constructor.ConstructorError(None, None, f"an integer (decimal digits or 0x hex), got {text!r}",
                                                node.start_mark)
    return int(text.replace("_", ""), 0)


_Loader.add_constructor(_INT, _construct_int)

MAX_FILE_BYTES = 16 << 20
"""The largest scenario file read (a 19 MB one, 300 000 path samples, took 2 GB and minutes)."""


def names_a_file(text: str) -> bool:
    """Whether a scenario argument names a file (ending in .yaml or .yml, or with a slash:
    ``./my_scene``), else a shipped scenario by name: a file named ``right_turn`` in the
    working directory was run in place of the shipped right_turn. The text, not a Path:
    pathlib drops a leading ``./``."""
    return text.endswith((".yaml", ".yml")) or os.sep in text or bool(os.altsep and os.altsep in text)


def same_scenario(a: str, b: str) -> bool:
    """One scenario, by name or by file (``./rt.yaml``, ``rt.yaml`` and its absolute path
    are one): `simforge run` and the launch file both judge a parameter file's nodes so."""
    if names_a_file(a) and names_a_file(b):
        return Path(a).resolve() == Path(b).resolve()
    return a == b


def scenario_dirs() -> list[Path]:
    """Existing scenario directories, most specific first: the source tree's, an install
    prefix's above the package (colcon), sys.prefix's (pip); see simforge_ros.resources."""
    return find_dirs("config/scenarios")


def list_scenarios() -> list[str]:
    """Names of all scenarios found, sorted (first directory wins on duplicates)."""
    names: set[str] = set()
    for d in scenario_dirs():
        names.update(p.stem for p in d.glob("*.yaml"))
    return sorted(names)


def _resolve(name_or_path: str | Path) -> Path:
    as_path = Path(name_or_path)
    if isinstance(name_or_path, Path) or names_a_file(str(name_or_path)):
        if not as_path.is_file():
            raise ScenarioError(as_path, "<file>", "an existing scenario file", str(name_or_path))
        return as_path
    for d in scenario_dirs():
        candidate = d / f"{name_or_path}.yaml"
        if candidate.is_file():
            return candidate
    raise ScenarioError(str(name_or_path), "name", f"one of {list_scenarios()}", str(name_or_path))


def scenario_digest(name_or_path: str | Path) -> str | None:
    """The SHA-256 of the file a scenario name or path resolves to now (a run's manifest
    keeps it as digests.scenario_file), or None where there is none to read."""
    try:
        return hashlib.sha256(_resolve(name_or_path).read_bytes()).hexdigest()
    except (ScenarioError, OSError):
        return None


def load_scenario(name_or_path: str | Path) -> Scenario:
    """Load and validate a scenario by name or path; ScenarioError names file and field."""
    path = _resolve(name_or_path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ScenarioError(path, "<document>", f"a scenario file of at most {MAX_FILE_BYTES >> 20} MiB",
                                f"{size} bytes")
        source = path.read_bytes()
    except OSError as err:  # without permission: "unexpected error: PermissionError" and a run directory, before
        raise ScenarioError(path, "<file>", "a scenario file that can be read",
                            Printed(err.strerror or type(err).__name__)) from None
    encoding = not_utf8(source)
    if encoding is not None:  # PyYAML read a UTF-16 byte order mark as UTF-16: other text than its author's
        raise ScenarioError(path, "<document>", "UTF-8 text", encoding)
    try:
        doc = yaml.load(source, Loader=_Loader)  # a SafeLoader
    except yaml.YAMLError as err:
        raise ScenarioError(path, "<document>", "valid YAML", yaml_problem(err)) from err
    except ValueError as err:  # a YAML value Python cannot build: an int of over 4300 digits, 2001-02-30
        raise ScenarioError(path, "<document>", "YAML values Python can build",
                            Printed(one_line(str(err).split(";")[0], 200))) from None
    except RecursionError:  # "unexpected error: RecursionError" before
        raise ScenarioError(path, "<document>", "YAML nested a few hundred levels deep at most",
                            Printed("one nested deeper")) from None
    return build_scenario(doc, path, source, hashlib.sha256(source).hexdigest())
