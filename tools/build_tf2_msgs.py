"""Generate tf2_msgs/msg/TFMessage with rosidl into this venv, where no wheel provides it.

tf2_msgs is not published on PyPI for Kilted, and /tf and /tf_static carry its TFMessage.
`make setup` runs this after the wheels are installed: it builds `third_party/tf2_msgs`
(the upstream definition of that one message, against the venv's geometry_msgs) with plain
cmake and installs it into the venv prefix, as the wheels lay out their own packages. A
Python that already imports `tf2_msgs.msg.TFMessage` (a real ROS 2 install, or a venv built
before) is left alone. Build output goes to build/tf2_msgs (out of git).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SOURCE = HERE / "third_party" / "tf2_msgs"
BUILD = HERE / "build" / "tf2_msgs"


def importable() -> bool:
    """Whether this interpreter already has tf2_msgs' TFMessage with its C type support,
    which rclpy loads only when a message is serialised (checked in a child: an import that
    fails half-way must not stay cached here)."""
    probe = [sys.executable, "-c", "from rclpy.serialization import serialize_message\n"
             "from tf2_msgs.msg import TFMessage\nassert serialize_message(TFMessage())"]
    return subprocess.run(probe, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def build(prefix: Path) -> None:
    """Configure, build and install tf2_msgs into ``prefix``; exit naming the log on failure."""
    src = BUILD / "src"
    cmake_build = BUILD / "cmake"
    shutil.rmtree(BUILD, ignore_errors=True)
    # copied out of the repo: CMake refuses an exported include directory (the venv's numpy
    # headers) inside the source directory
    shutil.copytree(SOURCE, src)
    cmake_build.mkdir(parents=True)
    env = dict(os.environ, AMENT_PREFIX_PATH=str(prefix))
    log = BUILD / "cmake.log"
    steps = (
        ["cmake", str(src), f"-DCMAKE_PREFIX_PATH={prefix}", f"-DCMAKE_INSTALL_PREFIX={prefix}",
         f"-DPython3_EXECUTABLE={sys.executable}", "-DBUILD_TESTING=OFF", "-DCMAKE_BUILD_TYPE=Release"],
        ["cmake", "--build", ".", "-j", str(os.cpu_count() or 2)],
        ["cmake", "--install", "."],
    )
    with log.open("w") as out:
        for cmd in steps:
            if subprocess.run(cmd, cwd=cmake_build, env=env, stdout=out, stderr=subprocess.STDOUT).returncode:
                sys.exit(f"tf2_msgs: build failed at `{' '.join(cmd[:2])}`; see {log}")


def main() -> int:
    if importable():
        return 0
    build(Path(sys.prefix))
    if not importable():
        sys.exit(f"tf2_msgs: built and installed into {sys.prefix}, but `from tf2_msgs.msg import TFMessage` fails")
    print(f"tf2_msgs: TFMessage generated into {sys.prefix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
