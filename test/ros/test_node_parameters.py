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
            if values[item.name] is None:  # unset (the other unit of a period): not offered at all
                assert not node.has_parameter(item.name)
                continue
            (descriptor,) = node.describe_parameters([item.name])
            assert descriptor.description == item.doc and descriptor.read_only
        (width,) = node.describe_parameters(["width"])
        assert width.additional_constraints == "2..8192"
        (tick,) = node.describe_parameters(["tick_us"])
        assert tick.additional_constraints == "1..86400000000"  # a day at most
        (result,) = node.set_parameters([Parameter("width", value=320)])
        assert not result.successful and "read-only" in result.reason
        assert node.get_parameter("width").value == 640
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


@pytest.mark.parametrize("node_name", sorted(NODE_PARAMS))
def test_every_listed_parameter_has_the_value_the_node_runs_with(ros_lease, node_name):
    """What `ros2 param dump` and `ros2 param get` read (ListParameters, then GetParameters
    of every name). A typed parameter given no value stayed uninitialized, and rclpy then
    answers GetParameters with no values at all: a dump of a simforge node was empty."""
    import rclpy
    from rclpy.node import Node

    from simforge_ros.nodes.common import declare_params

    context = rclpy.Context()
    rclpy.init(args=["--ros-args", "-p", "storage:=sqlite3"] if node_name == "recorder" else [],
               context=context, domain_id=ros_lease.domain_id)
    try:
        node = Node(node_name, context=context)
        values = declare_params(node, node_name)
        names = node.list_parameters([], 0).names
        got = {p.name: p.value for p in node.get_parameters(names)}  # raised: uninitialized
        ours = {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in got.items()
                if k not in ("use_sim_time", "start_type_description_service")}
        assert ours == {k: v for k, v in values.items() if v is not None}
        if node_name == "recorder":
            assert got["storage"] == "sqlite3"  # an override is the value, a default the default
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def test_a_value_of_the_wrong_type_is_told_the_form_in_the_users_words(ros_lease):
    """As `--set` says it (`ros2 launch ... -p cameras:=front` said "of type str_list")."""
    import rclpy
    from rclpy.node import Node

    from simforge_ros.core.errors import ConfigError
    from simforge_ros.nodes.common import declare_params

    context = rclpy.Context()
    rclpy.init(args=["--ros-args", "-p", "cameras:=front"], context=context, domain_id=ros_lease.domain_id)
    try:
        node = Node("sim_bridge", context=context)
        with pytest.raises(ConfigError) as err:
            declare_params(node, "sim_bridge")
        said = str(err.value)
        assert said.startswith("sim_bridge: cameras: expected a list of camera names, like [front,chase], got ")
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def _declared(ros_lease, node_name: str, *overrides: str):
    """declare_params of a fresh ``node_name`` given ``-p`` overrides, and its warnings."""
    import rclpy
    from rclpy.node import Node

    from simforge_ros.nodes.common import declare_params

    args = ["--ros-args"] + [a for o in overrides for a in ("-p", o)]
    context = rclpy.Context()
    rclpy.init(args=args, context=context, domain_id=ros_lease.domain_id)
    warned: list[str] = []
    try:
        node = Node(node_name, context=context)
        logger = node.get_logger()
        logger.warning = lambda text, **_: warned.append(text)  # type: ignore[method-assign]
        try:
            return declare_params(node, node_name), warned
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def test_an_int_given_for_a_float_parameter_is_widened(ros_lease):
    """launch_ros and rcl type `-p real_time_factor:=1` as an int; the node's double
    parameter refused it, where `simforge run --set` widens it."""
    values, warned = _declared(ros_lease, "clock_master", "real_time_factor:=1", "pose_tolerance_m:=0")
    assert values["real_time_factor"] == 1.0 and type(values["real_time_factor"]) is float
    assert values["pose_tolerance_m"] == 0.0 and type(values["pose_tolerance_m"]) is float
    assert warned == []


def test_a_typo_of_a_parameter_name_is_refused_and_anything_else_left_out_with_a_warning(ros_lease):
    """-p decison_us:=50000 was ignored without a word: the run went on at the default period."""
    from simforge_ros.core.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        _declared(ros_lease, "clock_master", "decison_us:=50000")
    assert str(err.value) == ("clock_master: decison_us: expected a parameter of clock_master (did you mean "
                              "decision_us?), got 50000")
    # a stack's shared parameters: another simforge node's, or no simforge node's at all
    values, warned = _declared(ros_lease, "sim_bridge", "decision_us:=50000", "robot_description:=x",
                               "use_sim_time:=true")
    assert "decision_us" not in values
    assert warned == ["parameter decision_us left out: clock_master's, not sim_bridge's",
                      "parameter robot_description left out: not one sim_bridge declares"]



def test_a_parameter_file_simforge_writes_reads_back_through_rcl_with_its_types(ros_lease, tmp_path):
    """What `simforge run` and the launch file hand the nodes (params.params_yaml). With
    PyYAML's plain dump, rcl read the string 08 as a double and y as a bool: the node
    refused its own string parameter at start-up."""
    import rclpy
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from simforge_ros.params import params_yaml

    strings = ["08", "1e3", "inf", "y", "~", "null", "0x10", "true", "right_turn"]
    given = {f"s{i}": text for i, text in enumerate(strings)}
    given.update({"names": ["08", "y"], "none": [], "count": 3, "ratio": 1.0, "flag": False, "whole": 2.0})
    path = tmp_path / "params.yaml"
    path.write_text(params_yaml({"sim_bridge": given, "driver": {"policy": "route"}}))
    context = rclpy.Context()
    rclpy.init(args=["--ros-args", "--params-file", str(path)], context=context, domain_id=ros_lease.domain_id)
    try:
        node = Node("sim_bridge", context=context)
        got = {name: (p.type_, p.value) for name, p in node._parameter_overrides.items()}
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    for i, text in enumerate(strings):
        assert got[f"s{i}"] == (Parameter.Type.STRING, text)
    assert got["names"][0] == Parameter.Type.STRING_ARRAY and list(got["names"][1]) == ["08", "y"]
    assert got["none"][0] == Parameter.Type.NOT_SET  # rcl cannot type [] (common._given_empty)
    assert got["count"] == (Parameter.Type.INTEGER, 3) and got["flag"] == (Parameter.Type.BOOL, False)
    assert got["ratio"] == (Parameter.Type.DOUBLE, 1.0) and got["whole"] == (Parameter.Type.DOUBLE, 2.0)
    assert "policy" not in got  # the driver's section is the driver's
