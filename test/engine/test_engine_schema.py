"""Scenario files: the seeds load; bad files are refused naming the file and the field."""

from __future__ import annotations

import hashlib
import itertools
import math
import sys
from pathlib import Path

import pytest

from simforge_ros.engine import ScenarioError, list_scenarios, load_scenario, scenario_dirs

SEEDS = ("right_turn", "unprotected_left", "red_signal", "handover_parked")
REPO_SCENARIOS = Path(__file__).resolve().parents[2] / "config" / "scenarios"


@pytest.mark.parametrize("name", SEEDS)
def test_seed_scenarios_load(name):
    sc = load_scenario(name)
    assert sc.name == name
    # found in the installed share dir or the source tree: either way the shipped file
    assert sc.path.name == f"{name}.yaml"
    assert sc.path.read_bytes() == (REPO_SCENARIOS / f"{name}.yaml").read_bytes()
    assert sc.source_sha256 == hashlib.sha256(sc.path.read_bytes()).hexdigest()
    assert sc.duration_us >= 15_000_000
    route = sc.ego.route
    for a, b in itertools.pairwise(route):  # heading along the direction of travel
        travel = math.atan2(b.y_m - a.y_m, b.x_m - a.x_m)
        assert abs(math.remainder(a.yaw_rad - travel, math.tau)) < 0.2
    assert load_scenario(sc.path).source_sha256 == sc.source_sha256  # by path as well
    assert load_scenario(str(sc.path)).name == name


def test_catalog_lists_seeds():
    assert any((d / "right_turn.yaml").is_file() for d in scenario_dirs())
    assert set(SEEDS) <= set(list_scenarios())
    assert load_scenario("handover_parked").handover is not None


def test_installed_layout_is_found(tmp_path, monkeypatch, write_doc, minimal_doc):
    share = tmp_path / "prefix" / "share" / "simforge_ros" / "config" / "scenarios"
    share.mkdir(parents=True)
    doc = minimal_doc()
    (share / "only_installed.yaml").write_text(write_doc(doc).read_text())
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))
    assert share in scenario_dirs()
    assert "only_installed" in list_scenarios()
    assert load_scenario("only_installed").path == share / "only_installed.yaml"


def _refused(write_doc, doc) -> ScenarioError:
    path = write_doc(doc)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.path == str(path)
    assert str(err).startswith(f"{path}: {err.field}: expected ")
    return err


def test_valid_minimal_doc_loads(write_doc, minimal_doc):
    sc = load_scenario(write_doc(minimal_doc()))
    assert sc.actors[0].kind == "vehicle" and sc.actors[0].path[1].t_us == 1_000_000


def test_a_key_given_twice_is_refused_naming_both_lines(write_doc, minimal_doc):
    """PyYAML kept the last of two keys silently: an edit that added a second `x_m` ran."""
    import yaml

    text = yaml.safe_dump(minimal_doc(), sort_keys=False)
    at = text.index("\n", text.index("duration_us")) + 1
    path = write_doc(text[:at] + "duration_us: 1000000\n" + text[at:], "twice")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    first = text[:at].count("\n")
    assert f"found 'duration_us' twice in one mapping (first on line {first})" in str(info.value)
    assert f"line {first + 1}, column 1" in str(info.value)


def test_a_number_with_an_exponent_and_no_dot_is_a_number(write_doc, minimal_doc):
    """PyYAML (YAML 1.1) read `-5e1` as the string '-5e1': 'expected a finite number'."""
    import yaml

    doc = minimal_doc()
    doc["ego"]["start"]["x_m"], doc["ego"]["start"]["speed_mps"] = "@X@", "@V@"

    def text(**more: str) -> str:
        out = yaml.safe_dump(doc, sort_keys=False).replace("'@X@'", "-5e1").replace("'@V@'", "2E0")
        for key, value in more.items():
            out = out.replace(f"'@{key}@'", value)
        return out

    sc = load_scenario(write_doc(text(), "exponent"))
    assert (sc.ego.start.x_m, sc.ego.start_speed_mps) == (-50.0, 2.0)
    doc["duration_us"] = "@D@"  # a time is still whole microseconds: 2e7 is a float
    err = _refused(write_doc, text(D="2e7"))
    assert (err.field, err.expected) == ("duration_us", "integer microseconds")


def test_missing_field(write_doc, minimal_doc):
    doc = minimal_doc()
    del doc["duration_us"]
    err = _refused(write_doc, doc)
    assert err.field == "duration_us"
    assert str(err).endswith("got missing")


def test_missing_nested_field(write_doc, minimal_doc):
    doc = minimal_doc()
    del doc["actors"][0]["path"][1]["yaw_rad"]
    assert _refused(write_doc, doc).field == "actors[0].path[1].yaw_rad"


def test_wrong_type(write_doc, minimal_doc):
    doc = minimal_doc()
    doc["ego"]["start"]["x_m"] = "left"
    err = _refused(write_doc, doc)
    assert (err.field, err.got) == ("ego.start.x_m", "left")
    assert "expected a finite number, got 'left'" in str(err)


def test_non_integer_time(write_doc, minimal_doc):
    doc = minimal_doc()
    doc["actors"][0]["path"][1]["t_us"] = 1.5e6
    err = _refused(write_doc, doc)
    assert err.field == "actors[0].path[1].t_us"
    assert err.expected == "integer microseconds"


def test_a_sign_before_a_leading_dot_is_a_number(write_doc, minimal_doc):
    """`.5` and `+0.5` were numbers and `-.5` the string '-.5': "expected a finite number,
    got '-.5'" (scenario-file audit)."""
    import yaml

    doc = minimal_doc()
    doc["ego"]["start"]["yaw_rad"], doc["ego"]["start"]["speed_mps"] = "@Y@", "@V@"
    text = yaml.safe_dump(doc, sort_keys=False).replace("'@Y@'", "-.5").replace("'@V@'", "+.25")
    sc = load_scenario(write_doc(text, "signed_dot"))
    assert (sc.ego.start.yaw_rad, sc.ego.start_speed_mps) == (-0.5, 0.25)
    assert _refused(write_doc, text.replace("-.5", "-.x", 1)).field == "ego.start.yaw_rad"  # still text


def test_float_duration_refused(write_doc, minimal_doc):
    doc = minimal_doc()
    doc["duration_us"] = 20_000_000.0
    assert _refused(write_doc, doc).field == "duration_us"


def test_too_short(write_doc, minimal_doc):
    doc = minimal_doc()
    doc["duration_us"] = 14_999_999
    assert "15000000" in _refused(write_doc, doc).expected


def test_unknown_actor_kind(write_doc, minimal_doc):
    doc = minimal_doc()
    doc["actors"][0]["kind"] = "bicycle"
    err = _refused(write_doc, doc)
    assert (err.field, err.got) == ("actors[0].kind", "bicycle")


def test_unknown_key(write_doc, minimal_doc):
    doc = minimal_doc()
    doc["actors"][0]["colour"] = [1, 2, 3]
    assert _refused(write_doc, doc).field == "actors[0].colour"
    doc = minimal_doc()
    doc["weather"] = "rain"
    assert _refused(write_doc, doc).field == "weather"


def test_times_must_increase(write_doc, minimal_doc):
    doc = minimal_doc()
    doc["actors"][0]["path"][1]["t_us"] = 0
    assert _refused(write_doc, doc).field == "actors[0].path[1].t_us"


def test_route_heading_must_follow_travel(write_doc, minimal_doc):
    doc = minimal_doc()
    doc["ego"]["route"][0]["yaw_rad"] = math.pi
    assert _refused(write_doc, doc).field == "ego.route[0].yaw_rad"


def test_ids_unique_and_ego_reserved(write_doc, minimal_doc):
    doc = minimal_doc()
    doc["actors"][0]["id"] = "ego"
    assert _refused(write_doc, doc).field == "actors[0].id"
    doc = minimal_doc()
    doc["actors"].append(dict(doc["actors"][0]))
    assert _refused(write_doc, doc).field == "actors[1].id"


@pytest.mark.parametrize("field, item", [
    ("roads", {"id": "main", "points": [[0.0, 0.0], [10.0, 0.0]], "width_m": 7.0}),
    ("junctions", {"id": "centre", "x_m": 0.0, "y_m": 0.0, "radius_m": 7.5}),
    ("crosswalks", {"id": "walk", "a": [0.0, -5.0], "b": [0.0, 5.0]}),
])
def test_feature_ids_unique_within_their_list(write_doc, minimal_doc, field, item):
    doc = minimal_doc()
    doc[field] = [item, dict(item)]
    err = _refused(write_doc, doc)
    assert (err.field, err.got) == (f"{field}[1].id", item["id"])
    doc[field] = [item, dict(item, id="other")]  # distinct ids load
    assert len(getattr(load_scenario(write_doc(doc)), field)) == 2


def test_signal_state_checked(write_doc, minimal_doc):
    doc = minimal_doc()
    doc["signals"] = [
        {
            "id": "s",
            "x_m": 0.0,
            "y_m": 5.0,
            "stop_line": [[1.0, -3.5], [1.0, 0.0]],
            "phases": [{"state": "blue", "duration_us": 1_000_000}],
        }
    ]
    assert _refused(write_doc, doc).field == "signals[0].phases[0].state"


def test_handover_must_start_at_ego_start(write_doc, minimal_doc):
    doc = minimal_doc()
    doc["handover"] = {
        "t_us": 1_000_000,
        "path": [
            {"t_us": 0, "x_m": 5.0, "y_m": 0.0, "yaw_rad": 0.0},
            {"t_us": 2_000_000, "x_m": 9.0, "y_m": 0.0, "yaw_rad": 0.0},
        ],
    }
    assert _refused(write_doc, doc).field == "handover.path[0]"


def test_a_handover_path_faster_than_any_speed_a_file_may_give_is_refused(write_doc, minimal_doc):
    """A point 1e6 m on within 1 us released the ego at 1e12 m/s, and the run counted."""
    doc = minimal_doc()
    start = doc["ego"]["start"]
    x0, y0 = start["x_m"], start["y_m"]
    doc["handover"] = {
        "t_us": 1_000_000,
        "path": [
            {"t_us": 0, "x_m": x0, "y_m": y0, "yaw_rad": 0.0},
            {"t_us": 999_999, "x_m": x0, "y_m": y0, "yaw_rad": 0.0},
            {"t_us": 1_000_000, "x_m": x0 + 1_000_000.0, "y_m": y0, "yaw_rad": 0.0},
        ],
    }
    err = _refused(write_doc, doc)
    assert (err.field, err.got) == ("handover.path[2]", (x0 + 1_000_000.0, y0))
    assert err.expected == "a pose reached from the one before at most 1000000 m/s (this one: 1e+12 m/s)"
    doc["handover"]["path"][2]["x_m"] = x0 + 1.0  # 1 m in 1 us: 1e6 m/s, the bound itself
    assert load_scenario(write_doc(doc)).handover is not None


def test_bad_yaml_and_unknown_name(write_doc):
    err = _refused(write_doc, "name: [unclosed\n")
    assert err.field == "<document>"
    # where and what on one line, not PyYAML's several lines quoting the source
    assert err.got == "line 2, column 1: expected ',' or ']', but got '<stream end>'"
    assert _refused(write_doc, "- just\n- a list\n").field == "<document>"
    # a UTF-16 byte order mark: PyYAML read UTF-16 and said "expected a mapping, got 'Ā'"
    utf16 = write_doc("x")
    utf16.write_bytes(b"\xff\xfe" + "name: x\n".encode("utf-16-le"))
    with pytest.raises(ScenarioError) as info:
        load_scenario(utf16)
    assert (info.value.field, info.value.expected) == ("<document>", "UTF-8 text")
    assert str(info.value).endswith("got bytes that are not UTF-8 text (0xff at byte 0)")
    with pytest.raises(ScenarioError) as info:
        load_scenario("no_such_scenario")
    assert info.value.field == "name" and "right_turn" in info.value.expected
    with pytest.raises(ScenarioError):
        load_scenario(Path("/nonexistent/x.yaml"))


@pytest.mark.parametrize(("edit", "field", "expected"), [
    # finite, but far past any scene: the renderer's arithmetic overflowed to infinity
    (lambda d: d["actors"][0]["path"][0].update(x_m=1e308), "actors[0].path[0].x_m", "a number within ±1000000"),
    (lambda d: d["roads"][0].update(width_m=2e6), "roads[0].width_m", "a number within ±1000000"),
    (lambda d: d.update(duration_us=10**19), "duration_us", "integer microseconds in [15000000, 86400000000]"),
    # zero-length segments: the ground renderer divided by their length
    (lambda d: d["roads"][0]["points"].insert(1, [-100.0, 0.0]), "roads[0].points[1]", "points at least 0.1 m apart"),
    (lambda d: d.update(crosswalks=[{"id": "cw", "a": [5.0, -4.0], "b": [5.0, -4.0]}]), "crosswalks[0].b",
     "points at least 0.1 m apart"),
    (lambda d: d.update(signals=[{"id": "s", "x_m": 9.0, "y_m": 4.0, "stop_line": [[8.0, 0.0], [8.0, 0.05]],
                                  "phases": [{"state": "red", "duration_us": 1_000_000}]}]),
     "signals[0].stop_line", "points at least 0.1 m apart"),
])
def test_values_the_engine_cannot_draw_are_refused_naming_the_field(write_doc, minimal_doc, edit, field, expected):
    doc = minimal_doc()
    edit(doc)
    err = _refused(write_doc, doc)
    assert (err.field, err.expected) == (field, expected)


def test_a_scene_at_the_bounds_loads_and_draws(write_doc, minimal_doc):
    """The bounds refuse only what cannot be drawn: a scene a kilometre from the origin,
    with a short stop line, runs and renders."""
    doc = minimal_doc()
    for point in doc["ego"]["route"] + [doc["ego"]["start"]] + doc["actors"][0]["path"]:
        point["x_m"] += 999_000.0
    doc["roads"][0]["points"] = [[998_900.0, 0.0], [999_200.0, 0.0]]
    doc["signals"] = [{"id": "s", "x_m": 999_010.0, "y_m": 4.0, "stop_line": [[999_008.0, 0.0], [999_008.0, 0.1]],
                       "phases": [{"state": "red", "duration_us": 1_000_000}]}]
    from simforge_ros.engine import Engine

    engine = Engine(load_scenario(write_doc(doc)), 0, width=64, height=36)
    engine.advance(0.0, 1.0, 5)
    frame = engine.render(engine.cameras[0], engine.t_us)
    assert frame.pixels.shape == (36, 64, 3) and frame.pixels.std() > 0  # the road and sky drawn, not blank


def test_values_an_audit_found_accepted_and_harmful_are_refused(write_doc, minimal_doc):
    """lanes: 10^9 hung `simforge run` and `render` (marks drawn per lane); a max_steer_rad
    of 35 (degrees) turned a left command into a right turn (tan past pi/2)."""
    doc = minimal_doc()
    doc["roads"][0]["lanes"] = 1_000_000_000
    err = _refused(write_doc, doc)
    assert (err.field, err.expected) == ("roads[0].lanes", "an integer in [1, 16]")
    doc = minimal_doc()
    doc["ego"]["vehicle"] = {"max_steer_rad": 35}
    assert _refused(write_doc, doc).field == "ego.vehicle.max_steer_rad"


@pytest.mark.parametrize(("written", "field"), [("0300", "actors[0].path[1].t_us"),
                                                ("1:40:00", "actors[0].path[1].t_us"),
                                                ("0x_", "actors[0].path[1].t_us")])
def test_yaml_1_1_octal_and_base_60_are_no_integers(write_doc, minimal_doc, written, field):
    """PyYAML read t_us: 0300 as 192 and 1:40:00 as 6000, silently."""
    text = write_doc(minimal_doc()).read_text().replace("t_us: 1000000", f"t_us: {written}")
    assert f"t_us: {written}" in text
    err = _refused(write_doc, text)
    assert err.field == field and err.got == written
    assert load_scenario(write_doc(text.replace(f"t_us: {written}", "t_us: 1_000_000"))).actors[0].path[1].t_us \
        == 1_000_000


def test_a_scenario_file_past_16_mib_is_refused_before_it_is_read(write_doc, minimal_doc):
    path = write_doc(minimal_doc())
    with path.open("a") as out:
        out.write("#" * (16 << 20) + "\n")
    with pytest.raises(ScenarioError, match="expected a scenario file of at most 16 MiB"):
        load_scenario(path)


def test_yaml_nested_too_deep_for_the_parser_is_named(write_doc):
    """`simforge render deep.yaml` said "unexpected error: RecursionError", and `simforge
    run` left a run directory behind its bridge's crash."""
    with pytest.raises(ScenarioError) as err:
        load_scenario(write_doc("[" * 5000 + "]" * 5000))
    assert str(err.value).endswith("<document>: expected YAML nested a few hundred levels deep at most, got one "
                                   "nested deeper")


def test_base_60_floats_and_tagged_octal_are_no_numbers_either(write_doc, minimal_doc):
    """0:7.0 read as the float 7.0, and `!!int 020` as 16."""
    text = write_doc(minimal_doc()).read_text()
    err = _refused(write_doc, text.replace("width_m: 7.0", "width_m: 0:7.0"))
    assert (err.field, err.got) == ("roads[0].width_m", "0:7.0")
    with pytest.raises(ScenarioError, match=r"an integer \(decimal digits or 0x hex\), got '020'"):
        load_scenario(write_doc(text.replace("t_us: 1000000", "t_us: !!int 020")))


def test_values_a_second_audit_found_are_named_not_crashed_on(write_doc, minimal_doc):
    """Each was accepted, or crashed outside the loader: an integer of 309 digits or more in
    a number field ("unexpected error: OverflowError", and a run directory left behind); an
    id ending in a newline (a YAML block scalar: '$' let it through, and render named its
    PNGs after it); schema 1.0; a wheelbase of 1e-310 m (the first steer turned the heading
    to infinity in the bridge)."""
    doc = minimal_doc()
    doc["ego"]["start"]["x_m"] = 10**400
    err = _refused(write_doc, doc)
    assert err.field == "ego.start.x_m" and str(err).endswith("got an integer of about 401 digits")
    doc = minimal_doc()
    doc["name"] = "abc\n"
    assert _refused(write_doc, doc).field == "name"
    doc = minimal_doc()
    doc["actors"][0]["id"] = "van\n"
    assert _refused(write_doc, doc).field == "actors[0].id"
    doc = minimal_doc()
    doc["schema"] = 1.0
    assert _refused(write_doc, doc).field == "schema"
    for name in ("wheelbase_m", "length_m", "width_m", "height_m"):
        doc = minimal_doc()
        doc["ego"]["vehicle"] = {name: 1e-310}
        err = _refused(write_doc, doc)
        assert (err.field, err.expected) == (f"ego.vehicle.{name}", "a number >= 0.1")


def test_an_integer_past_python_s_digit_limit_names_the_document(write_doc, minimal_doc):
    """PyYAML's int() of a 5 000-digit number raised ValueError: the bridge's own message,
    with neither the file nor a field."""
    text = write_doc(minimal_doc()).read_text().replace("t_us: 1000000", "t_us: " + "9" * 5000)
    with pytest.raises(ScenarioError) as err:
        load_scenario(write_doc(text))
    assert err.value.field == "<document>"
    assert str(err.value).endswith("expected YAML values Python can build, got Exceeds the limit (4300 digits) "
                                   "for integer string conversion: value has 5000 digits")


def test_a_long_wrong_value_is_shown_by_its_start(write_doc, minimal_doc):
    """The wrong value was echoed whole: `actors:` written as a mapping printed 3.5 KB on
    one line, and a YAML alias chain under `name` 8 MB (2.4 GB of memory one level on)."""
    doc = minimal_doc()
    doc["actors"] = {f"car{i}": {"kind": "vehicle", "path": [{"t_us": 0, "x_m": i, "y_m": 0, "yaw_rad": 0}]}
                     for i in range(40)}
    message = str(_refused(write_doc, doc))
    assert len(message) < 400 and "..." in message
    lines = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(9)]
    bomb = "\n".join(lines) + "\n" + write_doc(minimal_doc()).read_text().replace("name: ", "name: *j\nx: ", 1)
    with pytest.raises(ScenarioError) as err:
        load_scenario(write_doc(bomb))
    assert len(str(err.value)) < 400  # 9**10 items: never built as text
