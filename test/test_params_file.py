"""`simforge run --params-file`: a ROS 2 parameter file read with every problem named, and
merged under the command line's own choices."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from simforge_ros import cli
from simforge_ros.core.errors import ConfigError
from simforge_ros.params import read_params_file

ROOT = Path(__file__).resolve().parents[1]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(text)
    return path


def test_the_shipped_parameter_file_reads_back_as_it_is_written():
    params = read_params_file(ROOT / "config" / "simforge.yaml")
    assert set(params) == {"clock_master", "sim_bridge", "driver", "recorder"}
    assert params["clock_master"]["decision_us"] == 100_000
    assert params["sim_bridge"]["cameras"] == ["chase", "front"]


def test_every_problem_in_a_file_is_named_with_the_file_node_and_field(tmp_path):
    path = _write(tmp_path, """
clock_master:
  ros__parameters:
    seed: four
    bogus: 1
sim_bridge:
  cameras: [front]
/**:
  ros__parameters:
    use_sim_time: "yes"
    decison_us: 2
""")
    with pytest.raises(ConfigError) as err:
        read_params_file(path)
    lines = str(err.value).splitlines()
    assert len(lines) == 5
    assert all(line.startswith(f"{path}: ") for line in lines)
    text = str(err.value)
    assert "clock_master.seed: expected a value of type int, got 'four'" in text
    assert "clock_master.bogus: expected a parameter of clock_master" in text
    assert "sim_bridge: expected ros__parameters: a mapping of param: value" in text
    assert ("/**.decison_us: expected a parameter some node declares (did you mean decision_us?), "
            "got 'decison_us'") in text
    assert "/**.use_sim_time: expected a value of type bool, got 'yes'" in text


@pytest.mark.parametrize(("text", "needle"), [
    (None, "file: expected an existing ROS 2 parameter file"),
    # where PyYAML stopped, as the scenario loader says it (an exception's class name said nothing)
    ("a: [b", "file: expected a YAML ROS 2 parameter file, got \"line 1, column 6: expected ',' or ']', but got "
              "'<stream end>'\""),
    ("clock_master: [\n", "file: expected a YAML ROS 2 parameter file, got \"line 2, column 1: expected the "
                           "node content, but found '<stream end>'\""),
    ("- clock_master", "file: expected a mapping of node: ros__parameters: {param: value}"),
    ("", "file: expected a mapping of node: ros__parameters"),
])
def test_a_file_that_is_not_a_parameter_file_is_one_clear_problem(tmp_path, text, needle):
    path = tmp_path / "missing.yaml" if text is None else _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        read_params_file(path)
    assert str(err.value).startswith(f"{path}: {needle}")


@pytest.mark.parametrize(("data", "got"), [
    # a UTF-16 byte order mark: PyYAML decoded it as UTF-16 and read other text than was written
    (b"\xff\xfec\x00l\x00", "bytes that are not UTF-8 text (0xff at byte 0)"),
    (b"clock_master:\n  ros__parameters: {run_id: caf\xe9}\n", "bytes that are not UTF-8 text (0xe9 at byte 45)"),
    (None, "a directory"),
    # PyYAML composes nesting recursively: "unexpected error: RecursionError"
    (b"x: " + b"[" * 5000 + b"]" * 5000 + b"\n", "YAML nested deeper than a few hundred levels"),
])
def test_a_file_that_is_not_utf8_text_or_a_directory_is_said_so(tmp_path, data, got):
    """They were named by an exception's class: 'UnicodeDecodeError', 'IsADirectoryError'."""
    path = tmp_path / "p.yaml"
    if data is None:
        path.mkdir()
    else:
        path.write_bytes(data)
    with pytest.raises(ConfigError) as err:
        read_params_file(path)
    assert str(err.value) == f"{path}: file: expected a YAML ROS 2 parameter file, got {got}"


@pytest.mark.parametrize("source", ["/dev/zero", "big"])
def test_a_file_too_large_to_be_a_parameter_file_is_refused_unread(tmp_path, source):
    """`--params-file /dev/zero` grew to 14 GB in 32 s; a 40 MB file took 3 GB."""
    path = Path(source)
    if source == "big":
        path = tmp_path / "big.yaml"
        path.write_text("x: " + "a" * (16 << 20) + "\n")
    with pytest.raises(ConfigError) as err:
        read_params_file(path)
    assert str(err.value) == f"{path}: file: expected a YAML ROS 2 parameter file, got a file of more than 16 MiB"


def test_a_period_given_in_both_units_in_a_file_is_refused_naming_both(tmp_path):
    """The node took the seconds and dropped the microseconds without a word (a run of
    decision_us 200000 and decision_s 0.1 stepped every 0.1 s, counted)."""
    path = _write(tmp_path, """
clock_master:
  ros__parameters: {decision_us: 200000, decision_s: 0.1, seed: 1}
/**:
  ros__parameters: {tick_us: 20000}
sim_bridge:
  ros__parameters: {tick_s: 0.02}
""")
    with pytest.raises(ConfigError) as err:
        read_params_file(path)
    # a shared tick_us and a node's own tick_s: the node gets both (under `ros2 launch` too)
    assert sorted(str(err.value).splitlines()) == [
        f"{path}: clock_master.decision_us and clock_master.decision_s: expected one of the two (a period in "
        "microseconds or in seconds, never both), got {'decision_us': 200000, 'decision_s': 0.1}",
        f"{path}: sim_bridge.tick_us and sim_bridge.tick_s: expected one of the two (a period in microseconds or "
        "in seconds, never both), got {'tick_us': 20000, 'tick_s': 0.02}",
    ]


def test_a_period_in_both_units_on_the_command_line_is_refused_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "runs"
    assert cli.main(["run", "right_turn", "--steps", "2", "--set", "clock_master.decision_us=200000",
                     "--set", "clock_master.decision_s=0.1", "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        "simforge: --set: clock_master.decision_us and clock_master.decision_s: expected one of the two (a period "
        "in microseconds or in seconds, never both), got {'decision_us': 200000, 'decision_s': 0.1}\n")
    assert not out.exists()


def test_shared_parameters_go_to_the_nodes_declaring_them_and_sections_apply_in_the_files_order(tmp_path):
    """As rclpy applies them (checked against a real node: tests/ros/test_params_as_rcl.py):
    a later section's value replaces an earlier one's. simforge put /** first whatever its
    place, so a file with the node's section first ran with seed 3 under simforge and 9
    under `ros2 run`."""
    node_first = _write(tmp_path, """
/clock_master:
  ros__parameters:
    seed: 3
/**:
  ros__parameters:
    faults: [drop_frame@4]
    seed: 9
    scenario: red_signal
""")
    params = read_params_file(node_first)
    assert params["clock_master"]["seed"] == 9
    assert params["sim_bridge"]["scenario"] == params["driver"]["scenario"] == "red_signal"
    assert all(params[node]["faults"] == ["drop_frame@4"] for node in ("sim_bridge", "driver", "recorder"))
    shared_first = tmp_path / "shared_first.yaml"
    shared_first.write_text("/**:\n  ros__parameters: {seed: 9}\n/clock_master:\n  ros__parameters: {seed: 3}\n")
    assert read_params_file(shared_first)["clock_master"]["seed"] == 3


def test_the_run_takes_its_options_from_the_file_and_the_rest_as_settings(tmp_path, capsys):
    path = _write(tmp_path, """
clock_master:
  ros__parameters: {seed: 4, steps: 12, latency_us: 200000, record: false, decision_s: 0.2, run_id: old}
sim_bridge:
  ros__parameters: {scenario: red_signal, cameras: [front], faults: [drop_frame@3]}
driver:
  ros__parameters: {policy: torch, scenario: red_signal, faults: [drop_frame@3, stale_frame@5]}
recorder:
  ros__parameters: {out_dir: /somewhere/else, storage: sqlite3}
""")
    options, sets, faults = cli._params_file(str(path))
    assert options == {"seed": 4, "steps": 12, "latency_us": 200_000, "record": False,
                       "scenario": "red_signal", "driver": "torch"}
    assert sets == {"clock_master": {"decision_s": 0.2}, "sim_bridge": {"cameras": ["front"]},
                    "recorder": {"storage": "sqlite3"}}
    assert faults == ["drop_frame@3", "stale_frame@5"]
    said = capsys.readouterr().err
    assert "clock_master.run_id, recorder.out_dir ignored: each run has its own" in said


def test_two_nodes_naming_different_scenarios_is_a_problem(tmp_path):
    path = _write(tmp_path, """
sim_bridge:
  ros__parameters: {scenario: red_signal}
driver:
  ros__parameters: {scenario: right_turn}
""")
    with pytest.raises(ConfigError) as err:
        cli._params_file(str(path))
    assert str(err.value) == f"{path}: driver.scenario: expected the same scenario as the other nodes, got 'right_turn'"


def test_one_scenario_file_spelt_two_ways_is_one_and_the_command_lines_scenario_wins(tmp_path, monkeypatch):
    """scen/x.yaml beside ./scen/x.yaml (or its absolute path) was refused as two scenarios,
    which the launch file runs; a SCENARIO argument replaces the file's, as in launch."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scen").mkdir()
    (tmp_path / "scen" / "x.yaml").write_text("")
    for other in ("./scen/x.yaml", str(tmp_path / "scen" / "x.yaml")):
        path = _write(tmp_path, f"""
sim_bridge:
  ros__parameters: {{scenario: scen/x.yaml}}
driver:
  ros__parameters: {{scenario: {other}}}
""")
        options, _sets, _faults = cli._params_file(str(path))
        assert Path(options["scenario"]).resolve() == tmp_path / "scen" / "x.yaml"
    path = _write(tmp_path, """
sim_bridge:
  ros__parameters: {scenario: red_signal}
driver:
  ros__parameters: {scenario: right_turn}
""")
    cli._params_file(str(path), given=["scenario"])  # `simforge run right_turn --params-file F`: no problem


@pytest.mark.parametrize(("text", "said"), [
    ("sim_bridge:\n  ros__parameters: {faults: [bogus]}\n", "sim_bridge.faults: expected one of drop_frame@K, "),
    ("driver:\n  ros__parameters: {policy: bogus}\n",
     "driver.policy: expected one of route, torch, external, got 'bogus'"),
    ("sim_bridge:\n  ros__parameters: {scenario: nosuch}\n",
     "sim_bridge.scenario: expected one of handover_parked, red_signal, right_turn, unprotected_left or an "
     "existing scenario file, got 'nosuch'"),
])
def test_a_run_option_the_file_gives_is_named_as_the_files(tmp_path, text, said):
    """They were named as the command-line arguments they stand for, which the user never
    typed: `--inject: bogus`, `--driver`, `SCENARIO`."""
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        cli._params_file(str(path))
    assert str(err.value).startswith(f"{path}: {said}"), str(err.value)


def test_a_run_option_the_command_line_gives_is_not_checked_in_the_file(tmp_path):
    """The command line's SCENARIO and --driver win: the file's are not used, so a scenario
    file a kept params.yaml names, since moved, does not stop `--params-file RUN/params.yaml`."""
    path = _write(tmp_path, "sim_bridge:\n  ros__parameters: {scenario: /moved/away.yaml}\n"
                            "driver:\n  ros__parameters: {policy: bogus}\n")
    options, _sets, _faults = cli._params_file(str(path), given=("scenario", "driver"))
    assert options == {"scenario": "/moved/away.yaml", "driver": "bogus"}  # taken, and overridden by the caller
    with pytest.raises(ConfigError):
        cli._params_file(str(path), given=("scenario",))


def test_a_parameter_given_twice_is_named_with_both_lines(tmp_path):
    """The last of two was taken silently: a run of `decision_us` 100000 then 200000 ran
    at 200 ms and said nothing."""
    path = _write(tmp_path, "clock_master:\n  ros__parameters:\n    decision_us: 100000\n    decision_us: 200000\n")
    with pytest.raises(ConfigError) as err:
        read_params_file(path)
    assert str(err.value) == (f"{path}: file: expected a YAML ROS 2 parameter file, got \"line 4, column 5: found "
                              "'decision_us' twice in one mapping (first on line 3)\"")


@pytest.mark.parametrize(("key", "kind"), [("? [a, b]\n    : 3", "list"), ("{a: 1}: 3", "mapping")])
def test_a_key_that_is_no_name_is_named_with_its_line(tmp_path, key, kind):
    """A list or mapping as a key was unhashable: "unexpected error: TypeError", exit 1,
    with the file unnamed (scenario files already refused it)."""
    path = _write(tmp_path, f"clock_master:\n  ros__parameters:\n    {key}\n")
    with pytest.raises(ConfigError) as err:
        read_params_file(path)
    assert str(err.value).startswith(f"{path}: file: expected a YAML ROS 2 parameter file, got \"line 3, column ")
    assert str(err.value).endswith(f"a key that is a {kind} (ROS 2's parameter parser takes names as keys)\"")


def test_the_command_line_wins_and_a_period_in_one_unit_replaces_the_other():
    base = {"clock_master": {"decision_us": 200_000, "seed": 1}, "sim_bridge": {"tick_s": 0.04}}
    over = {"clock_master": {"decision_s": 0.3}, "sim_bridge": {"tick_us": 20_000, "width": 64}}
    assert cli._merged_sets(base, over) == {
        "clock_master": {"seed": 1, "decision_s": 0.3},
        "sim_bridge": {"tick_us": 20_000, "width": 64},
    }
    # both units on the command line itself stay, for params.validate to refuse
    both = {"clock_master": {"decision_s": 0.3, "decision_us": 300_000}}
    assert cli._merged_sets(base, both)["clock_master"] == {"seed": 1, "decision_s": 0.3, "decision_us": 300_000}


def test_rclpy_own_use_sim_time_is_taken_and_left_out_with_a_note(tmp_path):
    """The shared section a stack's parameter file usually has; simforge's nodes time nothing
    by /clock, so the run leaves it out and says so instead of refusing the file."""
    path = _write(tmp_path, """
/**:
  ros__parameters:
    use_sim_time: true
recorder:
  ros__parameters:
    use_sim_time: false
    storage: mcap
""")
    notes: list[str] = []
    params = read_params_file(path, notes)
    assert params["recorder"]["storage"] == "mcap"
    assert all("use_sim_time" not in values for values in params.values())
    assert [n.split(" ignored")[0] for n in notes] == [f"{path}: /**.use_sim_time", f"{path}: recorder.use_sim_time"]



def test_a_node_s_parameters_as_ros2_param_dump_writes_them_are_taken(tmp_path):
    """`ros2 param dump /sim_bridge` of a running node adds rclpy's own two parameters."""
    path = _write(tmp_path, """
/sim_bridge:
  ros__parameters:
    cameras: [front]
    start_type_description_service: true
    use_sim_time: false
""")
    notes: list[str] = []
    assert read_params_file(path, notes) == {"sim_bridge": {"cameras": ["front"]}}
    assert [n.split(" ignored")[0] for n in notes] == [
        f"{path}: sim_bridge.start_type_description_service", f"{path}: sim_bridge.use_sim_time"]
    assert "rclpy's default" in notes[0] and "never from /clock" in notes[1]


def test_a_float_with_an_exponent_and_no_dot_is_a_float_as_ros_reads_it(tmp_path):
    """PyYAML reads `1e-3` as a string (YAML 1.1 wants a dot); ROS 2's parameter parser, a
    double: a stack's file with `pose_tolerance_m: 1e-3` was refused as 'a value of type float'."""
    path = tmp_path / "p.yaml"
    path.write_text("clock_master:\n  ros__parameters:\n    pose_tolerance_m: 1e-3\n    pose_tolerance_deg: 5E-2\n")
    assert read_params_file(path)["clock_master"] == {"pose_tolerance_m": 0.001, "pose_tolerance_deg": 0.05}
    assert cli._parse_set(["sim_bridge.tick_s=2e-2"]) == {"sim_bridge": {"tick_s": 0.02}}  # as rcl reads -p
    # a launch argument is read by PyYAML, as launch_ros reads it, and coerced on use:
    from simforge_ros.params import coerce

    assert coerce("sim_bridge", "tick_s", "2e-2") == 0.02
    for not_a_number in ("1e", "e5", "1e-3x", "1.0.0e3"):
        with pytest.raises(ConfigError, match="expected a value of type float"):
            coerce("sim_bridge", "tick_s", not_a_number)
    assert coerce("clock_master", "run_id", "1e-3") == "1e-3"  # only where a float is declared


def test_a_stacks_file_gives_simforge_its_own_sections_and_leaves_the_others_out(tmp_path):
    """Handed a whole stack's parameter file, as `ros2 launch` hands each node the same one,
    a node takes only its own section and the shared parameters it declares; the file used to
    be refused for naming nodes that are not simforge's."""
    path = _write(tmp_path, """
/**:
  ros__parameters:
    use_sim_time: true
    robot_base_frame: base_link
    seed: 5
controller_server:
  ros__parameters:
    controller_frequency: 20.0
/bt_navigator:
  ros__parameters:
    default_server_timeout: 20
sim_bridge:
  ros__parameters:
    cameras: [front]
""")
    notes: list[str] = []
    assert read_params_file(path, notes) == {"sim_bridge": {"cameras": ["front"]}, "clock_master": {"seed": 5}}
    assert [n.split(" left out")[0] for n in notes if " left out" in n] == [
        f"{path}: /**.robot_base_frame", f"{path}: controller_server", f"{path}: /bt_navigator"]
    assert "not a simforge node" in notes[-1]


@pytest.mark.parametrize(("section", "meant"), [("sim_brige", "sim_bridge"), ("/simforge/sim_bridge", "sim_bridge"),
                                                ("drivers", "driver"), ("ClockMaster", "clock_master"),
                                                ("SimBridge", "sim_bridge")])
def test_a_section_within_a_typo_of_a_simforge_node_is_refused_naming_it(tmp_path, section, meant):
    """Left out like another node's, a typo'd section would run the defaults with only a note."""
    path = _write(tmp_path, f"""
{section}:
  ros__parameters:
    scenario: red_signal
""")
    with pytest.raises(ConfigError) as err:
        read_params_file(path)
    assert str(err.value) == (f"{path}: {section}: expected a node in ['clock_master', 'driver', 'recorder', "
                              f"'sim_bridge'] (did you mean {meant}?), got '{section}'")


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("decision_us", 0, "an integer > 0"),
    ("decision_s", -0.1, "a number > 0"),
    ("latency_us", -100_000, "an integer in [0, "),
    ("latency_s", -0.1, "a number >= 0"),
    ("pose_tolerance_m", -1.0, "a number >= 0"),
    ("pose_tolerance_deg", -0.5, "a number >= 0"),
])
def test_a_decision_period_latency_or_tolerance_out_of_range_is_named_at_start_up(name, value, expected):
    """They used to start a run that the bridge refused at step 0 (rate_not_multiple, with
    the bridge named for the clock master's parameter) or the contract before it; a negative
    pose tolerance made the clock master exit with 1 ("unexpected error"). Every other
    period was already checked as a parameter."""
    from simforge_ros.params import coerce

    with pytest.raises(ConfigError) as info:
        coerce("clock_master", name, value)
    assert f"clock_master.{name}: expected {expected}" in str(info.value)
    assert coerce("clock_master", "latency_us", 0) == 0 and coerce("clock_master", "latency_s", 0.0) == 0.0


@pytest.mark.parametrize(("item", "hint"), [
    ("driver.scenario=red_signal", "the SCENARIO argument instead"),
    ("sim_bridge.scenario=red_signal", "the SCENARIO argument instead"),
    ("clock_master.seed=7", "--seed 7 instead"),
    ("clock_master.steps=5", "--steps 5 instead"),
    ("clock_master.latency_us=100000", "--latency-ms instead"),
    ("driver.policy=torch", "--driver torch instead, in place of any --driver"),
    ("sim_bridge.faults=[drop_frame@3]", "--inject instead"),
    ("recorder.out_dir=/elsewhere", "--out instead"),
    ("clock_master.record=false", "clock_master.record in a --params-file instead"),
    ("recorder.run_id=x", "no value: each run is named for you"),
])
def test_set_refuses_what_simforge_run_sets_itself_and_names_the_way_to_give_it(item, hint):
    """Through --set such a parameter reached one node only: a route follower tracking
    another scenario than the bridge ran (counted), a recorder writing outside its run
    directory (counted, with no record in it), --steps overridden unseen."""
    with pytest.raises(ConfigError) as info:
        cli._parse_set(["sim_bridge.width=64", item])
    key = item.partition("=")[0]
    assert str(info.value) == f"--set: {key}: expected {hint} (simforge run sets {key} itself), got {item!r}"
    assert cli._parse_set(["clock_master.latency_s=0.2"]) == {"clock_master": {"latency_s": 0.2}}


def test_every_parameter_simforge_run_sets_itself_has_a_way_to_give_it():
    from simforge_ros.runner import SPEC_PARAMS

    assert {option for options in SPEC_PARAMS.values() for option in options.values()} == set(cli._RUN_OPTION)


def test_a_camera_fault_the_file_gives_is_named_as_the_files(tmp_path, capsys):
    """It was named `--inject`, which the user never typed."""
    path = _write(tmp_path, "sim_bridge:\n  ros__parameters: {faults: [stale_frame@0]}\n")
    assert cli.main(["run", "right_turn", "--params-file", str(path), "--out", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err == (
        f"simforge: {path}: faults: expected stale_frame@K at a step after the first frames (K >= 1: at step 0 no "
        "earlier frame exists), got 'stale_frame@0'\n")
    assert cli.main(["run", "right_turn", "--inject", "stale_frame@0", "--out", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err.startswith("simforge: --inject: stale_frame@0: expected stale_frame@K ")
    assert not (tmp_path / "runs").exists()


def test_plain_values_are_typed_as_rcl_types_them(tmp_path):
    """PyYAML's YAML 1.1 typing and rcl's differ; the nodes get rcl's (test/ros/
    test_params_as_rcl.py holds the two to a real node). A file `simforge run` took could
    fail under `ros2 run` (`steps: 1_000`, read as 1000 here and as a string by rcl) or the
    other way round (`odometry: y`, a bool to rcl and refused here)."""
    path = tmp_path / "p.yaml"
    path.write_text("sim_bridge:\n  ros__parameters: {odometry: y, tf: OFF, width: 010, height: 0x40}\n")
    assert read_params_file(path)["sim_bridge"] == {"odometry": True, "tf": False, "width": 8, "height": 64}
    for given, got in (("steps: 1_000", "'1_000'"), ("steps: 1:20", "'1:20'"), ("steps: 0b11", "'0b11'")):
        path.write_text(f"clock_master:\n  ros__parameters: {{{given}}}\n")
        with pytest.raises(ConfigError, match=f"expected a value of type int.*got {got}"):
            read_params_file(path)
    path.write_text("sim_bridge:\n  ros__parameters: {carla_vehicle: ~, map_frame: '1e3', carla_town: 08}\n")
    with pytest.raises(ConfigError) as err:
        read_params_file(path)
    assert [p.field for p in err.value.problems] == ["sim_bridge.carla_town"]  # 8.0, a double to rcl
    path.write_text("sim_bridge:\n  ros__parameters: {carla_vehicle: ~, map_frame: '1e3'}\n")
    assert read_params_file(path)["sim_bridge"] == {"carla_vehicle": "~", "map_frame": "1e3"}


def test_an_alias_or_an_empty_value_is_refused_as_rcl_refuses_them(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("sim_bridge:\n  ros__parameters: {width: &w 640, height: *w}\n")
    with pytest.raises(ConfigError, match=r"an alias \(\*name\), which ROS 2's parameter parser \(rcl\)"):
        read_params_file(path)
    path.write_text("sim_bridge:\n  ros__parameters:\n    carla_town:\n")
    with pytest.raises(ConfigError, match="no value"):
        read_params_file(path)


def test_qos_overrides_are_left_out_with_a_note(tmp_path):
    """rclpy takes them (a stack's file often has them); simforge refused the file."""
    path = tmp_path / "p.yaml"
    path.write_text("sim_bridge:\n  ros__parameters:\n    width: 640\n    qos_overrides:\n"
                    "      /clock: {subscription: {depth: 5}}\n")
    notes: list[str] = []
    assert read_params_file(path, notes)["sim_bridge"] == {"width": 640}
    assert notes == [f"{path}: sim_bridge.qos_overrides ignored: simforge's publishers and subscriptions take no "
                     "QoS overrides (their QoS is the run's, README: Architecture)"]


def test_a_float_too_small_for_rcl_to_read_back_is_refused():
    """An audit's --real-time-factor 1e-320 was announced, then the clock master refused
    the parameter file it was handed: rcl (C strtod) reads a subnormal as a string."""
    from simforge_ros.params import coerce

    with pytest.raises(ConfigError, match=r"expected a finite number, 0 or at least 2\.2e-308 in size"):
        coerce("clock_master", "real_time_factor", 1e-320)
    assert coerce("clock_master", "real_time_factor", 0) == 0.0
    assert coerce("clock_master", "real_time_factor", 1e-300) == 1e-300


def test_what_rcl_refuses_of_the_environment_is_not_blamed_on_the_file(tmp_path, monkeypatch):
    """The file is asked of rcl on a context of its own: a bad ROS_DOMAIN_ID read
    "file: ... got one it refuses: ROS_DOMAIN_ID is not an integral number", and an RMW not
    installed ended the process with rcl's exit 102."""
    path = tmp_path / "p.yaml"
    path.write_text("clock_master:\n  ros__parameters: {seed: 4}\n")
    monkeypatch.setenv("ROS_DOMAIN_ID", "abc")
    assert read_params_file(path) == {"clock_master": {"seed": 4}}
    monkeypatch.delenv("ROS_DOMAIN_ID")
    monkeypatch.setenv("RMW_IMPLEMENTATION", "rmw_not_installed_cpp")
    with pytest.raises(ConfigError, match="environment: RMW_IMPLEMENTATION: expected an RMW installed here"):
        read_params_file(path)


def test_values_rcl_reads_apart_from_yaml_1_1_edge_cases(tmp_path):
    """From a review against a real node: a hex float past a double was a traceback (rcl: a
    string); a key given twice, once quoted, was taken twice; rcl reads no tag but !!str."""
    too_big = cli._parse_set(["clock_master.real_time_factor=0x1p1024"])
    assert too_big == {"clock_master": {"real_time_factor": "0x1p1024"}}
    path = tmp_path / "p.yaml"
    path.write_text('clock_master:\n  ros__parameters:\n    "decision_us": 50000\n    decision_us: 100000\n')
    with pytest.raises(ConfigError, match="found 'decision_us' twice in one mapping"):
        read_params_file(path)
    path.write_text("clock_master:\n  ros__parameters: {seed: !!float 3}\n")
    assert read_params_file(path)["clock_master"]["seed"] == 3
    path.write_text('clock_master:\n  ros__parameters: {seed: !!int "5"}\n')
    with pytest.raises(ConfigError, match="expected a value of type int, got '5'"):
        read_params_file(path)
    from simforge_ros.core.yaml_file import rcl_scalar

    assert rcl_scalar("0x1p-1074") == 5e-324 and rcl_scalar("1e-320") == "1e-320"  # exact subnormal or not
    assert math.isnan(rcl_scalar("nan(12)"))


def test_the_nodes_choices_in_a_file_are_named_at_once_with_its_types(tmp_path, capsys):
    """A backend, a storage and the cameras were each the node's own check, one at a time
    as the nodes started and without the file's name: five runs to find five problems."""
    path = _write(tmp_path, "sim_bridge:\n  ros__parameters: {width: 3.0, cameras: [front, front], backend: nope}\n"
                            "recorder:\n  ros__parameters: {storage: parquet}\n")
    assert cli.main(["run", "right_turn", "--params-file", str(path), "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    for field, expected in (("sim_bridge.width", "a value of type int"),
                            ("sim_bridge.cameras", "a list of distinct cameras from front, left, rear, right, chase"),
                            ("sim_bridge.backend", "one of embedded, carla"),
                            ("recorder.storage", "one of mcap, sqlite3")):
        assert f"{path}: {field}: expected {expected}" in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("sets", "said"), [
    # seconds past a day: its microseconds overflowed int64 deep in rclpy (SystemError, exit 1)
    (["clock_master.decision_s=1e13"], "clock_master.decision_s: expected a number <= 86400"),
    (["sim_bridge.camera_period_s=1e13"], "sim_bridge.camera_period_s: expected a number <= 86400"),
    # one past int64 is a double to rcl: "expected a value of type int, got 9.223372036854776e+18"
    (["clock_master.decision_us=9223372036854775809"],
     "clock_master.decision_us: expected an integer in [1, 86400000000] (one past int64 is read as a double by ROS "
     "2), got 9223372036854775809"),
    # as a double -2^63 - 1 is -2^63, which passed the range check, said as a float
    (["clock_master.participant_timeout_ms=-9223372036854775809"],
     "clock_master.participant_timeout_ms: expected an integer in [1, 9223372036854775807] (one past int64 is read "
     "as a double by ROS 2), got -9223372036854775809"),
    (["clock_master.decision_us=9223372036854760000", "sim_bridge.tick_us=9223372036854760000"],
     "clock_master.decision_us: expected an integer in [1, 86400000000]"),
    # --latency-ms was dropped unsaid for the seconds twin
    (["clock_master.latency_s=0.1"], "clock_master.latency_s: expected no latency beside --latency-ms"),
    # a frame its own parent, or a loop through a camera's frame, counted
    (["sim_bridge.base_frame=map", "sim_bridge.tf=true"], "sim_bridge.base_frame: expected another frame than "
                                                          "map_frame (map)"),
    (["sim_bridge.map_frame=chase"], "sim_bridge.map_frame: expected a frame other than a rendered camera's"),
    (["sim_bridge.base_frame=front"], "sim_bridge.base_frame: expected a frame other than a rendered camera's"),
], ids=["decision_s", "camera_period_s", "past-int64", "below-int64", "decision_us", "latency_s", "map-is-base",
        "map-is-camera", "base-is-camera"])
def test_values_that_broke_a_run_are_usage_errors(tmp_path, capsys, sets, said):
    argv = ["run", "right_turn", "--steps", "5", "--latency-ms", "300", "--out", str(tmp_path / "runs")]
    for item in sets:
        argv += ["--set", item]
    assert cli.main(argv) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("steps", "ok"), [(200_000_000, False), (24_857, False), (24_856, True)])
def test_a_run_whose_last_step_time_overflows_its_stamps_is_refused(tmp_path, capsys, steps, ok):
    """Past int64 microseconds the arithmetic overflowed; past int32 seconds (68 years) a
    day-long step's /clock and stamps wrapped to negative seconds without a word (from step
    24 856, the 24 857th: t = 2 147 558 400 s)."""
    argv = ["run", "right_turn", "--steps", str(steps), "--set", "clock_master.decision_us=86400000000",
            "--set", "sim_bridge.tick_us=86400000000", "--out", str(tmp_path / "runs")]
    if ok:  # the check alone: the run itself would take days of wall time for its ticks
        from simforge_ros.params import check_run_span

        check_run_span({"clock_master": {"steps": steps, "decision_us": 86_400_000_000}}, "run parameters")  # no raise
        return
    assert cli.main(argv) == 2
    assert ("clock_master.steps: expected at most 24856 steps of 86400000000 us (a run's stamps are "
            f"builtin_interfaces/Time, int32 seconds: 68 years), got {steps}") in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_the_parameters_choices_are_the_packages_own():
    """params keeps its choices as literals (the launch file imports it in the system's
    Python, without rosbags or the engine): they must stay what the nodes accept."""
    from simforge_ros.backends import BACKENDS
    from simforge_ros.engine import CAMERA_NAMES
    from simforge_ros.params import spec
    from simforge_ros.record.bag import STORAGES

    assert spec("sim_bridge", "backend").choices == BACKENDS
    assert set(spec("sim_bridge", "cameras").choices) == set(CAMERA_NAMES)
    assert spec("driver", "cameras").choices == spec("sim_bridge", "cameras").choices
    assert set(spec("recorder", "storage").choices) == set(STORAGES)


@pytest.mark.parametrize("item", ["sim_bridge.map_frame='odom", 'sim_bridge.base_frame="base_link',
                                  "sim_bridge.carla_town=*x", "sim_bridge.map_frame=[" * 2000])
def test_set_refuses_a_value_rcl_cannot_read_naming_it(item):
    """rcl refuses `-p map_frame:='odom` ("Couldn't parse parameter override rule"); --set took
    it as the string "'odom": a frame of that name on /tf, and the run counted."""
    with pytest.raises(ConfigError) as info:
        cli._parse_set([item])
    key = item.partition("=")[0]
    assert str(info.value).startswith(f"--set: {key}: expected a value as rcl reads `-p NAME:=VALUE`: YAML (")
    assert cli._parse_set(["sim_bridge.map_frame=\"'odom\""]) == {"sim_bridge": {"map_frame": "'odom"}}


@pytest.mark.parametrize(("item", "said"), [
    ("sim_brige.width=64", "--set: sim_brige.width: expected a node in ['clock_master', 'driver', 'recorder', "
                           "'sim_bridge'] (did you mean sim_bridge?), got 'sim_brige'"),
    ("sim_bridge.widht=64", "--set: sim_bridge.widht: expected a parameter of sim_bridge (did you mean width?), "
                            "got 'widht'"),
    ("ClockMaster.seed=1", "--set: ClockMaster.seed: expected a node in ['clock_master', 'driver', 'recorder', "
                           "'sim_bridge'] (did you mean clock_master?), got 'ClockMaster'"),
])
def test_set_names_the_node_or_parameter_a_typo_was_meant_as(item, said):
    from simforge_ros.runner import RunSpec, node_params

    with pytest.raises(ConfigError) as info:
        node_params(RunSpec(scenario="right_turn", out_dir=Path("x"), run_id="x", sets=cli._parse_set([item])))
    assert str(info.value) == said


def test_an_integer_python_cannot_build_is_named_not_an_unexpected_error(tmp_path):
    """PyYAML raises ValueError past 4300 digits: "unexpected error: ValueError: Exceeds the limit"."""
    huge = "9" * 5000
    with pytest.raises(ConfigError) as info:
        cli._parse_set([f"clock_master.hold_at_step={huge}"])
    assert str(info.value).startswith("--set: clock_master.hold_at_step: expected a value as rcl reads")
    path = _write(tmp_path, f"clock_master:\n  ros__parameters:\n    hold_at_step: {huge}\n")
    with pytest.raises(ConfigError) as err:
        read_params_file(path)
    assert str(err.value).startswith(f"{path}: file: expected a YAML ROS 2 parameter file, got YAML values Python "
                                     "can build (")


def test_a_parameter_under_the_wrong_node_names_the_node_that_has_it():
    """tick_us under clock_master was "expected a parameter of clock_master: decision_us, ...",
    no word of sim_bridge declaring it."""
    from simforge_ros.params import spec

    with pytest.raises(ConfigError, match=r"clock_master\.tick_us: expected a parameter of clock_master "
                                          r"\(sim_bridge\.tick_us is another node's\), got 'tick_us'"):
        spec("clock_master", "tick_us")
    with pytest.raises(ConfigError, match=r"\(sim_bridge\.scenario and driver\.scenario are other nodes'\)"):
        spec("recorder", "scenario")


def test_wait_for_readers_names_topics_the_run_publishes_in_both_nodes_alike():
    """A typo waited startup_timeout_ms for a reader of a topic nobody writes; one node told
    and not the other left its topics unwaited."""
    from simforge_ros.params import check_wanted_readers, published_topics

    both = {"clock_master": {"wait_for_readers": ["/clock"]}, "sim_bridge": {"wait_for_readers": ["/clock"]}}
    check_wanted_readers(both, "here")
    assert "/simforge/camera/front/image_raw" in published_topics({})  # the default rig: chase, front
    assert "/simforge/odom" not in published_topics({}) and "/simforge/odom" in published_topics(
        {"sim_bridge": {"odometry": True}})
    typo = {node: {"wait_for_readers": ["/clok"]} for node in ("clock_master", "sim_bridge")}
    with pytest.raises(ConfigError, match=r"^here: clock_master\.wait_for_readers: expected a topic this run "
                                          r"publishes \(--wait-for-reader\): /clock, .*, got '/clok'$"):
        check_wanted_readers(typo, "here")
    with pytest.raises(ConfigError, match=r"sim_bridge\.wait_for_readers: expected the same topics as "
                                          r"clock_master\.wait_for_readers"):
        check_wanted_readers({"clock_master": {"wait_for_readers": ["/clock"]}}, "here")


def test_wait_for_reader_is_handed_to_both_nodes_that_publish(tmp_path, capsys):
    """simforge run --wait-for-reader T sets clock_master.wait_for_readers and
    sim_bridge.wait_for_readers alike (--out names a file: the run stops after its checks)."""
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    code = cli.main(["run", "right_turn", "--wait-for-reader", "/clock", "--wait-for-reader", "/simforge/odom",
                     "--out", str(blocker / "runs")])
    err = capsys.readouterr().err
    assert code == 2 and "clock_master.wait_for_readers: expected a topic this run publishes" in err, err
    assert "got '/simforge/odom'" in err  # the bridge publishes no odometry unless asked
    code = cli.main(["run", "right_turn", "--wait-for-reader", "/simforge/odom", "--set", "sim_bridge.odometry=true",
                     "--out", str(blocker / "runs")])
    assert code == 2 and "--out" in capsys.readouterr().err  # past the parameters' checks


def test_a_value_checked_with_the_others_is_named_as_the_file_s_when_the_file_gave_it(tmp_path, capsys):
    """A problem found with the run's parameters together (the topics waited for, the span
    of the steps) names the --params-file when only the file gave the value; the command
    line's own value stays "run parameters"."""
    path = _write(tmp_path, """
clock_master:
  ros__parameters:
    wait_for_readers: ["/clok"]
    steps: 5
    hold_at_step: 9
sim_bridge:
  ros__parameters:
    wait_for_readers: ["/clok"]
""")
    def said(*args: str) -> str:
        assert cli.main(["run", "right_turn", "--params-file", str(path), *args, "--out", str(tmp_path / "runs")]) == 2
        return capsys.readouterr().err

    hold = "clock_master.hold_at_step: expected a step of the run (0 to 4"
    assert f"simforge: {path}: {hold}" in said()
    assert f"simforge: run parameters: {hold}" in said("--hold-at-step", "7")
    topic = "clock_master.wait_for_readers: expected a topic this run publishes"
    assert f"simforge: {path}: {topic}" in said("--hold-at-step", "2")
    assert f"simforge: run parameters: {topic}" in said("--hold-at-step", "2", "--wait-for-reader", "/clok")
