"""`colcon build` on a real ROS 2 install builds the package's CMakeLists.txt (build type
ament_cmake). Built here the way colcon does it (configure, build, install into
install/simforge_ros), the install must hold the node code next to the generated
interfaces, the node executables `ros2 run` and launch_ros look for, and the `simforge`
tool; and a run started from that install, with its prefix on the paths as colcon's
setup script puts it, must find its files there and repeat the venv install's run.

The sources are copied out of the repo first, as setup.py does: CMake refuses an exported
include directory (the venv's numpy headers) inside the source directory. The venv here
also holds the package (pip install), so the checks name which copy was used.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simforge_ros.params import NODE_PARAMS

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("CMakeLists.txt", "package.xml", "msg", "srv", "config", "launch", "examples", "simforge_ros", "test",
           "pytest.ini", "README.md", "docs")
COLCON_TEST_SELECT = "-k 'canonical or wall_times'"
"""What `colcon test` runs here: the canonical encoding's tests, and the wall times' (which
import the clock master's node module, and so the installed interfaces)."""
SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"


@pytest.fixture(scope="module")
def install(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("colcon")
    src, build, prefix = root / "src" / "simforge_ros", root / "build", root / "install" / "simforge_ros"
    src.mkdir(parents=True)
    build.mkdir()
    for name in SOURCES:
        subprocess.run(["cp", "-r", str(REPO / name), str(src / name)], check=True)
    env = dict(os.environ, AMENT_PREFIX_PATH=sys.prefix)
    for cmd in (["cmake", str(src), f"-DCMAKE_PREFIX_PATH={sys.prefix}", f"-DCMAKE_INSTALL_PREFIX={prefix}",
                 f"-DPython3_EXECUTABLE={sys.executable}", f"-DSIMFORGE_TEST_SELECT={COLCON_TEST_SELECT}"],
                ["cmake", "--build", ".", "-j", "2"], ["cmake", "--install", "."]):
        if cmd[1] == "--install":
            # rosidl's generated (empty) __init__.py and the package's own, stamped alike:
            # install() takes files within a second of each other as the same, and a
            # checkout built at once (this fixture, once) had rosidl's win
            generated = build / "rosidl_generator_py" / "simforge_ros" / "__init__.py"
            stamp = generated.stat().st_mtime_ns
            os.utime(src / "simforge_ros" / "__init__.py", ns=(stamp, stamp))
        done = subprocess.run(cmd, cwd=build, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{' '.join(cmd[:2])}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
    return prefix


def _env(prefix: Path) -> dict[str, str]:
    """What sourcing install/setup.bash adds: the prefix's Python path, libraries, ament index."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(prefix / SITE), env.get("PYTHONPATH")]))
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(prefix / "lib"), env.get("LD_LIBRARY_PATH")]))
    env["AMENT_PREFIX_PATH"] = os.pathsep.join([str(prefix), sys.prefix])
    return env


def test_install_holds_code_interfaces_executables_and_share(install):
    package = install / SITE / "simforge_ros"
    assert (package / "nodes" / "clock_master.py").is_file()
    assert (package / "msg" / "_vehicle_state.py").is_file() and (package / "srv" / "_step.py").is_file()
    assert '__version__ = "' in (package / "__init__.py").read_text()  # ours, not rosidl's empty one
    for node in NODE_PARAMS:
        exe = install / "lib" / "simforge_ros" / node
        assert exe.is_file() and os.access(exe, os.X_OK), node
        assert f"from simforge_ros.nodes.{node} import main" in exe.read_text()
    assert os.access(install / "bin" / "simforge", os.X_OK)
    assert "from simforge_ros.command import main" in (install / "bin" / "simforge").read_text()
    # `colcon build --symlink-install` links each installed executable to its build-tree
    # file: that file itself must be executable (it was 644, and nothing could start it)
    built = install.parents[1] / "build" / "simforge_scripts"
    for name in (*NODE_PARAMS, "simforge"):
        assert os.access(built / name, os.X_OK), name
    assert (install / "share" / "ament_index" / "resource_index" / "packages" / "simforge_ros").is_file()
    for rel in ("package.xml", "launch/simforge.launch.py", "config/simforge.yaml", "config/fastdds_shm.xml",
                "config/scenarios/right_turn.yaml", "msg/VehicleState.msg", "srv/Step.srv"):
        assert (install / "share" / "simforge_ros" / rel).is_file(), rel


def test_node_executables_start_from_the_install(install, tmp_path):
    for node in NODE_PARAMS:
        out = subprocess.run([str(install / "lib" / "simforge_ros" / node), "--help"], capture_output=True,
                             text=True, timeout=60, cwd=tmp_path, env=_env(install))
        assert out.returncode == 0, out.stderr
        assert f"simforge_ros {node} node" in out.stdout


def test_a_run_from_the_install_finds_its_files_there_and_repeats_the_venv_run(install, tmp_path):
    env = _env(install)
    where = subprocess.run(
        [sys.executable, "-c",
         "import json, simforge_ros, simforge_ros.msg\n"
         "from simforge_ros.engine import scenario_dirs\n"
         "from simforge_ros.record.bag import msg_dirs\n"
         "from simforge_ros.resources import fastdds_profile\n"
         "print(json.dumps([simforge_ros.__file__, simforge_ros.msg.__file__, str(msg_dirs()[0]),"
         " str(fastdds_profile()), str(scenario_dirs()[0])]))"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert where.returncode == 0, where.stderr
    for path in json.loads(where.stdout):
        assert Path(path).is_relative_to(install), path
    runs = []
    for name, exe, run_env in (("install", install / "bin" / "simforge", env),
                               ("venv", Path(sys.executable).with_name("simforge"), dict(os.environ))):
        out = subprocess.run([str(exe), "run", "right_turn", "--steps", "15", "--out", str(tmp_path / name), "--json"],
                             capture_output=True, text=True, timeout=300, cwd=tmp_path, env=run_env)
        assert out.returncode == 0, out.stderr
        runs.append(json.loads(out.stdout))
    assert [r["status"] for r in runs] == ["counted", "counted"]
    assert runs[0]["chain_digest"] == runs[1]["chain_digest"]
    assert runs[0]["frames_digest"] == runs[1]["frames_digest"]


def test_colcon_test_runs_the_tests_that_need_no_dds_against_the_install(install):
    """`colcon test` (ctest in the build directory, as colcon runs it after the install)
    reported 0 tests: CMakeLists.txt registered none. Now the tests that need no DDS run
    against the installed package; here a selection of them (COLCON_TEST_SELECT)."""
    import xml.etree.ElementTree as ET

    build = install.parents[1] / "build"
    listed = subprocess.run(["ctest", "-N", "-V"], cwd=build, capture_output=True, text=True, timeout=60)
    assert "Total Tests: 1" in listed.stdout, listed.stdout
    assert f"PYTHONPATH={install / SITE}" in listed.stdout  # the installed package, not the sources
    done = subprocess.run(["ctest", "--output-on-failure"], cwd=build, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, AMENT_PREFIX_PATH=sys.prefix))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    root = ET.parse(build / "test_results" / "simforge_ros" / "pytest.xml").getroot()
    suite = root if root.tag == "testsuite" else root[0]
    assert int(suite.attrib["tests"]) >= 20 and suite.attrib["failures"] == suite.attrib["errors"] == "0"
    ran = {case.attrib["classname"].rpartition(".")[2] for case in suite.iter("testcase")}
    assert {"test_core_canonical", "test_core_wall_times"} <= ran, ran
