"""The README's tables against the code they describe: a default, a refusal's exit status or
a fault form that drifted there would send a user to something the tools do not do."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simforge_ros.core.errors import REFUSALS
from simforge_ros.core.faults import FORMS
from simforge_ros.params import NODE_PARAMS, ParamSpec
from simforge_ros.runner import RunResult

README = Path(__file__).resolve().parents[1] / "README.md"
_ROW = re.compile(r"^\| (`[^|]+) \| ([^|]+) \| [^|]+ \|$")


def _shown(item: ParamSpec) -> str:
    """A default as the table writes it."""
    value = item.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return f"`[{', '.join(value)}]`"
    if value == "":
        return '""'
    return str(value)


def _names(cell: str) -> list[str]:
    """`node.a` / `b` and `node.a_m` / `_deg` and `node.a`, `node.b`: full names, in order."""
    names: list[str] = []
    for token in re.findall(r"`([^`]+)`", cell):
        if "." in token:
            names.append(token)
            continue
        node, last = names[-1].split(".")
        names.append(f"{node}.{last.rsplit('_', 1)[0]}{token}" if token.startswith("_") else f"{node}.{token}")
    return names


def _rows() -> list[tuple[str, str]]:
    rows = []
    for line in README.read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if match and "." in match.group(1) and match.group(1).split("`")[1].split(".")[0] in NODE_PARAMS:
            names = _names(match.group(1))
            cell = match.group(2).strip()
            defaults = [cell] if len(names) == 1 else re.split(r" / |, ", cell)
            assert len(defaults) == len(names), line
            rows.extend(zip(names, defaults, strict=True))
    return rows


def test_the_table_is_found() -> None:
    assert len(_rows()) >= 20


@pytest.mark.parametrize(("name", "default"), _rows())
def test_each_default_the_readme_gives_is_the_nodes(name: str, default: str) -> None:
    node, param = name.split(".")
    (item,) = [s for s in NODE_PARAMS[node] if s.name == param]
    assert default == _shown(item)


def test_the_readme_table_lists_every_refusal_with_its_exit_status() -> None:
    rows = re.findall(r"^\| `([a-z_]+)` \| (\d+) \| ", README.read_text(encoding="utf-8"), re.MULTILINE)
    assert {code: int(status) for code, status in rows} == {
        code: cls.exit_code for code, cls in REFUSALS.items()
    }
    assert len(rows) == len(REFUSALS)  # each once


def test_the_readme_names_every_fault_form() -> None:
    section = README.read_text(encoding="utf-8").split("**Fault injection**", 1)[1].split("\n\n", 1)[0]
    assert [form for form in FORMS.values() if f"`{form}`" not in section] == []


def test_the_readme_names_every_key_of_run_json() -> None:
    sentence = README.read_text(encoding="utf-8").split("`--json` prints one object per run with", 1)[1]
    named = re.findall(r"`([a-z_]+)`", sentence.split(".\n", 1)[0])
    fields = RunResult("r", "s", 0, "", "counted", None, "d", 0).to_dict()
    assert sorted(key for key in named if key not in ("counted", "refused")) == sorted(fields)


def test_the_readme_names_every_key_of_spread_json(tmp_path) -> None:
    from simforge_ros.core.spread import spread
    from simforge_ros.record.rundir import RunDir
    from simforge_ros.record.spread_runs import to_json

    section = README.read_text(encoding="utf-8").split("**`simforge spread RUN RUN [RUN ...]`**", 1)[1]
    named = re.findall(r"`([a-z_]+)`", section.split("`--json` gives", 1)[1].split(".\n", 1)[0])
    record = {"step": 0, "state": {"pose": {"x_m": 0.0, "y_m": 0.0}}}
    runs = [RunDir(tmp_path, {"run_id": "r", "scenario": "s", "chain_digest": "0" * 64}, [record])] * 2
    keys = set(to_json(runs, spread([run.steps for run in runs])))
    assert sorted(k for k in named if k not in ("value", "unit", "step", "force")) == sorted(keys)


def test_the_camera_table_is_each_mount_and_its_optical_rotation() -> None:
    import math

    from simforge_ros.engine.cameras import CAMERAS, optical_quaternion

    text = README.read_text()
    for name, m in CAMERAS.items():
        q = ", ".join(f"{c:.4f}".replace("-0.0000", "0.0000") for c in optical_quaternion(m))
        row = (f"| `{name}` | {m.x_m:g}, {m.y_m:g}, {m.z_m:g} | {round(math.degrees(m.yaw_rad))}° | "
               f"{round(math.degrees(m.pitch_rad))}° | {round(math.degrees(m.hfov_rad))}° | {q} |")
        assert row in text, row
    front = CAMERAS["front"]
    qx, qy, qz, qw = (f"{c:.4f}" for c in optical_quaternion(front))
    assert (f"--x {front.x_m:g} --z {front.z_m:g} --qx {qx} --qy {qy}\n--qz {qz} --qw {qw} --frame-id base_link "
            "--child-frame-id front") in text
