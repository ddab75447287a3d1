"""Regressor identities and identification from simulated data (§6 test 26)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from mav_dynamics.allocation import allocation_matrix
from mav_dynamics.identification import (
    Sample,
    identify,
    identify_rotor_columns,
    inertia_regressor,
    parameters_from_spatial_inertia,
    regressor,
    rotor_geometry,
    rotor_parameters,
    spatial_inertia_from_parameters,
)
from mav_dynamics.model import TreeModel
from mav_dynamics.vehicle_file import parse_vehicle
from mav_geometry.groups import SE3, SO3

VEHICLES = Path(__file__).resolve().parents[3] / "config" / "vehicles"


def test_inertia_regressor_is_linear_in_the_parameters() -> None:
    rng = np.random.default_rng(0)
    pi = np.array([1.3, 0.05, -0.02, 0.04, 0.02, 0.025, 0.03, 0.001, -0.002, 0.0015])
    inertia = spatial_inertia_from_parameters(pi)
    assert np.allclose(parameters_from_spatial_inertia(inertia), pi)
    for _ in range(3):
        x = rng.normal(size=6)
        assert np.allclose(inertia_regressor(x) @ pi, inertia @ x, atol=1e-14)
    accel, twist, rotation = rng.normal(size=6), rng.normal(size=6), SO3.exp(rng.normal(size=3))
    gravity = np.concatenate([np.zeros(3), rotation.T @ [0.0, 0.0, -9.81]])
    lhs = inertia @ accel - SE3.ad(twist).T @ inertia @ twist - inertia @ gravity
    assert np.allclose(regressor(accel, twist, rotation, 9.81) @ pi, lhs, atol=1e-12)


def _samples(model: TreeModel, count: int, seed: int) -> list[Sample]:
    """Simulated, noise-free data: random states and inputs through the tree model."""
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(count):
        rotation, twist = SO3.exp(rng.normal(size=3)), rng.normal(size=6)
        speeds = rng.uniform(300.0, 800.0, model.rotor_count)
        accels = rng.normal(size=model.rotor_count) * 200.0
        result = model.evaluate(rotation, twist, speeds, accels, torques=False)
        samples.append(Sample(rotation, twist, result.base_acceleration, speeds, accels))
    return samples


def _vehicle(name: str):
    data = yaml.safe_load((VEHICLES / f"{name}.yaml").read_text())
    data["body"].pop("drag", None)
    data["body"]["com"] = [0.02, -0.01, 0.03]                 # body frame off the COM
    return parse_vehicle(data)


def _spin_screws_body(model: TreeModel) -> np.ndarray:
    zero = np.zeros(model.body_count)
    ad_kb = model.kinematics(np.zeros(6), zero, zero, zero)[0][model.rotor_bodies]
    return np.linalg.solve(ad_kb, model.rotor_spin_screws[:, :, None])[:, :, 0]


@pytest.mark.parametrize("name", ["quadrotor_x", "tilted_hexarotor"])
def test_identification_recovers_inertia_and_rotor_coefficients(name: str) -> None:
    vehicle = _vehicle(name)
    model = TreeModel(vehicle)
    geometry = rotor_geometry(_spin_screws_body(model), [r.spin for r in vehicle.rotors])
    identified = identify(_samples(model, 40, 1), vehicle.total_mass, vehicle.gravity, geometry)
    truth = parameters_from_spatial_inertia(model.locked_inertia())
    assert identified.residual_rms < 1e-9
    assert np.allclose(identified.parameters, truth, rtol=1e-7, atol=1e-10)
    rotors = vehicle.rotors
    assert np.allclose(identified.thrust_coefficients, [r.thrust_coefficient for r in rotors],
                       rtol=1e-8)
    assert np.allclose(identified.drag_coefficients, [r.drag_coefficient for r in rotors],
                       rtol=1e-6)
    assert np.allclose(identified.spin_inertias, [r.inertia.inertia[2, 2] for r in rotors],
                       rtol=1e-6)


def test_rotor_columns_from_data_give_back_the_physical_rotor() -> None:
    vehicle = _vehicle("tilted_hexarotor")
    model = TreeModel(vehicle)
    columns, momenta = identify_rotor_columns(_samples(model, 30, 2), model.locked_inertia(),
                                              vehicle.gravity)
    assert np.allclose(columns, allocation_matrix(model).T, rtol=1e-8, atol=1e-14)
    for i, rotor in enumerate(vehicle.rotors):
        spin_axis = rotor.spin * rotor.thrust_axis
        assert np.allclose(momenta[i], rotor.inertia.inertia[2, 2] * spin_axis, atol=1e-12)
        recovered = rotor_parameters(columns[i], rotor.spin)
        assert recovered.thrust_coefficient == pytest.approx(rotor.thrust_coefficient, rel=1e-8)
        assert recovered.drag_coefficient == pytest.approx(rotor.drag_coefficient, rel=1e-6)
        assert np.allclose(recovered.spin_axis, spin_axis, atol=1e-9)
        along = rotor.position @ spin_axis
        assert np.allclose(recovered.axis_point, rotor.position - along * spin_axis, atol=1e-8)


def test_without_geometry_inertia_and_moment_arms_share_a_scale() -> None:
    """Why ``identify`` needs the geometry: scaling I about the COM and the moment columns
    together leaves every sample's equation satisfied (an exact null direction)."""
    vehicle = _vehicle("quadrotor_x")
    model = TreeModel(vehicle)
    locked = model.locked_inertia()
    mass, com = locked[3, 3], np.array([locked[2, 4], locked[0, 5], locked[1, 3]]) / locked[3, 3]
    scale = 1.3
    about_com = locked[:3, :3] + mass * SO3.hat(com) @ SO3.hat(com)
    scaled = locked.copy()
    scaled[:3, :3] = scale * about_com - mass * SO3.hat(com) @ SO3.hat(com)
    columns = allocation_matrix(model).T
    shifted = columns.copy()
    shifted[:, :3] = scale * columns[:, :3] + (1 - scale) * np.cross(com, columns[:, 3:])
    spin = np.array([r.inertia.inertia[2, 2] * r.spin * r.thrust_axis for r in vehicle.rotors])
    for s in _samples(model, 5, 3):
        def residual(inertia, cols, momenta, s=s):
            pi = parameters_from_spatial_inertia(inertia)
            lhs = regressor(s.acceleration, s.twist, s.rotation, vehicle.gravity) @ pi
            spin_rows = np.zeros(6)
            for i in range(len(momenta)):
                spin_rows[:3] += (SO3.hat(s.twist[:3]) * s.rotor_speeds[i]
                                  + s.rotor_accelerations[i] * np.eye(3)) @ momenta[i]
            return lhs - cols.T @ s.rotor_speeds**2 + spin_rows
        assert np.allclose(residual(locked, columns, spin), 0.0, atol=1e-10)
        assert np.allclose(residual(scaled, shifted, scale * spin), 0.0, atol=1e-10)
