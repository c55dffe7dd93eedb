"""`simforge info RUN` on fabricated runs: what it reads from the manifest and the bag's
index, and what it says when the run or its bag cannot be read."""

from __future__ import annotations

import json
import shutil

from simforge_ros.record.info import describe, main, run_info
from simforge_ros.record.rundir import load_run


def test_what_simforge_run_derives_from_its_options_is_no_setting(make_run):
    """recorder.await_driver follows --driver (false for an external one): said on the
    driver line, not among the settings a plain `simforge run SCENARIO` would not have."""
    run = make_run("external", steps=5)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["nodes"]["recorder"] = {"params": {"await_driver": False, "storage": "sqlite3"}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    settings = run_info(load_run(run))["settings"]
    assert "recorder.await_driver" not in settings and settings["recorder.storage"] == "sqlite3"


def test_the_cameras_a_torch_driver_has_the_bridge_render_are_no_setting(make_run):
    """--driver torch sets sim_bridge.cameras to the planner's cameras: info listed them as
    if the user had set them; other cameras than the planner's are a setting."""
    run = make_run("torch", steps=5)
    manifest = json.loads((run / "manifest.json").read_text())
    surround = ["front", "left", "rear", "right"]
    manifest["nodes"]["driver"]["params"].update(policy="torch", cameras=surround)
    manifest["nodes"]["sim_bridge"] = {"params": {"cameras": surround}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert "sim_bridge.cameras" not in run_info(load_run(run))["settings"]
    manifest["nodes"]["sim_bridge"]["params"]["cameras"] = [*surround, "chase"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert run_info(load_run(run))["settings"]["sim_bridge.cameras"] == [*surround, "chase"]


def test_a_period_given_in_seconds_is_described_as_that_period(make_run):
    """sim_bridge.camera_period_s: 0.3 was described as a frame "every step" (and null in
    --json), and decision_s as the setting decision_us=null."""
    run = make_run("seconds", steps=5)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["nodes"]["sim_bridge"]["params"].update(cameras=["front"], camera_period_us=None, camera_period_s=0.3)
    manifest["nodes"]["clock_master"]["params"].update(decision_us=None, decision_s=0.1)
    (run / "manifest.json").write_text(json.dumps(manifest))
    info = run_info(load_run(run))
    assert info["bridge"]["camera_period_us"] == 300_000
    assert any(line.startswith("bridge     ") and "cameras front, every 300000 us" in line for line in describe(info))
    assert "clock_master.decision_us" not in info["settings"]
    assert info["settings"]["clock_master.decision_s"] == 0.1
    assert info["settings"]["sim_bridge.camera_period_s"] == 0.3


def test_a_counted_run_its_setup_digests_and_topics(make_run):
    run = make_run("kept", steps=60)
    info = run_info(load_run(run))
    manifest = json.loads((run / "manifest.json").read_text())
    assert (info["status"], info["steps"], info["refusal"]) == ("counted", 60, None)
    assert info["chain_digest"] == manifest["chain_digest"] and info["frames_digest"] == manifest["frames_digest"]
    assert info["contract"]["decision_us"] == 50_000
    assert info["contacts"] == {"total": 1, "harness_faults": 0}
    # what the fabricated nodes were given other than the declared defaults (seed and
    # scenario are said on their own line; "kind" is no declared parameter)
    assert info["settings"] == {"clock_master.decision_us": 50_000, "sim_bridge.tick_us": 10_000}
    bag = info["bag"]
    counts = {t["topic"]: t["messages"] for t in bag["topics"]}
    # the cameras of the fabricated rig: front every step, rear every 2nd, top every 3rd
    assert (counts["/clock"], counts["/simforge/timing"]) == (60, 60)
    assert counts["/simforge/camera/front/image_raw"] == 60
    assert counts["/simforge/camera/rear/image_raw"] == 30
    assert counts["/simforge/camera/top/image_raw"] == 20
    assert bag["messages"] == sum(counts.values())
    # the last message is the run's final status, logged at t(60)
    assert (bag["storage"], bag["start_ns"], bag["end_ns"]) == ("mcap", 0, 60 * 50_000 * 1000)
    assert bag["bytes"] == sum(f.stat().st_size for f in (run / "bag").iterdir())
    lines = describe(info)
    assert lines[:2] == ["run        kept", "status     counted, 60 steps"]
    assert "settings   clock_master.decision_us=50000, sim_bridge.tick_us=10000" in lines
    digests = f"digests    chain {manifest['chain_digest'][:16]}  frames {manifest['frames_digest'][:16]}"
    assert any(line.startswith(digests) for line in lines)
    assert any(line.startswith("bag        mcap, ") and f"{bag['messages']} messages on {len(counts)} topics, "
               "3 s of simulation time" in line for line in lines)
    assert any(line.split() == ["/simforge/camera/rear/image_raw", "sensor_msgs/msg/Image", "30"] for line in lines)


def test_a_refused_run_says_its_refusal_and_what_it_kept(make_run, capsys):
    run = make_run("refused", steps=40, refuse_at=12, storage="sqlite3")
    assert main([str(run)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "status     refused: participant_timeout at step 12; 12 steps recorded"
    assert out[2] == "           driver did not answer within 2 s"
    assert any(line.startswith("bag        sqlite3, ") for line in out)


def test_the_steps_asked_are_said_with_the_status(make_run):
    """A refused run's recorded steps tell nothing of how long it was to be: --steps is
    said (it is no setting: a run option), and nothing where the whole scenario was asked."""
    run = make_run("short", steps=40, refuse_at=20)
    assert run_info(load_run(run))["steps_asked"] is None
    manifest_path = run / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["nodes"]["clock_master"]["params"]["steps"] = 60
    manifest_path.write_text(json.dumps(manifest))
    info = run_info(load_run(run))
    assert info["steps_asked"] == 60 and "clock_master.steps" not in info["settings"]
    assert describe(info)[1].endswith("20 steps recorded (--steps 60)")


def test_json_carries_the_same_as_the_text(make_run, capsys):
    run = make_run("kept", steps=10)
    assert main([str(run), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(json.dumps(run_info(load_run(run))))
    assert {"run_id", "status", "refusal", "steps", "chain_digest", "frames_digest", "bag", "contract",
            "driver", "bridge", "layout", "wall", "faults"} <= set(printed)


def test_a_run_it_cannot_read_is_one_line_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err == f"simforge info: {tmp_path / 'nowhere'}: no such run directory\n"


def test_a_missing_bag_is_said_and_the_rest_shown(make_run, capsys):
    run = make_run("kept", steps=10)
    shutil.rmtree(run / "bag")
    assert main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "status     counted, 10 steps" in out
    assert f"bag        {run / 'bag'}: not a rosbag2 directory (metadata.yaml missing)" in out


def test_contacts_the_harness_caused_are_said_apart():
    from simforge_ros.record.info import _contacts

    assert _contacts({"total": 0, "harness_faults": 0}) == "0"
    said = _contacts({"total": 3, "harness_faults": 1})
    assert said == "3 (1 the harness's fault: the scripted traffic's, not the driver's)"
    assert _contacts({"total": None, "harness_faults": None}) == "?"


def test_a_hand_edited_manifest_is_described_as_far_as_it_can_be(make_run, capsys):
    run = make_run("edited", steps=5)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["nodes"]["driver"] = 5
    manifest.update(participants={"sim_bridge": "x"}, wall={"start_ns": 0, "end_ns": 10**9, "step_ns": [1]},
                    versions={"packages": True, "python": "3.11"})
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert main([str(run)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "driver     ?" in out and "versions   python 3.11" in out
    manifest["versions"] = {"python": "3.11", "cpu": {"machine": "aarch64", "simd": ["ASIMD"]}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert main([str(run)]) == 0
    assert "versions   python 3.11, on aarch64 (ASIMD)" in capsys.readouterr().out.splitlines()
    assert any(line.startswith("wall       1970-01-01 00:00:00 UTC, 1.0 s; a step: median ?") for line in out)


def test_a_run_whose_nodes_never_said_their_parameters_has_no_driver_named(make_run, capsys):
    """A salvage of a recorder killed before its first flush has no node parameters: info
    called its driver external, while its params.yaml says route."""
    run = make_run("unsaid", steps=5)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest.update(nodes={}, participants={})
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert main([str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["driver"]["policy"] is None
    assert main([str(run)]) == 0
    assert "driver     ?" in capsys.readouterr().out.splitlines()


def test_the_scenario_line_names_the_file_and_its_digest(make_run):
    """A copy of right_turn with its name kept was said "scenario   right_turn, seed 0", as
    the shipped one: which file, and which bytes of it, were nowhere (scenario-file audit)."""
    run = make_run("mine", steps=10)
    manifest_path = run / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["scenario"] = "right_turn"
    manifest["nodes"]["sim_bridge"]["params"]["scenario"] = "/work/rt_mod.yaml"
    manifest.setdefault("digests", {})["scenario_file"] = "ab" * 32
    manifest_path.write_text(json.dumps(manifest))
    info = run_info(load_run(run))
    assert info["scenario_file"] == {"given": "/work/rt_mod.yaml", "sha256": "ab" * 32}
    assert f"scenario   right_turn (file /work/rt_mod.yaml, sha256 {'ab' * 8}), seed {info['seed']}" in describe(info)
    manifest["nodes"]["sim_bridge"]["params"]["scenario"] = "right_turn"  # the shipped one: its name says it
    manifest_path.write_text(json.dumps(manifest))
    assert f"scenario   right_turn (sha256 {'ab' * 8}), seed {info['seed']}" in describe(run_info(load_run(run)))
