"""Where the package's shared files are found, in each layout it is installed in."""

from __future__ import annotations

from pathlib import Path

from simforge_ros import resources


def _tree(root: Path, *dirs: str) -> None:
    for d in dirs:
        (root / d).mkdir(parents=True, exist_ok=True)


def test_colcon_prefix_above_the_package_wins_over_sys_prefix(tmp_path):
    # colcon: install/simforge_ros/lib/python3.X/site-packages/simforge_ros, files under
    # install/simforge_ros/share/simforge_ros; sys.prefix is the system Python's (/usr)
    install = tmp_path / "install" / "simforge_ros"
    package = install / "lib" / "python3.11" / "site-packages" / "simforge_ros"
    system = tmp_path / "usr"
    _tree(tmp_path, str(package.relative_to(tmp_path)), "install/simforge_ros/share/simforge_ros/msg",
          "usr/share/simforge_ros/msg")
    (install / "share" / "simforge_ros" / "config").mkdir()
    (install / "share" / "simforge_ros" / "config" / "fastdds_shm.xml").write_text("<x/>")
    found = resources.find_dirs("msg", package, system)
    assert found == [install / "share" / "simforge_ros" / "msg", system / "share" / "simforge_ros" / "msg"]
    assert resources.find_file("config/fastdds_shm.xml", package, system) == (
        install / "share" / "simforge_ros" / "config" / "fastdds_shm.xml")


def test_source_tree_comes_first_and_sys_prefix_last(tmp_path):
    repo, venv = tmp_path / "repo", tmp_path / "venv"
    _tree(tmp_path, "repo/simforge_ros", "repo/msg", "venv/share/simforge_ros/msg")
    assert resources.find_dirs("msg", repo / "simforge_ros", venv) == [
        repo / "msg", venv / "share" / "simforge_ros" / "msg"]


def test_nothing_found_is_empty_or_none(tmp_path):
    _tree(tmp_path, "a/simforge_ros")
    assert resources.find_dirs("msg", tmp_path / "a" / "simforge_ros", tmp_path / "b") == []
    assert resources.find_file("config/fastdds_shm.xml", tmp_path / "a" / "simforge_ros", tmp_path / "b") is None


def test_this_install_finds_its_files():
    assert resources.find_file("config/fastdds_shm.xml") is not None
    assert any((d / "VehicleState.msg").is_file() for d in resources.find_dirs("msg"))
