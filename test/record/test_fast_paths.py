"""The fast paths of core.canonical give exactly the bytes and values of its general
walker, the recorder reads Image headers and leading stamps straight from CDR as rosbags
does, and its background bag writer keeps every message in order."""

from __future__ import annotations

import enum
import math
from pathlib import Path

import numpy as np
import pytest

from simforge_ros.core import canonical
from simforge_ros.core.canonical import encode, encode_general, to_plain
from simforge_ros.core.digest import step_record, step_record_bytes
from simforge_ros.core.values import Action, Pose2D, VehicleState
from simforge_ros.record.bag import BackgroundBagWriter, BagError, read_bag, typestore
from simforge_ros.record.image_cdr import image_view, leading_stamp_ns


class _Code(enum.IntEnum):
    A = 3


PLAIN_VALUES = [
    None, True, False, 0, 1, -1, 255, 256, -129, 2**63, -(2**64) - 5, 0.0, -0.0, 1.5, math.inf, -math.inf,
    "", "héllo ✓", b"", b"\x00\xff", [], (), [1, "a", None], (1.0, [2, [3]]),
    {}, {"b": 1, "a": [1.5, {"z": None, "y": b"x"}], "é": True},
    # handed to the reference encoder
    np.arange(6, dtype=np.float64).reshape(2, 3), np.frombuffer(b"abc", dtype=np.uint8), bytearray(b"qq"),
    np.int32(-7), np.float32(0.25), _Code.A, {"k": (np.uint8(3), memoryview(b"mv"))},
]


@pytest.mark.parametrize("value", PLAIN_VALUES, ids=lambda v: type(v).__name__)
def test_fast_encode_is_the_general_encoding(value):
    assert encode(value) == encode_general(value)


def test_dicts_encode_by_their_own_keys_whatever_their_order_and_shape_seen_before():
    """The fast path caches each key set's sorted order and writes a dict's float and int
    values inline: held to the reference for shapes seen, reordered and new, and for ints
    of every length (the inline header table covers up to 16 bytes)."""
    shapes = [{"b": 1, "a": 2.0}, {"a": 2.0, "b": 1}, {"b": 1, "c": -0.0}, {"b": True, "a": None},
              {"x": 2**127, "y": -(2**127) - 1, "z": 2**200, "u": 2**119, "w": -1, "v": 0}]
    for value in shapes + shapes:  # the second pass hits the cache
        assert encode(value) == encode_general(value)
    assert encode(shapes[0]) == encode(shapes[1])


def test_nan_keeps_its_bytes():
    assert encode([math.nan]) == encode_general([math.nan])


@pytest.mark.parametrize("bad", [{1: "x"}, {"a": 1, 2: "b"}, {"a": object()}, [set()]])
def test_values_without_an_encoding_are_refused_like_the_reference(bad):
    with pytest.raises(TypeError):
        encode(bad)
    with pytest.raises(TypeError):
        encode_general(bad)


def _timing(k: int) -> dict:
    return {
        "step": k, "t_us": k * 100_000, "engine_t_us": k * 100_000, "decision_us": 100_000, "tick_us": 20_000,
        "ticks_per_step": 5, "latency_steps": 0, "world_digest": f"{k:064x}",
        "frames": [{"camera": "front", "t_us": k * 100_000, "pose": {"x_m": 1.0, "y_m": -2.5, "yaw_rad": 0.1},
                    "wall_nested_ns": 5}],
        "wall_bridge_ns": 123 + k, "wall_driver_ns": 7, "wall_step_ns": 999,
    }


def _parts(k: int) -> tuple:
    action = to_plain(Action(k, k, k * 100_000, 0.01 * k, -0.5, False, 0, Pose2D(0.0, 0.0, 0.0), ()))
    state = to_plain(VehicleState(k, k * 100_000, Pose2D(1.0 * k, 2.0, 0.3), 5.0, 0.1, -0.2))
    return _timing(k), action, action, state


def test_step_record_bytes_drop_wall_fields_at_any_depth():
    timing, action, applied, state = _parts(3)
    reference = encode_general(step_record(3, to_plain(timing), action, applied, state))
    assert step_record_bytes(3, timing, action, applied, state) == reference
    other = dict(timing, wall_step_ns=1, frames=[dict(timing["frames"][0], wall_nested_ns=9)])
    assert step_record_bytes(3, other, action, applied, state) == reference


def test_step_record_bytes_of_value_objects_equal_those_of_their_plain_form():
    action = Action(1, 1, 100_000, 0.2, 0.0, False, 0, Pose2D(0.0, 0.0, 0.0), ())
    state = VehicleState(1, 100_000, Pose2D(1.0, 2.0, 0.3), 5, 0.1, -0.2)  # an int speed becomes a float
    assert step_record_bytes(1, _timing(1), action, action, state) == step_record_bytes(
        1, _timing(1), to_plain(action), to_plain(action), to_plain(state))


def _filled(cls, msgs, salt: int = 1):
    msg = cls()
    for name, kind in msg.get_fields_and_field_types().items():
        if kind.startswith("sequence<"):
            inner = kind[len("sequence<"):-1]
            if "/" in inner:
                item = getattr(msgs, inner.partition("/")[2])
                setattr(msg, name, [_filled(item, msgs, salt + 1), _filled(item, msgs, salt + 2)])
            elif inner == "string":
                setattr(msg, name, [f"s{salt}", "t"])
            else:
                setattr(msg, name, [salt, salt + 1] if "int" in inner else [0.5 * salt, -1.25])
        elif "/" in kind:
            setattr(msg, name, _filled(getattr(msgs, kind.partition("/")[2]), msgs, salt + 3))
        elif kind == "string":
            setattr(msg, name, f"{name}-{salt}")
        elif kind == "boolean":
            setattr(msg, name, True)
        elif kind in ("double", "float"):
            setattr(msg, name, 0.1 * salt + 1.0 / 3.0)
        else:
            setattr(msg, name, 40 + salt)
    return msg


def _rosbags_messages() -> list:
    pytest.importorskip("rclpy")
    import simforge_ros.msg as msgs
    from rclpy.serialization import serialize_message
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import CameraInfo
    from std_msgs.msg import String

    from simforge_ros.image_codec import numpy_to_imgmsg

    store = typestore()
    out = []
    for name in ("ContactEvent", "DriverAction", "FrameInfo", "Pose2D", "RunStatus", "StepTiming",
                 "TrajectoryPoint", "VehicleState"):
        msg = _filled(getattr(msgs, name), msgs)
        out.append(store.deserialize_cdr(serialize_message(msg), f"simforge_ros/msg/{name}"))
    info = CameraInfo()
    info.width, info.distortion_model, info.d = 320, "plumb_bob", [0.0, 0.5, -1.0, 0.0, 0.0]
    info.k = [160.0, 0.0, 160.0, 0.0, 160.0, 90.0, 0.0, 0.0, 1.0]
    image = numpy_to_imgmsg(np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3), "rgb8")
    clock, text = Clock(), String(data="{}")
    clock.clock.sec = 3
    for msg, typ in ((info, "sensor_msgs/msg/CameraInfo"), (image, "sensor_msgs/msg/Image"),
                     (clock, "rosgraph_msgs/msg/Clock"), (text, "std_msgs/msg/String")):
        out.append(store.deserialize_cdr(serialize_message(msg), typ))
    return out


def test_plain_of_every_recorded_message_type_is_that_of_the_general_path():
    for msg in _rosbags_messages():
        general = canonical._dataclass_to_plain(msg)
        assert to_plain(msg) == general, type(msg).__name__  # the cached rosbags field path
        assert to_plain(msg) == general  # once more, now from the cache
        assert encode(to_plain(msg)) == encode_general(general)


def _image_bytes(frame_id: str = "front", height: int = 5, width: int = 7) -> bytes:
    pytest.importorskip("rclpy")
    from rclpy.serialization import serialize_message

    from simforge_ros.image_codec import numpy_to_imgmsg

    pixels = np.random.default_rng(1).integers(0, 255, (height, width, 3), dtype=np.uint8)
    msg = numpy_to_imgmsg(pixels, "rgb8")
    msg.header.stamp.sec, msg.header.stamp.nanosec = 12, 300_000_000
    msg.header.frame_id = frame_id
    return serialize_message(msg)


@pytest.mark.parametrize("frame_id", ["", "f", "front", "camera_long_name"])
def test_image_view_reads_what_rosbags_reads(frame_id):
    raw = _image_bytes(frame_id)
    view = image_view(raw)
    msg = typestore().deserialize_cdr(raw, "sensor_msgs/msg/Image")
    assert view is not None
    assert (view.sec, view.nanosec, view.frame_id) == (msg.header.stamp.sec, msg.header.stamp.nanosec, frame_id)
    assert (view.height, view.width, view.encoding, view.is_bigendian, view.step) == (
        msg.height, msg.width, msg.encoding, msg.is_bigendian, msg.step)
    assert bytes(view.data) == msg.data.tobytes()


def test_image_view_leaves_big_endian_to_the_caller_and_refuses_truncated_data():
    raw = _image_bytes()
    assert image_view(b"\x00\x00\x00\x00" + raw[4:]) is None
    with pytest.raises(ValueError):
        image_view(raw[:-10])
    with pytest.raises(ValueError):
        image_view(raw[:20])


def test_the_leading_stamp_of_clock_and_camera_info_is_what_rosbags_reads():
    pytest.importorskip("rclpy")
    from rclpy.serialization import serialize_message
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import CameraInfo

    clock = Clock()
    clock.clock.sec, clock.clock.nanosec = 2_000_000_000, 999_999_999
    info = CameraInfo()
    info.header.stamp.sec, info.header.stamp.nanosec = 7, 100_000_000
    info.header.frame_id, info.width, info.d = "front", 320, [0.1, 0.2]
    for msg, type_name, field in ((clock, "rosgraph_msgs/msg/Clock", "clock"),
                                  (info, "sensor_msgs/msg/CameraInfo", "header")):
        raw = serialize_message(msg)
        back = typestore().deserialize_cdr(raw, type_name)
        stamp = back.clock if field == "clock" else back.header.stamp
        assert leading_stamp_ns(raw) == stamp.sec * 1_000_000_000 + stamp.nanosec
        assert leading_stamp_ns(b"\x00\x00\x00\x00" + raw[4:]) is None  # big endian: not read here
    assert leading_stamp_ns(serialize_message(clock)[:8]) is None  # too short to hold a stamp


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_background_bag_writer_keeps_every_message_in_order(tmp_path: Path, storage: str):
    pytest.importorskip("rclpy")
    from rclpy.serialization import serialize_message
    from std_msgs.msg import String

    raws = [serialize_message(String(data=f"m{i}" * (1 + i % 50))) for i in range(300)]
    with BackgroundBagWriter(tmp_path / "bag", storage, batch_bytes=1000, batch_count=7, max_batches=2) as bag:
        for i, raw in enumerate(raws):
            bag.write(f"/t{i % 3}", "std_msgs/msg/String", i * 1000, raw)
    back = list(read_bag(tmp_path / "bag"))
    assert [m.raw for m in back] == raws
    assert [m.t_ns for m in back] == [i * 1000 for i in range(300)]
    with pytest.raises(BagError):
        BackgroundBagWriter(tmp_path / "bag", storage)
