"""A planar pendulum chain of identical links: the scaling case of the multibody step.

``links`` uniform rods of ``LINK_LENGTH`` m and ``LINK_MASS`` kg hang from a revolute
pivot at ``pivot`` (world, m), every joint turning about the world y axis; the last
link carries a foot sphere at its tip. Link frames: origin at the rod's middle, x along
the rod. Cost per step against ``links`` is what ``bench/bench_hopper.py`` plots.
"""

from __future__ import annotations

import numpy as np

from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray
from variational_sim.multibody.kinematics import forward_kinematics
from variational_sim.multibody.mechanism import WORLD, Body, Contact, Joint, Mechanism

LINK_LENGTH = 0.2
LINK_MASS = 0.2
LINK_RADIUS = 0.01
FOOT_RADIUS = 0.02


def pendulum_chain(links: int, pivot: FloatArray) -> Mechanism:
    """``links`` (>= 1) rods hanging from a pivot at ``pivot`` (m), foot on the last."""
    if links < 1:
        raise ValueError(f"links must be >= 1, got {links}")
    half = np.array([LINK_LENGTH / 2, 0.0, 0.0])
    along = LINK_MASS * LINK_RADIUS**2 / 2
    across = LINK_MASS * (3 * LINK_RADIUS**2 + LINK_LENGTH**2) / 12
    bodies = tuple(Body(f"link{i}", LINK_MASS, np.diag([along, across, across]))
                   for i in range(links))
    joints = (Joint("pivot", "revolute", WORLD, "link0", np.asarray(pivot, dtype=float), -half),
              *(Joint(f"joint{i}", "revolute", f"link{i - 1}", f"link{i}", half, -half)
                for i in range(1, links)))
    foot = Contact("foot", f"link{links - 1}", half.copy(), FOOT_RADIUS, 0.5)
    return Mechanism(f"chain{links}", bodies, joints, contacts=(foot,))


def chain_configuration(mechanism: Mechanism, angles: FloatArray
                        ) -> tuple[FloatArray, FloatArray]:
    """Positions (n, 3) and attitudes (n, 4) with the pivot and joint angles ``angles``
    (rad, one per joint: 0 points a link along +x, pi/2 straight down)."""
    pivot = mechanism.joints[0]
    root = Q.from_rotation_vector(np.array([0.0, angles[0], 0.0]))
    position = pivot.parent_point - Q.rotate(root, pivot.child_point)
    return forward_kinematics(mechanism, position, root,
                              {joint.name: float(angle)
                               for joint, angle in zip(mechanism.joints[1:], angles[1:],
                                                       strict=True)})
