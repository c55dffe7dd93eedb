"""numpy <-> sensor_msgs/Image without cv_bridge: every encoding round-trips through a
real sensor_msgs/Image and its CDR serialisation, and bad input is refused clearly."""

from __future__ import annotations

import numpy as np
import pytest

from simforge_ros.image_codec import ImageCodecError, imgmsg_to_numpy, numpy_to_imgmsg

sensor_msgs = pytest.importorskip("sensor_msgs.msg")


@pytest.mark.parametrize(
    ("encoding", "shape", "dtype", "step"),
    [("rgb8", (4, 5, 3), np.uint8, 15), ("bgr8", (4, 5, 3), np.uint8, 15),
     ("mono8", (4, 5), np.uint8, 5), ("32FC1", (4, 5), np.float32, 20)],
)
def test_round_trip_through_a_serialised_image(encoding, shape, dtype, step):
    from rclpy.serialization import deserialize_message, serialize_message

    rng = np.random.default_rng(3)
    array = (rng.random(shape) * 250).astype(dtype)
    msg = numpy_to_imgmsg(array, encoding)
    assert isinstance(msg, sensor_msgs.Image)
    assert (msg.height, msg.width, msg.step, msg.encoding) == (4, 5, step, encoding)
    back = imgmsg_to_numpy(deserialize_message(serialize_message(msg), sensor_msgs.Image))
    assert back.dtype == array.dtype and back.shape == array.shape
    assert np.array_equal(back, array)


def test_rows_padded_beyond_width_are_cut_at_the_row():
    msg = sensor_msgs.Image(height=2, width=2, encoding="mono8", step=4, data=bytes([1, 2, 9, 9, 3, 4, 9, 9]))
    assert imgmsg_to_numpy(msg).tolist() == [[1, 2], [3, 4]]


def test_unknown_encoding_is_refused_with_the_accepted_ones():
    with pytest.raises(ImageCodecError, match="'yuv422' is not supported; expected one of"):
        numpy_to_imgmsg(np.zeros((2, 2, 2), np.uint8), "yuv422")
    msg = sensor_msgs.Image(height=1, width=1, encoding="bayer_rggb8", step=1, data=b"\0")
    with pytest.raises(ImageCodecError, match="bayer_rggb8"):
        imgmsg_to_numpy(msg)


@pytest.mark.parametrize(
    ("array", "encoding", "needle"),
    [(np.zeros((2, 3), np.uint8), "rgb8", "expected HxWx3"),
     (np.zeros((2, 3, 3), np.float32), "rgb8", "expected uint8"),
     (np.zeros((2, 3), np.uint8), "32FC1", "expected float32")],
)
def test_arrays_that_do_not_fit_the_encoding_are_refused(array, encoding, needle):
    with pytest.raises(ImageCodecError, match=needle):
        numpy_to_imgmsg(array, encoding)


def test_size_mismatch_between_header_and_data_is_refused():
    msg = sensor_msgs.Image(height=2, width=2, encoding="rgb8", step=6, data=bytes(10))
    with pytest.raises(ImageCodecError, match="data holds 10 bytes; expected step\\*height = 6\\*2 = 12"):
        imgmsg_to_numpy(msg)
    short = sensor_msgs.Image(height=1, width=4, encoding="rgb8", step=6, data=bytes(6))
    with pytest.raises(ImageCodecError, match="step 6 is shorter than a row of 12 bytes"):
        imgmsg_to_numpy(short)
