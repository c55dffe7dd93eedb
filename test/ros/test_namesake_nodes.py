"""A user's own node that only shares a participant's name (a node of their stack called
driver, say) is not taken for a second server of that participant's service."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from runs import lockstep, manifest_of, wait_for_nodes

from simforge_ros.isolation import lease_domain

pytestmark = pytest.mark.ros

# a plain node called driver: it serves nothing of simforge's
NAMESAKE = ("import rclpy, rclpy.node\n"
            "rclpy.init()\n"
            "node = rclpy.node.Node('driver')\n"
            "rclpy.spin(node)\n")


def test_a_node_that_only_shares_the_drivers_name_is_not_counted_as_a_driver(tmp_path, monkeypatch, capfd):
    """Asked by name, the graph credited both /driver nodes with /simforge/decide: the
    clock master warned that two nodes serve it and the manifest named "/driver, /driver"
    (which diff, spread and rerun compare as setup)."""
    with lease_domain(tmp_path / "lease") as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        namesake = subprocess.Popen([sys.executable, "-c", NAMESAKE], env=dict(lease.env),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for_nodes(lease.domain_id, "driver", proc=namesake)
            result = lockstep(tmp_path / "runs", steps=10, layout="single")
        finally:
            namesake.terminate()
            namesake.wait(timeout=10)
    assert result.status == "counted", result.refusal
    assert manifest_of(result)["participants"]["driver"]["node"] == "/driver"
    said = capfd.readouterr().err + "".join(p.read_text(errors="replace")
                                            for p in (Path(result.run_dir) / "logs").glob("*.log"))
    assert "nodes serve /simforge/decide" not in said
