"""rosbag2 (MCAP or sqlite3) writing and reading with the `rosbags` library.

The recorder writes the CDR bytes exactly as they came off the wire (no re-encoding), and
registers the simforge_ros message definitions so the bag is self-describing: `ros2 bag
play` on a real ROS 2 install and other MCAP readers can use it. Reading deserialises with
the same typestore, which is also how the recorder itself turns bytes into field values,
so a digest recomputed from the bag follows exactly the path the recorder took. MCAP
is written by rosbags' own storage code with its copies taken out (_LeanMcapWriter): the
file is byte for byte what rosbags writes (a test holds it to that).
"""

from __future__ import annotations

import queue
import struct
import threading
from collections import defaultdict
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, cast

from rosbags.interfaces import (
    Connection,
    ConnectionExtRosbag2,
    Qos,
    QosDurability,
    QosHistory,
    QosLiveliness,
    QosReliability,
    QosTime,
)
from rosbags.rosbag2 import Reader, Writer
from rosbags.rosbag2.enums import CompressionMode, StoragePlugin
from rosbags.rosbag2.storage_mcap import (
    Channel,
    McapWriter,
    PendingChunk,
    write_channel,
    write_record,
    write_string,
    write_uint16,
    write_uint32,
    write_uint64,
)
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from simforge_ros import topics
from simforge_ros.core.errors import SimforgeError
from simforge_ros.resources import PACKAGE, find_dirs

STORAGES = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}


_UNSPECIFIED = QosTime(0, 0)  # rmw's "default" deadline, lifespan and lease


def offered_qos(topic: str) -> tuple[Qos, ...]:
    """The QoS simforge's publisher of ``topic`` offers (nodes.common RECORD_QOS, LATCHED_QOS
    and TF_STATIC_QOS), for the bag's metadata: `ros2 bag play` adapts its publishers to the
    recorded offers, so the run status, node parameters and /tf_static replay latched (a
    reader that comes later still gets them) and the rest reliable. An empty list replayed
    them volatile."""
    depth = 1 if topic == topics.TF_STATIC else 16 if topic in topics.LATCHED else 0
    latched = depth > 0
    return (Qos(
        history=QosHistory.KEEP_LAST if latched else QosHistory.KEEP_ALL, depth=depth,
        reliability=QosReliability.RELIABLE,
        durability=QosDurability.TRANSIENT_LOCAL if latched else QosDurability.VOLATILE,
        deadline=_UNSPECIFIED, lifespan=_UNSPECIFIED, liveliness=QosLiveliness.AUTOMATIC,
        liveliness_lease_duration=_UNSPECIFIED, avoid_ros_namespace_conventions=False,
    ),)


class BagError(SimforgeError):
    """A bag that is missing, truncated or unreadable; the message names the file."""


class BagWriteError(BagError):
    """Writing a bag failed (a full disk): the writer's failure, not bad input."""


def msg_dirs() -> list[Path]:
    """Where the .msg definitions are: the source tree's, an install's share/simforge_ros/msg
    (colcon's prefix above the package, or sys.prefix's: simforge_ros.resources)."""
    return find_dirs("msg")


_TYPESTORE: Typestore | None = None


def typestore() -> Typestore:
    """ROS 2 Kilted standard types plus every simforge_ros message (built once)."""
    global _TYPESTORE  # a cache of immutable type definitions, not simulation state
    if _TYPESTORE is None:
        store = get_typestore(Stores.ROS2_KILTED)
        dirs = msg_dirs()
        if not dirs:
            raise BagError("simforge_ros message definitions (msg/*.msg) not found")
        types: dict[str, Any] = {}
        for path in sorted(dirs[0].glob("*.msg")):
            types.update(get_types_from_msg(path.read_text(), f"{PACKAGE}/msg/{path.stem}"))
        store.register(types)
        _TYPESTORE = store
    return _TYPESTORE


class _Parts:
    """The pending MCAP chunk as a list of the byte objects written into it, not a copy.

    rosbags' McapWriter copies every message about five times on its way to the file
    (into a record, into the chunk, out of the chunk, into the chunk record, into the
    file); a four-camera step is ~700 KB, which made the bag writer cost ~1 ms of CPU a
    step. Every object written here is immutable or never touched again (fresh bytes,
    views of records that are dropped), so keeping references is safe.
    """

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []
        self.size = 0

    def write(self, data: bytes | memoryview) -> int:
        self.parts.append(data)
        n = len(data) if isinstance(data, bytes) else data.nbytes
        self.size += n
        return n

    def tell(self) -> int:
        return self.size

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


class _LeanMcapWriter(McapWriter):
    """rosbags' MCAP storage with the pending chunk kept as references (see _Parts):
    the bytes in the file are exactly those rosbags writes (same records, same order),
    but for each channel's ``topic_type_hash`` (add_connection)."""

    def __init__(self, path: Path, compression: CompressionMode) -> None:
        super().__init__(path, compression)
        self.chunk.bio = _Parts()  # type: ignore[assignment]

    def add_connection(self, connection: Connection, offered_qos_profiles: str) -> None:
        """A channel whose metadata also holds its type's hash (``topic_type_hash``), as
        rosbag2's own MCAP plugin writes it: a tool reading the .mcap without its
        metadata.yaml (``ros2 bag reindex``, rosbag2_py on the file) reads each topic's
        type hash from there, and got an empty one."""
        metadata = BytesIO()  # rosbags' add_connection, with the hash after the QoS offers
        write_string(metadata, "offered_qos_profiles")
        write_string(metadata, offered_qos_profiles)
        if connection.digest:
            write_string(metadata, "topic_type_hash")
            write_string(metadata, connection.digest)
        ext = cast("ConnectionExtRosbag2", connection.ext)
        self.channels.append(Channel(connection.id, connection.msgtype, connection.topic, ext.serialization_format,
                                     metadata.getvalue()))
        self.channel_stats[connection.id] = 0
        write_channel(self.chunk.bio, self.channels[-1], self.schemas)

    def write(self, connection: Connection, timestamp: int, data: bytes | memoryview) -> None:
        """A message record (opcode 0x05): channel id, sequence 0, log and publish time,
        the data; written into the chunk as two references, no copy of ``data``."""
        chunk = self.chunk
        self.message_start_time = min(timestamp, self.message_start_time)
        self.message_end_time = max(timestamp, self.message_end_time)
        self.channel_stats[connection.id] += 1
        chunk.message_start_time = min(timestamp, chunk.message_start_time)
        chunk.message_end_time = max(timestamp, chunk.message_end_time)
        chunk.msgs[connection.id].append((timestamp, chunk.bio.tell()))
        size = len(data) if isinstance(data, bytes) else memoryview(data).nbytes
        chunk.bio.write(_MESSAGE_HEADER.pack(0x05, 22 + size, connection.id, 0, timestamp, timestamp))
        chunk.bio.write(data)
        if chunk.bio.tell() > 2**20:
            self.close_chunk()

    def close_chunk(self) -> None:
        """Write the pending chunk; uncompressed, its parts go to the file one by one."""
        if self.compression:
            super().close_chunk()
        else:
            self._close_plain_chunk()
        self.chunk.bio = _Parts()  # type: ignore[assignment]

    def _close_plain_chunk(self) -> None:
        # rosbags' close_chunk with an identity compressor, minus its copies
        chunk, bio = self.chunk, self.bio
        parts = cast("_Parts", chunk.bio)
        rec = BytesIO()
        write_uint64(rec, chunk.message_start_time)
        write_uint64(rec, chunk.message_end_time)
        write_uint64(rec, parts.tell())
        write_uint32(rec, 0)
        write_string(rec, self.compression)
        write_uint64(rec, parts.tell())

        chunk_start = bio.tell()
        bio.write(b"\x06")
        write_uint64(bio, rec.tell() + parts.tell())
        bio.write(rec.getbuffer())
        for part in parts.parts:
            bio.write(part)
        chunk_end = bio.tell()

        offsets: list[tuple[int, int]] = []
        for cid, msgs in chunk.msgs.items():
            offsets.append((cid, bio.tell()))
            rec = BytesIO()
            write_uint16(rec, cid)
            write_uint32(rec, len(msgs) * 16)
            for ts, offset in msgs:
                write_uint64(rec, ts)
                write_uint64(rec, offset)
            write_record(bio, 0x07, rec)

        rec = BytesIO()
        write_uint64(rec, chunk.message_start_time)
        write_uint64(rec, chunk.message_end_time)
        write_uint64(rec, chunk_start)
        write_uint64(rec, chunk_end - chunk_start)
        write_uint32(rec, len(offsets) * 10)
        for cid, offset in offsets:
            write_uint16(rec, cid)
            write_uint64(rec, offset)
        write_uint64(rec, bio.tell() - chunk_end)
        write_string(rec, self.compression)
        write_uint64(rec, parts.tell())
        write_uint64(rec, parts.tell())
        self.chunks.append(rec)

        self.chunk = PendingChunk(2**63 - 1, 0, BytesIO(), defaultdict(list))


_MESSAGE_HEADER = struct.Struct("<BQHIQQ")  # opcode, record length, channel, sequence, log/publish time


class _Writer(Writer):
    """rosbags' rosbag2 Writer with the lean MCAP storage."""

    STORAGE_PLUGINS = MappingProxyType({**Writer.STORAGE_PLUGINS, StoragePlugin.MCAP: _LeanMcapWriter})


class BagWriter:
    """Writes raw CDR messages into a new bag; a context manager that always closes it."""

    def __init__(self, path: Path, storage: str = "mcap") -> None:
        """Raises: BagError: unknown storage, or the path exists."""
        if storage not in STORAGES:
            raise BagError(f"{path}: storage {storage!r} is not one of {sorted(STORAGES)}")
        if path.exists():
            raise BagError(f"{path}: exists already; a run directory is never overwritten")
        self._writer = _Writer(path, version=9, storage_plugin=STORAGES[storage])
        self._store = typestore()
        self._connections: dict[str, Connection] = {}
        self._open = False

    def __enter__(self) -> BagWriter:
        self.open()
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.close()

    def open(self) -> None:
        self._writer.open()
        self._open = True

    def close(self) -> None:
        if self._open:
            self._open = False
            self._writer.close()

    def checkpoint(self) -> None:
        """Put every message written so far into the file now (MCAP: the pending chunk is
        closed early), so that a process killed after this leaves them readable
        (record.salvage). sqlite3 bags are left to their own transactions."""
        storage = self._writer.storage
        if isinstance(storage, _LeanMcapWriter) and storage.chunk.msgs:
            storage.close_chunk()
            storage.bio.flush()

    def write(self, topic: str, msgtype: str, t_ns: int, raw: bytes | memoryview) -> None:
        """Write one serialised message; ``t_ns`` is its simulation time in nanoseconds."""
        conn = self._connections.get(topic)
        if conn is None:
            conn = self._writer.add_connection(topic, msgtype, typestore=self._store,
                                               offered_qos_profiles=offered_qos(topic))
            self._connections[topic] = conn
        self._writer.write(conn, t_ns, raw)


_CHECKPOINT: list[tuple[str, str, int, bytes | memoryview]] = []  # in the queue: BagWriter.checkpoint (empty)
CHECKPOINT_WAIT_S = 10.0
"""The longest a checkpoint waits for the one it depends on to be in the file (a stuck
disk: the recorder then goes on, and the run's own timeouts speak)."""


class BackgroundBagWriter:
    """A BagWriter fed from a thread of its own: the recorder hands over batches of
    messages and goes on; the file writes (which release the GIL) overlap its work.

    Messages keep their order (one FIFO, one writer thread). A batch is handed over once
    it holds ``batch_bytes`` or ``batch_count`` messages; at most ``max_batches`` wait, after
    which ``write`` blocks (memory stays bounded when the disk is slower than the run).
    A write error is raised by the next ``write``/``flush``/``close``. The bag is opened,
    written and closed on the writer thread (sqlite3 objects must stay on their thread).
    """

    def __init__(self, path: Path, storage: str = "mcap", batch_bytes: int = 1 << 18, batch_count: int = 64,
                 max_batches: int = 16) -> None:
        """Raises: BagError: unknown storage, or the path exists."""
        self._bag = BagWriter(path, storage)
        self._queue: queue.Queue[list[tuple[str, str, int, bytes | memoryview]] | None] = queue.Queue(max_batches)
        self._batch: list[tuple[str, str, int, bytes | memoryview]] = []
        self._batch_size = 0
        self._limits = (batch_bytes, batch_count)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._open = False
        self._asked = 0  # checkpoints handed over (the producer's count)
        self._done = 0  # and put into the file (the writer thread's)
        self._checkpointed = threading.Condition()

    def __enter__(self) -> BackgroundBagWriter:
        self.open()
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.close()

    def open(self) -> None:
        """Open the bag (on the writer thread). Raises: BagError: it cannot be opened."""
        opened = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(opened,), name="bag-writer", daemon=True)
        self._thread.start()
        opened.wait()
        if self._error is not None:
            self._thread.join()
            self._check()
        self._open = True

    def write(self, topic: str, msgtype: str, t_ns: int, raw: bytes | memoryview) -> None:
        """Queue one serialised message (``raw`` must not change afterwards: bytes are safe)."""
        self._check()
        self._batch.append((topic, msgtype, t_ns, raw))
        self._batch_size += len(raw)
        if self._batch_size >= self._limits[0] or len(self._batch) >= self._limits[1]:
            self.flush()

    def flush(self) -> None:
        """Hand the pending batch to the writer thread."""
        self._check()
        if self._batch:
            self._queue.put(self._batch)
            self._batch, self._batch_size = [], 0

    def checkpoint(self) -> None:
        """Hand over the pending batch and have the writer thread put everything so far
        into the file (BagWriter.checkpoint). Returns once the checkpoint before this one
        is in the file, and the first one once it is itself: a recorder killed at any time
        leaves at least its first step and what came up to its checkpoint before last.
        Before, a checkpoint was only queued, and a loaded machine's recorder killed 0.4 s
        into a run left an empty bag beside six steps in steps.jsonl (2 runs in 9)."""
        self.flush()
        self._queue.put(_CHECKPOINT)
        self._asked += 1
        due = max(1, self._asked - 1)
        with self._checkpointed:  # the previous one is mostly in the file by now: no wait
            self._checkpointed.wait_for(lambda: self._done >= due or self._error is not None,
                                        timeout=CHECKPOINT_WAIT_S)

    def close(self) -> None:
        """Write everything still pending and close the bag. Raises: BagError on a write error."""
        if not self._open:
            return
        self._open = False
        if self._batch and self._error is None:
            self._queue.put(self._batch)
        self._batch = []
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join()
        self._check()

    def _check(self) -> None:
        if self._error is not None:
            raise BagWriteError(f"writing the bag failed: {type(self._error).__name__}: {self._error}") \
                from self._error

    def _run(self, opened: threading.Event) -> None:
        try:
            self._bag.open()
        except BaseException as err:  # noqa: BLE001 - handed to the producer
            self._error = err
            return
        finally:
            opened.set()
        while True:
            batch = self._queue.get()
            if batch is None:
                break
            if self._error is not None:
                continue  # keep draining so that no producer blocks forever
            try:
                if batch is _CHECKPOINT:
                    self._bag.checkpoint()
                    with self._checkpointed:
                        self._done += 1
                        self._checkpointed.notify_all()
                for item in batch:
                    self._bag.write(*item)
            except BaseException as err:  # noqa: BLE001 - handed to the producer
                self._error = err
                with self._checkpointed:  # a checkpoint waiting for it waits no more
                    self._checkpointed.notify_all()
        try:
            self._bag.close()
        except BaseException as err:  # noqa: BLE001 - handed to the producer
            self._error = self._error or err


@dataclass(frozen=True)
class BagMessage:
    """One message read back from a bag."""

    topic: str
    msgtype: str
    t_ns: int
    raw: bytes
    msg: Any  # rosbags dataclass instance


@contextmanager
def _opened(path: Path) -> Iterator[Reader]:
    """A rosbag2 reader of ``path``; whatever fails while it is open is a BagError naming
    the bag (a BagError raised meanwhile passes as it is)."""
    try:
        if not (path / "metadata.yaml").is_file():
            raise BagError(f"{path}: not a rosbag2 directory (metadata.yaml missing)")
    except OSError as err:  # a directory that cannot be searched
        raise BagError(f"{path}: unreadable: {err.strerror or err}") from err
    try:
        with Reader(path) as reader:
            yield reader
    except BagError:
        raise
    except Exception as err:
        raise BagError(f"{path}: unreadable bag: {_why_unreadable(path, err)}") from err


def _why_unreadable(path: Path, err: Exception) -> str:
    """What is wrong with a bag the reader failed on, in the bag's terms where the file's
    own structure says (a truncated MCAP, metadata that is not rosbag2's), rather than the
    reader library's exception text (``ord() expected a character``); that text otherwise."""
    import yaml

    from simforge_ros.record.bag_structure import bag_problem  # it imports this module

    try:
        info = yaml.safe_load((path / "metadata.yaml").read_bytes())
    except (OSError, yaml.YAMLError, UnicodeDecodeError, RecursionError) as bad:
        return f"metadata.yaml: not readable YAML ({type(bad).__name__}; corrupt?)"
    if not isinstance(info, dict) or not isinstance(info.get("rosbag2_bagfile_information"), dict):
        return "metadata.yaml: not rosbag2 metadata (no 'rosbag2_bagfile_information' mapping; empty or truncated?)"
    try:
        problem = bag_problem(path)
    except BagError as unreadable:
        return str(unreadable)
    except Exception:  # noqa: BLE001 - the structure check met something it does not know: the reader's words
        problem = None
    return problem if problem is not None else f"{type(err).__name__}: {err}"


def bag_connections(path: Path) -> list[Connection]:
    """Every connection of a rosbag2 directory: topic, type, embedded message definition
    and recorded QoS offers.

    Raises:
        BagError: not a readable rosbag2 directory.
    """
    with _opened(path) as reader:
        return list(reader.connections)


def bag_index(path: Path) -> dict[str, Any]:
    """A bag's size in bytes, message count, first and last log times (simulation time;
    None when it holds no message) and topics (name, type, count), from its index alone.

    Raises:
        BagError: not a readable rosbag2 directory.
    """
    with _opened(path) as reader:
        topics = sorted((c.topic, c.msgtype, c.msgcount) for c in reader.connections)
        # rosbags' end_time is one past the last message's log time
        count, start_ns, end_ns = reader.message_count, reader.start_time, reader.end_time - 1
    return {
        "bytes": sum(f.stat().st_size for f in path.iterdir() if f.is_file()),
        "messages": count, "start_ns": start_ns if count else None, "end_ns": end_ns if count else None,
        "topics": [{"topic": t, "type": m, "messages": n} for t, m, n in topics],
    }


def read_bag(path: Path, topics: Collection[str] | None = None, start_ns: int | None = None,
             stop_ns: int | None = None) -> Iterator[BagMessage]:
    """Every message of a bag in log-time order, deserialised; only ``topics`` and log
    times in [start_ns, stop_ns) when given (the reader skips the rest unread).

    Raises:
        BagError: the bag is missing, truncated or holds undecodable data.
    """
    store = typestore()
    with _opened(path) as reader:
        # rosbags reads an empty connection filter as "all": no matching topic reads nothing
        chosen = () if topics is None else [c for c in reader.connections if c.topic in topics]
        if topics is not None and not chosen:
            return
        for conn, t_ns, raw in reader.messages(connections=chosen, start=start_ns, stop=stop_ns):
            if conn.msgtype not in store.types:  # a KeyError's repr said it: "cannot be decoded: 'foo_msgs/msg/Bar'"
                raise BagError(f"{path}: {conn.topic} message at t={t_ns} ns cannot be decoded: its type "
                               f"{conn.msgtype} is none simforge reads (ROS 2 Kilted's standard types and "
                               "simforge_ros's)")
            try:
                msg = store.deserialize_cdr(raw, conn.msgtype)
            except Exception as err:
                raise BagError(f"{path}: {conn.topic} message at t={t_ns} ns cannot be decoded: {err}") from err
            yield BagMessage(conn.topic, conn.msgtype, t_ns, bytes(raw), msg)
