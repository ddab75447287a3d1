"""Dual quaternion variational integrator (DQVI) for one rigid body.

Xu & Halse, arXiv:1611.00616, with the corrections of ``docs/theory/dqvi.md`` (section
numbers below are that note's).
Per step, with ``x = (phi, rho)`` the increment ``f = a + eps 1/2 rho a``,
``a = (phi, s)``, ``s = sqrt(1 - |phi|^2)`` (relative rotation ``phi = n sin(theta/2)``,
translation ``rho`` of O in the frame of node k):

1. ``c = (h/2) pi_k + (h^2/4) W_k`` (the weight is h^2/4, not h^2/2, section 2.11);
2. Newton on ``G(x) = c`` with the analytic 6x6 Jacobian from ``M6^-1 c`` (the
   recommended guess), backtracking so that ``|phi| < 1`` and (above ``REUSE_BELOW``) the
   residual norm decreases; once the residual is below ``REUSE_BELOW`` the last LU factors
   are reused (chord steps, as fast as Newton there) as long as each chord step shrinks
   the residual by ``CHORD_CONTRACTION``, otherwise the Jacobian is refreshed;
3. ``pose_{k+1} = pose_k f`` (no renormalisation) and the discrete Legendre transform
   ``pi_{k+1} = (2/h) Gbar(x) + (h/2) W_{k+1}``.

``W`` is the body wrench about O: gravity at the node plus the held input wrench.
A solution exists only for about ``h |omega| <= 1`` (90 degrees per step); beyond it
``step`` raises ``NoSolutionError`` naming the failure, the relative residual, the
iterations, ``h`` and ``h |omega|``. The exact limit depends on the body and the rate's
direction: exactly 1 about a principal axis, where the root is a fold of ``G`` (singular
Jacobian, Newton only linear: a frozen chord Jacobian used to stall there), up to about
1.05 for the paper's symmetric top off-axis and about 1.2 for diag(0.3, 0.5, 0.8);
``test_dqvi_large_steps.py`` checks these against closed forms and independent solves.
Roots that remain past the limit rotate far beyond 90 degrees per step (the spurious
branch of docs/theory/dqvi.md section 2.10); Newton from the guess does not seek them.
The scheme couples translation and rotation: a ``CouplingLimitWarning`` is issued once
per integrator when the coupling number ``Gamma = m |rho|^2 / (4 lambda_min(I_C))``
exceeds ``coupling_warning``.

``step`` and ``solve`` run the whole Newton solve in one call of the compiled kernel
(``_kernels.c``) when it is built; the Python code below is the reference it follows
expression by expression (``MAV_KERNELS=reference``, or ``kernels = None`` on an
instance, runs it). The reference works on Python floats (numpy only for the 6x6
Jacobian and solve): on 6-element arrays numpy's per-call overhead would dominate.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from mav_geometry.arrays import FloatVector
from mav_geometry.kernels import load_kernels
from mav_geometry.scalar import Vector3, cross, multiply, rotate_inverse
from mav_geometry.shown import shown
from variational_sim.integrators.base import (
    CouplingLimitWarning,
    NoSolutionError,
    check_step_size,
)
from variational_sim.models.rigid_body import RigidBody, RigidBodyState

Parts = tuple[float, Vector3, float, list[float]]
"""``(s, beta, b0, mu)`` of an increment ``x = (phi, rho)``."""

_kernels = load_kernels("variational_sim.integrators._kernels")

_LIMIT, _SINGULAR, _NO_DESCENT = 1, 2, 3
"""Failure codes of the solve (the compiled kernel's ``code``)."""
_NO_DESCENT_CAUSE = ("no correction along the Newton direction reduces the residual "
                     "(a nonzero local minimum of |G(x) - c|: no solution nearby)")


@dataclass
class SolverStatistics:
    """Newton statistics of the last step and running maxima."""

    last_iterations: int = 0
    last_jacobians: int = 0
    max_iterations_seen: int = 0
    max_jacobians_seen: int = 0
    last_coupling_number: float = 0.0
    max_coupling_number: float = 0.0
    coupling_warnings: int = 0


class DQVI:
    """DQVI stepping ``RigidBodyState`` under a held body wrench ``(tau_B, f_B)`` about O."""

    REUSE_BELOW = 1e-9
    """Relative residual below which Newton may keep the last Jacobian's LU factors."""

    CHORD_CONTRACTION = 0.1
    """A chord step must shrink the residual by this factor, or the Jacobian is refreshed."""

    def __init__(
        self,
        body: RigidBody,
        step_size: float,
        tolerance: float = 3e-16,
        max_iterations: int = 50,
        coupling_warning: float = 0.1,
    ) -> None:
        """``tolerance``: Newton stop on ``|G(x) - c| <= tolerance |c|`` (relative).

        The default sits at round-off: a looser stop (1e-14) lets the accepted
        residual bias the momentum update by up to 1e-14 relative per step, which
        accumulates into visible momentum drift over 1e5 steps. When round-off keeps
        the residual above it, Newton stops once its correction is below round-off.
        """
        self.body = body
        self.step_size = check_step_size(step_size)
        if not 0.0 < tolerance < 1e-3:
            raise ValueError(f"tolerance must be in (0, 1e-3), got {tolerance!r}")
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be >= 1, got {max_iterations!r}")
        self.tolerance = tolerance
        self.max_iterations = max_iterations
        self.coupling_warning = coupling_warning
        self.statistics = SolverStatistics()
        m6 = body.inertia
        self._m6_stacked = np.vstack([m6, np.eye(6)])
        self._rows = [tuple(row) for row in m6.tolist()]
        inverse = np.linalg.inv(m6)
        self._inverse_rows = [tuple(row) for row in inverse.tolist()]
        translational = m6[3:, 3:]
        rotational = m6[:3, :3] - m6[:3, 3:] @ np.linalg.solve(translational, m6[3:, :3])
        self._coupling_scale = float(
            np.linalg.eigvalsh(translational)[-1] / (4.0 * np.linalg.eigvalsh(rotational)[0])
        )
        self._weight = tuple((body.mass * body.gravity).tolist())
        self._com = tuple(body.com_offset.tolist())
        self.kernels: ModuleType | None = _kernels
        """The compiled step (``_kernels.c``), or None to run the Python reference."""
        # the layout of DqviBody in _kernels.c: M6, M6^-1 (rows), m g (world), CoM offset
        self._kernel_body = np.concatenate([
            m6.ravel(), inverse.ravel(), body.mass * body.gravity, body.com_offset])

    # -- model terms ------------------------------------------------------------------------

    def _wrench(self, q: list[float], held: list[float]) -> list[float]:
        """Body wrench about O at attitude ``q``: gravity plus the held input."""
        force = rotate_inverse(q, self._weight)
        torque = cross(self._com, force)
        return [
            torque[0] + held[0], torque[1] + held[1], torque[2] + held[2],
            force[0] + held[3], force[1] + held[4], force[2] + held[5],
        ]

    def _momenta(self, x: list[float]) -> Parts:
        """Increment parts ``s``, ``beta``, ``b0`` and ``mu = M6 (phi, beta)``."""
        p0, p1, p2, r0, r1, r2 = x
        s = math.sqrt(1.0 - (p0 * p0 + p1 * p1 + p2 * p2))
        b0 = -0.5 * (r0 * p0 + r1 * p1 + r2 * p2)
        e0 = 0.5 * (s * r0 + r1 * p2 - r2 * p1)
        e1 = 0.5 * (s * r1 + r2 * p0 - r0 * p2)
        e2 = 0.5 * (s * r2 + r0 * p1 - r1 * p0)
        mu = [
            m0 * p0 + m1 * p1 + m2 * p2 + m3 * e0 + m4 * e1 + m5 * e2
            for m0, m1, m2, m3, m4, m5 in self._rows
        ]
        return s, (e0, e1, e2), b0, mu

    @staticmethod
    def _g(x: list[float], s: float, beta: Vector3, b0: float, mu: list[float],
           sign: float) -> list[float]:
        """``G`` (sign=+1, vec of R~(f)^T M~ f) or ``Gbar`` (sign=-1, vec of L~(f)^T M~ f).

        ``G = [A mu_a + B mu_b; A mu_b]`` with ``A = s I + sign [phi]x``,
        ``B = b0 I + sign [beta]x``.
        """
        p0, p1, p2 = x[0], x[1], x[2]
        e0, e1, e2 = beta
        a0, a1, a2, m0, m1, m2 = mu
        return [
            s * a0 + sign * (p1 * a2 - p2 * a1) + b0 * m0 + sign * (e1 * m2 - e2 * m1),
            s * a1 + sign * (p2 * a0 - p0 * a2) + b0 * m1 + sign * (e2 * m0 - e0 * m2),
            s * a2 + sign * (p0 * a1 - p1 * a0) + b0 * m2 + sign * (e0 * m1 - e1 * m0),
            s * m0 + sign * (p1 * m2 - p2 * m1),
            s * m1 + sign * (p2 * m0 - p0 * m2),
            s * m2 + sign * (p0 * m1 - p1 * m0),
        ]

    def _jacobian(self, x: list[float], s: float, beta: Vector3, b0: float,
                  mu: list[float]) -> np.ndarray:
        """Analytic ``dG/dx`` (docs/theory/dqvi.md §2.9), as ``(K M6 + Z) Y + N0``."""
        p0, p1, p2, r0, r1, r2 = x
        a0, a1, a2, m0, m1, m2 = mu
        e0, e1, e2 = beta
        inv_s = 1.0 / s
        # Y = d(phi, beta)/d(phi, rho) with
        # dbeta/dphi = 1/2([rho]x - rho phi^T / s) and dbeta/drho = 1/2(s I - [phi]x)
        hs, k = 0.5 * s, 0.5 * inv_s
        hr0, hr1, hr2 = 0.5 * r0, 0.5 * r1, 0.5 * r2
        hp0, hp1, hp2 = 0.5 * p0, 0.5 * p1, 0.5 * p2
        kr0, kr1, kr2 = k * r0, k * r1, k * r2
        # One array [K | Z | N0 | Y] (numpy call overhead dominates at this size), where
        # K = [[A, B], [0, A]], A = s I + [phi]x, B = b0 I + [beta]x,
        # Z = [[0, -[mu_b]x], [0, 0]] (so [K | Z] @ [[M6], [I]] = K M6 + Z) and
        # N0 = [[-mu_a phi^T/s - [mu_a]x - mu_b rho^T/2, -mu_b phi^T/2],
        #       [-mu_b phi^T/s - [mu_b]x, 0]]
        ha0, ha1, ha2 = a0 * inv_s, a1 * inv_s, a2 * inv_s
        hm0, hm1, hm2 = m0 * inv_s, m1 * inv_s, m2 * inv_s
        n0, n1, n2 = 0.5 * m0, 0.5 * m1, 0.5 * m2
        blocks = np.array([
            [s, -p2, p1, b0, -e2, e1, 0.0, 0.0, 0.0, 0.0, m2, -m1,
             -ha0 * p0 - n0 * r0, -ha0 * p1 + a2 - n0 * r1, -ha0 * p2 - a1 - n0 * r2,
             -n0 * p0, -n0 * p1, -n0 * p2,
             1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            [p2, s, -p0, e2, b0, -e0, 0.0, 0.0, 0.0, -m2, 0.0, m0,
             -ha1 * p0 - a2 - n1 * r0, -ha1 * p1 - n1 * r1, -ha1 * p2 + a0 - n1 * r2,
             -n1 * p0, -n1 * p1, -n1 * p2,
             0.0, 1.0, 0.0, 0.0, 0.0, 0.0],
            [-p1, p0, s, -e1, e0, b0, 0.0, 0.0, 0.0, m1, -m0, 0.0,
             -ha2 * p0 + a1 - n2 * r0, -ha2 * p1 - a0 - n2 * r1, -ha2 * p2 - n2 * r2,
             -n2 * p0, -n2 * p1, -n2 * p2,
             0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, s, -p2, p1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
             -hm0 * p0, -hm0 * p1 + m2, -hm0 * p2 - m1, 0.0, 0.0, 0.0,
             -kr0 * p0, -hr2 - kr0 * p1, hr1 - kr0 * p2, hs, hp2, -hp1],
            [0.0, 0.0, 0.0, p2, s, -p0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
             -hm1 * p0 - m2, -hm1 * p1, -hm1 * p2 + m0, 0.0, 0.0, 0.0,
             hr2 - kr1 * p0, -kr1 * p1, -hr0 - kr1 * p2, -hp2, hs, hp0],
            [0.0, 0.0, 0.0, -p1, p0, s, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
             -hm2 * p0 + m1, -hm2 * p1 - m0, -hm2 * p2, 0.0, 0.0, 0.0,
             -hr1 - kr2 * p0, hr0 - kr2 * p1, -kr2 * p2, hp1, -hp0, hs],
        ])
        result: np.ndarray = (blocks[:, :12] @ self._m6_stacked) @ blocks[:, 18:] + blocks[:, 12:18]
        return result

    # -- public -----------------------------------------------------------------------------

    def residual(self, x: FloatVector) -> np.ndarray:
        """``G(x)`` of the step equation (for checks)."""
        x = list(map(float, x))
        s, beta, b0, mu = self._momenta(x)
        return np.array(self._g(x, s, beta, b0, mu, 1.0))

    def jacobian(self, x: FloatVector) -> np.ndarray:
        """Analytic ``dG/dx`` at ``x = (phi, rho)`` (for checks)."""
        x = list(map(float, x))
        s, beta, b0, mu = self._momenta(x)
        return self._jacobian(x, s, beta, b0, mu)

    def solve(self, target: list[float]) -> list[float]:
        """Newton solve of ``G(x) = target`` from the recommended guess ``M6^-1 target``."""
        if self.kernels is None:
            return self._solve(target)[0]
        x = np.empty(6)
        self._check_report(self.kernels.dqvi_solve(
            self._kernel_body, self.tolerance, self.max_iterations, self.REUSE_BELOW,
            self.CHORD_CONTRACTION, target, x))
        result: list[float] = x.tolist()
        return result

    def _solve(self, target: list[float]) -> tuple[list[float], Parts]:
        """``solve`` returning also the increment parts at the solution.

        Newton with a fresh analytic Jacobian while the relative residual is above
        ``REUSE_BELOW``, each step backtracked (halved) until ``|phi| < 1`` and the
        residual norm decreases (Armijo). Below ``REUSE_BELOW`` the last LU factors are
        reused only while the chord steps keep contracting the residual by
        ``CHORD_CONTRACTION``; otherwise the Jacobian is refreshed. Near the step limit
        the solution sits at a fold of ``G`` (singular Jacobian at the root), where
        Newton converges only linearly and a frozen Jacobian stalls.
        """
        # Here, not at the top: scipy.linalg (~0.5 s to import) serves only this reference
        # solve, which the compiled step replaces (start-up time).
        from scipy.linalg.lapack import dgesv, dgetrs

        c0, c1, c2, c3, c4, c5 = target
        guess = [m0 * c0 + m1 * c1 + m2 * c2 + m3 * c3 + m4 * c4 + m5 * c5
                 for m0, m1, m2, m3, m4, m5 in self._inverse_rows]
        x = [guess[0], guess[1], guess[2], 2.0 * guess[3], 2.0 * guess[4], 2.0 * guess[5]]
        # h |omega+| with omega+ the angular rate of M6^-1 (pi_k + h/2 W_k) (for messages)
        rate_step = 2.0 * math.sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2])
        if x[0] * x[0] + x[1] * x[1] + x[2] * x[2] >= 1.0:
            x[0:3] = [0.0, 0.0, 0.0]
        target_norm = math.sqrt(sum([v * v for v in target]))
        threshold = self.tolerance * target_norm
        reuse_below = self.REUSE_BELOW * target_norm
        factors: tuple[np.ndarray, np.ndarray] | None = None
        jacobians = 0
        parts = self._momenta(x)
        r, residual = self._residual(x, parts, target)
        previous = math.inf
        iteration = 0
        cause = f"the iteration limit ({self.max_iterations}) was reached"
        while True:
            if residual <= threshold:
                self._record(iteration, jacobians)
                return x, parts
            if iteration == self.max_iterations:
                break
            if (factors is not None and residual <= reuse_below
                    and residual <= self.CHORD_CONTRACTION * previous):
                # deep in the basin the last Jacobian's error is itself of the order of
                # the remaining correction: one chord step gains as much as a Newton step
                solution, info = dgetrs(*factors, r)
            else:
                lu, pivots, solution, info = dgesv(self._jacobian(x, *parts), r)
                factors = (lu, pivots)
                jacobians += 1
            if info != 0:
                cause = f"the Jacobian of G is singular (LAPACK info {info})"
                break
            dx = solution.tolist()
            iteration += 1
            found = self._line_search(x, dx, residual, target,
                                      armijo=residual > reuse_below)
            if found is None:
                cause = _NO_DESCENT_CAUSE
                break
            x, parts, r, new_residual, size = found
            previous, residual = residual, new_residual
            if size <= 1e-15 * max(1.0, math.sqrt(sum([v * v for v in x]))):
                self._record(iteration, jacobians)
                return x, parts
        raise self._failure(cause, residual, target_norm, iteration, jacobians, rate_step)

    def _failure(self, cause: str, residual: float, target_norm: float, iterations: int,
                 jacobians: int, rate_step: float) -> NoSolutionError:
        """The error of a failed solve (``rate_step``: h |omega| of the guess)."""
        relative = residual / target_norm if target_norm > 0.0 else residual
        return NoSolutionError(
            f"DQVI Newton failed with step {self.step_size} s at h |omega| = {rate_step:.4g}: "
            f"{cause}; the residual |G(x) - c| of the step equation is {relative:.3e} "
            f"relative to |c| = {target_norm:.3e} after {iterations} iterations "
            f"({jacobians} Jacobians). The discrete step has no solution beyond about "
            "h |omega| = 1 (exactly 1, i.e. 90 degrees per step, for a spin about a principal "
            "axis), or translation per step couples too strongly; reduce the step size"
        )

    def _check_report(self, report: tuple[int, int, int, float, float, float, int, float]
                      ) -> float:
        """Record the compiled solve's statistics, raise its failure; returns ``|rho|^2``."""
        code, iterations, jacobians, residual, target_norm, rate_step, info, rho_squared = report
        if code == 0:
            self._record(iterations, jacobians)
            return rho_squared
        cause = {_LIMIT: f"the iteration limit ({self.max_iterations}) was reached",
                 _SINGULAR: f"the Jacobian of G is singular (LAPACK info {info})",
                 _NO_DESCENT: _NO_DESCENT_CAUSE}[code]
        raise self._failure(cause, residual, target_norm, iterations, jacobians, rate_step)

    def _residual(self, x: list[float], parts: Parts,
                  target: list[float]) -> tuple[list[float], float]:
        """``G(x) - target`` and its norm."""
        g = self._g(x, *parts, 1.0)
        r = [g[0] - target[0], g[1] - target[1], g[2] - target[2],
             g[3] - target[3], g[4] - target[4], g[5] - target[5]]
        return r, math.sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]
                            + r[3] * r[3] + r[4] * r[4] + r[5] * r[5])

    def _line_search(
        self, x: list[float], dx: list[float], residual: float, target: list[float],
        armijo: bool,
    ) -> tuple[list[float], Parts, list[float], float, float] | None:
        """``x - lambda dx`` with the largest ``lambda = 2^-j`` keeping ``|phi| < 1`` and,
        when ``armijo``, reducing the residual norm by the factor ``1 - 1e-4 lambda``.

        Returns the new point, its parts, residual vector and norm, and the size of the
        applied correction; ``None`` when no ``lambda >= 2^-40`` qualifies.
        """
        scale = 1.0
        for _ in range(41):
            new = [x[0] - scale * dx[0], x[1] - scale * dx[1], x[2] - scale * dx[2],
                   x[3] - scale * dx[3], x[4] - scale * dx[4], x[5] - scale * dx[5]]
            if new[0] * new[0] + new[1] * new[1] + new[2] * new[2] < 1.0:
                parts = self._momenta(new)
                r, new_residual = self._residual(new, parts, target)
                if not armijo or new_residual <= (1.0 - 1e-4 * scale) * residual:
                    return (new, parts, r, new_residual,
                            scale * math.sqrt(sum([v * v for v in dx])))
            scale *= 0.5
        return None

    def _record(self, iterations: int, jacobians: int) -> None:
        stats = self.statistics
        stats.last_iterations = iterations
        stats.last_jacobians = jacobians
        stats.max_iterations_seen = max(stats.max_iterations_seen, iterations)
        stats.max_jacobians_seen = max(stats.max_jacobians_seen, jacobians)

    def _check_coupling(self, rho_squared: float) -> None:
        gamma = self._coupling_scale * rho_squared
        stats = self.statistics
        stats.last_coupling_number = gamma
        stats.max_coupling_number = max(stats.max_coupling_number, gamma)
        if gamma > self.coupling_warning:
            stats.coupling_warnings += 1
            if stats.coupling_warnings == 1:
                warnings.warn(
                    f"DQVI coupling number {gamma:.3g} > {self.coupling_warning}: translation "
                    "per step degrades rotational accuracy; reduce the step size",
                    CouplingLimitWarning,
                    stacklevel=3,
                )

    def step(self, state: RigidBodyState, inputs: FloatVector | None = None) -> RigidBodyState:
        """One step; ``inputs`` is the body wrench ``(tau_B, f_B)`` about O held over the step."""
        if self.kernels is not None:
            pose, momentum = np.empty(8), np.empty(6)
            self._check_coupling(self._check_report(self.kernels.dqvi_step(
                self._kernel_body, self.step_size, self.tolerance, self.max_iterations,
                self.REUSE_BELOW, self.CHORD_CONTRACTION, state.pose, state.momentum, inputs,
                pose, momentum)))
            return RigidBodyState(state.time + self.step_size, pose, momentum)
        h = self.step_size
        held = [0.0] * 6 if inputs is None else list(map(float, inputs))
        if len(held) != 6 or not all(map(math.isfinite, held)):
            raise ValueError(
                f"inputs must be a finite body wrench (tau_B, f_B) of 6, got {shown(inputs)}"
            )
        pose = state.pose.tolist()
        q, d = pose[:4], pose[4:]
        wrench = self._wrench(q, held)
        momentum = state.momentum.tolist()
        target = [0.5 * h * p + 0.25 * h * h * w for p, w in zip(momentum, wrench, strict=True)]
        x, (s, beta, b0, mu) = self._solve(target)
        self._check_coupling(x[3] * x[3] + x[4] * x[4] + x[5] * x[5])
        g_bar = self._g(x, s, beta, b0, mu, -1.0)
        # f = a + eps 1/2 rho a  (scalar-last); pose_{k+1} = pose_k f
        a = (x[0], x[1], x[2], s)
        f_dual = multiply((0.5 * x[3], 0.5 * x[4], 0.5 * x[5], 0.0), a)
        q_next = multiply(q, a)
        d_next = [u + v for u, v in zip(multiply(q, f_dual),
                                        multiply(d, a), strict=True)]
        wrench_next = self._wrench(list(q_next), held)
        momentum_next = [2.0 / h * g + 0.5 * h * w for g, w in zip(g_bar, wrench_next, strict=True)]
        return RigidBodyState(
            state.time + h, np.array([*q_next, *d_next]), np.array(momentum_next)
        )
