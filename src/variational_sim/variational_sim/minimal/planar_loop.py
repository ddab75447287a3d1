"""Fixed-base planar mechanism in minimal coordinates, built from the same ``Mechanism``.

Coordinates ``q``: the angles (rad) of the revolute tree joints (relative, in
``kinematics.tree_joints`` order), all about body +y; the root body is fixed at the
world pose it is given, upright. The motion is in the world x-z plane: a body point
``s = (s_x, s_z)`` of a link at absolute angle ``psi`` (sum of the joint angles from the
root) sits at ``x_root + sum R(psi_c) s_c`` with ``R(psi) = [[cos, sin], [-sin, cos]]``
(rotation about +y seen in (x, z)). Loop-closing joints give ``c(q) = 0`` (m, x and z).

Dynamics (index-1 form with Baumgarte stabilization, paper section III):

    [[M, -D^T], [D, 0]] [qdd; lambda] = [tau + Q_g - b_M; -b_c - alpha cdot - beta c]

with ``M = sum m J^T J + I_yy E^T E``, ``b_M = sum m J^T (Jdot qdot)``,
``D = dc/dq``, ``b_c = Ddot qdot``. Only the in-plane inertia ``I_yy`` matters for
planar motion, so the physics is the maximal model's exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mav_geometry.arrays import FloatArray, FloatVector
from variational_sim.integrators.base import check_step_size
from variational_sim.multibody.kinematics import tree_joints
from variational_sim.multibody.mechanism import WORLD, Mechanism

Terms = list[tuple[int, FloatArray, float]]
"""A planar point as ``sum sign R(psi_body) s`` over ``(body, s, sign)``."""

_GENERATOR = np.array([[0.0, 1.0], [-1.0, 0.0]])  # dR/dpsi = R S


def _rotation(psi: float) -> FloatArray:
    c, s = np.cos(psi), np.sin(psi)
    return np.array([[c, s], [-s, c]])


def _planar(vector: FloatArray) -> FloatArray:
    return np.array([vector[0], vector[2]])


@dataclass(frozen=True)
class PlanarState:
    """Joint angles ``q`` (rad) and rates ``qdot`` (rad/s) at ``time`` (s)."""

    time: float
    q: FloatArray
    qdot: FloatArray


class PlanarLoopModel:
    """Equations of motion of a fixed-base planar loop mechanism."""

    def __init__(self, mechanism: Mechanism, alpha: float = 20.0, beta: float = 100.0) -> None:
        """``alpha`` (1/s) and ``beta`` (1/s^2): Baumgarte gains on ``cdot`` and ``c``."""
        self.mechanism = mechanism
        self.alpha, self.beta = alpha, beta
        order = tree_joints(mechanism)
        self.joint_names = [mechanism.joints[i].name for i in order]
        n_bodies, n_q = len(mechanism.bodies), len(order)
        self._selector = np.zeros((n_bodies, n_q))  # psi = selector @ q
        self._com_terms: list[Terms] = [[] for _ in range(n_bodies)]
        for column, i in enumerate(order):
            joint = mechanism.joints[i]
            if joint.type != "revolute" or not np.allclose(joint.axis, [0.0, 1.0, 0.0]) \
                    or not np.allclose(joint.orientation, [0.0, 0.0, 0.0, 1.0]):
                raise ValueError(f"joints.{joint.name}: the planar model needs revolute "
                                 "joints about +y with identity reference orientation")
            a, b = mechanism.index(joint.parent), mechanism.index(joint.child)
            self._selector[b] = self._selector[a]
            self._selector[b, column] += 1.0
            self._com_terms[b] = [*self._com_terms[a],
                                  (a, _planar(joint.parent_point), 1.0),
                                  (b, _planar(joint.child_point), -1.0)]
        placing = {mechanism.joints[i].name for i in order}
        self._loop_terms: list[Terms] = []
        for joint in mechanism.joints:
            if joint.name in placing or joint.parent == WORLD or joint.child == WORLD:
                continue
            a, b = mechanism.index(joint.parent), mechanism.index(joint.child)
            self._loop_terms.append([
                *self._com_terms[a], (a, _planar(joint.parent_point), 1.0),
                *[(body, s, -sign) for body, s, sign in self._com_terms[b]],
                (b, _planar(joint.child_point), -1.0),
            ])
        self._masses = mechanism.masses
        self._inertia_yy = mechanism.inertias[:, 1, 1]
        self._gravity = _planar(mechanism.gravity)

    def _point(self, terms: Terms, psi: FloatArray, rates: FloatArray
               ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Position (2,), Jacobian (2, n_q) and ``Jdot qdot`` (2,) of a planar point."""
        position = np.zeros(2)
        jacobian = np.zeros((2, self._selector.shape[1]))
        bias = np.zeros(2)
        for body, s, sign in terms:
            rotated = sign * (_rotation(psi[body]) @ s)
            position += rotated
            jacobian += np.outer(sign * (_rotation(psi[body]) @ (_GENERATOR @ s)),
                                 self._selector[body])
            bias -= rotated * rates[body] ** 2  # S^2 = -I
        return position, jacobian, bias

    def constraint(self, q: FloatArray, qdot: FloatArray
                   ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Loop residual ``c`` (m), ``D = dc/dq`` and ``Ddot qdot`` stacked over the loops."""
        psi, rates = self._selector @ q, self._selector @ qdot
        parts = [self._point(terms, psi, rates) for terms in self._loop_terms]
        if not parts:
            return np.zeros(0), np.zeros((0, len(q))), np.zeros(0)
        return (np.concatenate([p[0] for p in parts]), np.vstack([p[1] for p in parts]),
                np.concatenate([p[2] for p in parts]))

    def accelerations(self, q: FloatArray, qdot: FloatArray, torques: FloatArray
                      ) -> FloatArray:
        """``qdd`` (rad/s^2) for generalized joint torques ``torques`` (N m, per q)."""
        psi, rates = self._selector @ q, self._selector @ qdot
        n_q = len(q)
        mass = self._selector.T @ (self._inertia_yy[:, None] * self._selector)
        force = np.array(torques, dtype=float)
        for body, terms in enumerate(self._com_terms):
            _, jacobian, bias = self._point(terms, psi, rates)
            m = self._masses[body]
            mass += m * jacobian.T @ jacobian
            force += m * jacobian.T @ (self._gravity - bias)
        c, d, bias_c = self.constraint(q, qdot)
        rows = len(c)
        kkt = np.block([[mass, -d.T], [d, np.zeros((rows, rows))]])
        rhs = np.concatenate([force, -bias_c - self.alpha * (d @ qdot) - self.beta * c])
        return np.linalg.solve(kkt, rhs)[:n_q]

    def energy(self, q: FloatArray, qdot: FloatArray) -> float:
        """Kinetic plus gravitational potential energy (J); the root contributes none."""
        psi, rates = self._selector @ q, self._selector @ qdot
        energy = 0.5 * float(self._inertia_yy @ rates**2)
        for body, terms in enumerate(self._com_terms):
            position, jacobian, _ = self._point(terms, psi, rates)
            velocity = jacobian @ qdot
            energy += self._masses[body] * (0.5 * velocity @ velocity - self._gravity @ position)
        return energy

    def generalized_torques(self, actuator_torques: FloatVector) -> FloatArray:
        """Map actuator torques (N m, actuator order) onto the joint coordinates."""
        result = np.zeros(len(self.joint_names))
        for actuator, torque in zip(self.mechanism.actuators, actuator_torques, strict=True):
            result[self.joint_names.index(actuator.joint)] += float(torque)
        return result


class BaumgarteRK4:
    """Classical RK4 on ``PlanarState`` with held actuator torques (the paper's scheme)."""

    def __init__(self, model: PlanarLoopModel, step_size: float) -> None:
        self.model = model
        self.step_size = check_step_size(step_size)

    def step(self, state: PlanarState, inputs: FloatVector | None = None) -> PlanarState:
        """One RK4 step; ``inputs``: actuator torques (N m) held over the step."""
        h = self.step_size
        count = len(self.model.mechanism.actuators)
        tau = self.model.generalized_torques(np.zeros(count) if inputs is None else inputs)

        def rate(q: FloatArray, qdot: FloatArray) -> tuple[FloatArray, FloatArray]:
            return qdot, self.model.accelerations(q, qdot, tau)

        q, v = state.q, state.qdot
        k1 = rate(q, v)
        k2 = rate(q + 0.5 * h * k1[0], v + 0.5 * h * k1[1])
        k3 = rate(q + 0.5 * h * k2[0], v + 0.5 * h * k2[1])
        k4 = rate(q + h * k3[0], v + h * k3[1])
        return PlanarState(
            state.time + h,
            q + h / 6.0 * (k1[0] + 2.0 * (k2[0] + k3[0]) + k4[0]),
            v + h / 6.0 * (k1[1] + 2.0 * (k2[1] + k3[1]) + k4[1]),
        )
