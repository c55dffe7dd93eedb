"""The README's refusal table against the refusal classes: a code or exit status a user
scripts against must be the one the tools return."""

from __future__ import annotations

import re
from pathlib import Path

from simforge_ros.core.errors import REFUSALS

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_table_lists_every_refusal_with_its_exit_status() -> None:
    rows = re.findall(r"^\| `([a-z_]+)` \| (\d+) \| ", README.read_text(encoding="utf-8"), re.MULTILINE)
    assert {code: int(status) for code, status in rows} == {
        code: cls.exit_code for code, cls in REFUSALS.items()
    }
    assert len(rows) == len(REFUSALS)  # each once
