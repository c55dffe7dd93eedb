"""The shipped parameter file and launch file agree with the parameters the nodes declare."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from simforge_ros.core.errors import ConfigError
from simforge_ros.params import NODE_PARAMS, periods, planner_cameras, validate
from simforge_ros.runner import EXTERNAL, SURROUND

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


def test_launch_file_starts_the_four_nodes_with_the_launch_arguments():
    source = (ROOT / "launch" / "simforge.launch.py").read_text()
    tree = ast.parse(source)
    executables = {
        (kws["package"], kws["executable"])
        for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Node"
        for kws in [{kw.arg: kw.value.value for kw in node.keywords if kw.arg in ("package", "executable")}]
    }
    assert executables == {("simforge_ros", n) for n in NODE_PARAMS}
    for arg in ("scenario", "driver", "latency_us", "seed", "out_dir", "params_file", "real_time_factor",
                "hold_at_step"):
        assert f'"{arg}"' in source


def _calls(source: str, name: str) -> list[ast.Call]:
    return [node for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == name]


def test_launch_file_leaves_the_driver_out_for_an_external_one():
    source = (ROOT / "launch" / "simforge.launch.py").read_text()
    conditions: dict[str, list[str | None]] = {}
    for call in _calls(source, "Node"):
        executable = next(kw.value.value for kw in call.keywords if kw.arg == "executable")
        condition = next((ast.unparse(kw.value) for kw in call.keywords if kw.arg == "condition"), None)
        conditions.setdefault(executable, []).append(condition)
    expected = f"""UnlessCondition(PythonExpression(["'", cfg['driver'], "' == '{EXTERNAL}'"]))"""
    assert conditions.pop("driver") == [expected]
    # one bridge or the other: the parameter file's rig, or (built when the launch runs,
    # under the OpaqueFunction's condition) the torch planner's
    assert sorted(conditions.pop("sim_bridge"), key=str) == [None, "UnlessCondition(is_torch)"]
    [opaque] = _calls(source, "OpaqueFunction")
    assert {kw.arg: ast.unparse(kw.value) for kw in opaque.keywords} == {
        "function": "_bridge_for_torch", "condition": "IfCondition(is_torch)"}
    assert """is_torch = PythonExpression(["'", cfg["driver"], "' == 'torch'"])""" in source
    assert set(map(tuple, conditions.values())) == {(None,)}  # every other node always starts


def test_launch_file_hands_the_frame_arguments_to_whichever_bridge_starts():
    """The bridge publishes the cameras' frames and the ego's itself (sim_bridge.camera_tf,
    tf, base_frame), and picks its simulator (backend, carla_host, carla_port): the launch
    arguments of those names reach both bridges, each a parameter the bridge declares, and
    no other node is started for them."""
    source = (ROOT / "launch" / "simforge.launch.py").read_text()
    handed = ("scenario", "base_frame", "camera_tf", "tf", "backend", "carla_host", "carla_port")
    assert f"_BRIDGE_ARGS = {handed!r}".replace("'", '"') in source
    bridge_params = {spec.name for spec in NODE_PARAMS["sim_bridge"]}
    assert set(handed) <= bridge_params
    [plain] = [c for c in _calls(source, "Node")
               if ast.unparse(next(kw.value for kw in c.keywords if kw.arg == "executable")) == "'sim_bridge'"
               and any(kw.arg == "condition" for kw in c.keywords)]
    params = ast.unparse(next(kw.value for kw in plain.keywords if kw.arg == "parameters"))
    assert params == "[params_file, {k: cfg[k] for k in _BRIDGE_ARGS}]"
    function = next(node for node in ast.walk(ast.parse(source))
                    if isinstance(node, ast.FunctionDef) and node.name == "_bridge_for_torch")
    assert "**{k: LaunchConfiguration(k) for k in _BRIDGE_ARGS}" in ast.unparse(function)
    defaults = {spec.name: spec.default for spec in NODE_PARAMS["sim_bridge"]}
    for arg in ("camera_tf", "tf", "base_frame", "backend", "carla_host", "carla_port"):  # the parameter's own
        default = defaults[arg]
        text = str(default).lower() if isinstance(default, bool) else default
        assert f'"{arg}": ("{text}", ' in source


def test_launch_file_hands_the_clock_master_only_its_own_parameters_with_their_defaults():
    """Every launch argument the clock master takes names a parameter it declares, and the
    argument's default is the parameter's (real_time_factor, hold_at_step: a launched run
    goes as fast as it can and never holds unless asked)."""
    source = (ROOT / "launch" / "simforge.launch.py").read_text()
    [clock] = [c for c in _calls(source, "Node")
               if ast.unparse(next(kw.value for kw in c.keywords if kw.arg == "executable")) == "'clock_master'"]
    parameters = next(kw.value for kw in clock.keywords if kw.arg == "parameters")
    assert isinstance(parameters, ast.List)
    [given] = [item for item in parameters.elts if isinstance(item, ast.Dict)]
    names = [ast.literal_eval(key) for key in given.keys if key is not None]
    declared = {spec.name: spec.default for spec in NODE_PARAMS["clock_master"]}
    assert set(names) <= set(declared), set(names) - set(declared)
    assert {"real_time_factor", "hold_at_step"} <= set(names)
    for arg in ("real_time_factor", "hold_at_step"):
        assert f'"{arg}": ("{declared[arg]}", ' in source


def test_launch_file_gives_the_torch_planner_the_cameras_it_looks_at():
    source = (ROOT / "launch" / "simforge.launch.py").read_text()
    function = next(node for node in ast.walk(ast.parse(source))
                    if isinstance(node, ast.FunctionDef) and node.name == "_bridge_for_torch")
    body = ast.unparse(function)
    assert "cameras = planner_cameras(Path(params_file))" in body
    assert "'cameras': cameras" in body and "executable='sim_bridge'" in body


def test_launch_file_gives_the_nodes_simforge_runs_fast_dds_profile_unless_one_is_named():
    source = (ROOT / "launch" / "simforge.launch.py").read_text()
    [call] = _calls(source, "SetEnvironmentVariable")
    assert ast.unparse(call) == ("SetEnvironmentVariable('FASTDDS_DEFAULT_PROFILES_FILE', "
                                 "EnvironmentVariable('FASTDDS_DEFAULT_PROFILES_FILE', default_value=profile))")
    assert 'profile = os.path.join(share, "config", "fastdds_shm.xml")' in source
    assert (ROOT / "config" / "fastdds_shm.xml").is_file()
    # set before any node starts: the first entity after the launch arguments
    body = source.split("LaunchDescription([", 1)[1]
    assert body.startswith("*declared, fastdds, recorder,")


def test_the_planner_cameras_are_the_parameter_files_or_the_default(tmp_path):
    """What the launch file's torch bridge renders: as node_params does for `simforge run`."""
    own = tmp_path / "own.yaml"
    own.write_text("driver:\n  ros__parameters:\n    cameras: [chase, front]\n"
                   "sim_bridge:\n  ros__parameters:\n    cameras: [rear]\n")
    assert planner_cameras(own) == ["chase", "front"]
    assert planner_cameras(ROOT / "config" / "simforge.yaml") == list(SURROUND)
    shared = tmp_path / "shared.yaml"
    shared.write_text("/**:\n  ros__parameters:\n    cameras: [left]\n")
    assert planner_cameras(shared) == ["left"]
    bare = tmp_path / "bare.yaml"
    bare.write_text("clock_master:\n  ros__parameters:\n    seed: 3\n")
    assert planner_cameras(bare) == list(SURROUND)
    bad = tmp_path / "bad.yaml"
    bad.write_text("driver:\n  ros__parameters:\n    cameras: front\n")
    with pytest.raises(ConfigError, match=r"driver\.cameras|cameras"):
        planner_cameras(bad)
    # a file whose driver would wait for a frame longer than the clock master waits for it
    slow = tmp_path / "slow.yaml"
    slow.write_text("clock_master:\n  ros__parameters:\n    participant_timeout_ms: 4000\n")
    with pytest.raises(ConfigError) as err:
        planner_cameras(slow)
    assert str(err.value).startswith(f"{slow}: driver.frame_timeout_ms: expected less than "
                                     "clock_master.participant_timeout_ms (4000): ")


def test_the_play_profile_sets_only_the_writers_heartbeat():
    """`simforge play` talks to the user's own nodes: its Fast DDS profile keeps their
    default transports and only makes writers heartbeat every 100 ms (record.play)."""
    import xml.etree.ElementTree as ET

    from simforge_ros.record.play import PLAY_PROFILE
    from simforge_ros.runner import fastdds_profile

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
