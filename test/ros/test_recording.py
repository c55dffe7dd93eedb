"""Recording over real DDS: one digest across 11 runs, verify and diff on real run
directories, a bag other MCAP readers can read, and no message lost."""

from __future__ import annotations

import json
import os
import struct
from collections import Counter
from pathlib import Path

import pytest
from runs import lockstep, manifest_of, simforge, steps_of

from simforge_ros import topics
from simforge_ros.core.canonical import to_plain
from simforge_ros.record.bag import read_bag
from simforge_ros.record.diff_runs import diff_runs, setup_differences
from simforge_ros.record.rundir import load_run
from simforge_ros.record.side_digests import CameraInfoDigests
from simforge_ros.record.verify import verify_run

pytestmark = pytest.mark.ros


def test_eleven_runs_give_one_chain_digest_and_each_verifies(tmp_path):
    results = [lockstep(tmp_path, steps=30, layout="single") for _ in range(11)]
    assert {r.status for r in results} == {"counted"}
    assert len({r.chain_digest for r in results}) == 1
    assert len({r.run_id for r in results}) == 11
    for result in results:
        verdict = verify_run(Path(result.run_dir))
        assert verdict.ok, verdict.detail
        assert verdict.steps_checked == 30 and verdict.chain_digest == result.chain_digest


def test_the_bag_holds_every_message_and_clock_is_exact(tmp_path):
    result = lockstep(tmp_path, steps=40, layout="processes")
    counts = Counter()
    clock_ns = []
    first_of_time: dict[int, str] = {}
    for item in read_bag(Path(result.run_dir) / "bag"):
        counts[item.topic] += 1
        first_of_time.setdefault(item.t_ns, item.topic)
        if item.topic == topics.CLOCK:
            clock_ns.append(item.msg.clock.sec * 1_000_000_000 + item.msg.clock.nanosec)
            assert item.t_ns == clock_ns[-1]
    assert clock_ns == [k * 100_000 * 1000 for k in range(40)]
    # played back, a use_sim_time node hears each step's time before the state and frames
    # of that time (they reach the recorder first: record.clock_first)
    assert all(first_of_time[t_ns] == topics.CLOCK for t_ns in clock_ns), first_of_time
    for topic in (topics.TIMING, topics.ACTION, topics.APPLIED, topics.STATE):
        assert counts[topic] == 40, topic
    for camera in ("chase", "front"):
        assert counts[topics.image_topic(camera)] == 40
        assert counts[topics.camera_info_topic(camera)] == 40
    manifest = manifest_of(result)
    assert manifest["steps"] == manifest["expected_steps"] == 40
    assert manifest["bag"]["storage"] == "mcap"
    # what the recorder kept of each camera_info, as it took them: what verify gets from the bag
    replayed = CameraInfoDigests()
    info_topics = [topics.camera_info_topic(c) for c in ("chase", "front")]
    for item in read_bag(Path(result.run_dir) / "bag", topics=info_topics):
        replayed.add(item.topic.split("/")[3], to_plain(item.msg))
    assert manifest["camera_info"] == replayed.summary()
    assert {c: v["messages"] for c, v in manifest["camera_info"].items()} == {"chase": 40, "front": 40}


def test_the_mcap_file_is_readable_by_the_mcap_library(tmp_path):
    from mcap.reader import make_reader

    result = lockstep(tmp_path, steps=10, layout="single")
    (path,) = (Path(result.run_dir) / "bag").glob("*.mcap")
    with path.open("rb") as stream:
        reader = make_reader(stream)
        summary = reader.get_summary()
        schemas = {s.name: s for s in summary.schemas.values()}
        channels = {c.topic for c in summary.channels.values()}
        count = sum(1 for _ in reader.iter_messages(topics=[topics.TIMING]))
        first_of_time: dict[int, str] = {}
        for _, channel, message in reader.iter_messages(log_time_order=True):
            first_of_time.setdefault(message.log_time, channel.topic)
    assert "simforge_ros/msg/StepTiming" in schemas
    assert schemas["simforge_ros/msg/StepTiming"].encoding == "ros2msg"
    assert b"int64 t_us" in schemas["simforge_ros/msg/StepTiming"].data
    assert topics.CLOCK in channels and count == 10
    assert [first_of_time[k * 100_000_000] for k in range(10)] == [topics.CLOCK] * 10, first_of_time


def test_sqlite3_storage_on_request_verifies(tmp_path):
    result = lockstep(tmp_path, steps=10, layout="single", sets={"recorder": {"storage": "sqlite3"}})
    assert list((Path(result.run_dir) / "bag").glob("*.db3"))
    assert verify_run(Path(result.run_dir)).ok


def _flip_state_byte(run_dir: Path, step: int) -> None:
    (item,) = [m for m in read_bag(run_dir / "bag") if m.topic == topics.STATE and m.msg.step == step]
    offset = item.raw.index(struct.pack("<d", item.msg.pose.x_m))
    (path,) = (run_dir / "bag").glob("*.mcap")
    blob = bytearray(path.read_bytes())
    at = blob.find(item.raw)
    assert at >= 0 and blob.find(item.raw, at + 1) < 0
    blob[at + offset] ^= 0x01
    path.write_bytes(bytes(blob))


def test_one_flipped_byte_in_the_bag_fails_verify_at_that_step(tmp_path):
    result = lockstep(tmp_path, steps=30, layout="single")
    run_dir = Path(result.run_dir)
    _flip_state_byte(run_dir, 17)
    verdict = verify_run(run_dir)
    assert not verdict.ok
    assert verdict.first_mismatch == {"step": 17, "field": "state.pose.x_m"}
    out = simforge("verify", str(run_dir), "--json", cwd=tmp_path)
    assert out.returncode == 1
    assert json.loads(out.stdout)["first_mismatch"]["step"] == 17


def test_diff_names_the_step_and_what_differed_first(tmp_path):
    base = lockstep(tmp_path, steps=60, layout="single")
    same = lockstep(tmp_path, steps=60, layout="single")
    action = lockstep(tmp_path, steps=60, layout="single", faults=("perturb_action=0.001@40",))
    state = lockstep(tmp_path, steps=60, layout="single", faults=("perturb_state=0.001@40",))
    assert diff_runs(Path(base.run_dir), Path(same.run_dir)).identical
    by_action = diff_runs(Path(base.run_dir), Path(action.run_dir))
    assert (by_action.step, by_action.first, by_action.field) == (40, "controller", "action.steer_rad")
    by_state = diff_runs(Path(base.run_dir), Path(state.run_dir))
    assert (by_state.step, by_state.first) == (40, "state")
    out = simforge("diff", base.run_dir, action.run_dir, cwd=tmp_path)
    assert out.returncode == 1 and "step 40: controller output differed first" in out.stdout
    out = simforge("diff", base.run_dir, state.run_dir, cwd=tmp_path)
    assert "step 40: vehicle state differed first" in out.stdout
    assert len(out.stdout.splitlines()) == 2  # the difference, and the one setup difference (the fault)
    # the way to look at it live, on stderr: the rerun it names holds at that step
    assert out.stderr == (f"simforge diff: to look at step 40 live, rerun the second run held there: "
                          f"simforge rerun {state.run_dir} --hold-at-step 40\n"
                          f"simforge diff: or replay what it recorded up to there: "
                          f"simforge play {state.run_dir} --from-step 30 --to-step 40\n")
    same_out = simforge("diff", base.run_dir, same.run_dir, cwd=tmp_path)
    assert (same_out.stdout, same_out.stderr) == ("identical (60 steps)\n", "")
    # how the runs were set up differently: only the injected fault, though ids, directories,
    # processes and wall time differ between any two runs
    manifests = [load_run(Path(r.run_dir)).manifest for r in (base, same, action)]
    assert setup_differences(manifests[0], manifests[1]) == []
    fields = [field for field, _a, _b in setup_differences(manifests[0], manifests[2])]
    assert fields == ["faults", "digests.bridge"]  # the bridge's parameters hold the faults too


def test_the_manifest_names_what_drove_the_run(tmp_path):
    result = lockstep(tmp_path, steps=5, layout="single", seed=7)
    manifest = manifest_of(result)
    assert manifest["seed"] == 7 and manifest["scenario"] == "right_turn"
    assert manifest["digests"]["scenario_file"] and manifest["digests"]["driver_config"]
    assert manifest["digests"]["engine_version"].startswith("simforge-engine/")
    # and the engine's code itself: one changed under the same version string was not named
    import hashlib

    from simforge_ros.engine import world
    sources = sorted(Path(world.__file__).parent.glob("*.py"))
    assert len(sources) > 10
    want = hashlib.sha256(b"".join(p.name.encode() + b"\0" + p.read_bytes() + b"\0" for p in sources)).hexdigest()
    assert manifest["digests"]["engine"] == want
    assert manifest["versions"]["rclpy"] and manifest["versions"]["numpy"]
    assert set(manifest["nodes"]) >= {"clock_master", "sim_bridge", "driver", "recorder"}
    assert manifest["nodes"]["clock_master"]["params"]["decision_us"] == 100_000
    pids = {manifest["nodes"][n]["process"]["pid"] for n in ("clock_master", "sim_bridge", "driver", "recorder")}
    assert pids == {os.getpid()}  # each node names its process: here all ran in this one
    # who answered the clock master's calls: our own nodes, in this process
    host = manifest["nodes"]["sim_bridge"]["process"]["host"]
    assert manifest["participants"] == {
        "sim_bridge": {"node": "/sim_bridge", "pid": os.getpid(), "host": host, "external": False, "pid_watched": True},
        "driver": {"node": "/driver", "pid": os.getpid(), "host": host, "external": False, "pid_watched": True},
    }
    assert manifest["contract"] == {"decision_us": 100_000, "tick_us": 20_000, "ticks_per_step": 5, "latency_steps": 0}
    records = steps_of(result)
    record = records[0]
    assert "wall_step_ns" not in record["timing"] and "wall_step_ns" in record["wall"]
    # the manifest sums the steps' wall times up; each step's is in steps.jsonl
    walls = sorted(r["wall"]["wall_step_ns"] for r in records)
    assert manifest["wall"]["step_ns"] == {"n": 5, "median": walls[2], "p99": walls[4], "max": walls[4]}


def test_a_refused_runs_side_digests_count_its_recorded_steps_only(tmp_path):
    """The bridge sends a step's frames (and odometry, /tf) after it answers; at the step a
    run is refused at, they reached the recorder before it closed in some repeats and not in
    others: 50 and 51 camera_info messages, and a rerun of the kept failure "did not
    repeat". Its manifest now counts its 10 recorded steps' messages, whatever came of step
    10, and verify holds the bag to that."""
    run = lockstep(tmp_path, steps=20, layout="processes", faults=("time_offset=1@10",),
                   sets={"sim_bridge": {"odometry": True, "tf": True}})
    assert run.status == "refused" and run.refusal["code"] == "time_drift" and run.steps == 10
    manifest = manifest_of(run)
    assert manifest["side_digests_before_ns"] == 10 * 100_000_000
    for key in ("camera_info", "image_headers"):
        assert {camera: entry["messages"] for camera, entry in manifest[key].items()} == {"chase": 10, "front": 10}
    assert manifest["odometry"]["ego"]["messages"] == 10 and manifest["transforms"]["/tf"]["messages"] == 10
    assert simforge("verify", run.run_dir, cwd=tmp_path).returncode == 0
    # what the key says is held to the run: a time that left out a recorded step is named
    edited = {**manifest, "side_digests_before_ns": 9 * 100_000_000}
    (Path(run.run_dir) / "manifest.json").write_text(json.dumps(edited))
    said = simforge("verify", run.run_dir, cwd=tmp_path)
    assert said.returncode == 1 and "manifest.side_digests_before_ns" in said.stdout + said.stderr
