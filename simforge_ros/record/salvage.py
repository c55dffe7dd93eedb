"""`simforge salvage RUN`: a usable run made of one whose recorder was killed, or could
not finish writing its bag (a full disk: the manifest's ``record_failure``).

A recorder killed outright writes no manifest and leaves its MCAP bag without its footer
or metadata.yaml, so no tool (verify, diff, rerun, play) can read the run; one whose disk
filled up leaves the bag cut off the same way. The bag's
chunks up to the last one written are intact: each is written whole, uncompressed, with
the schemas and channels its messages need. This reads the messages of every complete
chunk, in the order the recorder took them, and feeds them to a fresh recorder, the same
code that recorded them: it writes a new run directory (RUN-salvaged) with a proper bag,
steps.jsonl and a refused manifest. The kept run is never touched; its own steps.jsonl
must agree with the salvaged records, step for step, or nothing is kept.

What the killed recorder had not yet written to its bag (its pending chunk, up to 1 MB) is
lost: the salvaged run may hold fewer steps than the kept steps.jsonl, but not none of
them, and not fewer when the bag was written whole (its footer and closing magic).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any

from simforge_ros import topics
from simforge_ros.core.diffing import MISSING, first_field_diff, format_value
from simforge_ros.core.errors import EXIT_FAILURE, EXIT_USAGE, REFUSALS, SimforgeError
from simforge_ros.core.limits import IMAGE_SIDE
from simforge_ros.isolation import check_rmw
from simforge_ros.record.bag import BagError, BagWriteError
from simforge_ros.record.bag_structure import MAGIC as MCAP_MAGIC
from simforge_ros.record.bag_structure import (
    OP_CHANNEL,
    OP_CHUNK,
    OP_DATA_END,
    OP_FOOTER,
    OP_HEADER,
    OP_MESSAGE,
    OP_SCHEMA,
    U16,
    U32,
    U64,
)
from simforge_ros.record.rundir import (
    MANIFEST,
    PARAMS,
    RUNNER_REFUSAL,
    STEPS,
    RunDirError,
    iter_kept_steps,
    step_records_of,
    still_running,
)
from simforge_ros.tools import out_dir_problem, parse, say

_FOOTER_BODY = 8 + 8 + 4  # summary start, summary offset start, crc
_HEADS = {OP_SCHEMA: 2, OP_CHANNEL: 4, OP_MESSAGE: 22}
"""The fixed fields' bytes of each record a chunk holds, before its strings and data."""
_WHENEVER = frozenset((topics.STATUS, topics.NODE_PARAMS))
"""Topics stamped with whatever time the run had reached, not a step's: always kept."""


class SalvageError(SimforgeError):
    """A run that cannot be salvaged, or whose salvage disagrees with what it kept."""


@dataclass(frozen=True)
class Message:
    """One recorded message: its topic, type, log time and CDR bytes as they were taken."""

    topic: str
    type_name: str
    t_ns: int
    data: bytes


class McapPrefix:
    """The messages of every complete chunk of an MCAP file that may end anywhere.

    ``messages()`` reads the file one record at a time, so a bag larger than memory (a
    long four-camera run writes ~700 KB a step) is salvaged in about one chunk's room; the
    whole file and every message in it used to be held at once, twice the bag's size.
    ``chunks``, ``messages_read`` and ``bytes_read`` are what the last full pass found.
    ``whole``: the file ends with a footer and the closing magic, so the recorder closed it
    and no record of it may be cut off.
    """

    def __init__(self, path: Path) -> None:
        """Raises: BagError: not an MCAP file (or unreadable)."""
        self.path = path
        tail = 1 + 8 + _FOOTER_BODY + len(MCAP_MAGIC)
        try:
            with path.open("rb") as file:
                magic = file.read(len(MCAP_MAGIC))
                self.bytes_total = file.seek(0, os.SEEK_END)
                file.seek(max(0, self.bytes_total - tail))
                end = file.read(tail)
        except OSError as err:
            raise BagError(f"{path}: unreadable: {err.strerror or err}") from err
        if magic != MCAP_MAGIC[:len(magic)]:
            raise BagError(f"{path}: not an MCAP file")
        # shorter than the magic: a recorder killed before it wrote anything (no chunk)
        self._begun = len(magic) == len(MCAP_MAGIC)
        self.chunks = 0
        self.messages_read = 0
        self.bytes_read = 0
        self.whole = (len(end) == tail and self.bytes_total >= len(MCAP_MAGIC) + tail
                      and end[0] == OP_FOOTER and U64.unpack_from(end, 1)[0] == _FOOTER_BODY
                      and end[-len(MCAP_MAGIC):] == MCAP_MAGIC)

    def messages(self) -> Iterator[Message]:
        """Every message of the complete chunks, in the order written.

        Raises:
            BagError: a compressed chunk, a message of an unknown channel, or the file
                cannot be read (a read error, not the salvage's own writing, names the bag).
        """
        if not self._begun:
            return
        try:
            yield from self._messages()
        except OSError as err:
            raise BagError(f"{self.path}: unreadable: {err.strerror or err}") from err

    def _messages(self) -> Iterator[Message]:
        path = self.path
        schemas: dict[int, str] = {}
        channels: dict[int, tuple[str, str]] = {}  # id -> (topic, type name)
        chunks = count = 0
        total = self.bytes_total
        with path.open("rb") as file:
            pos = file.seek(len(MCAP_MAGIC))
            while pos + 9 <= total:
                header = file.read(9)
                if len(header) < 9:
                    break
                op = header[0]
                (length,) = U64.unpack_from(header, 1)
                end = pos + 9 + length
                if op == 0 and not any(header):
                    break  # zeros where the writer had not yet written (a file system's crash)
                if not OP_HEADER <= op <= OP_DATA_END:
                    # a record the writer began has its opcode: a length a flipped bit moved
                    # lands here, and read as "cut off" it salvaged nothing of a whole bag
                    raise BagError(f"{path}: the record at byte {pos} has opcode {op:#04x}, which MCAP has none of; "
                                   "the record before it was damaged (corrupt)")
                if end > total:
                    if self.whole:  # closed by its recorder: nothing was cut off
                        raise BagError(f"{path}: the record at byte {pos} runs {end - total} bytes past the "
                                       "end of the file, which its recorder closed (corrupt)")
                    if length > _MOST_LENGTH.get(op, _MOST_OTHER):
                        # more than the writer ever writes in one: a length a flipped bit
                        # enlarged, which read as "cut off" salvaged nothing
                        raise BagError(f"{path}: the record at byte {pos} claims {length} bytes, more than its "
                                       f"writer writes in one, with {total - pos} bytes of the file after it "
                                       "(corrupt)")
                    break  # the record the writer was in the middle of
                if op != OP_CHUNK:
                    pos = file.seek(end)
                    continue
                data = file.read(length)
                if len(data) < length:
                    break  # the file shrank while read
                body = 8 + 8 + 8 + 4  # start time, end time, size, crc
                if length < body + 4 + 8:
                    raise BagError(f"{path}: the chunk at byte {pos} is {length} bytes, too short (corrupt)")
                compression, body = _string(data, body, len(data), f"{path}: the chunk at byte {pos}")
                if compression:
                    raise BagError(f"{path}: a {compression} chunk; only uncompressed chunks can be salvaged")
                (records_len,) = U64.unpack_from(data, body)
                if body + 8 + records_len > len(data):
                    raise BagError(f"{path}: the chunk at byte {pos} holds {records_len} bytes of records in "
                                   f"{length} (corrupt)")
                for message in _chunk_records(data, body + 8, body + 8 + records_len, schemas, channels,
                                              f"{path}: the chunk at byte {pos}"):
                    count += 1
                    yield message
                chunks += 1
                pos = end
            if total - pos == len(MCAP_MAGIC) and file.read(len(MCAP_MAGIC)) == MCAP_MAGIC:
                pos = total  # a whole file ends with the magic again, after its footer
        self.chunks, self.messages_read, self.bytes_read = chunks, count, pos


# The longest record of each kind its writer (record.bag) writes: the header, a schema and
# a channel are far under a megabyte; a chunk is closed once past 1 MiB, so holds at most
# that and one more message, an image of IMAGE_SIDE at most; a message index or another
# summary record, far under 16 MiB. A record the writer was stopped in the middle of
# claims its whole length, never more.
_MOST_LENGTH = {OP_HEADER: 2**20, OP_SCHEMA: 2**20, OP_CHANNEL: 2**20, OP_CHUNK: 2 * 2**20 + 3 * IMAGE_SIDE[1] ** 2}
_MOST_OTHER = 16 * 2**20


def _string(buf: bytes, pos: int, end: int, where: str) -> tuple[str, int]:
    """The MCAP string at ``pos`` and where it ends; a bit flipped in its length or its
    text was an IndexError or UnicodeDecodeError traceback.

    Raises:
        BagError: it runs past ``end`` or is not UTF-8 (``where`` names the chunk).
    """
    if pos + 4 > end or pos + 4 + U32.unpack_from(buf, pos)[0] > end:
        raise BagError(f"{where}: a string runs past its record (corrupt)")
    (n,) = U32.unpack_from(buf, pos)
    try:
        return buf[pos + 4:pos + 4 + n].decode("utf-8"), pos + 4 + n
    except UnicodeDecodeError as err:
        raise BagError(f"{where}: a name that is not UTF-8 (corrupt)") from err


def read_mcap_prefix(path: Path) -> McapPrefix:
    """The complete chunks of ``path``, an MCAP file that may end anywhere (read as
    ``messages()`` is iterated).

    Raises:
        BagError: not an MCAP file.
    """
    return McapPrefix(path)


def _chunk_records(data: bytes, pos: int, end: int, schemas: dict[int, str],
                   channels: dict[int, tuple[str, str]], where: str) -> Iterator[Message]:
    """The messages of one chunk's records, ``data[pos:end]``; ``where`` names the chunk.

    Raises:
        BagError: a record that runs past the chunk, or a message of no known channel.
    """
    while pos < end:
        op = data[pos]
        if pos + 9 > end:
            raise BagError(f"{where}: a record runs past the chunk (corrupt)")
        (length,) = U64.unpack_from(data, pos + 1)
        body, nxt = pos + 9, pos + 9 + length
        if nxt > end:
            raise BagError(f"{where}: a record of {length} bytes runs past the chunk (corrupt)")
        if length < _HEADS.get(op, 0):
            raise BagError(f"{where}: a record of {length} bytes, too short for its fields (corrupt)")
        if op == OP_SCHEMA:
            (schema_id,) = U16.unpack_from(data, body)
            schemas[schema_id], _ = _string(data, body + 2, nxt, where)
        elif op == OP_CHANNEL:
            channel_id, schema_id = U16.unpack_from(data, body)[0], U16.unpack_from(data, body + 2)[0]
            topic, _ = _string(data, body + 4, nxt, where)
            channels[channel_id] = (topic, schemas.get(schema_id, ""))
        elif op == OP_MESSAGE:
            (channel_id,) = U16.unpack_from(data, body)
            if channel_id not in channels:
                raise BagError(f"{where}: a message on channel {channel_id}, which no record names")
            (log_time,) = U64.unpack_from(data, body + 6)
            topic, type_name = channels[channel_id]
            yield Message(topic, type_name, log_time, data[body + 22:nxt])
        pos = nxt


def salvage(run: Path, out: Path) -> dict[str, Any]:
    """Write ``out``, the salvaged run of ``run``; what was salvaged.

    Raises:
        RunDirError: ``run`` is not a run whose recorder was killed, or ``out`` exists.
        BagError: its bag cannot be read as far as it goes.
        SalvageError: the salvaged records disagree with ``run``'s steps.jsonl.
    """
    if not (run / STEPS).is_file():
        raise RunDirError(run, "not a run the recorder began (no steps.jsonl)")
    _check_readable(run)
    for _ in iter_kept_steps(run / STEPS):  # a record verify would reject is named before any work
        pass
    given = _ended(run)
    try:
        bags = sorted(p for p in (run / "bag").iterdir() if p.suffix == ".mcap")
    except FileNotFoundError:
        bags = []
    except OSError as err:
        raise BagError(f"{run / 'bag'}: unreadable: {err.strerror or err}") from err
    if len(bags) != 1:
        raise BagError(f"{run / 'bag'}: expected one .mcap file, found {len(bags)} (only MCAP bags are salvaged)")
    try:
        # claimed at once, not looked for and made later: two salvages of one run at once
        # both found it free, and the one that failed removed what the other was writing
        out.mkdir(parents=True)
    except FileExistsError:
        raise RunDirError(out, "exists (a salvage before, or one going on now); a salvaged run is written to a "
                               "new directory") from None
    try:
        report = _salvage_into(run, out, bags[0], given)
        _check_verifies(out)
        return report
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)  # nothing half-salvaged is left (a full disk)
        raise


def _check_readable(run: Path) -> None:
    """Every file of ``run`` that salvage reads or copies can be read. One that could not
    was reported as the salvaged run's writing failing (exit 1), when copied, or taken as
    absent (a run without parameters, a finished run) when read.

    Raises:
        RunDirError: the first input that cannot be read (exit 2, as verify says it).
    """
    def unreadable(err: OSError) -> RunDirError:
        return RunDirError(Path(err.filename or run), f"unreadable: {err.strerror or err}")

    def check(path: Path) -> None:
        try:
            path.open("rb").close()
        except FileNotFoundError:
            pass  # what a run need not have is looked for where it is read
        except OSError as err:
            raise unreadable(err) from err

    for name in (STEPS, MANIFEST, PARAMS):
        check(run / name)

    def refuse(err: OSError) -> None:
        if not isinstance(err, FileNotFoundError):  # a run killed before its logs were made has none
            raise unreadable(err) from err

    for top, _dirs, files in os.walk(run / "logs", onerror=refuse):
        for name in files:
            if (Path(top) / name).is_file():  # not a FIFO, which opening would wait on
                check(Path(top) / name)


def _check_verifies(out: Path) -> None:
    """The salvaged run passes verify: a bit flipped in what steps.jsonl holds nothing of
    (a /clock message) was salvaged into a run that verify rejects.

    Raises:
        SalvageError: verify's first mismatch, by step and field.
    """
    from simforge_ros.record.verify import verify_run

    result = verify_run(out)
    if not result.ok:
        step = (result.first_mismatch or {}).get("step")
        raise SalvageError(f"{out}: the salvaged run does not verify: step {step}: {result.detail} (the bag is "
                           f"corrupt where {STEPS} holds nothing of it)")


def _status_run_id(prefix: McapPrefix) -> str | None:
    """The run id the bag's first run status message (/simforge/status) names, or None."""
    from simforge_ros.record.bag import typestore
    from simforge_ros.record.verify import STATUS_TYPE

    for message in prefix.messages():
        if message.topic == topics.STATUS:
            try:
                said = typestore().deserialize_cdr(message.data, STATUS_TYPE)
            except Exception:  # noqa: BLE001 - a damaged message names nothing; the directory does
                return None
            return str(getattr(said, "run_id", "")) or None
    return None


def _salvage_into(run: Path, out: Path, bag: Path, given: dict[str, Any]) -> dict[str, Any]:
    """salvage() once its checks have passed: ``out`` written, or an error."""
    from simforge_ros.rerun import read_params

    prefix = read_mcap_prefix(bag)
    try:
        run_id = str(read_params(run / PARAMS)["clock_master"].get("run_id") or run.name)
    except RunDirError:  # no usable parameter file (a run started by hand or by ros2 launch)
        # the run's status messages name it; the directory only where the bag holds none
        # (it was named by the directory, and the run's own status then failed verify)
        run_id = _status_run_id(prefix) or run.name
    steps, missing = _replay(prefix, out, run_id, given)
    kept = agree = 0
    for mine, theirs in zip_longest(steps, iter_kept_steps(run / STEPS)):  # one record of each at a time
        if theirs is not None:
            kept += 1
        if mine is None or theirs is None:
            continue
        _check_same(mine, theirs)
        agree += 1
    _check_enough(prefix, len(steps), kept)
    for name in (PARAMS, "logs"):
        source = run / name
        if source.is_dir():
            shutil.copytree(source, out / name)
        elif source.is_file():
            shutil.copy2(source, out / name)
    return {"run": str(run), "out": str(out), "steps": len(steps), "kept_steps": kept, "agree": agree,
            "messages": prefix.messages_read, "chunks": prefix.chunks,
            "bag_bytes_read": prefix.bytes_read, "bag_bytes": prefix.bytes_total,
            "last_step_lacks": missing}


def _check_enough(prefix: McapPrefix, steps: int, kept: int) -> None:
    """A bag cut off by a kill may lose the steps of its pending chunk, so fewer steps
    than the kept steps.jsonl holds are a salvage; none of them is not (a bag cut or
    emptied before its first chunk), and a whole bag (its footer written) loses none.

    Raises:
        SalvageError: the bag gives no step of a run that kept some, or a whole bag fewer.
    """
    if kept == 0 or steps >= kept:
        return
    found = (f"{prefix.path}: {steps} complete steps in its {prefix.chunks} complete chunks "
             f"({prefix.bytes_read} of {prefix.bytes_total} bytes), {STEPS} holds {kept}")
    if steps == 0:
        raise SalvageError(f"{found}: nothing of the run to salvage")
    if prefix.whole:
        raise SalvageError(f"{found}: the bag is whole (its footer was written) yet lacks step {steps} "
                           "(corrupt?)")


_CHAINS = ("digest", "frames_digest")
"""Compared last: a chain differs because a field it hashes does, which is named first."""


def _check_same(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> None:
    """The salvaged record of a step must be the kept one, field for field: the step chain
    hashes no frame (the frames chain does), so a bag whose image bytes changed chained to
    the same digests and was salvaged as if it were the run.

    Raises:
        SalvageError: the first field that differs, by its path (``frames.front``).
    """
    step = mine["step"]
    fields = [k for k in mine if k not in _CHAINS] + [k for k in theirs if k not in mine and k not in _CHAINS]
    for key in (*fields, *_CHAINS):
        found = first_field_diff(key, mine.get(key, MISSING), theirs.get(key, MISSING))
        if found is None:
            continue
        path, bag, kept = found
        if path == "digest":  # every field it hashes is the same: the kept chain is not this one
            raise SalvageError(f"step {step}: the bag's records chain to {str(bag)[:16]}, {STEPS} says "
                               f"{str(kept)[:16]}: the bag and the record disagree")
        raise SalvageError(f"step {step}: field {path}: the bag gives {format_value(bag)}, {STEPS} has "
                           f"{format_value(kept)}: the bag and the record disagree (one is corrupt)")


def _ended(run: Path) -> dict[str, Any]:
    """How the run ended, for the salvaged manifest: the refusal its manifest holds when the
    recorder wrote one but could not finish its bag (``record_failure``), else the one the
    clock master's log says, with what became of the recorder.

    Raises:
        RunDirError: a finished run, with a complete bag: nothing to salvage.
    """
    from simforge_ros.runner import read_outcome

    manifest_path = run / MANIFEST
    if manifest_path.exists():
        try:
            manifest = json.loads(manifest_path.read_text())
        except (OSError, ValueError, RecursionError):  # unreadable, not JSON, nested past the parser
            manifest = None
        failure = manifest.get("record_failure") if isinstance(manifest, dict) else None
        bag_finished = (run / "bag" / "metadata.yaml").is_file()
        if isinstance(manifest, dict) and failure and not bag_finished:
            return {**(manifest.get("refusal") or {}), "why": f"the recorder's {failure}"}
        if manifest is not None or bag_finished:
            # salvage rebuilds a killed recorder's record; a finished run's damaged bag is
            # told by verify, and rerun records the run again
            raise RunDirError(manifest_path, "present: the recorder wrote the run's record, nothing to salvage "
                                             "(`simforge verify` checks its bag; `simforge rerun` records it again)")
        # an unreadable manifest beside an unfinished bag (written in one piece, it was
        # damaged after): neither verify nor salvage took the run
        why = "its manifest.json was unreadable and its bag unfinished"
    else:
        why = "the recorder was killed"
    try:  # the runner's, when it refused the run itself (a participant killed before step 0)
        refusal = _as_refusal(json.loads((run / RUNNER_REFUSAL).read_text()))
    except (OSError, ValueError, RecursionError):
        refusal = {}
    if not refusal:
        try:
            refusal = _as_refusal((read_outcome(run / "logs" / "clock_master.log") or {}).get("refusal"))
        except (OSError, ValueError, RecursionError, AttributeError):
            refusal = {}
    return {**refusal, "why": why}


def _as_refusal(said: object) -> dict[str, Any]:
    """The fields of a refusal a log holds that a manifest can: a ``code``, a ``step`` >= -1
    and a ``detail``. A log cut or edited ("step": "x", or 1e999) ended salvage in
    "unexpected error: ValueError", or blamed the salvaged manifest for it."""
    if not isinstance(said, dict):
        return {}
    kept: dict[str, Any] = {}
    if isinstance(code := said.get("code"), str) and code in REFUSALS:
        kept["code"] = code
    if isinstance(step := said.get("step"), int) and not isinstance(step, bool) and step >= -1:
        kept["step"] = step
    if isinstance(detail := said.get("detail"), str):
        kept["detail"] = detail
    return kept if "code" in kept else {}


_EACH_STEP = (topics.ODOM, topics.TF, topics.GROUND_TRUTH, topics.MARKERS)
"""Side topics the bridge publishes at every step when they are on (no chain holds them)."""


def lacking(last: set[str], before: set[str]) -> list[str]:
    """What the last salvaged step lacks that its own messages or the step before say it had
    (``last`` and ``before``: the topics logged at those steps' times). Its chained records
    and frames are complete, or it would not be a step; but a camera's info, or the
    odometry, /tf, ground truth or markers of it, may have been in the chunk the killed
    recorder never wrote. Played, an image without its camera info is dropped by an
    image_transport camera subscriber or an exact-time synchroniser, without a word."""
    missing = {t for t in _EACH_STEP if t in before and t not in last}
    for topic in last:
        camera = topic.rpartition("/")[0].rpartition("/")[2]
        if topic == topics.image_topic(camera):
            pair = topics.camera_info_topic(camera)
        elif topic == topics.camera_info_topic(camera):
            pair = topics.image_topic(camera)
        else:
            continue
        if pair not in last:
            missing.add(pair)
    return sorted(missing)


def _replay(prefix: McapPrefix, out: Path, run_id: str,
            given: dict[str, Any]) -> tuple[Sequence[Mapping[str, Any]], list[str]]:
    """Feed the messages to a fresh recorder writing ``out``; the step records it wrote
    (read from its steps.jsonl as they are asked for), and what the last of them lacks
    (lacking).

    Twice: a first recorder, into a scratch directory, finds how many steps the messages
    complete (N); the second is fed only what belongs to steps 0..N-1, and what was logged
    at t(N) where the run was refused at step N (a refused run records its refused step's
    /clock). A recorder that fell behind
    before it stopped leaves later steps' messages in its bag, which belong to no chained
    step: a salvaged bag holding them would not verify.

    Its node never spins and discovers nothing (a private domain, discovery off): the
    parameters it publishes on start reach no one.
    """
    import tempfile

    import rclpy
    from rosbags.serde import SerdeError

    from simforge_ros.isolation import environ_set, lease_domain
    from simforge_ros.nodes.recorder import Recorder

    def feed(messages: Iterable[Message], into: Path, context: Any,
             last_ns: tuple[int, int] | None = None) -> tuple[int, int, list[str]]:
        """(steps completed, decision_us, what the last step lacks) after ``messages``;
        ``into`` gets the run; ``last_ns``: the last step's time and the one before it."""
        rclpy.init(args=["--ros-args", "-p", f"out_dir:={into}", "-p", f"run_id:={run_id}"], context=context,
                   domain_id=lease.domain_id)
        recorder = Recorder(context)
        seen: dict[int, set[str]] = {t_ns: set() for t_ns in last_ns or ()}
        try:
            for message in messages:
                if message.t_ns in seen:
                    seen[message.t_ns].add(message.topic)
                try:
                    recorder.take(message.topic, message.data)
                except (SerdeError, ValueError, IndexError, KeyError, struct.error) as err:
                    # a bit flipped in its bytes or its length: a traceback before
                    why = f"{type(err).__name__}: {err}"
                    raise BagError(f"{prefix.path}: the {message.topic} message logged at {message.t_ns} ns "
                                   f"does not decode ({why[:120]}; corrupt?)") from err
            done = recorder.assembler.steps_done
            last = recorder.assembler.last_record
            decision_us = int(last["timing"]["decision_us"]) if last is not None else 0
            detail = (f"{given.get('detail') or given['why']}; salvaged {done} steps from the "
                      f"{prefix.chunks} chunks its bag had written")
            missing = lacking(seen[last_ns[0]], seen[last_ns[1]]) if last_ns is not None and done else []
            if missing:
                detail += f"; step {done - 1} lacks {', '.join(missing)} (in the chunk never written)"
            step = given.get("step", done)
            # a run is refused at its last recorded step or later: a log that says earlier
            # (edited, or another run's) was blamed on the salvaged manifest
            recorder.conclude(run_id, {"code": given.get("code") or "incomplete_run",
                                       "step": step if step >= done - 1 else done, "detail": detail}, done)
            return done, decision_us, missing
        finally:
            recorder.node.destroy_node()
            rclpy.shutdown(context=context)

    with lease_domain() as lease, environ_set({"ROS_AUTOMATIC_DISCOVERY_RANGE": "OFF",
                                               "ROS_LOG_DIR": lease.env["ROS_LOG_DIR"]}):
        with tempfile.TemporaryDirectory(prefix="simforge-salvage-") as scratch:
            done, decision_us, _ = feed(prefix.messages(), Path(scratch) / "run", rclpy.Context())
        step_ns = decision_us * 1000
        last_ns = done * step_ns
        # the step after the salvaged ones: kept where the run was refused at it, as a
        # refused run's bag holds its refused step's /clock and what came of it; else it is
        # only what the bag had of a step never chained (a killed recorder's: step 59's
        # state and one camera's image without its info, named nowhere)
        through_ns = last_ns if given.get("step") == done else last_ns - step_ns
        kept = (m for m in prefix.messages() if m.t_ns <= through_ns or m.topic in _WHENEVER)
        _, _, missing = feed(kept, out, rclpy.Context(), (last_ns - step_ns, last_ns - 2 * step_ns))
    return step_records_of(out / STEPS), missing


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simforge salvage",
        description="Make a usable run (bag, steps.jsonl, manifest) of one whose recorder was killed.",
    )
    parser.add_argument("run", type=Path, help="the run directory without a manifest")
    parser.add_argument("--out", default=None, help="the new run directory (default: RUN-salvaged)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _compared(report: Mapping[str, Any]) -> str:
    """What the kept steps.jsonl says of the salvaged steps: "the same records" only of the
    steps both hold, and nothing of the sort when it holds none."""
    steps, kept, agree = report["steps"], report["kept_steps"], report["agree"]
    if kept == 0:
        return f"the kept {STEPS} holds no step to compare"
    if steps < kept:
        return (f"{kept} in the kept {STEPS}: its first {agree} the same records, the rest not in the "
                "bag's complete chunks")
    more = f"; {steps - kept} more that only the bag holds" if steps > kept else ""
    return f"{kept} in the kept {STEPS}, the same records{more}"


def _new_dir_problem(out: Path) -> str | None:
    """Why ``out`` cannot be made, tried and taken back (its parent can be written to, yet
    /proc/x cannot be made even by root: that was a write failure, exit 1); None when it can,
    or when it is there already (salvage itself then refuses it, as never overwritten)."""
    if os.path.lexists(out):
        return None if out.exists() else "a symbolic link to nothing is there"
    try:
        out.mkdir()
    except OSError as err:
        return err.strerror or type(err).__name__
    out.rmdir()
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 with a salvaged run written, 1 when the bag and the kept record disagree,
    2 on bad input."""
    args = parse(build_parser(), argv)
    if isinstance(args, int):
        return args
    run = Path(os.path.abspath(args.run))  # `salvage .` from inside the run: its name, for the default --out
    if args.out is None and not run.name:
        say("salvage", f"run: expected a run directory, got {args.run!r}")
        return EXIT_USAGE
    if args.out == "":  # Path("") is ".": the salvaged run went into the current directory unasked
        say("salvage", "--out: expected the new run directory (an empty name names none; . is the current "
                       "directory), got ''")
        return EXIT_USAGE
    out = Path(args.out) if args.out is not None else run.with_name(run.name + "-salvaged")
    try:
        run_dir = run.is_dir()
        if run_dir and out.resolve().is_relative_to(run.resolve()):
            say("salvage", f"--out: expected a new run directory outside the kept run (it is never changed), got "
                           f"{args.out!r}")
            return EXIT_USAGE
        problem = (out_dir_problem(str(out.parent)) or _new_dir_problem(out)) if run_dir else None
    except (OSError, RuntimeError) as err:  # a name too long, a loop of symbolic links: bad input, not a crash
        said = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        given = str(args.run)
        say("salvage", f"{given if len(given) <= 200 else given[:200] + '...'} / --out: expected paths that can be "
                       f"looked up ({said})")
        return EXIT_USAGE
    if problem is not None:
        # as run, rerun and render refuse such an --out: a usage error, not "the records disagree"
        say("salvage", f"--out: expected a new run directory in a directory simforge can create and write to "
                       f"({problem}), got {str(out)!r}")
        return EXIT_USAGE
    if run_dir and (live := still_running(run)) is not None:  # a salvaged twin of a run that then counted
        say("salvage", f"{run}: expected a run that has ended, got one still going on ({live})")
        return EXIT_USAGE
    try:
        if not run.is_dir():
            raise RunDirError(run, "not a run directory (not a directory)" if run.exists() else "no such run directory")
        check_rmw()  # the salvage's recorder is a ROS node
        report = salvage(run, out)
    except SalvageError as err:
        say("salvage", err)
        return EXIT_FAILURE
    except BagWriteError as err:  # a full disk, as OSError below: it said so as bad input (exit 2), unnamed
        say("salvage", f"{out}: writing the salvaged run failed: {err}")
        return EXIT_FAILURE
    except SimforgeError as err:
        say("salvage", err)
        return EXIT_USAGE
    except OSError as err:  # writing the salvaged run (a full disk): nothing of it is left
        say("salvage", f"{out}: writing the salvaged run failed: {err}")
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        print(f"salvaged {report['steps']} steps ({_compared(report)}) from {report['chunks']} chunks, "
              f"{report['bag_bytes_read']} of {report['bag_bytes']} bag bytes: {report['out']}")
        if report["last_step_lacks"]:
            print(f"step {report['steps'] - 1} lacks {', '.join(report['last_step_lacks'])}: the killed "
                  "recorder never wrote the chunk they were in (its steps and frames are complete)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
