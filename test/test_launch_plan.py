"""What the launch file starts and hands each node (simforge_ros.launch_plan): the launch
arguments typed as the nodes declare their parameters, the parameter file left to stand
where an argument is not given, and bad input refused before any node starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from simforge_ros import launch_plan
from simforge_ros.core.errors import ConfigError
from simforge_ros.launch_plan import ARGS, NODES, OUT_DIR, RUN_ID, plan
from simforge_ros.params import NODE_PARAMS, spec
from simforge_ros.runner import EXTERNAL, SURROUND

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "config" / "simforge.yaml"


@pytest.fixture(autouse=True)
def _default_out_dir(tmp_path, monkeypatch):
    """The default run directory in the test's own folder: this machine's may hold a run."""
    monkeypatch.setattr(launch_plan, "OUT_DIR", str(tmp_path / "simforge-run"))


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    return path


def test_every_argument_sets_declared_parameters_and_defaults_to_the_file():
    assert NODES == ("recorder", "sim_bridge", "driver", "clock_master")  # the clock master last
    assert set(NODES) == set(NODE_PARAMS)
    for arg, item in ARGS.items():
        assert item.default == "", arg  # a default would override the parameter file
        for node, name in item.sets:
            spec(node, name)  # raises for a parameter the node does not declare


def test_with_no_argument_the_shipped_file_stands_and_the_recorder_gets_a_directory():
    planned = plan({arg: "" for arg in ARGS}, SHIPPED)
    assert planned.params_file == SHIPPED
    assert planned.nodes == {
        "recorder": {"out_dir": launch_plan.OUT_DIR, "run_id": RUN_ID, "await_driver": True},
        "sim_bridge": {},
        "driver": {"policy": "route"},
        "clock_master": {"run_id": RUN_ID},
    }
    assert (OUT_DIR, RUN_ID) == ("/tmp/simforge-run", "launch")


def test_arguments_are_typed_as_the_parameters_are_declared():
    """launch_ros types an argument by its look: real_time_factor:=1 reached the node as an
    int, which its double parameter refused, and run_id:=123 as an int, not a string."""
    given = {"real_time_factor": "1", "run_id": "123", "seed": "7", "tf": "true", "carla_port": "2001",
             "scenario": "unprotected_left", "hold_at_step": "0", "latency_us": "100000", "out_dir": "/tmp/r1"}
    nodes = plan(given, SHIPPED).nodes
    clock = nodes["clock_master"]
    assert clock["real_time_factor"] == 1.0 and type(clock["real_time_factor"]) is float
    assert clock["run_id"] == "123" and nodes["recorder"]["run_id"] == "123"
    assert (clock["seed"], clock["hold_at_step"], clock["latency_us"]) == (7, 0, 100000)
    assert nodes["sim_bridge"] == {"tf": True, "carla_port": 2001, "scenario": "unprotected_left"}
    assert nodes["driver"] == {"policy": "route", "scenario": "unprotected_left"}
    assert nodes["recorder"]["out_dir"] == "/tmp/r1"


def test_the_parameter_file_is_not_overridden_by_arguments_not_given(tmp_path):
    """Before, every argument's default was handed over too: tf, backend or out_dir in a
    user's file had no effect."""
    mine = _file(tmp_path, "sim_bridge:\n  ros__parameters:\n    tf: true\n    backend: carla\n"
                           "recorder:\n  ros__parameters:\n    out_dir: /data/run\n    run_id: mine\n"
                           "driver:\n  ros__parameters:\n    policy: torch\n")
    planned = plan({"params_file": str(mine)}, SHIPPED)
    assert planned.params_file == mine
    # the file's out_dir stands; its run id is the clock master's too (the manifest says that one)
    assert planned.nodes["recorder"] == {"run_id": "mine", "await_driver": True}
    assert planned.nodes["clock_master"] == {"run_id": "mine"}
    assert "tf" not in planned.nodes["sim_bridge"] and "backend" not in planned.nodes["sim_bridge"]
    assert planned.nodes["driver"]["policy"] == "torch"  # the file's policy
    # an argument given overrides the file
    assert plan({"params_file": str(mine), "tf": "false"}, SHIPPED).nodes["sim_bridge"]["tf"] is False


def test_an_external_driver_starts_no_driver_node_and_the_recorder_awaits_no_drivers_parameters():
    """An external driver publishes no simforge parameters; the driver node's must reach
    the recorder before step 0, or a short run may end before they come."""
    external = plan({"driver": EXTERNAL}, SHIPPED).nodes
    assert "driver" not in external and external["recorder"]["await_driver"] is False
    torch = plan({"driver": "torch"}, SHIPPED).nodes
    assert torch["driver"]["policy"] == "torch" and torch["recorder"]["await_driver"] is True


def test_the_torch_planner_gets_the_cameras_it_looks_at(tmp_path):
    """With driver:=torch the bridge renders the planner's cameras (driver.cameras, or its
    default), unless the rig the file names for the bridge holds them all (a chase camera
    kept for viewing), as `simforge run --driver torch`."""
    assert plan({"driver": "torch"}, SHIPPED).nodes["sim_bridge"]["cameras"] == list(SURROUND)
    own = _file(tmp_path, "driver:\n  ros__parameters:\n    cameras: [chase, front]\n"
                          "sim_bridge:\n  ros__parameters:\n    cameras: [rear]\n")
    assert plan({"driver": "torch"}, own).nodes["sim_bridge"]["cameras"] == ["chase", "front"]
    shared = tmp_path / "shared.yaml"
    shared.write_text("/**:\n  ros__parameters:\n    cameras: [left]\n")
    assert "cameras" not in plan({"driver": "torch"}, shared).nodes["sim_bridge"]  # the file's [left] holds it
    assert "cameras" not in plan({"driver": "route"}, own).nodes["sim_bridge"]  # the file's rig stands
    viewing = _file(tmp_path, "driver:\n  ros__parameters:\n    cameras: [front]\n"
                              "sim_bridge:\n  ros__parameters:\n    cameras: [front, chase]\n")
    assert "cameras" not in plan({"driver": "torch"}, viewing).nodes["sim_bridge"]


def test_a_torch_driver_whose_frame_wait_outlasts_the_clock_master_is_refused(tmp_path):
    slow = _file(tmp_path, "clock_master:\n  ros__parameters:\n    participant_timeout_ms: 4000\n")
    with pytest.raises(ConfigError) as err:
        plan({"driver": "torch"}, slow)
    assert str(err.value).startswith(f"{slow} and the launch arguments: driver.frame_timeout_ms: expected less "
                                     "than clock_master.participant_timeout_ms (4000): ")
    assert plan({"driver": "route"}, slow).nodes["driver"]["policy"] == "route"  # no frame wait


def test_an_empty_out_dir_in_the_file_gets_the_default_and_the_file_may_name_the_node_in_any_namespace(tmp_path):
    mine = _file(tmp_path, "recorder:\n  ros__parameters:\n    out_dir: ''\n"
                           "/**/sim_bridge:\n  ros__parameters:\n    tf: true\n")
    planned = plan({"params_file": str(mine)}, SHIPPED)
    assert planned.nodes["recorder"]["out_dir"] == launch_plan.OUT_DIR
    assert "tf" not in planned.nodes["sim_bridge"]  # the file's section for the bridge stands


def test_without_an_out_dir_each_launch_gets_a_directory_holding_no_run_yet():
    """The recorder never overwrites a run: a plain second launch was refused by it, after
    every node had started."""
    base = Path(launch_plan.OUT_DIR)
    (base / "bag").mkdir(parents=True)  # a run, or one cut short
    assert plan({}, SHIPPED).nodes["recorder"]["out_dir"] == f"{base}-2"
    Path(f"{base}-2").mkdir()
    (Path(f"{base}-2") / "manifest.json").write_text("{}")
    Path(f"{base}-3").write_text("")  # no directory
    Path(f"{base}-4").mkdir()  # empty: no run yet
    assert plan({}, SHIPPED).nodes["recorder"]["out_dir"] == f"{base}-4"


def test_an_out_dir_that_cannot_be_looked_into_is_named_not_a_traceback(tmp_path, monkeypatch):
    """Another user's /tmp/simforge-run (mode 700): Path.exists raised PermissionError."""
    real_exists = Path.exists

    def exists(path: Path, *args: object, **kwargs: object) -> bool:
        if path.parent.name == "locked":
            raise PermissionError(13, "Permission denied")
        return real_exists(path, *args, **kwargs)

    monkeypatch.setattr(Path, "exists", exists)
    with pytest.raises(ConfigError) as err:
        plan({"out_dir": str(tmp_path / "locked")}, SHIPPED)
    assert str(err.value).endswith("out_dir: expected a new run directory (never overwritten; it cannot be looked "
                                   f"into (Permission denied)), got '{tmp_path / 'locked'}'")
    monkeypatch.setattr(launch_plan, "OUT_DIR", str(tmp_path / "locked"))
    assert plan({}, SHIPPED).nodes["recorder"]["out_dir"] == f"{tmp_path / 'locked'}-2"


def test_the_plan_names_the_run_directory_wherever_it_comes_from(tmp_path):
    """The launch logs it: one named by the file only was no key of the nodes' handed
    parameters, and the launch file's lookup raised KeyError."""
    assert plan({}, SHIPPED).out_dir == launch_plan.OUT_DIR
    assert plan({"out_dir": str(tmp_path / "a")}, SHIPPED).out_dir == str(tmp_path / "a")
    mine = _file(tmp_path, f"recorder:\n  ros__parameters:\n    out_dir: {tmp_path / 'b'}\n")
    planned = plan({"params_file": str(mine)}, SHIPPED)
    assert planned.out_dir == str(tmp_path / "b") and "out_dir" not in planned.nodes["recorder"]


def test_an_out_dir_holding_a_run_is_refused_before_any_node_starts(tmp_path):
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "manifest.json").write_text("{}")
    with pytest.raises(ConfigError) as err:
        plan({"out_dir": str(kept)}, SHIPPED)
    assert str(err.value) == (f"launch argument out_dir:={kept}: out_dir: expected a new run directory "
                              f"(never overwritten; it holds a run), got '{kept}'")
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    with pytest.raises(ConfigError, match="it is not a directory"):
        plan({"out_dir": str(a_file)}, SHIPPED)
    mine = _file(tmp_path, f"recorder:\n  ros__parameters:\n    out_dir: {kept}\n")
    with pytest.raises(ConfigError) as err:
        plan({"params_file": str(mine)}, SHIPPED)
    assert str(err.value).startswith(f"{mine}: out_dir: expected a new run directory")


def test_a_scenario_the_bridge_cannot_load_is_refused_before_any_node_starts(tmp_path):
    """Before, the bridge and driver exited 2 once every node had started, the clock master
    ended `aborted`, and the recorder kept a run directory of nothing."""
    with pytest.raises(ConfigError) as err:
        plan({"scenario": "rigth_turn"}, SHIPPED)
    (line,) = str(err.value).splitlines()
    assert line.startswith("launch argument scenario:=rigth_turn: scenario: expected a scenario the bridge can "
                           "load, got "), line
    assert "right_turn" in line  # the names there are
    broken = _file(tmp_path, "name: broken\n")
    with pytest.raises(ConfigError) as err:
        plan({"scenario": str(broken)}, SHIPPED)
    assert str(err.value).startswith(f"launch argument scenario:={broken}: scenario: expected a scenario")
    # the carla backend loads it the same way first (then places it on its server's map)
    for scenario in (tmp_path / "none.yaml", broken):
        with pytest.raises(ConfigError, match="scenario: expected a scenario the bridge can load"):
            plan({"backend": "carla", "scenario": str(scenario)}, SHIPPED)
    assert plan({"backend": "carla", "scenario": "right_turn"}, SHIPPED).nodes["sim_bridge"]["backend"] == "carla"


def test_a_file_whose_driver_follows_another_scenario_than_the_bridge_runs_is_refused(tmp_path):
    mine = _file(tmp_path, "sim_bridge:\n  ros__parameters:\n    scenario: unprotected_left\n")
    with pytest.raises(ConfigError) as err:
        plan({"params_file": str(mine)}, SHIPPED)
    assert str(err.value) == (f"{mine}: driver.scenario: expected the sim_bridge's scenario (unprotected_left), "
                              "got 'right_turn'")
    # an external driver is not ours, and the torch planner reads no scenario: nothing to hold
    assert "driver" not in plan({"params_file": str(mine), "driver": "external"}, SHIPPED).nodes
    assert plan({"params_file": str(mine), "driver": "torch"}, SHIPPED).nodes["driver"]["policy"] == "torch"
    # one file, named two ways
    scenario = tmp_path / "rt.yaml"
    scenario.write_text((ROOT / "config" / "scenarios" / "right_turn.yaml").read_text())
    two_ways = _file(tmp_path, f"sim_bridge:\n  ros__parameters:\n    scenario: {scenario}\n"
                               f"driver:\n  ros__parameters:\n    scenario: {tmp_path}/./rt.yaml\n")
    assert plan({"params_file": str(two_ways)}, SHIPPED).nodes["driver"] == {"policy": "route"}


def test_an_argument_name_within_a_typo_of_one_is_named_and_other_names_are_left_alone():
    """launch takes any name:=value: scenaro:=unprotected_left ran right_turn, unsaid. Said,
    not refused: an including launch file's own arguments (camera, output_dir) are in the
    same unscoped launch configurations, and come as close."""
    planned = plan({}, SHIPPED, others=["scenaro", "use_sim_time", "robot_namespace", "scenario", "out_dir"])
    assert planned.notes == ("simforge: launch argument scenaro is none of simforge's (did you mean scenario?); "
                             "it sets nothing here",)
    assert plan({}, SHIPPED, others=["use_sim_time", "robot_namespace", *ARGS]).notes == ()


def test_bad_arguments_are_named_all_at_once():
    with pytest.raises(ConfigError) as err:
        plan({"real_time_factor": "fast", "carla_port": "70000", "seed": "-1", "driver": "remote",
              "tf": "maybe"}, SHIPPED)
    lines = str(err.value).splitlines()
    assert ("launch argument real_time_factor:=fast: clock_master.real_time_factor: expected a value of type "
            "float, got 'fast'") in lines
    assert ("launch argument carla_port:=70000: sim_bridge.carla_port: expected an integer in [1, 65535], "
            "got 70000") in lines
    assert "launch argument seed:=-1: clock_master.seed: expected an integer in [0, 9223372036854775807], got -1" \
        in lines
    assert "launch argument tf:=maybe: sim_bridge.tf: expected a value of type bool, got 'maybe'" in lines
    assert "launch argument driver:=remote: driver: expected route | torch | external, got 'remote'" in lines
    assert len(lines) == 5


def test_a_bad_driver_policy_in_the_file_is_named_with_the_file(tmp_path):
    mine = _file(tmp_path, "driver:\n  ros__parameters:\n    policy: ''\n")
    with pytest.raises(ConfigError) as err:
        plan({"params_file": str(mine)}, SHIPPED)
    assert str(err.value) == f"{mine}: driver.policy: expected route | torch | external, got ''"


def test_a_bad_parameter_file_is_refused_as_simforge_run_refuses_it(tmp_path):
    """Before, only the driver:=torch path read the file; a typo in it was left to the
    nodes, which ignore a parameter they do not declare."""
    typo = _file(tmp_path, "clock_master:\n  ros__parameters:\n    decison_us: 50000\n")
    with pytest.raises(ConfigError) as err:
        plan({"params_file": str(typo)}, SHIPPED)
    assert str(err.value) == (f"{typo}: clock_master.decison_us: expected a parameter of clock_master (did you mean "
                              "decision_us?), got 'decison_us'")
    with pytest.raises(ConfigError, match=r"expected an existing ROS 2 parameter file"):
        plan({"params_file": str(tmp_path / "none.yaml")}, SHIPPED)


def test_a_period_given_in_both_units_across_file_and_arguments_is_refused(tmp_path):
    mine = _file(tmp_path, "clock_master:\n  ros__parameters:\n    latency_s: 0.1\n")
    with pytest.raises(ConfigError) as err:
        plan({"params_file": str(mine), "latency_us": "100000"}, SHIPPED)
    assert str(err.value).startswith(f"{mine} and the launch arguments: clock_master.latency_us and "
                                     "clock_master.latency_s: expected one of the two")


def test_a_camera_fault_in_the_file_that_cannot_fire_is_refused_as_simforge_run_refuses_it(tmp_path):
    path = tmp_path / "faults.yaml"
    path.write_text("sim_bridge:\n  ros__parameters: {camera_period_us: 200000, faults: [stale_frame@0]}\n")
    with pytest.raises(ConfigError) as err:
        plan({"params_file": str(path)}, "unused.yaml")
    assert str(err.value) == (f"{path}: sim_bridge.faults: expected stale_frame@K at a step after the first frames "
                              "(K >= 2: at step 0 no earlier frame exists), got 'stale_frame@0'")
    path.write_text("sim_bridge:\n  ros__parameters: {camera_period_us: 200000, faults: [drop_frame@4]}\n")
    assert plan({"params_file": str(path)}, "unused.yaml").nodes["sim_bridge"] is not None


def test_every_nodes_faults_are_checked_before_any_node_starts(tmp_path):
    """Only the bridge's were: a driver handed `bogus@x` exited at start-up, and the launch,
    which only the clock master's exit ends, waited out its start-up limit."""
    path = tmp_path / "faults.yaml"
    path.write_text("driver:\n  ros__parameters: {faults: [perturb_action=0.1@3, bogus@x]}\n"
                    "recorder:\n  ros__parameters: {faults: [nonsense]}\n")
    with pytest.raises(ConfigError) as err:
        plan({"params_file": str(path)}, "unused.yaml")
    assert [(p.source, p.field, p.got) for p in err.value.problems] == [
        (str(path), "recorder.faults", "nonsense"), (str(path), "driver.faults", "bogus@x")]


def test_a_hold_past_the_last_step_is_refused_as_simforge_run_refuses_it():
    """steps:=20 hold_at_step:=50 ran, counted and never held, unsaid; `simforge run`
    refused it before any node started."""
    with pytest.raises(ConfigError) as err:
        plan({"steps": "20", "hold_at_step": "50"}, SHIPPED)
    assert str(err.value).endswith("clock_master.hold_at_step: expected a step of the run (0 to 19; -1: never), "
                                   "got 50")
    assert plan({"steps": "20", "hold_at_step": "19"}, SHIPPED).nodes["clock_master"]["hold_at_step"] == 19
    assert plan({"hold_at_step": "500"}, SHIPPED).nodes["clock_master"]["hold_at_step"] == 500  # the scenario's end


def test_wait_for_readers_is_one_argument_for_both_nodes_and_names_a_topic_the_run_publishes():
    planned = plan({"wait_for_readers": "[/clock, /simforge/camera/front/image_raw]"}, SHIPPED).nodes
    assert planned["clock_master"]["wait_for_readers"] == ["/clock", "/simforge/camera/front/image_raw"]
    assert planned["sim_bridge"]["wait_for_readers"] == planned["clock_master"]["wait_for_readers"]
    with pytest.raises(ConfigError, match=r"clock_master\.wait_for_readers: expected a topic this run publishes"):
        plan({"wait_for_readers": "[/simforge/odom]"}, SHIPPED)  # no odometry unless asked
    # a torch run's bridge renders the planner's cameras, not the file's chase
    torch = plan({"driver": "torch", "wait_for_readers": "[/simforge/camera/left/image_raw]"}, SHIPPED).nodes
    assert torch["sim_bridge"]["wait_for_readers"] == ["/simforge/camera/left/image_raw"]
    with pytest.raises(ConfigError, match=r"got '/simforge/camera/chase/image_raw'"):
        plan({"driver": "torch", "wait_for_readers": "[/simforge/camera/chase/image_raw]"}, SHIPPED)
