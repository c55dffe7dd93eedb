"""`simforge salvage` keeps only what the kept record vouches for: a bag whose bytes were
changed, one that holds no step of the run, a steps.jsonl that verify would reject and an
input it cannot read are each refused with one line, and nothing is written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from runs import lockstep, simforge

from simforge_ros import topics
from simforge_ros.record.bag import read_bag
from simforge_ros.record.bag_structure import MAGIC, OP_CHUNK, OP_MESSAGE, OP_MESSAGE_INDEX, U64

pytestmark = pytest.mark.ros

DECISION_NS = 100_000_000  # right_turn's step


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One short right_turn run with two cameras (three MCAP chunks), recorded whole."""
    result = lockstep(tmp_path_factory.mktemp("runs"), steps=5, layout="single")
    assert result.status == "counted" and result.steps == 5
    return Path(result.run_dir)


@pytest.fixture
def killed(finished: Path, tmp_path: Path) -> Path:
    """A copy of the run as a killed recorder leaves it: no manifest."""
    run = tmp_path / "killed"
    shutil.copytree(finished, run)
    (run / "manifest.json").unlink()
    return run


def _refused(run: Path, code: int = 1) -> str:
    out = simforge("salvage", str(run), cwd=run.parent)
    assert out.returncode == code, (out.stdout, out.stderr)
    assert not run.with_name(run.name + "-salvaged").exists()
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    return out.stderr


def _flip_in_message(run: Path, topic: str, step: int, at: int | Callable[[Any], int]) -> None:
    """Flip the low bit of the byte ``at`` (from its end, when negative; or ``at(item)``) of
    the bytes of step ``step``'s message on ``topic``, in the bag file itself."""
    (item,) = [m for m in read_bag(run / "bag") if m.topic == topic and m.t_ns == step * DECISION_NS]
    path = run / "bag" / "bag.mcap"
    blob = bytearray(path.read_bytes())
    # its MCAP record: opcode, length, channel, sequence, log and publish time, then the bytes
    tail = U64.pack(item.t_ns) * 2 + item.raw
    head = bytes([OP_MESSAGE]) + U64.pack(22 + len(item.raw))
    found, hit = [], blob.find(tail)
    while hit >= 0:
        if blob.startswith(head, hit - 15):
            found.append(hit)
        hit = blob.find(tail, hit + 1)
    assert len(found) == 1, f"the message's record found {len(found)} times"
    offset = at(item) if callable(at) else at
    blob[found[0] + 16 + offset % len(item.raw)] ^= 0x01
    path.write_bytes(bytes(blob))


def test_a_flipped_bit_in_a_frame_is_refused_naming_the_step_and_camera(killed):
    """The step chain hashes no pixel: a bag whose image bytes had changed chained to the
    kept digests and was salvaged, and the salvaged run (its own steps.jsonl made from
    the changed bag) then passed verify."""
    _flip_in_message(killed, topics.image_topic("front"), 1, -1000)  # a pixel of step 1's front frame
    said = _refused(killed)
    assert "step 1: field frames.front: the bag gives '" in said and "the bag and the record disagree" in said


def test_a_flipped_bit_in_a_state_message_is_refused_naming_the_field(killed):
    _flip_in_message(killed, topics.STATE, 2, -1)
    said = _refused(killed)
    assert "step 2: field state." in said, said


@pytest.mark.parametrize("size", [0, 8, 100], ids=["empty", "magic-only", "header-only"])
def test_a_bag_holding_no_step_of_a_run_that_kept_some_is_not_salvaged(killed, size):
    """It printed "salvaged 0 steps (5 in the kept steps.jsonl, the same digests)" and
    exited 0, leaving a run of no step that verify passes."""
    os.truncate(killed / "bag" / "bag.mcap", size)
    said = _refused(killed)
    assert "bag.mcap: 0 complete steps in its 0 complete chunks (" in said
    assert "steps.jsonl holds 5: nothing of the run to salvage" in said


def test_a_whole_bag_lacking_a_kept_step_is_refused(killed):
    """Only a bag cut off by a kill may hold fewer steps than steps.jsonl; one that was read
    to its footer and still lacks one (a chunk's opcode changed: it reads as an index) is
    corrupt."""
    path = killed / "bag" / "bag.mcap"
    blob = bytearray(path.read_bytes())
    pos, chunks = len(MAGIC), []
    while pos + 9 <= len(blob):
        if blob[pos] == OP_CHUNK:
            chunks.append(pos)
        pos += 9 + U64.unpack_from(blob, pos + 1)[0]
    assert len(chunks) >= 2
    blob[chunks[-1]] = OP_MESSAGE_INDEX
    path.write_bytes(bytes(blob))
    said = _refused(killed)
    assert "steps.jsonl holds 5: the bag is whole (its footer was written) yet lacks step" in said


def test_a_bag_cut_off_salvages_what_it_holds_and_says_which_steps_are_compared(killed):
    os.truncate(killed / "bag" / "bag.mcap", (killed / "bag" / "bag.mcap").stat().st_size * 3 // 4)
    out = simforge("salvage", str(killed), "--json", cwd=killed.parent)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert 0 < report["steps"] < report["kept_steps"] == 5 and report["agree"] == report["steps"]
    shutil.rmtree(report["out"])
    out = simforge("salvage", str(killed), cwd=killed.parent)
    assert out.returncode == 0, out.stderr
    assert (f"salvaged {report['steps']} steps (5 in the kept steps.jsonl: its first {report['steps']} the same "
            "records, the rest not in the bag's complete chunks)") in out.stdout


def test_a_step_the_bag_holds_only_part_of_is_not_kept(killed, tmp_path):
    """Cut off after each of its chunks but the last (a chunk closes at 1 MiB, mid-step with
    cameras): the salvaged bag ends with its last salvaged step. What the cut-off bag had of
    the step after (its state, an image without its info), never chained, was kept and named
    nowhere; played, an image_transport subscriber dropped the lone image."""
    from simforge_ros.record.salvage import read_mcap_prefix

    blob = (killed / "bag" / "bag.mcap").read_bytes()
    pos, ends = len(MAGIC), []
    while pos + 9 <= len(blob):
        size = 9 + U64.unpack_from(blob, pos + 1)[0]
        if blob[pos] == OP_CHUNK:
            ends.append(pos + size)
        pos += size
    whenever = (topics.STATUS, topics.NODE_PARAMS)
    partial = 0
    for index, end in enumerate(ends[:-1]):
        run = tmp_path / f"cut{index}"
        shutil.copytree(killed, run)
        os.truncate(run / "bag" / "bag.mcap", end)
        held = {m.t_ns for m in read_mcap_prefix(run / "bag" / "bag.mcap").messages() if m.topic not in whenever}
        out = simforge("salvage", str(run), "--json", cwd=tmp_path)
        if out.returncode != 0:  # a first chunk holding no whole step: nothing to salvage, said so
            assert "nothing of the run to salvage" in out.stderr, out.stderr
            continue
        steps = json.loads(out.stdout)["steps"]
        partial += steps * DECISION_NS in held
        salvaged = [m.t_ns for m in read_bag(run.with_name(run.name + "-salvaged") / "bag") if m.topic not in whenever]
        assert max(salvaged) == (steps - 1) * DECISION_NS, (index, steps)
    assert partial, "no cut left part of a step: the test shows nothing"


def test_a_run_that_kept_no_step_is_salvaged_as_one_of_none_and_nothing_is_said_to_agree(killed):
    """Killed before its first step was chained and before its bag's first chunk, a run is
    kept as a run of no step (its refusal readable where the tools look); "the same
    digests" was said of steps that were never compared."""
    (killed / "steps.jsonl").write_bytes(b"")
    os.truncate(killed / "bag" / "bag.mcap", 0)
    out = simforge("salvage", str(killed), cwd=killed.parent)
    assert out.returncode == 0, out.stderr
    assert "salvaged 0 steps (the kept steps.jsonl holds no step to compare) from 0 chunks" in out.stdout


def _edit_line(run: Path, index: int, edit: Callable[[dict[str, Any]], object]) -> None:
    lines = (run / "steps.jsonl").read_text().splitlines()
    record = json.loads(lines[index])
    edit(record)
    lines[index] = json.dumps(record)
    (run / "steps.jsonl").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(("edit", "said"), [
    ("duplicate-last", "line 6: step is 4 where step 5 was expected"),
    ("step-one", "line 2: step is 'one' where step 1 was expected"),
    ("no-state", "line 3: missing key 'state'"),
], ids=["duplicate-last-line", "step-one", "no-state"])
def test_a_kept_steps_jsonl_that_verify_rejects_is_named_not_salvaged(killed, edit, said):
    """Each was taken as the run's record ("salvaged 5 steps (6 in the kept steps.jsonl,
    the same digests)", exit 0) though verify rejects it."""
    steps = killed / "steps.jsonl"
    if edit == "duplicate-last":
        steps.write_text(steps.read_text() + steps.read_text().splitlines()[-1] + "\n")
    elif edit == "step-one":
        _edit_line(killed, 1, lambda r: r.update(step="one"))
    else:
        _edit_line(killed, 2, lambda r: r.pop("state"))
    assert f"simforge salvage: {steps}: {said}" in _refused(killed, code=2)


def _as_a_reader_without_rights(run: Path, unreadable: Path) -> list[str]:
    """The command prefix that runs a program unable to read ``unreadable`` (mode 000): none
    for a user, and for root (which reads any file) setpriv dropping the capabilities that
    let it; the test fails where neither makes the file unreadable (a skip passed CI)."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.fail("running as root without setpriv: no file can be made unreadable")
        drop = "-dac_override,-dac_read_search"
        prefix = [setpriv, f"--bounding-set={drop}", f"--inh-caps={drop}"]
    probe = [*prefix, "ls", str(unreadable)] if unreadable.is_dir() else [*prefix, "cat", str(unreadable)]
    if subprocess.run(probe, capture_output=True, cwd=run.parent).returncode == 0:
        pytest.fail(f"{unreadable} (mode 000) is still readable here: capabilities cannot be dropped")
    return prefix


def test_a_finished_run_is_not_salvaged_and_is_told_what_checks_and_remakes_it(finished, tmp_path):
    """Its bag cut short after the run, verify said it was unreadable and salvage "the run
    was finished, nothing to salvage": neither said what to do."""
    run = tmp_path / "cut"
    shutil.copytree(finished, run)
    (run / "bag" / "bag.mcap").write_bytes((run / "bag" / "bag.mcap").read_bytes()[:5000])
    said = _refused(run, code=2)
    assert said == (f"simforge salvage: {run / 'manifest.json'}: present: the recorder wrote the run's record, "
                    "nothing to salvage (`simforge verify` checks its bag; `simforge rerun` records it again)\n")


def test_a_damaged_manifest_beside_an_unfinished_bag_is_salvaged(killed):
    """Written in one piece, a manifest that does not parse was damaged after the run:
    verify named it "not valid JSON" and salvage "the run was finished, nothing to salvage"."""
    (killed / "manifest.json").write_text('{"format": 1, "run_id": "ki')
    (killed / "bag" / "metadata.yaml").unlink()  # as a killed recorder leaves its bag
    out = simforge("salvage", str(killed), "--json", cwd=killed.parent)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["steps"] == report["kept_steps"] == report["agree"] == 5
    manifest = json.loads((Path(report["out"]) / "manifest.json").read_text())
    assert manifest["salvaged"] is True and "unreadable" in json.dumps(manifest["refusal"])


@pytest.mark.parametrize("name", ["steps.jsonl", "params.yaml", "logs/clock_master.log", "logs", "bag",
                                  "manifest.json"])
def test_an_unreadable_input_is_named_as_unreadable(finished, killed, name):
    """An input salvage copies was reported as its own writing failing ("writing the
    salvaged run failed: ... Permission denied", exit 1), an unreadable bag/ as one holding
    no .mcap file, and an unreadable manifest as a finished run's."""
    path = killed / name
    if name == "manifest.json":
        shutil.copy(finished / name, path)
    elif not path.exists():  # the single layout leaves logs/ empty; processes, a log per node
        path.write_text("clock_master: started\n")
    path.chmod(0)
    try:
        prefix = _as_a_reader_without_rights(killed, path)
        exe = Path(sys.executable).with_name("simforge")
        out = subprocess.run([*prefix, str(exe), "salvage", str(killed)], capture_output=True, text=True,
                             cwd=killed.parent, timeout=600, env=dict(os.environ))
    finally:
        path.chmod(0o755 if path.is_dir() else 0o644)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr == f"simforge salvage: {path}: unreadable: Permission denied\n"
    assert not killed.with_name(killed.name + "-salvaged").exists()


def test_a_flipped_bit_where_steps_jsonl_holds_nothing_is_refused_as_the_result_would_not_verify(killed):
    """A /clock stamp is in no step record: the salvage wrote a run that verify rejected."""
    _flip_in_message(killed, topics.CLOCK, 1, -1)  # the top byte of its nanoseconds
    said = _refused(killed)
    assert "killed-salvaged: the salvaged run does not verify: step 1: field clock: /clock message 1 is " in said


def test_a_message_that_no_longer_decodes_is_named_not_a_traceback(killed):
    """A bit flipped in an image's pixel count ended as "unexpected error: ValueError"."""
    _flip_in_message(killed, topics.image_topic("front"), 2, lambda item: -len(item.msg.data) - 1)
    said = _refused(killed, code=2)
    assert (f"{killed}/bag/bag.mcap: the {topics.image_topic('front')} message logged at {2 * DECISION_NS} ns "
            "does not decode (ValueError: ") in said and said.endswith("corrupt?)\n")


def test_an_empty_out_is_refused_not_read_as_the_current_directory(killed):
    out = simforge("salvage", str(killed), "--out", "", cwd=killed.parent)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == ("simforge salvage: --out: expected the new run directory (an empty name names "
                                  "none; . is the current directory), got ''")
    assert sorted(p.name for p in killed.parent.iterdir()) == ["killed"]  # nothing written beside it


def test_salvage_dot_from_inside_the_run_writes_beside_it(killed):
    """`simforge info` inside a killed run says to type `simforge salvage .`: that was
    "unexpected error: ValueError: PosixPath('.') has an empty name"."""
    out = simforge("salvage", ".", cwd=killed)
    assert out.returncode == 0, out.stderr
    assert (killed.parent / "killed-salvaged" / "manifest.json").is_file()
    assert not list(killed.glob("*-salvaged"))


@pytest.mark.parametrize("byte", [9, 10, 12, 16])
def test_a_flipped_bit_in_a_cut_off_bags_first_record_is_corruption_not_nothing_to_salvage(killed, byte):
    """A bit of the header record's length flipped in a killed run's bag: the length read
    as "the record the writer was in the middle of", and salvage said "0 complete steps ...
    nothing of the run to salvage" (exit 1) of a bag holding them all."""
    path = killed / "bag" / "bag.mcap"
    blob = bytearray(path.read_bytes())
    blob = blob[: len(blob) * 3 // 4]  # its recorder killed: the file ends mid-way
    blob[byte] ^= 0x01
    path.write_bytes(bytes(blob))
    said = _refused(killed, code=2)
    assert said.startswith(f"simforge salvage: {path}: the record at byte ") and said.strip().endswith("(corrupt)")


def test_a_salvaged_run_says_no_wall_time_of_its_own_and_no_setup_made_up(finished, killed):
    """Its manifest's wall start and end were the salvage's own (`info`: "wall <when the
    salvage ran>, 0.1 s"), and its participants, never told to it, {}: `diff` and `rerun`
    then said "set up differently: participants.driver (... vs missing)"."""
    assert simforge("salvage", str(killed), cwd=killed.parent).returncode == 0
    salvaged = killed.with_name("killed-salvaged")
    wall = json.loads((salvaged / "manifest.json").read_text())["wall"]
    assert (wall["start_ns"], wall["end_ns"]) == (None, None) and wall["step_ns"]["n"] == 5
    assert (wall["paced_ns"], wall["held_ns"]) == (None, None)  # not known either: the keys of every run
    info = simforge("info", str(salvaged), cwd=killed.parent)
    assert "wall       when it ran is not known (salvaged); a step: median " in info.stdout, info.stdout
    diff = simforge("diff", str(finished), str(salvaged), cwd=killed.parent)
    assert "set up differently" not in diff.stdout + diff.stderr, diff.stdout
    # its rerun runs the steps it holds: it "did not repeat ... (5 vs 220 steps)" before
    rerun = simforge("rerun", str(salvaged), cwd=killed.parent)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert rerun.stdout.splitlines()[-1] == ("repeated bit for bit up to where its record ends: the 5 steps salvaged "
                                             "from its bag (a rerun runs no further)")
    # --json says the same: what no chain holds is not compared for it (a camera info the
    # killed recorder never wrote was a "side_difference" beside "repeated": true)
    said = simforge("rerun", str(salvaged), "--json", cwd=killed.parent)
    assert said.returncode == 0, said.stdout + said.stderr
    got = json.loads(said.stdout)
    assert (got["repeated"], got["up_to_interrupt"], got["side_difference"]) == (True, 5, None)
    assert got["kept"]["frames_digest"] == json.loads((salvaged / "manifest.json").read_text())["frames_digest"]


def test_an_out_inside_the_kept_run_or_where_nothing_can_be_written_is_a_usage_error(killed, tmp_path):
    """The kept run is never changed: an --out inside it was written there. An --out that
    cannot be made exited 1, the code of "the bag and the record disagree"."""
    before = sorted(p.relative_to(killed) for p in killed.rglob("*"))
    for inside in (killed / "bag" / "inner", killed / "x"):
        out = simforge("salvage", str(killed), "--out", str(inside), cwd=tmp_path)
        assert out.returncode == 2, out.stderr
        assert out.stderr.strip() == ("simforge salvage: --out: expected a new run directory outside the kept run "
                                      f"(it is never changed), got {str(inside)!r}")
    assert sorted(p.relative_to(killed) for p in killed.rglob("*")) == before
    (tmp_path / "a_file").write_text("")
    out = simforge("salvage", str(killed), "--out", str(tmp_path / "a_file" / "s"), cwd=tmp_path)
    assert out.returncode == 2 and "(a file of that name is there, not a directory)" in out.stderr, out.stderr
    # a parent that root may write to, where nothing can be made: exit 1 ("writing failed") before
    out = simforge("salvage", str(killed), "--out", "/proc/simforge-salvage-out", cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.startswith("simforge salvage: --out: expected a new run directory"), \
        out.stderr
    # a loop of links, a link to nothing, a name too long: "unexpected error" or exit 1 before
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for bad in ("loop1", "dangling", "x" * 300):
        out = simforge("salvage", str(killed), "--out", str(tmp_path / bad), cwd=tmp_path)
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
        assert "Traceback" not in out.stderr and "unexpected error" not in out.stderr, out.stderr
    assert not (tmp_path / "nowhere").exists()
    out = simforge("salvage", str(tmp_path / "a_file"), cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip() == f"simforge salvage: {tmp_path / 'a_file'}: not a run directory (not a directory)"


def test_a_run_still_going_on_is_not_salvaged_nor_called_killed(tmp_path):
    """With no manifest yet, a live run was told "killed?" by verify and info, and salvage
    made a refused twin of a run that then counted."""
    import signal
    import time

    out = tmp_path / "runs"
    exe = Path(sys.executable).with_name("simforge")
    proc = subprocess.Popen([str(exe), "run", "right_turn", "--out", str(out), "--layout", "single",
                             "--hold-at-step", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    try:
        wall_deadline = time.monotonic() + 120
        while not any(p.read_text().count("\n") >= 4 for p in out.glob("*/steps.jsonl")):  # held after step 3
            assert time.monotonic() < wall_deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        (run,) = out.iterdir()
        said = simforge("salvage", str(run), cwd=tmp_path)
        assert said.returncode == 2, said.stderr
        assert said.stderr.startswith(f"simforge salvage: {run}: expected a run that has ended, got one still going "
                                      f"on (simforge run {run.name} (pid {proc.pid})")
        assert not run.with_name(run.name + "-salvaged").exists()
        said = simforge("verify", str(run), cwd=tmp_path)
        assert said.returncode == 2 and "not written yet: the run is still going on" in said.stderr, said.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


def test_the_runners_own_refusal_is_what_a_salvaged_run_keeps(killed):
    """A participant killed before step 0 is the runner's refusal (participant_lost at -1):
    the clock master, stopped for it, may end before it says its own outcome, and a salvaged
    run then said incomplete_run while the run's exit status said participant_lost. (Here
    at the step after the five the kept run holds: the clock master's log says counted.)"""
    lost = {"code": "participant_lost", "step": 5, "detail": "recorder (pid 7) was ended by signal SIGKILL"}
    (killed / "logs" / "refusal.json").write_text(json.dumps(lost))
    out = simforge("salvage", str(killed), "--json", cwd=killed.parent)
    assert out.returncode == 0, out.stderr
    manifest = json.loads((Path(json.loads(out.stdout)["out"]) / "manifest.json").read_text())
    assert (manifest["refusal"]["code"], manifest["refusal"]["step"]) == ("participant_lost", 5)


@pytest.mark.parametrize(("said", "kept"), [(1, 5), (-1, 5), (4, 4)])
def test_a_refusal_said_before_the_last_salvaged_step_is_put_after_them(killed, said, kept):
    """A log's refusal step before the last step the bag holds (edited, or another run's)
    would be a manifest refused at a step it goes on to record: salvage floors it at the
    step after the salvaged ones (here five: 0-4), and keeps a step from the last on."""
    lost = {"code": "participant_lost", "step": said, "detail": "driver (pid 7) was ended by signal SIGKILL"}
    (killed / "logs" / "refusal.json").write_text(json.dumps(lost))
    out = simforge("salvage", str(killed), "--json", cwd=killed.parent)
    assert out.returncode == 0, out.stderr
    salvaged = Path(json.loads(out.stdout)["out"])
    manifest = json.loads((salvaged / "manifest.json").read_text())
    assert (manifest["refusal"]["code"], manifest["refusal"]["step"]) == ("participant_lost", kept)
    assert manifest["steps"] == 5
    verified = simforge("verify", str(salvaged), cwd=killed.parent)
    assert verified.returncode == 0, (verified.stdout, verified.stderr)


def test_a_run_without_params_yaml_is_salvaged_under_the_run_id_its_bag_names(finished, killed):
    """A run started by hand or by ros2 launch has no params.yaml: salvage named it after
    its directory, and the salvaged run's own status messages (another run id) failed its
    verify, "the bag is corrupt"."""
    (killed / "params.yaml").unlink()
    out = simforge("salvage", str(killed), "--json", cwd=killed.parent)
    assert out.returncode == 0, out.stderr
    salvaged = Path(json.loads(out.stdout)["out"])
    manifest = json.loads((salvaged / "manifest.json").read_text())
    run_id = json.loads((finished / "manifest.json").read_text())["run_id"]
    assert (manifest["run_id"], manifest["steps"]) == (run_id, 5) and run_id != killed.name
    assert simforge("verify", str(salvaged), cwd=killed.parent).returncode == 0
