"""`simforge render RUN`: a kept run's frames at a step, read back from its bag by their
exact stamps and checked against the digests the recorder chained."""

from __future__ import annotations

import numpy as np
import pytest

from simforge_ros import topics
from simforge_ros.engine.png import decode_png
from simforge_ros.engine.snapshot import main
from simforge_ros.record.bag import read_bag
from simforge_ros.record.frames import FramesError, _rgb, default_step, frames_at
from simforge_ros.record.rundir import load_run


def test_a_step_gives_the_frames_its_timing_names_with_the_chained_digests(make_run):
    height, width = 6, 8  # the fabricated runs' frames
    run = load_run(make_run(steps=8))
    first = frames_at(run, 0)
    assert [f.camera for f in first] == ["front", "rear", "top"]  # every 1, 2 and 3 steps
    assert [f.camera for f in frames_at(run, 1)] == ["front"]
    assert [f.camera for f in frames_at(run, 6, ["top"])] == ["top"]
    for frame in first + frames_at(run, 4):
        assert frame.matches and frame.chained == run.steps[frame.t_us // 50_000]["frames"][frame.camera]
        assert frame.pixels.shape == (height, width, 3)
    # the very pixels the run published (the fabricated image of that camera and time)
    (front4,) = frames_at(run, 4, ["front"])
    published = [m.msg for m in read_bag(run.bag_path) if m.topic == topics.image_topic("front")
                 and m.t_ns == 200_000_000]
    assert np.array_equal(front4.pixels, published[0].data.reshape(height, width, 3))


@pytest.mark.parametrize(("step", "cameras", "said"), [
    (8, None, "step: expected a recorded step from 0 to 7, got 8"),
    (-1, None, "got -1"),
    (1, ["rear"], "cameras: expected cameras step 1 names (front), got rear"),
])
def test_a_step_or_camera_the_run_does_not_have_is_named(make_run, step, cameras, said):
    with pytest.raises(FramesError) as err:
        frames_at(load_run(make_run(steps=8)), step, cameras)
    assert said in str(err.value)


def test_render_writes_the_pngs_of_a_runs_step_and_says_they_are_as_chained(make_run, tmp_path, capsys):
    run_dir = make_run(steps=8)
    out = tmp_path / "look"
    assert main([str(run_dir), "--step", "3", "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in printed] == [str(out / "run_step3_front.png"), str(out / "run_step3_top.png")]
    assert "front t=150000 us" in printed[0] and all(line.endswith("as chained") for line in printed)
    for frame in frames_at(load_run(run_dir), 3):
        assert np.array_equal(decode_png((out / f"run_step3_{frame.camera}.png").read_bytes()), frame.pixels)


def test_render_of_a_run_defaults_to_where_it_broke(make_run):
    assert default_step(load_run(make_run("counted", steps=8))) == 0
    refused = load_run(make_run("refused", steps=20, refuse_at=9))
    assert default_step(refused) == len(refused.steps) - 1


def test_a_frame_the_bag_holds_other_than_chained_is_exit_1(make_run, bag_file_of, tmp_path, capsys):
    run_dir = make_run(steps=8)
    (item,) = [m for m in read_bag(run_dir / "bag") if m.topic == topics.image_topic("rear") and m.t_ns == 100_000_000]
    path = bag_file_of(run_dir)
    blob = bytearray(path.read_bytes())
    at = blob.find(item.raw)
    assert at >= 0 and blob.find(item.raw, at + 1) < 0
    blob[at + len(item.raw) - 1] ^= 0x01  # the last pixel byte of step 2's rear frame
    path.write_bytes(bytes(blob))
    assert main([str(run_dir), "--step", "2", "--out", str(tmp_path / "look")]) == 1
    captured = capsys.readouterr()
    lines = {line.split()[1]: line for line in captured.out.splitlines()}
    assert lines["front"].endswith("as chained") and "DIFFERS from the chained" in lines["rear"]
    assert "the bag's rear frame of step 2 is not the one the recorder chained" in captured.err


def test_render_of_a_run_refuses_in_one_line(make_run, tmp_path, capsys):
    run_dir = make_run(steps=8)
    assert main([str(run_dir), "--step", "99", "--out", str(tmp_path)]) == 2
    with pytest.raises(SystemExit) as usage:
        main([str(run_dir), "--topdown-only"])
    assert usage.value.code == 2
    (run_dir / "manifest.json").write_text("{")
    assert main([str(run_dir), "--out", str(tmp_path)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("simforge render: ")]
    assert err[0].endswith("step: expected a recorded step from 0 to 7, got 99")
    assert err[1] == "simforge render: error: --topdown-only: for a scenario, not a run (its frames are as recorded)"
    assert err[2].startswith(f"simforge render: {run_dir}/manifest.json: not valid JSON")
    assert not list(tmp_path.glob("*.png"))


@pytest.mark.parametrize("out", ["", "a_file"])
def test_render_of_a_run_names_out_when_it_is_a_file_or_empty(make_run, tmp_path, capsys, monkeypatch, out):
    """It said "[Errno 17] File exists: ..." naming no option (render SCENARIO named --out),
    and an empty --out wrote into the current directory unasked."""
    run_dir = make_run(steps=8)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("")
    assert main([str(run_dir), "--step", "3", "--out", out]) == 2
    why = "an empty name names none; . is the current directory" if not out else (
        "a file of that name is there, not a directory")
    assert capsys.readouterr().err == (
        f"simforge render: --out: expected a directory simforge can create ({why}), got {out!r}\n")
    assert not list(tmp_path.glob("*.png"))


def test_render_of_a_run_refuses_the_options_of_a_scenario(make_run, tmp_path, capsys):
    """--width 16 --decision-us 20000 wrote the run's 320x180 frames, exit 0."""
    run_dir = make_run(steps=4)
    with pytest.raises(SystemExit) as usage:
        main([str(run_dir), "--width", "16", "--decision-us", "20000", "--out", str(tmp_path / "o")])
    assert usage.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "simforge render: error: --decision-us, --width: for a scenario, not a run (its frames are as recorded)")
    assert not (tmp_path / "o").exists()


def test_frames_in_other_encodings_become_rgb():
    bgr = np.arange(2 * 2 * 3, dtype=np.uint8).reshape(2, 2, 3)
    assert np.array_equal(_rgb(bgr, "bgr8"), bgr[..., ::-1])
    mono = np.arange(4, dtype=np.uint8).reshape(2, 2)
    assert _rgb(mono, "mono8").shape == (2, 2, 3) and np.array_equal(_rgb(mono, "mono8")[..., 1], mono)
