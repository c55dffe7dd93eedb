"""Reading a YAML file a user wrote, and saying in one line why it cannot be read.

Every file simforge reads as YAML (a scenario, a ROS 2 parameter file, a run's params.yaml)
is said wrong the same way: where PyYAML stopped (line and column) and what it expected,
"not UTF-8 text" for bytes in another encoding, "a directory" for a directory; never an
exception's class name alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from simforge_ros.core.errors import Printed


def yaml_problem(err: yaml.YAMLError) -> str:
    """Where and what, on one line: "line 62, column 17: expected ',' or '}', but got
    '<stream end>'" (PyYAML's own text spans several lines and quotes the source)."""
    mark, problem = getattr(err, "problem_mark", None), getattr(err, "problem", None)
    if mark is None or problem is None:
        return " ".join(str(err).split())
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


def not_utf8(data: bytes) -> Printed | None:
    """What ``data`` is when it is not UTF-8 text (a problem's ``got``), else None.

    PyYAML reads bytes that begin with a UTF-16 byte order mark as UTF-16; a file written so
    by an editor was read as other text than its author saw, and said wrong far from why.
    """
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        return Printed(f"bytes that are not UTF-8 text (0x{data[err.start]:02x} at byte {err.start})")
    return None


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping: it kept the last one
    silently (two decision_us in a parameter file ran with the second)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[tuple[str, str], yaml.Mark] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                # by resolved type and text: 1 and "1" are two keys
                first = seen.setdefault((key_node.tag, key_node.value), key_node.start_mark)
                if first is not key_node.start_mark:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"found {key_node.value!r} twice in one mapping (first on line {first.line + 1})",
                        key_node.start_mark)
        return super().construct_mapping(node, deep)


class UnreadableYaml(Exception):
    """A file that is no YAML text; ``got`` says what it is instead (a problem's got)."""

    def __init__(self, got: object) -> None:
        super().__init__(got)
        self.got = got


def load_yaml_file(path: Path) -> Any:
    """The YAML document of the UTF-8 file ``path`` (PyYAML's safe loader).

    Raises:
        FileNotFoundError: no such file.
        UnreadableYaml: a directory, an unreadable file, bytes that are not UTF-8 text, or
            text that is not YAML (its ``got``: line, column and what PyYAML expected).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise UnreadableYaml(Printed("a directory")) from None
    except OSError as err:
        raise UnreadableYaml(Printed(f"a file that cannot be read ({err.strerror or type(err).__name__})")) from None
    encoding = not_utf8(data)
    if encoding is not None:
        raise UnreadableYaml(encoding)
    try:
        return yaml.load(data, Loader=UniqueKeyLoader)  # a SafeLoader: no arbitrary objects
    except yaml.YAMLError as err:
        raise UnreadableYaml(yaml_problem(err)) from None
