"""One rigid body described about an arbitrary body-fixed reference point O.

Pose: unit dual quaternion in ``mav_geometry.nilpotent.DUAL`` storage,
``[q, 1/2 t q]`` with both parts scalar-last; ``q`` rotates body (FLU) to world
(ENU) and ``t`` is the world position of O (m). Twists and wrenches are
6-vectors, angular part first: ``xi = (omega_B, v_B)`` (rad/s, m/s, body frame,
``v_B`` the velocity of O) and ``W = (tau_B, f_B)`` (N m about O, N, body frame).
Momentum about O in the body frame is ``pi = M6 xi``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray
from mav_geometry.nilpotent import DUAL


def skew(v: ArrayLike) -> FloatArray:
    """Cross-product matrix: ``skew(a) @ b == cross(a, b)``."""
    x, y, z = np.asarray(v, dtype=float)
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def _vector(value: ArrayLike, size: int, name: str) -> FloatArray:
    array = np.array(value, dtype=float)
    if array.shape != (size,) or not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be {size} finite numbers, got {value!r}")
    return array


def spatial_inertia(mass: float, inertia_com: ArrayLike, com_offset: ArrayLike) -> FloatArray:
    """6x6 inertia ``M6`` about O in ``(omega, v)`` order.

    ``mass`` (kg), ``inertia_com`` (3x3, kg m^2, about the centre of mass, body
    axes) and ``com_offset`` (m, centre of mass relative to O, body frame):
    ``[[I_C - m [r]x^2, m [r]x], [-m [r]x, m I]]`` (parallel-axis theorem).
    """
    if not np.isfinite(mass) or mass <= 0.0:
        raise ValueError(f"mass must be a positive finite number (kg), got {mass!r}")
    inertia = np.array(inertia_com, dtype=float)
    if inertia.shape != (3, 3):
        raise ValueError(f"inertia_com must be 3x3 (kg m^2), got shape {inertia.shape}")
    r = skew(_vector(com_offset, 3, "com_offset"))
    return np.block([[inertia - mass * r @ r, mass * r], [-mass * r, mass * np.eye(3)]])


@dataclass(frozen=True)
class RigidBodyState:
    """Node state: time (s), pose (unit dual quaternion, 8) and body momentum ``pi`` (6)."""

    time: float
    pose: FloatArray
    momentum: FloatArray


@dataclass(frozen=True)
class RigidBody:
    """Rigid body with an arbitrary symmetric positive-definite 6x6 inertia about O.

    ``inertia`` (``M6``, SI, ``(omega, v)`` order) may hold added mass; gravity
    acts on ``mass`` (kg) at ``com_offset`` (m, body frame, relative to O) with
    world acceleration ``gravity`` (m/s^2, e.g. ``(0, 0, -9.81)`` in ENU).
    """

    inertia: FloatArray
    mass: float
    com_offset: FloatArray = field(default_factory=lambda: np.zeros(3))
    gravity: FloatArray = field(default_factory=lambda: np.zeros(3))

    def __post_init__(self) -> None:
        inertia = np.array(self.inertia, dtype=float)
        if inertia.shape != (6, 6) or not np.all(np.isfinite(inertia)):
            raise ValueError(f"inertia must be a finite 6x6 matrix, got shape {inertia.shape}")
        inertia = 0.5 * (inertia + inertia.T)
        if np.linalg.eigvalsh(inertia)[0] <= 0.0:
            raise ValueError(
                "inertia must be positive-definite (smallest eigenvalue "
                f"{np.linalg.eigvalsh(inertia)[0]:.3g} <= 0)"
            )
        if not np.isfinite(self.mass) or self.mass < 0.0:
            raise ValueError(f"mass must be a finite number >= 0 (kg), got {self.mass!r}")
        object.__setattr__(self, "inertia", inertia)
        object.__setattr__(self, "com_offset", _vector(self.com_offset, 3, "com_offset"))
        object.__setattr__(self, "gravity", _vector(self.gravity, 3, "gravity"))

    @classmethod
    def from_mass_properties(
        cls,
        mass: float,
        inertia_com: ArrayLike,
        com_offset: ArrayLike = (0.0, 0.0, 0.0),
        gravity: ArrayLike = (0.0, 0.0, 0.0),
    ) -> RigidBody:
        """Body from mass (kg), inertia about the CoM (kg m^2) and CoM offset from O (m)."""
        inertia = spatial_inertia(mass, inertia_com, com_offset)  # checks com_offset
        return cls(inertia, mass, _vector(com_offset, 3, "com_offset"),
                   _vector(gravity, 3, "gravity"))

    def moved_to_com(self) -> RigidBody:
        """The same body described about its centre of mass (requires a rigid-body M6)."""
        r = skew(self.com_offset)
        transform = np.block([[np.eye(3), np.zeros((3, 3))], [r, np.eye(3)]])
        inertia = transform.T @ self.inertia @ transform
        return RigidBody(inertia, self.mass, np.zeros(3), self.gravity)

    def state(self, pose: ArrayLike, twist: ArrayLike, time: float = 0.0) -> RigidBodyState:
        """State from a pose (8) and a body twist ``(omega_B, v_B)`` (6, rad/s, m/s)."""
        pose = _vector(pose, 8, "pose")
        return RigidBodyState(time, pose, self.inertia @ _vector(twist, 6, "twist"))

    def twist(self, state: RigidBodyState) -> FloatArray:
        """Body twist ``M6^-1 pi``."""
        # numpy's stubs type linalg results as floating[Any]; float64 inputs give float64.
        return cast(FloatArray, np.linalg.solve(self.inertia, state.momentum))

    def gravity_wrench(self, pose: ArrayLike) -> FloatArray:
        """Body wrench of gravity about O: ``f = R^T m g``, ``tau = r_g x f``."""
        q = np.asarray(pose)[:4]
        force = Q.rotate(Q.conjugate(q), self.mass * self.gravity)
        return np.concatenate([np.cross(self.com_offset, force), force])

    def potential_energy(self, pose: ArrayLike) -> float:
        """``U = -m g . (t + R r_g)`` (J)."""
        q, t = DUAL.unpack(pose)
        return float(-self.mass * self.gravity @ (t + Q.rotate(q, self.com_offset)))

    def energy(self, state: RigidBodyState) -> float:
        """Total energy ``1/2 pi^T M6^-1 pi + U`` (J)."""
        return float(0.5 * state.momentum @ self.twist(state) + self.potential_energy(state.pose))

    def spatial_momentum(self, state: RigidBodyState) -> FloatArray:
        """World momentum ``(L_W about the world origin, p_W)`` (N m s, N s)."""
        q, t = DUAL.unpack(state.pose)
        linear = Q.rotate(q, state.momentum[3:])
        return np.concatenate([Q.rotate(q, state.momentum[:3]) + np.cross(t, linear), linear])


def world_wrench_to_body(pose: ArrayLike, force: ArrayLike, point: ArrayLike,
                         couple: ArrayLike = (0.0, 0.0, 0.0)) -> FloatArray:
    """Body wrench about O of a world force (N) at a world point (m) plus a world couple (N m)."""
    q, t = DUAL.unpack(pose)
    q_inverse = Q.conjugate(q)
    force_body = Q.rotate(q_inverse, _vector(force, 3, "force"))
    arm = Q.rotate(q_inverse, _vector(point, 3, "point") - t)
    torque = Q.rotate(q_inverse, _vector(couple, 3, "couple")) + np.cross(arm, force_body)
    return np.concatenate([torque, force_body])
