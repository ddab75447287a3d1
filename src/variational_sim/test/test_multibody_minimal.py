"""The minimal-coordinate fixed-base leg and the maximal model's convergence against it."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from variational_sim.experiments.common import fly_hopper
from variational_sim.minimal.planar_loop import BaumgarteRK4, PlanarLoopModel, PlanarState
from variational_sim.multibody.hopper import (
    LEG_JOINTS,
    NOMINAL_ANGLES_DEG,
    nominal_configuration,
    with_welded_base,
)
from variational_sim.multibody.integrator import VariationalMultibody
from variational_sim.multibody.kinematics import joint_angle

HORIZON_S = 0.15  # before the first flat (singular) parallelogram configuration
Q0 = np.radians([NOMINAL_ANGLES_DEG[name] for name in LEG_JOINTS])


@pytest.fixture(scope="module")
def model() -> PlanarLoopModel:
    return PlanarLoopModel(with_welded_base(fly_hopper()))


@pytest.fixture(scope="module")
def reference(model: PlanarLoopModel):
    """DOP853 at rtol = atol = 1e-12 (dense output)."""
    zero = np.zeros(4)

    def rate(_: float, y: np.ndarray) -> np.ndarray:
        return np.concatenate([y[4:], model.accelerations(y[:4], y[4:], zero)])

    return solve_ivp(rate, (0.0, HORIZON_S), np.concatenate([Q0, zero]), method="DOP853",
                     rtol=1e-12, atol=1e-12, dense_output=True)


def test_minimal_model_joint_order_and_loop(model: PlanarLoopModel) -> None:
    assert model.joint_names == list(LEG_JOINTS)
    c, d, _ = model.constraint(Q0, np.zeros(4))
    assert np.max(np.abs(c)) < 1e-15
    assert np.linalg.matrix_rank(d) == 2


def test_reference_conserves_energy_and_the_loop(model: PlanarLoopModel, reference) -> None:
    energies = [model.energy(y[:4], y[4:]) for y in reference.y.T]
    assert np.ptp(energies) < 1e-8
    end = reference.y[:, -1]
    assert np.max(np.abs(model.constraint(end[:4], end[4:])[0])) < 1e-10


def test_rk4_baumgarte_stays_close_over_the_horizon(model: PlanarLoopModel, reference) -> None:
    integrator = BaumgarteRK4(model, 0.001)
    state = PlanarState(0.0, Q0, np.zeros(4))
    for _ in range(round(HORIZON_S / 0.001)):
        state = integrator.step(state)
    assert np.max(np.abs(state.q - reference.sol(HORIZON_S)[:4])) < 1e-6


def test_maximal_model_converges_at_second_order(reference) -> None:
    hopper = with_welded_base(fly_hopper())
    positions, quaternions = nominal_configuration(hopper)
    errors = []
    for step in (0.01, 0.005, 0.0025):
        integrator = VariationalMultibody(hopper, step)
        state = integrator.initial_state(positions, quaternions, np.zeros((5, 6)))
        worst = 0.0
        for _ in range(round(HORIZON_S / step)):
            state = integrator.step(state)
            angles = np.array([joint_angle(hopper, name, state.quaternions)
                               for name in LEG_JOINTS])
            worst = max(worst, float(np.max(np.abs(angles - reference.sol(state.time)[:4]))))
        errors.append(worst)
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert errors[0] < 1e-3  # rad: no half-step lag (that would be degree level)
    assert np.all(orders > 1.8)
    assert np.all(orders < 2.3)
