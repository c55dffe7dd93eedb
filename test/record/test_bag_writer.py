"""The bag writer's lean MCAP storage writes exactly the bytes rosbags' own writer does,
but for each channel's type hash, which rosbag2's own MCAP plugin writes too."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
import yaml
from rosbags.rosbag2 import Reader, Writer
from rosbags.rosbag2.enums import StoragePlugin
from rosbags.rosbag2.storage_mcap import McapWriter

from simforge_ros.record import bag as bag_module
from simforge_ros.record.bag import BackgroundBagWriter, BagWriter, offered_qos, typestore

IMAGE = "sensor_msgs/msg/Image"
CLOCK = "rosgraph_msgs/msg/Clock"


def _messages() -> list[tuple[str, str, int, bytes]]:
    """Enough four-camera steps (~700 KB each) to close several 1 MB chunks, with small
    messages between the images; random payload bytes are fine for the storage layer."""
    rng = os.urandom
    out = []
    for k in range(9):
        t_ns = k * 100_000_000
        out.append(("/clock", CLOCK, t_ns, rng(16)))
        for cam in ("front", "left", "rear", "right"):
            out.append((f"/camera/{cam}/image_raw", IMAGE, t_ns, rng(320 * 180 * 3 + 64)))
    return out


def _with_rosbags(path: Path, messages: list[tuple[str, str, int, bytes]]) -> None:
    store = typestore()
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {}
        for topic, msgtype, t_ns, raw in messages:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msgtype, typestore=store,
                                                     offered_qos_profiles=offered_qos(topic))
            writer.write(conns[topic], t_ns, raw)


def test_lean_mcap_file_is_byte_identical_to_rosbags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    messages = _messages()
    (tmp_path / "ref").mkdir()
    (tmp_path / "lean").mkdir()
    # rosbags' own writer with the lean one's channels (their type hash): every other byte its own
    monkeypatch.setattr(McapWriter, "add_connection", bag_module._LeanMcapWriter.add_connection)
    _with_rosbags(tmp_path / "ref" / "bag", messages)  # same bag name: the metadata names the file
    monkeypatch.undo()
    with BagWriter(tmp_path / "lean" / "bag") as bag:
        for message in messages:
            bag.write(*message)
    ref = (tmp_path / "ref" / "bag" / "bag.mcap").read_bytes()
    lean = (tmp_path / "lean" / "bag" / "bag.mcap").read_bytes()
    assert len(ref) > 3 * 2**20  # several chunks were closed
    assert lean == ref


def test_lean_bag_reads_back_every_message_in_order(tmp_path: Path) -> None:
    messages = _messages()
    with BackgroundBagWriter(tmp_path / "bag", batch_count=5) as bag:
        for message in messages:
            bag.write(*message)
    with Reader(tmp_path / "bag") as reader:  # raw: the payloads are not real messages
        got = [(conn.topic, t_ns, bytes(raw)) for conn, t_ns, raw in reader.messages()]
    assert got == [(topic, t_ns, raw) for topic, _, t_ns, raw in messages]


def test_the_bag_records_the_qos_each_topic_is_published_with(tmp_path: Path) -> None:
    """`ros2 bag play` adapts its publishers to the recorded offers: with none recorded, the
    run status and node parameters replayed volatile, lost to a reader that came later."""
    import yaml
    from rclpy.qos import DurabilityPolicy, HistoryPolicy

    from simforge_ros import topics
    from simforge_ros.nodes.common import LATCHED_QOS, RECORD_QOS

    with BagWriter(tmp_path / "bag") as bag:
        bag.write(topics.CLOCK, CLOCK, 0, bytes(8))
        bag.write(topics.STATUS, "std_msgs/msg/String", 0, bytes(8))
    meta = yaml.safe_load((tmp_path / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    offered = {t["topic_metadata"]["name"]: t["topic_metadata"]["offered_qos_profiles"]
               for t in meta["topics_with_message_count"]}
    for topic, qos in ((topics.CLOCK, RECORD_QOS), (topics.STATUS, LATCHED_QOS)):
        (profile,) = offered[topic]
        assert profile["reliability"] == "reliable"
        assert profile["durability"] == ("transient_local" if qos.durability == DurabilityPolicy.TRANSIENT_LOCAL
                                         else "volatile")
        assert profile["history"] == ("keep_all" if qos.history == HistoryPolicy.KEEP_ALL else "keep_last")
        assert profile["depth"] == (0 if qos.history == HistoryPolicy.KEEP_ALL else qos.depth)
    assert offered[topics.STATUS][0]["durability"] == "transient_local"
    assert set(topics.LATCHED) == {topics.STATUS, topics.NODE_PARAMS}
    with Reader(tmp_path / "bag") as reader:  # and it reads back with rosbags
        assert {c.topic: c.ext.offered_qos_profiles[0].durability.name for c in reader.connections} == {
            topics.CLOCK: "VOLATILE", topics.STATUS: "TRANSIENT_LOCAL"}


def _channel_metadata(path: Path) -> dict[str, dict[str, str]]:
    """Topic -> metadata of the channel records in an MCAP file's summary section."""
    data = path.read_bytes()
    pos, out = 8, {}
    while pos + 9 <= len(data) - 8:
        op, length = data[pos], struct.unpack_from("<Q", data, pos + 1)[0]
        body = data[pos + 9:pos + 9 + length]
        pos += 9 + length
        if op != 0x04:
            continue
        at, strings = 4, []
        for _ in range(2):  # topic, message encoding
            (n,) = struct.unpack_from("<I", body, at)
            strings.append(body[at + 4:at + 4 + n].decode())
            at += 4 + n
        (size,) = struct.unpack_from("<I", body, at)
        at, end, pairs = at + 4, at + 4 + size, []
        while at < end:
            (n,) = struct.unpack_from("<I", body, at)
            pairs.append(body[at + 4:at + 4 + n].decode())
            at += 4 + n
        out[strings[0]] = dict(zip(pairs[::2], pairs[1::2], strict=True))
    return out


def test_each_channel_names_its_type_hash_as_rosbag2s_mcap_plugin_writes_it(tmp_path: Path) -> None:
    """A tool reading the .mcap without its metadata.yaml (ros2 bag reindex, rosbag2_py on
    the file) takes each topic's type hash from the channel: it found none."""
    with BagWriter(tmp_path / "bag") as bag:
        for message in _messages()[:5]:
            bag.write(*message)
    meta = yaml.safe_load((tmp_path / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    hashes = {t["topic_metadata"]["name"]: t["topic_metadata"]["type_description_hash"]
              for t in meta["topics_with_message_count"]}
    channels = _channel_metadata(tmp_path / "bag" / "bag.mcap")
    assert set(channels) == set(hashes) and len(channels) == 5
    for topic, metadata in channels.items():
        assert metadata["topic_type_hash"] == hashes[topic] and hashes[topic].startswith("RIHS01_")
        assert list(metadata) == ["offered_qos_profiles", "topic_type_hash"]


def _slow_checkpoints(bag: BackgroundBagWriter, monkeypatch: pytest.MonkeyPatch, gates: dict[int, object]) -> None:
    """The writer thread's checkpoint n waits for ``gates[n]`` (a threading.Event) first."""
    real, calls = bag._bag.checkpoint, []

    def checkpoint() -> None:
        calls.append(None)
        gate = gates.get(len(calls))
        if gate is not None:
            assert gate.wait(30)  # type: ignore[attr-defined]
        real()

    monkeypatch.setattr(bag._bag, "checkpoint", checkpoint)


def test_a_checkpoint_is_in_the_file_by_the_one_after_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint was only queued: a recorder killed 0.4 s into a loaded run left an empty
    bag. The first checkpoint is in the file when checkpoint() returns; a later one returns
    without waiting for itself, but not before the one before it is in the file."""
    import threading

    messages = _messages()
    gates = {1: threading.Event(), 3: threading.Event()}
    with BackgroundBagWriter(tmp_path / "bag") as bag:
        _slow_checkpoints(bag, monkeypatch, gates)
        path = tmp_path / "bag" / "bag.mcap"

        def checkpoint_after(message: tuple[str, str, int, bytes]) -> threading.Thread:
            bag.write(*message)
            done = threading.Thread(target=bag.checkpoint)
            done.start()
            return done

        first = checkpoint_after(messages[0])
        first.join(0.3)
        assert first.is_alive() and messages[0][3] not in path.read_bytes()  # its own is not written yet
        gates[1].set()
        first.join(30)
        assert not first.is_alive() and messages[0][3] in path.read_bytes()
        second = checkpoint_after(messages[1])
        second.join(30)
        assert not second.is_alive()  # the first was in the file: no wait
        third = checkpoint_after(messages[2])  # the writer thread is held at this one
        third.join(30)
        assert not third.is_alive()  # the second was in the file: no wait for its own
        fourth = checkpoint_after(messages[3])
        fourth.join(0.3)
        assert fourth.is_alive()  # the third is not in the file yet
        gates[3].set()
        fourth.join(30)
        assert not fourth.is_alive()
        assert messages[2][3] in path.read_bytes()
