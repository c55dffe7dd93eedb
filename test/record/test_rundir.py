from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from simforge_ros.core.errors import SimforgeError
from simforge_ros.record.rundir import RunDirError, load_run

MakeRun = Callable[..., Path]


def set_manifest(run: Path, **changes: object) -> None:
    path = run / "manifest.json"
    manifest = json.loads(path.read_text())
    for key, value in changes.items():
        if value is KeyError:
            del manifest[key]
        else:
            manifest[key] = value
    path.write_text(json.dumps(manifest))


def set_lines(run: Path, edit: Callable[[list[str]], None]) -> None:
    path = run / "steps.jsonl"
    lines = path.read_text().splitlines()
    edit(lines)
    path.write_text("\n".join(lines) + "\n")


def error_of(run: Path) -> str:
    with pytest.raises(RunDirError) as info:
        load_run(run)
    assert isinstance(info.value, SimforgeError)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_loads_a_run(make_run: MakeRun) -> None:
    run = load_run(make_run())
    assert len(run.steps) == 60 and [r["step"] for r in run.steps] == list(range(60))
    assert run.status == "counted" and run.scenario == "straight_road" and run.decision_us == 50_000
    assert run.bag_path == run.path / "bag" and (run.bag_path / "metadata.yaml").is_file()
    assert run.contract["latency_steps"] == 1


def test_refused_run_loads(make_run: MakeRun) -> None:
    run = load_run(make_run(refuse_at=10))
    assert run.status == "refused" and len(run.steps) == 10 and run.manifest["refusal"]["step"] == 10


def test_missing_directory(tmp_path: Path) -> None:
    assert error_of(tmp_path / "runs" / "x") == f"{tmp_path / 'runs' / 'x'}: no such run directory"
    (tmp_path / "file").write_text("")
    assert "not a run directory" in error_of(tmp_path / "file")


def test_missing_manifest(make_run: MakeRun) -> None:
    run = make_run()
    (run / "manifest.json").unlink()
    kept = (run / "steps.jsonl").read_text().count("\n")
    assert error_of(run) == (f"{run / 'manifest.json'}: missing: the recorder did not finish this run "
                             f"(killed?); steps.jsonl keeps the {kept} steps it chained, logs/ what each node said; "
                             f"`simforge salvage {run}` makes a usable run of its bag")
    (run / "steps.jsonl").unlink()  # not a run the recorder began: nothing more to say
    assert error_of(run) == f"{run / 'manifest.json'}: missing"
    (run / "params.yaml").write_text("clock_master:\n  ros__parameters: {record: false, seed: 0}\n")
    assert error_of(run) == (f"{run / 'manifest.json'}: missing: the run was made with clock_master.record: "
                             "false, so nothing of it was recorded (its params.yaml says so)")
    for other in ("clock_master:\n  ros__parameters: {record: true}\n", "[not, a, mapping]", "{: bad yaml"):
        (run / "params.yaml").write_text(other)
        assert error_of(run) == f"{run / 'manifest.json'}: missing"


def test_a_manifest_link_to_nothing_is_not_called_missing(make_run: MakeRun) -> None:
    """A link in a loop read as "missing: the recorder did not finish this run (killed?)",
    and salvage then said "unreadable: Too many levels of symbolic links"."""
    run = make_run()
    (run / "manifest.json").unlink()
    (run / "manifest.json").symlink_to("loop")
    (run / "loop").symlink_to("manifest.json")
    assert error_of(run) == (f"{run / 'manifest.json'}: a symbolic link that leads to no file (a loop, or its "
                             "target gone)")


def test_a_directory_of_runs_is_told_to_name_one(make_run: MakeRun, tmp_path: Path) -> None:
    run = make_run()
    parent = run.parent
    assert error_of(parent) == (f"{parent / 'manifest.json'}: missing: {parent} holds run directories, it is not "
                                f"one; name one of them, such as {run}")
    second = parent / "b-second"
    second.mkdir()
    (second / "manifest.json").write_text("{}")
    (parent / "zz-no-manifest").mkdir()
    assert error_of(parent).endswith(f"name one of them (2 of them), such as {sorted([run, second])[0]}")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert error_of(empty) == f"{empty / 'manifest.json'}: missing"


def test_truncated_manifest(make_run: MakeRun) -> None:
    run = make_run()
    text = (run / "manifest.json").read_text()
    (run / "manifest.json").write_text(text[:100])
    assert error_of(run).startswith(f"{run / 'manifest.json'}: not valid JSON (truncated?)")


def test_manifest_not_an_object(make_run: MakeRun) -> None:
    run = make_run()
    (run / "manifest.json").write_text("[1, 2]")
    assert error_of(run) == f"{run / 'manifest.json'}: not a JSON object (got list)"


def test_manifest_problems_are_reported_together(make_run: MakeRun) -> None:
    run = make_run()
    set_manifest(run, contract=KeyError, steps="60", chain_digest="XYZ", bag={"path": "/abs", "storage": "zip"})
    message = error_of(run)
    assert message.startswith(f"{run / 'manifest.json'}: missing key 'contract'")
    for part in ("'steps' must be an int >= 0, got '60'", "'chain_digest' must be 64 lowercase hex digits",
                 "'bag.path' must be a relative path", "'bag.storage' must be one of"):
        assert part in message


def test_a_section_the_tools_read_must_be_an_object(make_run: MakeRun) -> None:
    """A hand-edited manifest whose sections are not objects is named, not a tool's
    AttributeError ("unexpected error") when it reads them."""
    run = make_run()
    set_manifest(run, nodes="x", wall=[1], faults={"a": 1})
    message = error_of(run)
    for part in ("'nodes' must be an object, got 'x'", "'wall' must be an object, got [1]",
                 "'faults' must be a list of fault specs, got {'a': 1}"):
        assert part in message
    set_manifest(run, nodes=None, wall=None, faults=None)  # absent or null: a usable run
    assert load_run(run).manifest["nodes"] is None


@pytest.mark.parametrize(("changes", "said"), [
    ({"run_id": "../../evil"}, "'run_id' must be a run id (one file name of at most 200 bytes: no '/', not '.' "
                               "or '..'), got '../../evil'"),
    ({"run_id": "x" * 201}, "'run_id' must be a run id"),  # its rerun's directory: "File name too long"
    ({"run_id": "/tmp/abs"}, "'run_id' must be a run id"),
    ({"run_id": ".."}, "'run_id' must be a run id"),
    ({"run_id": "a\nb"}, "'run_id' must be a run id"),
    ({"run_id": 7}, "'run_id' must be a run id"),
    ({"scenario": 7}, "'scenario' must be a scenario name or file, got 7"),
    ({"scenario": ""}, "'scenario' must be a scenario name or file, got ''"),
    ({"seed": "zero"}, "'seed' must be an int >= 0, got 'zero'"),
    ({"seed": -1}, "'seed' must be an int >= 0, got -1"),
    ({"faults": [1]}, "'faults' must be a list of fault specs, got [1]"),
])
def test_setup_fields_a_tool_acts_on_are_checked(make_run: MakeRun, changes: dict[str, object], said: str) -> None:
    """Tools name new directories after the run id (a rerun's, a salvaged run's): a hand-
    edited "../../x" made `simforge rerun` write outside the kept run's directory."""
    run = make_run()
    set_manifest(run, **changes)
    assert said in error_of(run)


def test_a_directory_that_cannot_be_read_is_named(make_run: MakeRun, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run directory without search permission: Path.exists raises PermissionError
    there, which every tool reported as "unexpected error"."""
    run = make_run()
    real = Path.exists

    def denied(self: Path, *args: object, **kwargs: object) -> bool:
        if self.parent == run:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "exists", denied)
    assert error_of(run) == f"{run / 'manifest.json'}: unreadable: Permission denied"


def test_a_killed_recorders_sqlite3_run_is_not_sent_to_salvage(make_run: MakeRun) -> None:
    """salvage reads MCAP chunks only, and a sqlite3 bag is committed when it is closed:
    the message once sent the user to a salvage that refused it."""
    run = make_run(storage="sqlite3")
    (run / "manifest.json").unlink()
    said = error_of(run)
    assert "simforge salvage" not in said
    assert said.endswith("its sqlite3 bag is committed only when the recorder closes it, so nothing of it can be "
                         "salvaged (recorder.storage: mcap, the default, can be)")


def test_a_full_disks_sqlite3_bag_is_not_sent_to_salvage(make_run: MakeRun) -> None:
    for storage, said in (("sqlite3", "its sqlite3 bag is committed only when the recorder closes it"),
                          ("mcap", "`simforge salvage ")):
        run = make_run(storage, storage=storage)
        set_manifest(run, record_failure="No space left on device")
        (run / "bag" / "metadata.yaml").unlink()
        with pytest.raises(RunDirError) as info:
            _ = load_run(run).bag_path
        assert "not completed: No space left on device; " + said in str(info.value), str(info.value)


def test_other_format_is_refused(make_run: MakeRun) -> None:
    run = make_run()
    set_manifest(run, format=2)
    assert error_of(run) == f"{run / 'manifest.json'}: format is 2; this tool reads format 1"


def test_refusal_must_match_status(make_run: MakeRun) -> None:
    run = make_run()
    set_manifest(run, status="refused")
    assert "status is 'refused' but 'refusal' is None" in error_of(run)
    set_manifest(run, status="done")
    assert "'status' must be one of ['counted', 'refused']" in error_of(run)


@pytest.mark.parametrize(("refusal", "said"), [
    ({"code": "nope"}, "'refusal.code' must be one of time_drift, rate_not_multiple, missing_frame, "),
    ({"code": "nope", "step": 60}, "got 'nope'"),
    ({"code": "time_drift"}, "'refusal.step' must be an int >= -1, got None"),
    ({"code": "time_drift", "step": True}, "'refusal.step' must be an int >= -1, got True"),
    ({"code": "time_drift", "step": 12}, "'refusal.step' is 12, but 60 steps were recorded: a run is refused at "
                                         "its last recorded step or later"),
    ({"code": "time_drift", "step": -1}, "'refusal.step' is -1, but 60 steps were recorded"),
    ({"code": "time_drift", "step": 58}, "'refusal.step' is 58, but 60 steps were recorded"),
])
def test_a_refusal_names_a_known_code_at_a_step_after_the_recorded_ones(make_run: MakeRun, refusal: dict,
                                                                       said: str) -> None:
    """A counted run relabelled "refused: time_drift at step 12" (or a code no table has)
    once verified, and `info` printed "refused: nope at step None"."""
    run = make_run()
    set_manifest(run, status="refused", refusal=refusal)
    assert said in error_of(run)


# 59: a run kept before 2026-12-05, stopped while its clock master waited for the recorder
# or whose recorder died during Finish; 75: a salvaged run records fewer steps than its
# clock master ran
@pytest.mark.parametrize("step", [59, 60, 75])
def test_a_refusal_at_or_after_the_last_recorded_step_loads(make_run: MakeRun, step: int) -> None:
    run = make_run()
    set_manifest(run, status="refused", refusal={"code": "participant_lost", "step": step, "detail": "x"})
    assert load_run(run).manifest["refusal"]["step"] == step


def test_contract_needs_decision_us(make_run: MakeRun) -> None:
    run = make_run()
    set_manifest(run, contract={"tick_us": 10_000})
    assert "'contract.decision_us' must be an int > 0, got None" in error_of(run)


def test_missing_steps(make_run: MakeRun) -> None:
    run = make_run()
    (run / "steps.jsonl").unlink()
    assert error_of(run) == f"{run / 'steps.jsonl'}: missing"


def test_truncated_last_line(make_run: MakeRun) -> None:
    run = make_run()
    text = (run / "steps.jsonl").read_text()
    cut = text.index("\n", len(text) // 2) + 40  # 40 characters into some line
    lineno = text[:cut].count("\n") + 1
    (run / "steps.jsonl").write_text(text[:cut])
    assert error_of(run) == f"{run / 'steps.jsonl'}: line {lineno}: not valid JSON (truncated?)"


def test_a_record_the_full_disk_cut_off_after_the_manifests_count_is_not_read(make_run: MakeRun) -> None:
    """A disk filling mid-run: the manifest counts 14 steps and names the failed write
    (record_failure), and steps.jsonl ends in half of step 14's line (its 4 KiB blocks
    written, the rest not). Every reader but salvage refused the run whole ("line 15: not
    valid JSON (truncated?)"); the 14 are the run. Without a failed write said, such a line
    is still named: junk appended to a counted run is no cut-off write."""
    run = make_run(steps=14)
    whole = (run / "steps.jsonl").read_bytes()
    last = (make_run("longer", steps=15) / "steps.jsonl").read_bytes().splitlines(keepends=True)[14]
    (run / "steps.jsonl").write_bytes(whole + last[: len(last) // 2])
    assert error_of(run) == f"{run / 'steps.jsonl'}: line 15: not valid JSON (truncated?)"
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["record_failure"] = "writing the run's record failed after 14 steps (OSError: [Errno 28] No space left)"
    (run / "manifest.json").write_text(json.dumps(manifest))
    loaded = load_run(run)
    assert len(loaded.steps) == 14 and [r["step"] for r in loaded.steps] == list(range(14))
    # a whole last line without its newline is still a record
    (run / "steps.jsonl").write_bytes(whole[:-1])
    assert len(load_run(run).steps) == 14


def test_truncated_at_a_line_boundary(make_run: MakeRun) -> None:
    run = make_run()
    set_lines(run, lambda lines: lines.__delitem__(slice(45, None)))
    assert error_of(run) == f"{run / 'steps.jsonl'}: 45 step records, but manifest.json says steps=60 (truncated?)"


def test_corrupt_line_in_the_middle(make_run: MakeRun) -> None:
    run = make_run()
    set_lines(run, lambda lines: lines.__setitem__(11, lines[11][:-5] + "xx"))
    assert error_of(run).startswith(f"{run / 'steps.jsonl'}: line 12: not valid JSON (")


def test_blank_line(make_run: MakeRun) -> None:
    run = make_run()
    set_lines(run, lambda lines: lines.insert(3, ""))
    assert error_of(run) == f"{run / 'steps.jsonl'}: line 4: empty line"


def test_step_out_of_order(make_run: MakeRun) -> None:
    run = make_run()
    set_lines(run, lambda lines: lines.__setitem__(5, lines[6]))
    assert error_of(run) == f"{run / 'steps.jsonl'}: line 6: step is 6 where step 5 was expected"


def test_record_missing_a_key(make_run: MakeRun) -> None:
    run = make_run()

    def drop_state(lines: list[str]) -> None:
        record = json.loads(lines[2])
        del record["state"]
        lines[2] = json.dumps(record)

    set_lines(run, drop_state)
    assert error_of(run) == f"{run / 'steps.jsonl'}: line 3: missing key 'state'"


def test_record_not_an_object(make_run: MakeRun) -> None:
    run = make_run()
    set_lines(run, lambda lines: lines.__setitem__(0, "42"))
    assert error_of(run) == f"{run / 'steps.jsonl'}: line 1: not a JSON object (got int)"


def test_not_utf8(make_run: MakeRun) -> None:
    run = make_run()
    (run / "steps.jsonl").write_bytes(b'{"step": 0\xff}\n')
    assert error_of(run).startswith(f"{run / 'steps.jsonl'}: line 1: not UTF-8 text")


def test_last_line_without_newline_is_accepted(make_run: MakeRun) -> None:
    run = make_run()
    text = (run / "steps.jsonl").read_text()
    (run / "steps.jsonl").write_text(text.rstrip("\n"))
    assert len(load_run(run).steps) == 60


def test_a_run_of_no_step_has_no_contract_or_world_digest_to_give(make_run: MakeRun) -> None:
    """A run refused at step 0 (or before) has no last record to take them from: it loads,
    and its step period is the clock master's parameter; a run with steps still needs both."""
    run = make_run(refuse_at=0)
    set_manifest(run, contract=None, world_digest=None)
    loaded = load_run(run)
    assert (len(loaded.steps), loaded.contract, loaded.decision_us) == (0, None, 50_000)
    set_manifest(run, nodes={})
    assert load_run(run).decision_us == 100_000  # the clock master's default
    with_steps = make_run("with_steps")
    set_manifest(with_steps, contract=None, world_digest=None)
    assert error_of(with_steps).endswith("'world_digest' must be a string, got None; "
                                         "'contract' must be an object, got None")


@pytest.mark.parametrize(("locked", "command", "said"), [
    (".", "verify", "manifest.json: unreadable: Permission denied"),
    (".", "info", "manifest.json: unreadable: Permission denied"),
    ("bag", "verify", "bag: unreadable: Permission denied"),
])
def test_a_directory_without_permission_is_named_by_the_tools(make_run: MakeRun, locked: str, command: str,
                                                               said: str) -> None:
    """The same, for real: a chmod 000 directory (as root, read with the capabilities that
    override file permissions dropped, as a user's process would)."""
    import os
    import subprocess
    import sys

    run = make_run()
    target = run / locked
    caps = "-dac_override,-dac_read_search"
    as_user = [] if os.geteuid() != 0 else ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}"]
    target.chmod(0)
    try:
        out = subprocess.run([*as_user, str(Path(sys.executable).with_name("simforge")), command, str(run)],
                             capture_output=True, text=True, timeout=120)
    finally:
        target.chmod(0o755)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(f"simforge {command}: ") and said in out.stderr, out.stderr
    assert "unexpected error" not in out.stderr and "Traceback" not in out.stderr


def test_a_key_given_twice_in_the_manifest_is_named(make_run: MakeRun) -> None:
    """json keeps the last of a repeated key without a word: a hand-edited manifest that
    says "status" twice would be read as whichever came last."""
    run = make_run()
    path = run / "manifest.json"
    text = path.read_text()
    path.write_text(text.replace('"status": "counted"', '"status": "refused", "status": "counted"', 1))
    assert error_of(run) == (f"{path}: the key 'status' twice in one object (edited? the last would silently win)")


@pytest.mark.parametrize("where", ["manifest.json", "steps.jsonl"])
def test_json_nested_past_the_parsers_depth_is_named_not_a_recursion_error(make_run: MakeRun, where: str) -> None:
    """100 000 brackets ended every tool in "unexpected error: RecursionError"."""
    run = make_run()
    deep = "[" * 100_000
    if where == "manifest.json":
        (run / where).write_text(deep)
        assert error_of(run) == (f"{run / where}: not a manifest: nested deeper than Python's JSON parser goes "
                                 "(corrupt?)")
    else:
        set_lines(run, lambda lines: lines.__setitem__(3, deep))
        assert error_of(run) == (f"{run / where}: line 4: not a step record: nested deeper than Python's JSON parser "
                                 "goes (corrupt?)")
