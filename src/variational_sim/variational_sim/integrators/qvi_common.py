"""Newton solver and input handling shared by the two quaternion variational integrators.

``step`` runs the whole step (Newton solve and update) in one call of the compiled kernel
(``_kernels.c``) when it is built; the numpy code here and in ``qvi_left`` /
``qvi_midpoint`` is the reference it follows (``MAV_KERNELS=reference``, or
``kernels = None`` on an instance, runs it).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray
from mav_geometry.kernels import load_kernels
from mav_geometry.shown import shown
from variational_sim.integrators.base import NoSolutionError, check_step_size
from variational_sim.models.coupled_body import (
    CoupledBodyState,
    CoupledModel,
    KineticCoefficients,
)

_kernels = load_kernels("variational_sim.integrators._kernels")

StepEquations = tuple[Callable[[FloatArray], FloatArray], Callable[[FloatArray], FloatArray]]
"""Residual ``R(z)`` of a step's equations and its Jacobian ``dR/dz``."""


def node_impulse_wrench(attitude: FloatArray, inputs: ArrayLike | None) -> FloatArray:
    """World-frame ``(tau, F)`` of a held body wrench ``(tau_B, F_B)`` (N m, N) at a node."""
    if inputs is None:
        return np.zeros(6)
    wrench = np.asarray(inputs, dtype=float)
    if wrench.shape != (6,) or not np.all(np.isfinite(wrench)):
        raise ValueError(
            f"inputs must be a finite body wrench (tau_B, F_B) of 6, got {shown(inputs)}")
    return np.concatenate([Q.rotate(attitude, wrench[:3]), Q.rotate(attitude, wrench[3:])])


def newton(residual: Callable[[FloatArray], FloatArray],
           jacobian: Callable[[FloatArray], FloatArray],
           guess: FloatArray, scale: float, tolerance: float, max_iterations: int,
           name: str) -> tuple[FloatArray, int]:
    """Solve ``residual(z) = 0``; once converged, iterate once more.

    Converged: ``|r| <= tolerance * scale`` or a correction below round-off relative
    to ``z`` (needed when the momenta, hence ``scale``, are zero). The extra iteration
    (docs/theory/qvi.md §10) keeps the solve error far below the stop threshold, so the
    discrete momenta do not random-walk at the tolerance level.
    """
    z = guess
    r = residual(z)
    threshold = tolerance * scale
    for iteration in range(1, max_iterations + 1):
        correction = np.linalg.solve(jacobian(z), r)
        z = z - correction
        r = residual(z)
        if not np.all(np.isfinite(r)):
            break
        if np.linalg.norm(r) <= threshold or (
                np.linalg.norm(correction) <= 1e-15 * np.linalg.norm(z)):
            z = z - np.linalg.solve(jacobian(z), r)
            return z, iteration + 1
    raise no_convergence(name, max_iterations)


def no_convergence(name: str, max_iterations: int) -> NoSolutionError:
    """The error of a Newton solve that did not converge."""
    return NoSolutionError(f"{name} Newton did not converge in {max_iterations} iterations; "
                           "reduce the step size")


class QuaternionVariationalIntegrator:
    """What both QVIs share: settings, and solving a step's equations for ``(v, w)``.

    Subclasses provide ``residual_and_jacobian(state, inputs)`` and the update.
    """

    name = "QVI"
    scheme = -1
    """The compiled kernel's scheme number (0 left rectangle, 1 midpoint)."""

    def __init__(self, model: CoupledModel, step_size: float, tolerance: float = 1e-14,
                 max_iterations: int = 30) -> None:
        self.model = model
        self.step_size = check_step_size(step_size)
        self.tolerance = tolerance
        self.max_iterations = max_iterations
        self.last_iterations = 0
        self.kernels: ModuleType | None = _kernels
        """The compiled step (``_kernels.c``), or None to run the numpy reference."""
        self._packed: tuple[KineticCoefficients, FloatArray] | None = None

    def residual_and_jacobian(self, state: CoupledBodyState,
                              inputs: ArrayLike | None = None) -> StepEquations:
        """``(R(z), J(z))`` callables of the step at ``state`` (exposed for checks)."""
        raise NotImplementedError

    def _solve(self, state: CoupledBodyState,
               inputs: ArrayLike | None) -> tuple[FloatArray, FloatArray]:
        """Body-frame velocities ``(v, w)`` of the step, from the previous ones as guess."""
        residual, jacobian = self.residual_and_jacobian(state, inputs)
        z, self.last_iterations = newton(
            residual, jacobian, np.concatenate([state.velocity, state.rate]),
            float(np.linalg.norm(state.momentum)), self.tolerance, self.max_iterations,
            self.name)
        return z[:3], z[3:]

    def _compiled_step(self, kernels: ModuleType, state: CoupledBodyState,
                       inputs: ArrayLike | None, coefficients: KineticCoefficients,
                       coupling_factor: float) -> CoupledBodyState:
        """The whole step in one kernel call, with ``coefficients`` at the scheme's time."""
        if self._packed is None or self._packed[0] is not coefficients:
            c = coefficients  # packed once per coefficients object (constant without morphing)
            self._packed = (c, np.concatenate(
                [[c.a_xx], c.A_xw.ravel(), c.a_x, c.A_ww.ravel(), c.a_w]).astype(float))
        out = np.empty(23)
        code, iterations = kernels.qvi_step(
            self.scheme, self._packed[1], self.step_size, coupling_factor, self.tolerance,
            self.max_iterations, state.attitude, state.position, state.velocity, state.rate,
            state.momentum, inputs, out)
        if code == 2:
            raise np.linalg.LinAlgError("Singular matrix")  # as numpy's solve in the reference
        if code != 0:
            raise no_convergence(self.name, self.max_iterations)
        self.last_iterations = iterations
        return CoupledBodyState(state.time + self.step_size, out[:4], out[4:7], out[7:10],
                                out[10:13], out[13:17], out[17:])
