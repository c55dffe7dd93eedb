from __future__ import annotations

import array
import hashlib
import struct
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pytest

from simforge_ros.core.canonical import MAGIC, encode, encode_general, feed, strip_wall, to_plain
from simforge_ros.core.values import Action, FrameStamp, Pose2D, TrajectoryPoint

_ENCODED_ELSEWHERE = """
import sys
from simforge_ros.core.canonical import encode
value = {"b": [1, 2.5, None, True, "é"], "a": b"\\x00\\xff", "c": {"z": -1, "y": 2**64 - 1}, "d": {"q": 1, "pq": 3}}
sys.stdout.write(encode(value).hex())
"""


def test_the_same_value_encodes_to_the_same_bytes_in_every_process() -> None:
    """Compared within one process, an encoding that ordered keys or set members by
    Python's string hash (seeded per process) passed: each process is asked here, with
    different hash seeds."""
    import os
    import subprocess
    import sys

    value = {"b": [1, 2.5, None, True, "é"], "a": b"\x00\xff", "c": {"z": -1, "y": 2**64 - 1}, "d": {"q": 1, "pq": 3}}
    assert encode(value).startswith(MAGIC)
    seen = {encode(value).hex()}
    for seed in ("1", "2", "3"):
        out = subprocess.run([sys.executable, "-c", _ENCODED_ELSEWHERE], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONHASHSEED": seed})
        assert out.returncode == 0, out.stderr
        seen.add(out.stdout)
    assert len(seen) == 1, seen


def test_key_order_does_not_matter() -> None:
    assert encode({"a": 1, "b": 2}) == encode({"b": 2, "a": 1})
    assert encode({"x": {"p": 1.0, "q": 2.0}}) == encode({"x": {"q": 2.0, "p": 1.0}})


def test_values_that_look_alike_differ() -> None:
    assert encode(0.0) != encode(-0.0)
    assert encode(1) != encode(1.0)
    assert encode(True) != encode(1)
    assert encode("ab") != encode(b"ab")
    assert encode(None) != encode(0)
    assert encode([1, [2]]) != encode([[1], 2])
    assert encode({"a": "b"}) != encode(["a", "b"])


def test_int_range_covers_int64_and_uint64() -> None:
    seen = {encode(n) for n in (0, 1, -1, 127, 128, -128, -129, 2**63 - 1, -(2**63), 2**64 - 1)}
    assert len(seen) == 10


def test_float_bytes_are_kept_including_nan_payload() -> None:
    assert encode(1.5) == MAGIC + b"D" + struct.pack(">d", 1.5)
    nan_a = struct.unpack(">d", bytes.fromhex("7ff8000000000001"))[0]
    nan_b = struct.unpack(">d", bytes.fromhex("7ff8000000000002"))[0]
    assert encode(nan_a) == encode(nan_a) and encode(nan_a) != encode(nan_b)
    assert encode(np.float64(0.25)) == encode(0.25)


def test_uint8_arrays_encode_like_bytes() -> None:
    raw = bytes(range(256))
    expected = encode(raw)
    assert encode(np.frombuffer(raw, dtype=np.uint8)) == expected
    assert encode(array.array("B", raw)) == expected
    assert encode(bytearray(raw)) == expected
    assert encode(memoryview(raw)) == expected


def test_numpy_arrays_are_canonical_across_byte_order_and_layout() -> None:
    a = np.arange(6, dtype="<f8").reshape(2, 3)
    assert encode(a) == encode(a.astype(">f8"))
    assert encode(a) == encode(np.asfortranarray(a))
    assert encode(a) != encode(a.reshape(3, 2))
    assert encode(a) != encode(a.astype("<f4"))
    with pytest.raises(TypeError):
        encode(np.array(["x"]))


def test_feed_streams_the_same_bytes() -> None:
    value = {"frame": np.zeros(100_000, dtype=np.uint8), "meta": [1, 2.0, "x"] * 5000}
    h = hashlib.sha256()
    feed(h, value)
    assert h.hexdigest() == hashlib.sha256(encode(value)).hexdigest()


def test_unknown_types_refused() -> None:
    with pytest.raises(TypeError):
        encode(object())
    with pytest.raises(TypeError):
        encode({1: "a"})
    with pytest.raises(TypeError):
        encode(Pose2D(0.0, 0.0, 0.0))  # to_plain first


def test_strip_wall_at_any_depth() -> None:
    timing = {
        "step": 1,
        "wall_step_ns": 5,
        "frames": [{"camera": "c", "wall_render_ns": 9, "t_us": 0}],
        "nested": {"wall_x": 1, "keep": 2},
    }
    assert strip_wall(timing) == {"step": 1, "frames": [{"camera": "c", "t_us": 0}], "nested": {"keep": 2}}
    assert encode(strip_wall(timing)) == encode(strip_wall({**timing, "wall_step_ns": 6}))


# --- three message forms ------------------------------------------------------------



class RclPose2D:
    _fields: ClassVar[dict[str, str]] = {"x_m": "double", "y_m": "double", "yaw_rad": "double"}

    def __init__(self, x_m: float = 0.0, y_m: float = 0.0, yaw_rad: float = 0.0) -> None:
        self.x_m, self.y_m, self.yaw_rad = x_m, y_m, yaw_rad

    @classmethod
    def get_fields_and_field_types(cls) -> dict[str, str]:
        return dict(cls._fields)


class RclTrajectoryPoint:
    @classmethod
    def get_fields_and_field_types(cls) -> dict[str, str]:
        return {"dt_us": "int64", "x_m": "double", "y_m": "double"}

    def __init__(self, dt_us: int, x_m: float, y_m: float) -> None:
        self.dt_us, self.x_m, self.y_m = dt_us, x_m, y_m


class RclDriverAction:
    @classmethod
    def get_fields_and_field_types(cls) -> dict[str, str]:
        return {
            "step": "uint64",
            "decided_step": "uint64",
            "t_us": "int64",
            "steer_rad": "double",
            "accel_mps2": "double",
            "has_plan": "boolean",
            "plan_step": "uint64",
            "anchor": "simforge_ros/Pose2D",
            "trajectory": "sequence<simforge_ros/TrajectoryPoint>",
        }

    def __init__(self) -> None:
        self.step = 0
        self.decided_step = 0
        self.t_us = 0
        self.steer_rad = 0.0
        self.accel_mps2 = 0.0
        self.has_plan = False
        self.plan_step = 0
        self.anchor = RclPose2D()
        self.trajectory: list[RclTrajectoryPoint] = []


class RclBlob:
    """A message with byte and numeric arrays, shaped the way rclpy delivers them."""

    @classmethod
    def get_fields_and_field_types(cls) -> dict[str, str]:
        return {"data": "sequence<uint8>", "fixed": "uint8[3]", "ranges": "sequence<float>", "cov": "double[4]",
                "flag": "octet", "ids": "sequence<int32>"}

    def __init__(self) -> None:
        self.data = array.array("B", [1, 2, 3, 250])
        self.fixed = np.array([7, 8, 9], dtype=np.uint8)
        self.ranges = array.array("f", [0.5, 1.25])
        self.cov = np.array([1.0, 0.0, 0.0, 1.0])
        self.flag = b"\x05"
        self.ids = array.array("i", [-1, 2])


@dataclass
class RbPose2D:
    x_m: float
    y_m: float
    yaw_rad: float
    __msgtype__: ClassVar[str] = "simforge_ros/msg/Pose2D"


@dataclass
class RbTrajectoryPoint:
    dt_us: int
    x_m: float
    y_m: float
    __msgtype__: ClassVar[str] = "simforge_ros/msg/TrajectoryPoint"


@dataclass
class RbDriverAction:
    step: int
    decided_step: int
    t_us: int
    steer_rad: float
    accel_mps2: float
    has_plan: bool
    plan_step: int
    anchor: RbPose2D
    trajectory: list[RbTrajectoryPoint]
    __msgtype__: ClassVar[str] = "simforge_ros/msg/DriverAction"


@dataclass
class RbBlob:
    data: np.ndarray
    fixed: np.ndarray
    ranges: np.ndarray
    cov: np.ndarray
    flag: int
    ids: np.ndarray
    __msgtype__: ClassVar[str] = "simforge_ros/msg/Blob"


@dataclass
class RbEmpty:
    structure_needs_at_least_one_member: int = 0
    __msgtype__: ClassVar[str] = "std_msgs/msg/Empty"


class RclEmpty:
    @classmethod
    def get_fields_and_field_types(cls) -> dict[str, str]:
        return {}


def test_same_action_same_plain_in_all_three_forms() -> None:
    values_form = Action(
        step=40, decided_step=38, t_us=4_000_000, steer_rad=-0.0, accel_mps2=1.5, has_plan=True,
        plan_step=38, anchor=Pose2D(1, 2.5, -0.25),  # ints in float fields become floats
        trajectory=(TrajectoryPoint(100_000, 1.0, 0.0), TrajectoryPoint(200_000, 2.0, 0.1)),
    )
    rcl = RclDriverAction()
    rcl.step, rcl.decided_step, rcl.t_us = 40, 38, 4_000_000
    rcl.steer_rad, rcl.accel_mps2, rcl.has_plan, rcl.plan_step = -0.0, 1.5, True, 38
    rcl.anchor = RclPose2D(1.0, 2.5, -0.25)
    rcl.trajectory = [RclTrajectoryPoint(100_000, 1.0, 0.0), RclTrajectoryPoint(200_000, 2.0, 0.1)]
    rb = RbDriverAction(
        np.uint64(40), 38, np.int64(4_000_000), -0.0, 1.5, True, 38, RbPose2D(1.0, 2.5, -0.25),
        [RbTrajectoryPoint(100_000, 1.0, 0.0), RbTrajectoryPoint(200_000, 2.0, 0.1)],
    )
    plain = to_plain(values_form)
    assert plain == to_plain(rcl) == to_plain(rb)
    assert encode(plain) == encode(to_plain(rcl)) == encode(to_plain(rb))
    assert isinstance(plain, dict) and plain["anchor"] == {"x_m": 1.0, "y_m": 2.5, "yaw_rad": -0.25}
    assert type(plain["anchor"]["x_m"]) is float  # type: ignore[index]
    assert type(to_plain(rb)["step"]) is int  # type: ignore[index]


def test_arrays_agree_between_rclpy_and_rosbags_forms() -> None:
    rb = RbBlob(
        data=np.array([1, 2, 3, 250], dtype=np.uint8),
        fixed=np.array([7, 8, 9], dtype=np.uint8),
        ranges=np.array([0.5, 1.25], dtype=np.float32),
        cov=np.array([1.0, 0.0, 0.0, 1.0]),
        flag=5,
        ids=np.array([-1, 2], dtype=np.int32),
    )
    plain = to_plain(RclBlob())
    assert plain == to_plain(rb)
    assert encode(plain) == encode(to_plain(rb))
    assert plain == {"data": b"\x01\x02\x03\xfa", "fixed": b"\x07\x08\x09", "ranges": [0.5, 1.25],
                     "cov": [1.0, 0.0, 0.0, 1.0], "flag": 5, "ids": [-1, 2]}


def test_uint8_sequence_given_as_list_or_bytes_in_rclpy_form() -> None:
    blob = RclBlob()
    blob.data = [1, 2, 3, 250]  # type: ignore[assignment]
    assert to_plain(blob)["data"] == b"\x01\x02\x03\xfa"  # type: ignore[index]
    blob.data = [b"\x01", b"\x02"]  # type: ignore[assignment]
    assert to_plain(blob)["data"] == b"\x01\x02"  # type: ignore[index]


def test_empty_messages_agree() -> None:
    assert to_plain(RclEmpty()) == to_plain(RbEmpty()) == {}


def test_frame_stamp_matches_frame_info_shape() -> None:
    plain = to_plain(FrameStamp("chase", 100_000, Pose2D(0.0, 0.0, 0.0)))
    assert plain == {"camera": "chase", "t_us": 100_000, "pose": {"x_m": 0.0, "y_m": 0.0, "yaw_rad": 0.0}}


def test_to_plain_refuses_unknown_objects() -> None:
    with pytest.raises(TypeError):
        to_plain(object())


@dataclass(frozen=True)
class _Holder:
    items: tuple[int, ...] = field(default_factory=tuple)


def test_plain_dataclass_tuples_become_lists() -> None:
    assert to_plain(_Holder((1, 2))) == {"items": [1, 2]}


@pytest.mark.parametrize(("value", "hex_after_magic"), [
    (None, "4e"),
    (False, "46"),
    (True, "54"),
    (0, "49" "0000000000000001" "00"),
    (-129, "49" "0000000000000002" "ff7f"),
    (2**64 - 1, "49" "0000000000000009" "00ffffffffffffffff"),
    (-0.0, "44" "8000000000000000"),
    ("é", "53" "0000000000000002" "c3a9"),
    (b"\x00\xff", "42" "0000000000000002" "00ff"),
    ([1, None], "4c" "0000000000000002" "49" "0000000000000001" "01" "4e"),
    ({"b": True, "a": 2}, "4d" "0000000000000002" "53" "0000000000000001" "61" "49" "0000000000000001" "02"
                          "53" "0000000000000001" "62" "54"),
    (np.array([[1, 2]], dtype="<i2"), "41" "53" "0000000000000002" "6932" "0000000000000002" "0000000000000001"
                                      "0000000000000002" "0000000000000004" "00010002"),
])
def test_the_bytes_are_the_documented_format_version_1(value: object, hex_after_magic: str) -> None:
    """Pinned by hand from the module's format table, not from encode's own output: a
    changed length order (">Q" to "<Q") or magic byte passed every test that compared
    encode with encode, and would have made every kept run's digests unverifiable."""
    expected = b"SFC\x01" + bytes.fromhex(hex_after_magic)
    assert encode(value) == expected
    assert encode_general(value) == expected
    sink = hashlib.sha256()
    feed(sink, value)
    assert sink.digest() == hashlib.sha256(expected).digest()
