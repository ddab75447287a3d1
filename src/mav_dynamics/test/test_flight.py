"""``flight.FlightControl``, the controller node's logic without ROS: idle ticks, the take-off,
odometry and setpoint screening, setpoints and plan changes, the status and gains."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from mav_dynamics import flight
from mav_dynamics.allocation import ControlAllocator
from mav_dynamics.controller import TrackingController
from mav_dynamics.model import TreeModel
from mav_dynamics.trajectories import (
    FigureEight,
    Hover,
    MinimumJerkMove,
    Trajectory,
    heading,
    rest_to_rest_duration,
)
from mav_dynamics.vehicle import Vehicle
from mav_dynamics.vehicle_file import load_vehicle
from mav_geometry import quaternion

VEHICLES = Path(__file__).resolve().parents[3] / "config" / "vehicles"
S = 10**9  # ns per second
LEVEL = np.array([0.0, 0.0, 0.0, 1.0])
YAW_90 = np.array([0.0, 0.0, math.sqrt(0.5), math.sqrt(0.5)])
AT_REST = np.zeros(6)
HOVER_POINT = [1.0, 2.0, 3.0]


@pytest.fixture(scope="module")
def models() -> dict[str, TreeModel]:
    return {name: TreeModel(load_vehicle(VEHICLES / f"{name}.yaml"))
            for name in ("quadrotor_x", "tilting_quadrotor")}


def _flight(model: TreeModel, mission: Trajectory | None = None,
            **options: float) -> flight.FlightControl:
    settings = {"rate_hz": 100.0, "takeoff_delay_s": 1.0, "takeoff_duration_s": 2.0,
                "speed_mps": 1.0, **options}
    assert model.vehicle.gains is not None
    return flight.FlightControl(model, model.vehicle.gains, mission or Hover(HOVER_POINT),
                                plan_name="hover", **settings)


def test_idle_before_odometry_and_during_the_takeoff_delay(models) -> None:
    core = _flight(models["tilting_quadrotor"])
    first = core.tick(0)
    assert first.output is None
    assert first.reference is None
    assert first.rotor_speeds.tolist() == [0.0] * 4
    allocator = core.allocator
    assert first.tilt_angles.tolist() == np.clip(0.0, allocator.tilt_min,
                                                 allocator.tilt_max).tolist()
    assert core.status(0, 0.5) == (flight.OK, "waiting for odometry (motors off)",
                                   {"trajectory": "hover"})
    assert core.odometry(S, 2 * S, LEVEL, [0.0, 0.0, 0.2], AT_REST) is None
    for now_ns in (2 * S, 2 * S + S // 2, 3 * S - 1):          # the delay ends at 3 s
        tick = core.tick(now_ns)
        assert tick.output is None
        assert tick.reference is None
        assert not tick.rotor_speeds.any()
    level, summary, values = core.status(2 * S + S // 4, 10.0)
    assert (level, summary) == (flight.OK, "waiting for take-off in 0.75 s")
    assert values["odometry_age_s"] == "1.2500"
    assert core.plan is None
    flying = core.tick(3 * S)
    assert flying.output is not None
    assert flying.reference is not None
    assert np.all(flying.rotor_speeds > 0.0)


def test_takeoff_starts_from_the_odometry_at_the_end_of_the_delay(models) -> None:
    core = _flight(models["quadrotor_x"])
    core.odometry(S, 0, LEVEL, [0.0, 0.0, 0.5], AT_REST)        # unsettled first estimate
    core.odometry(2 * S, S // 2, YAW_90, [0.3, -0.1, 0.2], AT_REST)
    reference = core.tick(S).reference                           # delay of 1 s from t = 0
    assert reference is not None
    assert reference.position.tolist() == [0.3, -0.1, 0.2]
    assert np.allclose(reference.attitude, heading(math.pi / 2), atol=1e-15)
    # The climb ends at the mission's start after takeoff_duration_s, facing its heading.
    end = core.tick(3 * S + S // 10).reference
    assert end is not None
    assert end.position.tolist() == HOVER_POINT
    assert np.array_equal(end.attitude, np.eye(3))
    # A later odometry does not move the plan.
    core.odometry(3 * S, 3 * S, LEVEL, [5.0, 5.0, 5.0], AT_REST)
    assert core.plan is not None
    assert core.plan.reference(0.0).position.tolist() == [0.3, -0.1, 0.2]


def test_each_odometry_rejection_is_counted_and_changes_nothing(models) -> None:
    core = _flight(models["quadrotor_x"], takeoff_delay_s=0.0)
    reference_core = _flight(models["quadrotor_x"], takeoff_delay_s=0.0)
    good = (5 * S, 0, LEVEL, HOVER_POINT, AT_REST)
    assert core.odometry(*good) is None
    reference_core.odometry(*good)
    bad = {
        "non_finite": (6 * S, 0, LEVEL, [math.nan, 0.0, 0.0], AT_REST),
        "non_unit_quaternion": (6 * S, 0, [0.0, 0.0, 0.0, 1.2], HOVER_POINT, AT_REST),
        "out_of_range": (6 * S, 0, LEVEL, [0.0, 2e7, 0.0], AT_REST),
        "stamp_backwards": (5 * S - 1, 0, LEVEL, [9.0, 9.0, 9.0], AT_REST),
        "stamp_duplicate": (5 * S, 0, LEVEL, [9.0, 9.0, 9.0], AT_REST),
    }
    for reason, sample in bad.items():
        assert core.odometry(*sample) == reason
    assert core.odometry(6 * S, 0, LEVEL, HOVER_POINT, [0.0, 0.0, 0.0, 2e4, 0.0, 0.0]) \
        == "out_of_range"                                        # twist beyond 1e4
    assert core.odometry(6 * S, 0, [math.inf, 0.0, 0.0, 1.0], HOVER_POINT, AT_REST) \
        == "non_finite"
    assert core.rejected_odometry == {"non_finite": 2, "non_unit_quaternion": 1,
                                      "out_of_range": 2, "stamp_backwards": 1,
                                      "stamp_duplicate": 1}
    assert core.odometry_stamp_ns == 5 * S
    # Bit for bit the command of a core that saw only the good sample.
    for now_ns in (0, S // 100):
        tick, expected = core.tick(now_ns), reference_core.tick(now_ns)
        assert tick.output is not None
        assert expected.output is not None
        assert np.array_equal(tick.rotor_speeds, expected.rotor_speeds)
        assert np.array_equal(tick.output.wrench, expected.output.wrench)
    level, summary, values = core.status(S // 100, 1.0)
    assert (level, summary) == (flight.WARN, "flying; 7 odometry rejected")
    assert values["rejected_odometry_out_of_range"] == "2"
    assert core.status(S // 100, 1.0)[:2] == (flight.OK, "flying")   # a new window


def test_a_setpoint_before_takeoff_becomes_the_climbs_goal(models) -> None:
    core = _flight(models["quadrotor_x"], takeoff_delay_s=0.5, takeoff_duration_s=1.0)
    assert core.set_setpoint(0, [0.5, 0.0, 1.2], YAW_90) is None    # before any odometry
    assert core.plan_name == "setpoint"
    core.odometry(0, 0, LEVEL, [0.0, 0.0, 0.1], AT_REST)
    assert core.set_setpoint(S // 4, [0.5, 0.5, 1.5], YAW_90) is None  # during the delay
    assert core.plan is None
    start = core.tick(S // 2).reference
    end = core.tick(3 * S // 2).reference
    assert start is not None
    assert end is not None
    assert start.position.tolist() == [0.0, 0.0, 0.1]
    assert end.position.tolist() == [0.5, 0.5, 1.5]
    assert np.allclose(end.attitude, heading(math.pi / 2), atol=1e-15)
    values = core.status(3 * S // 2, 10.0)[2]
    assert values["trajectory"] == "setpoint"
    assert values["odometry_age_s"] == "1.5000"
    assert values["position_error_m"] == f"{np.linalg.norm([0.5, 0.5, 1.4]):.4f}"


def test_a_setpoint_in_flight_is_a_minimum_jerk_move_ending_there(models) -> None:
    core = _flight(models["quadrotor_x"], takeoff_delay_s=0.0, takeoff_duration_s=1.0,
                   speed_mps=2.0)
    core.odometry(0, 0, LEVEL, HOVER_POINT, AT_REST)
    core.tick(0)
    now_ns = 3 * S                                               # hovering at the point
    before = core.tick(now_ns).reference
    assert before is not None
    target = [1.0, 2.0, 7.0]                                     # 4 m up
    assert core.set_setpoint(now_ns, target, YAW_90) is None
    duration = rest_to_rest_duration(4.0, 2.0)
    assert duration > flight.SHORTEST_SETPOINT_MOVE_S
    start = core.tick(now_ns).reference
    middle = core.tick(now_ns + round(duration / 2 * S)).reference
    end = core.tick(now_ns + round(duration * S) + S // 1000).reference  # then at rest
    assert start is not None
    assert middle is not None
    assert end is not None
    assert start.position.tolist() == before.position.tolist()   # no jump
    assert middle.position[2] == pytest.approx(5.0)              # symmetric profile
    assert middle.velocity[2] == pytest.approx(2.0)              # the peak speed
    assert end.position.tolist() == target
    assert end.velocity.tolist() == [0.0, 0.0, 0.0]
    assert np.allclose(end.attitude, heading(math.pi / 2), atol=1e-15)
    # A short hop still takes the shortest move duration.
    assert core.set_setpoint(now_ns, [1.0, 2.0, 3.01], LEVEL) is None
    assert isinstance(core.plan, MinimumJerkMove)
    assert core.plan.duration == flight.SHORTEST_SETPOINT_MOVE_S
    rejected = {"non_finite": ([0.0, math.nan, 1.0], LEVEL),
                "non_unit_quaternion": ([0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.9]),
                "out_of_range": ([0.0, 0.0, -2e7], LEVEL)}
    plan = core.plan
    for reason, (position, orientation) in rejected.items():
        assert core.set_setpoint(now_ns, position, orientation) == reason
    assert core.rejected_setpoints == dict.fromkeys(rejected, 1)
    assert core.plan is plan


def test_a_new_mission_in_flight_moves_to_its_start_then_flies_it(models) -> None:
    core = _flight(models["quadrotor_x"], takeoff_delay_s=0.0, takeoff_duration_s=1.0,
                   speed_mps=1.875)                              # moves 1 m in 1 s
    core.odometry(0, 0, LEVEL, HOVER_POINT, AT_REST)
    now_ns = 2 * S
    before = core.tick(now_ns).reference
    eight = FigureEight((1.0, 2.0), 1.0, 8.0, 3.0)              # starts at (1, 2, 3)...
    moved = FigureEight((1.0, 2.0), 1.0, 8.0, 4.0)              # ...this one 1 m higher
    core.set_mission(now_ns, moved, "figure_eight")
    assert (core.plan_name, core.mission) == ("figure_eight", moved)
    start = core.tick(now_ns).reference
    assert before is not None
    assert start is not None
    assert start.position.tolist() == before.position.tolist()
    after_move = core.tick(now_ns + 3 * S).reference           # move of 1 s, then 2 s of eight
    assert after_move is not None
    assert after_move.position == pytest.approx(moved.reference(2.0).position, abs=1e-12)
    assert after_move.position != pytest.approx(eight.reference(2.0).position, abs=0.5)


def test_before_takeoff_a_new_mission_only_changes_the_climbs_goal(models) -> None:
    core = _flight(models["quadrotor_x"])
    core.set_mission(0, Hover([0.0, 0.0, 2.0]), "hover")
    core.odometry(0, 0, LEVEL, [0.0, 0.0, 0.0], AT_REST)
    core.set_mission(S // 2, Hover([0.0, 0.0, 4.0]), "hover")
    assert core.plan is None
    end = core.tick(3 * S + S // 10).reference                   # delay 1 s, climb 2 s
    assert end is not None
    assert end.position.tolist() == [0.0, 0.0, 4.0]


def test_status_reports_stale_odometry_as_error_and_saturation_as_warn(models) -> None:
    core = _flight(models["quadrotor_x"], takeoff_delay_s=0.0)
    core.odometry(0, 0, LEVEL, HOVER_POINT, AT_REST)
    core.tick(0)
    assert core.status(0, 0.5)[:2] == (flight.OK, "flying")
    # 1 km below the reference: the allocation saturates; one tick of two in this window.
    core.odometry(1, 0, LEVEL, [1.0, 2.0, -1000.0], AT_REST)
    core.tick(S // 100)
    core.tick(2 * S // 100)
    assert core.odometry(2, 0, LEVEL, HOVER_POINT, AT_REST) is None
    core.tick(3 * S // 100)
    level, summary, values = core.status(3 * S // 100, 0.5)
    assert (level, summary) == (flight.WARN, "allocation saturated")
    assert values["saturated_ticks"] == "2/3"
    assert values["allocation_saturated"] == "False"             # the last tick was fine
    # Stale odometry outranks saturation; control goes on with the last odometry.
    level, summary, values = core.status(S, 0.5)
    assert (level, summary) == (flight.ERROR,
                                "odometry stale (1.00 s): flying on the last odometry")
    assert values["odometry_age_s"] == "1.0000"
    stale = core.tick(S)
    assert stale.output is not None
    assert np.all(stale.rotor_speeds > 0.0)


def test_commands_are_the_controller_and_allocator_calls_of_the_node(models) -> None:
    """The tick is ``TrackingController.update`` then ``ControlAllocator.allocate`` with the
    previous tilt command over one period, bit for bit."""
    model = models["tilting_quadrotor"]
    core = _flight(model, takeoff_delay_s=0.0, takeoff_duration_s=1.0)
    allocator = ControlAllocator(model)
    assert model.vehicle.gains is not None
    controller = TrackingController(model, model.vehicle.gains, rank=allocator.rank)
    tilts = np.clip(0.0, allocator.tilt_min, allocator.tilt_max)
    orientation = np.array([0.01, -0.02, 0.1, 1.0])
    orientation /= np.linalg.norm(orientation)
    core.odometry(0, 0, orientation, [0.1, 0.2, 0.0], [0.1, 0.0, 0.2, 0.3, 0.0, -0.1])
    rotation = quaternion.to_matrix(orientation / np.linalg.norm(orientation))
    for k in range(5):
        tick = core.tick(k * S // 100)
        assert tick.output is not None
        assert tick.reference is not None
        output = controller.update(rotation, np.array([0.1, 0.2, 0.0]),
                                   np.array([0.1, 0.0, 0.2, 0.3, 0.0, -0.1]), tick.reference)
        allocation = allocator.allocate(output.wrench, tilts, 0.01)
        tilts = allocation.tilt_angles
        assert np.array_equal(tick.output.wrench, output.wrench)
        assert np.array_equal(tick.rotor_speeds, allocation.rotor_speeds)
        assert np.array_equal(tick.tilt_angles, allocation.tilt_angles)


def test_set_gains_takes_effect_at_the_next_tick(models) -> None:
    model = models["quadrotor_x"]
    core = _flight(model, takeoff_delay_s=0.0)
    core.odometry(0, 0, LEVEL, HOVER_POINT, [0.0, 0.0, 0.0, 0.0, 0.0, 0.5])  # rising
    gains = model.vehicle.gains
    assert gains is not None
    hover = core.tick(0).output
    core.set_gains(dataclasses.replace(gains, velocity=2.0 * gains.velocity))
    doubled = core.tick(0).output
    assert hover is not None
    assert doubled is not None
    weight = float((-model.locked_inertia() @ model.gravity_twist(np.eye(3)))[5])
    assert doubled.wrench[5] - weight == pytest.approx(2.0 * (hover.wrench[5] - weight),
                                                       rel=1e-9)


def test_gains_resolve_per_key_over_the_vehicle_files(models) -> None:
    vehicle = models["quadrotor_x"].vehicle
    assert vehicle.gains is not None
    gains = flight.resolve_gains(vehicle, {"velocity": np.array([1.0, 2.0, 3.0])})
    assert gains.velocity.tolist() == [1.0, 2.0, 3.0]
    assert gains.position is vehicle.gains.position
    no_gains: Vehicle = dataclasses.replace(vehicle, gains=None)
    with pytest.raises(ValueError, match=(
            r"^parameters \['gains.velocity', 'gains.angular_rate'\] are not set: vehicle "
            r"'quadrotor_x' has no controller gains, so all of \['gains.angular_rate', "
            r"'gains.attitude', 'gains.position', 'gains.velocity'\] are needed$")):
        flight.resolve_gains(no_gains, {"position": np.ones(3), "attitude": np.ones(3)})
    given = {key: np.full(3, i + 1.0) for i, key in enumerate(flight.GAIN_KEYS)}
    assert flight.resolve_gains(no_gains, given).angular_rate.tolist() == [4.0] * 3
