"""Where the package's shared files (config/, msg/) are, whichever way it was installed.

Three layouts hold them, looked at in this order:

1. the source tree: ``<repo>/<rel>``, next to the ``simforge_ros`` package directory;
2. an install prefix above the package: ``colcon build`` (the package's CMakeLists.txt)
   puts the Python code under ``<prefix>/lib/python3.X/site-packages/simforge_ros`` and the
   files under ``<prefix>/share/simforge_ros/<rel>``; the prefix is then not ``sys.prefix``
   (that is the system Python's, ``/usr``);
3. ``sys.prefix/share/simforge_ros/<rel>``: ``pip install .`` into a venv (setup.py).
"""

from __future__ import annotations

import sys
from collections.abc import MutableMapping
from pathlib import Path

PACKAGE = "simforge_ros"
_PACKAGE_DIR = Path(__file__).resolve().parent


def candidates(rel: str, package_dir: Path = _PACKAGE_DIR, prefix: Path | None = None) -> list[Path]:
    """Every place ``rel`` may be, most specific first (existing or not)."""
    prefix = Path(sys.prefix) if prefix is None else prefix
    out = [package_dir.parent / rel]
    out += [parent / "share" / PACKAGE / rel for parent in package_dir.parents]
    out.append(prefix / "share" / PACKAGE / rel)
    return list(dict.fromkeys(out))


def find_dirs(rel: str, package_dir: Path = _PACKAGE_DIR, prefix: Path | None = None) -> list[Path]:
    """The existing directories named ``rel``, most specific first."""
    return [p for p in candidates(rel, package_dir, prefix) if p.is_dir()]


def find_file(rel: str, package_dir: Path = _PACKAGE_DIR, prefix: Path | None = None) -> Path | None:
    """The first existing file named ``rel``; None where no layout has it."""
    return next((p for p in candidates(rel, package_dir, prefix) if p.is_file()), None)


FASTDDS_PROFILE = "fastdds_shm.xml"


def fastdds_profile(name: str = FASTDDS_PROFILE) -> Path | None:
    """config/<name>: the source tree's, or an install's share/simforge_ros/config.

    Node processes get config/fastdds_shm.xml unless the user named a Fast DDS profile:
    the default 512 KB shared-memory segment is smaller than one step of the four-camera
    rig (about 700 KB), and its writers' 100 ms heartbeats have a reader acknowledge the
    last records in time for Finish (Fast DDS's 3 s made every run's end wait its 2 s out).
    `simforge play` gets config/fastdds_play.xml (record.play).
    """
    return find_file(f"config/{name}")


def use_fastdds_profile(env: MutableMapping[str, str], name: str = FASTDDS_PROFILE) -> None:
    """Name config/<name> in ``env`` as the Fast DDS profile file, unless the user named
    one there (theirs alone applies then). Fast DDS reads it when a process makes its
    first participant."""
    profile = fastdds_profile(name)
    named = env.get("FASTDDS_DEFAULT_PROFILES_FILE") or env.get("FASTRTPS_DEFAULT_PROFILES_FILE")
    if profile is not None and not named:
        env["FASTDDS_DEFAULT_PROFILES_FILE"] = str(profile)
