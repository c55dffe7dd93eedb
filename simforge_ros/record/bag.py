"""rosbag2 (MCAP or sqlite3) writing and reading with the `rosbags` library.

The recorder writes the CDR bytes exactly as they came off the wire (no re-encoding), and
registers the simforge_ros message definitions so the bag is self-describing: `ros2 bag
play` on a real ROS 2 install and other MCAP readers can use it. Reading deserialises with
the same typestore, which is also how the recorder itself turns bytes into field values,
so a digest recomputed from the bag follows exactly the path the recorder took.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from rosbags.interfaces import Connection
from rosbags.rosbag2 import Reader, Writer
from rosbags.rosbag2.enums import StoragePlugin
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from simforge_ros.core.errors import SimforgeError

PACKAGE = "simforge_ros"
STORAGES = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}


class BagError(SimforgeError):
    """A bag that is missing, truncated or unreadable; the message names the file."""


def msg_dirs() -> list[Path]:
    """Where the .msg definitions are: the installed share dir, then the source tree."""
    here = Path(__file__).resolve()
    return [p for p in (Path(sys.prefix) / "share" / PACKAGE / "msg", here.parents[2] / "msg") if p.is_dir()]


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


class BagWriter:
    """Writes raw CDR messages into a new bag; a context manager that always closes it."""

    def __init__(self, path: Path, storage: str = "mcap") -> None:
        """Raises: BagError: unknown storage, or the path exists."""
        if storage not in STORAGES:
            raise BagError(f"{path}: storage {storage!r} is not one of {sorted(STORAGES)}")
        if path.exists():
            raise BagError(f"{path}: exists already; a run directory is never overwritten")
        self._writer = Writer(path, version=9, storage_plugin=STORAGES[storage])
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

    def write(self, topic: str, msgtype: str, t_ns: int, raw: bytes | memoryview) -> None:
        """Write one serialised message; ``t_ns`` is its simulation time in nanoseconds."""
        conn = self._connections.get(topic)
        if conn is None:
            conn = self._writer.add_connection(topic, msgtype, typestore=self._store)
            self._connections[topic] = conn
        self._writer.write(conn, t_ns, raw)


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
            raise BagError(f"writing the bag failed: {type(self._error).__name__}: {self._error}") from self._error

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
                for item in batch:
                    self._bag.write(*item)
            except BaseException as err:  # noqa: BLE001 - handed to the producer
                self._error = err
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


def read_bag(path: Path) -> Iterator[BagMessage]:
    """Every message of a bag in log-time order, deserialised.

    Raises:
        BagError: the bag is missing, truncated or holds undecodable data.
    """
    if not (path / "metadata.yaml").is_file():
        raise BagError(f"{path}: not a rosbag2 directory (metadata.yaml missing)")
    store = typestore()
    try:
        with Reader(path) as reader:
            for conn, t_ns, raw in reader.messages():
                try:
                    msg = store.deserialize_cdr(raw, conn.msgtype)
                except Exception as err:
                    raise BagError(f"{path}: {conn.topic} message at t={t_ns} ns cannot be decoded: {err}") from err
                yield BagMessage(conn.topic, conn.msgtype, t_ns, bytes(raw), msg)
    except BagError:
        raise
    except Exception as err:
        raise BagError(f"{path}: unreadable bag: {type(err).__name__}: {err}") from err
