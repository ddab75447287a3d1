"""Mechanism data, the validating YAML loader, forward kinematics and constraint rank."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml

from mav_geometry import quaternion as Q
from mav_ros_common.resources import find_named_file
from variational_sim.experiments.common import fly_hopper
from variational_sim.multibody.constraints import ConstraintSet
from variational_sim.multibody.hopper import (
    nominal_configuration,
    with_welded_base,
)
from variational_sim.multibody.kinematics import (
    ConstraintRankError,
    body_velocities,
    forward_kinematics,
    joint_angle,
)
from variational_sim.multibody.loader import MechanismFileError, mechanism_from_dict
from variational_sim.multibody.mechanism import Actuator


@pytest.fixture(scope="module")
def document() -> dict:
    with open(find_named_file("fly_hopper", "robots"), encoding="utf-8") as stream:
        return yaml.safe_load(stream)


def test_hopper_file_has_the_notes_parameters() -> None:
    hopper = fly_hopper()
    assert [body.name for body in hopper.bodies] == ["base", "link0", "link1", "link2", "link3"]
    assert hopper.masses.sum() == pytest.approx(7.7248, abs=1e-4)
    assert hopper.inertias[3, 1, 1] == pytest.approx(3.02324068012293e-04)
    assert hopper.gravity[2] == -9.807
    assert [a.joint for a in hopper.actuators] == ["hip0", "hip2"]
    assert hopper.contacts[0].radius == 0.025
    assert hopper.contacts[0].friction == 0.5


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("bodies", 1, "mass"), -1.0, r"bodies\[1\]\(link0\)\.mass"),
        (("bodies", 2, "inertia"), [[1, 0, 0], [0, 1, 0]], r"bodies\[2\]\(link1\)\.inertia"),
        (("bodies", 0, "inertia"), [[1, 2, 0], [2, 1, 0], [0, 0, 1]], r"positive definite"),
        (("joints", 0, "type"), "prismatic", r"joints\[0\]\(hip0\)\.type"),
        (("joints", 1, "parent"), "nobody", r"joints.knee1.parent: unknown body"),
        (("joints", 2, "axis"), [0, 0, 0], r"joints\[2\]\(hip2\)\.axis"),
        (("contacts", 0, "friction"), -0.1, r"contacts\[0\]\(foot\)\.friction"),
        (("actuators", 0, "joint"), "closure", r"actuators.hip0_motor.joint"),
    ],
)
def test_loader_errors_name_the_field(document: dict, path: tuple, value: object,
                                      message: str) -> None:
    broken = copy.deepcopy(document)
    target = broken
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(MechanismFileError, match=message):
        mechanism_from_dict(broken)


def test_loader_reports_missing_fields(document: dict) -> None:
    broken = copy.deepcopy(document)
    del broken["joints"][3]["child_point"]
    with pytest.raises(MechanismFileError, match=r"joints\[3\]\(knee3\)\.child_point: missing"):
        mechanism_from_dict(broken)


def test_forward_kinematics_closes_the_loop_and_reproduces_the_angles() -> None:
    hopper = fly_hopper()
    positions, quaternions = nominal_configuration(hopper)
    values, _ = ConstraintSet(hopper).evaluate(positions, quaternions)
    assert np.max(np.abs(values)) < 1e-15
    for name, degrees in (("hip0", 30.0), ("knee1", 120.0), ("hip2", 150.0), ("knee3", -120.0)):
        assert np.degrees(joint_angle(hopper, name, quaternions)) == pytest.approx(degrees)


def test_foot_clearance_at_the_nominal_pose_matches_a_hand_computation() -> None:
    hopper = fly_hopper()
    positions, quaternions = nominal_configuration(hopper)
    foot = hopper.contacts[0]
    centre = positions[4] + Q.rotate(quaternions[4], foot.point)
    # hip at z = 0.5; knee3 at 0.3 (cos 150, -sin 150) from it; link 3 at 30 deg with the
    # foot at (0.3, 0.0205) in its frame: z = -0.3 sin 30 + 0.0205 cos 30
    c30, s30 = np.cos(np.radians(30.0)), np.sin(np.radians(30.0))
    hand = 0.5 - 0.3 * s30 - 0.3 * s30 + 0.0205 * c30
    assert centre[2] - foot.radius == pytest.approx(hand - 0.025, abs=1e-12)
    assert 0.18 < centre[2] - foot.radius < 0.2


def test_full_constraint_sets_have_full_rank() -> None:
    hopper = fly_hopper()
    positions, quaternions = nominal_configuration(hopper)
    for mechanism, rows in ((hopper, 22), (with_welded_base(hopper), 28)):
        _, jacobian = ConstraintSet(mechanism).evaluate(positions, quaternions)
        assert jacobian.shape == (rows, 30)
        assert np.linalg.matrix_rank(jacobian) == rows


def test_the_papers_23_row_set_is_rejected_as_rank_deficient(document: dict) -> None:
    redundant = copy.deepcopy(document)
    del redundant["joints"][4]["point_directions"]
    mechanism = mechanism_from_dict(redundant)
    angles = {"hip0": np.radians(30), "knee1": np.radians(120), "hip2": np.radians(150),
              "knee3": np.radians(-120)}
    with pytest.raises(ConstraintRankError, match="23 rows but rank 22"):
        forward_kinematics(mechanism, np.array([0, 0, 0.5]), np.array([0, 0, 0, 1.0]), angles)


def test_initial_velocities_satisfy_the_velocity_constraints() -> None:
    hopper = fly_hopper()
    positions, quaternions = nominal_configuration(hopper)
    velocities = body_velocities(hopper, positions, quaternions,
                                 np.array([0.1, 0.2, -0.3, 0.5, 0.0, 1.0]),
                                 {"hip0": 2.0, "knee1": -1.0, "hip2": 0.5, "knee3": 3.0})
    _, jacobian = ConstraintSet(hopper).evaluate(positions, quaternions)
    assert np.max(np.abs(jacobian @ velocities.reshape(-1))) < 1e-13


def test_actuator_torque_speed_envelope() -> None:
    motor = Actuator("m", "j", peak_torque=10.0, no_load_speed=20.0)
    assert motor.limits(0.0) == (-10.0, 10.0)
    assert motor.limits(10.0) == (-10.0, 5.0)
    assert motor.limits(-20.0) == (0.0, 10.0)
    assert motor.limits(100.0) == (-10.0, -10.0)  # beyond no-load speed: braking only
