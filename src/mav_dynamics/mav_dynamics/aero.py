"""Wing aerodynamics (paper §3.3, eqs. (46)-(57) with the (53) erratum fixed) and body drag.

Theory and the erratum: docs/theory/mav-screw-theory.md §2.3, §2.5 and §8.

Angles follow (50): ``alpha = atan2(-v_z, v_x)``, ``sin(beta) = -v_y / V`` in the
aerodynamic frame {a'} (x along the chord, z up). The wind frame is rotated from
{a'} by ``R = Rot(y, alpha) Rot(z, -beta)`` (the active form; the printed (53) is
the passive one), so that ``R^T v = (V, 0, 0)``.
"""

from __future__ import annotations

import numpy as np

from mav_dynamics.vehicle import WIND_AXES, BodyDrag, FloatArray, WingAerodynamics
from mav_geometry import quaternion
from mav_geometry.groups import SE3
from mav_geometry.kernels import load_kernels

_kernels = load_kernels("mav_dynamics._kernels")

MIN_AIRSPEED = 1e-6
"""Below this air speed (m/s) the aerodynamic wrench is zero (angles undefined)."""


def air_angles(velocity: FloatArray) -> tuple[float, float, float]:
    """``(V, alpha, beta)`` (m/s, rad, rad) of an air-relative velocity in {a'}; V > 0."""
    speed = float(np.sqrt(velocity @ velocity))
    alpha = float(np.arctan2(-velocity[2], velocity[0]))
    beta = float(np.arcsin(np.clip(-velocity[1] / speed, -1.0, 1.0)))
    return speed, alpha, beta


def wind_rotation(alpha: float, beta: float) -> FloatArray:
    """``R^{a'}_{wind} = Rot(y, alpha) Rot(z, -beta)`` (corrected (53))."""
    ca, sa, cb, sb = np.cos(alpha), np.sin(alpha), np.cos(beta), np.sin(beta)
    rot_y = np.array([[ca, 0.0, sa], [0.0, 1.0, 0.0], [-sa, 0.0, ca]])
    rot_z = np.array([[cb, sb, 0.0], [-sb, cb, 0.0], [0.0, 0.0, 1.0]])
    result: FloatArray = rot_y @ rot_z
    return result


class WingModel:
    """Aerodynamic wrench on one wing, from its link-frame air-relative twist."""

    def __init__(self, aero: WingAerodynamics, air_density: float) -> None:
        self.aero = aero
        rotation = quaternion.to_matrix(aero.orientation)
        # Ad_{T^{a'}_{link}}: link twists to the aerodynamic frame (46).
        self.link_to_aero = SE3.adjoint(SE3.inverse(SE3.from_components(rotation, aero.position)))
        self.pressure_area = 0.5 * air_density * aero.area
        self.moment_scale = np.array([aero.span, aero.chord, aero.span, 1.0, 1.0, 1.0])
        self.alpha_rad = np.deg2rad(aero.alpha_deg)
        self.packed = self._packed()

    def _packed(self) -> FloatArray:
        """The wing's constants in the layout of ``_kernels.c`` (``W_*``)."""
        return np.concatenate([
            [float(self.aero.convention == WIND_AXES), self.pressure_area, self.alpha_rad.size],
            self.link_to_aero.ravel(), self.moment_scale, self.aero.sideslip_slopes,
            self.alpha_rad, np.asarray(self.aero.coefficients, dtype=float).ravel()])

    def coefficients(self, alpha: float, beta: float) -> FloatArray:
        """The six coefficients (convention order) at ``alpha``, ``beta`` (rad)."""
        grid, table = self.alpha_rad, self.aero.coefficients
        # linear interpolation of all six tables at once, clamped at the table ends
        upper = min(max(int(np.searchsorted(grid, alpha)), 1), grid.size - 1)
        weight = min(max((alpha - grid[upper - 1]) / (grid[upper] - grid[upper - 1]), 0.0), 1.0)
        values = table[upper - 1] + weight * (table[upper] - table[upper - 1])
        result: FloatArray = values + self.aero.sideslip_slopes * beta
        return result

    def wrench_aero_frame(self, air_twist_aero: FloatArray) -> FloatArray:
        """Wrench ``(moment, force)`` (N m, N) in {a'} about the wing COM, (51)/(55)-(57)."""
        velocity = air_twist_aero[3:]
        if float(velocity @ velocity) < MIN_AIRSPEED**2:
            return np.zeros(6)
        speed, alpha, beta = air_angles(velocity)
        normalised = self.coefficients(alpha, beta) * self.moment_scale
        if self.aero.convention == WIND_AXES:
            normalised[3] = -normalised[3]  # the force entries are (-CD, CC, CL), (57)
            rotation = wind_rotation(alpha, beta)
            normalised = np.concatenate([rotation @ normalised[:3], rotation @ normalised[3:]])
        result: FloatArray = self.pressure_area * speed**2 * normalised
        return result

    def wrench_link_frame(self, air_twist_link: FloatArray) -> FloatArray:
        """Wrench on the wing in its link frame, (47): ``Ad^T_{T^{a'}_link} W^{a'}``."""
        if _kernels is not None:
            wrench = np.empty(6)
            _kernels.wing_link_wrench(
                self.packed, np.ascontiguousarray(air_twist_link, dtype=np.float64), wrench)
            return wrench
        aero_twist = self.link_to_aero @ air_twist_link
        result: FloatArray = self.link_to_aero.T @ self.wrench_aero_frame(aero_twist)
        return result


def body_drag_wrench(drag: BodyDrag, air_twist: FloatArray) -> FloatArray:
    """Placeholder body drag ``-D1 V - D2 |V| V`` (theory §2.3 [X]) in the body frame."""
    result: FloatArray = -drag.linear * air_twist - drag.quadratic * np.abs(air_twist) * air_twist
    return result
