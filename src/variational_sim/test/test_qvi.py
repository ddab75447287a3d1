"""Verification of the left-rectangle and midpoint QVIs.

Fixtures and expectations: docs/theory/qvi.md §7-§8 (errata: §9).
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from mav_geometry import quaternion as Q
from mav_geometry.nilpotent import DUAL
from variational_sim.integrators.adaptive import ScipyAdaptive
from variational_sim.integrators.qvi_left import LeftRectangleQVI
from variational_sim.integrators.qvi_midpoint import MidpointQVI
from variational_sim.models.coupled_body import (
    FixedCoefficients,
    KineticCoefficients,
    fixed_wing_coupled_body,
    legendre_initial_state,
    physical_momenta,
)
from variational_sim.models.morphing_uav import small_morphing_uav

RATE0 = np.array([1.0, 1.0, 1.0])


def run(integrator, state, steps):
    states = [state]
    for _ in range(steps):
        state = integrator.step(state)
        states.append(state)
    return states


def fixed_wing_start(model=None):
    model = model or fixed_wing_coupled_body()
    return legendre_initial_state(model, Q.identity(), np.zeros(3), np.zeros(3), RATE0)


def conservation_errors(model, states, h, midpoint):
    """Running-maximum e_T, e_w, e_x (Eqs. 34-35) over the interval samples."""
    c = model.coefficients(0.0)
    energy0 = c.energy(np.zeros(3), RATE0)
    angular0, linear0 = physical_momenta(model, states[0], 0.0)
    e_t = e_w = e_x = 0.0
    for state in states[1:]:
        angular, linear = physical_momenta(model, state, state.time - h * (0.5 if midpoint else 1))
        e_t = max(e_t, abs(c.energy(state.velocity, state.rate) - energy0) / energy0)
        e_w = max(e_w, np.linalg.norm(angular - angular0) / np.linalg.norm(angular0))
        e_x = max(e_x, np.linalg.norm(linear - linear0) / np.linalg.norm(linear0))
    return e_t, e_w, e_x


def test_fixed_wing_coefficients_give_the_notes_mass_properties_and_initial_metrics():
    c = fixed_wing_coupled_body().coefficients(0.0)
    assert c.mass == 8.0
    np.testing.assert_allclose(c.com_offset, [0.79375, 0.0, 0.005], atol=1e-15)
    np.testing.assert_allclose(np.linalg.eigvalsh(c.inertia_com), [0.4672, 1.0673, 1.5005],
                               atol=1e-4)
    # hand computation at v = 0, w = (1, 1, 1): T = w^T A_ww w
    assert c.energy(np.zeros(3), RATE0) == pytest.approx(0.2342 + 3.0539 + 3.2699 - 2 * 6.4761e-5)
    angular, linear = physical_momenta(fixed_wing_coupled_body(), fixed_wing_start(), 0.0)
    np.testing.assert_allclose(linear, 8.0 * np.cross(RATE0, [0.79375, 0.0, 0.005]), atol=1e-14)
    np.testing.assert_allclose(angular, c.inertia_com @ RATE0, atol=1e-14)


def test_morphing_coefficients_match_the_kinetic_energy_of_the_parts():
    """Eq. 1 with the model's coefficients against the part-by-part energy, with the
    wing rates and centre-of-mass velocities taken by finite differences in time."""
    uav = small_morphing_uav()
    rng = np.random.default_rng(5)
    time, dt = 0.7, 1e-6
    v, w = rng.normal(size=3), rng.normal(size=3)
    angles, rates = uav.schedule(time)
    energy = 0.5 * w @ uav.fuselage_inertia @ w + 0.5 * uav.fuselage_mass * np.sum(
        (v + np.cross(w, uav.fuselage_com)) ** 2)
    mirror = np.diag([1.0, -1.0, 1.0])
    for side, reflect in ((1.0, np.eye(3)), (-1.0, mirror)):
        def pose(t, side=side, reflect=reflect):
            attitude, _ = uav._wing_motion(uav.schedule(t)[0], rates, side)
            return attitude, reflect @ uav.hinge + attitude @ reflect @ uav.wing_com
        attitude, s = pose(time)
        (after, s_after), (before, s_before) = pose(time + dt), pose(time - dt)
        spin = (after - before) / (2 * dt) @ attitude.T
        omega = np.array([spin[2, 1], spin[0, 2], spin[1, 0]])
        s_dot = (s_after - s_before) / (2 * dt)
        inertia = attitude @ reflect @ uav.wing_inertia @ reflect @ attitude.T
        energy += 0.5 * uav.wing_mass * np.sum((v + np.cross(w, s) + s_dot) ** 2)
        energy += 0.5 * (w + omega) @ inertia @ (w + omega)
    assert uav.coefficients(time).energy(v, w) == pytest.approx(energy, rel=1e-9)
    assert np.isfinite(angles).all()


@pytest.mark.parametrize("integrator_class", [LeftRectangleQVI, MidpointQVI])
@pytest.mark.parametrize("morphing", [False, True])
def test_analytic_jacobians_match_central_differences(integrator_class, morphing):
    model = small_morphing_uav() if morphing else fixed_wing_coupled_body()
    state = legendre_initial_state(model, Q.normalize([0.1, -0.2, 0.3, 1.0]), [1.0, 2.0, 3.0],
                                   [0.5, -0.2, 0.1], RATE0)
    residual, jacobian = integrator_class(model, 0.05).residual_and_jacobian(state, np.ones(6))
    z = np.array([0.4, -0.1, 0.2, 1.2, 0.8, 1.1])
    step = 1e-7
    numeric = np.column_stack([(residual(z + step * e) - residual(z - step * e)) / (2 * step)
                               for e in np.eye(6)])
    np.testing.assert_allclose(jacobian(z), numeric, atol=1e-7)


def test_convergence_orders_against_the_continuous_equations():
    """Fixed-wing body, 2 s, Legendre initialisation: left-rectangle order 1, midpoint order 2."""
    model = fixed_wing_coupled_body()
    body = model.coefficients(0.0).rigid_body()
    reference = ScipyAdaptive(body, 2.0, rtol=1e-13, atol=1e-13).step(
        body.state(DUAL.identity(), np.r_[RATE0, 0.0, 0.0, 0.0]))
    q_ref, x_ref = DUAL.unpack(reference.pose)
    for integrator_class, order in ((LeftRectangleQVI, 1.0), (MidpointQVI, 2.0)):
        errors = []
        for h in (0.04, 0.02, 0.01, 0.005):
            final = run(integrator_class(model, h), fixed_wing_start(model), round(2.0 / h))[-1]
            q_error = min(np.abs(final.attitude - q_ref).max(),
                          np.abs(final.attitude + q_ref).max())
            errors.append(max(q_error, np.abs(final.position - x_ref).max()))
        orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
        np.testing.assert_allclose(orders[-2:], order, atol=0.15)


def test_principal_axis_spin_is_exact_for_both_schemes():
    c = fixed_wing_coupled_body().coefficients(0.0)
    model = FixedCoefficients(KineticCoefficients(c.a_xx, np.zeros((3, 3)), c.a_x, c.A_ww,
                                                  c.a_w, c.a0))
    rate = np.array([0.0, 2.0, 0.0])  # an eigenvector of A_ww
    for integrator_class in (LeftRectangleQVI, MidpointQVI):
        state = legendre_initial_state(model, Q.identity(), np.zeros(3), np.zeros(3), rate)
        for k, s in enumerate(run(integrator_class(model, 0.01), state, 500)):
            exact = Q.from_rotation_vector(k * 0.01 * rate)
            assert min(np.abs(s.attitude - exact).max(), np.abs(s.attitude + exact).max()) < 1e-13


def test_morphing_midpoint_conserves_discrete_momenta_and_is_second_order():
    """Prescribed flapping; no forces: p_x and the discrete angular momentum
    R(qm) D2 + (x_k + x_{k+1})/2 x p_x are constant to round-off; self-convergence order 2
    (left-rectangle: order 1, p_x exact)."""
    uav = small_morphing_uav()
    start = legendre_initial_state(uav, Q.identity(), np.zeros(3), [2.0, 0.0, 0.5],
                                   [0.3, 0.2, 0.1])
    h = 0.02
    states = run(MidpointQVI(uav, h), start, 100)
    momenta = []
    for before, after in pairwise(states):
        c = uav.coefficients(before.time + 0.5 * h)
        linear = Q.rotate(after.interval_attitude, c.d1(after.velocity, after.rate))
        angular = Q.rotate(after.interval_attitude, c.d2(after.velocity, after.rate)) + np.cross(
            0.5 * (before.position + after.position), linear)
        momenta.append(np.r_[angular, linear])
    momenta = np.array(momenta)
    assert np.abs(momenta - momenta[0]).max() < 1e-13 * np.abs(momenta).max()
    for integrator_class, order in ((LeftRectangleQVI, 1.0), (MidpointQVI, 2.0)):
        finals = [run(integrator_class(uav, step), start, round(2.0 / step))[-1]
                  for step in (0.04, 0.02, 0.01, 0.005)]
        differences = [
            np.abs(a.position - b.position).max() + np.abs(a.attitude - b.attitude).max()
            for a, b in pairwise(finals)
        ]
        assert np.log2(differences[1] / differences[2]) == pytest.approx(order, abs=0.15)
        linear = [f.momentum[3:] for f in finals]
        np.testing.assert_allclose(np.array(linear) - start.momentum[3:], 0.0, atol=1e-13)


def test_paper_claim_midpoint_about_a_hundred_times_better_on_the_fixed_wing_body():
    """Sec. 4.1 at h = 0.01 (20 s here; the benchmark runs the full 100 s): midpoint e_T and
    e_w at least 10^1.5 below left-rectangle; translational momentum error below 1e-13."""
    model = fixed_wing_coupled_body()
    h, steps = 0.01, 2000
    left = conservation_errors(model, run(LeftRectangleQVI(model, h), fixed_wing_start(), steps),
                               h, midpoint=False)
    mid = conservation_errors(model, run(MidpointQVI(model, h), fixed_wing_start(), steps),
                              h, midpoint=True)
    assert left[0] / mid[0] > 10**1.5
    assert left[1] / mid[1] > 10**1.5
    assert left[2] < 1e-13
    assert mid[2] < 1e-13


def test_printed_midpoint_equation_fails_the_papers_own_results():
    """Negative test (erratum 1): coefficient h instead of h/2 on the coupling terms gives
    an energy error above even the left-rectangle scheme's."""
    model = fixed_wing_coupled_body()
    h, steps = 0.01, 1000
    left = conservation_errors(model, run(LeftRectangleQVI(model, h), fixed_wing_start(), steps),
                               h, midpoint=False)
    printed = conservation_errors(
        model, run(MidpointQVI(model, h, coupling_factor=1.0), fixed_wing_start(), steps),
        h, midpoint=True)
    corrected = conservation_errors(
        model, run(MidpointQVI(model, h), fixed_wing_start(), steps), h, midpoint=True)
    assert printed[0] > left[0]
    assert printed[0] > 100 * corrected[0]


@pytest.mark.parametrize("integrator_class", [LeftRectangleQVI, MidpointQVI])
def test_held_body_force_adds_its_impulse_to_the_translational_momentum(integrator_class):
    """Uncoupled body at rest, constant body force along x: no rotation, p_x grows by h F
    per step, and the node positions follow the discrete (rectangle) quadrature."""
    c = fixed_wing_coupled_body().coefficients(0.0)
    model = FixedCoefficients(KineticCoefficients(c.a_xx, np.zeros((3, 3)), c.a_x, c.A_ww,
                                                  c.a_w, c.a0))
    state = legendre_initial_state(model, Q.identity(), np.zeros(3), np.zeros(3), np.zeros(3))
    h, force = 0.01, 2.0
    integrator = integrator_class(model, h)
    for k in range(1, 101):
        state = integrator.step(state, [0.0, 0.0, 0.0, force, 0.0, 0.0])
        np.testing.assert_allclose(state.momentum, [0, 0, 0, k * h * force, 0, 0], atol=1e-13)
    np.testing.assert_array_equal(state.attitude, Q.identity())
    # velocity of interval k is (k+1) h F / m; x_N = h sum_{k<N} v_k = h^2 F N (N+1) / (2 m)
    np.testing.assert_allclose(state.position, [h * h * force * 100 * 101 / 2 / 8.0, 0, 0],
                               rtol=1e-12)
