"""Frame conversions at the boundary with autopilot logs (NED/FRD) and ROS (ENU/FLU)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mav_geometry import convert, quaternion

# NED -> ENU swaps north/east and flips down; FRD -> FLU flips y and z.
NED_TO_ENU = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])
FLU_TO_FRD = np.diag([1.0, -1.0, -1.0])


def frd_to_flu(vectors: ArrayLike) -> NDArray[np.float64]:
    """Body vectors (..., 3) from FRD to FLU axes."""
    result: NDArray[np.float64] = np.asarray(vectors, dtype=float) * np.array([1.0, -1.0, -1.0])
    return result


def ned_to_enu(vectors: ArrayLike) -> NDArray[np.float64]:
    """Local-level vectors (..., 3) from NED to ENU axes."""
    v = np.asarray(vectors, dtype=float)
    return np.stack([v[..., 1], v[..., 0], -v[..., 2]], axis=-1)


def attitude_ned_frd_to_enu_flu(q_wxyz: ArrayLike) -> NDArray[np.float64]:
    """Scalar-last q (FLU->ENU) from PX4/ArduPilot scalar-first q (FRD->NED), shape (..., 4)."""
    q = np.asarray(q_wxyz, dtype=float)
    rotation = quaternion.to_matrix(convert.from_scalar_first(q))
    return quaternion.from_matrix(NED_TO_ENU @ rotation @ FLU_TO_FRD)


def euler_enu(q_xyzw: ArrayLike) -> NDArray[np.float64]:
    """(roll, pitch, yaw) rad, ZYX order, of scalar-last q (FLU body -> ENU), shape (..., 3)."""
    C = quaternion.to_matrix(np.asarray(q_xyzw, dtype=float))
    return np.stack([
        np.arctan2(C[..., 2, 1], C[..., 2, 2]),
        -np.arcsin(np.clip(C[..., 2, 0], -1.0, 1.0)),
        np.arctan2(C[..., 1, 0], C[..., 0, 0]),
    ], axis=-1)
