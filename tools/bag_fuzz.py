"""Flip one random bit of a run's bag file at a time and count the flips `simforge verify`
does not notice, with where each one fell (a development tool: it prints figures, it
asserts nothing).

    .venv/bin/simforge run right_turn --steps 30 --out /tmp/fz \\
        --set 'sim_bridge.cameras=[front,left,rear,right]' --set sim_bridge.width=64 --set sim_bridge.height=36
    .venv/bin/python tools/bag_fuzz.py /tmp/fz/right_turn-s0-00-*/ --flips 400 --seed 1

Each flip is made in a copy of the run directory. For an MCAP bag an unnoticed flip is
named by the record it fell in (inside a chunk: the record and, for a message, its topic
and the field of the message record, or the byte of its CDR data); for a sqlite3 bag, by
whether the messages, topics and other tables still read the same (a flip in a page's free
space changes nothing a reader can see).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import struct
import sys
import tempfile
from collections import Counter
from pathlib import Path

from simforge_ros.core.errors import SimforgeError
from simforge_ros.record.verify import verify_run

_OPS = {1: "header", 2: "footer", 3: "schema", 4: "channel", 5: "message", 6: "chunk", 7: "message_index",
        8: "chunk_index", 9: "attachment", 10: "attachment_index", 11: "statistics", 12: "metadata",
        13: "metadata_index", 14: "summary_offset", 15: "data_end"}
_MESSAGE_FIELDS = ((1, "opcode"), (9, "length"), (11, "channel"), (15, "sequence"), (23, "log_time"),
                   (31, "publish_time"))


def mcap_regions(blob: bytes) -> tuple[list[tuple[int, int, str, int | None]], dict[int, str]]:
    """(start, end, record name, channel) of every record, chunks walked; channel -> topic."""
    regions: list[tuple[int, int, str, int | None]] = []
    channels: dict[int, str] = {}

    def walk(start: int, end: int, inside: bool) -> None:
        pos = start
        while pos + 9 <= end:
            op, length = struct.unpack_from("<BQ", blob, pos)
            body = pos + 9
            if op == 4:
                (n,) = struct.unpack_from("<I", blob, body + 4)
                channels[struct.unpack_from("<H", blob, body)[0]] = blob[body + 8:body + 8 + n].decode()
            if op == 6 and not inside:
                at = body + 28
                at += 4 + struct.unpack_from("<I", blob, at)[0]
                (records,) = struct.unpack_from("<Q", blob, at)
                regions.append((pos, at + 8, "chunk (its header)", None))
                walk(at + 8, at + 8 + records, True)
            else:
                channel = struct.unpack_from("<H", blob, body)[0] if op == 5 else None
                regions.append((pos, body + length, ("chunk/" if inside else "") + _OPS.get(op, str(op)), channel))
            pos = body + length

    walk(8, len(blob) - 8, False)
    return regions, channels


def mcap_where(offset: int, regions: list[tuple[int, int, str, int | None]], channels: dict[int, str]) -> str:
    for start, end, name, channel in regions:
        if start <= offset < end:
            rel = offset - start
            if channel is None:
                return name
            topic = channels.get(channel, "?")
            field = next((f for limit, f in _MESSAGE_FIELDS if rel < limit), None)
            return f"{name} {topic} " + (field if field else f"data byte {rel - 31}")
    return "magic"


def sqlite_tables(path: Path) -> dict[str, list[tuple[object, ...]]]:
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: con.execute(f"SELECT * FROM {n} ORDER BY rowid").fetchall() for n in names}
    finally:
        con.close()


def _row_change(before: dict[str, list[tuple[object, ...]]], after: dict[str, list[tuple[object, ...]]],
                changed: list[str]) -> str:
    """Where a message row changed: its topic id and the column, or the byte of its data."""
    if changed != ["messages"]:
        return ""
    for old, new in zip(before["messages"], after["messages"], strict=False):
        if old != new:
            if old[3] != new[3] and isinstance(old[3], bytes) and isinstance(new[3], bytes):
                at = next(i for i, (a, b) in enumerate(zip(old[3], new[3], strict=False)) if a != b)
                return f" (topic {old[1]}, data byte {at})"
            column = ("id", "topic_id", "timestamp")[next(i for i in range(3) if old[i] != new[i])]
            return f" (topic {old[1]}, {column})"
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a run directory (verified as it is)")
    parser.add_argument("--flips", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not verify_run(args.run).ok:
        print(f"{args.run}: does not verify as it is", file=sys.stderr)
        return 2
    (bag_file,) = [p for p in (args.run / "bag").iterdir() if p.suffix in (".mcap", ".db3")]
    blob = bag_file.read_bytes()
    mcap = bag_file.suffix == ".mcap"
    regions, channels = mcap_regions(blob) if mcap else ([], {})
    tables = None if mcap else sqlite_tables(bag_file)
    rng = random.Random(args.seed)
    unnoticed: Counter[str] = Counter()
    unreadable = 0
    with tempfile.TemporaryDirectory(prefix="simforge-fuzz-") as tmp:
        for i in range(args.flips):
            offset, bit = rng.randrange(len(blob)), 1 << rng.randrange(8)
            work = Path(tmp) / f"run{i}"
            shutil.copytree(args.run, work)
            flipped = bytearray(blob)
            flipped[offset] ^= bit
            (work / "bag" / bag_file.name).write_bytes(bytes(flipped))
            try:
                noticed = not verify_run(work).ok
            except SimforgeError:
                noticed, unreadable = True, unreadable + 1
            if not noticed:
                if mcap:
                    unnoticed[mcap_where(offset, regions, channels)] += 1
                else:
                    try:
                        after = sqlite_tables(work / "bag" / bag_file.name)
                        before = tables or {}
                        changed = [n for n in sorted(set(after) | set(before)) if after.get(n) != before.get(n)]
                    except sqlite3.Error as err:
                        changed = [f"unreadable by sqlite3 ({err})"]
                    unnoticed["tables changed: " + ", ".join(changed) + _row_change(before, after, changed)
                              if changed else "nothing a reader sees"] += 1
            shutil.rmtree(work)
    print(f"{args.flips} flips of {bag_file.name} ({len(blob)} bytes): {sum(unnoticed.values())} unnoticed, "
          f"{unreadable} refused as unreadable (exit 2), the rest named as mismatches")
    for where, n in unnoticed.most_common():
        print(f"  unnoticed {n:4d}  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
