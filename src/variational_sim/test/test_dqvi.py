"""Verification of the DQVI against closed forms, invariants and an ODE reference.

Fixtures and expectations: docs/theory/dqvi.md §4 (T-numbers).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from mav_geometry import quaternion as Q
from mav_geometry.nilpotent import DUAL
from variational_sim.integrators.adaptive import ScipyAdaptive
from variational_sim.integrators.base import CouplingLimitWarning, NoSolutionError
from variational_sim.integrators.dqvi import DQVI
from variational_sim.models.paper_bodies import (
    STANDARD_GRAVITY,
    generic_body,
    generic_initial_state,
    symmetric_top,
    symmetric_top_rate,
)
from variational_sim.models.rigid_body import RigidBody, RigidBodyState


def run(integrator, state, steps, every=0):
    """Final state, plus every ``every``-th state when asked."""
    samples = [state]
    for k in range(steps):
        state = integrator.step(state)
        if every and (k + 1) % every == 0:
            samples.append(state)
    return state, samples


def pose_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Max-norm distance of two unit dual quaternions up to the double-cover sign."""
    return float(min(np.abs(a - b).max(), np.abs(a + b).max()))


def test_generic_body_matches_the_notes_inertia_energy_and_momentum():
    body = generic_body()
    expected = np.array([
        [0.5, 0.04, -0.12, 0, -0.6, -0.2], [0.04, 0.76, 0.06, 0.6, 0, -0.4],
        [-0.12, 0.06, 0.9, 0.2, 0.4, 0], [0, 0.6, 0.2, 2, 0, 0],
        [-0.6, 0, 0.4, 0, 2, 0], [-0.2, -0.4, 0, 0, 0, 2]])
    np.testing.assert_allclose(body.inertia, expected, atol=1e-15)
    state = generic_initial_state(body)
    omega, v = np.array([0.5, -1.0, 2.0]), np.array([0.3, 0.1, -0.2])
    r_g = np.array([0.2, -0.1, 0.3])
    # hand computation: rotational energy about the CoM plus translational of the CoM
    v_com = v + np.cross(omega, r_g)
    energy = 0.5 * omega @ np.diag([0.3, 0.5, 0.8]) @ omega + 0.5 * 2.0 * v_com @ v_com
    assert body.energy(state) == pytest.approx(energy, rel=1e-14)
    q, t = DUAL.unpack(state.pose)
    R = Q.to_matrix(q)
    p_world = 2.0 * R @ v_com
    L_world = R @ np.diag([0.3, 0.5, 0.8]) @ omega + np.cross(t + R @ r_g, p_world)
    np.testing.assert_allclose(body.spatial_momentum(state), np.r_[L_world, p_world], atol=1e-14)


@pytest.mark.parametrize("com", [(0.2, -0.1, 0.3), (0.0, 0.0, 0.0)])
def test_analytic_jacobian_matches_central_differences(com):
    body = RigidBody.from_mass_properties(2.0, np.diag([0.3, 0.5, 0.8]), com)
    integrator = DQVI(body, 0.1)
    rng = np.random.default_rng(3)
    for _ in range(5):
        x = np.r_[rng.uniform(-0.3, 0.3, 3), rng.normal(size=3)]
        step = 1e-7
        numeric = np.column_stack([
            (integrator.residual(x + step * e) - integrator.residual(x - step * e)) / (2 * step)
            for e in np.eye(6)
        ])
        np.testing.assert_allclose(integrator.jacobian(x), numeric, atol=1e-7)


def test_discrete_legendre_transforms_are_derivatives_of_the_discrete_lagrangian():
    """T4: perturbing the step's end node reproduces pi_{k+1} = (2/h) Gbar + (h/2) W_{k+1}."""
    body = generic_body(STANDARD_GRAVITY)
    h = 0.1
    integrator = DQVI(body, h)
    start = generic_initial_state(body)
    end = integrator.step(start)

    def lagrangian(pose_k, pose_k1):
        f = DUAL.multiply(DUAL.conjugate(pose_k), pose_k1)
        if f[3] < 0:
            f = -f
        y = np.r_[f[:3], f[4:7]]  # (phi, beta): vector parts of the real and dual parts
        potential = body.potential_energy(pose_k) + body.potential_energy(pose_k1)
        return 2.0 / h * y @ body.inertia @ y - 0.5 * h * potential

    delta = 1e-6
    for i, e in enumerate(np.eye(6)):
        plus = lagrangian(start.pose, DUAL.multiply(end.pose, DUAL.exp(delta * e)))
        minus = lagrangian(start.pose, DUAL.multiply(end.pose, DUAL.exp(-delta * e)))
        # exp(delta e) = 1 + delta/2 e: the variation 1/2 q eta of docs/theory/dqvi.md §2.3
        derivative = (plus - minus) / (2 * delta)
        assert derivative == pytest.approx(end.momentum[i], rel=1e-7, abs=1e-8)


@pytest.mark.parametrize(("hw", "angle"), [(0.5, 0.523599), (0.9, 1.119770), (0.99, 1.429257)])
def test_principal_axis_spin_advances_exactly_arcsin_hw_per_step(hw, angle):
    """T12: the per-step angle is arcsin(h w), so q_k = exp(k arcsin(hw) z / 2)."""
    body = RigidBody.from_mass_properties(2.0, np.diag([0.3, 0.5, 0.8]))
    h = 0.1
    integrator = DQVI(body, h)
    state = body.state(DUAL.identity(), [0, 0, hw / h, 0, 0, 0])
    assert np.arcsin(hw) == pytest.approx(angle, abs=1e-6)
    for k in range(1, 41):
        state = integrator.step(state)
        exact = DUAL.pack(Q.from_rotation_vector([0, 0, k * np.arcsin(hw)]), [0, 0, 0])
        assert pose_distance(state.pose, exact) < 5e-12


def test_newton_iterations_grow_towards_the_step_limit_and_fail_beyond_it():
    body = RigidBody.from_mass_properties(2.0, np.diag([0.3, 0.5, 0.8]))
    h = 0.1
    counts = []
    for hw in (0.05, 0.5, 0.9, 0.99):
        integrator = DQVI(body, h)
        integrator.step(body.state(DUAL.identity(), [0, 0, hw / h, 0, 0, 0]))
        counts.append(integrator.statistics.last_iterations)
    assert counts == sorted(counts)
    assert counts[0] <= 3  # paper claim C1 at moderate h|omega|
    assert counts[-1] > counts[0]
    with pytest.raises(NoSolutionError, match="90 degrees"):
        DQVI(body, h).step(body.state(DUAL.identity(), [0, 0, 1.01 / h, 0, 0, 0]))


def test_moderate_steps_converge_within_three_newton_iterations():
    """Paper claim C1 on the generic body at h = 0.1 (h |omega| ~ 0.23): at most three
    Jacobian evaluations per step (then at most two cheap chord steps to round-off)."""
    body = generic_body()
    integrator = DQVI(body, 0.1)
    run(integrator, generic_initial_state(body), 200)
    assert integrator.statistics.max_jacobians_seen <= 3
    assert integrator.statistics.max_iterations_seen <= 5


@pytest.mark.filterwarnings("ignore::variational_sim.integrators.base.CouplingLimitWarning")
def test_free_fall_is_exact_at_the_nodes_without_newton_correction():
    """T11: pure translation at the CoM is velocity Verlet, exact for constant gravity."""
    body = RigidBody.from_mass_properties(2.0, np.diag([0.3, 0.5, 0.8]), gravity=STANDARD_GRAVITY)
    h = 0.1
    t0, v0, g = np.array([0.0, 0.0, 10.0]), np.array([3.0, -1.0, 4.0]), np.array(STANDARD_GRAVITY)
    integrator = DQVI(body, h)
    state = body.state(DUAL.pack(Q.identity(), t0), np.r_[0, 0, 0, v0])
    for k in range(1, 51):
        state = integrator.step(state)
        assert integrator.statistics.last_iterations == 0
        q, t = DUAL.unpack(state.pose)
        time = k * h
        np.testing.assert_allclose(t, t0 + v0 * time + 0.5 * g * time**2, rtol=0, atol=1e-12)
        np.testing.assert_allclose(body.twist(state)[3:], v0 + g * time, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(q, Q.identity())


@pytest.mark.filterwarnings("ignore::variational_sim.integrators.base.CouplingLimitWarning")
def test_force_free_translation_keeps_the_velocity_exactly():
    body = RigidBody.from_mass_properties(2.0, np.diag([0.3, 0.5, 0.8]))
    integrator = DQVI(body, 0.1)
    state, _ = run(integrator, body.state(DUAL.identity(), [0, 0, 0, 3, -1, 4]), 100)
    np.testing.assert_allclose(body.twist(state), [0, 0, 0, 3, -1, 4], atol=1e-14)
    np.testing.assert_allclose(DUAL.unpack(state.pose)[1], [30, -10, 40], atol=1e-12)


def test_torque_free_symmetric_top_is_second_order_with_exact_spin_and_energy():
    """T13: omega_3 and the energy are constant to round-off; omega(T) converges at order 2."""
    body = symmetric_top()
    final_time = 10.0
    errors = []
    for h in (0.1, 0.05, 0.025, 0.0125):
        integrator = DQVI(body, h)
        state = body.state(DUAL.identity(), [1.0, 0.0, 3.0, 0, 0, 0])
        energy0 = body.energy(state)
        state, samples = run(integrator, state, round(final_time / h), every=10)
        for sample in samples:
            assert body.twist(sample)[2] == pytest.approx(3.0, abs=1e-13)
            assert body.energy(sample) == pytest.approx(energy0, rel=1e-13)
        errors.append(np.abs(body.twist(state)[:3] - symmetric_top_rate(final_time)).max())
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    np.testing.assert_allclose(orders[-2:], 2.0, atol=0.1)  # the largest h is pre-asymptotic


def test_second_order_convergence_against_a_tight_ode_reference():
    """T9: free generic body and a random SPD (added-mass-like) inertia, T = 2 s."""
    rng = np.random.default_rng(7)
    factor = rng.normal(size=(6, 6))
    added_mass = RigidBody(generic_body().inertia + 0.3 * factor @ factor.T, 2.0)
    for body in (generic_body(), added_mass):
        initial = generic_initial_state(body)
        reference = ScipyAdaptive(body, 2.0, rtol=1e-13, atol=1e-13).step(initial)
        pose_errors, momentum_errors = [], []
        for h in (0.1, 0.05, 0.025, 0.0125):
            state, _ = run(DQVI(body, h), initial, round(2.0 / h))
            pose_errors.append(pose_distance(state.pose, reference.pose))
            momentum_errors.append(np.abs(state.momentum - reference.momentum).max())
        for errors in (pose_errors, momentum_errors):
            orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
            np.testing.assert_allclose(orders[-2:], 2.0, atol=0.1)


def test_spatial_momentum_is_conserved_to_round_off():
    """T7: generic body, h = 0.1, 2000 steps and h = 0.01, 2000 steps; and an
    added-mass-like (non-rigid) SPD inertia at h = 0.1."""
    rng = np.random.default_rng(11)
    factor = rng.normal(size=(6, 6))
    added_mass = RigidBody(generic_body().inertia + 0.3 * factor @ factor.T, 2.0)
    for body, h in ((generic_body(), 0.1), (generic_body(), 0.01), (added_mass, 0.1)):
        initial = generic_initial_state(body)
        momentum0 = body.spatial_momentum(initial)
        _, samples = run(DQVI(body, h), initial, 2000, every=100)
        drift = max(np.abs(body.spatial_momentum(s) - momentum0).max() for s in samples)
        assert drift / np.abs(momentum0).max() < 1e-12


def test_energy_error_is_bounded_without_drift_and_scales_as_h_squared():
    """T8: 2e4 steps at h = 0.1 (first and last windows alike) and 100x smaller at h = 0.01."""
    body = generic_body()
    initial = generic_initial_state(body)
    energy0 = body.energy(initial)
    _, samples = run(DQVI(body, 0.1), initial, 20000, every=5)
    error = np.array([body.energy(s) - energy0 for s in samples]) / energy0
    first, last = np.abs(error[:400]).max(), np.abs(error[-400:]).max()
    assert 0.7 < last / first < 1.4
    assert np.abs(error).max() < 1.5 * first
    _, fine = run(DQVI(body, 0.01), initial, 2000, every=5)
    fine_error = max(abs(body.energy(s) - energy0) for s in fine) / energy0
    assert 60 < first / fine_error < 160


def test_unit_constraints_hold_without_renormalisation():
    """T6: |a|^2 - 1 and a.b stay at round-off over 2e4 steps."""
    body = generic_body()
    _, samples = run(DQVI(body, 0.1), generic_initial_state(body), 20000, every=100)
    for sample in samples:
        real, dual = sample.pose[:4], sample.pose[4:]
        assert abs(real @ real - 1.0) < 1e-13
        assert abs(real @ dual) < 1e-13 * max(1.0, np.abs(dual).max())


@pytest.mark.filterwarnings("ignore::variational_sim.integrators.base.CouplingLimitWarning")
@pytest.mark.parametrize(("gravity", "h", "steps"),
                         [((0.0, 0.0, 0.0), 0.05, 400), (STANDARD_GRAVITY, 0.01, 200)])
def test_moving_the_reference_point_gives_the_same_trajectory(gravity, h, steps):
    """T10: simulate about O and about the CoM; q_O g = q_C at every node to round-off.

    With gravity the run stays short: the falling body's speed raises the coupling
    number (400 steps at h = 0.05 reach about 200 m/s and Newton fails; dqvi.md §4, T10).
    """
    body = generic_body(gravity)
    com_body = body.moved_to_com()
    initial = generic_initial_state(body)
    offset = DUAL.pack(Q.identity(), body.com_offset)
    twist = body.twist(initial)
    com_twist = np.r_[twist[:3], twist[3:] + np.cross(twist[:3], body.com_offset)]
    com_initial = com_body.state(DUAL.multiply(initial.pose, offset), com_twist)
    about_o, about_com = DQVI(body, h), DQVI(com_body, h)
    state, com_state = initial, com_initial
    for _ in range(steps):
        state, com_state = about_o.step(state), about_com.step(com_state)
        assert pose_distance(DUAL.multiply(state.pose, offset), com_state.pose) < 1e-11


@pytest.mark.filterwarnings("ignore::variational_sim.integrators.base.CouplingLimitWarning")
def test_time_reversibility_with_gravity():
    """T16: N steps forward, flip the momentum, N steps: back to the start (negated momentum)."""
    body = generic_body(STANDARD_GRAVITY)
    integrator = DQVI(body, 0.01)
    initial = generic_initial_state(body)
    forward, _ = run(integrator, initial, 300)
    flipped = RigidBodyState(0.0, forward.pose, -forward.momentum)
    back, _ = run(integrator, flipped, 300)
    assert pose_distance(back.pose, initial.pose) < 1e-11
    np.testing.assert_allclose(back.momentum, -initial.momentum, atol=1e-11)


@pytest.mark.filterwarnings("ignore::variational_sim.integrators.base.CouplingLimitWarning")
def test_gravity_keeps_the_vertical_angular_and_horizontal_linear_momentum():
    """T16: with gravity along z, L_z, p_x and p_y are conserved; the others change."""
    body = generic_body(STANDARD_GRAVITY)
    initial = generic_initial_state(body)
    momentum0 = body.spatial_momentum(initial)
    _, samples = run(DQVI(body, 0.01), initial, 300, every=10)
    momenta = np.array([body.spatial_momentum(s) for s in samples])
    scale = np.abs(momenta).max()
    conserved = momenta[:, [2, 3, 4]] - momentum0[[2, 3, 4]]
    np.testing.assert_allclose(conserved, 0.0, atol=5e-13 * scale)
    assert np.abs(momenta[-1, 5] - momentum0[5]) > 1.0


def test_fast_translation_while_spinning_warns_about_the_coupling_limit():
    """T15: Gamma > 0.1 warns once; far beyond it Newton fails and says so."""
    body = RigidBody.from_mass_properties(1.0, np.diag([0.3, 0.5, 0.8]))
    integrator = DQVI(body, 0.1)
    state = body.state(DUAL.identity(), [0.5, -1.0, 2.0, 5.0, 1.5, -2.5])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(integrator, state, 5)
    assert integrator.statistics.max_coupling_number > 0.1
    assert sum(issubclass(w.category, CouplingLimitWarning) for w in caught) == 1
    slow = DQVI(body, 0.1)
    run(slow, body.state(DUAL.identity(), [0.5, -1.0, 2.0, 0.2, 0.06, -0.1]), 5)
    assert slow.statistics.max_coupling_number < 0.1
    too_fast = body.state(DUAL.identity(), [0.5, -1, 2, 10, 3, -5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CouplingLimitWarning)
        with pytest.raises(NoSolutionError):
            run(DQVI(body, 0.1), too_fast, 20)


def test_bad_parameters_are_rejected_with_clear_messages():
    with pytest.raises(ValueError, match="positive-definite"):
        RigidBody(np.diag([1, 1, 1, 1, 1, -1.0]), 1.0)
    with pytest.raises(ValueError, match="step_size"):
        DQVI(generic_body(), 0.0)
    with pytest.raises(ValueError, match="tolerance"):
        DQVI(generic_body(), 0.1, tolerance=0.5)
    with pytest.raises(ValueError, match="twist"):
        generic_body().state(DUAL.identity(), [np.nan, 0, 0, 0, 0, 0])


@pytest.mark.filterwarnings("ignore::variational_sim.integrators.base.CouplingLimitWarning")
def test_steady_screw_matches_the_closed_form_coupling():
    """T15 closed form: spin w = 2 rad/s and speed v = 10 m/s along z at the CoM, h = 0.1.

    The step is a steady screw with ``rho cos^2(theta/2) = h v`` and
    ``cos(theta/2) sin(theta/2) (J3 - m rho^2 / 4) = (h/2) J3 w``: the per-step rotation
    exceeds both ``h w`` and ``arcsin(h w)`` (rotation polluted by translation).
    """
    from scipy.optimize import brentq

    mass, j3, w, v, h = 1.0, 0.8, 2.0, 10.0, 0.1
    body = RigidBody.from_mass_properties(mass, np.diag([0.3, 0.5, j3]))

    def relation(theta):
        rho = h * v / np.cos(theta / 2) ** 2
        return np.cos(theta / 2) * np.sin(theta / 2) * (j3 - mass * rho**2 / 4) - h / 2 * j3 * w

    theta = brentq(relation, 0.0, 0.5)
    assert theta > 1.05 * np.arcsin(h * w) > 1.05 * h * w
    state, _ = run(DQVI(body, h), body.state(DUAL.identity(), [0, 0, w, 0, 0, v]), 10)
    q, t = DUAL.unpack(state.pose)
    exact_q = Q.from_rotation_vector([0.0, 0.0, 10 * theta])
    assert min(np.abs(q - exact_q).max(), np.abs(q + exact_q).max()) < 1e-12
    np.testing.assert_allclose(t, [0.0, 0.0, 10 * h * v / np.cos(theta / 2) ** 2], atol=1e-11)


def test_held_body_torque_about_a_principal_axis_adds_exact_impulses():
    """A body torque tau about the spin axis: pi_z grows by exactly h tau per step."""
    body = RigidBody.from_mass_properties(2.0, np.diag([0.3, 0.5, 0.8]))
    integrator = DQVI(body, 0.05)
    state = body.state(DUAL.identity(), [0, 0, 1.0, 0, 0, 0])
    torque = np.array([0.0, 0.0, 0.4, 0.0, 0.0, 0.0])
    for k in range(1, 101):
        state = integrator.step(state, torque)
        assert state.momentum[2] == pytest.approx(0.8 + k * 0.05 * 0.4, abs=1e-13)
    np.testing.assert_allclose(state.momentum[[0, 1, 3, 4, 5]], 0.0, atol=1e-14)
    with pytest.raises(ValueError, match="inputs"):
        integrator.step(state, [0.0, 1.0])


def test_world_force_at_a_point_becomes_the_body_wrench_about_o():
    from variational_sim.models.rigid_body import world_wrench_to_body

    q = Q.from_rotation_vector([0.0, 0.0, np.pi / 2])  # body x is world y
    pose = DUAL.pack(q, [1.0, 2.0, 3.0])
    wrench = world_wrench_to_body(pose, force=[0.0, 5.0, 0.0], point=[1.0, 2.0, 4.0])
    # force along body x applied 1 m above O (world z = body z): torque = z x (5 x) = 5 y
    np.testing.assert_allclose(wrench, [0.0, 5.0, 0.0, 5.0, 0.0, 0.0], atol=1e-14)
