"""The compiled maximal-coordinate step: the model packed once, one C call per step.

``_kernels.step`` runs a whole step of ``VariationalMultibody`` (contact-free Newton)
or of ``ContactVariationalMultibody`` (broad phase, then the interior point), the same
algorithm as the numpy reference in ``integrator``/``contact``/``interior_point``. The
Newton matrix is factorised as a band matrix under a reverse Cuthill-McKee ordering of
its sparsity pattern (bodies' 6x6 blocks, joint rows against their two bodies, motor
couplings between the bodies a joint connects), so the cost of a step grows linearly
with the number of bodies of a chain. ``MAV_KERNELS=reference`` (or ``compiled=False``
on the integrator) runs the reference.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from mav_geometry.arrays import FloatArray
from mav_geometry.kernels import load_kernels
from variational_sim.multibody.forces import motor_lines
from variational_sim.multibody.mechanism import Contact

if TYPE_CHECKING:
    from variational_sim.multibody.integrator import VariationalMultibody

_kernels = load_kernels("variational_sim.multibody._kernels")

# status codes of _kernels.step
OK, NEWTON_FAILED, INTERIOR_POINT_FAILED, SINGULAR, OUTSIDE_BAND = range(5)
# flags of _kernels.step
PREDICTOR_CORRECTOR, WARM_START, FREE_STEP_FIRST, HAVE_PAIRS = 1, 2, 4, 8
PAIRS, UNKNOWNS = 5, 7


def kernels() -> ModuleType | None:
    """The compiled module (signatures in ``_kernels.pyi``), or None when the reference
    runs."""
    return _kernels


def band_order(bodies: int, table: FloatArray, actuated: list[tuple[int, int]]
               ) -> tuple[FloatArray, int, int]:
    """Band position of each KKT unknown (6 bodies + rows) and the lower and upper
    bandwidths of the Newton matrix under that (reverse Cuthill-McKee) order.

    ``table``: the constraint rows (``ConstraintSet.table``); ``actuated``: the (parent,
    child) body pairs coupled by motors (parent -1 for the world).
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    size = 6 * bodies + len(table)
    block, angular = np.arange(6), np.arange(3)
    # structural nonzeros only: motors couple angular blocks, dot rows have no linear part
    rows = [np.repeat(6 * b + block, 6) for b in range(bodies)]
    columns = [np.tile(6 * b + block, 6) for b in range(bodies)]
    for a, b in actuated:
        if a >= 0:
            rows += [np.repeat(6 * a + angular, 3), np.repeat(6 * b + angular, 3)]
            columns += [np.tile(6 * b + angular, 3), np.tile(6 * a + angular, 3)]
    for r, (kind, a, b) in enumerate(table[:, :3].astype(int)):
        touched = angular if kind == 1 else block
        for e in (a, b):
            if e < bodies:
                rows += [6 * e + touched, np.full(len(touched), 6 * bodies + r)]
                columns += [np.full(len(touched), 6 * bodies + r), 6 * e + touched]
    i, j = np.concatenate(rows), np.concatenate(columns)
    pattern = coo_matrix((np.ones(len(i)), (i, j)), shape=(size, size)).tocsr()
    placed = reverse_cuthill_mckee(pattern, symmetric_mode=True)
    order = np.empty(size)
    order[placed] = np.arange(size)
    below = order[i] - order[j]
    return order, int(max(0.0, below.max())), int(max(0.0, -below.min()))


def pack_model(integrator: VariationalMultibody, contacts: tuple[Contact, ...]) -> FloatArray:
    """The model buffer of ``_kernels.step`` (layout: ``model_view`` in ``_kernels.c``)."""
    mechanism = integrator.mechanism
    n = len(mechanism.bodies)
    table = integrator.constraints.table
    actuators = []
    peaks, gains = (motor_lines(mechanism, integrator.speed_feedback)
                    if integrator.motor_commands else (np.zeros(len(mechanism.actuators)),) * 2)
    for actuator, peak, gain in zip(mechanism.actuators, peaks, gains, strict=True):
        joint = mechanism.joint(actuator.joint)
        ends = [mechanism.index(joint.parent), mechanism.index(joint.child)]
        actuators.append(np.concatenate([ends, joint.axis, joint.child_axis, [peak, gain]]))
    order, lower, upper = band_order(n, table, [(int(a[0]), int(a[1])) for a in actuators])
    header = [n, len(table), len(actuators), len(contacts), integrator.step_size,
              integrator.tolerance, integrator.max_iterations, float(integrator.motor_commands),
              lower, upper, *mechanism.gravity]
    bodies = np.column_stack([mechanism.masses, mechanism.inertias.reshape(n, 9),
                              np.linalg.inv(mechanism.inertias).reshape(n, 9)])
    contact_rows = [[mechanism.index(c.body), *c.point, c.radius, c.friction] for c in contacts]
    return np.concatenate([
        np.asarray(header, dtype=float), bodies.reshape(-1), table.reshape(-1),
        np.asarray(actuators, dtype=float).reshape(-1),
        np.asarray(contact_rows, dtype=float).reshape(-1), order,
    ])


class StepResult(NamedTuple):
    """What ``CompiledStep.step`` returns: the ``_kernels`` status, the solver's
    iterations, the end configuration, multipliers, node momenta (n, 6), torques (N m)
    and, when ``contact_solved``, the contact impulses (c, 3), duals (c, 7), slacks (c, 5)."""

    status: int
    iterations: int
    contact_solved: bool
    positions: FloatArray
    quaternions: FloatArray
    multipliers: FloatArray
    momenta: FloatArray
    torques: FloatArray
    contact_impulses: FloatArray
    contact_duals: FloatArray
    contact_slacks: FloatArray


class CompiledStep:
    """One integrator's packed model and workspace, and its step in one C call."""

    def __init__(self, module: ModuleType, integrator: VariationalMultibody,
                 contacts: tuple[Contact, ...]) -> None:
        self._module = module
        self.model = pack_model(integrator, contacts)
        self._work = np.empty(module.workspace_size(self.model))
        n = len(integrator.mechanism.bodies)
        self._shapes = ((n, 3), (n, 4), (integrator.constraints.rows,), (n, 6),
                        (len(integrator.mechanism.actuators),), (len(contacts), 3),
                        (len(contacts), UNKNOWNS), (len(contacts), PAIRS))

    def step(self, positions: FloatArray, quaternions: FloatArray, momenta: FloatArray,
             multipliers: FloatArray, torques: FloatArray, commands: FloatArray,
             duals: FloatArray, slacks: FloatArray, flags: int) -> StepResult:
        """One step from a state's arrays (``duals``/``slacks`` the contact warm start,
        used when their shape is (c, 7)/(c, 5)); ``flags`` the contact solver's switches."""
        outputs = [np.empty(shape) for shape in self._shapes]
        if duals.shape == self._shapes[6] and duals.size > 0:
            flags |= HAVE_PAIRS
        contiguous = np.ascontiguousarray
        status, iterations, contact = self._module.step(
            self.model, self._work, contiguous(positions, dtype=float),
            contiguous(quaternions, dtype=float), contiguous(momenta, dtype=float),
            contiguous(multipliers, dtype=float), contiguous(torques, dtype=float),
            contiguous(commands, dtype=float), contiguous(duals, dtype=float),
            contiguous(slacks, dtype=float), flags, *outputs)
        return StepResult(status, iterations, bool(contact), *outputs)

    def gaps(self, positions: FloatArray, quaternions: FloatArray) -> FloatArray:
        """Signed distance (m) of each contact sphere to the ground (``contact.gaps``)."""
        result = np.empty(self._shapes[5][0])
        self._module.contact_gaps(self.model, np.ascontiguousarray(positions, dtype=float),
                                  np.ascontiguousarray(quaternions, dtype=float), result)
        return result
