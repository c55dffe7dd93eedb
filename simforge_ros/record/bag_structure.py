"""A bag file's own bookkeeping, held to the messages it holds.

`simforge verify` recomputes every digest from the messages rosbags reads, but other
readers go by more of the file: rosbag2's MCAP storage (`ros2 bag play`) and Foxglove
find messages through the message index after each chunk and the chunk index in the
summary, take topics and types from the schema and channel records each chunk repeats,
and trust the statistics and the rosbag2 metadata record. A byte-flip fuzz of a
four-camera bag found 10 of 400 flips there that verify did not notice: a bag that
verified could still play wrong elsewhere.

``mcap_problem`` walks an MCAP file once, a record at a time (message data is skipped,
not read), and names the first piece of bookkeeping that does not match: a schema or
channel record whose copies differ, a message index entry, a chunk index field, a
statistics count, a summary offset or footer pointer, a rosbag2 metadata record that
is not the bag's metadata.yaml, a metadata.yaml whose message counts or times are not the
file's (`ros2 bag info` reports them; rosbags takes them as given), or a message whose
publish time is not its log time (simforge writes them equal, and `ros2 bag play
--message-order sent` replays by publish time). Not checked: CRCs (rosbags writes none: 0
means "not computed"), sequence numbers (not data), the contents of compressed chunks
(simforge writes none; their index entries are still checked).

``sqlite_problem`` does the same for a sqlite3 bag: SQLite's own integrity check (a row
its timestamp index does not list is skipped by a reader going by that index: 1 of 300
flips of the fuzz), the metadata table, which must repeat metadata.yaml, and
metadata.yaml's counts and times against the messages table.
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from simforge_ros.record.bag import BagError

# the MCAP format's magic, record opcodes and integers (salvage reads MCAP with them too)
MAGIC = b"\x89MCAP0\r\n"
OP_HEADER, OP_FOOTER, OP_SCHEMA, OP_CHANNEL, OP_MESSAGE, OP_CHUNK = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
OP_MESSAGE_INDEX, OP_CHUNK_INDEX, OP_ATTACHMENT, OP_ATTACHMENT_INDEX = 0x07, 0x08, 0x09, 0x0A
OP_STATISTICS, OP_METADATA, OP_METADATA_INDEX, OP_SUMMARY_OFFSET, OP_DATA_END = 0x0B, 0x0C, 0x0D, 0x0E, 0x0F
_RECORD = struct.Struct("<BQ")
U16, U32, U64 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<Q")
_MESSAGE_HEAD = struct.Struct("<HIQQ")  # channel, sequence, log time, publish time
_CHUNK_HEAD = struct.Struct("<QQQI")  # message start, end, uncompressed size, crc


class McapProblem(Exception):
    """The first piece of an MCAP file's bookkeeping that does not match its messages."""


@dataclass
class _Chunk:
    """What one chunk holds, as found, and what its index must say of it."""

    offset: int
    length: int
    start_time: int  # as its header says
    end_time: int
    compression: str
    compressed_size: int
    uncompressed_size: int
    messages: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # channel -> (log time, offset)
    index_offsets: dict[int, int] = field(default_factory=dict)  # channel -> its message index record's offset
    index_length: int = 0


@dataclass
class _Found:
    """What the data section holds."""

    definitions: dict[tuple[int, int], tuple[bytes, str]] = field(default_factory=dict)  # (op, id) -> body, where
    chunks: list[_Chunk] = field(default_factory=list)
    counts: dict[int, int] = field(default_factory=dict)  # channel -> messages
    topics: dict[int, str] = field(default_factory=dict)  # channel -> topic
    first_time: int | None = None
    last_time: int | None = None
    metadata: dict[str, tuple[int, int, bytes]] = field(default_factory=dict)  # name -> (offset, length, body)
    attachments: int = 0
    compressed: bool = False  # a compressed chunk's messages are not walked, nor counted
    groups: list[tuple[int, int, int]] = field(default_factory=list)  # summary: (opcode, start, length)

    def note_time(self, t_ns: int) -> None:
        self.first_time = t_ns if self.first_time is None else min(self.first_time, t_ns)
        self.last_time = t_ns if self.last_time is None else max(self.last_time, t_ns)


def bag_problem(bag_path: Path) -> str | None:
    """The first mismatch in the bookkeeping of a rosbag2 directory's MCAP files, or None
    (also for another storage, or a metadata.yaml that reading the bag will name).

    Raises:
        BagError: an MCAP file it names cannot be read.
    """
    try:
        info = yaml.safe_load((bag_path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        files = [bag_path / str(f) for f in info["relative_file_paths"]]
        storage = info.get("storage_identifier")
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError, KeyError, TypeError, AttributeError):
        return None  # reading the bag says what is wrong with it
    check = {"mcap": mcap_problem, "sqlite3": sqlite_problem}.get(str(storage))
    if check is None:
        return None
    for path in files:
        try:
            problem = check(path, info if len(files) == 1 else None)
        except OSError as err:
            raise BagError(f"{path}: unreadable: {err.strerror or err}") from err
        if problem is not None:
            return problem
    return None


def sqlite_problem(path: Path, bag_info: Mapping[str, Any] | None = None) -> str | None:
    """SQLite's integrity check of a sqlite3 bag file, then its metadata table against
    ``bag_info`` (metadata.yaml's ``rosbag2_bagfile_information``); the first problem, or
    None. Opened read-only: nothing in the file is touched.

    Raises:
        OSError: the file cannot be read.
    """
    if not path.is_file():
        raise FileNotFoundError(2, "no such file", str(path))
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as err:
        return f"{path.name}: not an SQLite database ({err})"
    try:
        found = [str(row[0]) for row in con.execute("PRAGMA integrity_check")]
        if found != ["ok"]:
            return f"{path.name}: SQLite's integrity check: {found[0]}" + (
                f" (and {len(found) - 1} more)" if len(found) > 1 else "")
        tables = {str(row[0]) for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "message_definitions" in tables:  # each type's hash, also kept per topic
            differ = con.execute(
                "SELECT d.topic_type, d.type_description_hash, t.type_description_hash FROM message_definitions d "
                "JOIN topics t ON t.type = d.topic_type WHERE d.type_description_hash != t.type_description_hash"
            ).fetchall()
            if differ:
                kind, hash_d, hash_t = differ[0]
                return (f"{path.name}: the message definitions table hashes {kind} {hash_d}, "
                        f"its topics table {hash_t}")
        if bag_info is None or "metadata" not in tables:  # one written before rosbag2 kept it there
            return None
        rows = con.execute("SELECT metadata FROM metadata").fetchall()
        counts = {str(name): int(n) for name, n in con.execute(
            "SELECT t.name, COUNT(m.id) FROM topics t LEFT JOIN messages m ON m.topic_id = t.id GROUP BY t.id")}
        first, last = con.execute("SELECT MIN(timestamp), MAX(timestamp) FROM messages").fetchone()
    except sqlite3.Error as err:
        return f"{path.name}: SQLite cannot read it ({err})"
    except UnicodeDecodeError:  # Python decoding SQLite's message, which quotes a damaged schema
        return f"{path.name}: SQLite cannot read it (its schema holds text that is not UTF-8: damaged)"
    finally:
        con.close()
    try:
        inner = [yaml.safe_load(str(row[0])) for row in rows]
    except (yaml.YAMLError, RecursionError):
        inner = []
    if inner != [dict(bag_info)]:
        return f"{path.name}: its metadata table is not the bag's metadata.yaml"
    return _counts_problem(path.name, bag_info, counts, first, last)


def _counts_problem(name: str, bag_info: Mapping[str, Any], counts: Mapping[str, int],
                    first: int | None, last: int | None) -> str | None:
    """metadata.yaml's message counts (the bag's, each topic's, its one file's) and its
    starting time and duration against what the file holds; None when they agree or the
    yaml is not of the form to compare (reading the bag names that)."""
    try:
        said_topics: dict[str, int] = {}
        for entry in bag_info["topics_with_message_count"] or []:
            topic = str(entry["topic_metadata"]["name"])
            said_topics[topic] = said_topics.get(topic, 0) + int(entry["message_count"])
        said_total = int(bag_info["message_count"])
        files = bag_info.get("files") or []
        said_file = int(files[0]["message_count"]) if len(files) == 1 else None
        start = int(bag_info["starting_time"]["nanoseconds_since_epoch"])
        duration = int(bag_info["duration"]["nanoseconds"])
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return None
    for topic in sorted(set(said_topics) | set(counts)):
        if said_topics.get(topic, 0) != counts.get(topic, 0):
            return (f"{name}: metadata.yaml counts {said_topics.get(topic, 0)} messages on {topic}, "
                    f"the file holds {counts.get(topic, 0)}")
    total = sum(counts.values())
    for what, said in (("message_count", said_total), ("files[0].message_count", said_file)):
        if said is not None and said != total:
            return f"{name}: metadata.yaml says {what} {said}, the file holds {total} messages"
    if first is not None and last is not None and (start, duration) != (first, last - first):
        return (f"{name}: metadata.yaml says the messages start at {start} ns and last {duration} ns, "
                f"the file's start at {first} ns and last {last - first} ns")
    return None


def mcap_problem(path: Path, bag_info: Mapping[str, Any] | None = None) -> str | None:
    """The first thing in ``path``'s bookkeeping that does not match, or None.

    ``bag_info``: metadata.yaml's ``rosbag2_bagfile_information``, which the file's
    rosbag2 metadata record must repeat.

    Raises:
        OSError: the file cannot be read.
    """
    try:
        with path.open("rb") as file:
            _check(file, path.stat().st_size, path.name, bag_info)
    except McapProblem as problem:
        return str(problem)
    except (struct.error, UnicodeDecodeError, IndexError) as err:
        return f"{path.name}: a record cut short or malformed ({err})"
    return None


def _check(file: IO[bytes], total: int, name: str, bag_info: Mapping[str, Any] | None) -> None:
    if file.read(len(MAGIC)) != MAGIC:
        raise McapProblem(f"{name}: no MCAP magic at the start")
    found = _Found()
    pos = len(MAGIC)
    summary_start = None
    last_chunk: _Chunk | None = None
    in_summary = False
    footer: tuple[int, int, int] | None = None
    summary_offsets: list[tuple[int, int, int]] = []
    statistics: bytes | None = None
    chunk_indexes: list[bytes] = []
    metadata_indexes: list[bytes] = []
    while pos < total - len(MAGIC):
        head = file.read(_RECORD.size)
        if len(head) < _RECORD.size:
            raise McapProblem(f"{name}: a record header cut short at byte {pos}")
        op, length = _RECORD.unpack(head)
        end = pos + _RECORD.size + length
        if end > total - len(MAGIC):
            raise McapProblem(f"{name}: the record at byte {pos} (opcode {op:#04x}) runs past the end of the file")
        if op in (OP_CHUNK, OP_DATA_END) and last_chunk is not None:
            _close_chunk(name, last_chunk)
        if op == OP_DATA_END:
            in_summary = True
        elif in_summary and op in (OP_SCHEMA, OP_CHANNEL, OP_CHUNK_INDEX, OP_ATTACHMENT_INDEX,
                                   OP_METADATA_INDEX, OP_STATISTICS, OP_SUMMARY_OFFSET):
            if summary_start is None:
                summary_start = pos
            if found.groups and found.groups[-1][0] == op:  # the group goes on
                found.groups[-1] = (op, found.groups[-1][1], end - found.groups[-1][1])
            else:
                found.groups.append((op, pos, end - pos))
        if op == OP_CHUNK:
            last_chunk = _read_chunk(file, name, pos, length, found)
            found.chunks.append(last_chunk)
        elif op == OP_MESSAGE_INDEX and not in_summary:
            _check_message_index(file.read(length), name, pos, last_chunk)
        elif op in (OP_SCHEMA, OP_CHANNEL):
            body = file.read(length)
            _note_definition(found, name, op, body, "the summary" if in_summary else f"byte {pos}")
        elif op == OP_METADATA:
            body = file.read(length)
            (n,) = U32.unpack_from(body, 0)
            found.metadata[body[4:4 + n].decode("utf-8")] = (pos, end - pos, body)
        elif op == OP_ATTACHMENT:
            found.attachments += 1
            file.seek(end)
        elif op == OP_STATISTICS:
            statistics = file.read(length)
        elif op == OP_CHUNK_INDEX:
            chunk_indexes.append(file.read(length))
        elif op == OP_METADATA_INDEX:
            metadata_indexes.append(file.read(length))
        elif op == OP_SUMMARY_OFFSET:
            summary_offsets.append(struct.unpack_from("<BQQ", file.read(length)))
        elif op == OP_FOOTER:
            footer = struct.unpack_from("<QQI", file.read(length))
        else:
            file.seek(end)
        if file.tell() != end:
            file.seek(end)
        pos = end
    if pos != total - len(MAGIC) or file.read(len(MAGIC)) != MAGIC:
        raise McapProblem(f"{name}: no MCAP magic at the end")
    if footer is None:
        raise McapProblem(f"{name}: no footer record")
    _check_footer(name, footer, summary_start, found, summary_offsets)
    _check_chunk_indexes(name, chunk_indexes, found)
    if statistics is not None:
        _check_statistics(name, statistics, found)
    _check_metadata(name, metadata_indexes, found, bag_info)
    _check_counts(name, found, bag_info)


def _read_chunk(file: IO[bytes], name: str, pos: int, length: int, found: _Found) -> _Chunk:
    """Walk one chunk's records (message data skipped) from just after its record header."""
    start_time, end_time, uncompressed_size, _crc = _CHUNK_HEAD.unpack(file.read(_CHUNK_HEAD.size))
    (n,) = U32.unpack(file.read(4))
    compression = file.read(n).decode("utf-8")
    (records_length,) = U64.unpack(file.read(8))
    records_at = file.tell()
    chunk = _Chunk(pos, _RECORD.size + length, start_time, end_time, compression, records_length, uncompressed_size)
    if records_at + records_length != pos + _RECORD.size + length:
        raise McapProblem(f"{name}: the chunk at byte {pos} says its records take {records_length} bytes, "
                          f"its record leaves {pos + _RECORD.size + length - records_at}")
    if compression:  # not walked: simforge writes none (its index entries are still checked)
        found.compressed = True
        return chunk
    if uncompressed_size != records_length:
        raise McapProblem(f"{name}: the chunk at byte {pos} says {uncompressed_size} bytes uncompressed, "
                          f"it holds {records_length}")
    offset = 0
    times: list[int] = []
    while offset < records_length:
        op, rec_length = _RECORD.unpack(file.read(_RECORD.size))
        if offset + _RECORD.size + rec_length > records_length:
            raise McapProblem(f"{name}: a record in the chunk at byte {pos} runs past the chunk's end")
        if op == OP_MESSAGE:
            channel, _seq, log_time, publish_time = _MESSAGE_HEAD.unpack(file.read(_MESSAGE_HEAD.size))
            if (OP_CHANNEL, channel) not in found.definitions:
                raise McapProblem(f"{name}: a message in the chunk at byte {pos} on channel {channel}, "
                                  "which no channel record before it names")
            if publish_time != log_time:
                raise McapProblem(f"{name}: a message in the chunk at byte {pos} (channel {channel}) was "
                                  f"published at {publish_time} ns and logged at {log_time} ns: simforge "
                                  "logs each at the time it was published")
            chunk.messages.setdefault(channel, []).append((log_time, offset))
            found.counts[channel] = found.counts.get(channel, 0) + 1
            found.note_time(log_time)
            times.append(log_time)
            file.seek(rec_length - _MESSAGE_HEAD.size, 1)
        elif op in (OP_SCHEMA, OP_CHANNEL):
            _note_definition(found, name, op, file.read(rec_length), f"the chunk at byte {pos}")
        else:
            file.seek(rec_length, 1)
        offset += _RECORD.size + rec_length
    if times and (min(times), max(times)) != (start_time, end_time):
        raise McapProblem(f"{name}: the chunk at byte {pos} says its messages span {start_time}-{end_time} ns, "
                          f"they span {min(times)}-{max(times)} ns")
    return chunk


def _close_chunk(name: str, chunk: _Chunk) -> None:
    """Once a chunk's message indexes are read: they index every channel it holds (when
    there are any), and its messages are let go (memory stays flat over a long run)."""
    if chunk.index_offsets and not chunk.compression:
        missing = sorted(set(chunk.messages) - set(chunk.index_offsets))
        if missing:
            raise McapProblem(f"{name}: the chunk at byte {chunk.offset} has no message index for channel "
                              f"{missing[0]}")
    chunk.messages = {}


def _note_definition(found: _Found, name: str, op: int, body: bytes, where: str) -> None:
    """A schema or channel record: each copy of one id must be the same record."""
    (record_id,) = U16.unpack_from(body, 0)
    kind = "schema" if op == OP_SCHEMA else "channel"
    known = found.definitions.get((op, record_id))
    if known is None:
        found.definitions[(op, record_id)] = (body, where)
        if op == OP_CHANNEL:
            (n,) = U32.unpack_from(body, 4)
            found.topics[record_id] = body[8:8 + n].decode("utf-8", errors="replace")
    elif known[0] != body:
        raise McapProblem(f"{name}: {kind} record {record_id}: its copy in {where} differs from the one in {known[1]}")


def _check_message_index(body: bytes, name: str, pos: int, chunk: _Chunk | None) -> None:
    """A message index after a chunk: exactly that chunk's (log time, offset) of its channel."""
    channel, n = U16.unpack_from(body, 0)[0], U32.unpack_from(body, 2)[0]
    if chunk is None:
        raise McapProblem(f"{name}: a message index at byte {pos} follows no chunk")
    entries = sorted(struct.iter_unpack("<QQ", body[6:6 + n]))
    if entries != sorted(chunk.messages.get(channel, [])):
        raise McapProblem(f"{name}: the message index at byte {pos} (channel {channel}) does not list "
                          f"the messages of the chunk at byte {chunk.offset}")
    chunk.index_offsets[channel] = pos
    chunk.index_length += _RECORD.size + len(body)


def _check_footer(name: str, footer: tuple[int, int, int], summary_start: int | None, found: _Found,
                  summary_offsets: list[tuple[int, int, int]]) -> None:
    start, offsets_start, _crc = footer
    groups = [g for g in found.groups if g[0] != OP_SUMMARY_OFFSET]
    offset_group = next((g for g in found.groups if g[0] == OP_SUMMARY_OFFSET), None)
    if start != (summary_start or 0):
        raise McapProblem(f"{name}: the footer puts the summary at byte {start}, it starts at byte {summary_start}")
    if offsets_start != (offset_group[1] if offset_group else 0):
        raise McapProblem(f"{name}: the footer puts the summary offsets at byte {offsets_start}, "
                          f"they start at byte {offset_group[1] if offset_group else 0}")
    # a writer may point at an empty group (the mcap library's, for no attachment index)
    summary_offsets = [s for s in summary_offsets if s[2] != 0]
    if summary_offsets and sorted(summary_offsets) != sorted(groups):
        raise McapProblem(f"{name}: the summary offset records do not point at the summary's record groups")


def _check_chunk_indexes(name: str, indexes: list[bytes], found: _Found) -> None:
    by_offset = {c.offset: c for c in found.chunks}
    seen = set()
    for body in indexes:
        start_time, end_time, offset, length, n = struct.unpack_from("<QQQQI", body, 0)
        pos = 36
        offsets = dict(struct.iter_unpack("<HQ", body[pos:pos + n]))
        pos += n
        (index_length,) = U64.unpack_from(body, pos)
        (k,) = U32.unpack_from(body, pos + 8)
        compression = body[pos + 12:pos + 12 + k].decode("utf-8")
        compressed, uncompressed = struct.unpack_from("<QQ", body, pos + 12 + k)
        chunk = by_offset.get(offset)
        if chunk is None:
            raise McapProblem(f"{name}: a chunk index points at byte {offset}, where no chunk starts")
        seen.add(offset)
        said = (start_time, end_time, length, compression, compressed, uncompressed)
        is_ = (chunk.start_time, chunk.end_time, chunk.length, chunk.compression, chunk.compressed_size,
               chunk.uncompressed_size)
        if said != is_:
            raise McapProblem(f"{name}: the chunk index of the chunk at byte {offset} says "
                              f"(start, end, length, compression, sizes) {said}, the chunk {is_}")
        if not chunk.compression and (offsets != chunk.index_offsets or index_length != chunk.index_length):
            raise McapProblem(f"{name}: the chunk index of the chunk at byte {offset} does not point at "
                              "its message indexes")
    if indexes and seen != set(by_offset):
        missing = sorted(set(by_offset) - seen)
        raise McapProblem(f"{name}: the chunk at byte {missing[0]} has no chunk index")


def _check_statistics(name: str, body: bytes, found: _Found) -> None:
    messages, schemas, channels, attachments, metadata, chunks = struct.unpack_from("<QHIIII", body, 0)
    start_time, end_time, n = struct.unpack_from("<QQI", body, 26)
    counts = dict(struct.iter_unpack("<HQ", body[46:46 + n]))
    actual = {
        "message_count": (messages, sum(found.counts.values())),
        "schema_count": (schemas, sum(1 for op, _ in found.definitions if op == OP_SCHEMA)),
        "channel_count": (channels, sum(1 for op, _ in found.definitions if op == OP_CHANNEL)),
        "attachment_count": (attachments, found.attachments),
        "metadata_count": (metadata, len(found.metadata)),
        "chunk_count": (chunks, len(found.chunks)),
    }
    if found.first_time is not None:  # without messages writers differ (0, or rosbags' 2**63 - 1)
        actual["message_start_time"] = (start_time, found.first_time)
        actual["message_end_time"] = (end_time, found.last_time or 0)
    for key, (said, is_) in actual.items():
        if said != is_:
            raise McapProblem(f"{name}: the statistics record says {key} {said}, the file holds {is_}")
    if {c: k for c, k in counts.items() if k} != {c: k for c, k in found.counts.items() if k}:
        wrong = next(c for c in sorted(set(counts) | set(found.counts)) if counts.get(c, 0) != found.counts.get(c, 0))
        raise McapProblem(f"{name}: the statistics record counts {counts.get(wrong, 0)} messages on channel {wrong} "
                          f"({found.topics.get(wrong, '?')}), the file holds {found.counts.get(wrong, 0)}")


def _check_metadata(name: str, indexes: list[bytes], found: _Found, bag_info: Mapping[str, Any] | None) -> None:
    for body in indexes:
        offset, length, n = struct.unpack_from("<QQI", body, 0)
        key = body[20:20 + n].decode("utf-8")
        where = found.metadata.get(key)
        if where is None or (where[0], where[1]) != (offset, length):
            raise McapProblem(f"{name}: the metadata index of {key!r} points at byte {offset}, "
                              f"where no such metadata record is")
    record = found.metadata.get("rosbag2")
    if bag_info is None or record is None:
        return
    body = record[2]
    pos = 4 + U32.unpack_from(body, 0)[0] + 4  # name, then the map's byte length
    entries: dict[str, str] = {}
    end = pos + U32.unpack_from(body, pos - 4)[0]
    while pos < end:
        (k,) = U32.unpack_from(body, pos)
        key = body[pos + 4:pos + 4 + k].decode("utf-8")
        pos += 4 + k
        (v,) = U32.unpack_from(body, pos)
        entries[key] = body[pos + 4:pos + 4 + v].decode("utf-8")
        pos += 4 + v
    try:
        inner = yaml.safe_load(entries.get("serialized_metadata", ""))
    except (yaml.YAMLError, RecursionError):
        inner = None
    if inner != dict(bag_info):
        raise McapProblem(f"{name}: its rosbag2 metadata record is not the bag's metadata.yaml")


def _check_counts(name: str, found: _Found, bag_info: Mapping[str, Any] | None) -> None:
    if bag_info is None or found.compressed:
        return
    counts: dict[str, int] = {}
    for channel, topic in found.topics.items():
        counts[topic] = counts.get(topic, 0) + found.counts.get(channel, 0)
    problem = _counts_problem(name, bag_info, counts, found.first_time, found.last_time)
    if problem is not None:
        raise McapProblem(problem)
