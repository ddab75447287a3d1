"""Morphing multibody UAV: fuselage plus two wings with prescribed dihedral, incidence, sweep.

The kinetic-energy coefficients of Eq. 1 (QVI paper) follow from the geometry and
masses. Each part has mass ``m``, inertia ``I`` about its own centre of mass, centre
of mass ``s(t)`` relative to the body reference point and, for a wing, the relative
rate ``Omega(t)`` and attitude ``R(t)`` with respect to the fuselage (body FLU axes).
With ``s_dot = Omega x (R c)``::

    a_xx = sum m / 2                      A_xw = -sum m [s]x
    a_x  = sum m s_dot                    A_ww = 1/2 sum (m (|s|^2 I - s s^T) + R I R^T)
    a_w  = sum (m s x s_dot + R I R^T Omega)
    a0   = sum (m |s_dot|^2 + Omega^T R I R^T Omega) / 2

Wing attitude: ``R = Rz(+-sweep) Rx(+-dihedral) Ry(-incidence)`` (upper sign for the
left wing on +y, lower for the right wing; positive sweep moves the tips back,
positive dihedral moves them up, positive incidence raises the leading edges).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mav_geometry.arrays import FloatArray
from mav_geometry.groups import SO3
from variational_sim.models.coupled_body import KineticCoefficients
from variational_sim.models.rigid_body import skew

WingSchedule = Callable[[float], tuple[FloatArray, FloatArray]]
"""Time (s) -> ``(angles, rates)``, each ``(dihedral, incidence, sweep)`` in rad, rad/s."""

_X, _Y, _Z = np.eye(3)


def plate_inertia(mass: float, chord: float, span: float) -> FloatArray:
    """Inertia (kg m^2) of a thin uniform plate about its centre; x chordwise, y spanwise."""
    return mass / 12.0 * np.diag([span**2, chord**2, span**2 + chord**2])


@dataclass(frozen=True)
class MorphingUAV:
    """Fuselage and two mirror-image wings; the reference point is the fuselage origin.

    Lengths in m, masses in kg, inertias in kg m^2 (about each part's centre of mass,
    in the part's own axes). ``hinge`` is the left-wing root hinge in body axes (the
    right one mirrors it in y); ``wing_com`` is the left wing's centre of mass from
    its hinge in wing axes (mirrored likewise).
    """

    fuselage_mass: float
    fuselage_inertia: FloatArray
    fuselage_com: FloatArray
    wing_mass: float
    wing_inertia: FloatArray
    hinge: FloatArray
    wing_com: FloatArray
    schedule: WingSchedule

    def __post_init__(self) -> None:
        for name in ("fuselage_mass", "wing_mass"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0.0):
                raise ValueError(f"{name} must be a positive finite mass (kg), got {value!r}")

    @staticmethod
    def _wing_motion(angles: FloatArray, rates: FloatArray,
                     side: float) -> tuple[FloatArray, FloatArray]:
        """Attitude and relative rate (body axes) of a wing; side +1 left, -1 right."""
        dihedral, incidence, sweep = angles
        dihedral_rate, incidence_rate, sweep_rate = rates
        yaw = SO3.exp(side * sweep * _Z)
        roll = SO3.exp(side * dihedral * _X)
        attitude = yaw @ roll @ SO3.exp(-incidence * _Y)
        rate = (side * sweep_rate * _Z + side * dihedral_rate * yaw @ _X
                - incidence_rate * yaw @ roll @ _Y)
        return attitude, rate

    def coefficients(self, time: float) -> KineticCoefficients:
        """Eq. 1 coefficients at ``time`` (s) from the wing schedule."""
        angles, rates = self.schedule(time)
        mirror = np.diag([1.0, -1.0, 1.0])
        m_f = self.fuselage_mass
        s_f = np.asarray(self.fuselage_com, dtype=float)
        total_mass = m_f
        coupling = -m_f * skew(s_f)
        rotational = m_f * (s_f @ s_f * np.eye(3) - np.outer(s_f, s_f)) + self.fuselage_inertia
        a_x = np.zeros(3)
        a_w = np.zeros(3)
        a0 = 0.0
        m = self.wing_mass
        for side in (1.0, -1.0):
            reflect = np.eye(3) if side > 0 else mirror
            attitude, omega = self._wing_motion(np.asarray(angles), np.asarray(rates), side)
            arm = attitude @ (reflect @ self.wing_com)
            s = reflect @ self.hinge + arm
            s_dot = np.cross(omega, arm)
            inertia = attitude @ (reflect @ self.wing_inertia @ reflect) @ attitude.T
            total_mass += m
            coupling -= m * skew(s)
            rotational += m * (s @ s * np.eye(3) - np.outer(s, s)) + inertia
            a_x += m * s_dot
            a_w += m * np.cross(s, s_dot) + inertia @ omega
            a0 += 0.5 * float(m * s_dot @ s_dot + omega @ inertia @ omega)
        return KineticCoefficients(0.5 * total_mass, coupling, a_x, 0.5 * rotational, a_w, a0)


def flapping_schedule(time: float) -> tuple[FloatArray, FloatArray]:
    """The QVI paper's second experiment: dihedral ``sin t``, incidence ``-0.5 cos t`` (rad)."""
    angles = np.array([np.sin(time), -0.5 * np.cos(time), 0.0])
    rates = np.array([np.cos(time), 0.5 * np.sin(time), 0.0])
    return angles, rates


def reorientation_schedule(period: float = 2.0, dihedral: float = 0.6,
                           sweep: float = 0.6) -> WingSchedule:
    """Cyclic sweep and dihedral a quarter period apart: a closed loop in shape space.

    The enclosed area in (sweep, dihedral) yields a net rotation per cycle at zero
    angular momentum (the falling-cat mechanism); the wings return to their start.
    """
    frequency = 2.0 * np.pi / period

    def schedule(time: float) -> tuple[FloatArray, FloatArray]:
        phase = frequency * time
        angles = np.array([dihedral * np.sin(phase), 0.0, sweep * (1.0 - np.cos(phase))])
        rates = np.array([dihedral * frequency * np.cos(phase), 0.0,
                          sweep * frequency * np.sin(phase)])
        return angles, rates

    return schedule


def small_morphing_uav(schedule: WingSchedule = flapping_schedule) -> MorphingUAV:
    """A 1.5 kg demonstrator: 1 kg fuselage, two 0.25 kg wings of 0.2 m chord and 0.5 m span."""
    return MorphingUAV(
        fuselage_mass=1.0,
        fuselage_inertia=np.diag([0.004, 0.03, 0.03]),
        fuselage_com=np.array([0.02, 0.0, 0.0]),
        wing_mass=0.25,
        wing_inertia=plate_inertia(0.25, 0.2, 0.5),
        hinge=np.array([0.0, 0.05, 0.0]),
        wing_com=np.array([-0.02, 0.25, 0.0]),
        schedule=schedule,
    )
