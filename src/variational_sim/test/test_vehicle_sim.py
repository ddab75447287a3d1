"""Vehicle simulator core (no ROS): plant physics against analytic solutions, balances,
actuator lags, ground contact, sensors' timing and command validation."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from mav_dynamics.aero import body_drag_wrench
from mav_dynamics.allocation import allocation_matrix
from mav_dynamics.model import TreeModel
from mav_dynamics.vehicle_file import load_vehicle, parse_vehicle
from mav_geometry import quaternion as Q
from mav_ros_common.resources import find_named_file
from variational_sim.sensors.gnss import GnssConfig
from variational_sim.vehicle_sim.plant import STANDARD_GRAVITY, AllocationMatrix, MultirotorPlant
from variational_sim.vehicle_sim.simulator import SimulatorConfig, VehicleSimulator

# The installed vehicle files, found as the nodes find them.
QUADROTOR = find_named_file("quadrotor_x", "vehicles")
TILTING = find_named_file("tilting_quadrotor", "vehicles")
H = 1e-3


def hover_speed(plant: MultirotorPlant) -> float:
    """Equal rotor speed whose thrust K @ w^2 balances the weight (rad/s)."""
    return math.sqrt(plant.weight / plant.allocation()[5].sum())


def without_drag(path: Path):
    data = yaml.safe_load(path.read_text())
    data["body"].pop("drag", None)
    return parse_vehicle(data)


@pytest.mark.parametrize("integrator", ["dqvi", "rk4", "rkmk4"])
def test_hover_speeds_hold_position_and_attitude(integrator):
    plant = MultirotorPlant(load_vehicle(QUADROTOR), integrator, H)
    speed = hover_speed(plant)
    wrench = plant.allocation() @ np.full(4, speed**2)
    np.testing.assert_allclose(wrench, [0, 0, 0, 0, 0, plant.weight], atol=1e-12)
    plant.reset((1.0, -2.0, 5.0), yaw=0.7)
    for _ in range(500):
        plant.step([speed] * 4)
    np.testing.assert_allclose(plant.held_wrench, [0, 0, 0, 0, 0, plant.weight], atol=1e-9)
    np.testing.assert_allclose(plant.position, (1.0, -2.0, 5.0), atol=1e-9)
    np.testing.assert_allclose(plant.orientation, Q.from_rotation_vector([0, 0, 0.7]), atol=1e-12)
    assert not plant.landed


@pytest.mark.parametrize("integrator", ["dqvi", "rk4", "rkmk4"])
def test_free_fall_from_rest_matches_half_g_t_squared_at_the_nodes(integrator):
    plant = MultirotorPlant(without_drag(QUADROTOR), integrator, H)
    plant.reset((0.0, 0.0, 100.0))
    for k in range(1, 501):
        plant.step([0.0] * 4)
        if k % 50 == 0:
            t = k * H
            np.testing.assert_allclose(plant.position, (0, 0, 100 - 0.5 * STANDARD_GRAVITY * t * t),
                                       atol=1e-9)
            np.testing.assert_allclose(plant.velocity_enu, (0, 0, -STANDARD_GRAVITY * t),
                                       atol=1e-9)


def test_landed_vehicle_rests_then_lifts_off_then_touches_down_inelastically():
    sim = VehicleSimulator(SimulatorConfig(vehicle_file=str(QUADROTOR)))
    speed = hover_speed(sim.plant)
    sim.set_command([0.99 * speed] * 4)   # thrust below the weight: stays on the ground
    for _ in range(300):
        sim.step()
    truth = sim.truth
    assert truth.landed
    assert np.all(truth.position_enu == 0.0)
    assert np.all(truth.twist_body == 0.0)
    assert truth.rotor_speeds[0] == pytest.approx(0.99 * speed, rel=1e-6)
    sim.set_command([1.1 * speed] * 4)
    for _ in range(500):
        sim.step()
    truth = sim.truth
    assert not truth.landed
    assert truth.position_enu[2] > 0.05
    assert truth.velocity_enu[2] > 0.0
    sim.set_command([0.0] * 4)            # motors off: falls back
    for _ in range(3000):
        sim.step()
    truth = sim.truth
    assert truth.landed
    assert sim.plant.touchdowns == 1
    assert truth.position_enu[2] == 0.0
    assert np.all(truth.twist_body == 0.0)
    np.testing.assert_allclose(truth.orientation_xyzw, [0, 0, 0, 1], atol=1e-12)


def test_imu_at_rest_reads_plus_g_up_and_zero_rate():
    sim = VehicleSimulator(SimulatorConfig(vehicle_file=str(QUADROTOR), seed=3))
    samples = [out.imu for out in (sim.step() for _ in range(1000)) if out.imu is not None]
    assert len(samples) == 200  # 200 Hz over 1 s
    accel = np.mean([s.accel for s in samples], axis=0)
    gyro = np.mean([s.gyro for s in samples], axis=0)
    # 5 sigma of the mean's error: turn-on bias (0.03 m/s^2, 2e-3 rad/s) and white noise
    # over 200 samples (0.02 m/s^2, 1e-3 rad/s); the gyro also sees the Earth rate (7e-5)
    np.testing.assert_allclose(accel, [0, 0, STANDARD_GRAVITY], atol=0.2)
    np.testing.assert_allclose(gyro, 0.0, atol=0.012)


def test_motor_step_response_is_the_exact_exponential():
    sim = VehicleSimulator(SimulatorConfig(vehicle_file=str(QUADROTOR)))
    tau = sim.vehicle.rotors[0].time_constant
    sim.set_command([800.0] * 4)
    for k in range(1, 101):
        sim.step()
        expected = 800.0 * (1.0 - math.exp(-k * H / tau))
        np.testing.assert_allclose(sim.truth.rotor_speeds, expected, rtol=1e-12)


def test_tilt_servo_slews_at_its_rate_limit_then_settles_at_the_command():
    sim = VehicleSimulator(SimulatorConfig(vehicle_file=str(TILTING)))
    joint = sim.vehicle.tilting_links[0].joint
    sim.set_command([0.0] * 4, [0.5, 0.0, 0.0, 0.0])
    for k in range(1, 21):
        sim.step()
        assert sim.truth.tilt_angles[0] == pytest.approx(joint.rate_max * k * H, rel=1e-12)
    for _ in range(500):
        sim.step()
    np.testing.assert_allclose(sim.truth.tilt_angles, [0.5, 0, 0, 0], atol=1e-9)


def tracking_manoeuvre(integrator: str, step_size: float, duration_s: float = 3.0):
    """Airborne attitude-tracking manoeuvre with varying thrust from 50 m; rotor speeds from
    the pseudo-inverse of K. Returns the plant and the energy errors sampled every 0.25 s."""
    plant = MultirotorPlant(load_vehicle(QUADROTOR), integrator, step_size)
    plant.reset((0.0, 0.0, 50.0))
    inverse = np.linalg.pinv(plant.allocation())
    errors = []
    steps = round(duration_s / step_size)
    for k in range(steps):
        t = k * step_size
        target = Q.from_rotation_vector([0.3 * math.sin(2 * t), 0.2 * math.sin(3 * t), 0.5 * t])
        attitude_error = Q.to_rotation_vector(
            Q.multiply(Q.conjugate(target), np.array(plant.orientation)))
        torque = -0.5 * attitude_error - 0.1 * np.array(plant.twist[:3])
        wrench = [*torque, 0.0, 0.0, plant.weight * (1.0 + 0.2 * math.sin(t))]
        plant.step(np.sqrt(np.clip(inverse @ wrench, 100.0**2, 1100.0**2)).tolist())
        if (k + 1) % round(0.25 / step_size) == 0:
            errors.append(plant.energy_error())
    return plant, np.array(errors)


def test_energy_balance_error_is_small_and_second_order_in_a_powered_manoeuvre():
    plant, errors = tracking_manoeuvre("dqvi", H)
    start = MultirotorPlant(plant.vehicle, "dqvi", H)
    start.reset((0.0, 0.0, 50.0))
    energy_change = plant.body.energy(plant.state) - start.body.energy(start.state)
    assert abs(energy_change) > 10.0  # the rotors do real work (J)
    assert np.abs(errors).max() < 1e-7 * abs(energy_change)
    _, finer = tracking_manoeuvre("dqvi", H / 2)
    # a discretisation effect, not a missing or wrong work term: halving h quarters it
    assert np.abs(finer).max() < 0.35 * np.abs(errors).max()
    assert np.abs(plant.momentum_error()).max() < 1e-9


def test_dqvi_agrees_with_dop853_on_a_powered_trajectory():
    dqvi, _ = tracking_manoeuvre("dqvi", H, 0.5)
    reference, _ = tracking_manoeuvre("dop853", H, 0.5)
    np.testing.assert_allclose(dqvi.position, reference.position, atol=1e-5)
    np.testing.assert_allclose(dqvi.twist, reference.twist, atol=1e-4)
    angle = Q.to_rotation_vector(Q.multiply(Q.conjugate(np.array(reference.orientation)),
                                            np.array(dqvi.orientation)))
    assert np.linalg.norm(angle) < 1e-5


def test_accelerations_match_the_finite_difference_of_the_velocity():
    plant = MultirotorPlant(load_vehicle(QUADROTOR), "dqvi", H)
    plant.reset((0, 0, 20), twist=(0.4, -0.3, 0.2, 1.0, 0.5, -0.2))
    speeds = [560.0, 540.0, 555.0, 545.0]
    plant.step(speeds)
    before = np.array(plant.velocity_enu), np.array(plant.twist[:3])
    plant.step(speeds)
    angular_acceleration, acceleration = plant.accelerations()
    plant.step(speeds)
    after = np.array(plant.velocity_enu), np.array(plant.twist[:3])
    np.testing.assert_allclose(acceleration, (after[0] - before[0]) / (2 * H), atol=1e-4)
    np.testing.assert_allclose(angular_acceleration, (after[1] - before[1]) / (2 * H), atol=1e-4)


def test_gnss_fixes_are_published_after_their_latency_and_reset_repeats_the_run():
    config = SimulatorConfig(vehicle_file=str(QUADROTOR), seed=11,
                             gnss=GnssConfig(latency_s=0.05))
    sim = VehicleSimulator(config)

    def run():
        fixes, imu = [], []
        for _ in range(460):  # fixes at 0.1 .. 0.4 s, the last published at 0.45 s
            out = sim.step()
            fixes += [(out.time_s, fix) for fix in out.gnss]
            imu += [out.imu.accel] if out.imu is not None else []
        return fixes, imu

    fixes, imu = run()
    assert [round(t - fix.time_s, 9) for t, fix in fixes] == [0.05] * 4
    assert [round(fix.time_s, 9) for _, fix in fixes] == [0.1, 0.2, 0.3, 0.4]
    sim.reset()
    again, imu_again = run()
    np.testing.assert_array_equal(np.array(imu), np.array(imu_again))
    assert [f.latitude_deg for _, f in fixes] == [f.latitude_deg for _, f in again]


def test_injected_gnss_outage_gives_no_fix_then_recovers():
    sim = VehicleSimulator(SimulatorConfig(vehicle_file=str(QUADROTOR)))
    for _ in range(200):
        sim.step()
    sim.inject_gnss_outage(0.5)
    states = [fix.fix for _ in range(1000) for fix in sim.step().gnss]
    assert False in states
    assert states[-1] is True
    with pytest.raises(ValueError, match="duration_s"):
        sim.inject_gnss_outage(-1.0)


def test_invalid_commands_are_rejected_and_counted_clamped_ones_counted():
    sim = VehicleSimulator(SimulatorConfig(vehicle_file=str(QUADROTOR)))
    assert not sim.set_command([500.0] * 3)
    assert not sim.set_command([500.0, math.nan, 500.0, 500.0])
    assert not sim.set_command([500.0, math.inf, 500.0, 500.0])
    assert not sim.set_command([500.0] * 4, [0.1])  # no tilting links on this vehicle
    assert sim.rejected_commands == {"wrong_length": 2, "non_finite": 2}
    assert sim.motors.commands == [0.0] * 4
    assert sim.set_command([5000.0, 50.0, 0.0, 600.0])
    assert sim.motors.commands == [1100.0, 100.0, 0.0, 600.0]
    assert sim.clamped_commands == 2


@pytest.mark.parametrize(("field", "value", "match"), [
    ("integrator", "euler", "integrator = 'euler'"),
    ("physics_rate_hz", 50.0, r"physics_rate_hz = 50.0: must be in \[100.0, 10000.0\] Hz"),
    ("physics_rate_hz", 1100.0, "imu.rate_hz = 200.0: must divide physics_rate_hz"),
    ("seed", -1, "seed = -1"),
    ("initial_yaw", math.nan, "initial_yaw = nan"),
])
def test_bad_configuration_raises_a_clear_error(field, value, match):
    with pytest.raises(ValueError, match=match):
        SimulatorConfig(vehicle_file=str(QUADROTOR), **{field: value})


def test_rotor_frames_follow_the_vehicle_file_and_the_tilt():
    vehicle = load_vehicle(QUADROTOR)
    positions, axes = MultirotorPlant(vehicle).rotor_frames()
    np.testing.assert_allclose(positions, [r.position for r in vehicle.rotors], atol=1e-15)
    np.testing.assert_allclose(axes, [r.thrust_axis for r in vehicle.rotors], atol=1e-15)
    tilting = MultirotorPlant(load_vehicle(TILTING))
    positions, axes = tilting.rotor_frames([0.3, 0.0, 0.0, 0.0])
    # rotor_1 sits 3 cm above the tilt_1 axis (-x through (-0.25, 0, 0)), tilted by 0.3 rad
    np.testing.assert_allclose(positions[0], [-0.25, 0.03 * math.sin(0.3),
                                              0.03 * math.cos(0.3)], atol=1e-15)
    np.testing.assert_allclose(axes[0], [0.0, math.sin(0.3), math.cos(0.3)], atol=1e-15)


def test_wing_and_drag_work_enter_the_energy_balance():
    two_wings = load_vehicle(find_named_file("quadrotor_two_wings", "vehicles"))
    plant = MultirotorPlant(two_wings, "dqvi", H)
    plant.reset((0.0, 0.0, 30.0), twist=(0.0, 0.0, 0.0, 12.0, 0.0, 0.0))
    start_energy = plant.body.energy(plant.state)
    speed = hover_speed(plant)
    for _ in range(300):
        plant.step([speed] * plant.rotor_count, [0.0] * plant.tilt_count)
    unpowered = plant.applied_wrench([0.0] * plant.rotor_count, [0.0] * plant.tilt_count)
    wing_wrench = unpowered - body_drag_wrench(plant.vehicle.drag, np.array(plant.twist))
    assert np.abs(wing_wrench).max() > 0.1  # the wings' lift and drag at about 12 m/s
    energy_change = plant.body.energy(plant.state) - start_energy
    assert abs(energy_change) > 1.0
    assert abs(plant.energy_error()) < 1e-6 * abs(energy_change)


@pytest.mark.parametrize("name", ["tilting_quadrotor", "quadrotor_four_tilting_wings"])
def test_closed_form_allocation_matches_the_tree_model_at_any_tilt(name):
    model = TreeModel(load_vehicle(find_named_file(name, "vehicles")))
    closed_form = AllocationMatrix(model)
    rng = np.random.default_rng(7)
    for _ in range(5):
        tilts = rng.uniform(-1.5, 1.5, model.tilt_count)
        reference = allocation_matrix(model, tilts)
        np.testing.assert_allclose(closed_form(tilts), reference,
                                   atol=1e-13 * np.abs(reference).max())
