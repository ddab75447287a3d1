"""The simulator's compiled per-step kernels (integrators/_kernels.c: plant_wrench,
plant_advance, plant_accelerations, lag_step, enu_to_geodetic) against their Python
references in vehicle_sim and sensors, call by call and over whole seeded runs.

The plant's kernels differ from the reference only in the summation order of the
allocation and inverse-inertia products, the motor lag and the geodetic conversion not
at all (the same expressions, no contraction), so a whole run agrees to round-off.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

import numpy as np
import pymap3d
import pytest

from mav_dynamics.vehicle_file import load_vehicle
from mav_geometry import scalar
from mav_ros_common.resources import find_named_file
from variational_sim.integrators import dqvi
from variational_sim.sensors import gnss, imu
from variational_sim.sensors.barometer import BarometerConfig
from variational_sim.sensors.imu import ImuConfig, ImuModel, earth_rate_enu
from variational_sim.sensors.magnetometer import MagnetometerConfig
from variational_sim.vehicle_sim import motors, plant
from variational_sim.vehicle_sim.plant import MultirotorPlant
from variational_sim.vehicle_sim.scenario import load_scenario
from variational_sim.vehicle_sim.simulator import SimulatorConfig, VehicleSimulator
from variational_sim.vehicle_sim.wind import WindConfig, WindField

KERNELS = importlib.import_module("variational_sim.integrators._kernels")
DISPATCHING = (plant, motors, gnss, imu, dqvi)
"""Modules that choose between these kernels and their Python references."""
WGS84 = pymap3d.Ellipsoid.from_name("wgs84")


@contextmanager
def kernels(choice: ModuleType | None) -> Iterator[None]:
    """Build and run simulators with ``choice`` (the extension, or None: the references)."""
    with pytest.MonkeyPatch.context() as patch:
        for module in DISPATCHING:
            patch.setattr(module, "_kernels", choice)
        yield


Reading = tuple[int, str, np.ndarray]
"""(step, sensor name, every number of the reading)."""


def seeded_run(vehicle: str, scenario: str, steps: int) -> tuple[np.ndarray, list[Reading]]:
    """Truth after every step and every reading, of a seeded run whose commands
    climb, then sink, and swing any tilts (so the servos and the cached allocation move)."""
    config = SimulatorConfig(
        vehicle_file=str(find_named_file(vehicle, "vehicles")), seed=5,
        barometer=BarometerConfig(), magnetometer=MagnetometerConfig(),
        scenario=load_scenario(find_named_file(f"{scenario}.yaml", "scenarios")))
    simulator = VehicleSimulator(config)
    hover = math.sqrt(simulator.plant.weight
                      / simulator.plant.allocation(simulator.servos.angles)[5].sum())
    truth, readings = [], []  # type: ignore[var-annotated]
    for k in range(steps):
        if k % 10 == 0:
            climb = 1.1 if k < steps // 2 else 0.97
            speeds = [hover * climb * (1.0 + 0.01 * math.sin(0.01 * k + i))
                      for i in range(simulator.rotor_count)]
            tilts = [0.2 * math.sin(0.003 * k)] * simulator.tilt_count
            assert simulator.set_command(speeds, tilts or None)
        output = simulator.step()
        t = simulator.truth
        truth.append(np.concatenate([t.position_enu, t.orientation_xyzw, t.twist_body,
                                     t.velocity_enu, t.rotor_speeds, t.tilt_angles]))
        for sensor, reading in output.readings:
            numbers = [np.ravel(np.asarray(getattr(reading, name), dtype=float))
                       for name in reading.__dataclass_fields__]
            readings.append((k, sensor.name, np.concatenate(numbers)))
    assert simulator.plant.touchdowns == 0
    assert not simulator.plant.landed
    return np.array(truth), readings


@pytest.mark.parametrize(("vehicle", "scenario", "steps"), [
    ("quadrotor_x", "gusty", 2000), ("tilting_quadrotor", "calm", 300),
    ("quadrotor_two_wings", "gusty", 300)])
def test_a_seeded_run_gives_the_reference_readings_and_truth(vehicle: str, scenario: str,
                                                             steps: int) -> None:
    with kernels(KERNELS):
        truth, readings = seeded_run(vehicle, scenario, steps)
    with kernels(None):
        reference_truth, reference_readings = seeded_run(vehicle, scenario, steps)
    assert [r[:2] for r in readings] == [r[:2] for r in reference_readings]  # due alike
    assert {name for _, name, _ in readings} == {"imu", "gnss", "barometer", "magnetometer"}
    np.testing.assert_allclose(truth, reference_truth, rtol=1e-10, atol=1e-10)
    for (_, _, numbers), (_, _, expected) in zip(readings, reference_readings, strict=True):
        np.testing.assert_allclose(numbers, expected, rtol=1e-10, atol=1e-10)
    assert truth[-1, 2] - truth[0, 2] > 0.02  # it took off: the comparison is not idle


def plant_pair(vehicle: str) -> tuple[MultirotorPlant, MultirotorPlant]:
    """The same plant with the compiled kernels and with the references; both integrators
    run the Python DQVI, so any difference comes from the plant's own kernels."""
    path = str(find_named_file(vehicle, "vehicles"))
    with kernels(None):
        pair = MultirotorPlant(load_vehicle(path)), MultirotorPlant(load_vehicle(path))
    pair[0].kernels = KERNELS
    return pair


@pytest.mark.parametrize("vehicle", ["quadrotor_x", "hexarotor", "tilting_quadrotor",
                                     "quadrotor_two_wings", "quadrotor_four_tilting_wings"])
def test_plant_kernels_follow_the_reference_step_by_step(vehicle: str) -> None:
    rng = np.random.default_rng(7)
    compiled, reference = plant_pair(vehicle)
    for _ in range(20):
        twist = rng.normal(0.0, [0.5, 0.5, 0.5, 3.0, 3.0, 3.0])
        orientation = rng.normal(size=4)
        position = (*rng.normal(0.0, 50.0, 2), 20.0 + rng.uniform())
        wind = rng.normal(0.0, 4.0, 3) * rng.integers(0, 2)
        speeds = rng.uniform(0.0, 900.0, compiled.rotor_count)
        tilts = rng.uniform(-1.0, 1.0, compiled.tilt_count).tolist()
        for p in (compiled, reference):
            p.reset(position, twist=twist, orientation=orientation / np.linalg.norm(orientation))
            p.set_wind(wind)
        np.testing.assert_allclose(compiled.applied_wrench(speeds, tilts),
                                   reference.applied_wrench(speeds, tilts),
                                   rtol=1e-13, atol=1e-12)
        for p in (compiled, reference):
            p.step(speeds, tilts)
        np.testing.assert_allclose(compiled.twist, reference.twist, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(compiled.rotation_rows, reference.rotation_rows,
                                   rtol=0.0, atol=1e-15)
        np.testing.assert_allclose(compiled.position, reference.position, rtol=1e-15, atol=0.0)
        np.testing.assert_allclose(compiled.momentum_error(), reference.momentum_error(),
                                   rtol=1e-9, atol=1e-12)
        assert compiled.energy_error() == pytest.approx(reference.energy_error(), abs=1e-9)
        for a, b in zip(compiled.accelerations(), reference.accelerations(), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_imu_reading_follows_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    config = ImuConfig(mount_rotation_xyzw=(0.0, 0.0, 0.6, 0.8), mount_position_m=(
        0.05, -0.02, 0.01), gyro_range=4.0, accel_range=30.0)
    compiled, reference = (ImuModel(config, np.random.default_rng(4), earth_rate_enu(47.0))
                           for _ in range(2))
    rng = np.random.default_rng(5)
    saturated = []
    for k in range(200):
        attitude = rng.normal(size=4)
        rotation = scalar.to_matrix((attitude / np.linalg.norm(attitude)).tolist())
        omega, alpha, acceleration = (rng.normal(0.0, scale, 3) for scale in (2.0, 5.0, 12.0))
        velocity = None if k % 3 == 0 else rng.normal(0.0, 10.0, 3)
        if k % 7 == 0:
            for model in (compiled, reference):
                model.inject_spike((0.5, 0.0, -0.5), (0.0, 3.0, 0.0))
        arguments = (rotation, omega, alpha, acceleration, (0.0, 0.0, -9.8), velocity, 0.01 * k)
        got = compiled.sample(*arguments)
        with monkeypatch.context() as patch:
            patch.setattr(imu, "_kernels", None)
            expected = reference.sample(*arguments)
        assert got.saturated == expected.saturated
        np.testing.assert_allclose(got.gyro, expected.gyro, rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(got.accel, expected.accel, rtol=1e-14, atol=1e-14)
        saturated.append(got.saturated)
    assert 0 < sum(saturated) < len(saturated)  # both branches of the clipping ran


def test_the_wind_reads_height_and_airspeed_only_when_it_refreshes() -> None:
    """The simulator passes NaN between refreshes (``refreshes_at``): same winds."""
    config = WindConfig(mean_enu_mps=(3.0, 1.0, 0.0), turbulence_w20_mps=10.0)
    lazy, eager = (WindField(config, np.random.default_rng(2), 1e-3) for _ in range(2))
    refreshes = 0
    for k in range(100):
        time_s = k * 1e-3
        refresh = lazy.refreshes_at(time_s)
        refreshes += refresh
        got = lazy.velocity(time_s, 12.0 if refresh else math.nan, 5.0 if refresh else math.nan)
        assert got == eager.velocity(time_s, 12.0, 5.0)
    assert refreshes == 10  # the turbulence updates every 10 ms


def test_lag_step_is_the_reference_motor_lag_exactly() -> None:
    rng = np.random.default_rng(3)
    values, targets, decay = (rng.uniform(0.0, 1000.0, 6).tolist() for _ in range(3))
    expected = [c + (s - c) * a for s, c, a in zip(values, targets, decay, strict=True)]
    assert KERNELS.lag_step(values, targets, decay) == expected


def test_enu_to_geodetic_is_pymap3d_to_round_off() -> None:
    rng = np.random.default_rng(11)
    for _ in range(300):
        enu = rng.normal(0.0, 1e3, 3) * rng.choice([1e-3, 1.0, 100.0])
        datum = (rng.uniform(-89.0, 89.0), rng.uniform(-180.0, 180.0), rng.uniform(-100, 3000))
        expected = pymap3d.enu2geodetic(*enu, *datum)
        got = KERNELS.enu_to_geodetic(*enu, *datum, WGS84.semimajor_axis, WGS84.semiminor_axis)
        np.testing.assert_allclose(got, np.array(expected, dtype=float), rtol=1e-14,
                                   atol=1e-9)
    # the poles: no division by the vanishing distance to the axis
    north_pole = KERNELS.enu_to_geodetic(0.0, 0.0, 10.0, 90.0, 0.0, 0.0,
                                         WGS84.semimajor_axis, WGS84.semiminor_axis)
    assert north_pole[0] == 90.0
    assert north_pole[2] == pytest.approx(10.0, abs=1e-6)


def test_bad_arguments_raise_one_clear_error() -> None:
    columns = np.zeros((4, 6))
    twist, rows = [0.0] * 6, ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
    with pytest.raises(ValueError, match="3 x 6"):
        KERNELS.plant_wrench(columns, [1.0] * 3, twist, None, rows, None)
    with pytest.raises(ValueError, match="at most 64"):
        KERNELS.plant_wrench(columns, [1.0] * 65, twist, None, rows, None)
    with pytest.raises(TypeError, match=r"rotor_speeds\[1\] is not a number"):
        KERNELS.plant_wrench(columns, [1.0, "x", 1.0, 1.0], twist, None, rows, None)
    with pytest.raises(ValueError, match="drag must hold 12"):
        KERNELS.plant_wrench(columns, [1.0] * 4, twist, [0.0] * 6, rows, None)
    with pytest.raises(TypeError, match="rows must be 3 rows"):
        KERNELS.plant_wrench(columns, [1.0] * 4, twist, [0.0] * 12, rows[:2], [1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="constants must hold 41"):
        KERNELS.plant_advance([0.0] * 40, 1e-3, twist, twist, rows, [0.0] * 3, [0.0] * 8,
                              twist, 0.0, twist)
    with pytest.raises(ValueError, match="momentum must hold 6"):
        KERNELS.plant_accelerations([0.0] * 41, rows, twist, twist, [0.0] * 5)
    with pytest.raises(ValueError, match="targets must hold 2"):
        KERNELS.lag_step([1.0, 2.0], [1.0], [0.5, 0.5])
    with pytest.raises(ValueError, match="normals must hold 6"):
        KERNELS.imu_reading([0.0] * 17, rows, *([0.0] * 3,) * 5, [0.0] * 18, [0.0] * 3,
                            [0.0] * 3, None, 1.0, 1.0)
    with pytest.raises(ValueError, match="array of 6 x 6 matrices"):
        KERNELS.adjoints_apply(np.zeros((2, 6, 5)), twist, np.zeros((2, 6)))
    with pytest.raises(ValueError, match="out must be a float64 array of 12"):
        KERNELS.adjoints_apply(np.zeros((2, 6, 6)), twist, np.zeros((3, 6)))
    with pytest.raises(ValueError, match="wrenches must be a C-contiguous float64 2 x 6"):
        KERNELS.adjoints_transpose_sum(np.zeros((2, 6, 6)), np.zeros((1, 6)))
    with pytest.raises(ValueError, match="0 < b <= a"):
        KERNELS.enu_to_geodetic(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0)
