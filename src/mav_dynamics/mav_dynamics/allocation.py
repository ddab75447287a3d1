"""Control allocation: desired body wrench -> rotor speeds (and tilt angles), with limits.

The rotor wrench in {b} is ``K(phi) u`` with ``u = dtheta^2`` (paper (62)/(78));
column i of K is ``K_i S^{b}_i`` (mav-screw-theory.md §3.2). For a tilting link carrying one
rotor whose spin axis is perpendicular to the tilt axis, the column is
``cos(phi) K S0 + sin(phi) K [S_alpha, S0]`` (mav-screw-theory.md §3.5), so the wrench is linear
in ``(u cos phi, u sin phi)`` through a constant matrix; ``u`` and ``phi`` are
recovered with ``hypot`` and ``atan2``.

Solution (not in the paper; docs/theory/mav-screw-theory.md §3.4):

1. unconstrained weighted minimum-norm solution through a precomputed
   pseudo-inverse (rank-aware: only the range of K is matched, so an
   under-actuated quadrotor uses its (m_x, m_y, m_z, f_z) rows and a fully
   actuated vehicle all six); if it respects every limit it is exact and final;
2. otherwise two bounded least-squares stages (``mav_dynamics.bounded_lsq``, the BVLS
   method of scipy's ``lsq_linear``):
   first the moments alone (attitude), then the forces with the achieved
   moments held by a dominant weight -- attitude has priority over thrust;
3. with tilts, the relaxed solution is projected onto the exact speed/angle
   limits and the speeds are re-solved at those tilt angles.

The status reports saturation and the unallocated wrench ``desired - K u``,
which includes the uncontrollable part.

Step 1 and the status run as one call of ``mav_dynamics._kernels.allocate_exact`` when the
extension is built; the numpy code stays the reference it is tested against
(``MAV_KERNELS=reference`` runs it). The bounded stages are numpy in both.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np
from numpy.typing import NDArray

from mav_dynamics.bounded_lsq import bounded_lsq
from mav_dynamics.model import TreeModel
from mav_dynamics.vehicle import BODY, FloatArray
from mav_geometry.kernels import load_kernels

_kernels = load_kernels("mav_dynamics._kernels")

PRIORITY_WEIGHT = 1e4
"""Weight (per unit-norm row) holding the stage-1 moments while the forces are fitted."""
REGULARISATION = 1e-10
"""Relative weight of the minimum-effort term in the bounded stages."""
SATURATION_TOLERANCE = 1e-4
"""Relative distance to a limit below which a command counts as saturated."""


def allocation_matrix(model: TreeModel, tilt_angles: FloatArray | None = None) -> FloatArray:
    """``K(phi)`` (6 x rotors): body wrench ``(m, f)`` per squared rotor speed (rad/s)^2."""
    zero = np.zeros(model.body_count)
    q = model.joint_vectors(None, tilt_angles)
    ad_kb = model.kinematics(np.zeros(6), q, zero, zero)[0][model.rotor_bodies]
    result: FloatArray = np.einsum("kji,kj->ik", ad_kb, model.rotor_aero_columns)
    return result


@dataclass(frozen=True)
class AllocationStatus:
    """Outcome of one allocation (wrenches ``(m, f)`` in {b}, N m and N)."""

    saturated: bool
    saturated_rotors: NDArray[np.bool_]
    saturated_tilts: NDArray[np.bool_]
    achieved_wrench: FloatArray
    unallocated_wrench: FloatArray
    rank: int


@dataclass(frozen=True)
class Allocation:
    """Rotor speed commands (rad/s, rotor file order), tilt commands (rad), status."""

    rotor_speeds: FloatArray
    tilt_angles: FloatArray
    status: AllocationStatus


class ControlAllocator:
    """Wrench -> commands for one vehicle; constant matrices are precomputed.

    ``weights`` (6,) weigh the wrench components ``(m_x, m_y, m_z, f_x, f_y, f_z)``
    in the least-squares fits (default 1 for each).
    """

    def __init__(self, model: TreeModel, weights: FloatArray | None = None) -> None:
        self.model = model
        vehicle = model.vehicle
        self.weights = np.ones(6) if weights is None else np.asarray(weights, dtype=float)
        if self.weights.shape != (6,) or not np.all(self.weights > 0.0):
            raise ValueError(f"weights must be 6 positive numbers, got {weights!r}")
        self.speed_min = np.array([r.speed_min for r in vehicle.rotors])
        self.speed_max = np.array([r.speed_max for r in vehicle.rotors])
        self.u_min, self.u_max = self.speed_min**2, self.speed_max**2
        self.tilt_links = vehicle.tilting_links
        self.tilt_min = np.array([k.joint.angle_min for k in self.tilt_links if k.joint])
        self.tilt_max = np.array([k.joint.angle_max for k in self.tilt_links if k.joint])
        self.tilt_rate = np.array([k.joint.rate_max for k in self.tilt_links if k.joint])
        self.tilted_rotor = self._tilted_rotors()
        # not np.setdiff1d: it imports numpy.ma (16 ms of a node's start-up)
        tilted = set(self.tilted_rotor.tolist())
        self.fixed_rotors = np.array([r for r in range(model.rotor_count) if r not in tilted],
                                     dtype=int)
        self.matrix = self._linear_matrix()
        self.rank = int(np.linalg.matrix_rank(self.matrix))
        weighted = self.weights[:, None] * self.matrix
        self._pseudo_inverse = np.linalg.pinv(weighted, rcond=1e-10) * self.weights[None, :]
        basis = np.linalg.svd(self.matrix)[0][:, : self.rank]
        self._projector = basis @ basis.T  # onto the range of K: the controllable wrenches
        # where each rotor's u sits among the unknowns, for the kernel: x[slot], or -(j + 1)
        # for tilting rotor j (u cos, u sin)
        self._slots = np.zeros(model.rotor_count)
        self._slots[self.fixed_rotors] = np.arange(self.fixed_rotors.size)
        self._slots[self.tilted_rotor] = -1.0 - np.arange(self.tilted_rotor.size)
        self._kernel_matrices = tuple(np.ascontiguousarray(m) for m in (
            self._pseudo_inverse, self.matrix, self._projector))

    def _tilted_rotors(self) -> NDArray[np.int_]:
        """Index of the one rotor on each tilting link; rejects unsupported layouts."""
        result = []
        for link in self.tilt_links:
            children = [r for r, rotor in enumerate(self.model.vehicle.rotors)
                        if rotor.parent == link.name]
            if len(children) != 1 or link.parent != BODY:
                raise ValueError(f"links.{link.name}: tilt allocation needs exactly one rotor on "
                                 "each tilting link and the link jointed to the body")
            result.append(children[0])
        return np.array(result, dtype=int)

    def _linear_matrix(self) -> FloatArray:
        """Columns: fixed rotors (u), then per tilting rotor ``u cos phi`` and ``u sin phi``."""
        at_zero = allocation_matrix(self.model)
        tilted = self.tilted_rotor
        if tilted.size == 0:
            return at_zero
        quarter = allocation_matrix(self.model, np.full(tilted.size, np.pi / 2))
        opposite = allocation_matrix(self.model, np.full(tilted.size, np.pi))
        # col(phi) = a + cos(phi) c + sin(phi) b: a = 0 iff col(pi) = -col(0).
        constant = 0.5 * (at_zero[:, tilted] + opposite[:, tilted])
        scale = np.abs(at_zero).max()
        if np.abs(constant).max() > 1e-9 * scale:
            raise ValueError("tilt allocation needs each tilting rotor's spin axis perpendicular "
                             "to (and meeting) its tilt axis")
        return np.hstack([at_zero[:, self.fixed_rotors], at_zero[:, tilted], quarter[:, tilted]])

    def _split(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Linear unknowns -> (u per rotor, tilt angles)."""
        n_fixed, n_tilt = self.fixed_rotors.size, self.tilted_rotor.size
        u = np.empty(self.model.rotor_count)
        u[self.fixed_rotors] = x[:n_fixed]
        cosine, sine = x[n_fixed:n_fixed + n_tilt], x[n_fixed + n_tilt:]
        u[self.tilted_rotor] = np.hypot(cosine, sine)
        return u, np.arctan2(sine, cosine)

    def _tilt_window(
        self, tilt_current: FloatArray | None, dt: float | None
    ) -> tuple[FloatArray, FloatArray]:
        """Reachable tilt range (rad): the limits, narrowed by the rate limit over ``dt``."""
        low, high = self.tilt_min, self.tilt_max
        if tilt_current is not None and dt is not None:
            low = np.maximum(low, tilt_current - self.tilt_rate * dt)
            high = np.minimum(high, tilt_current + self.tilt_rate * dt)
            high = np.maximum(high, low)
        return low, high

    def allocate(
        self, wrench: FloatArray, tilt_current: FloatArray | None = None, dt: float | None = None
    ) -> Allocation:
        """Commands realising ``wrench`` = (m, f) in {b} (N m, N) as well as the limits allow.

        ``tilt_current`` (rad) and ``dt`` (s) narrow the tilt range by the rate limit.
        """
        wrench = np.asarray(wrench, dtype=float)
        if wrench.shape != (6,) or not np.isfinite(wrench).all():
            raise ValueError(f"wrench must be 6 finite numbers, got {wrench!r}")
        low, high = self._tilt_window(tilt_current, dt)
        if _kernels is not None and self.model.rotor_count <= _kernels.MAX_BODIES:
            exact = self._exact_compiled(_kernels, wrench, low, high)
            if exact is not None:
                return exact
        x = self._pseudo_inverse @ wrench
        u, tilt = self._split(x)
        if ((u >= self.u_min) & (u <= self.u_max)).all() and (
                (tilt >= low) & (tilt <= high)).all():
            return self._result(wrench, u, tilt, self.matrix @ x)  # exact: no limit touched
        u, tilt = self._bounded(wrench, low, high)
        u, tilt = np.clip(u, self.u_min, self.u_max), np.clip(tilt, low, high)
        achieved = (allocation_matrix(self.model, tilt) if tilt.size else self.matrix) @ u
        return self._result(wrench, u, tilt, achieved)

    def _exact_compiled(
        self, kernels: ModuleType, wrench: FloatArray, low: FloatArray, high: FloatArray
    ) -> Allocation | None:
        """Step 1 and its status in one kernel call; None if a limit is touched."""
        rotors, tilts = self.model.rotor_count, self.tilted_rotor.size
        speeds, tilt, achieved, unallocated = (np.empty(rotors), np.empty(tilts), np.empty(6),
                                               np.empty(6))
        rotor_flags, tilt_flags = np.empty(rotors), np.empty(tilts)
        saturated = kernels.allocate_exact(
            *self._kernel_matrices, self._slots, self.u_min,
            self.u_max, self.tilt_min, self.tilt_max, low, high, np.ascontiguousarray(wrench),
            speeds, tilt, achieved, unallocated, rotor_flags, tilt_flags,
            SATURATION_TOLERANCE)
        if saturated < 0:
            return None
        status = AllocationStatus(bool(saturated), rotor_flags != 0.0, tilt_flags != 0.0,
                                  achieved, unallocated, self.rank)
        return Allocation(speeds, tilt, status)

    def _bounded(
        self, wrench: FloatArray, low: FloatArray, high: FloatArray
    ) -> tuple[FloatArray, FloatArray]:
        n_tilt = self.tilted_rotor.size
        if n_tilt == 0:
            return self._prioritised(self.matrix, wrench, self.u_min, self.u_max), np.zeros(0)
        lower, upper = self._relaxed_bounds(low, high)
        tilt = self._split(self._prioritised(self.matrix, wrench, lower, upper))[1]
        tilt = np.clip(tilt, low, high)
        at_tilt = allocation_matrix(self.model, tilt)
        return self._prioritised(at_tilt, wrench, self.u_min, self.u_max), tilt

    def _relaxed_bounds(self, low: FloatArray, high: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Box bounds on (u_fixed, u cos phi, u sin phi) containing the exact feasible set."""
        t = self.tilted_rotor
        u_lo, u_hi = self.u_min[t], self.u_max[t]
        cos_lo = np.minimum(np.cos(low), np.cos(high))
        cos_hi = np.where((low <= 0.0) & (high >= 0.0), 1.0, np.maximum(np.cos(low), np.cos(high)))
        sin_lo, sin_hi = np.sin(low), np.sin(high)
        lower = np.concatenate([self.u_min[self.fixed_rotors],
                                np.minimum(u_lo * cos_lo, u_hi * cos_lo),
                                np.minimum(u_lo * sin_lo, u_hi * sin_lo)])
        upper = np.concatenate([self.u_max[self.fixed_rotors], u_hi * cos_hi,
                                np.maximum(u_hi * sin_hi, u_lo * sin_hi)])
        return lower, upper

    def _prioritised(
        self, matrix: FloatArray, wrench: FloatArray, lower: FloatArray, upper: FloatArray
    ) -> FloatArray:
        """Moments first, then forces with the achieved moments held (bounded LSQ).

        Unknowns are scaled by the largest bound so the solver sees numbers of order 1.
        """
        scale = float(np.abs(upper).max())
        scaled = self.weights[:, None] * matrix * scale
        target = self.weights * wrench
        reg = np.sqrt(REGULARISATION) * np.abs(scaled).max() * np.eye(matrix.shape[1])
        zeros = np.zeros(matrix.shape[1])
        low, high = lower / scale, upper / scale
        stage1 = bounded_lsq(np.vstack([scaled[:3], reg]), np.concatenate([target[:3], zeros]),
                             low, high)
        # Hold the achieved moments; rows normalised so that a weak axis (yaw) is held as
        # firmly as a strong one (roll).
        norms = np.linalg.norm(scaled[:3], axis=1)
        hold = PRIORITY_WEIGHT / np.where(norms > 0.0, norms, 1.0)
        stage2 = bounded_lsq(np.vstack([hold[:, None] * scaled[:3], scaled[3:], reg]),
                             np.concatenate([hold * (scaled[:3] @ stage1), target[3:], zeros]),
                             low, high)
        result: FloatArray = np.clip(stage2 * scale, lower, upper)
        return result

    def _result(
        self, wrench: FloatArray, u: FloatArray, tilt: FloatArray, achieved: FloatArray
    ) -> Allocation:
        """Commands and status; ``achieved`` = K(tilt) u, the wrench the commands make."""
        speeds = np.sqrt(u)
        span = self.u_max - self.u_min
        rotors = (u - self.u_min <= SATURATION_TOLERANCE * span) | (
            self.u_max - u <= SATURATION_TOLERANCE * span)
        tilts = (tilt - self.tilt_min <= 1e-9) | (self.tilt_max - tilt <= 1e-9)
        unallocated = wrench - achieved
        controllable = self._projector @ unallocated
        scale = max(float(np.abs(wrench).max()), 1e-9)
        saturated = bool(rotors.any() or tilts.any()
                         or np.abs(controllable).max() > 1e-6 * scale)
        status = AllocationStatus(saturated, rotors, tilts, achieved, unallocated, self.rank)
        return Allocation(speeds, tilt, status)
