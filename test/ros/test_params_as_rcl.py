"""simforge reads a parameter file as rcl does: for files that rcl and simforge both take,
each simforge node's parameters as `simforge run --params-file` reads them are the ones a
real rclpy node of that name is given by `--ros-args --params-file` (values and types);
and a file rcl refuses, simforge refuses too. (The same file is meant for `simforge run`
and `ros2 launch`: an audit found them reading sections' order, wildcards and plain values
differently.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from simforge_ros.core.errors import ConfigError
from simforge_ros.params import NODE_PARAMS, read_params_file

FILES = {
    "node_section_first": "clock_master:\n  ros__parameters: {seed: 3}\n/**:\n  ros__parameters: {seed: 9}\n",
    "shared_first": "/**:\n  ros__parameters: {seed: 9, width: 400}\n/sim_bridge:\n  ros__parameters: {width: 640}\n",
    "one_star": "/*:\n  ros__parameters: {width: 200, seed: 5}\n",
    "any_namespace": ("/**/clock_master/**:\n  ros__parameters: {seed: 6}\n"
                      "/**/sim_bridge:\n  ros__parameters: {height: 90}\n"),
    "plain_values": ("sim_bridge:\n  ros__parameters:\n    odometry: y\n    tf: On\n    width: 010\n"
                     "    height: 0x40\n    map_frame: '1e3'\n    carla_vehicle: ~\n    carla_town: 2001-01-01\n"
                     "clock_master:\n  ros__parameters:\n    decision_us: 100000\n    pose_tolerance_m: 1e-2\n"),
}


def _rcl_values(path: Path, node_name: str, domain_id: int) -> dict[str, object]:
    import rclpy
    from rclpy.node import Node

    context = rclpy.Context()
    rclpy.init(args=["--ros-args", "--params-file", str(path)], context=context, domain_id=domain_id)
    try:
        node = Node(node_name, context=context, automatically_declare_parameters_from_overrides=True,
                    start_parameter_services=False, enable_rosout=False)
        values = {name: param.value for name, param in node._parameter_overrides.items()}
        node.destroy_node()
        return values
    finally:
        rclpy.shutdown(context=context)


@pytest.mark.parametrize("name", sorted(FILES))
def test_each_nodes_parameters_are_those_rcl_gives_a_node_of_that_name(ros_lease, tmp_path, name):
    path = tmp_path / f"{name}.yaml"
    path.write_text(FILES[name])
    ours = read_params_file(path)
    assert ours, "every file sets something"
    for node in ("clock_master", "sim_bridge"):
        declared = {item.name for item in NODE_PARAMS[node]}  # a node leaves out the rest, with a warning
        rcl = {k: v for k, v in _rcl_values(path, node, ros_lease.domain_id).items() if k in declared}
        mine = ours.get(node, {})
        assert set(mine) == set(rcl), (node, mine, rcl)
        for param, value in rcl.items():
            assert (mine[param], type(mine[param])) == (value, type(value)), (node, param)


@pytest.mark.parametrize("text", [
    "other_node:\n  ros__parameters: {x: [1, a]}\nclock_master:\n  ros__parameters: {seed: 4}\n",
    "my-node:\n  ros__parameters: {x: 1}\nclock_master:\n  ros__parameters: {seed: 4}\n",
])
def test_a_file_rcl_refuses_for_another_nodes_section_is_refused(ros_lease, tmp_path, text):
    """rcl refuses the whole file, so under `ros2 launch` every node dies at start-up;
    simforge left the section out with a note and ran."""
    import rclpy

    path = tmp_path / "stack.yaml"
    path.write_text(text)
    with pytest.raises(Exception, match="Couldn't parse params file"):
        rclpy.init(args=["--ros-args", "--params-file", str(path)], context=rclpy.Context(),
                   domain_id=ros_lease.domain_id)
    with pytest.raises(ConfigError) as err:
        read_params_file(path)
    assert str(err.value).startswith(f"{path}: file: expected a file ROS 2's parameter parser (rcl) reads, "
                                     "as every node is given it, got one it refuses: ")
