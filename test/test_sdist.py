"""The source distribution holds what building the package needs: setup.py runs rosidl
through CMakeLists.txt on msg/ and srv/ with tools/, and installs config/, launch/ and
examples/ into share/simforge_ros. Without a MANIFEST.in the sdist held only the Python
package, and `python -m build` (or pip from an sdist) failed at once in tools/."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NEEDED = ("CMakeLists.txt", "package.xml", "tools/fix_wheel_cmake.py", "tools/build_tf2_msgs.py",
          "msg/StepTiming.msg", "srv/Step.srv", "config/simforge.yaml", "config/fastdds_shm.xml",
          "config/scenarios/right_turn.yaml", "launch/simforge.launch.py", "examples/external_driver.py",
          "simforge_ros/command.py", "requirements.txt")


def test_the_sdist_holds_what_building_needs(tmp_path):
    done = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (archive,) = tmp_path.glob("simforge_ros-*.tar.gz")
    with tarfile.open(archive) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    missing = [path for path in NEEDED if path not in names]
    assert not missing, missing
    assert not any("__pycache__" in name for name in names)
    tracked = subprocess.run(["git", "ls-files", "msg", "srv", "config", "launch", "examples", "tools",
                              "third_party"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    assert tracked and set(tracked) <= names  # every file of those folders git keeps
