"""Conversions at the boundaries: scipy Rotation, scalar-first papers, ROS field order.

Inside the project twists and wrenches are ``(angular, linear)`` 6-vectors and
quaternions are scalar-last. ROS messages (``geometry_msgs/Twist``,
``Wrench``, ``*WithCovariance``) order by field name, ``(linear, angular)``;
``geometry_msgs/Quaternion`` is already ``(x, y, z, w)``. Nodes convert here,
once, never ad hoc.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry.arrays import FloatArray, as_float_array

if TYPE_CHECKING:
    from scipy.spatial.transform import Rotation

# Index maps between (angular, linear) and ROS (linear, angular); the swap is its own inverse.
_SWAP_HALVES = np.array([3, 4, 5, 0, 1, 2])


def to_scipy(q: ArrayLike) -> Rotation:
    """scipy Rotation of scalar-last unit quaternions (any batch shape flattened to 1-D)."""
    # scipy.spatial (~0.4 s to import) on use: the nodes and tools import this module for
    # the field-order conversions alone (start-up time).
    from scipy.spatial.transform import Rotation

    q = as_float_array(q, (4,), "q")
    return Rotation.from_quat(q.reshape(-1, 4) if q.ndim > 2 else q)


def from_scipy(rotation: Rotation) -> FloatArray:
    """Scalar-last quaternions of a scipy Rotation (scalar part >= 0)."""
    result: FloatArray = np.asarray(rotation.as_quat(canonical=True), dtype=np.float64)
    return result


def from_scalar_first(q_wxyz: ArrayLike) -> FloatArray:
    """``[w, x, y, z]`` (papers, Eigen's constructor order) to scalar-last ``[x, y, z, w]``."""
    q = as_float_array(q_wxyz, (4,), "q_wxyz")
    return np.concatenate([q[..., 1:], q[..., :1]], axis=-1)


def to_scalar_first(q: ArrayLike) -> FloatArray:
    """Scalar-last ``[x, y, z, w]`` to ``[w, x, y, z]``."""
    q = as_float_array(q, (4,), "q")
    return np.concatenate([q[..., 3:], q[..., :3]], axis=-1)


def screw_to_ros(screw: ArrayLike) -> FloatArray:
    """Twist ``(omega, v)`` or wrench ``(moment, force)`` to ROS ``(linear, angular)``."""
    return as_float_array(screw, (6,), "screw")[..., _SWAP_HALVES]


def screw_from_ros(linear_angular: ArrayLike) -> FloatArray:
    """ROS ``(linear, angular)`` 6-vector to the project's ``(angular, linear)``."""
    return as_float_array(linear_angular, (6,), "linear_angular")[..., _SWAP_HALVES]


def covariance_to_ros(covariance: ArrayLike) -> FloatArray:
    """6x6 covariance in ``(angular, linear)`` order to a ROS row-major 36-array."""
    c = as_float_array(covariance, (6, 6), "covariance")
    reordered = c[..., _SWAP_HALVES, :][..., :, _SWAP_HALVES]
    return reordered.reshape(*c.shape[:-2], 36)


def covariance_from_ros(row_major: ArrayLike) -> FloatArray:
    """ROS row-major 36-array ``(linear, angular)`` to a 6x6 ``(angular, linear)`` matrix."""
    flat = as_float_array(row_major, (36,), "row_major")
    c = flat.reshape(*flat.shape[:-1], 6, 6)
    return c[..., _SWAP_HALVES, :][..., :, _SWAP_HALVES]
