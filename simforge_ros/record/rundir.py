"""Load and validate a recorded run directory: manifest.json and steps.jsonl.

Every tool that reads a run (verify, diff, reports) goes through here, so a missing,
corrupt or truncated file is reported once, the same way, as one line naming the file and
the problem, instead of a traceback from deep inside a tool. The bag is not opened here:
``record.bag.read_bag`` names its own problems (BagError).
"""

from __future__ import annotations

import json
import os
import re
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, cast, overload

from simforge_ros.core.errors import REFUSALS, SimforgeError
from simforge_ros.core.timing_contract import DEFAULT_DECISION_US

FORMAT = 1
"""The run directory format these tools read."""
MANIFEST = "manifest.json"
STEPS = "steps.jsonl"
PARAMS = "params.yaml"  # what `simforge run` started the nodes with (rerun, salvage)
DOMAIN = "logs/ros_domain_id"  # the ROS domain the run's nodes are in, while it runs (simforge pause --run)
RUNNER_REFUSAL = "logs/refusal.json"  # `simforge run`'s refusal of a run no manifest was written for (salvage)
RECORD_FAILED = "writing the run's record failed"
"""How the recorder's failure to write the record (a full disk, its directory removed)
begins, in its log, its failure topic and its Finish answer's detail."""
STOPPED_FIRST = "the recorder stopped before the clock master finished the run"
"""How an incomplete_run the recorder keeps on its own begins: it ended before the run's
final status came, and knows no more of how the run ended (runner._result)."""
STATUSES = ("counted", "refused")
STORAGES = ("mcap", "sqlite3")
STEP_KEYS = (
    "step", "t_us", "digest", "frames_digest", "frames", "timing", "action", "applied", "state", "wall",
)
"""The keys of every step record (exactly what record.assembler.StepAssembler emits)."""

_HEX64 = re.compile(r"[0-9a-f]{64}")  # whole (fullmatch): "$" takes a trailing newline


class RunDirError(SimforgeError):
    """A run directory file that is missing, corrupt, truncated or inconsistent.

    ``str()`` is one line: the file, then the problem.
    """

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(path, problem)
        self.path = path
        self.problem = problem

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


class StepRecords(Sequence[Mapping[str, Any]]):
    """The step records of a validated steps.jsonl, read from the file when asked for.

    A run of 20 000 steps holds about 10 KB of Python objects a step once parsed, so the
    tools that walk a run (verify, diff) would grow with its length; this keeps the byte
    offset of each line (8 bytes a step) and parses a record each time it is read. Each
    read checks the record again, so a file changed after it was loaded is named, not
    misread.
    """

    def __init__(self, path: Path, offsets: array[int]) -> None:
        self.path = path
        self._offsets = offsets  # start of each line, then the end of the last

    def __len__(self) -> int:
        return len(self._offsets) - 1

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"step record {index} of {n}")
        index %= n
        with self._open() as file:
            file.seek(self._offsets[index])
            line = file.read(self._offsets[index + 1] - self._offsets[index])
        return _checked_record(self.path, line, index, last=False)

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        with self._open() as file:
            for index in range(len(self)):
                line = file.readline()
                if len(line) != self._offsets[index + 1] - self._offsets[index]:
                    raise RunDirError(self.path, f"line {index + 1}: changed since the run was loaded")
                yield _checked_record(self.path, line, index, last=False)

    def _open(self) -> Any:
        try:
            return self.path.open("rb")
        except OSError as err:
            raise RunDirError(self.path, f"unreadable: {err.strerror or err}") from err


@dataclass(frozen=True)
class RunDir:
    """A loaded run directory; ``steps`` are the step records of steps.jsonl, in order,
    parsed from the file as they are read (see StepRecords)."""

    path: Path
    manifest: Mapping[str, Any]
    steps: Sequence[Mapping[str, Any]]

    @property
    def bag_path(self) -> Path:
        """The rosbag2 directory named by the manifest (relative to the run directory).

        Raises:
            RunDirError: the recorder could not finish writing it (a full disk: the
                manifest's ``record_failure``); salvage reads what it holds.
        """
        path = self.path / str(self.manifest["bag"]["path"])
        failure = self.manifest.get("record_failure")
        if failure and not (path / "metadata.yaml").is_file():
            raise RunDirError(path, f"not completed: {failure}; {_salvage_remedy(self.path, 'what it holds')}")
        return path

    @property
    def status(self) -> str:
        return str(self.manifest["status"])

    @property
    def scenario(self) -> object:
        return self.manifest["scenario"]

    @property
    def contract(self) -> Mapping[str, Any] | None:
        """The timing contract its steps ran under; None for a run that recorded no step."""
        return cast("Mapping[str, Any] | None", self.manifest["contract"])

    @property
    def decision_us(self) -> int:
        """The step period; for a run that recorded no step (refused at step 0 or before),
        the clock master's parameter, or its default: nothing of such a run depends on it
        but the step a message's time falls in."""
        contract = self.manifest["contract"]
        if contract is not None:
            return int(contract["decision_us"])
        asked = ((self.manifest.get("nodes") or {}).get("clock_master") or {}).get("params", {}).get("decision_us")
        return asked if _is_int(asked, 1) else DEFAULT_DECISION_US


def load_run(path: Path) -> RunDir:
    """Read and validate a run directory (manifest.json and steps.jsonl, not the bag).

    Raises:
        RunDirError: the directory or a file is missing, unreadable, not valid JSON,
            malformed, or steps.jsonl does not hold the manifest's ``steps`` records.
    """
    path = Path(path)
    try:
        return _load_run(path)
    except OSError as err:  # a directory that cannot be searched (a file's own errors are named where read)
        where = Path(err.filename) if err.filename else path
        raise RunDirError(where, f"unreadable: {err.strerror or err}") from err


def _salvage_remedy(run: Path, what: str) -> str:
    """What a run whose recorder did not finish can still give: rosbags writes a sqlite3
    bag in one transaction, committed when it is closed, so a killed recorder's holds no
    message, and salvage reads MCAP bags (their complete chunks) only."""
    if any(run.glob("bag/*.db3")):
        return ("its sqlite3 bag is committed only when the recorder closes it, so nothing of it can be salvaged "
                "(recorder.storage: mcap, the default, can be)")
    return f"`simforge salvage {run}` makes a usable run of {what}"


def still_running(path: Path) -> str | None:
    """Who is running the run in ``path`` right now ("simforge run RUN_ID (pid N)"), from
    the domain it holds (its logs/ros_domain_id, isolation.domain_holder); None when no one
    is. A run going on has no manifest yet, and was told "killed?" and salvaged."""
    from simforge_ros.isolation import domain_holder

    try:
        if not (path / DOMAIN).is_file():  # a FIFO there would be waited on
            return None
        with (path / DOMAIN).open("rb") as handle:
            domain_id = int(handle.read(64).strip())
        holder = domain_holder(domain_id)
    except (OSError, ValueError):
        return None
    return holder if holds_run(holder, path) else None


def unusable_run_dir(path: Path) -> str | None:
    """Why a new run cannot be kept in ``path``, or None: it holds a run already (a bag or
    a manifest: never overwritten), it is no directory, or it cannot be looked into
    (another user's /tmp/simforge-run: Path.exists raised PermissionError)."""
    try:
        if (path / "bag").exists() or (path / MANIFEST).exists():
            return "it holds a run"
        if path.exists() and not path.is_dir():
            return "it is not a directory"
    except OSError as err:
        return f"it cannot be looked into ({err.strerror or err})"
    return None


def holds_run(holder: str | None, path: Path) -> bool:
    """Whether a domain's holder (isolation.domain_holder's words) is the `simforge run` of
    the run in ``path``."""
    return holder is not None and holder.startswith(f"simforge run {path.resolve().name} ")


def _load_run(path: Path) -> RunDir:
    if not path.exists():
        raise RunDirError(path, "no such run directory")
    if not path.is_dir():
        raise RunDirError(path, "not a run directory (not a directory)")
    if os.path.lexists(path / MANIFEST) and not (path / MANIFEST).exists():  # pathlib reads a loop as "missing"
        raise RunDirError(path / MANIFEST, "a symbolic link that leads to no file (a loop, or its target gone)")
    if not (path / MANIFEST).exists() and (live := still_running(path)) is not None:
        raise RunDirError(path / MANIFEST, f"not written yet: the run is still going on ({live}); its tools "
                                           "read it once it has ended")
    if not (path / MANIFEST).exists() and (path / STEPS).is_file():
        # the recorder began this run and never wrote its manifest: it was killed
        kept = (path / STEPS).read_bytes().count(b"\n")
        raise RunDirError(path / MANIFEST, f"missing: the recorder did not finish this run (killed?); "
                                           f"{STEPS} keeps the {kept} steps it chained, logs/ what each node "
                                           f"said; {_salvage_remedy(path, 'its bag')}")
    if not (path / MANIFEST).exists() and _made_without_record(path):
        raise RunDirError(path / MANIFEST, "missing: the run was made with clock_master.record: false, so "
                                           "nothing of it was recorded (its params.yaml says so)")
    if not (path / MANIFEST).exists() and not (path / STEPS).exists():
        inside = _runs_inside(path)
        if inside:
            more = f" ({len(inside)} of them)" if len(inside) > 1 else ""
            raise RunDirError(path / MANIFEST, f"missing: {path} holds run directories, it is not one; "
                                               f"name one of them{more}, such as {inside[0]}")
    manifest = read_manifest(path / MANIFEST)
    # a last line cut off is no record only where the recorder said its writes failed
    steps = step_records_of(path / STEPS, cut_off_ok=bool(manifest.get("record_failure")))
    if len(steps) != manifest["steps"]:
        hint = " (truncated?)" if len(steps) < manifest["steps"] else ""
        raise RunDirError(
            path / STEPS, f"{len(steps)} step records, but {MANIFEST} says steps={manifest['steps']}{hint}"
        )
    return RunDir(path, manifest, steps)


def layout_of(run: RunDir) -> str:
    """``single`` when every node the manifest names ran in one process, else ``processes``."""
    pids = {(node.get("process") or {}).get("pid") for node in (run.manifest.get("nodes") or {}).values()
            if isinstance(node, dict)}
    return "single" if len(pids) == 1 and None not in pids else "processes"


def _runs_inside(path: Path) -> list[Path]:
    """The run directories right inside ``path`` (where `simforge run --out` puts them),
    sorted by name: a user who names the directory of runs is told to name one."""
    try:
        with os.scandir(path) as entries:
            found = [Path(e.path) for e in entries
                     if e.is_dir() and (Path(e.path) / MANIFEST).is_file()]
    except OSError:
        return []
    return sorted(found)


def _made_without_record(path: Path) -> bool:
    """Whether the run directory's params.yaml (what `simforge run` started its nodes with)
    turned the recorder off."""
    import yaml

    try:
        params = yaml.safe_load((path / PARAMS).read_text())
        return params["clock_master"]["ros__parameters"]["record"] is False
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError, KeyError, TypeError):
        return False


def _read_text(path: Path) -> str:
    _check_file(path)
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise RunDirError(path, f"not UTF-8 text (byte {err.start}; corrupt?)") from err
    except OSError as err:
        raise RunDirError(path, f"unreadable: {err.strerror or err}") from err


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's dict, refusing a key given twice (json keeps the last, silently)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def read_manifest(path: Path) -> dict[str, Any]:
    """Parse and validate manifest.json; every problem is named in one message.

    Raises:
        RunDirError: missing, unreadable, not a JSON object, or malformed fields.
    """
    text = _read_text(path)
    if not text.strip():
        raise RunDirError(path, "empty file (truncated?)")
    try:
        manifest = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as err:
        where = f"{err.msg} at line {err.lineno} column {err.colno}"
        raise RunDirError(path, f"not valid JSON (truncated?): {where}") from err
    except _DuplicateKey as err:
        said = f"the key {err.key!r} twice in one object (edited? the last would silently win)"
        raise RunDirError(path, said) from err
    except RecursionError as err:  # ~1 000 nested brackets: "unexpected error: RecursionError"
        raise RunDirError(path, "not a manifest: nested deeper than Python's JSON parser goes (corrupt?)") from err
    if not isinstance(manifest, dict):
        raise RunDirError(path, f"not a JSON object (got {type(manifest).__name__})")
    problems = manifest_problems(manifest)
    if problems:
        raise RunDirError(path, "; ".join(problems))
    return manifest


def _is_int(value: object, minimum: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


RUN_ID_MAX = 200
"""Characters of a run id at most: a rerun's id adds 13 (``-rerun-XXXXXX``) and a salvaged
run's directory 9 (``-salvaged``) to a file name, which may hold 255 bytes (a 300-character
id passed every check, and its rerun ended in "File name too long")."""


def is_run_id(value: object) -> bool:
    """A run id any tool takes: one printable file name, with room for a rerun's and a
    salvage's suffix."""
    return (isinstance(value, str) and value not in ("", ".", "..") and "/" not in value and "\\" not in value
            and value.isprintable() and len(value.encode()) <= RUN_ID_MAX)


def _is_hex64(value: object) -> bool:
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


OPTIONAL_SECTIONS = ("nodes", "participants", "wall", "contacts", "digests", "versions", "camera_info",
                     "image_headers", "odometry", "transforms", "ground_truth")
"""Manifest keys whose value, when there, is an object (``manifest_problems``)."""


def manifest_problems(manifest: Mapping[str, Any]) -> list[str]:
    """What is wrong with a parsed manifest (empty when it is usable)."""
    required = ("format", "run_id", "scenario", "status", "refusal", "expected_steps", "steps",
                "chain_digest", "frames_digest", "world_digest", "contract", "bag")
    missing = [k for k in required if k not in manifest]
    problems = [f"missing key {k!r}" for k in missing]
    if "format" not in missing and (not _is_int(manifest["format"]) or manifest["format"] != FORMAT):
        problems.append(f"format is {manifest['format']!r}; this tool reads format {FORMAT}")
        return problems  # another format: its other fields mean other things
    checks: list[tuple[str, bool, str]] = [
        # tools name new directories after it (rerun, salvage): one name, never a path
        ("run_id", is_run_id(manifest.get("run_id")),
         f"a run id (one file name of at most {RUN_ID_MAX} bytes: no '/', not '.' or '..')"),
        # null: no node's parameters were recorded (a salvaged run of no step)
        ("scenario", (isinstance(manifest.get("scenario"), str) and bool(manifest.get("scenario"))) or (
            manifest.get("scenario") is None and manifest.get("steps") == 0), "a scenario name or file"),
        ("status", manifest.get("status") in STATUSES, f"one of {list(STATUSES)}"),
        ("expected_steps", _is_int(manifest.get("expected_steps")), "an int >= 0"),
        ("steps", _is_int(manifest.get("steps")), "an int >= 0"),
        ("chain_digest", _is_hex64(manifest.get("chain_digest")), "64 lowercase hex digits"),
        ("frames_digest", manifest.get("frames_digest") is None or _is_hex64(manifest.get("frames_digest")),
         "null or 64 lowercase hex digits"),
        # a run that recorded no step (refused at step 0 or before) has no last record to
        # take a world digest and a contract from
        ("world_digest", isinstance(manifest.get("world_digest"), str) or (
            manifest.get("world_digest") is None and manifest.get("steps") == 0), "a string"),
    ]
    problems += [
        f"{k!r} must be {want}, got {manifest[k]!r}" for k, ok, want in checks if k not in missing and not ok
    ]
    # sections a recorder always writes and the tools read, but a run is usable without
    problems += [f"{k!r} must be an object, got {manifest[k]!r}" for k in OPTIONAL_SECTIONS
                 if manifest.get(k) is not None and not isinstance(manifest[k], dict)]
    if manifest.get("faults") is not None and not (
            isinstance(manifest["faults"], list) and all(isinstance(f, str) for f in manifest["faults"])):
        problems.append(f"'faults' must be a list of fault specs, got {manifest['faults']!r}")
    if manifest.get("seed") is not None and not _is_int(manifest["seed"]):
        problems.append(f"'seed' must be an int >= 0, got {manifest['seed']!r}")
    if "refusal" not in missing and "status" not in missing:
        refusal = manifest["refusal"]
        coded = isinstance(refusal, dict) and isinstance(refusal.get("code"), str)
        if manifest["status"] == "refused" and not coded:
            problems.append(f"status is 'refused' but 'refusal' is {refusal!r} (needs a 'code')")
        if manifest["status"] == "counted" and refusal is not None:
            problems.append(f"status is 'counted' but 'refusal' is {refusal!r}")
        if manifest["status"] == "refused" and coded:
            problems += _refusal_problems(refusal, manifest.get("steps"))
    if "contract" not in missing and not (manifest["contract"] is None and manifest.get("steps") == 0):
        contract = manifest["contract"]
        if not isinstance(contract, dict):
            problems.append(f"'contract' must be an object, got {contract!r}")
        elif not _is_int(contract.get("decision_us"), 1):
            problems.append(f"'contract.decision_us' must be an int > 0, got {contract.get('decision_us')!r}")
    if "bag" not in missing:
        problems += _bag_problems(manifest["bag"])
    return problems


def _refusal_problems(refusal: Mapping[str, Any], steps: object) -> list[str]:
    """A refusal's code is one of the table's, and its step is the last recorded one or
    later (-1: before step 0, none recorded). It is the step after the last recorded one
    (a salvaged run may have recorded fewer steps than its clock master ran: its refusal
    comes later); runs kept before 2026-12-05 that were stopped while their clock master
    waited for the recorder, or whose recorder died during Finish, name the last recorded
    step, and are read as they are."""
    problems = []
    if refusal["code"] not in REFUSALS:
        problems.append(f"'refusal.code' must be one of {', '.join(REFUSALS)}, got {refusal['code']!r}")
    step = refusal.get("step")
    if not isinstance(step, int) or not _is_int(step, -1):
        problems.append(f"'refusal.step' must be an int >= -1, got {step!r}")
    elif isinstance(steps, int) and _is_int(steps) and step < steps - 1:
        problems.append(f"'refusal.step' is {step}, but {steps} steps were recorded: a run is refused at its "
                        "last recorded step or later")
    return problems


def _bag_problems(bag: object) -> list[str]:
    if not isinstance(bag, dict):
        return [f"'bag' must be an object, got {bag!r}"]
    problems = []
    where = bag.get("path")
    inside = isinstance(where, str) and bool(where) and not PurePosixPath(where).is_absolute()
    if not inside or ".." in PurePosixPath(str(where)).parts:
        problems.append(f"'bag.path' must be a relative path inside the run directory, got {where!r}")
    if bag.get("storage") not in STORAGES:
        problems.append(f"'bag.storage' must be one of {list(STORAGES)}, got {bag.get('storage')!r}")
    return problems


def iter_kept_steps(path: Path) -> Iterator[dict[str, Any]]:
    """The step records of a steps.jsonl whose recorder wrote no manifest (killed, or its
    disk full), one at a time; a last line it was cut off in the middle of is not one.
    Every complete line is checked as verify checks it (``step_records_of``): salvage
    took a duplicated line, or a record without its state, as a record of the run.

    Raises:
        RunDirError: unreadable, or a complete line that is not the record of the next
            step (when it is reached).
    """
    try:
        with path.open("rb") as file:
            for index, line in enumerate(file):
                if not line.endswith(b"\n"):
                    return  # cut off in the middle of writing it
                yield _checked_record(path, line, index, last=False)
    except OSError as err:
        raise RunDirError(path, f"unreadable: {err.strerror or err}") from err


@dataclass(frozen=True)
class KeptChain:
    """What a steps.jsonl keeps of a run's chains: its complete records, the last one's
    chain digest and frames digest, and the last record itself."""

    steps: int
    chain_digest: str
    frames_digest: str | None
    last: dict[str, Any] | None


def kept_chain(path: Path) -> KeptChain:
    """What was chained before the run broke, from a steps.jsonl whose recorder wrote no
    manifest or could not write all it chained (a full disk). No record is the empty chain
    (GENESIS, as a manifest of no step says it), no frame None. The run's line said "" for
    the one, and null frames for a run whose frames were recorded. Never raises: an
    unreadable file, or a line that is no record, ends what is kept."""
    from simforge_ros.core.digest import GENESIS

    count, digest, frames, last = 0, GENESIS.hex(), None, None
    try:
        for record in iter_kept_steps(path):
            count, digest, last = count + 1, str(record.get("digest", "")), record
            frames = record.get("frames_digest") or frames
    except RunDirError:
        pass
    return KeptChain(count, digest, frames if isinstance(frames, str) else None, last)


def step_records_of(path: Path, cut_off_ok: bool = False) -> StepRecords:
    """Check steps.jsonl whole (one step record per line, steps 0, 1, 2, ... in order)
    and give its records, read from the file as they are asked for. ``cut_off_ok``: the
    recorder's writes failed (a full disk), and a last line cut off mid-write, no whole
    JSON and no newline, is left out as never written.

    Raises:
        RunDirError: missing, unreadable, a line that is not a JSON object (a cut-off
            last line is reported as truncated, unless ``cut_off_ok``), a missing key, or a
            step out of order.
    """
    _check_file(path)
    offsets = array("q", [0])  # where each line starts, then the end of the last
    try:
        with path.open("rb") as file:
            index = 0
            line = file.readline()
            while line:
                after = file.readline()
                if cut_off_ok and not after and not line.endswith(b"\n") and not _whole_json(line):
                    # a write the disk filling cut off (the recorder writes a record and its
                    # newline at once): never a record, as the manifest counts it; every
                    # reader but salvage refused such a run whole ("line 15: not valid JSON")
                    break
                _checked_record(path, line, index, last=not after)
                offsets.append(offsets[-1] + len(line))
                index += 1
                line = after
    except OSError as err:
        raise RunDirError(path, f"unreadable: {err.strerror or err}") from err
    return StepRecords(path, offsets)


def _whole_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return False
    return True


def _check_file(path: Path) -> None:
    if not path.exists():
        raise RunDirError(path, "missing")
    if not path.is_file():
        raise RunDirError(path, "not a regular file")


def _checked_record(path: Path, line: bytes, index: int, last: bool) -> dict[str, Any]:
    """One line of steps.jsonl, parsed and checked as the record of step ``index``."""
    lineno = index + 1
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RunDirError(path, f"line {lineno}: not UTF-8 text (byte {err.start}; corrupt?)") from err
    if not text.strip():
        raise RunDirError(path, f"line {lineno}: empty line" + (" (truncated?)" if last else ""))
    try:
        record = json.loads(text)
    except json.JSONDecodeError as err:
        why = "(truncated?)" if last else f"({err.msg} at column {err.colno})"
        raise RunDirError(path, f"line {lineno}: not valid JSON {why}") from err
    except RecursionError as err:
        raise RunDirError(path, f"line {lineno}: not a step record: nested deeper than Python's JSON parser goes "
                                "(corrupt?)") from err
    if not isinstance(record, dict):
        raise RunDirError(path, f"line {lineno}: not a JSON object (got {type(record).__name__})")
    problems = step_problems(record, index)
    if problems:
        raise RunDirError(path, f"line {lineno}: " + "; ".join(problems))
    return record


def step_problems(record: Mapping[str, Any], expected_step: int) -> list[str]:
    """What is wrong with one parsed step record (empty when it is usable)."""
    problems = [f"missing key {k!r}" for k in STEP_KEYS if k not in record]
    step = record.get("step")
    if "step" in record and (not _is_int(step) or step != expected_step):
        problems.append(f"step is {step!r} where step {expected_step} was expected")
    if "digest" in record and not _is_hex64(record["digest"]):
        problems.append(f"'digest' must be 64 lowercase hex digits, got {record['digest']!r}")
    for key in ("frames", "timing", "action", "applied", "state", "wall"):
        if key in record and not isinstance(record[key], dict):
            problems.append(f"{key!r} must be an object, got {type(record[key]).__name__}")
    return problems


def step_records(run: RunDir, drop: Sequence[str] = ()) -> Iterator[dict[str, Any]]:
    """The run's step records without the keys in ``drop``, one at a time."""
    return ({k: v for k, v in rec.items() if k not in drop} for rec in run.steps)
