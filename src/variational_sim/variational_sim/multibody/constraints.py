"""Joint constraints ``c(q) = 0`` and their Jacobians on the tangent space.

Tangent coordinates per body (6, ``(angular, linear)`` order): a body-frame rotation
angle ``dtheta`` (rad) with ``Q <- Q exp(dtheta/2)`` and a world translation ``dr``
(m) of the CoM. The Jacobian is taken directly with respect to ``dtheta``; in the
paper's quaternion notation that is ``1/2 (dc/dQ) G(Q)``, the scaling the paper's code
misses (``docs/theory/multibody-contact.md`` §3.3, erratum 1). Constraint rows come in two kinds:

- point rows: ``D R_a^T (x_a + R_a p_a - x_b - R_b p_b)`` with ``D`` the joint's
  parent-frame ``point_directions`` (m);
- dot rows: ``(R_a u)^T (R_b n)`` for unit ``u`` (parent frame) orthogonal to the
  child-frame ``n`` at the joint's reference: two for a revolute joint (``n`` its
  axis), three for a weld.
"""

from __future__ import annotations

import itertools

import numpy as np

from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray
from variational_sim.multibody.batched import apply, apply_transposed, rotation_matrices, skew
from variational_sim.multibody.mechanism import Joint, Mechanism


def _orthonormal_pair(axis: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Two unit vectors completing ``axis`` to a right-handed orthonormal basis."""
    helper = np.eye(3)[int(np.argmin(np.abs(axis)))]
    first = np.cross(axis, helper)
    first /= np.linalg.norm(first)
    return first, np.cross(axis, first)


def _row_vectors(joint: Joint) -> tuple[FloatArray, FloatArray]:
    """The dot rows' ``u`` (parent frame) and ``n`` (child frame), each (rows, 3)."""
    if joint.type == "revolute":
        u1, u2 = _orthonormal_pair(joint.axis)
        return np.array([u1, u2]), np.array([joint.child_axis, joint.child_axis])
    if joint.type == "fixed":
        basis = np.eye(3)
        in_child = Q.rotate(Q.conjugate(joint.orientation), basis)
        return basis[[1, 2, 0]], in_child[[2, 0, 1]]
    return np.zeros((0, 3)), np.zeros((0, 3))


Row = tuple[int | FloatArray, ...]
"""A point row (parent, child, parent point, child point, direction) or a dot row
(parent, child, u, n)."""


def _column(rows: list[Row], i: int) -> np.ndarray:
    """Entry ``i`` of every row: (m,) body indices for i < 2, else (m, 3), also for m = 0."""
    if i < 2:
        return np.array([row[i] for row in rows], dtype=int)
    return np.array([row[i] for row in rows], dtype=float).reshape(-1, 3)


class ConstraintSet:
    """All joint constraints of a mechanism, evaluated together.

    Rows are ordered by joint, point rows before dot rows. They are evaluated on arrays
    of rows (one numpy call per operation for the whole set, not per joint: at 3x3
    numpy's per-call overhead is the cost). The world is body index ``n`` (identity
    attitude at the origin); its Jacobian columns are dropped. ``table`` (rows, 12)
    holds every row as ``(kind, parent, child, v1, v2, v3)``: kind 0 a point row
    (parent point, child point, direction), kind 1 a dot row (``u``, ``n``, zeros).
    """

    def __init__(self, mechanism: Mechanism) -> None:
        self.bodies = n = len(mechanism.bodies)
        point_rows: list[Row] = []
        dot_rows: list[Row] = []
        point_index: list[int] = []
        dot_index: list[int] = []
        for joint in mechanism.joints:
            a, b = mechanism.index(joint.parent) % (n + 1), mechanism.index(joint.child)
            first = len(point_rows) + len(dot_rows)
            point_rows += [(a, b, joint.parent_point, joint.child_point, d)
                           for d in joint.point_directions]
            dot_rows += [(a, b, u, v) for u, v in zip(*_row_vectors(joint), strict=True)]
            point_index += range(first, first + len(joint.point_directions))
            dot_index += range(first + len(joint.point_directions),
                               len(point_rows) + len(dot_rows))
        self.rows = len(point_rows) + len(dot_rows)
        count = len(point_rows)
        point_parents, point_children = _column(point_rows, 0), _column(point_rows, 1)
        dot_parents, dot_children = _column(dot_rows, 0), _column(dot_rows, 1)
        parent_points, child_points = _column(point_rows, 2), _column(point_rows, 3)
        directions = _column(point_rows, 4)
        parent_vectors, child_vectors = _column(dot_rows, 2), _column(dot_rows, 3)
        zeros = np.zeros_like
        # two batched rotations per evaluation: world vectors R v, then body-frame R^T w
        self._forward_bodies = np.concatenate(
            [point_parents, point_children, point_parents, dot_children, dot_parents])
        self._forward_vectors = np.concatenate(
            [parent_points, child_points, directions, child_vectors, parent_vectors])
        self._back_bodies = np.concatenate(
            [point_parents, point_children, dot_parents, dot_children])
        self._gap_bodies = (point_parents, point_children)
        # in the back-rotated stack (local gap, R_b^T R_a d, relative n, R_b^T R_a u):
        # values are d . local and u . relative n; the angular Jacobian entries are
        # d x (local - p_a), -p_b x (R_b^T R_a d), u x relative n and n x (R_b^T R_a u)
        self._value_weights = np.concatenate(
            [directions, zeros(directions), parent_vectors, zeros(parent_vectors)])
        self._value_picks = np.concatenate(
            [np.arange(count), 2 * count + np.arange(len(dot_index))])
        self._value_rows = np.array(point_index + dot_index, dtype=int)
        self._arm_offsets = np.concatenate(
            [parent_points, zeros(child_points), zeros(parent_vectors), zeros(child_vectors)])
        self._angular_skews = np.concatenate([skew(directions), -skew(child_points),
                                              skew(parent_vectors), skew(child_vectors)])
        self._angular_entries = (
            np.array(point_index * 2 + dot_index * 2, dtype=int), self._back_bodies)
        self._linear_entries = (np.array(point_index * 2, dtype=int),
                                np.concatenate([point_parents, point_children]))
        edges = np.cumsum([0] + [count] * 3 + [len(dot_index)] * 2)
        self._forward_parts = [slice(a, b) for a, b in itertools.pairwise(edges)]
        self._last: tuple[bytes, FloatArray, FloatArray] | None = None
        # the same rows as one table for the compiled step (multibody.compiled)
        self.table = np.zeros((self.rows, 12))
        self.table[point_index, :3] = np.column_stack([np.zeros(count), point_parents,
                                                       point_children])
        self.table[point_index, 3:] = np.concatenate([parent_points, child_points, directions],
                                                     axis=1)
        self.table[dot_index, :3] = np.column_stack([np.ones(len(dot_index)), dot_parents,
                                                     dot_children])
        self.table[dot_index, 3:9] = np.concatenate([parent_vectors, child_vectors], axis=1)

    def evaluate(
        self, positions: FloatArray, quaternions: FloatArray, jacobian: bool = True
    ) -> tuple[FloatArray, FloatArray]:
        """``c`` (m for point rows, dimensionless for dot rows) and ``dc/d(dtheta, dr)``.

        ``positions`` (n, 3) world CoM positions (m), ``quaternions`` (n, 4) body to
        world. The Jacobian is (rows, 6 n), or an empty array when ``jacobian`` is false.
        The last full evaluation is remembered (read-only arrays): a step starts where
        the previous step's solver ended.
        """
        key = positions.tobytes() + quaternions.tobytes()
        if jacobian and self._last is not None and self._last[0] == key:
            return self._last[1], self._last[2]
        n = self.bodies
        origins = np.zeros((n + 1, 3))
        origins[:n] = positions
        attitudes = np.zeros((n + 1, 4))
        attitudes[:n] = quaternions
        attitudes[n, 3] = 1.0
        rotations = rotation_matrices(attitudes)
        forward = apply(rotations[self._forward_bodies], self._forward_vectors)
        parent_arm, child_arm, world_d, world_n, world_u = (forward[part]
                                                            for part in self._forward_parts)
        parents, children = self._gap_bodies
        gap = origins[parents] - origins[children] + parent_arm - child_arm
        back = apply_transposed(rotations[self._back_bodies],
                                np.concatenate([gap, world_d, world_n, world_u]))
        values = np.empty(self.rows)
        values[self._value_rows] = np.einsum("mi,mi->m", self._value_weights,
                                             back)[self._value_picks]
        if not jacobian:
            return values, np.empty(0)
        matrix = np.zeros((self.rows, n + 1, 6))
        matrix[(*self._angular_entries, slice(0, 3))] = apply(self._angular_skews,
                                                            back - self._arm_offsets)
        matrix[(*self._linear_entries, slice(3, 6))] = np.concatenate([world_d, -world_d])
        result = matrix[:, :n].reshape(self.rows, 6 * n)
        values.flags.writeable = result.flags.writeable = False
        self._last = (key, values, result)
        return values, result
