"""Boundary conversions: scipy Rotation, scalar-first order and ROS field order."""

import numpy as np
import pytest
from geometry_strategies import unit_quaternions
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numpy.testing import assert_allclose
from scipy.spatial.transform import Rotation

from mav_geometry import convert
from mav_geometry import quaternion as Q

finite = st.floats(-1e3, 1e3, allow_nan=False)


@given(unit_quaternions())
def test_scipy_round_trip(q):
    rotation = convert.to_scipy(q)
    assert_allclose(rotation.as_matrix(), Q.to_matrix(q), atol=1e-14)
    assert_allclose(convert.from_scipy(rotation), Q.canonical(q), atol=1e-15)


def test_scipy_batches_keep_their_length():
    q = Rotation.random(6, rng=np.random.default_rng(1)).as_quat()
    assert len(convert.to_scipy(q)) == 6
    assert convert.from_scipy(convert.to_scipy(q)).shape == (6, 4)


@given(arrays(np.float64, (3, 4), elements=finite))
def test_scalar_first_round_trip(q):
    assert_allclose(convert.to_scalar_first(convert.from_scalar_first(q)), q)
    assert_allclose(convert.from_scalar_first(q)[..., 3], q[..., 0])


def test_scalar_first_identity():
    assert_allclose(convert.from_scalar_first([1.0, 0.0, 0.0, 0.0]), [0, 0, 0, 1])
    assert_allclose(convert.to_scalar_first([0.0, 0.0, 0.0, 1.0]), [1, 0, 0, 0])


def test_screw_order_matches_ros_field_names():
    twist = np.array([0.1, 0.2, 0.3, 1.0, 2.0, 3.0])  # (omega, v)
    ros = convert.screw_to_ros(twist)
    assert_allclose(ros[:3], [1.0, 2.0, 3.0])  # Twist.linear
    assert_allclose(ros[3:], [0.1, 0.2, 0.3])  # Twist.angular
    assert_allclose(convert.screw_from_ros(ros), twist)


@given(arrays(np.float64, (6, 6), elements=finite))
def test_covariance_reorder_is_the_covariance_of_reordered_vectors(square):
    covariance = square @ square.T
    permutation = convert.screw_to_ros(np.eye(6)).T  # rows map (angular, linear) -> ROS
    row_major = convert.covariance_to_ros(covariance)
    assert row_major.shape == (36,)
    assert_allclose(row_major.reshape(6, 6), permutation @ covariance @ permutation.T)
    assert_allclose(convert.covariance_from_ros(row_major), covariance)


def test_covariance_batches_and_shape_errors():
    batch = np.broadcast_to(np.eye(6), (2, 5, 6, 6))
    assert convert.covariance_to_ros(batch).shape == (2, 5, 36)
    with pytest.raises(ValueError, match="row_major must have trailing shape"):
        convert.covariance_from_ros(np.zeros(35))
