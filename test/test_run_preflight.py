"""What a run checks before anything starts (room on the disk for its record, the user's
ROS_DOMAIN_ID), and what a run broken by a full disk says it kept."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from simforge_ros.core.errors import ConfigError
from simforge_ros.record import room
from simforge_ros.runner import RunSpec, _result, node_params, run


def _spec(tmp_path: Path, **kw) -> RunSpec:
    return RunSpec(scenario="right_turn", out_dir=tmp_path / "runs" / "r", run_id="r", **kw)


def test_the_estimate_follows_steps_cameras_size_and_camera_period(tmp_path):
    def est(**sets):
        return room.estimate(node_params(_spec(tmp_path, steps=1000, sets=sets)))

    two = est()  # the default rig: chase and front at 320x180
    assert (two.steps, two.cameras, two.width, two.height) == (1000, 2, 320, 180)
    frame = 320 * 180 * 3 + room.FRAME_OVERHEAD_BYTES
    assert two.bytes == room.FIXED_BYTES + 1000 * (room.STEP_BYTES + 2 * frame)
    assert est(sim_bridge={"cameras": []}).bytes == room.FIXED_BYTES + 1000 * room.STEP_BYTES
    assert est(sim_bridge={"camera_period_us": 200_000}).bytes < two.bytes  # a frame every other step
    assert est(sim_bridge={"camera_period_us": 1}).bytes == two.bytes  # never more than a frame a step
    assert est(sim_bridge={"width": 640, "height": 360}).bytes > 3 * two.bytes
    # the bridge's optional messages: right_turn has four actors and no signal
    side = {"odometry": True, "tf": True, "ground_truth": True, "markers": True}
    assert est(sim_bridge=side).bytes - two.bytes == 1000 * (
        room.ODOMETRY_BYTES + room.TF_BYTES + room.GROUND_TRUTH_BYTES + 4 * room.GROUND_TRUTH_ITEM_BYTES
        + 4 * room.MARKER_BYTES)
    whole = room.estimate(node_params(_spec(tmp_path)))  # steps 0: the scenario's 22 s at 100 ms
    assert whole.steps == 220
    assert whole.describe() == "about 78 MB for 220 steps with 2 cameras at 320x180"
    assert room.estimate(node_params(_spec(tmp_path, sets={"sim_bridge": {"scenario": "nowhere"},
                                                          "driver": {"scenario": "nowhere"}}))) is None


def test_a_run_that_cannot_fit_is_refused_before_anything_starts(tmp_path, monkeypatch):
    monkeypatch.setattr(room, "free_bytes", lambda path: 10_000_000)
    with pytest.raises(ConfigError) as err:
        run(_spec(tmp_path, steps=1000))
    text = str(err.value)
    assert text.startswith("--out: out: expected a disk with room for the run's record (about 351 MB for 1000 "
                           "steps with 2 cameras at 320x180; 10 MB free")
    assert not (tmp_path / "runs").exists()  # nothing was started or created
    # unrecorded, it needs no room
    monkeypatch.setattr("simforge_ros.runner._run_processes", lambda *a, **k: "started")
    assert run(_spec(tmp_path, steps=1000, record=False)) == "started"


def test_a_run_broken_by_a_full_disk_says_so_with_what_it_kept(tmp_path, monkeypatch):
    """The clock master's outcome line is lost with its log on a full disk: its exit
    status still names the refusal, steps.jsonl what was chained, the disk why."""
    spec = _spec(tmp_path)
    spec.out_dir.mkdir(parents=True)
    records = [{"step": k, "t_us": 100_000 * k, "digest": f"{k:064x}", "frames_digest": None,
                **{key: {} for key in ("frames", "timing", "action", "applied", "state", "wall")}} for k in range(3)]
    (spec.out_dir / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + '{"step": 3, "dig')
    monkeypatch.setattr(room, "free_bytes", lambda path: 0)
    result = _result(spec, None, 18)
    assert (result.status, result.steps, result.chain_digest, result.exit_code) == ("refused", 3, f"{2:064x}", 18)
    assert result.refusal["code"] == "participant_error"
    assert result.refusal["detail"] == (f"clock master exited with 18; the disk of {spec.out_dir} is full (0 bytes "
                                        "free): what could be written is kept")
    monkeypatch.setattr(room, "free_bytes", lambda path: 5_000_000_000)
    assert _result(spec, None, 18).refusal["detail"] == "clock master exited with 18"  # no guess without cause


def test_a_run_its_manifest_refuses_never_exits_0(tmp_path):
    """The clock master exited 0 and the recorder's manifest said incomplete_run: `simforge
    run` printed the refusal and exited 0 (seen with `--set clock_master.record=false`)."""
    spec = _spec(tmp_path)
    spec.out_dir.mkdir(parents=True)
    refusal = {"code": "incomplete_run", "step": 0, "detail": "the recorder stopped before the clock master finished"}
    (spec.out_dir / "manifest.json").write_text(json.dumps(
        {"scenario": "right_turn", "steps": 0, "chain_digest": "0" * 64, "status": "refused", "refusal": refusal}))
    result = _result(spec, {"status": "counted", "steps": 3, "chain_digest": "1" * 64, "refusal": None}, 0)
    assert (result.status, result.refusal, result.exit_code) == ("refused", refusal, 17)
    refusal["code"] = "a_code_of_a_later_version"
    (spec.out_dir / "manifest.json").write_text(json.dumps(
        {"scenario": "right_turn", "steps": 0, "chain_digest": "0" * 64, "status": "refused", "refusal": refusal}))
    assert _result(spec, {"status": "counted", "steps": 3, "chain_digest": "1" * 64, "refusal": None}, 0).exit_code == 1


def test_a_clock_master_killed_outright_takes_the_recorders_refusal_and_its_exit_status(tmp_path):
    """A SIGKILLed clock master (exit -9) left no outcome: `simforge run` exited 247 with a
    refusal of its own ("participant_error at step -1") while the manifest said
    incomplete_run at step 28."""
    from simforge_ros.core.errors import REFUSALS

    spec = _spec(tmp_path)
    spec.out_dir.mkdir(parents=True)
    refusal = {"code": "incomplete_run", "step": 28, "detail": "the recorder stopped before the clock master "
               "finished the run: the clock master has left (its process (pid 7) has exited) and its final "
               "status never came"}
    (spec.out_dir / "manifest.json").write_text(json.dumps(
        {"scenario": "right_turn", "steps": 28, "chain_digest": "2" * 64, "status": "refused", "refusal": refusal}))
    result = _result(spec, None, -9)
    assert (result.status, result.refusal, result.steps, result.chain_digest) == ("refused", refusal, 28, "2" * 64)
    assert result.exit_code == REFUSALS["incomplete_run"].exit_code
    assert result.notes == (f"the clock master exited with signal SIGKILL before saying how the run ended: the "
                            f"refusal is the recorder's ({spec.out_dir / 'manifest.json'})",)
    (spec.out_dir / "manifest.json").unlink()  # nor a manifest: a refusal of its own, never exit 247
    alone = _result(spec, None, -9)
    assert alone.refusal == {"code": "participant_error", "step": -1, "detail": "clock master exited with signal "
                             "SIGKILL"}
    assert alone.exit_code == REFUSALS["participant_error"].exit_code


def test_a_run_the_clock_master_refused_after_the_recorder_wrote_counted_is_refused_in_both(tmp_path):
    """Finish answered too late (a driver's huge plan at the last step): `simforge run`
    exited 15 while the manifest, `info` and `verify` said counted."""
    from simforge_ros.core.errors import REFUSALS

    spec = _spec(tmp_path)
    spec.out_dir.mkdir(parents=True)
    (spec.out_dir / "manifest.json").write_text(json.dumps(
        {"scenario": "right_turn", "steps": 30, "chain_digest": "3" * 64, "status": "counted", "refusal": None}))
    late = {"code": "participant_timeout", "step": 30, "detail": "recorder did not answer within 1 s"}
    code = REFUSALS["participant_timeout"].exit_code
    result = _result(spec, {"status": "refused", "steps": 30, "chain_digest": "", "refusal": late}, code)
    assert (result.status, result.refusal, result.exit_code) == ("refused", late, code)
    manifest = json.loads((spec.out_dir / "manifest.json").read_text())
    assert (manifest["status"], manifest["refusal"]) == ("refused", late)


def test_a_run_whose_recorder_was_killed_reports_what_it_chained_not_what_was_stepped(tmp_path):
    """The clock master's outcome counts the steps it stepped and knows no chain: with no
    manifest, `--json` said 17 steps and chain "" where 16 were kept."""
    from simforge_ros.core.errors import REFUSALS

    spec = _spec(tmp_path)
    spec.out_dir.mkdir(parents=True)
    records = [{"step": k, "t_us": 100_000 * k, "digest": f"{k:064x}", "frames_digest": None,
                **{key: {} for key in ("frames", "timing", "action", "applied", "state", "wall")}} for k in range(16)]
    (spec.out_dir / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    lost = {"code": "participant_lost", "step": 17, "detail": "recorder (pid 7) is gone"}
    code = REFUSALS["participant_lost"].exit_code
    result = _result(spec, {"status": "refused", "steps": 17, "chain_digest": "", "refusal": lost}, code,
                     recorder_apart=True)
    assert (result.steps, result.chain_digest, result.refusal, result.exit_code) == (16, f"{15:064x}", lost, code)


@pytest.mark.parametrize("given", ["abc", "500", "-1", "2.5", "4_2", "010", "0x10", "+4", "\u0664\u0662"])
def test_a_users_domain_id_that_is_no_domain_is_a_usage_error_before_anything_is_written(
        tmp_path, monkeypatch, given):
    """Fast DDS has ports for domains 0..232: 500 failed inside it, "abc" in int(). rcl
    reads the variable with strtoul(s, 0): "4_2" is 4 there and was 42 here, "010" 8 and 10."""
    monkeypatch.setenv("ROS_DOMAIN_ID", given)
    with pytest.raises(ConfigError) as err:
        run(_spec(tmp_path, steps=3))
    assert str(err.value) == ("environment: ROS_DOMAIN_ID: expected an integer from 0 to 232 in decimal digits, no "
                              f"leading zero (unset: simforge leases a free one), got {given!r}")
    assert not (tmp_path / "runs").exists()


def test_an_rmw_that_is_not_installed_is_a_usage_error_not_rcls_exit_102(tmp_path, monkeypatch, capsys):
    """rcl ends the whole process (exit 102) when RMW_IMPLEMENTATION names another RMW than
    the one it loads: a user's global rmw_cyclonedds_cpp took `simforge run` down with it."""
    from simforge_ros import bench
    from simforge_ros.isolation import installed_rmws
    from simforge_ros.record import play

    assert "rmw_fastrtps_cpp" in installed_rmws()
    monkeypatch.setenv("RMW_IMPLEMENTATION", "rmw_cyclonedds_cpp")
    with pytest.raises(ConfigError) as err:
        run(_spec(tmp_path, steps=3))
    assert str(err.value).startswith("environment: RMW_IMPLEMENTATION: expected an RMW installed here: ")
    assert str(err.value).endswith("(or unset), got 'rmw_cyclonedds_cpp'")
    assert not (tmp_path / "runs").exists()
    assert play.main([str(tmp_path)]) == 2
    assert bench.main(["--quick", "--out", str(tmp_path / "b.json")]) == 2
    said = [line for line in capsys.readouterr().err.splitlines() if "rmw_cyclonedds_cpp" in line]
    assert [line.split(":")[0] for line in said] == ["simforge play", "simforge bench"]
    monkeypatch.setenv("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")  # the installed one is accepted
    monkeypatch.setattr("simforge_ros.runner._run_processes", lambda *a, **k: "started")
    assert run(_spec(tmp_path, steps=3)) == "started"


def test_the_discovery_range_is_localhost_unless_the_user_asks_for_the_subnet(tmp_path, monkeypatch):
    """A driver (an ECU) or a viewer on another machine needs SUBNET; nothing else is offered,
    and SUBNET only in a domain of the user's own (a leased one is free on this machine only)."""
    from simforge_ros.isolation import discovery_range

    var = "ROS_AUTOMATIC_DISCOVERY_RANGE"
    assert discovery_range({}) == discovery_range({var: " "}) == "LOCALHOST"
    assert discovery_range({var: "localhost"}) == "LOCALHOST"
    assert discovery_range({var: "subnet", "ROS_DOMAIN_ID": "42"}) == "SUBNET"
    for given in ("OFF", "SYSTEM_DEFAULT", "LAN"):
        with pytest.raises(ConfigError) as err:
            discovery_range({var: given, "ROS_DOMAIN_ID": "42"})
        assert str(err.value) == (f"environment: {var}: expected LOCALHOST (the default) or SUBNET (to reach a "
                                  f"driver or a viewer on another machine), got '{given}'")
    with pytest.raises(ConfigError) as err:
        discovery_range({var: "SUBNET"})
    assert str(err.value) == (f"environment: ROS_DOMAIN_ID: expected a domain of your own with {var}=SUBNET (one "
                              "leased here is free of runs on this machine only), got 'unset'")

    monkeypatch.setenv(var, "OFF")  # refused before anything is written
    with pytest.raises(ConfigError, match=f"^environment: {var}: "):
        run(_spec(tmp_path, steps=3))
    assert not (tmp_path / "runs").exists()
    given_to: list[str] = []  # what the nodes' processes would be started with
    monkeypatch.setattr("simforge_ros.runner._run_processes",
                        lambda spec, params_file, lease, on_step=None, relay=None: given_to.append(lease.env[var]))
    monkeypatch.setenv(var, "subnet")
    monkeypatch.setenv("ROS_DOMAIN_ID", str(_free_domains(1)[0]))
    run(_spec(tmp_path, steps=3))
    monkeypatch.delenv(var)
    run(_spec(tmp_path, steps=3))
    assert given_to == ["SUBNET", "LOCALHOST"]


def _free_domains(count: int) -> list[int]:
    """``count`` consecutive domain ids nobody leases or runs in now (leases start at 1)."""
    from simforge_ros import isolation

    for first in range(150, 199 - count):
        ids = list(range(first, first + count))
        handles = [isolation._try_lock(d) for d in ids]
        free = all(h is not None for h in handles) and not any(
            isolation._held_for_a_run(d) or isolation._has_participants(d) for d in ids)
        for h in handles:
            if h is not None:
                h.close()
        if free:
            return ids
    raise AssertionError("no free domain ids to test with")


def test_a_domain_another_run_is_in_is_a_usage_error_naming_that_run(tmp_path, monkeypatch):
    """Two runs given one ROS_DOMAIN_ID answered each other's requests: both were refused,
    by symptoms ("two nodes serve /simforge/decide") that did not name the cause."""
    from simforge_ros.isolation import _held_for_a_run, hold_domain

    (domain,) = _free_domains(1)
    monkeypatch.setenv("ROS_DOMAIN_ID", str(domain))
    with hold_domain(domain, "simforge run other-run"), pytest.raises(ConfigError) as err:
        run(_spec(tmp_path, steps=3))
    assert str(err.value) == (
        "environment: ROS_DOMAIN_ID: expected a domain no other simforge run or play on this machine is in "
        f"(unset: simforge leases a free one), got '{domain}, held by simforge run other-run (pid {os.getpid()})'")
    assert not (tmp_path / "runs").exists()  # nothing was started or written
    # once that run is over the domain is free, and a run holds it while it lasts
    held_while_running = []
    monkeypatch.setattr("simforge_ros.runner._run_processes",
                        lambda *a, **k: held_while_running.append(_held_for_a_run(domain)) or "started")
    assert run(_spec(tmp_path, steps=3)) == "started"
    assert held_while_running == [True] and not _held_for_a_run(domain)


def test_a_lease_passes_over_a_users_domain_a_run_is_in(monkeypatch):
    """A user's ROS_DOMAIN_ID is not leased: a lease must still not pick it while a run is in it."""
    from simforge_ros import isolation

    monkeypatch.delenv("ROS_DOMAIN_ID", raising=False)
    first, second, third = _free_domains(3)
    monkeypatch.setattr(isolation, "DOMAIN_RANGE", range(first, third + 1))
    with isolation.hold_domain(first, "a"), isolation.hold_domain(second, "b"):
        for _ in range(3):
            with isolation.lease_domain() as lease:
                assert lease.domain_id == third
    with isolation.lease_domain() as lease:  # all free again: the pid picks the start
        assert lease.domain_id in (first, second, third)


def test_a_lease_passes_over_a_domain_nodes_of_a_users_own_are_in(monkeypatch):
    """A node started by hand with a ROS_DOMAIN_ID (an external driver left running) holds
    no lease: a run leased into its domain had its Decide calls answered by that node."""
    import subprocess
    import sys

    from simforge_ros import isolation

    monkeypatch.delenv("ROS_DOMAIN_ID", raising=False)
    first, second = _free_domains(2)
    monkeypatch.setattr(isolation, "DOMAIN_RANGE", range(first, second + 1))
    env = isolation.ros_env(first, Path("/tmp"))
    node = subprocess.Popen(
        [sys.executable, "-c", "import rclpy, sys, time; rclpy.init(); n = rclpy.create_node('by_hand'); "
                               "print('up', flush=True); time.sleep(60)"],
        env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert node.stdout is not None and node.stdout.readline().strip() == "up"
        assert isolation._has_participants(first) and not isolation._has_participants(second)
        for _ in range(3):
            with isolation.lease_domain() as lease:
                assert lease.domain_id == second
    finally:
        node.kill()
        node.wait()
    assert not isolation._has_participants(first)


def test_a_lone_socket_on_a_domains_port_is_not_a_participant():
    """From domain 102 up the probed ports lie in the ephemeral range, where every DDS
    participant on the host binds sockets to port 0: one such socket on a free domain's
    metatraffic port made it look taken (a CI run's lease test failed so). A participant
    binds the port above too, which is looked at there."""
    import socket

    from simforge_ros import isolation

    (domain,) = _free_domains(1)
    port = 7410 + 250 * domain + 2  # participant id 1's metatraffic port
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stray:
        stray.bind(("0.0.0.0", port))
        assert not isolation._has_participants(domain)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as user_port:
            user_port.bind(("0.0.0.0", port + 1))
            assert isolation._has_participants(domain)
    # below the ephemeral range one port is enough: a participant whose user port moved,
    # or that binds none, is still seen there
    low, _high = isolation._ephemeral_ports()
    below = next(d for d in range(60, 100) if 7410 + 250 * d + 20 < low and not isolation._has_participants(d))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as lone:
        lone.bind(("0.0.0.0", 7410 + 250 * below))
        assert isolation._has_participants(below)


def test_the_leases_are_the_machines_whatever_tmpdir_a_shell_has(tmp_path):
    """A shell with a TMPDIR of its own (pam_tmpdir, a CI job's) kept its leases apart, and
    its run joined a domain another run held: the first was refused "2 nodes serve
    /simforge/step"."""
    import subprocess
    import sys

    said = subprocess.run([sys.executable, "-P", "-c", "from simforge_ros import isolation; print(isolation.LOCK_DIR)"],
                          env={**os.environ, "TMPDIR": str(tmp_path)}, capture_output=True, text=True, check=True)
    assert said.stdout.strip() == "/tmp/simforge-domains"


def test_no_free_domain_is_said_by_name_and_leaves_no_run_directory(tmp_path, monkeypatch, capsys):
    """Every domain held: "unexpected error: RuntimeError" (exit 1), and a run directory
    holding only params.yaml, which info then called a run without its manifest."""
    from simforge_ros import cli, isolation

    monkeypatch.delenv("ROS_DOMAIN_ID", raising=False)
    monkeypatch.setattr(isolation, "_try_lock", lambda _domain_id: None)  # each held by another run
    out = tmp_path / "runs"
    assert cli.main(["run", "right_turn", "--steps", "3", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("simforge: no free ROS domain id in 1..199: each is held by another run, or DDS "
                          "participants on this machine are in it; wait for a run to end, or give the run a domain "
                          "of your own (ROS_DOMAIN_ID, 0..232)"), err
    assert "unexpected" not in err and "Traceback" not in err
    assert not out.exists()  # no half-made run, nor the --out folder made for it


def test_lock_files_are_shared_by_every_user_of_the_machine(tmp_path, monkeypatch):
    """Two users' runs share localhost discovery, so they share the domain leases: the lock
    directory is made like /tmp and each lock file read-write for all; one that this user
    may not open is named, not a PermissionError traceback."""
    import stat

    from simforge_ros import isolation

    monkeypatch.setattr(isolation, "LOCK_DIR", tmp_path / "locks")
    old = os.umask(0o077)  # made under a strict umask
    try:
        handle = isolation._try_lock(7)
        with isolation.hold_domain(7, "simforge run r"):
            pass
    finally:
        os.umask(old)
    assert handle is not None
    handle.close()
    assert stat.S_IMODE((tmp_path / "locks").stat().st_mode) == 0o1777
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "locks").iterdir()} == {
        "7.lock": 0o666, "7.run": 0o666}

    def refused(*_args, **_kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(isolation.os, "open", refused)
    with pytest.raises(ConfigError) as err:
        isolation.hold_domain(8, "simforge run r").__enter__()
    assert str(err.value).startswith("ROS_DOMAIN_ID: lock file: expected a file every user may open")
    assert str(tmp_path / "locks" / "8.run") in str(err.value)


@pytest.mark.parametrize(("faults", "sets", "said"), [
    (("drop_frame@5",), {"sim_bridge": {"cameras": []}},
     "--inject: drop_frame@5: expected a camera fault with a camera to act on (sim_bridge.cameras is [])"),
    (("stale_frame@0",), {}, "--inject: stale_frame@0: expected stale_frame@K at a step after the first frames "
                             "(K >= 1: at step 0 no earlier frame exists)"),
    (("stale_frame@0",), {"sim_bridge": {"camera_period_us": 200_000}},
     "stale_frame@K at a step after the first frames (K >= 2: at step 0"),
    (("flip_pixel=chase@5",), {"sim_bridge": {"camera_period_s": 0.2}},
     "--inject: flip_pixel=chase@5: expected flip_pixel@K at a step the bridge renders frames at (every 2 steps, "
     "camera_period_us=200000)"),
    # the period in steps is the camera period over the decision period, in either unit
    (("drop_frame@3",), {"clock_master": {"decision_s": 0.05}, "sim_bridge": {"camera_period_us": 100_000}},
     "expected drop_frame@K at a step the bridge renders frames at (every 2 steps, camera_period_us=100000)"),
    (("drop_frame@2",), {"clock_master": {"decision_us": 100_000}, "sim_bridge": {"camera_period_s": 0.3}},
     "expected drop_frame@K at a step the bridge renders frames at (every 3 steps, camera_period_us=300000)"),
])
def test_a_camera_fault_that_cannot_fire_is_a_usage_error(tmp_path, faults, sets, said):
    """Each broke nothing and the run counted, unsaid; drop_frame with no camera failed the
    bridge with an IndexError (participant_error)."""
    with pytest.raises(ConfigError) as err:
        node_params(_spec(tmp_path, steps=10, faults=faults, sets=sets))
    assert said in str(err.value), str(err.value)


def test_a_camera_fault_at_a_step_the_bridge_renders_is_taken(tmp_path):
    params = node_params(_spec(tmp_path, steps=10, faults=("stale_frame@4", "drop_frame@2"),
                               sets={"sim_bridge": {"camera_period_us": 200_000}}))
    assert params["sim_bridge"]["faults"] == ["stale_frame@4", "drop_frame@2"]
    sets = {"clock_master": {"decision_s": 0.05}, "sim_bridge": {"camera_period_us": 100_000}}
    params = node_params(_spec(tmp_path, steps=10, faults=("drop_frame@4",), sets=sets))
    assert params["sim_bridge"]["faults"] == ["drop_frame@4"]


def test_pause_and_play_check_the_discovery_range_as_run_does(monkeypatch):
    """OFF or a misspelling made `simforge pause` wait out its limit beside a held run and
    say "no run is going on there"; `play` let rcl read it."""
    from simforge_ros.core.errors import ConfigError
    from simforge_ros.isolation import DISCOVERY_VAR, tool_discovery_range

    for bad in ("OFF", "bogus"):
        monkeypatch.setenv(DISCOVERY_VAR, bad)
        with pytest.raises(ConfigError) as err:
            tool_discovery_range()
        assert str(err.value) == (f"environment: {DISCOVERY_VAR}: expected LOCALHOST or SUBNET, as a run's nodes "
                                  f"take it, got {bad!r}")
    monkeypatch.setenv(DISCOVERY_VAR, " subnet ")
    assert tool_discovery_range() == "SUBNET" and os.environ[DISCOVERY_VAR] == "SUBNET"
    monkeypatch.delenv(DISCOVERY_VAR)
    assert tool_discovery_range(unset_as=None) is None and DISCOVERY_VAR not in os.environ  # play: ROS's default
    assert tool_discovery_range() == "LOCALHOST" and os.environ[DISCOVERY_VAR] == "LOCALHOST"  # pause: the runs'


def test_cameras_the_memory_cannot_draw_are_refused_before_the_run(tmp_path, monkeypatch, capsys):
    """Four 8192x8192 cameras passed every check (each side within its range) and the run
    began, to end in MemoryError (or the OOM killer): about 19 GB to draw."""
    from simforge_ros import cli
    from simforge_ros import runner as runner_module
    from simforge_ros.engine.render import drawing_bytes

    need = drawing_bytes(4, 8192, 8192)
    assert 15e9 < need < 25e9
    monkeypatch.setattr(runner_module, "available_memory", lambda: need - 1)
    argv = ["run", "right_turn", "--steps", "2", "--set", "sim_bridge.cameras=[front,left,rear,right]",
            "--set", "sim_bridge.width=8192", "--set", "sim_bridge.height=8192", "--out", str(tmp_path / "runs")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "sim_bridge.width x height: expected images the machine's memory can draw (4 cameras at 8192x8192" in err
    assert not list((tmp_path / "runs").glob("*"))  # no run directory
    monkeypatch.setattr(runner_module, "available_memory", lambda: need)  # just enough: not this check's
    runner_module._check_memory(node_params(_spec(tmp_path, sets={"sim_bridge": {
        "cameras": ["front", "left", "rear", "right"], "width": 8192, "height": 8192}})))


def test_the_renderer_keeps_only_the_cameras_it_draws():
    """All five cameras' rays were made at once: 2.7 GB at 4096x4096 for a run of one."""
    from simforge_ros.core.values import Pose2D
    from simforge_ros.engine import load_scenario
    from simforge_ros.engine.render import Renderer

    renderer = Renderer(load_scenario("right_turn"), 64, 48)
    assert renderer._grids == {}
    renderer.render("front", Pose2D(0.0, 0.0, 0.0), [])
    assert list(renderer._grids) == ["front"]


def test_a_clock_master_killed_after_it_said_the_run_counted_leaves_the_run_counted(tmp_path):
    """A Ctrl-C as the clock master's interpreter ended (after its outcome line): `simforge
    run` printed "refused:participant_error before step 0, clock master exited with -2"
    and exited 254 beside a counted manifest that verified (a README audit, 2 Ctrl-Cs in 7)."""
    from simforge_ros.core.errors import REFUSALS

    spec = _spec(tmp_path)
    spec.out_dir.mkdir(parents=True)
    (spec.out_dir / "manifest.json").write_text(json.dumps(
        {"scenario": "right_turn", "steps": 20, "chain_digest": "3" * 64, "status": "counted", "refusal": None}))
    counted = {"status": "counted", "steps": 20, "chain_digest": "3" * 64, "refusal": None}
    result = _result(spec, counted, -2)
    assert (result.status, result.refusal, result.exit_code, result.steps) == ("counted", None, 0, 20)
    assert result.notes == ("the clock master was ended by signal SIGINT after it had said the run counted",)
    # a clock master that exits with an error after saying so is still no counted run, and
    # its refusal names where the run had got to and a refusal's exit status
    crashed = _result(spec, counted, 1)
    assert crashed.status == "refused" and crashed.exit_code == REFUSALS["participant_error"].exit_code
    assert crashed.refusal == {"code": "participant_error", "step": 20, "detail": "clock master exited with 1"}


def test_an_rmw_not_installed_is_named_with_a_parameter_file_too(tmp_path):
    """A fresh `simforge run --params-file` imported rclpy to ask rcl about the file before it
    checked RMW_IMPLEMENTATION, and rcl's load ended the process (exit 102) with its own
    line (a README audit; without the file the check came first)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}
    done = subprocess.run([str(Path(sys.executable).with_name("simforge")), "run", "--params-file",
                           str(root / "config" / "simforge.yaml"), "--steps", "2", "--out", str(tmp_path / "runs")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "environment: RMW_IMPLEMENTATION: expected an RMW installed here" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_a_refusal_for_a_full_disk_says_so_whatever_the_free_space_reads(tmp_path):
    """btrfs said 1.8 MB free when full, above the 1 MiB below which a disk is called full."""
    from simforge_ros.runner import _disk_full

    assert _disk_full(tmp_path) == ""  # room, and no refusal naming the disk
    said = _disk_full(tmp_path, "recorder: writing ... failed (OSError: [Errno 28] No space left on device)")
    assert said.startswith(f"the disk of {tmp_path} is full (")


@pytest.mark.parametrize(("code", "named"), [(-9, "SIGKILL"), (-15, "SIGTERM"), (143, "SIGTERM"), (130, "SIGINT"),
                                             (0, None), (1, None), (2, None), (16, None), (129, None), (137, None)])
def test_the_signal_a_participants_exit_status_names(code, named):
    """A participant that took SIGINT or SIGTERM before the run's end exits 128 + its number
    (nodes.common.run_participant): the runner names it before step 0 as a killed one; any
    other status, a refusal's or a start-up error's included, is no signal."""
    from simforge_ros.runner import _stop_signal

    assert _stop_signal(code) == named
