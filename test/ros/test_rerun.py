"""`simforge rerun`: a kept run, counted or refused, run again from its run directory
repeats bit for bit in the layout it used; an edited parameter file does not, and the
tool names the first differing step and the setting that moved."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from runs import lockstep, simforge

from simforge_ros.record.diff_runs import setup_differences
from simforge_ros.record.rundir import load_run

pytestmark = pytest.mark.ros


def _rerun(run_dir: str, tmp_path: Path, *args: str) -> tuple[int, dict]:
    out = simforge("rerun", run_dir, "--json", *args, cwd=tmp_path)
    assert out.returncode in (0, 1), out.stderr
    return out.returncode, json.loads(out.stdout)


def test_a_kept_run_repeats_bit_for_bit_with_what_it_was_asked(tmp_path):
    kept = lockstep(tmp_path / "runs", steps=30, layout="single", seed=5, sets={"sim_bridge": {"cameras": ["front"]}},
                    faults=("perturb_action=0.001@10",))
    assert kept.status == "counted"
    code, out = _rerun(kept.run_dir, tmp_path)
    assert code == 0 and out["repeated"] is True and out["layout"] == "single"  # the layout it used
    assert out["rerun"]["chain_digest"] == kept.chain_digest and out["rerun"]["steps"] == 30
    rerun_dir = Path(out["rerun"]["run_dir"])
    assert rerun_dir.parent == Path(kept.run_dir).parent and rerun_dir.name.startswith(kept.run_id + "-rerun-")
    # the nodes were asked the same: nothing differs in setup but names, places and processes
    assert setup_differences(load_run(Path(kept.run_dir)).manifest, load_run(rerun_dir).manifest) == []


def test_rerun_dot_from_inside_the_kept_run_writes_beside_it_not_into_it(tmp_path):
    """The default --out was the kept path's parent as typed: `.`'s is `.`, the kept run."""
    kept = lockstep(tmp_path / "runs", steps=5, layout="single", sets={"sim_bridge": {"cameras": []}})
    before = sorted(p.relative_to(kept.run_dir) for p in Path(kept.run_dir).rglob("*"))
    out = simforge("rerun", ".", "--json", cwd=Path(kept.run_dir))
    assert out.returncode == 0, out.stderr
    assert Path(json.loads(out.stdout)["rerun"]["run_dir"]).parent == Path(kept.run_dir).parent
    assert sorted(p.relative_to(kept.run_dir) for p in Path(kept.run_dir).rglob("*")) == before


def test_a_run_interrupted_before_step_0_is_not_rerun(tmp_path):
    """Its rerun ran the whole scenario and said "did not repeat ... (0 vs 40 steps)", with
    setup differences made of what the interrupted nodes never recorded."""
    kept = lockstep(tmp_path / "runs", steps=3, layout="single", sets={"sim_bridge": {"cameras": []}})
    manifest_file = Path(kept.run_dir) / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    manifest.update(status="refused", steps=0, chain_digest="0" * 64, frames_digest=None,
                    refusal={"code": "aborted", "step": -1, "detail": "interrupted while the nodes were starting"})
    manifest_file.write_text(json.dumps(manifest))
    (Path(kept.run_dir) / "steps.jsonl").write_text("")
    out = simforge("rerun", kept.run_dir, cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.strip() == (f"simforge rerun: RUN: {kept.run_dir}: expected a run that did a step (this one "
                                  "was interrupted before step 0: nothing to run again), got 'interrupted while the "
                                  "nodes were starting'")
    assert sorted(p.name for p in Path(kept.run_dir).parent.iterdir()) == [Path(kept.run_dir).name]


def test_a_kept_failure_reproduces_with_its_refusal(tmp_path):
    kept = lockstep(tmp_path / "runs", steps=30, layout="processes", faults=("time_offset=50@12",))
    assert kept.refusal is not None and (kept.refusal["code"], kept.refusal["step"]) == ("time_drift", 12)
    code, out = _rerun(kept.run_dir, tmp_path)
    assert code == 0 and out["repeated"] is True and out["layout"] == "processes"
    assert (out["rerun"]["refusal"]["code"], out["rerun"]["refusal"]["step"]) == ("time_drift", 12)
    assert out["rerun"]["chain_digest"] == kept.chain_digest


def test_an_edited_parameter_file_does_not_repeat_and_says_where_and_why(tmp_path):
    kept = lockstep(tmp_path / "runs", steps=20, layout="single")
    params = Path(kept.run_dir) / "params.yaml"
    params.write_text(params.read_text().replace("seed: 0", "seed: 1"))
    code, out = _rerun(kept.run_dir, tmp_path)
    assert code == 1 and out["repeated"] is False
    assert out["diff"]["step"] == 0 and out["diff"]["first"] == "state"
    assert out["diff"]["setup"] == [{"field": "seed", "a": 0, "b": 1}]
    text = simforge("rerun", kept.run_dir, cwd=tmp_path)
    assert text.returncode == 1
    assert "did not repeat: first difference at step 0" in text.stdout
    assert text.stdout.rstrip().endswith("set up differently: seed (0 vs 1)")


def test_the_reruns_own_pace_and_hold_are_no_setup_difference(tmp_path):
    """A rerun is neither paced nor held unless asked: the kept run's real_time_factor and
    hold_at_step were told as setup differences, settings no digest depends on."""
    kept = lockstep(tmp_path / "runs", steps=10, layout="single", sets={"clock_master": {"real_time_factor": 20.0}})
    params = Path(kept.run_dir) / "params.yaml"
    params.write_text(params.read_text().replace("seed: 0", "seed: 1"))
    code, out = _rerun(kept.run_dir, tmp_path)
    assert code == 1 and out["diff"]["setup"] == [{"field": "seed", "a": 0, "b": 1}]


def test_a_kept_run_whose_step_records_were_edited_did_not_repeat(tmp_path):
    """Its manifest's outcome and chain digest match the rerun; one of its step records does
    not: `rerun` said "repeated bit for bit" where `diff` of the same runs named the step."""
    kept = lockstep(tmp_path / "runs", steps=20, layout="single")
    steps = Path(kept.run_dir) / "steps.jsonl"
    lines = steps.read_text().splitlines()
    record = json.loads(lines[10])
    record["digest"] = ("0" if record["digest"][0] != "0" else "1") + record["digest"][1:]
    lines[10] = json.dumps(record)
    steps.write_text("\n".join(lines) + "\n")
    code, out = _rerun(kept.run_dir, tmp_path)
    assert code == 1 and out["repeated"] is False and out["diff"]["step"] == 10
    text = simforge("rerun", kept.run_dir, cwd=tmp_path)
    assert text.returncode == 1 and "did not repeat: first difference at step 10" in text.stdout
    assert f"its step records do not: `simforge verify {kept.run_dir}` holds them to its bag" in text.stdout


def test_a_rerun_whose_pixels_differ_did_not_repeat(tmp_path):
    """The step chain holds no pixel: a rerun that drew one pixel otherwise repeated every
    step digest and was said to repeat bit for bit. The frames chain is compared too. (A
    pixel flipped in the kept run, then taken out of its parameter file, stands in for a
    renderer that did not draw the same twice.)"""
    kept = lockstep(tmp_path / "runs", steps=20, layout="single", sets={"sim_bridge": {"cameras": ["front"]}},
                    faults=("flip_pixel=front@7",))
    params = Path(kept.run_dir) / "params.yaml"
    values = yaml.safe_load(params.read_text())
    taken = 0
    for node in values.values():
        faults = node["ros__parameters"].get("faults")
        if faults and "flip_pixel=front@7" in faults:
            node["ros__parameters"]["faults"] = [f for f in faults if f != "flip_pixel=front@7"]
            taken += 1
    assert taken
    params.write_text(yaml.safe_dump(values))
    code, out = _rerun(kept.run_dir, tmp_path)
    assert out["rerun"]["chain_digest"] == kept.chain_digest and out["rerun"]["status"] == "counted"
    assert code == 1 and out["repeated"] is False
    assert out["diff"]["step"] == 7 and out["diff"]["first"] == "frames"


def test_a_failure_at_step_0_is_kept_verified_diffed_and_rerun(tmp_path):
    """A run refused at step 0 records no step, so its manifest has no last record to take a
    contract and a world digest from: verify, diff and rerun all refused to read it ("'contract'
    must be an object, got None"), the most common failure of all (a first frame missing, a
    participant that never answers)."""
    kept = lockstep(tmp_path / "runs", steps=10, layout="single", faults=("drop_frame@0",))
    assert (kept.refusal["code"], kept.refusal["step"], kept.steps) == ("missing_frame", 0, 0)
    verified = simforge("verify", kept.run_dir, cwd=tmp_path)
    assert verified.returncode == 0 and "verified: 0 steps" in verified.stdout, verified.stderr
    code, out = _rerun(kept.run_dir, tmp_path)
    assert code == 0 and out["repeated"] is True
    assert (out["rerun"]["refusal"]["code"], out["rerun"]["refusal"]["step"]) == ("missing_frame", 0)
    diffed = simforge("diff", kept.run_dir, out["rerun"]["run_dir"], cwd=tmp_path)
    assert diffed.returncode == 0 and diffed.stdout.startswith("identical (0 steps)"), diffed.stderr


def test_a_rerun_whose_camera_info_differs_did_not_repeat(tmp_path):
    """camera_info and an image's frame_id are in no chain: a rerun that published other
    intrinsics repeated every digest. The manifests' side digests are compared too. (The
    kept manifest's camera_info digest, changed, stands in for a bridge that published
    other intrinsics.)"""
    kept = lockstep(tmp_path / "runs", steps=10, layout="single", sets={"sim_bridge": {"cameras": ["front"]}})
    path = Path(kept.run_dir) / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["camera_info"]["front"]["digest"] = "0" * 64
    path.write_text(json.dumps(manifest))
    code, out = _rerun(kept.run_dir, tmp_path)
    assert out["rerun"]["chain_digest"] == kept.chain_digest
    assert (out["diff"]["identical"], out["diff"]["first"], out["diff"]["field"]) == (
        False, "messages", "camera_info.front.digest")
    assert code == 1 and out["repeated"] is False
    assert out["side_difference"].startswith("camera front: the rerun's camera_info messages are not those recorded")
    text = simforge("rerun", kept.run_dir, cwd=tmp_path)
    assert text.returncode == 1
    assert ("did not repeat: every step record is the same (10 steps), but the messages no chain holds differ "
            f"(camera_info.front.digest: '{'0' * 64}' vs '") in text.stdout


def test_a_rerun_is_neither_paced_nor_held_unless_asked(tmp_path):
    """A kept run watched live (paced, held at a step, waiting for a stack's reader) reruns
    unattended: a rerun that held would wait for someone to resume it, one paced at 0.01
    would take a minute, and a stack's reader of the kept run is not there to wait for."""
    kept = lockstep(tmp_path / "runs", steps=6, layout="single")
    params = Path(kept.run_dir) / "params.yaml"
    doc = yaml.safe_load(params.read_text())
    doc["clock_master"]["ros__parameters"].update(real_time_factor=0.01, hold_at_step=2,
                                                  wait_for_readers=["/clock"])
    doc["sim_bridge"]["ros__parameters"]["wait_for_readers"] = ["/clock"]
    params.write_text(yaml.safe_dump(doc))
    out = subprocess.run([str(Path(sys.executable).with_name("simforge")), "rerun", kept.run_dir, "--json"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["repeated"] is True
    rerun = yaml.safe_load((Path(result["rerun"]["run_dir"]) / "params.yaml").read_text())
    clock = rerun["clock_master"]["ros__parameters"]
    assert (clock["real_time_factor"], clock["hold_at_step"]) == (0.0, -1)
    assert clock.get("wait_for_readers", []) == [] and "waiting up to" not in out.stderr
    assert "holds once step" not in out.stderr


@pytest.mark.parametrize(("args", "needle"), [
    (("--real-time-factor", "-1"), "--real-time-factor: real_time_factor: expected a finite number >= 0"),
    (("--hold-at-step", "-3"), "--hold-at-step: hold_at_step: expected a step >= 0 (-1: never), got -3"),
    # as `simforge run --out` (it was "unexpected error: NotADirectoryError", exit 1)
    (("--out", "a_file"), "--out: out: expected a directory simforge can create and write to (a file of that "
                          "name is there, not a directory), got 'a_file'"),
    (("--out", ""), "--out: out: expected a directory simforge can create and write to (an empty name names none"),
])
def test_a_rerun_names_a_bad_wall_clock_setting(tmp_path, args, needle):
    kept = lockstep(tmp_path / "runs", steps=3, layout="single")
    (tmp_path / "a_file").write_text("")
    out = simforge("rerun", kept.run_dir, *args, cwd=tmp_path)
    assert out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "runs"]


def test_a_problem_in_the_kept_parameter_file_is_the_files_and_another_nodes_section_is_left_out(tmp_path):
    """A bad value there was said as "--set: ...", a --set the user never gave; a section for
    another node was refused where `simforge run --params-file` leaves it out with a note."""
    kept = lockstep(tmp_path / "runs", steps=3, layout="single", sets={"sim_bridge": {"cameras": []}})
    params = Path(kept.run_dir) / "params.yaml"
    original = params.read_text()
    params.write_text(original.replace("seed: 0", "seed: four"))
    out = simforge("rerun", kept.run_dir, cwd=tmp_path)
    assert out.returncode == 2 and "--set" not in out.stderr
    assert out.stderr == f"simforge rerun: {params}: clock_master.seed: expected a value of type int, got 'four'\n"
    params.write_text(original + "bogus_node:\n  ros__parameters: {x: 1}\n")
    out = simforge("rerun", kept.run_dir, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr == (f"simforge rerun: {params}: bogus_node left out: not a simforge node (a section for "
                          "another node of the stack)\n")
    assert out.stdout.splitlines()[-1] == "repeated bit for bit"


def test_a_kept_plan_simforge_no_longer_runs_is_named_as_its_parameter_files(tmp_path):
    """A stale frame at step 0 broke nothing and was accepted before 2026-12-05: a rerun of
    such a kept run named `--inject`, an option rerun does not have."""
    kept = lockstep(tmp_path / "runs", steps=5, layout="single")
    params = Path(kept.run_dir) / "params.yaml"
    params.write_text(params.read_text().replace("faults: []", "faults: ['stale_frame@0']"))
    out = simforge("rerun", kept.run_dir, cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr == (f"simforge rerun: {params}: faults: expected stale_frame@K at a step after the first "
                          "frames (K >= 1: at step 0 no earlier frame exists), got 'stale_frame@0'\n")
