"""Find and load scenario files: repo layout and installed (ament / pip) layouts.

A name resolves to ``<dir>/<name>.yaml`` in the first of ``scenario_dirs()`` that has it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import yaml

from simforge_ros.core.yaml_file import UniqueKeyLoader, not_utf8, yaml_problem
from simforge_ros.engine.scenario import Scenario, ScenarioError
from simforge_ros.engine.schema import build_scenario
from simforge_ros.resources import find_dirs


class _Loader(UniqueKeyLoader):
    """PyYAML's safe loader, reading a number with an exponent and no dot (``5e1``) as a
    float, as YAML 1.2 does (PyYAML follows YAML 1.1 there and read the string '5e1'), and
    refusing a key given twice (the last one was kept silently)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)[eE][-+]?[0-9]+$"),
    list("-+.0123456789"),
)


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
    if isinstance(name_or_path, Path) or as_path.suffix in (".yaml", ".yml") or len(as_path.parts) > 1:
        if not as_path.is_file():
            raise ScenarioError(as_path, "<file>", "an existing scenario file", str(name_or_path))
        return as_path
    for d in scenario_dirs():
        candidate = d / f"{name_or_path}.yaml"
        if candidate.is_file():
            return candidate
    raise ScenarioError(str(name_or_path), "name", f"one of {list_scenarios()}", str(name_or_path))


def load_scenario(name_or_path: str | Path) -> Scenario:
    """Load and validate a scenario by name or path; ScenarioError names file and field."""
    path = _resolve(name_or_path)
    source = path.read_bytes()
    encoding = not_utf8(source)
    if encoding is not None:  # PyYAML read a UTF-16 byte order mark as UTF-16: other text than its author's
        raise ScenarioError(path, "<document>", "UTF-8 text", encoding)
    try:
        doc = yaml.load(source, Loader=_Loader)  # a SafeLoader
    except yaml.YAMLError as err:
        raise ScenarioError(path, "<document>", "valid YAML", yaml_problem(err)) from err
    return build_scenario(doc, path, source, hashlib.sha256(source).hexdigest())
