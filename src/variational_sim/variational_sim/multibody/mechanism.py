"""A mechanism as data: rigid bodies, joints, actuators and ground contacts.

Frames: every body frame has its origin at the body's centre of mass; joint points
and axes are given in the frames of the bodies they attach (m, unit vectors). The
parent of a joint may be ``WORLD`` (a fixed frame at the world origin, ENU, z up).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from mav_geometry import quaternion as Q
from mav_geometry.arrays import FloatArray

WORLD = "world"
"""Name of the fixed world frame usable as a joint parent."""

JOINT_TYPES = ("revolute", "spherical", "fixed")


@dataclass(frozen=True)
class Body:
    """A rigid body: ``mass`` (kg) and ``inertia`` (3x3, kg m^2, about the CoM, body axes)."""

    name: str
    mass: float
    inertia: FloatArray


@dataclass(frozen=True)
class Joint:
    """A joint between ``parent`` and ``child`` (body names, parent may be ``WORLD``).

    ``parent_point``/``child_point``: the joint centre in each body frame (m, from the
    CoM). ``axis``: revolute axis in the parent frame (unit). ``orientation``: the
    child frame relative to the parent frame at zero joint angle (unit quaternion,
    scalar-last). ``point_directions``: parent-frame directions (rows, unit) along
    which the two points must coincide; all three axes by default. A loop-closing
    joint of a planar loop keeps only the in-plane ones, because the along-axis row is
    implied by the other joints of the loop and would make the constraint set
    rank-deficient.
    """

    name: str
    type: str
    parent: str
    child: str
    parent_point: FloatArray
    child_point: FloatArray
    axis: FloatArray = field(default_factory=lambda: np.array([0.0, 1.0, 0.0]))
    orientation: FloatArray = field(default_factory=lambda: np.array([0.0, 0.0, 0.0, 1.0]))
    point_directions: FloatArray = field(default_factory=lambda: np.eye(3))

    @property
    def child_axis(self) -> FloatArray:
        """The revolute axis in the child frame (unit)."""
        result: FloatArray = Q.rotate(Q.conjugate(self.orientation), self.axis)
        return result


@dataclass(frozen=True)
class Actuator:
    """A torque (N m) about a revolute joint's axis: +u on the child, -u on the parent.

    ``peak_torque`` (N m) bounds |u|. With ``no_load_speed`` (rad/s, joint side) the
    bound falls linearly with joint speed w along the motor line
    ``-peak (1 + w/w0) <= u <= peak (1 - w/w0)`` (back-EMF limit,
    ``docs/theory/multibody-contact.md`` §1.4).
    """

    name: str
    joint: str
    peak_torque: float = float("inf")
    no_load_speed: float = float("inf")

    def limits(self, speed: float) -> tuple[float, float]:
        """Lower and upper torque bounds (N m) at joint speed ``speed`` (rad/s)."""
        ratio = speed / self.no_load_speed
        peak = self.peak_torque
        # the current limit caps both bounds, also beyond the no-load speed
        upper = min(peak, max(-peak, peak * (1.0 - ratio)))
        lower = max(-peak, min(peak, -peak * (1.0 + ratio)))
        return lower, upper


@dataclass(frozen=True)
class Contact:
    """A sphere of ``radius`` (m) centred at ``point`` (body frame, m) against the ground z = 0.

    ``friction``: Coulomb coefficient (dimensionless).
    """

    name: str
    body: str
    point: FloatArray
    radius: float
    friction: float


@dataclass(frozen=True)
class Mechanism:
    """Bodies, joints, actuators and contacts; ``gravity`` in the world frame (m/s^2)."""

    name: str
    bodies: tuple[Body, ...]
    joints: tuple[Joint, ...]
    actuators: tuple[Actuator, ...] = ()
    contacts: tuple[Contact, ...] = ()
    gravity: FloatArray = field(default_factory=lambda: np.array([0.0, 0.0, -9.807]))

    def __post_init__(self) -> None:
        names = [body.name for body in self.bodies]
        if len(set(names)) != len(names) or WORLD in names:
            raise ValueError(f"bodies: names must be unique and not {WORLD!r}, got {names}")
        joint_names = [joint.name for joint in self.joints]
        if len(set(joint_names)) != len(joint_names):
            raise ValueError(f"joints: names must be unique, got {joint_names}")
        for joint in self.joints:
            if joint.type not in JOINT_TYPES:
                raise ValueError(f"joints.{joint.name}.type must be one of {JOINT_TYPES}")
            for role, body in (("parent", joint.parent), ("child", joint.child)):
                if body not in names and not (role == "parent" and body == WORLD):
                    raise ValueError(f"joints.{joint.name}.{role}: unknown body {body!r}")
        for actuator in self.actuators:
            if self.joint(actuator.joint).type != "revolute":
                raise ValueError(f"actuators.{actuator.name}.joint must name a revolute joint")
        for contact in self.contacts:
            self.index(contact.body)

    def index(self, body: str) -> int:
        """Index of a body by name; ``-1`` for ``WORLD``."""
        try:
            return self._body_indices[body]
        except KeyError:
            raise KeyError(f"no body named {body!r}") from None

    def joint(self, name: str) -> Joint:
        """The joint called ``name``."""
        try:
            return self._joints_by_name[name]
        except KeyError:
            raise KeyError(f"no joint named {name!r}") from None

    # Lookups by name, made once: controllers ask for joints and bodies at every step.
    @cached_property
    def _body_indices(self) -> dict[str, int]:
        return {WORLD: -1} | {body.name: i for i, body in enumerate(self.bodies)}

    @cached_property
    def _joints_by_name(self) -> dict[str, Joint]:
        return {joint.name: joint for joint in self.joints}

    @property
    def masses(self) -> FloatArray:
        """Body masses (kg), shape (n,)."""
        return np.array([body.mass for body in self.bodies])

    @property
    def inertias(self) -> FloatArray:
        """Body inertia tensors about the CoM (kg m^2, body axes), shape (n, 3, 3)."""
        return np.array([body.inertia for body in self.bodies])

    def with_gravity(self, gravity: FloatArray) -> Mechanism:
        """The same mechanism under another gravity vector (world, m/s^2)."""
        return replace(self, gravity=np.asarray(gravity, dtype=float))

    def with_joint(self, joint: Joint) -> Mechanism:
        """The mechanism with one more joint (e.g. a weld of the base to the world)."""
        return replace(self, joints=(*self.joints, joint))

    def without_contacts(self) -> Mechanism:
        """The same mechanism with its contacts removed."""
        return replace(self, contacts=())
