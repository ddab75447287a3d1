"""Geometric tracking controller on SE(3) producing the desired body wrench.

Position loop (world ENU): ``a = a_d - Kp e_p - Kv e_v``. Attitude loop on SO(3)
(Lee, Leok, McClamroch 2010): ``e_R = vee(R_d^T R - R^T R_d) / 2``,
``e_w = w - R^T R_d w_d``, ``alpha = -K_R e_R - K_w e_w - hat(w) R^T R_d w_d +
R^T R_d dw_d``. Gains are mass-normalised (vehicle file ``controller`` block).

- Under-actuated vehicles (allocation rank < 6): the desired attitude turns the
  vehicle's hover-thrust axis onto ``a - g`` and keeps the reference heading; its
  rate feedforward comes from the reference jerk (differential flatness).
- Fully actuated vehicles (rank 6): the reference attitude is tracked as given,
  independently of the position.

The wrench is the inverse dynamics of the locked body (docs/theory/mav-screw-theory.md §3.4):
``W = G_T dV_des - ad^T_V G_T V - G_T Ad_{T^b_0} A_grv`` with
``dV_des = (alpha, R^T a - w x v)``, so a body frame away from the COM is handled.

``update`` runs as one call of ``mav_dynamics._kernels.tracking_wrench`` when the extension
is built; the numpy code below stays the reference it is tested against
(``MAV_KERNELS=reference`` runs it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mav_dynamics.allocation import allocation_matrix
from mav_dynamics.model import TreeModel
from mav_dynamics.screws import cross3, rotation_from_z
from mav_dynamics.vehicle import ControllerGains, FloatArray
from mav_geometry.groups import SO3
from mav_geometry.kernels import load_kernels

_kernels = load_kernels("mav_dynamics._kernels")


def _zeros3() -> FloatArray:
    return np.zeros(3)


@dataclass(frozen=True)
class TrackingReference:
    """Desired state: position (m), velocity (m/s), acceleration (m/s^2) and jerk (m/s^3) of
    the body-frame origin in the world; attitude R^0_b (under-actuated vehicles use only its
    heading, its x axis); body angular velocity (rad/s) and acceleration (rad/s^2), used by
    fully actuated vehicles (under-actuated ones derive their rate from the jerk)."""

    position: FloatArray
    velocity: FloatArray = field(default_factory=_zeros3)
    acceleration: FloatArray = field(default_factory=_zeros3)
    jerk: FloatArray = field(default_factory=_zeros3)
    attitude: FloatArray = field(default_factory=lambda: np.eye(3))
    angular_velocity: FloatArray = field(default_factory=_zeros3)
    angular_acceleration: FloatArray = field(default_factory=_zeros3)


@dataclass(frozen=True)
class ControlOutput:
    """Desired body wrench ``(m, f)`` (N m, N) in {b}, with the errors behind it."""

    wrench: FloatArray
    desired_attitude: FloatArray
    position_error: FloatArray
    attitude_error: FloatArray


class TrackingController:
    """SE(3) tracking for one vehicle; ``fully_actuated`` defaults to rank(K) == 6."""

    def __init__(
        self, model: TreeModel, gains: ControllerGains | None = None,
        fully_actuated: bool | None = None, rank: int | None = None,
    ) -> None:
        self.model = model
        chosen = gains or model.vehicle.gains
        if chosen is None:
            raise ValueError("controller: no gains in the vehicle file and none given "
                             "(see vehicle_file.load_controller_gains)")
        self.gains: ControllerGains = chosen
        hover = allocation_matrix(model)
        if fully_actuated is None:
            fully_actuated = (rank if rank is not None else np.linalg.matrix_rank(hover)) == 6
        self.fully_actuated = fully_actuated
        thrust = hover[3:].sum(axis=1)
        if np.linalg.norm(thrust) == 0.0:
            raise ValueError("rotors: the rotors give no net thrust at zero tilt")
        self.thrust_axis = thrust / np.linalg.norm(thrust)
        self._align = rotation_from_z(self.thrust_axis)
        self.locked_inertia = model.locked_inertia()
        self.gravity_world = model.gravity_world

    def _thrust_attitude(
        self, acceleration: FloatArray, heading: FloatArray, jerk: FloatArray
    ) -> tuple[FloatArray, FloatArray]:
        """Attitude putting the thrust axis along ``acceleration - g`` with the given heading,
        and its body rate from the reference jerk (differential flatness, heading rate 0)."""
        thrust = acceleration - self.gravity_world
        norm = np.linalg.norm(thrust)
        b3 = thrust / norm if norm > 1e-9 else np.array([0.0, 0.0, 1.0])
        b2 = cross3(b3, heading)
        if np.linalg.norm(b2) < 1e-6:  # heading along the thrust: keep any perpendicular
            b2 = cross3(b3, np.array([0.0, 1.0, 0.0] if abs(b3[0]) > 0.9 else [1.0, 0.0, 0.0]))
        b2 /= np.linalg.norm(b2)
        b1 = cross3(b2, b3)
        tilt_rate = (jerk - b3 * (b3 @ jerk)) / max(float(norm), 1e-9)   # d(b3)/dt
        rate = self._align @ np.array([-(tilt_rate @ b2), tilt_rate @ b1, 0.0])
        attitude: FloatArray = np.column_stack([b1, b2, b3]) @ self._align.T
        return attitude, rate

    def update(
        self, rotation: FloatArray, position: FloatArray, twist: FloatArray,
        reference: TrackingReference,
    ) -> ControlOutput:
        """Desired wrench for state (R^0_b, p^0_b (m), V^{b,0}_b = (w, v) in {b})."""
        gains = self.gains
        if _kernels is not None:
            out = np.empty(21)
            inputs = (rotation, position, twist, reference.position, reference.velocity,
                      reference.acceleration, reference.jerk, reference.attitude,
                      reference.angular_velocity, reference.angular_acceleration,
                      gains.position, gains.velocity, gains.attitude, gains.angular_rate)
            constants = (self.locked_inertia, self.gravity_world, self._align, out,
                         self.fully_actuated)
            try:  # as given: converting every input costs more than the kernel itself
                _kernels.tracking_wrench(*inputs, *constants)
            except (TypeError, ValueError, BufferError):  # lists, strided or not float64
                _kernels.tracking_wrench(
                    *(np.ascontiguousarray(value, dtype=np.float64) for value in inputs),
                    *constants)
            return ControlOutput(out[:6], out[6:15].reshape(3, 3), out[15:18], out[18:])
        omega, velocity = twist[:3], twist[3:]
        position_error = position - reference.position
        velocity_error = rotation @ velocity - reference.velocity
        acceleration = (reference.acceleration - gains.position * position_error
                        - gains.velocity * velocity_error)
        if self.fully_actuated:
            desired, rate_reference = reference.attitude, reference.angular_velocity
            accel_reference = reference.angular_acceleration
        else:
            desired, rate_reference = self._thrust_attitude(
                acceleration, reference.attitude[:, 0], reference.jerk)
            accel_reference = np.zeros(3)
        relative = rotation.T @ desired
        attitude_error = 0.5 * SO3.vee(relative.T - relative)
        rate_desired = relative @ rate_reference
        angular = (-gains.attitude * attitude_error - gains.angular_rate * (omega - rate_desired)
                   - cross3(omega, rate_desired) + relative @ accel_reference)
        linear = rotation.T @ acceleration - cross3(omega, velocity)
        g_t = self.locked_inertia
        momentum = g_t @ twist
        velocity_product = np.concatenate([
            -cross3(omega, momentum[:3]) - cross3(velocity, momentum[3:]),
            -cross3(omega, momentum[3:])])
        gravity = np.concatenate([np.zeros(3), rotation.T @ self.gravity_world])
        wrench = g_t @ (np.concatenate([angular, linear]) - gravity) - velocity_product
        return ControlOutput(wrench, desired, position_error, attitude_error)
