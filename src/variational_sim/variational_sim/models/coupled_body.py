"""Coupled translation-rotation kinetic energy of the QVI paper (Eq. 1), with morphing.

``T = v^T a_xx v + v^T A_xw w + v^T a_x + w^T A_ww w + w^T a_w + a0`` with ``v`` the
body-frame velocity of the body reference point (m/s) and ``w`` the body rate (rad/s).
The coefficients depend on prescribed morphing parameters and their rates, so a
model is a function of time returning ``KineticCoefficients``. Attitudes are
scalar-last unit quaternions (body FLU to world ENU); positions are world (m).
Conventions follow ``docs/theory/qvi.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray
from variational_sim.models.rigid_body import RigidBody, skew


@dataclass(frozen=True)
class KineticCoefficients:
    """Coefficients of Eq. 1 at one instant (SI: kg, kg m, kg m/s, kg m^2, kg m^2/s, J)."""

    a_xx: float
    A_xw: FloatArray
    a_x: FloatArray
    A_ww: FloatArray
    a_w: FloatArray
    a0: float

    def d1(self, velocity: FloatArray, rate: FloatArray) -> FloatArray:
        """``dT/dv = 2 a_xx v + A_xw w + a_x`` (Eq. 15)."""
        result: FloatArray = 2.0 * self.a_xx * velocity + self.A_xw @ rate + self.a_x
        return result

    def d2(self, velocity: FloatArray, rate: FloatArray) -> FloatArray:
        """``dT/dw = 2 A_ww w + A_xw^T v + a_w`` (Eq. 15, A_ww symmetric)."""
        result: FloatArray = 2.0 * self.A_ww @ rate + self.A_xw.T @ velocity + self.a_w
        return result

    def energy(self, velocity: FloatArray, rate: FloatArray) -> float:
        """Kinetic energy ``T`` (J), Eq. 1."""
        return float(
            self.a_xx * velocity @ velocity + velocity @ self.A_xw @ rate + velocity @ self.a_x
            + rate @ self.A_ww @ rate + rate @ self.a_w + self.a0
        )

    @property
    def mass(self) -> float:
        """Total mass ``2 a_xx`` (kg)."""
        return 2.0 * self.a_xx

    @property
    def com_offset(self) -> FloatArray:
        """Centre of mass relative to the reference point, body frame (m): ``A_xw = -m [r]x``."""
        a = self.A_xw
        return np.array([a[2, 1] - a[1, 2], a[0, 2] - a[2, 0], a[1, 0] - a[0, 1]]) / (
            -2.0 * self.mass
        )

    @property
    def inertia_com(self) -> FloatArray:
        """Inertia about the centre of mass, body axes (kg m^2): ``2 A_ww + m [r]x^2``."""
        r = skew(self.com_offset)
        result: FloatArray = 2.0 * self.A_ww + self.mass * r @ r
        return result

    def rigid_body(self) -> RigidBody:
        """The equivalent rigid body (only meaningful without morphing: a_x = a_w = 0)."""
        inertia = np.block([[2.0 * self.A_ww, self.A_xw.T], [self.A_xw, self.mass * np.eye(3)]])
        return RigidBody(inertia, self.mass, self.com_offset)


class CoupledModel(Protocol):
    """A body whose Eq. 1 coefficients are known functions of time (prescribed morphing)."""

    def coefficients(self, time: float) -> KineticCoefficients:
        """Coefficients at ``time`` (s)."""
        ...


@dataclass(frozen=True)
class FixedCoefficients:
    """A model with constant coefficients (no morphing)."""

    value: KineticCoefficients

    def coefficients(self, time: float) -> KineticCoefficients:
        """The constant coefficients (``time`` is ignored)."""
        return self.value


def fixed_wing_coupled_body() -> FixedCoefficients:
    """The QVI paper's first experiment (Eq. 32): coupled rigid body with fixed wings.

    ``a_xx = 4 kg``, ``A_xw`` skew with entries 0.04 and 6.35 kg m, ``A_ww`` with the
    xz product of inertia; ``a_x = a_w = 0`` and ``a0 = 0`` (not given in the paper).
    """
    return FixedCoefficients(KineticCoefficients(
        a_xx=4.0,
        A_xw=np.array([[0.0, 0.04, 0.0], [-0.04, 0.0, 6.35], [0.0, -6.35, 0.0]]),
        a_x=np.zeros(3),
        A_ww=np.array([[0.2342, 0.0, -6.4761e-5], [0.0, 3.0539, 0.0], [-6.4761e-5, 0.0, 3.2699]]),
        a_w=np.zeros(3),
        a0=0.0,
    ))


@dataclass(frozen=True)
class CoupledBodyState:
    """QVI state at node k.

    ``attitude``, ``position``: node pose. ``velocity``, ``rate``: body velocities of
    the last interval (k-1, k) (the initial conditions before the first step).
    ``interval_attitude``: attitude at which those velocities were resolved (``q_{k-1}``
    for the left-rectangle scheme, the midpoint attitude for the midpoint scheme).
    ``momentum``: canonical momentum arriving at node k, world frame,
    ``(p_w, p_x)`` (angular first, like every wrench and twist in this package).
    """

    time: float
    attitude: FloatArray
    position: FloatArray
    velocity: FloatArray
    rate: FloatArray
    interval_attitude: FloatArray
    momentum: FloatArray


def legendre_initial_state(model: CoupledModel, attitude: ArrayLike, position: ArrayLike,
                           velocity: ArrayLike, rate: ArrayLike,
                           time: float = 0.0) -> CoupledBodyState:
    """Initial state from continuous initial conditions (discrete Legendre initialisation).

    ``p_0 = (R(q0) D2, R(q0) D1)`` with the coefficients at ``time``.
    """
    q = Q.normalize(attitude)
    velocity = np.asarray(velocity, dtype=float)
    rate = np.asarray(rate, dtype=float)
    for name, value in (("velocity", velocity), ("rate", rate), ("position", position)):
        if np.shape(value) != (3,) or not np.all(np.isfinite(value)):
            raise ValueError(f"{name} must be 3 finite numbers, got {value!r}")
    c = model.coefficients(time)
    momentum = np.concatenate(
        [Q.rotate(q, c.d2(velocity, rate)), Q.rotate(q, c.d1(velocity, rate))]
    )
    return CoupledBodyState(time, q, np.array(position, dtype=float), velocity, rate, q, momentum)


def zero_momentum_state(model: CoupledModel, attitude: ArrayLike, position: ArrayLike,
                        time: float = 0.0) -> CoupledBodyState:
    """State with zero total momentum while the shape moves: ``D1 = D2 = 0``.

    The body velocities cancel the momentum of the relative (morphing) motion:
    ``[[2 a_xx I, A_xw], [A_xw^T, 2 A_ww]] (v, w) = -(a_x, a_w)``.
    """
    c = model.coefficients(time)
    mass_matrix = np.block([[2.0 * c.a_xx * np.eye(3), c.A_xw], [c.A_xw.T, 2.0 * c.A_ww]])
    z = np.linalg.solve(mass_matrix, -np.concatenate([c.a_x, c.a_w]))
    return legendre_initial_state(model, attitude, position, z[:3], z[3:], time)


def physical_momenta(model: CoupledModel, state: CoupledBodyState,
                     interval_time: float) -> tuple[FloatArray, FloatArray]:
    """Eq. 33 of the paper from the interval data: ``(P_w, P_x)`` (world frame).

    ``P_x = m R (v + w x r_c)`` and ``P_w = R I_com w`` with ``R`` the interval attitude.
    """
    c = model.coefficients(interval_time)
    q = state.interval_attitude
    linear = c.mass * Q.rotate(q, state.velocity + np.cross(state.rate, c.com_offset))
    return Q.rotate(q, c.inertia_com @ state.rate), linear
