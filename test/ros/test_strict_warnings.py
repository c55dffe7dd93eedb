"""A strict CI sets PYTHONWARNINGS=error: the ROS wheels' own deprecation warnings (rosidl's
parser imports lark, which imports sre_parse) ended every run, in the CLI and in each node
process, before a step was taken."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros


@pytest.mark.parametrize("layout", ["single", "processes"])
def test_a_run_and_its_tools_work_with_warnings_as_errors(tmp_path, layout):
    exe = str(Path(sys.executable).with_name("simforge"))
    env = {**os.environ, "PYTHONWARNINGS": "error"}

    def simforge(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([exe, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    ran = simforge("run", "right_turn", "--steps", "3", "--layout", layout, "--out", str(tmp_path / "runs"))
    assert ran.returncode == 0 and ran.stdout.rstrip().endswith("counted"), ran.stdout + ran.stderr
    (run,) = (tmp_path / "runs").iterdir()
    checked = simforge("verify", str(run))
    assert checked.returncode == 0 and checked.stdout.startswith("verified: 3 steps"), checked.stdout + checked.stderr
    # any other warning is still an error there: only the dependencies' named ones pass
    strict = subprocess.run([sys.executable, "-c", "import warnings; "
                             "from simforge_ros.process_tuning import tolerate_dependency_warnings; "
                             "tolerate_dependency_warnings(); warnings.warn('ours', DeprecationWarning)"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert strict.returncode == 1 and "DeprecationWarning: ours" in strict.stderr
