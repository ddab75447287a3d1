"""RK4, RKMK4 and the scipy adaptive baseline on the continuous rigid-body equations."""

from __future__ import annotations

import numpy as np
import pytest

from mav_geometry.nilpotent import DUAL
from variational_sim.integrators.adaptive import ScipyAdaptive
from variational_sim.integrators.dqvi import DQVI
from variational_sim.integrators.rk4 import RK4
from variational_sim.integrators.rkmk import RKMK4
from variational_sim.models.paper_bodies import (
    STANDARD_GRAVITY,
    generic_body,
    generic_initial_state,
    symmetric_top,
    symmetric_top_rate,
)


def run(integrator, state, steps):
    states = [state]
    for _ in range(steps):
        state = integrator.step(state)
        states.append(state)
    return states


def pose_distance(a, b):
    return float(min(np.abs(a - b).max(), np.abs(a + b).max()))


def test_adaptive_solver_matches_the_analytic_symmetric_top():
    body = symmetric_top()
    state = body.state(DUAL.identity(), [1.0, 0.0, 3.0, 0, 0, 0])
    final = ScipyAdaptive(body, 10.0, rtol=1e-12, atol=1e-12).step(state)
    np.testing.assert_allclose(body.twist(final)[:3], symmetric_top_rate(10.0), atol=1e-9)


@pytest.mark.parametrize("integrator_class", [RK4, RKMK4])
@pytest.mark.parametrize("gravity", [(0.0, 0.0, 0.0), STANDARD_GRAVITY])
def test_explicit_baselines_are_fourth_order(integrator_class, gravity):
    body = generic_body(gravity)
    initial = generic_initial_state(body)
    reference = ScipyAdaptive(body, 1.0, rtol=1e-13, atol=1e-13).step(initial)
    errors = []
    for h in (0.04, 0.02, 0.01):
        final = run(integrator_class(body, h), initial, round(1.0 / h))[-1]
        errors.append(max(pose_distance(final.pose, reference.pose),
                          np.abs(final.momentum - reference.momentum).max()))
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    np.testing.assert_allclose(orders, 4.0, atol=0.25)


def test_lie_group_method_stays_on_the_group_and_rk4_does_not():
    body = generic_body()
    initial = generic_initial_state(body)
    for integrator_class, bound in ((RKMK4, (0.0, 1e-13)), (RK4, (1e-9, 1.0))):
        final = run(integrator_class(body, 0.1), initial, 500)[-1]
        real = final.pose[:4]
        error = abs(real @ real - 1.0)
        assert bound[0] <= error <= bound[1], integrator_class.__name__


def test_rk4_energy_drifts_secularly_while_dqvi_stays_bounded():
    """T17 in short: same body, same step; RK4 drifts monotonically, DQVI oscillates."""
    body = generic_body()
    initial = generic_initial_state(body)
    energy0 = body.energy(initial)
    drift = np.array([body.energy(s) - energy0 for s in run(RK4(body, 0.1), initial, 3000)])
    bounded = np.array([body.energy(s) - energy0 for s in run(DQVI(body, 0.1), initial, 3000)])
    windows = np.abs(drift[1:]).reshape(3, -1).max(axis=1)
    assert windows[0] < windows[1] < windows[2]
    dqvi_windows = np.abs(bounded[1:]).reshape(3, -1).max(axis=1)
    assert dqvi_windows.max() < 1.3 * dqvi_windows.min()
    momentum0 = body.spatial_momentum(initial)
    rk4_momentum = body.spatial_momentum(run(RK4(body, 0.1), initial, 3000)[-1])
    assert np.abs(rk4_momentum - momentum0).max() > 1e-8
