"""Rewrite the build-machine include paths that some ROS 2 wheels hard-code in their CMake exports.

Thirteen `share/*/cmake/*Export.cmake` files of the Kilted wheels name
`/opt/python/cp311-cp311/include/python3.11` and that machine's numpy include dir; CMake
refuses to configure against a non-existent include path. Idempotent: run by `make setup`
before the interfaces are built.
"""

from __future__ import annotations

import re
import sys
import sysconfig
from pathlib import Path

import numpy

_PY_INCLUDE = re.compile(r"/opt/python/cp311-cp311/include/python3\.11")
_NUMPY_INCLUDE = re.compile(r"/opt/python/cp311-cp311/[^;\"]*?numpy/_?core/include")


def fix(prefix: Path) -> int:
    """Rewrite every export file under ``prefix/share``; return how many changed."""
    changed = 0
    py_include = sysconfig.get_paths()["include"]
    np_include = numpy.get_include()
    for path in sorted(prefix.glob("share/*/cmake/*.cmake")):
        text = path.read_text()
        new = _NUMPY_INCLUDE.sub(np_include, text)
        new = _PY_INCLUDE.sub(py_include, new)
        if new != text:
            path.write_text(new)
            changed += 1
    return changed


if __name__ == "__main__":
    n = fix(Path(sys.prefix))
    print(f"fix_wheel_cmake: {n} file(s) rewritten under {sys.prefix}/share")
