"""The Fly-Hopper robot: its file, nominal pose and fixed-base variant.

Nominal pose (docs/theory/multibody-contact.md §1.3, §4.3): base CoM at (0, 0, 0.5) m,
upright; joint angles (30, 120, 150, -120) degrees for (hip0, knee1, hip2, knee3), a
parallelogram with the foot about 0.19 m above the ground.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray
from variational_sim.multibody.kinematics import forward_kinematics
from variational_sim.multibody.loader import load_mechanism
from variational_sim.multibody.mechanism import WORLD, Joint, Mechanism

NOMINAL_BASE_POSITION = np.array([0.0, 0.0, 0.5])
NOMINAL_ANGLES_DEG = {"hip0": 30.0, "knee1": 120.0, "hip2": 150.0, "knee3": -120.0}
LEG_JOINTS = ("hip0", "knee1", "hip2", "knee3")


def load_hopper(path: str | Path) -> Mechanism:
    """The Fly-Hopper mechanism from its YAML file (``config/robots/fly_hopper.yaml``)."""
    return load_mechanism(path)


def with_welded_base(mechanism: Mechanism, position: FloatArray = NOMINAL_BASE_POSITION
                     ) -> Mechanism:
    """The mechanism with its first body welded upright to the world at ``position`` (m)."""
    weld = Joint("base_weld", "fixed", WORLD, mechanism.bodies[0].name,
                 np.asarray(position, dtype=float), np.zeros(3))
    return mechanism.with_joint(weld)


def nominal_configuration(
    mechanism: Mechanism, angles_deg: dict[str, float] | None = None,
    base_position: FloatArray = NOMINAL_BASE_POSITION,
) -> tuple[FloatArray, FloatArray]:
    """Consistent positions (5, 3) and attitudes (5, 4) at the given joint angles (deg)."""
    angles = NOMINAL_ANGLES_DEG if angles_deg is None else angles_deg
    return forward_kinematics(
        mechanism, np.asarray(base_position, dtype=float), np.array([0.0, 0.0, 0.0, 1.0]),
        {name: float(np.radians(value)) for name, value in angles.items()},
    )


def with_vertical_guide(mechanism: Mechanism) -> Mechanism:
    """The mechanism with its first body kept upright on the world z axis (free in z).

    A weld whose point rows keep only x and y: the base can fall and bounce vertically
    but cannot tip, as the paper's planned base constraints for hopping tests.
    """
    guide = Joint("base_guide", "fixed", WORLD, mechanism.bodies[0].name, np.zeros(3),
                  np.zeros(3), point_directions=np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    return mechanism.with_joint(guide)


def with_locked_joints(mechanism: Mechanism, angles_deg: dict[str, float]) -> Mechanism:
    """The mechanism with the named revolute joints welded at the given angles (deg).

    Their actuators are removed. With both hips locked the leg is rigid (the
    benchmark's standing hopper, a contact case without leg dynamics).
    """
    joints = tuple(
        replace(joint, type="fixed", orientation=Q.multiply(
            Q.from_rotation_vector(np.radians(angles_deg[joint.name]) * joint.axis),
            joint.orientation))
        if joint.name in angles_deg else joint
        for joint in mechanism.joints
    )
    actuators = tuple(a for a in mechanism.actuators if a.joint not in angles_deg)
    return replace(mechanism, joints=joints, actuators=actuators)
