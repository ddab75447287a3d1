"""DQVI at large steps (h |omega| up to the existence limit of the step equation).

The torque-free step equation of a body at its CoM is ``s J phi + phi x J phi = (h/2) J omega``.
It has a solution only up to a body- and direction-dependent ``h |omega|``: exactly 1 for a
spin about a principal axis (a fold of ``G``: the Jacobian is singular at the root), about
1.01 for the paper's symmetric top at omega = (1, 0, 3), at most 1.048 for that top in any
direction (at most 1.155 for any symmetric rigid body), and about 1.2 for I = diag(0.3, 0.5,
0.8). So at h |omega| = 1.5 no free rigid body here has a solution: there the tests check
that ``NoSolutionError`` says why, and that the equations indeed have no solution.

References: the symmetric top's step reduces to one scalar equation (closed form below);
asymmetric steps are cross-checked with MINPACK's ``hybr`` (scipy ``root``) on the residual.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import brentq, minimize_scalar, root

from mav_geometry import quaternion as Q
from mav_geometry.nilpotent import DUAL
from variational_sim.integrators.base import NoSolutionError
from variational_sim.integrators.dqvi import DQVI
from variational_sim.models.paper_bodies import generic_body, generic_initial_state, symmetric_top
from variational_sim.models.rigid_body import RigidBody

TOP_AXIAL, TOP_TRANSVERSE = 0.8, 0.5  # symmetric_top(): I = diag(0.5, 0.5, 0.8)
ASYMMETRIC = (0.3, 0.5, 0.8)
WIDE_DIRECTION = (0.79689894, -0.00134626, 0.60411113)
"""Rate direction in which ``ASYMMETRIC`` admits the largest h |omega| (about 1.2)."""


def asymmetric_top() -> RigidBody:
    return RigidBody.from_mass_properties(2.0, np.diag(ASYMMETRIC))


def rate(direction, h_omega: float, h: float) -> np.ndarray:
    direction = np.asarray(direction, dtype=float)
    return h_omega / h * direction / np.linalg.norm(direction)


def spinning(body: RigidBody, h: float, omega: np.ndarray):
    """The integrator at step ``h``, the body spinning at ``omega`` from the identity pose,
    and the right-hand side of its first step."""
    integrator = DQVI(body, h)
    state = body.state(DUAL.identity(), [*omega, 0, 0, 0])
    return integrator, state, target(integrator, state.momentum)


def target(integrator: DQVI, momentum: np.ndarray) -> np.ndarray:
    """``c = (h/2) pi`` of a torque-free step."""
    return 0.5 * integrator.step_size * np.asarray(momentum)


def relative_residual(integrator: DQVI, x, c) -> float:
    return float(np.linalg.norm(integrator.residual(x) - c) / np.linalg.norm(c))


def top_scalar_equation(h: float, omega):
    """``F(v) - 1`` whose root ``v = s^2`` gives the symmetric top's step (omega_2 = 0).

    With ``k = (I3 - I1)/I1``: ``s phi3 = h w3/2``, ``phi1 (s + k^2 phi3^2/s) = h w1/2``,
    ``phi2 = k phi1 phi3/s`` and ``|phi|^2 + s^2 = 1``.
    """
    k = (TOP_AXIAL - TOP_TRANSVERSE) / TOP_TRANSVERSE
    a, b = (0.5 * h * omega[0]) ** 2, (0.5 * h * omega[2]) ** 2
    return lambda v: a * v / (v * v + k * k * b) + b / v + v - 1.0


def top_increment(h: float, omega) -> np.ndarray:
    """Closed-form ``phi`` of the symmetric top's step (branch connected to small h)."""
    k = (TOP_AXIAL - TOP_TRANSVERSE) / TOP_TRANSVERSE
    equation = top_scalar_equation(h, omega)
    fold = minimize_scalar(equation, bounds=(1e-9, 1.0), method="bounded",
                           options={"xatol": 1e-14}).x
    v = brentq(equation, fold, 1.0, xtol=1e-300, rtol=8.9e-16)
    s = np.sqrt(v)
    phi3 = 0.5 * h * omega[2] / s
    phi1 = 0.5 * h * omega[0] * s / (v + k * k * phi3 * phi3)
    return np.array([phi1, k * phi1 * phi3 / s, phi3])


def top_has_solution(h: float, omega) -> bool:
    equation = top_scalar_equation(h, omega)
    return bool(minimize_scalar(equation, bounds=(1e-9, 1.0), method="bounded",
                                options={"xatol": 1e-14}).fun <= 0.0)


def independent_root(integrator: DQVI, c: np.ndarray, guess: np.ndarray) -> np.ndarray:
    """MINPACK hybr with a finite-difference Jacobian, run down to round-off (it then
    reports that xtol is too small, which is why ``success`` is not required)."""
    solution = root(lambda x: integrator.residual(x) - c, guess, method="hybr",
                    options={"xtol": 1e-15, "maxfev": 10000})
    return np.asarray(solution.x)


def run(integrator: DQVI, state, steps: int, every: int):
    samples, iterations = [state], []
    for k in range(steps):
        state = integrator.step(state)
        iterations.append(integrator.statistics.last_iterations)
        if (k + 1) % every == 0:
            samples.append(state)
    return samples, iterations


@pytest.mark.parametrize("axis", [(0.0, 0.0, 3.0), (1.0, 0.0, 0.0), (1.0, 1.0, 0.0)])
def test_principal_spin_exactly_at_the_step_limit_converges_to_the_fold(axis):
    """h |omega| = 1 about a principal axis: the root phi = n / sqrt(2) (90 degrees per step)
    is a double root of the step equation. A frozen (chord) Jacobian stalled there and
    raised NoSolutionError; Newton with refreshed Jacobians converges (linearly)."""
    body = symmetric_top()
    h = 0.1
    omega = rate(axis, 1.0, h)
    integrator, state, c = spinning(body, h, omega)
    x = np.array(integrator.solve(list(c)))
    assert relative_residual(integrator, x, c) < 1e-15
    assert integrator.statistics.last_iterations <= 30
    # a double root is determined only to sqrt(round-off) by any solver
    exact = np.asarray(axis) / np.linalg.norm(axis) / np.sqrt(2.0)
    np.testing.assert_allclose(x, [*exact, 0, 0, 0], atol=1e-7)
    nxt = integrator.step(state)
    q, _ = DUAL.unpack(nxt.pose)
    expected = Q.from_rotation_vector(np.pi / 2 * np.asarray(axis) / np.linalg.norm(axis))
    assert min(np.abs(q - expected).max(), np.abs(q + expected).max()) < 1e-7


@pytest.mark.parametrize(("direction", "h_omega"), [
    ((1.0, 0.0, 3.0), 0.1), ((1.0, 0.0, 3.0), 0.5), ((1.0, 0.0, 3.0), 1.0),
    ((1.0, 0.0, 3.0), 1.01), ((3.0, 0.0, 1.0), 1.0), ((3.0, 0.0, 1.0), 1.01),
])
def test_symmetric_top_matches_the_closed_form_discrete_precession(direction, h_omega):
    """One step equals the closed-form increment; 200 steps equal the exact discrete
    precession: pi_k = Rz(k delta) pi_0 and q_N = (a_0 r)^N r^-N with r = exp(delta z / 2)."""
    body = symmetric_top()
    h = 0.25
    omega = rate(direction, h_omega, h)
    assert top_has_solution(h, omega)
    integrator, state, c = spinning(body, h, omega)
    x = np.array(integrator.solve(list(c)))
    phi = top_increment(h, omega)
    np.testing.assert_allclose(x, [*phi, 0, 0, 0], atol=1e-12)
    assert relative_residual(integrator, x, c) < 1e-15

    inertia = np.array([TOP_TRANSVERSE, TOP_TRANSVERSE, TOP_AXIAL])
    s = np.sqrt(1.0 - phi @ phi)
    pi0 = inertia * omega
    pi1 = 2.0 / h * (s * inertia * phi - np.cross(phi, inertia * phi))
    delta = np.arctan2(pi1[1], pi1[0])
    if h_omega <= 0.1:  # the continuous precession: body rate turns by -lambda h per step
        assert delta == pytest.approx((TOP_AXIAL - TOP_TRANSVERSE) / TOP_TRANSVERSE
                                      * omega[2] * h, rel=5e-3)
    steps = 200
    samples, _ = run(integrator, state, steps, every=steps)
    final = samples[-1]
    turn = Q.from_rotation_vector([0.0, 0.0, steps * delta])
    rz = Q.to_matrix(turn)
    np.testing.assert_allclose(final.momentum[:3], rz @ pi0, atol=1e-11 * np.abs(pi0).max())
    np.testing.assert_allclose(final.momentum[3:], 0.0, atol=1e-14)
    screw = Q.multiply(np.array([*phi, s]), Q.from_rotation_vector([0.0, 0.0, delta]))
    exact = Q.multiply(Q.from_rotation_vector(steps * Q.to_rotation_vector(screw)),
                       Q.conjugate(turn))
    q, t = DUAL.unpack(final.pose)
    assert min(np.abs(q - exact).max(), np.abs(q + exact).max()) < 1e-10
    np.testing.assert_allclose(t, 0.0, atol=1e-14)


@pytest.mark.filterwarnings("ignore::variational_sim.integrators.base.CouplingLimitWarning")
@pytest.mark.parametrize(("case", "h_omega"), [
    ("wide", 0.1), ("wide", 1.0), ("wide", 1.1), ("wide", 1.15),
    ("tumbling", 1.0), ("tumbling", 1.1), ("generic", 0.1), ("generic", 1.0),
])
def test_asymmetric_step_agrees_with_an_independent_root_solve(case, h_omega):
    """Asymmetric free bodies (and the generic body: CoM off O, translating) at and beyond
    h |omega| = 1: the step's equation is solved to round-off, and MINPACK from a
    different start finds the same root."""
    if case == "generic":
        body = generic_body()
        state = generic_initial_state(body)
        h = h_omega / np.linalg.norm(body.twist(state)[:3])
    else:
        body = asymmetric_top()
        h = 0.2
        direction = WIDE_DIRECTION if case == "wide" else (1.0, -2.0, 1.5)
        state = body.state(DUAL.identity(), [*rate(direction, h_omega, h), 0, 0, 0])
    integrator = DQVI(body, h)
    c = target(integrator, state.momentum)
    x = np.array(integrator.solve(list(c)))
    assert relative_residual(integrator, x, c) < 1e-15
    assert integrator.statistics.last_iterations <= 12
    twist = body.twist(state)
    reference = independent_root(integrator, c, np.r_[0.4 * h * twist[:3], 0.8 * h * twist[3:]])
    assert relative_residual(integrator, reference, c) < 1e-13
    np.testing.assert_allclose(x, reference, atol=1e-12 * max(1.0, np.abs(x).max()))


@pytest.mark.filterwarnings("ignore::variational_sim.integrators.base.CouplingLimitWarning")
@pytest.mark.parametrize(("case", "h_omega", "steps"), [
    ("symmetric", 1.0, 2000), ("symmetric", 1.01, 1000),
    ("tumbling", 1.0, 2000), ("wide", 1.15, 500),
])
def test_large_steps_conserve_the_momentum_map_and_bound_the_energy(case, h_omega, steps):
    """Over many steps: spatial momentum to round-off, energy without drift (exact for the
    symmetric top), every step converged."""
    if case == "symmetric":
        body, direction = symmetric_top(), (1.0, 0.0, 3.0)
    else:
        body = asymmetric_top()
        direction = WIDE_DIRECTION if case == "wide" else (1.0, -2.0, 1.5)
    h = 0.25
    state = body.state(Q.normalize([0.2, -0.3, 0.1, 1.0]).tolist() + [0.0] * 4,
                       [*rate(direction, h_omega, h), 0, 0, 0])
    integrator = DQVI(body, h)
    samples, iterations = run(integrator, state, steps, every=5)
    assert max(iterations) <= 15
    momentum0 = body.spatial_momentum(state)
    drift = max(np.abs(body.spatial_momentum(s) - momentum0).max() for s in samples)
    assert drift < 1e-12 * np.abs(momentum0).max()
    energy0 = body.energy(state)
    error = np.array([body.energy(s) - energy0 for s in samples]) / energy0
    if case == "symmetric":
        assert np.abs(error).max() < 1e-12
    else:
        # bounded without drift (here it even stays at round-off: floor 1e-13)
        window = len(error) // 5
        first, last = np.abs(error[:window]).max(), np.abs(error[-window:]).max()
        assert last < 1.5 * first + 1e-13
        assert np.abs(error).max() < 1.5 * max(first, last) + 1e-13


def test_symmetric_top_beyond_its_existence_limit_fails_with_the_cause():
    """h |omega| = 1.5 (and 1.02) for omega = (1, 0, 3): the scalar equation has no root, so
    no step exists; the error names the residual, the iterations, h and h |omega|."""
    body = symmetric_top()
    for h_omega in (1.02, 1.5):
        h = 0.3
        omega = rate((1.0, 0.0, 3.0), h_omega, h)
        assert not top_has_solution(h, omega)
        with pytest.raises(NoSolutionError) as raised:
            DQVI(body, h).step(body.state(DUAL.identity(), [*omega, 0, 0, 0]))
        message = str(raised.value)
        assert f"h |omega| = {h_omega:.4g}" in message
        assert f"step {h} s" in message
        assert "residual |G(x) - c|" in message
        assert "relative to |c|" in message
        assert "iterations" in message
        assert "no solution nearby" in message


def test_asymmetric_top_beyond_its_existence_limit_fails_with_the_cause():
    """h |omega| = 1.5 for I = diag(0.3, 0.5, 0.8): 2 |J^-1 G(phi)| (the h |omega| a root
    phi would solve) stays below 1.21 over a dense sample of the ball |phi| < 1, and
    MINPACK finds no root either."""
    rng = np.random.default_rng(4)
    inertia = np.array(ASYMMETRIC)
    direction = rng.normal(size=(200000, 3))
    direction /= np.linalg.norm(direction, axis=1)[:, None]
    radius = rng.uniform(0.0, 1.0, 200000) ** (1 / 3)
    phi = direction * radius[:, None]
    s = np.sqrt(1.0 - radius**2)[:, None]
    g = s * inertia * phi + np.cross(phi, inertia * phi)
    assert (2.0 * np.linalg.norm(g / inertia, axis=1)).max() < 1.21

    body = asymmetric_top()
    h = 0.2
    omega = rate(WIDE_DIRECTION, 1.5, h)
    integrator, state, c = spinning(body, h, omega)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        best = root(lambda x: integrator.residual(x) - c if x[:3] @ x[:3] < 1 else np.full(6, 1.0),
                    np.r_[0.4 * h * omega, 0, 0, 0], method="hybr")
    assert relative_residual(integrator, best.x, c) > 1e-3 or best.x[:3] @ best.x[:3] >= 1
    with pytest.raises(NoSolutionError, match=r"h \|omega\| = 1\.5: .*after \d+ iterations"):
        integrator.step(state)
