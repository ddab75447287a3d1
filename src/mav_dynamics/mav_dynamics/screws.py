"""Screw-theory helpers on top of ``mav_geometry.groups.SE3`` (twists ``(omega, v)``).

Only what the group module does not already offer: revolute screws, the
exponential of a revolute joint in adjoint form, the rotor matrix K_i of the
paper's (42), and the minimal rotation used to build rotor frames.
"""

from __future__ import annotations

import numpy as np

from mav_dynamics.vehicle import FloatArray
from mav_geometry import scalar
from mav_geometry.groups import SE3, SO3


def pose(rotation: FloatArray, position: FloatArray) -> FloatArray:
    """4x4 homogeneous transform from a rotation matrix and a position (m)."""
    return SE3.from_components(rotation, position)


def cross3(a: FloatArray, b: FloatArray) -> FloatArray:
    """Cross product of two 3-vectors as an array (``np.cross`` costs ~30 us on tiny arrays)."""
    return np.array(scalar.cross(a.tolist(), b.tolist()))


def revolute_screw(axis: FloatArray, point: FloatArray) -> FloatArray:
    """Unit screw ``(n, q x n)`` of a revolute joint with unit ``axis`` through ``point``."""
    return np.concatenate([axis, np.cross(point, axis)])


def joint_adjoint_terms(screw: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(ad_S, ad_S^2)`` so that ``Ad_exp(S q) = I + sin q ad_S + (1 - cos q) ad_S^2``.

    Valid for a unit revolute screw (|n| = 1, n . v = 0), where ``ad_S^3 = -ad_S``
    (mav-screw-theory.md §3.5); a zero screw (fixed joint) gives zeros, i.e. ``Ad = I``.
    """
    ad = SE3.ad(screw)
    return ad, ad @ ad


def rotor_matrix(thrust_coefficient: float, drag_coefficient: float, spin: int) -> FloatArray:
    """Paper (42): ``K = [[-k_d 1, k_l eps 1], [k_l eps 1, 0]]``; ``K S w^2`` is the aero wrench."""
    result = np.zeros((6, 6))
    result[:3, :3] = -drag_coefficient * np.eye(3)
    result[:3, 3:] = thrust_coefficient * spin * np.eye(3)
    result[3:, :3] = thrust_coefficient * spin * np.eye(3)
    return result


def rotation_from_z(direction: FloatArray) -> FloatArray:
    """The minimal rotation taking ``e_z`` onto the unit ``direction`` (a half turn about x if
    they are opposite)."""
    e_z = np.array([0.0, 0.0, 1.0])
    cross = np.cross(e_z, direction)
    sine = float(np.linalg.norm(cross))
    cosine = float(direction[2])
    if sine < 1e-12:
        return np.eye(3) if cosine > 0.0 else SO3.exp(np.array([np.pi, 0.0, 0.0]))
    return SO3.exp(cross / sine * np.arctan2(sine, cosine))
