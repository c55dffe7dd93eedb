"""record.side_digests: what the recorder keeps of each camera's camera_info messages and
image headers, and what verify recomputes from the bag, agree; any changed field value
changes it."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from simforge_ros.core.canonical import to_plain
from simforge_ros.record.bag import typestore
from simforge_ros.record.side_digests import CameraInfoDigests, ImageHeaderDigests, first_difference

STORE = typestore()
INFO = "sensor_msgs/msg/CameraInfo"


def _info(t_us: int, fx: float = 160.0, frame_id: str = "front", model: str = "plumb_bob") -> Any:
    types = STORE.types
    roi = types["sensor_msgs/msg/RegionOfInterest"](x_offset=0, y_offset=0, height=0, width=0, do_rectify=False)
    stamp = types["builtin_interfaces/msg/Time"](sec=t_us // 1_000_000, nanosec=t_us % 1_000_000 * 1000)
    header = types["std_msgs/msg/Header"](stamp=stamp, frame_id=frame_id)
    k = np.array([fx, 0, 160, 0, fx, 90, 0, 0, 1], dtype=np.float64)
    p = np.array([fx, 0, 160, 0, 0, fx, 90, 0, 0, 0, 1, 0], dtype=np.float64)
    return types[INFO](header=header, height=180, width=320, distortion_model=model, d=np.zeros(5), k=k,
                       r=np.eye(3).reshape(-1), p=p, binning_x=0, binning_y=0, roi=roi)


def _raw(msg: Any) -> bytes:
    return bytes(STORE.serialize_cdr(msg, INFO))


class _Counting:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, raw: bytes) -> Any:
        self.calls += 1
        return STORE.deserialize_cdr(raw, INFO)


def test_the_recorders_path_and_verifys_agree_and_deserialise_each_content_once():
    deserialize = _Counting()
    recorder, verify = CameraInfoDigests(deserialize), CameraInfoDigests()
    for k in range(50):
        for camera in ("front", "left"):
            msg = _info(k * 100_000, frame_id=camera, fx=160.0 if k < 30 else 161.0)  # intrinsics change once
            recorder.add_raw(camera, _raw(msg))
            verify.add(camera, to_plain(STORE.deserialize_cdr(_raw(msg), INFO)))
    assert recorder.summary() == verify.summary()
    assert recorder.summary()["front"]["messages"] == 50
    assert deserialize.calls == 4  # two cameras, two contents each: the rest came from the cache


def test_the_order_the_messages_came_in_does_not_matter():
    msgs = [_info(k * 100_000) for k in range(20)]
    shuffled = msgs[:]
    random.Random(3).shuffle(shuffled)
    a, b = CameraInfoDigests(), CameraInfoDigests()
    for one, other in zip(msgs, shuffled, strict=True):
        a.add("front", to_plain(one))
        b.add("front", to_plain(other))
    assert a.summary() == b.summary()


@pytest.mark.parametrize("change", [
    {"fx": 160.000001}, {"frame_id": "front_optical"}, {"model": "equidistant"}, {"t_us": 700_001},
], ids=["focal-length", "frame-id", "distortion-model", "stamp"])
def test_any_changed_field_changes_the_digest(change):
    plain, changed = CameraInfoDigests(), CameraInfoDigests()
    for k in range(10):
        plain.add("front", to_plain(_info(k * 100_000)))
        fields = {"t_us": k * 100_000} | (change if k == 7 else {})
        changed.add("front", to_plain(_info(**fields)))
    assert plain.summary()["front"]["messages"] == changed.summary()["front"]["messages"] == 10
    assert plain.summary()["front"]["digest"] != changed.summary()["front"]["digest"]
    assert "not those recorded" in str(first_difference(plain.summary(), changed.summary(), "camera_info messages"))


def test_first_difference_names_the_camera_and_what_differs():
    one = CameraInfoDigests()
    one.add("front", to_plain(_info(0)))
    two = CameraInfoDigests()
    two.add("front", to_plain(_info(0)))
    two.add("front", to_plain(_info(100_000)))
    what = "camera_info messages"
    assert first_difference(one.summary(), one.summary(), what) is None
    assert first_difference(two.summary(), one.summary(), what) == (
        "camera front: the manifest counts 2 camera_info messages, the bag holds 1")
    assert first_difference({}, one.summary(), what).startswith("camera front: the manifest has None")
    assert first_difference(one.summary(), {}, what) == (
        f"camera front: the manifest has {one.summary()['front']!r}, the bag holds none of its camera_info messages")


def test_a_camera_info_not_in_little_endian_cdr_is_refused_on_the_raw_path():
    with pytest.raises(ValueError, match="little-endian"):
        CameraInfoDigests(STORE.deserialize_cdr).add_raw("front", b"\x00\x00" + _raw(_info(0))[2:])


@pytest.mark.parametrize("change", [{"frame_id": "front_optical"}, {"is_bigendian": 1}, {"nanosec": 1}],
                         ids=["frame-id", "is-bigendian", "stamp"])
def test_an_image_header_the_frames_chain_leaves_out_changes_its_digest(change):
    """The frames chain hashes encoding, size, step and pixels; an image's frame_id and
    is_bigendian (how 16-bit pixels are read) were in no digest."""
    fields = {"sec": 3, "nanosec": 0, "frame_id": "front", "is_bigendian": 0}
    plain, changed = ImageHeaderDigests(), ImageHeaderDigests()
    for k in range(5):
        plain.add("front", **fields | {"sec": k})
        changed.add("front", **fields | {"sec": k} | (change if k == 2 else {}))
    assert plain.summary()["front"]["messages"] == changed.summary()["front"]["messages"] == 5
    assert plain.summary()["front"]["digest"] != changed.summary()["front"]["digest"]
    assert first_difference(plain.summary(), changed.summary(), "image headers") == (
        "camera front: the bag's image headers are not those recorded "
        f"(digest {changed.summary()['front']['digest'][:16]}, the manifest {plain.summary()['front']['digest'][:16]})")


def test_a_summary_before_a_time_leaves_out_what_came_of_the_steps_after():
    """A refused run's digests count its recorded steps' messages only: its refused step's
    frames, sent after the bridge answered, reached the recorder in some repeats and not in
    others (10 vs 11 camera_info messages, and rerun said "did not repeat")."""
    from simforge_ros.record.side_digests import TransformDigests

    ten, eleven = (CameraInfoDigests(lambda raw: STORE.deserialize_cdr(raw, INFO)),
                   CameraInfoDigests(lambda raw: STORE.deserialize_cdr(raw, INFO)))
    for step in range(10):
        for digests in (ten, eleven):
            digests.add_raw("front", _raw(_info(step * 100_000)))
    eleven.add_raw("front", _raw(_info(10 * 100_000)))  # the refused step's, this time
    assert ten.summary() != eleven.summary()
    assert ten.summary(1_000_000_000) == eleven.summary(1_000_000_000) == ten.summary()
    assert eleven.summary(0) == {}  # a run refused at step 0 recorded none
    tf = TransformDigests()
    tf.add("/tf_static", {"transforms": []})  # sent once, not a step's: kept whatever the time
    tf.add("/tf", {"transforms": [1]}, 0)
    assert tf.summary(0) == {"/tf_static": tf.summary()["/tf_static"]}


def test_a_cut_holds_however_far_behind_the_recorded_steps_are():
    """Only the latest 64 stamps were remembered: with the recorder up to 128 steps behind
    (recorder_backlog_steps), a cut at step 10 of 100 stamps counted 36 messages, not 10.
    Stamps are forgotten once their step is recorded (settle); verify cuts as it reads."""
    from simforge_ros.record.side_digests import OdometryDigests

    recorded, read_back = OdometryDigests(), OdometryDigests(by_stamp=False, cut_ns=10 * 100_000_000)
    for k in range(100):
        recorded.add({"k": k}, k * 100_000_000)
        read_back.add({"k": k}, k * 100_000_000)
    assert recorded.summary(10 * 100_000_000)["ego"]["messages"] == 10
    assert recorded.summary(10 * 100_000_000) == read_back.summary()
    recorded.settle(9 * 100_000_000)  # steps 0-9 recorded: their stamps forgotten, the cut the same
    assert recorded.summary(10 * 100_000_000) == read_back.summary()
