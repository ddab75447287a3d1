"""Closed forms of the paper's worked examples, used as test oracles and benchmark baselines.

- Standard "+" quadrotor, §4.1, eqs. (69)-(74), with the (74) erratum fixed
  (sixth entry ``m_T (v_x w_y - v_y w_x)``) and the y rows using ``I_y``.
- Quadrotor with two fixed wings, §4.3, eqs. (79)-(80), rotor positions
  ``(-d, h, w), (-d, -h, w), (d, -h, w), (d, h, w)`` (docs/theory/mav-screw-theory.md §5.3).

All frames at COMs and aligned with the body; rotors ``i = 1..4`` spin about
``(-1)^i k`` with ``eps_i = (-1)^i`` (thrust up). Units SI; twists ``(w, v)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mav_dynamics.vehicle import FloatArray

_SIGNS = np.array([-1.0, 1.0, -1.0, 1.0])  # (-1)^i, i = 1..4


@dataclass(frozen=True)
class QuadrotorParameters:
    """The fixture of mav-screw-theory.md §5.6 (placeholder numbers, not from the paper)."""

    arm: float = 0.25                       # d (m)
    body_mass: float = 1.0                  # m_b (kg)
    body_inertia: tuple[float, float, float] = (0.01, 0.01, 0.02)  # kg m^2
    rotor_mass: float = 0.02                # m_r (kg)
    rotor_inertia: tuple[float, float, float] = (1.0e-5, 1.0e-5, 2.0e-5)
    thrust_coefficient: float = 1.0e-5      # k_l (N s^2/rad^2)
    drag_coefficient: float = 1.0e-7        # k_d (N m s^2/rad^2)
    gravity: float = 9.81
    rotor_positions: FloatArray = field(default_factory=lambda: np.array(
        [[-1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    """Rotor COMs in units of ``arm`` ((64): psi = pi, -pi/2, 0, pi/2)."""

    @property
    def total_mass(self) -> float:
        return self.body_mass + 4 * self.rotor_mass

    @property
    def hover_speed(self) -> float:
        """sqrt(m_T g / (4 k_l)) (rad/s)."""
        return float(np.sqrt(self.total_mass * self.gravity / (4 * self.thrust_coefficient)))

    def vehicle_data(self, speed_max: float = 2000.0) -> dict[str, Any]:
        """The same vehicle as a description (for ``parse_vehicle``)."""
        rotors = [
            {
                "name": f"rotor_{i + 1}", "parent": "body",
                "position": (self.arm * self.rotor_positions[i]).tolist(),
                "thrust_axis": [0.0, 0.0, 1.0], "spin": "ccw" if _SIGNS[i] > 0 else "cw",
                "thrust_coefficient": self.thrust_coefficient,
                "drag_coefficient": self.drag_coefficient,
                "mass": self.rotor_mass, "inertia": list(self.rotor_inertia),
                "speed_limits": [0.0, speed_max], "time_constant": 0.02,
            }
            for i in range(4)
        ]
        return {
            "name": "fixture_quadrotor", "gravity": self.gravity,
            "body": {"mass": self.body_mass, "com": [0.0, 0.0, 0.0],
                     "inertia": list(self.body_inertia)},
            "rotors": rotors,
            "controller": {"position": [4.0] * 3, "velocity": [4.0] * 3,
                           "attitude": [100.0] * 3, "angular_rate": [20.0] * 3},
        }


def quadrotor_allocation_matrix(p: QuadrotorParameters) -> FloatArray:
    """(70) as a matrix (mav-screw-theory.md §3.3), rows (m_x, m_y, m_z, f_x, f_y, f_z)."""
    dkl, kd, kl = p.arm * p.thrust_coefficient, p.drag_coefficient, p.thrust_coefficient
    return np.array([
        [0.0, -dkl, 0.0, dkl],
        [dkl, 0.0, -dkl, 0.0],
        [kd, -kd, kd, -kd],
        [0.0, 0.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 0.0],
        [kl, kl, kl, kl],
    ])


def quadrotor_locked_diagonal(p: QuadrotorParameters) -> FloatArray:
    """Diagonal of G^b_T (73), general in x and y (mav-screw-theory.md §5.6)."""
    md2 = p.rotor_mass * p.arm**2
    ib, ir = np.array(p.body_inertia), np.array(p.rotor_inertia)
    rotational = ib + 4 * ir + np.array([2 * md2, 2 * md2, 4 * md2])
    return np.concatenate([rotational, np.full(3, p.total_mass)])


def quadrotor_acceleration(
    p: QuadrotorParameters, rotation: FloatArray, twist: FloatArray,
    speeds: FloatArray, accelerations: FloatArray,
) -> FloatArray:
    """dV^{b,0}_b from (69)-(74) (no body drag), corrected (74)."""
    wx, wy, wz, vx, vy, vz = twist
    j = quadrotor_locked_diagonal(p)
    m_t, irz = p.total_mass, p.rotor_inertia[2]
    velocity_product = np.array([                      # (74), corrected sixth entry
        -wy * wz * (j[2] - j[1]),
        wx * wz * (j[2] - j[0]),
        wx * wy * (j[0] - j[1]),
        m_t * (vy * wz - vz * wy),
        -m_t * (vx * wz - vz * wx),
        m_t * (vx * wy - vy * wx),
    ])
    spin_sum = -_SIGNS @ speeds                         # s = th1 - th2 + th3 - th4
    spin_up = np.array([0.0, 0.0, -p.rotor_inertia[2] * (_SIGNS @ accelerations), 0, 0, 0])  # (71)
    gyroscopic = np.array([wy * irz * spin_sum, -wx * irz * spin_sum, 0.0, 0.0, 0.0, 0.0])  # (72)
    gravity = j * np.concatenate([np.zeros(3), rotation.T @ np.array([0.0, 0.0, -p.gravity])])
    rotors = quadrotor_allocation_matrix(p) @ speeds**2
    result: FloatArray = (velocity_product + gravity + rotors + spin_up + gyroscopic) / j
    return result


def quadrotor_motor_torques(
    p: QuadrotorParameters, speeds: FloatArray, accelerations: FloatArray,
    base_acceleration: FloatArray,
) -> FloatArray:
    """tau_i = k_d w_i^2 + I_rz (dw_i + n_i . dw^b) (mav-screw-theory.md §2.4)."""
    spin_axis_z = _SIGNS * base_acceleration[2]
    result: FloatArray = p.drag_coefficient * speeds**2 + p.rotor_inertia[2] * (
        accelerations + spin_axis_z)
    return result


def winged_quadrotor_allocation_matrix(
    arm: float, half_width: float, thrust_coefficient: float, drag_coefficient: float
) -> FloatArray:
    """(80) as a matrix: ``d = arm``, ``h = half_width``."""
    hk, dk = half_width * thrust_coefficient, arm * thrust_coefficient
    kd, kl = drag_coefficient, thrust_coefficient
    return np.array([
        [hk, -hk, -hk, hk],
        [dk, dk, -dk, -dk],
        [kd, -kd, kd, -kd],
        [0.0, 0.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 0.0],
        [kl, kl, kl, kl],
    ])


def point_offset_inertia(mass: float, inertia: FloatArray, position: FloatArray) -> FloatArray:
    """G in {b} of a body whose frame is aligned with {b} and sits at its COM ``position``:
    parallel-axis theorem for the rotational block, ``m [p]`` coupling (written out here
    independently of ``vehicle.spatial_inertia``, which the tree model uses)."""
    x, y, z = position
    skew = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    result = np.zeros((6, 6))
    result[:3, :3] = inertia + mass * (position @ position * np.eye(3) - np.outer(position,
                                                                              position))
    result[:3, 3:] = mass * skew
    result[3:, :3] = -mass * skew
    result[3:, 3:] = mass * np.eye(3)
    return result


def winged_quadrotor_acceleration(
    locked_inertia: FloatArray, allocation: FloatArray, rotor_inertia_z: float,
    rotation: FloatArray, twist: FloatArray, speeds: FloatArray, accelerations: FloatArray,
    wing_wrenches_body: FloatArray, gravity: float,
) -> FloatArray:
    """dV from (79): ``G_T dV = ad^T G_T V + G_T g + sum W_aer + K w^2 + Y + X``."""
    w, v = twist[:3], twist[3:]
    momentum = locked_inertia @ twist
    velocity_product = np.concatenate([
        -np.cross(w, momentum[:3]) - np.cross(v, momentum[3:]), -np.cross(w, momentum[3:])])
    spin_sum = -_SIGNS @ speeds
    spin_up = np.array([0.0, 0.0, -rotor_inertia_z * (_SIGNS @ accelerations), 0, 0, 0])
    gyroscopic = np.array([w[1], -w[0], 0.0, 0.0, 0.0, 0.0]) * rotor_inertia_z * spin_sum
    gravity_twist = np.concatenate([np.zeros(3), rotation.T @ np.array([0.0, 0.0, -gravity])])
    right = (velocity_product + locked_inertia @ gravity_twist + wing_wrenches_body.sum(axis=0)
             + allocation @ speeds**2 + spin_up + gyroscopic)
    result: FloatArray = np.linalg.solve(locked_inertia, right)
    return result
