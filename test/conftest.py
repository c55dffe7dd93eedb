"""Test isolation shared by every test: localhost-only discovery, private ROS logs, and a
leased ROS_DOMAIN_ID for each test that touches DDS (see simforge_ros.isolation)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

_LOG_DIR = tempfile.mkdtemp(prefix="simforge-test-roslog-")
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ["ROS_LOG_DIR"] = _LOG_DIR
os.environ["ROS_HOME"] = _LOG_DIR


@pytest.fixture
def ros_lease(tmp_path) -> Iterator[object]:
    """A leased domain for one test; its env is what child processes must inherit."""
    from simforge_ros.isolation import lease_domain

    with lease_domain(tmp_path / "roslog") as lease:
        yield lease


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A skipped test is not a passing one: a session that skipped any (a test module's
    dependency missing, ``pytest.importorskip``; a disk of its own not made) fails, naming
    them, instead of passing with them left out. This session's private ROS log dir goes
    with it when every test passed (kept for a look otherwise): 230 of them had piled up in
    /tmp."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if skipped and exitstatus == 0:
        names = sorted({getattr(report, "nodeid", "") or str(getattr(report, "fspath", "")) for report in skipped})
        print(f"\nconftest: {len(skipped)} skipped: a skipped test is not a passing one; fix what it needs:\n  "
              + "\n  ".join(names))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        exitstatus = session.exitstatus
    if exitstatus == 0:
        import shutil

        shutil.rmtree(_LOG_DIR, ignore_errors=True)
