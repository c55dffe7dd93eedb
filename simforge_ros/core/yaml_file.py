"""Reading a YAML file a user wrote, and saying in one line why it cannot be read.

Every file simforge reads as YAML (a scenario, a ROS 2 parameter file, a run's params.yaml)
is said wrong the same way: where PyYAML stopped (line and column) and what it expected,
"not UTF-8 text" for bytes in another encoding, "a directory" for a directory; never an
exception's class name alone.
"""

from __future__ import annotations

import math
import re
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from simforge_ros.core.errors import Printed, one_line


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


_RCL_TRUE = frozenset({"Y", "y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"})
_RCL_FALSE = frozenset({"N", "n", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"})
_C_SPACE = "[ \t\n\v\f\r]*"  # what strtoll and strtod skip first
_C_INT = re.compile(_C_SPACE + r"([+-]?)(?:0[xX]([0-9a-fA-F]+)|(0[0-7]*)|([1-9][0-9]*))")  # strtoll, base 0
_C_DECIMAL = re.compile(_C_SPACE + r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_C_HEX = re.compile(_C_SPACE + r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?")
_C_WORD = re.compile(_C_SPACE + r"[+-]?(?:inf|infinity|nan(?:\([0-9A-Za-z_]*\))?)", re.IGNORECASE)
_C_HEX_PARTS = re.compile(_C_SPACE + r"([+-]?)0[xX]([0-9a-fA-F]*)\.?([0-9a-fA-F]*)(?:[pP]([+-]?[0-9]+))?")
_YAML_WORDS = {f"{sign}.{word}": float(f"{sign or '+'}{word}") for sign in ("", "+", "-")
               for word in ("inf", "Inf", "INF")} | {f".{word}": math.nan for word in ("nan", "NaN", "NAN")}


def rcl_scalar(text: str) -> bool | int | float | str:
    """An unquoted YAML value as rcl types it (rcl_yaml_param_parser's get_value), which is
    how every ROS 2 node reads a parameter file and ``-p name:=value``: a bool (y, yes, on,
    true and their negations, in three cases), else an int (C strtoll, base 0: ``010`` is 8,
    ``0x10`` 16, ``1_000`` none), else a double (C strtod: ``1e3``, ``08``, ``nan``; a
    number it cannot hold, as ``1e999``, none), else the text (``~``, ``null``,
    ``2001-01-01``, ``1:20``). PyYAML's YAML 1.1 typing differs in each of those."""
    if text in _RCL_TRUE:
        return True
    if text in _RCL_FALSE:
        return False
    match = _C_INT.fullmatch(text)
    past_int64 = False
    if match is not None:
        sign, hexa, octal, decimal = match.groups()
        whole = int(hexa, 16) if hexa is not None else int(octal, 8) if octal is not None else int(decimal)
        whole = -whole if sign == "-" else whole
        if -(1 << 63) <= whole < (1 << 63):
            return whole  # out of range: strtoll's ERANGE, and strtod's turn
        past_int64 = True
    if text in _YAML_WORDS:
        return _YAML_WORDS[text]
    stripped = text.strip(" \t\n\v\f\r")
    if _C_WORD.fullmatch(text):
        return math.nan if "nan" in stripped.lower() else float(stripped)  # nan(12) is a NaN to strtod
    if _C_DECIMAL.fullmatch(text):
        value, exact = float(stripped), Fraction(Decimal(stripped))
    elif _C_HEX.fullmatch(text):
        parts = _C_HEX_PARTS.fullmatch(text)
        assert parts is not None  # _C_HEX matched
        sign, ones, frac, power = parts.groups()
        exact = Fraction(int(ones + frac or "0", 16), 16 ** len(frac)) * Fraction(2) ** int(power or 0)
        exact = -exact if sign == "-" else exact
        try:
            value = float.fromhex(stripped)
        except OverflowError:
            return text  # strtod's ERANGE
    else:
        return text
    # strtod's ERANGE, and then a string: beyond a double, or below its normal range and
    # not exactly a subnormal (glibc: 1e-320 is ERANGE, 0x1p-1074 is not)
    if math.isinf(value) or (abs(value) < sys.float_info.min and Fraction(value) != exact):
        return text
    return WholePastInt64(value, stripped) if past_int64 else value


class WholePastInt64(float):
    """The double rcl reads an integer past int64 as, keeping the integer as typed: said as
    the double, 9223372036854775809 read "got 9223372036854775808", and -2^63 - 1 passed a
    range check as -2^63."""

    text: str

    def __new__(cls, value: float, text: str) -> WholePastInt64:
        made = super().__new__(cls, value)
        made.text = text
        return made


_RCL_PLAIN = "tag:simforge,2026:rcl-plain"
_STR = "tag:yaml.org,2002:str"


class RclLoader(UniqueKeyLoader):
    """A ROS 2 parameter file read as rcl reads it, the parser every node takes the file
    with: unquoted values typed by rcl_scalar (a quoted or ``!!str`` one is a string), keys
    as their text, and an alias refused ("will not support aliasing", rcl says). Read by
    PyYAML's own typing, a file simforge ran could fail under `ros2 run` (``steps: 1_000``)
    or the other way round (``odometry: y``)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.composer.ComposerError(
                None, None, "an alias (*name), which ROS 2's parameter parser (rcl) does not support",
                self.peek_event().start_mark)
        return super().compose_node(parent, index)

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0]:  # plain: neither quoted nor tagged
            return _RCL_PLAIN
        return super().resolve(kind, value, implicit)

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        # rcl reads no tag but !!str: `!!float 3` is the int 3 to it, `!!int "5"` the string
        if isinstance(node, yaml.ScalarNode) and node.tag not in (_RCL_PLAIN, _STR):
            return node.value if node.style in ("'", '"') else _construct_rcl_plain(self, node)
        return super().construct_object(node, deep)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[str, yaml.Mark] = {}
        for key, _ in node.value:  # by text, as rcl reads keys: "decision_us" and decision_us are one
            if not isinstance(key, yaml.ScalarNode):  # `? [a, b]`: unhashable, it ended in "unexpected error"
                raise yaml.constructor.ConstructorError(
                    None, None, f"a key that is a {'list' if isinstance(key, yaml.SequenceNode) else 'mapping'} "
                                "(ROS 2's parameter parser takes names as keys)", key.start_mark)
            if isinstance(key, yaml.ScalarNode):
                first = seen.setdefault(key.value, key.start_mark)
                if first is not key.start_mark:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"found {key.value!r} twice in one mapping (first on line {first.line + 1})",
                        key.start_mark)
        return {key.value if isinstance(key, yaml.ScalarNode) else self.construct_object(key, deep=deep):
                self.construct_object(value, deep=deep) for key, value in node.value}


def _construct_rcl_plain(loader: RclLoader, node: yaml.ScalarNode) -> Any:
    if node.value == "":  # `key:` with nothing after it
        raise yaml.constructor.ConstructorError(None, None, "no value (ROS 2's parameter parser refuses an empty "
                                                "one; quote it, '', for an empty string)", node.start_mark)
    return rcl_scalar(node.value)


RclLoader.add_constructor(_RCL_PLAIN, _construct_rcl_plain)


def load_rcl_value(text: str) -> Any:
    """A value given on a command line (``--set NODE.PARAM=VALUE``), as rcl reads ``-p
    name:=value``: a YAML value typed by RclLoader.

    Raises:
        yaml.YAMLError: ``text`` is no YAML value.
    """
    return yaml.load(text, Loader=RclLoader)


MAX_YAML_BYTES = 16 << 20
"""A parameter file larger than this is refused, as scenario files are: `--params-file
/dev/zero` grew to 14 GB in 32 s, a 40 MB file to 3 GB (PyYAML keeps ~75 bytes of nodes per
byte)."""


class UnreadableYaml(Exception):
    """A file that is no YAML text; ``got`` says what it is instead (a problem's got)."""

    def __init__(self, got: object) -> None:
        super().__init__(got)
        self.got = got


def load_yaml_file(path: Path, loader: type[UniqueKeyLoader] = UniqueKeyLoader) -> Any:
    """The YAML document of the UTF-8 file ``path`` (PyYAML's safe loader, or ``loader``).

    Raises:
        FileNotFoundError: no such file.
        UnreadableYaml: a directory, an unreadable file, bytes that are not UTF-8 text, or
            text that is not YAML (its ``got``: line, column and what PyYAML expected).
    """
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_YAML_BYTES + 1)  # /dev/zero, or a huge file: not read whole into memory
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise UnreadableYaml(Printed("a directory")) from None
    except OSError as err:
        raise UnreadableYaml(Printed(f"a file that cannot be read ({err.strerror or type(err).__name__})")) from None
    if len(data) > MAX_YAML_BYTES:
        raise UnreadableYaml(Printed(f"a file of more than {MAX_YAML_BYTES >> 20} MiB"))
    encoding = not_utf8(data)
    if encoding is not None:
        raise UnreadableYaml(encoding)
    try:
        return yaml.load(data, Loader=loader)  # a SafeLoader: no arbitrary objects
    except yaml.YAMLError as err:
        raise UnreadableYaml(yaml_problem(err)) from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise UnreadableYaml(Printed("YAML nested deeper than a few hundred levels")) from None
    except ValueError as err:  # a value Python cannot build: an int of over 4300 digits ("unexpected error")
        raise UnreadableYaml(Printed(f"YAML values Python can build ({one_line(str(err).split(';')[0], 120)})")) \
            from None
