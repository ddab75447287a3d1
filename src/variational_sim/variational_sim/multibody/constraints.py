"""Joint constraints ``c(q) = 0`` and their Jacobians on the tangent space.

Tangent coordinates per body (6, ``(angular, linear)`` order): a body-frame rotation
angle ``dtheta`` (rad) with ``Q <- Q exp(dtheta/2)`` and a world translation ``dr``
(m) of the CoM. The Jacobian is taken directly with respect to ``dtheta``; in the
notes' quaternion notation that is ``1/2 (dc/dQ) G(Q)``, the scaling the paper's code
misses (erratum 1). Constraint rows come in two kinds:

- point rows: ``D R_a^T (x_a + R_a p_a - x_b - R_b p_b)`` with ``D`` the joint's
  parent-frame ``point_directions`` (m);
- dot rows: ``(R_a u)^T (R_b n)`` for unit ``u`` (parent frame) orthogonal to the
  child-frame ``n`` at the joint's reference: two for a revolute joint (``n`` its
  axis), three for a weld.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray
from mav_geometry.scalar import cross, rotate, rotate_inverse
from variational_sim.multibody.mechanism import Joint, Mechanism


def _orthonormal_pair(axis: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Two unit vectors completing ``axis`` to a right-handed orthonormal basis."""
    helper = np.eye(3)[int(np.argmin(np.abs(axis)))]
    first = np.cross(axis, helper)
    first /= np.linalg.norm(first)
    return first, np.cross(axis, first)


Vector = tuple[float, ...]


@dataclass(frozen=True)
class _CompiledJoint:
    """A joint's rows as float tuples (the evaluation loop runs on plain floats)."""

    parent: int
    child: int
    parent_point: Vector
    child_point: Vector
    directions: list[Vector]
    dot_pairs: list[tuple[Vector, Vector]]  # (u in the parent frame, n in the child frame)

    @property
    def rows(self) -> int:
        return len(self.directions) + len(self.dot_pairs)


def _compile(joint: Joint, mechanism: Mechanism) -> _CompiledJoint:
    if joint.type == "revolute":
        u1, u2 = _orthonormal_pair(joint.axis)
        parent_vectors = np.array([u1, u2])
        child_vectors = np.array([joint.child_axis, joint.child_axis])
    elif joint.type == "fixed":
        basis = np.eye(3)
        in_child = Q.rotate(Q.conjugate(joint.orientation), basis)
        parent_vectors = basis[[1, 2, 0]]
        child_vectors = in_child[[2, 0, 1]]
    else:
        parent_vectors = child_vectors = np.zeros((0, 3))
    return _CompiledJoint(
        mechanism.index(joint.parent), mechanism.index(joint.child),
        tuple(joint.parent_point.tolist()), tuple(joint.child_point.tolist()),
        [tuple(row) for row in joint.point_directions.tolist()],
        [(tuple(u), tuple(n)) for u, n in zip(parent_vectors.tolist(), child_vectors.tolist(),
                                              strict=True)],
    )


class ConstraintSet:
    """All joint constraints of a mechanism, evaluated together."""

    def __init__(self, mechanism: Mechanism) -> None:
        self.bodies = len(mechanism.bodies)
        self._joints = [_compile(joint, mechanism) for joint in mechanism.joints]
        self.rows = sum(joint.rows for joint in self._joints)

    def evaluate(
        self, positions: FloatArray, quaternions: FloatArray, jacobian: bool = True
    ) -> tuple[FloatArray, FloatArray]:
        """``c`` (m for point rows, dimensionless for dot rows) and ``dc/d(dtheta, dr)``.

        ``positions`` (n, 3) world CoM positions (m), ``quaternions`` (n, 4) body to
        world. The Jacobian is (rows, 6 n), or an empty array when ``jacobian`` is false.
        Row by row on float tuples: numpy's per-call overhead would dominate at 3x3.
        """
        origins = [*positions.tolist(), [0.0, 0.0, 0.0]]
        attitudes = [*quaternions.tolist(), [0.0, 0.0, 0.0, 1.0]]  # index -1: the world
        values = np.empty(self.rows)
        matrix = np.zeros((self.rows, 6 * self.bodies)) if jacobian else np.empty(0)
        row = 0
        for joint in self._joints:
            a, b = joint.parent, joint.child
            qa, qb, xa, xb = attitudes[a], attitudes[b], origins[a], origins[b]
            pa, pb = rotate(qa, joint.parent_point), rotate(qb, joint.child_point)
            gap = [xa[i] + pa[i] - xb[i] - pb[i] for i in range(3)]
            local = rotate_inverse(qa, gap)
            arm = [local[i] - joint.parent_point[i] for i in range(3)]
            for d in joint.directions:
                values[row] = d[0] * local[0] + d[1] * local[1] + d[2] * local[2]
                if jacobian:
                    world_d = rotate(qa, d)
                    if a >= 0:
                        matrix[row, 6 * a:6 * a + 3] = cross(d, arm)
                        matrix[row, 6 * a + 3:6 * a + 6] = world_d
                    if b >= 0:
                        matrix[row, 6 * b:6 * b + 3] = cross(rotate_inverse(qb, world_d),
                                                            joint.child_point)
                        matrix[row, 6 * b + 3:6 * b + 6] = [-v for v in world_d]
                row += 1
            for u, n in joint.dot_pairs:
                world_n = rotate(qb, n)
                relative_n = rotate_inverse(qa, world_n)
                values[row] = u[0] * relative_n[0] + u[1] * relative_n[1] + u[2] * relative_n[2]
                if jacobian:
                    if a >= 0:
                        matrix[row, 6 * a:6 * a + 3] = cross(u, relative_n)
                    if b >= 0:
                        matrix[row, 6 * b:6 * b + 3] = cross(n, rotate_inverse(qb, rotate(qa, u)))
                row += 1
        return values, matrix
