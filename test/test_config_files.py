"""The shipped parameter file and launch file agree with the parameters the nodes declare."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from simforge_ros.core.errors import ConfigError
from simforge_ros.params import NODE_PARAMS, periods, validate

ROOT = Path(__file__).resolve().parents[1]


def test_parameter_file_names_only_declared_parameters_with_their_types():
    doc = yaml.safe_load((ROOT / "config" / "simforge.yaml").read_text())
    assert set(doc) == set(NODE_PARAMS)
    values = {node: body["ros__parameters"] for node, body in doc.items()}
    checked = validate(values, "config/simforge.yaml")
    for node, params in checked.items():
        for name, value in params.items():
            spec = next(s for s in NODE_PARAMS[node] if s.name == name)
            if spec.default is not None:
                assert value == spec.default, f"{node}.{name}: the file says {value!r}, the node {spec.default!r}"


def test_a_wrong_parameter_is_reported_with_node_field_and_form():
    with pytest.raises(ConfigError) as err:
        bad = {"clock_master": {"decision_us": "fast", "decison_us": 1}, "sim_bridge": {"cameras": "front"}}
        validate(bad, "f.yaml")
    text = str(err.value)
    assert "f.yaml: clock_master.decision_us: expected a value of type int, got 'fast'" in text
    assert "clock_master.decison_us" in text and "sim_bridge.cameras" in text
    assert len(err.value.problems) == 3


@pytest.mark.parametrize(("node", "period"), [(node, name) for node in NODE_PARAMS for name in periods(node)])
def test_every_period_in_both_units_is_refused_naming_both(node, period):
    """A node took one of the two and dropped the other without a word."""
    us, s = f"{period}_us", f"{period}_s"
    with pytest.raises(ConfigError) as err:
        validate({node: {us: 200_000, s: 0.1}}, "f.yaml")
    assert str(err.value) == (f"f.yaml: {node}.{us} and {node}.{s}: expected one of the two (a period in "
                              f"microseconds or in seconds, never both), got {{'{us}': 200000, '{s}': 0.1}}")
    assert validate({node: {s: 0.1}}, "f.yaml") == {node: {s: 0.1}}  # one of the two is fine


def test_the_periods_are_every_pair_the_nodes_declare():
    assert {node: periods(node) for node in NODE_PARAMS} == {
        "clock_master": ["decision", "latency"], "sim_bridge": ["camera_period", "tick"],
        "driver": ["planning_period"], "recorder": []}


@pytest.mark.parametrize(("node", "name", "value", "expected"), [
    # the user's words, not the kind's internal name (str_list)
    ("sim_bridge", "cameras", "front", "a list of camera names, like [front,chase]"),
    ("driver", "cameras", [1, 2], "a list of camera names, like [front,chase]"),
    ("recorder", "faults", "drop_frame@3", "a list of fault specs, like [drop_frame@3]"),
    # "nan" and "inf" are strings to PyYAML (its floats are .nan and .inf), floats all the same:
    # said as a file's .nan is
    ("clock_master", "real_time_factor", "nan", "a finite number"),
    ("clock_master", "real_time_factor", float("nan"), "a finite number"),
    ("clock_master", "pose_tolerance_m", "-inf", "a finite number"),
    ("clock_master", "pose_tolerance_deg", "Infinity", "a finite number"),
    ("clock_master", "pose_tolerance_deg", "wide", "a value of type float"),
])
def test_a_value_of_the_wrong_form_is_told_the_form_in_the_users_words(node, name, value, expected):
    with pytest.raises(ConfigError) as err:
        validate({node: {name: value}}, "--set")
    assert str(err.value) == f"--set: {node}.{name}: expected {expected}, got {value!r}"


@pytest.mark.parametrize(("node", "name", "value", "expected"), [
    # a seed travels as uint64 in Step and Decide: -1 failed inside rclpy's message code
    ("clock_master", "seed", -1, "an integer in [0, 9223372036854775807]"),
    ("clock_master", "seed", 2**64, "an integer in [0, 9223372036854775807]"),
    ("driver", "weights_seed", -3, "an integer in [0, 9223372036854775807]"),
    ("clock_master", "participant_timeout_ms", 2**63, "an integer in [1, 9223372036854775807]"),
    # a typo past 8K rendered gigabytes a step
    ("sim_bridge", "width", 100_000, "an integer in [2, 8192]"),
    ("sim_bridge", "height", 1, "an integer in [2, 8192]"),  # the renderer needs 2: 1 failed as a bad scenario
    ("clock_master", "pose_tolerance_m", float("nan"), "a finite number"),
    ("clock_master", "decision_s", float("inf"), "a finite number"),
])
def test_a_value_out_of_its_range_is_refused_with_the_range(node, name, value, expected):
    with pytest.raises(ConfigError) as err:
        validate({node: {name: value}}, "f.yaml")
    assert str(err.value).startswith(f"f.yaml: {node}.{name}: expected {expected}, got ")
    edge = {"seed": 2**63 - 1, "weights_seed": 0, "participant_timeout_ms": 1, "width": 8192}.get(name)
    if edge is not None:  # the bound itself is accepted
        assert validate({node: {name: edge}}, "f.yaml")[node][name] == edge


def _calls(source: str, name: str) -> list[ast.Call]:
    return [node for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == name]


def test_launch_file_is_a_shell_around_the_launch_plan():
    """launch is not on PyPI, so the launch file's logic lives in simforge_ros.launch_plan
    (test_launch_plan.py runs it); the file declares its arguments and starts what
    ``plan`` says, each node with the parameter file and then the arguments given, in a
    file written with params_yaml (test_node_parameters.py reads one back through rcl)."""
    source = (ROOT / "launch" / "simforge.launch.py").read_text()
    assert "from simforge_ros.launch_plan import ARGS, plan" in source
    assert "from simforge_ros.under_launch import LAUNCH_INTERRUPT_S, UNDER_LAUNCH_ENV" in source
    [declare] = _calls(source, "DeclareLaunchArgument")
    assert ast.unparse(declare) == "DeclareLaunchArgument(arg, default_value=item.default, description=item.doc)"
    assert "for arg, item in ARGS.items()" in source
    [node] = _calls(source, "Node")
    assert ast.unparse(node) == ("Node(package='simforge_ros', executable=name, name=name, output='screen', "
                                 "parameters=[str(planned.params_file), handed], sigterm_timeout=SIGTERM_TIMEOUT_S, "
                                 "additional_env={} if name == 'clock_master' else {UNDER_LAUNCH_ENV: '1'})")
    assert "from simforge_ros.params import params_yaml" in source
    function = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == "_nodes")
    body = ast.unparse(function)
    assert ("plan({arg: LaunchConfiguration(arg).perform(context) for arg in ARGS}, Path(default_params_file), "
            "others=list(context.launch_configurations))") in body
    assert "file.write(params_yaml(planned.nodes))" in body and "for name in planned.nodes" in body
    # the clock master ends the run; its exit ends the launch
    assert "OnProcessExit(target_action=nodes['clock_master'], on_exit=[EmitEvent(event=Shutdown())])" in body
    # so does a participant that could not start; the launch's own file goes with it
    assert ("[RegisterEventHandler(OnProcessExit(target_action=node, on_exit=_start_failed(name))) for name, node "
            "in nodes.items() if name != 'clock_master']") in body
    assert "OnShutdown(on_shutdown=lambda _event, _context: _remove(handed))" in body
    [opaque] = _calls(source, "OpaqueFunction")
    assert ast.unparse(opaque) == ("OpaqueFunction(function=_nodes, args=[os.path.join(share, 'config', "
                                   "'simforge.yaml')])")


def test_launch_file_sets_nothing_in_the_launchs_environment():
    """The nodes take simforge's Fast DDS profile themselves (test_node_start.py): a
    SetEnvironmentVariable at the launch file's top level also reached every process a
    launch file including this one started after it."""
    source = (ROOT / "launch" / "simforge.launch.py").read_text()
    assert _calls(source, "SetEnvironmentVariable") == [] and "SetEnvironmentVariable" not in source
    assert source.split("LaunchDescription([", 1)[1].startswith("*declared, nodes])")


def test_the_play_profile_sets_only_the_writers_heartbeat():
    """`simforge play` talks to the user's own nodes: its Fast DDS profile keeps their
    default transports and only makes writers heartbeat every 100 ms (record.play)."""
    import xml.etree.ElementTree as ET

    from simforge_ros.record.play import PLAY_PROFILE
    from simforge_ros.resources import fastdds_profile

    path = fastdds_profile(PLAY_PROFILE)
    assert path is not None and path.name == "fastdds_play.xml"
    ns = {"dds": "http://www.eprosima.com"}
    profiles = ET.parse(path).getroot().find("dds:profiles", ns)
    assert [child.tag.split("}")[1] for child in profiles] == ["data_writer"]
    writer = profiles.find("dds:data_writer", ns)
    assert writer.get("is_default_profile") == "true"
    period = writer.find("dds:times/dds:heartbeat_period", ns)
    assert (period.findtext("dds:sec", namespaces=ns), period.findtext("dds:nanosec", namespaces=ns)) == (
        "0", "100000000")


# a module imported by name -> its rosdep key, where the two differ
_ROSDEP_KEYS = {"numpy": "python3-numpy", "yaml": "python3-yaml"}
_PIP_ONLY = ("rosbags", "torch")  # no rosdep key: package.xml names them in a comment


def test_package_xml_declares_every_package_the_code_and_launch_file_import():
    """What a real install's rosdep reads: every non-stdlib module the nodes, tools and the
    launch file import is a dependency of the package (or, with no rosdep key, named in
    package.xml's comment and pinned in requirements.txt)."""
    import sys
    import xml.etree.ElementTree as ET

    imported = set()
    for path in [*(ROOT / "simforge_ros").rglob("*.py"), *(ROOT / "launch").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"simforge_ros"}
    root = ET.parse(ROOT / "package.xml").getroot()
    declared = {e.text for e in root if e.tag in ("depend", "exec_depend")}
    source = (ROOT / "package.xml").read_text()
    pinned = (ROOT / "requirements.txt").read_text()
    missing = []
    for module in sorted(third_party):
        if module in _PIP_ONLY:
            if module not in source or f"{module}==" not in pinned:
                missing.append(f"{module} (pip only)")
        elif _ROSDEP_KEYS.get(module, module) not in declared:
            missing.append(module)
    # and every package whose executable the launch file starts
    started = {kw.value.value for node in ast.walk(ast.parse((ROOT / "launch" / "simforge.launch.py").read_text()))
               if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Node"
               for kw in node.keywords if kw.arg == "package"}
    missing += sorted(started - declared - {"simforge_ros"})
    assert missing == []
    assert "rclpy" in third_party and "launch_ros" in third_party  # the walk saw the code
    assert "tf2_msgs" in third_party
    assert "ros2launch" in declared  # the README starts a run with `ros2 launch`


def test_the_version_is_the_same_in_package_xml_setup_py_and_the_package():
    """rosdep and colcon read package.xml, pip reads setup.py, a run's manifest records
    simforge_ros.__version__: one version, written three times, held equal here."""
    import re
    import xml.etree.ElementTree as ET

    import simforge_ros

    declared = ET.parse(ROOT / "package.xml").getroot().findtext("version")
    [in_setup] = re.findall(r'version="([^"]+)"', (ROOT / "setup.py").read_text())
    assert declared == in_setup == simforge_ros.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", declared)  # the form package.xml's format 3 requires
