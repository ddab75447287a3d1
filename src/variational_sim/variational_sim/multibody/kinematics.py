"""Consistent configurations and velocities from joint coordinates (forward kinematics).

The first body is the root. Tree joints place their child from their parent: a
revolute child gets ``R_b = R_a Rot(axis, angle) R_0`` (``R_0`` the joint's reference
``orientation``), any other joint ``R_b = R_a R_0``; positions follow from the joint
points, ``x_b = x_a + R_a p_a - R_b p_b``. Joints whose two ends are already placed
(loop closures, welds to the world) are then satisfied by a minimum-norm Gauss-Newton
projection onto ``c = 0``, which also checks that the constraint set has full rank.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray
from variational_sim.multibody.batched import conjugate, multiply
from variational_sim.multibody.compiled import kernels
from variational_sim.multibody.constraints import ConstraintSet
from variational_sim.multibody.mechanism import WORLD, Mechanism

_IDENTITY = np.array([0.0, 0.0, 0.0, 1.0])
RANK_TOLERANCE = 1e-9
"""Smallest accepted ratio of the constraint Jacobian's extreme singular values."""


class ConstraintRankError(ValueError):
    """The constraint rows are redundant (or singular) at a configuration."""


def check_full_rank(jacobian: FloatArray) -> float:
    """Ratio of the smallest to the largest singular value; raise if it is rank-deficient."""
    if jacobian.shape[0] == 0:
        return 1.0
    values = np.linalg.svd(jacobian, compute_uv=False)
    ratio = float(values[-1] / values[0])
    if ratio < RANK_TOLERANCE:
        rank = int(np.sum(values > RANK_TOLERANCE * values[0]))
        raise ConstraintRankError(
            f"constraint Jacobian has {jacobian.shape[0]} rows but rank {rank}: remove the "
            "redundant rows (e.g. the along-axis row of a planar loop closure with "
            "point_directions) or avoid the singular configuration"
        )
    return ratio


def tree_joints(mechanism: Mechanism) -> list[int]:
    """Indices of the joints that place a new child, in placement order."""
    placed = {mechanism.bodies[0].name}
    order: list[int] = []
    progress = True
    while progress:
        progress = False
        for i, joint in enumerate(mechanism.joints):
            if joint.parent in placed and joint.parent != WORLD and joint.child not in placed:
                placed.add(joint.child)
                order.append(i)
                progress = True
    missing = [body.name for body in mechanism.bodies if body.name not in placed]
    if missing:
        raise ValueError(f"bodies {missing} are not connected to the root by joints")
    return order


def project_to_constraints(
    mechanism: Mechanism, positions: FloatArray, quaternions: FloatArray,
    tolerance: float = 1e-14, max_iterations: int = 20,
) -> tuple[FloatArray, FloatArray]:
    """Minimum-norm Gauss-Newton projection of a configuration onto ``c = 0``."""
    constraints = ConstraintSet(mechanism)
    positions, quaternions = positions.copy(), quaternions.copy()
    for _ in range(max_iterations):
        values, jacobian = constraints.evaluate(positions, quaternions)
        check_full_rank(jacobian)
        if np.max(np.abs(values), initial=0.0) <= tolerance:
            return positions, quaternions
        step = -np.linalg.lstsq(jacobian, values, rcond=None)[0].reshape(-1, 6)
        quaternions = Q.multiply(quaternions, Q.from_rotation_vector(step[:, :3]))
        positions = positions + step[:, 3:]
    raise ValueError("configuration could not be projected onto the joint constraints")


def forward_kinematics(
    mechanism: Mechanism,
    root_position: FloatArray,
    root_quaternion: FloatArray,
    angles: Mapping[str, float],
) -> tuple[FloatArray, FloatArray]:
    """World CoM positions (n, 3) and attitudes (n, 4) from the root pose and joint angles.

    ``angles``: revolute tree-joint angles (rad) by joint name (missing ones are 0).
    The result satisfies every constraint to round-off.
    """
    n = len(mechanism.bodies)
    positions = np.zeros((n, 3))
    quaternions = np.zeros((n, 4))
    positions[0] = root_position
    quaternions[0] = Q.normalize(root_quaternion)
    for i in tree_joints(mechanism):
        joint = mechanism.joints[i]
        a, b = mechanism.index(joint.parent), mechanism.index(joint.child)
        rotation = joint.orientation
        if joint.type == "revolute":
            turn = Q.from_rotation_vector(angles.get(joint.name, 0.0) * joint.axis)
            rotation = Q.multiply(turn, joint.orientation)
        quaternions[b] = Q.multiply(quaternions[a], rotation)
        positions[b] = (positions[a] + Q.rotate(quaternions[a], joint.parent_point)
                        - Q.rotate(quaternions[b], joint.child_point))
    return project_to_constraints(mechanism, positions, quaternions)


def body_velocities(
    mechanism: Mechanism,
    positions: FloatArray,
    quaternions: FloatArray,
    root_twist: FloatArray,
    rates: Mapping[str, float],
) -> FloatArray:
    """Consistent body velocities (n, 6): (angular body frame, CoM linear world frame).

    ``root_twist``: root ``(omega, v)`` in the world frame (rad/s, m/s); ``rates``:
    revolute tree-joint rates (rad/s). The result is projected (in the kinetic-energy
    metric) onto the constraint tangent space, so loop closures hold to round-off.
    """
    n = len(mechanism.bodies)
    omega = np.zeros((n, 3))
    velocity = np.zeros((n, 3))
    omega[0], velocity[0] = root_twist[:3], root_twist[3:]
    for i in tree_joints(mechanism):
        joint = mechanism.joints[i]
        a, b = mechanism.index(joint.parent), mechanism.index(joint.child)
        omega[b] = omega[a]
        if joint.type == "revolute":
            axis = Q.rotate(quaternions[a], joint.axis)
            omega[b] = omega[b] + rates.get(joint.name, 0.0) * axis
        parent_arm = Q.rotate(quaternions[a], joint.parent_point)
        child_arm = Q.rotate(quaternions[b], joint.child_point)
        velocity[b] = (velocity[a] + np.cross(omega[a], parent_arm)
                       - np.cross(omega[b], child_arm))
    tangent = np.concatenate([Q.rotate(Q.conjugate(quaternions), omega), velocity], axis=1)
    _, jacobian = ConstraintSet(mechanism).evaluate(positions, quaternions)
    return project_velocities(mechanism, jacobian, tangent)


def project_velocities(
    mechanism: Mechanism, jacobian: FloatArray, velocities: FloatArray
) -> FloatArray:
    """Kinetic-energy-metric projection of body velocities (n, 6) onto ``C u = 0``."""
    if jacobian.shape[0] == 0:
        return velocities
    inverse_mass = inverse_mass_matrix(mechanism)
    u = velocities.reshape(-1)
    weighted = inverse_mass @ jacobian.T
    correction = weighted @ np.linalg.solve(jacobian @ weighted, jacobian @ u)
    result: FloatArray = (u - correction).reshape(-1, 6)
    return result


def inverse_mass_matrix(mechanism: Mechanism) -> FloatArray:
    """Block-diagonal inverse of the (6n, 6n) tangent mass matrix diag(J_i, m_i I)."""
    n = len(mechanism.bodies)
    result = np.zeros((6 * n, 6 * n))
    for i, body in enumerate(mechanism.bodies):
        result[6 * i:6 * i + 3, 6 * i:6 * i + 3] = np.linalg.inv(body.inertia)
        result[6 * i + 3:6 * i + 6, 6 * i + 3:6 * i + 6] = np.eye(3) / body.mass
    return result


def joint_angle(mechanism: Mechanism, name: str, quaternions: FloatArray) -> FloatArray:
    """Angle (rad) of a revolute joint about its axis, for attitudes (..., n, 4)."""
    joint = mechanism.joint(name)
    a, b = mechanism.index(joint.parent), mechanism.index(joint.child)
    module = kernels()
    if module is not None and quaternions.ndim == 2:  # one configuration: one C call
        contiguous = np.ascontiguousarray
        parent = contiguous(quaternions[a], dtype=float) if a >= 0 else _IDENTITY
        angle: FloatArray = np.array(module.joint_angle(
            parent, contiguous(quaternions[b], dtype=float),
            contiguous(joint.orientation, dtype=float), contiguous(joint.axis, dtype=float)))
        return angle[()]  # a numpy scalar, as the reference's
    child = quaternions[..., b, :].reshape(-1, 4)
    parent = quaternions[..., a, :].reshape(-1, 4) if a >= 0 else Q.identity((1,))
    relative = multiply(multiply(conjugate(parent), child), conjugate(joint.orientation[None]))
    result: FloatArray = 2.0 * np.arctan2(relative[:, :3] @ joint.axis, relative[:, 3])
    wrapped: FloatArray = np.angle(np.exp(1j * result)).reshape(quaternions.shape[:-2])
    return wrapped[()]  # a numpy scalar for one configuration, as the batch shape says
