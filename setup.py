"""Build and install simforge_ros into a Python prefix (a venv holding the ROS 2 Kilted wheels).

`pip install --no-build-isolation .` does what `colcon build` would do on a ROS 2 install:
1. runs rosidl (through the package's own CMakeLists.txt, with plain cmake against the
   wheels in the prefix) into a staging prefix under build/rosidl/;
2. puts the generated Python interfaces (simforge_ros.msg, simforge_ros.srv and their
   typesupport extension modules) next to the node code in the simforge_ros package;
3. installs the generated C libraries into <prefix>/lib and the ROS resources into
   <prefix>/share: the ament index marker, share/simforge_ros/package.xml, config/,
   launch/, msg/, srv/, and one executable per node under lib/simforge_ros/ so that
   `ros2 run simforge_ros clock_master` and launch_ros resolve on a real ROS 2 install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Distribution, find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build" / "rosidl"
STAGE = BUILD / "stage"
NODES = ("clock_master", "sim_bridge", "driver", "recorder")
PY_SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
FROM_SOURCE = ("config", "launch", "examples")  # share/simforge_ros/<dir>, taken from the source tree


def _inputs() -> list[Path]:
    return sorted(
        [HERE / "CMakeLists.txt", HERE / "package.xml", *(HERE / "msg").glob("*.msg"), *(HERE / "srv").glob("*.srv")]
    )


def _stage_is_fresh() -> bool:
    marker = STAGE / ".built"
    if not marker.exists():
        return False
    built = marker.stat().st_mtime
    return all(p.stat().st_mtime < built for p in _inputs())


def build_interfaces() -> None:
    """Generate and compile the rosidl interfaces into STAGE (skipped when up to date).

    The CMake source is copied out of the repo first: CMake refuses an exported include
    directory (the venv's numpy headers) that lies inside the source directory.
    """
    if _stage_is_fresh():
        return
    prefix = Path(sys.prefix)
    subprocess.run([sys.executable, str(HERE / "tools" / "fix_wheel_cmake.py")], check=True)
    src = BUILD / "src"
    cmake_build = BUILD / "cmake"
    for d in (src, STAGE):
        shutil.rmtree(d, ignore_errors=True)
    src.mkdir(parents=True)
    for name in ("CMakeLists.txt", "package.xml"):
        shutil.copy2(HERE / name, src / name)
    for name in ("msg", "srv", *FROM_SOURCE):
        shutil.copytree(HERE / name, src / name)
    cmake_build.mkdir(parents=True, exist_ok=True)
    # this prefix's ament index first (the ROS 2 wheels' typesupports), a ROS install's after
    # it: replaced, a build against /opt/ros found no typesupport at all
    env = dict(os.environ, AMENT_PREFIX_PATH=os.pathsep.join(
        [str(prefix), *filter(None, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep))]))
    configure = [
        "cmake", str(src), f"-DCMAKE_PREFIX_PATH={prefix}", f"-DCMAKE_INSTALL_PREFIX={STAGE}",
        f"-DPython3_EXECUTABLE={sys.executable}", "-DBUILD_TESTING=OFF",
        "-DSIMFORGE_INSTALL_PYTHON=OFF",  # the wheel carries the Python side (below)
        "-DCMAKE_BUILD_TYPE=Release",
    ]
    log = BUILD / "cmake.log"
    with log.open("w") as out:
        for cmd in (configure, ["cmake", "--build", ".", "-j", str(os.cpu_count() or 2)],
                    ["cmake", "--install", "."]):
            result = subprocess.run(cmd, cwd=cmake_build, env=env, stdout=out, stderr=subprocess.STDOUT)
            if result.returncode != 0:
                sys.exit(f"simforge_ros: interface build failed at `{' '.join(cmd[:2])}`; see {log}")
    (STAGE / ".built").touch()


def _shim(node: str) -> Path:
    """An executable for lib/simforge_ros/<node>, bound to this interpreter."""
    path = BUILD / "shims" / node
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"#!{sys.executable}\n"
        f"import sys\nfrom simforge_ros.nodes.{node} import main\nsys.exit(main())\n"
    )
    path.chmod(0o755)
    return path


def data_files() -> list[tuple[str, list[str]]]:
    """Everything that goes into the prefix outside site-packages."""
    files: dict[str, list[str]] = {}
    for path in sorted(STAGE.rglob("*")):
        if not path.is_file() or path.name == ".built":
            continue
        rel = path.relative_to(STAGE)
        if rel.as_posix().startswith(PY_SITE):
            continue  # the Python side goes into the package itself
        if rel.as_posix().startswith(tuple(f"share/simforge_ros/{top}/" for top in FROM_SOURCE)):
            continue  # taken fresh from the source tree below
        files.setdefault(rel.parent.as_posix(), []).append(str(path))
    for top in FROM_SOURCE:
        for path in sorted((HERE / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                rel = path.relative_to(HERE)
                files.setdefault(f"share/simforge_ros/{rel.parent.as_posix()}", []).append(str(path))
    files["lib/simforge_ros"] = [str(_shim(node)) for node in NODES]
    return sorted(files.items())


class BuildPyWithInterfaces(build_py):
    """build_py that also copies the generated msg/srv modules into simforge_ros."""

    def run(self) -> None:
        build_interfaces()
        super().run()
        generated = STAGE / PY_SITE / "simforge_ros"
        target = Path(self.build_lib) / "simforge_ros"
        for item in generated.iterdir():
            if item.name in ("__init__.py", "__pycache__") or item.suffix == ".c":
                continue
            dest = target / item.name
            if item.is_dir():
                shutil.copytree(item, dest, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("*.c", "__pycache__"))
            else:
                shutil.copy2(item, dest)


class PlatformDistribution(Distribution):
    """The wheel carries compiled typesupport modules: it is platform-specific."""

    def has_ext_modules(self) -> bool:
        return True


# data_files must be known when setup() is called, so the (cached) build runs first.
if "clean" not in sys.argv[1:]:
    build_interfaces()

setup(
    name="simforge_ros",
    version="0.1.0",
    description="Closed-loop driving simulation in exact lockstep on ROS 2",
    license="Apache-2.0",
    python_requires=">=3.11",
    packages=find_packages(include=["simforge_ros", "simforge_ros.*"]),
    include_package_data=False,
    package_data={"simforge_ros": ["py.typed"]},
    data_files=data_files() if STAGE.exists() else [],
    cmdclass={"build_py": BuildPyWithInterfaces},
    distclass=PlatformDistribution,
    entry_points={
        "console_scripts": [
            "simforge = simforge_ros.command:main",
            "simforge-clock-master = simforge_ros.nodes.clock_master:main",
            "simforge-sim-bridge = simforge_ros.nodes.sim_bridge:main",
            "simforge-driver = simforge_ros.nodes.driver:main",
            "simforge-recorder = simforge_ros.nodes.recorder:main",
        ]
    },
    zip_safe=False,
)
