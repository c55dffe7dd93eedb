"""What `ros2 param describe` and `ros2 param set` meet on a simforge node: each
parameter's meaning and range, and a refusal to change it mid-run (it is read once)."""

from __future__ import annotations

import pytest

from simforge_ros.params import NODE_PARAMS

pytestmark = pytest.mark.ros


def test_each_parameter_describes_itself_and_is_read_only(ros_lease):
    import rclpy
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from simforge_ros.nodes.common import declare_params

    context = rclpy.Context()
    rclpy.init(args=["--ros-args", "-p", "width:=640"], context=context, domain_id=ros_lease.domain_id)
    try:
        node = Node("sim_bridge", context=context)
        values = declare_params(node, "sim_bridge")
        assert values["width"] == 640  # an override still sets a read-only parameter at start-up
        for item in NODE_PARAMS["sim_bridge"]:
            (descriptor,) = node.describe_parameters([item.name])
            assert descriptor.description == item.doc and descriptor.read_only
        (width,) = node.describe_parameters(["width"])
        assert width.additional_constraints == "2..8192"
        (tick,) = node.describe_parameters(["tick_us"])
        assert tick.additional_constraints == "1.."
        (result,) = node.set_parameters([Parameter("width", value=320)])
        assert not result.successful and "read-only" in result.reason
        assert node.get_parameter("width").value == 640
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
