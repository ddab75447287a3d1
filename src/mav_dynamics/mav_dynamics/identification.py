"""Linear-in-parameters regressor and least-squares identification (docs/theory/mav-screw-theory.md
§4.3).

Locked-body parameters ``pi = (m, h_x, h_y, h_z, I_xx, I_yy, I_zz, I_xy, I_yz, I_xz)``
with ``G(pi) = [[I, [h]], [[h]^T, m 1]]`` (``h = m c``, ``I`` about the frame origin).
For any fixed-tilt vehicle with balanced axisymmetric rotors and no aerodynamics
besides the rotors', the exact tree dynamics read

    Y(dV, V, R) pi_T = sum_i c_i w_i^2 - sum_i ([w] w_i + dw_i) a_i  (moment rows),

with ``Y = Phi(dV - g^b) - ad_V^T Phi(V)``, ``Phi(X) pi = G(pi) X``, rotor columns
``c_i = K_i S^b_i = k_l eps (p x n, n) + k_d (-n, 0)`` and rotor spin momenta per
unit speed ``a_i = I_rz,i n_i`` (gyroscopic and spin-up reactions). The equation
is homogeneous in all parameters, so the total mass is given to fix the scale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

from mav_dynamics.vehicle import FloatArray
from mav_geometry.groups import SE3, SO3

PARAMETER_NAMES = ("m", "h_x", "h_y", "h_z", "I_xx", "I_yy", "I_zz", "I_xy", "I_yz", "I_xz")


def spatial_inertia_from_parameters(pi: FloatArray) -> FloatArray:
    """G(pi) (6x6) from the 10 inertial parameters (kg, kg m, kg m^2)."""
    m, h = pi[0], pi[1:4]
    ixx, iyy, izz, ixy, iyz, ixz = pi[4:]
    result = np.zeros((6, 6))
    result[:3, :3] = [[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]]
    result[:3, 3:] = SO3.hat(h)
    result[3:, :3] = SO3.hat(h).T
    result[3:, 3:] = m * np.eye(3)
    return result


def parameters_from_spatial_inertia(inertia: FloatArray) -> FloatArray:
    """The 10 parameters of a 6x6 generalised inertia (inverse of the above)."""
    h = SO3.vee(inertia[:3, 3:])
    rot = inertia[:3, :3]
    return np.array([inertia[3, 3], *h, rot[0, 0], rot[1, 1], rot[2, 2], rot[0, 1], rot[1, 2],
                     rot[0, 2]])


def inertia_regressor(x: FloatArray) -> FloatArray:
    """Phi(X) (6x10) with ``Phi(X) pi = G(pi) X`` for X = (x_w, x_v)."""
    xw, xv = x[:3], x[3:]
    wx, wy, wz = xw
    result = np.zeros((6, 10))
    result[:3, 1:4] = -SO3.hat(xv)
    result[:3, 4:] = [[wx, 0, 0, wy, 0, wz], [0, wy, 0, wx, wz, 0], [0, 0, wz, 0, wy, wx]]
    result[3:, 0] = xv
    result[3:, 1:4] = SO3.hat(xw)
    return result


def regressor(acceleration: FloatArray, twist: FloatArray, rotation: FloatArray,
              gravity: float) -> FloatArray:
    """Y (6x10): ``Y pi = G dV - ad_V^T G V - G g^b`` (R = R^0_b, gravity in m/s^2)."""
    g_b = np.concatenate([np.zeros(3), rotation.T @ np.array([0.0, 0.0, -gravity])])
    # ad_V^T Phi(V) pi = ad_V^T G V, column by column
    ad_transpose = SE3.ad(twist).T @ inertia_regressor(twist)
    result: FloatArray = inertia_regressor(acceleration - g_b) - ad_transpose
    return result


@dataclass(frozen=True)
class Sample:
    """One measurement: R^0_b, V, dV (body frame), rotor speeds (rad/s) and accelerations."""

    rotation: FloatArray
    twist: FloatArray
    acceleration: FloatArray
    rotor_speeds: FloatArray
    rotor_accelerations: FloatArray


@dataclass(frozen=True)
class RotorGeometry:
    """Known rotor geometry in {b}: unit spin axes n_i, axis points p_i (m), spins eps_i."""

    spin_axes: FloatArray
    axis_points: FloatArray
    spins: FloatArray


def rotor_geometry(spin_screws_body: FloatArray, spins: FloatArray) -> RotorGeometry:
    """Geometry from the rotor screws ``S^b_i = (n, p x n)`` in {b} (rotors, 6)."""
    axes = spin_screws_body[:, :3]
    points = np.cross(axes, spin_screws_body[:, 3:])           # n x (p x n) = p_perp
    return RotorGeometry(axes, points, np.asarray(spins, dtype=float))


@dataclass(frozen=True)
class Identified:
    """Locked inertia parameters and per-rotor k_l (N s^2), k_d (N m s^2), I_rz (kg m^2)."""

    parameters: FloatArray
    thrust_coefficients: FloatArray
    drag_coefficients: FloatArray
    spin_inertias: FloatArray
    residual_rms: float


def _spin_rows(sample: Sample, axes: FloatArray) -> FloatArray:
    """Moment rows of ``([w] w_i + dw_i) n_i`` per rotor (6 x rotors): gyroscopic + spin-up."""
    rotors = axes.shape[0]
    omega_hat = SO3.hat(sample.twist[:3])
    result = np.zeros((6, rotors))
    for i in range(rotors):
        result[:3, i] = (omega_hat * sample.rotor_speeds[i]
                         + sample.rotor_accelerations[i] * np.eye(3)) @ axes[i]
    return result


def identify(samples: list[Sample], mass: float, gravity: float,
             geometry: RotorGeometry) -> Identified:
    """Least squares for the 9 remaining inertial parameters and k_l, k_d, I_rz per rotor.

    The total mass (kg) fixes the scale of the homogeneous equation, the known rotor
    geometry (positions and axes, e.g. from the drawing) separates the rotational
    inertia from the moment arms: with rotor-driven data alone, ``I`` about the COM
    and free moment columns share one unobservable scale (the specific force is
    ``sum c_f,i w_i^2 / m``, so ``h x`` it is itself a combination of the columns).
    """
    axes, points, spins = geometry.spin_axes, geometry.axis_points, geometry.spins
    thrust_columns = np.hstack([spins[:, None] * np.cross(points, axes),
                                spins[:, None] * axes])        # per unit k_l (rotors, 6)
    drag_columns = np.hstack([-axes, np.zeros_like(axes)])     # per unit k_d
    rows, rhs = [], []
    for s in samples:
        y = regressor(s.acceleration, s.twist, s.rotation, gravity)
        squared = s.rotor_speeds**2
        rows.append(np.hstack([y[:, 1:], -thrust_columns.T * squared, -drag_columns.T * squared,
                               _spin_rows(s, axes)]))
        rhs.append(-y[:, 0] * mass)
    matrix, target = np.vstack(rows), np.concatenate(rhs)
    # numpy's stubs type linalg results as floating[Any]; float64 inputs give float64.
    solution = cast(FloatArray, np.linalg.lstsq(matrix, target, rcond=None)[0])
    residual = matrix @ solution - target
    n = axes.shape[0]
    return Identified(
        parameters=np.concatenate([[mass], solution[:9]]),
        thrust_coefficients=solution[9:9 + n],
        drag_coefficients=solution[9 + n:9 + 2 * n],
        spin_inertias=solution[9 + 2 * n:],
        residual_rms=float(np.sqrt(np.mean(residual**2))),
    )


def identify_rotor_columns(samples: list[Sample], locked_inertia: FloatArray,
                           gravity: float) -> tuple[FloatArray, FloatArray]:
    """With G_T known: the generic rotor columns c_i (rotors, 6) and spin momenta
    a_i = I_rz n_i (rotors, 3), i.e. a calibrated allocation matrix ``K = c^T``."""
    pi = parameters_from_spatial_inertia(locked_inertia)
    rotors = samples[0].rotor_speeds.size
    rows, rhs = [], []
    for s in samples:
        spin = np.zeros((6, 3 * rotors))
        for i in range(rotors):
            spin[:3, 3 * i:3 * i + 3] = (SO3.hat(s.twist[:3]) * s.rotor_speeds[i]
                                         + s.rotor_accelerations[i] * np.eye(3))
        rows.append(np.hstack([np.kron(s.rotor_speeds**2, np.eye(6)), -spin]))
        rhs.append(regressor(s.acceleration, s.twist, s.rotation, gravity) @ pi)
    solution, *_ = np.linalg.lstsq(np.vstack(rows), np.concatenate(rhs), rcond=None)
    return solution[:6 * rotors].reshape(rotors, 6), solution[6 * rotors:].reshape(rotors, 3)


@dataclass(frozen=True)
class RotorParameters:
    """Physical rotor data recovered from a column (mav-screw-theory.md §4.3)."""

    thrust_coefficient: float
    drag_coefficient: float
    spin_axis: FloatArray       # n (unit), body frame
    axis_point: FloatArray      # the point of the axis closest to the origin, body frame (m)


def rotor_parameters(column: FloatArray, spin: int) -> RotorParameters:
    """k_l = |f|, n = eps f/|f|, k_d = -eps (m . f)/k_l, p = f x (m + k_d n)/|f|^2."""
    moment, force = column[:3], column[3:]
    thrust = float(np.linalg.norm(force))
    axis = spin * force / thrust
    drag = -spin * float(moment @ force) / thrust
    point = np.cross(force, moment + drag * axis) / thrust**2
    return RotorParameters(thrust, drag, axis, point)
