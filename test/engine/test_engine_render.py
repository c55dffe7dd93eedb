"""Cameras: byte-deterministic frames, the present time only, recognisable content; PNGs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simforge_ros.core.values import FrameStamp
from simforge_ros.engine import CAMERA_NAMES, Engine, StaleRenderError, load_scenario
from simforge_ros.engine.png import decode_png, encode_png
from simforge_ros.engine.render import SIGNAL_RGB
from simforge_ros.engine.snapshot import drive_to_step, main, write_camera_pngs, write_topdown_png


def _count(pixels: np.ndarray, rgb) -> int:
    return int(np.all(pixels == np.array(rgb, dtype=np.uint8), axis=2).sum())


def test_camera_names():
    assert set(CAMERA_NAMES) == {"chase", "front", "left", "rear", "right"}


def test_render_is_byte_deterministic():
    scenario = load_scenario("right_turn")
    a, b = drive_to_step(scenario, 40), drive_to_step(scenario, 40)
    for cam in CAMERA_NAMES:
        fa = a.render(cam, a.t_us)
        fb = b.render(cam, b.t_us)
        assert fa.pixels.shape == (180, 320, 3) and fa.pixels.dtype == np.uint8
        assert fa.pixels.tobytes() == fb.pixels.tobytes()
        assert fa.pixels.tobytes() == a.render(cam, a.t_us).pixels.tobytes()
        assert fa.stamp == FrameStamp(cam, a.t_us, fa.pose)
        assert not fa.pixels.flags.writeable
    assert a.world_digest == b.world_digest  # rendering does not touch the world


def test_a_frame_job_keeps_its_time_s_scene_and_draws_it_after_the_world_moved():
    """A bridge answers with a frame's stamp and pose and draws it later: the pixels must
    be those of the frame's own time, whenever they are drawn."""
    scenario = load_scenario("right_turn")
    now, later = drive_to_step(scenario, 40), drive_to_step(scenario, 40)
    expected = {cam: now.render(cam, now.t_us) for cam in ("chase", "front")}
    jobs = {cam: later.frame_job(cam, later.t_us) for cam in expected}
    digest = later.world_digest
    later.advance(0.3, 2.0, 5)  # the world moves on before anything is drawn
    assert later.world_digest != digest
    for cam, job in jobs.items():
        drawn = job.draw()
        assert job.stamp == expected[cam].stamp and drawn.t_us == now.t_us
        assert drawn.pixels.tobytes() == expected[cam].pixels.tobytes()
        assert not drawn.pixels.flags.writeable
    moved_now = later.render("front", later.t_us).pixels.tobytes()
    assert moved_now != expected["front"].pixels.tobytes()  # the scene did change
    with pytest.raises(StaleRenderError, match="already passed"):
        later.frame_job("front", later.t_us - later.tick_us)


def test_resolution_is_configurable():
    engine = Engine(load_scenario("red_signal"), 0, width=64, height=48)
    assert engine.render("front", 0).pixels.shape == (48, 64, 3)


def test_stale_render_refused():
    engine = Engine(load_scenario("red_signal"), 0)
    engine.advance(0.0, 0.0, 5)
    with pytest.raises(StaleRenderError, match="not reached"):
        engine.render("front", engine.t_us + engine.tick_us)
    with pytest.raises(StaleRenderError, match="already passed"):
        engine.render("front", engine.t_us - engine.tick_us)
    with pytest.raises(ValueError):
        engine.render("roof", engine.t_us)
    assert engine.render("front", engine.t_us).t_us == 100_000


def test_rig_offset_moves_the_pose_and_the_image():
    engine = drive_to_step(load_scenario("right_turn"), 20)
    base = engine.render("front", engine.t_us)
    moved = engine.render("front", engine.t_us, rig_offset=(1.0, 5.0))
    p, q = base.pose, moved.pose
    assert q.x_m == pytest.approx(p.x_m + math.cos(p.yaw_rad)) and q.y_m == pytest.approx(
        p.y_m + math.sin(p.yaw_rad)
    )
    assert q.yaw_rad == pytest.approx(p.yaw_rad + math.radians(5.0))
    assert base.pose == engine.ego_state(0).pose
    assert base.pixels.tobytes() != moved.pixels.tobytes()


def test_scene_content_is_visible():
    scenario = load_scenario("red_signal")
    stopped = drive_to_step(scenario, 100)  # t = 10 s: ego waiting at the red light
    assert stopped.signal_states()["east_light"] == "red"
    front = stopped.render("front", stopped.t_us).pixels
    assert _count(front, SIGNAL_RGB["red"]) > 10
    ego_top = scenario.ego.vehicle.color
    assert _count(stopped.render("chase", stopped.t_us).pixels, ego_top) > 100  # ego seen from behind
    assert _count(front, ego_top) == 0  # not from inside it
    going = drive_to_step(scenario, 130)  # t = 13 s: green
    assert _count(going.render("front", going.t_us).pixels, SIGNAL_RGB["green"]) > 10


def test_png_roundtrip_and_snapshot(tmp_path):
    rng = np.random.default_rng(3)
    pixels = rng.integers(0, 256, size=(7, 5, 3), dtype=np.uint8)
    assert np.array_equal(decode_png(encode_png(pixels)), pixels)
    written = write_camera_pngs("right_turn", 5, tmp_path, ["chase", "rear"])
    assert [p.name for p in written] == ["right_turn_step5_chase.png", "right_turn_step5_rear.png"]
    assert decode_png(written[0].read_bytes()).shape == (180, 320, 3)
    top = write_topdown_png("unprotected_left", tmp_path / "top.png")
    assert top.stat().st_size < 100_000 and decode_png(top.read_bytes()).shape[2] == 3
    assert (
        main(["red_signal", "--step", "3", "--out", str(tmp_path), "--cameras", "left", "--no-topdown"]) == 0
    )
    assert (tmp_path / "red_signal_step3_left.png").is_file()
    assert main(["no_such_scenario", "--out", str(tmp_path)]) == 2


@pytest.mark.parametrize(("args", "said"), [
    (["--step", "221"], "simforge render: step: expected a decision step from 0 to 220 (right_turn lasts 22 s, "
                        "a step is 100000 us), got 221"),
    (["--step", "-1"], "got -1"),
    (["--step", "3", "--decision-us", "33333"],
     "simforge render: --decision-us: expected a positive multiple of the engine's tick, 20000 us, got 33333"),
    (["--decision-us", "0"], "--decision-us: expected a positive multiple of the engine's tick, 20000 us, got 0"),
    (["--step", "3", "--width", "99999"], "simforge render: --width: expected an integer in [2, 8192], got 99999"),
    (["--height", "1"], "simforge render: --height: expected an integer in [2, 8192], got 1"),
    (["--seed", "-1"], "simforge render: --seed: expected an integer in [0, 9223372036854775807], got -1"),
    (["--seed", str(2**63)], "--seed: expected an integer in [0, 9223372036854775807], got 9223372036854775808"),
])
def test_render_refuses_a_step_outside_the_scenario_in_one_line(tmp_path, capsys, args, said):
    assert main(["right_turn", "--out", str(tmp_path), "--no-topdown", *args]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1
    assert not list(tmp_path.iterdir())


def test_render_at_the_scenarios_last_step(tmp_path):
    engine = drive_to_step(load_scenario("right_turn"), 220)
    assert engine.t_us == 22_000_000


def test_render_refuses_an_out_it_cannot_create_before_drawing(tmp_path, capsys):
    (tmp_path / "a_file").write_text("")
    assert main(["right_turn", "--step", "3", "--out", str(tmp_path / "a_file" / "pngs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("simforge render: --out: expected a directory simforge can create (") and err.count("\n") == 1


@pytest.mark.parametrize("out", ["", "a_file"])
def test_render_refuses_an_empty_out_or_a_file_naming_out(tmp_path, capsys, monkeypatch, out):
    """An empty --out drew into the default directory unasked; a file was "File exists"."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("")
    assert main(["right_turn", "--step", "3", "--out", out]) == 2
    err = capsys.readouterr().err
    why = "an empty name names none; . is the current directory" if not out else (
        "a file of that name is there, not a directory")
    assert err == f"simforge render: --out: expected a directory simforge can create ({why}), got {out!r}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


def test_render_draws_into_the_current_directory_by_default_and_names_the_step(tmp_path, monkeypatch):
    """The default was docs/: run from the repository it wrote over the README's pictures,
    and a second step's pictures over the first's."""
    monkeypatch.chdir(tmp_path)
    assert main(["right_turn", "--step", "1", "--cameras", "front", "--no-topdown"]) == 0
    assert main(["right_turn", "--step", "2", "--cameras", "front", "--no-topdown"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["right_turn_step1_front.png", "right_turn_step2_front.png"]


@pytest.mark.parametrize("args, said", [
    (["--cameras", "front,front"], "--cameras: expected distinct names from"),
    (["--cameras", ",,"], "--cameras: expected distinct names from"),
    (["--cameras", ""], "--cameras: expected distinct names from"),  # drew the default cameras, unsaid
    (["--topdown-only", "--no-topdown"], "not allowed with argument"),
    (["--topdown-only", "--step", "-1"], "--step: --topdown-only draws the whole route, at no step"),
])
def test_render_refuses_arguments_that_drew_twice_nothing_or_ignored_themselves(tmp_path, capsys, args, said):
    """"front,front" wrote one PNG two times, ",," none (and all of a run's), both topdown
    flags nothing, and --topdown-only took any --step."""
    with pytest.raises(SystemExit) as info:
        main(["red_signal", "--out", str(tmp_path / "o"), *args])
    assert info.value.code == 2 and said in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("scenario, args", [("right_turn", ["--step", "99999999"]), ("no_such_scenario", [])])
def test_a_refused_render_leaves_no_out_directory_behind(tmp_path, capsys, scenario, args):
    """The scenario and the step are checked before --out is made: a refused render left an
    empty directory."""
    assert main([scenario, "--out", str(tmp_path / "o"), "--no-topdown", *args]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_a_png_that_cannot_be_written_names_out_and_leaves_none_of_the_render(tmp_path, capsys):
    """A directory named as the top-down PNG: "[Errno 21] Is a directory", the camera PNGs
    written before it left beside the error."""
    out = tmp_path / "o"
    (out / "right_turn_topdown.png").mkdir(parents=True)
    (out / "kept.txt").write_text("mine")
    assert main(["right_turn", "--step", "1", "--out", str(out)]) == 2
    assert capsys.readouterr().err == (f"simforge render: --out: expected a directory simforge can write the PNGs "
                                       f"into (right_turn_topdown.png: Is a directory), got {str(out)!r}\n")
    assert sorted(p.name for p in out.iterdir()) == ["kept.txt", "right_turn_topdown.png"]


def test_the_topdown_map_of_a_day_long_scenario_drives_its_first_ten_minutes(write_doc, minimal_doc, tmp_path,
                                                                              monkeypatch):
    """A scenario a day long was driven whole for its map: 864 000 steps, 50 s of
    `simforge render` with nothing said."""
    from simforge_ros.engine import snapshot
    from simforge_ros.engine.world import Engine as EngineClass

    doc = minimal_doc()
    doc["duration_us"] = 86_400_000_000
    advanced = []
    real = EngineClass.advance
    monkeypatch.setattr(EngineClass, "advance", lambda self, *a: advanced.append(1) or real(self, *a))
    out = snapshot.write_topdown_png(write_doc(doc), tmp_path / "map.png")
    assert out.is_file()
    assert len(advanced) == snapshot.TOPDOWN_DRIVE_US // snapshot.DEFAULT_DECISION_US + 1
