"""The package and its tests pass ruff and mypy (configured by ruff.toml and mypy.ini)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> Path:
    exe = Path(sys.executable).with_name(name)
    if not exe.is_file():
        pytest.fail(f"{name} is not installed next to {sys.executable}")
    return exe


def _check(*argv: str | Path) -> None:
    proc = subprocess.run(
        [str(a) for a in argv], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    output = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 0, f"{' '.join(str(a) for a in argv)} exited {proc.returncode}:\n{output}"


def test_ruff_is_clean() -> None:
    _check(_tool("ruff"), "check", "simforge_ros", "test", "examples", "tools", "launch", "setup.py")


def test_mypy_is_clean() -> None:
    _check(_tool("mypy"), "simforge_ros")
