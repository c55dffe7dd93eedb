"""A killed recorder's MCAP file: every message of its complete chunks reads back, in the
order written, wherever the file was cut; nothing of a chunk cut short is taken."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rosbags.rosbag2 import Reader

from simforge_ros.record.bag import BagError, BagWriter
from simforge_ros.record.salvage import read_mcap_prefix

IMAGE = "sensor_msgs/msg/Image"
CLOCK = "rosgraph_msgs/msg/Clock"


def _bag(tmp_path: Path) -> tuple[Path, list[tuple[str, str, int, bytes]]]:
    """Nine four-camera steps (~700 KB each): several 1 MB chunks, then the footer."""
    messages = []
    for k in range(9):
        t_ns = k * 100_000_000
        messages.append(("/clock", CLOCK, t_ns, os.urandom(16)))
        for cam in ("front", "left", "rear", "right"):
            messages.append((f"/camera/{cam}/image_raw", IMAGE, t_ns, os.urandom(320 * 180 * 3 + 64)))
    with BagWriter(tmp_path / "bag") as bag:
        for message in messages:
            bag.write(*message)
    return tmp_path / "bag" / "bag.mcap", messages


def test_a_whole_file_reads_back_every_message_in_order(tmp_path):
    path, messages = _bag(tmp_path)
    prefix = read_mcap_prefix(path)
    assert [(m.topic, m.type_name, m.t_ns, m.data) for m in prefix.messages] == messages
    assert prefix.chunks >= 3 and prefix.bytes_read == prefix.bytes_total == path.stat().st_size


@pytest.mark.parametrize("cut", [0.35, 0.5, 0.8, 0.999])
def test_a_cut_file_gives_the_messages_of_its_complete_chunks(tmp_path, cut):
    path, messages = _bag(tmp_path)
    with Reader(tmp_path / "bag") as reader:  # the chunks, from the complete file's own index
        chunks = list(reader.storage.storages[0].chunks)  # type: ignore[attr-defined]  (cleared on close)
    assert len(chunks) >= 3
    whole = path.read_bytes()
    size = int(len(whole) * cut)
    path.write_bytes(whole[:size])
    prefix = read_mcap_prefix(path)
    complete = [c for c in chunks if c.chunk_start_offset + c.chunk_length <= size]
    assert prefix.chunks == len(complete)
    assert len(prefix.messages) == sum(sum(c.channel_count.values()) for c in complete)
    got = [(m.topic, m.type_name, m.t_ns, m.data) for m in prefix.messages]
    assert got == messages[:len(got)]  # the first ones, in order


def test_not_an_mcap_file_is_named(tmp_path):
    path = tmp_path / "bag.mcap"
    path.write_bytes(b"SQLite format 3\0")
    with pytest.raises(BagError, match="not an MCAP file"):
        read_mcap_prefix(path)
