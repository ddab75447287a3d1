"""Load and validate vehicle description files (YAML).

Every number must be finite, inertias symmetric positive definite with principal moments
that obey the triangle inequality (a rigid body's do), axes and quaternions unit length,
parents known and acyclic, names unique, limits ordered, and the rotors at full speed must
lift the weight (a vehicle with wings only gets a warning); unknown keys are rejected (they
are usually typos). A bad file raises
``ValueError`` whose message starts with the path of the offending field, e.g.
``rotors[2].thrust_axis: must be a unit vector (norm 1.2)``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mav_dynamics.vehicle import (
    BODY,
    WIND_AXES,
    WING_AXES,
    BodyDrag,
    ControllerGains,
    FloatArray,
    Link,
    RigidBodyInertia,
    Rotor,
    TiltJoint,
    Vehicle,
    WingAerodynamics,
)
from mav_geometry.shown import shown
from mav_geometry.yaml_file import read_yaml

UNIT_TOLERANCE = 1e-6
SPIN = {"ccw": 1, "cw": -1}


class _Fields:
    """A mapping read field by field, remembering its path for error messages."""

    def __init__(self, data: Any, path: str) -> None:
        if not isinstance(data, dict):
            raise ValueError(f"{path or 'file'}: must be a mapping, got {type(data).__name__}")
        self.data = data
        self.path = path
        self.used: set[str] = set()

    def field(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = ...) -> Any:
        self.used.add(key)
        if key not in self.data:
            if default is ...:
                raise ValueError(f"{self.field(key)}: required field is missing")
            return default
        return self.data[key]

    def number(self, key: str, default: Any = ..., minimum: float | None = None,
               positive: bool = False) -> float:
        value = _number(self.raw(key, default), self.field(key))
        if positive and value <= 0.0:
            raise ValueError(f"{self.field(key)}: must be > 0, got {value}")
        if minimum is not None and value < minimum:
            raise ValueError(f"{self.field(key)}: must be >= {minimum}, got {value}")
        return value

    def vector(self, key: str, size: int, default: Any = ...) -> FloatArray:
        return _vector(self.raw(key, default), size, self.field(key))

    def unit(self, key: str, size: int, default: Any = ...) -> FloatArray:
        value = self.vector(key, size, default)
        norm = float(np.linalg.norm(value))
        if abs(norm - 1.0) > UNIT_TOLERANCE:
            raise ValueError(f"{self.field(key)}: must be a unit vector (norm {norm:.6g})")
        return value

    def sub(self, key: str, default: Any = ...) -> _Fields:
        return _Fields(self.raw(key, default), self.field(key))

    def name(self, key: str) -> str:
        value = self.raw(key)
        if not isinstance(value, str) or not value:
            raise ValueError(f"{self.field(key)}: must be a non-empty string, got "
                             f"{shown(value)}")
        return value

    def finish(self) -> None:
        unknown = [key for key in self.data if key not in self.used]
        if unknown:  # the first in file order; a key may be any YAML scalar of any length
            key = unknown[0]
            name = key[:60] if isinstance(key, str) else shown(key)
            raise ValueError(f"{self.field(name)}: unknown field")


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{field}: must be a number, got {shown(value)}")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float range
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"{field}: must be finite, got {shown(value)}")
    return number


def _vector(value: Any, size: int, field: str) -> FloatArray:
    if not isinstance(value, list | tuple) or len(value) != size:
        raise ValueError(f"{field}: must be a list of {size} numbers, got {shown(value)}")
    return np.array([_number(v, f"{field}[{k}]") for k, v in enumerate(value)])


def _inertia_matrix(value: Any, field: str) -> FloatArray:
    """3 principal moments, or a symmetric 3x3 matrix; must be positive definite and its
    principal moments obey the triangle inequality."""
    if isinstance(value, list | tuple) and len(value) == 3 and all(
        isinstance(row, list | tuple) for row in value
    ):
        matrix = np.array([_vector(row, 3, f"{field}[{k}]") for k, row in enumerate(value)])
        if not np.allclose(matrix, matrix.T, rtol=0.0, atol=1e-12 * np.abs(matrix).max()):
            raise ValueError(f"{field}: 3x3 inertia must be symmetric")
    else:
        matrix = np.diag(_vector(value, 3, field))
    eigenvalues = np.linalg.eigvalsh(matrix)
    if eigenvalues.min() <= 0.0:
        raise ValueError(
            f"{field}: inertia must be positive definite (eigenvalues {eigenvalues.tolist()})"
        )
    low, middle, high = eigenvalues.tolist()
    if high > (low + middle) * (1.0 + 1e-9):  # equality: a flat body (a thin disc)
        raise ValueError(
            f"{field}: principal moments {[low, middle, high]} violate the triangle inequality "
            "(the largest exceeds the sum of the other two): no rigid body has them"
        )
    return matrix


def _rigid_body(fields: _Fields, com_default: Any = ...) -> RigidBodyInertia:
    return RigidBodyInertia(
        mass=fields.number("mass", positive=True),
        com=fields.vector("com", 3, com_default),
        inertia=_inertia_matrix(fields.raw("inertia"), fields.field("inertia")),
    )


def _quaternion(fields: _Fields, key: str) -> FloatArray:
    return fields.unit(key, 4, [0.0, 0.0, 0.0, 1.0])


def _drag(fields: _Fields | None) -> BodyDrag:
    if fields is None:
        return BodyDrag(np.zeros(6), np.zeros(6))
    drag = BodyDrag(fields.vector("linear", 6, [0.0] * 6), fields.vector("quadratic", 6, [0.0] * 6))
    fields.finish()
    for name, values in (("linear", drag.linear), ("quadratic", drag.quadratic)):
        if np.any(values < 0.0):
            raise ValueError(f"{fields.field(name)}: drag coefficients must be >= 0")
    return drag


def _joint(fields: _Fields, default_point: FloatArray) -> TiltJoint:
    limits = fields.vector("limits", 2)
    if limits[0] >= limits[1]:
        raise ValueError(f"{fields.field('limits')}: need min < max, got {limits.tolist()}")
    joint = TiltJoint(
        axis=fields.unit("axis", 3),
        point=fields.vector("point", 3, default_point.tolist()),
        angle_min=float(limits[0]),
        angle_max=float(limits[1]),
        rate_max=fields.number("rate_max", positive=True),
        servo_bandwidth=fields.number("servo_bandwidth", 40.0, positive=True),
    )
    fields.finish()
    return joint


_COEFFICIENT_NAMES = {
    WIND_AXES: ("Cl", "Cm", "Cn", "CD", "CC", "CL"),
    WING_AXES: ("Cl", "Cm", "Cn", "CA", "CY", "CN"),
}


def _aero(fields: _Fields) -> WingAerodynamics:
    convention = fields.raw("convention", WIND_AXES)
    if not isinstance(convention, str) or convention not in _COEFFICIENT_NAMES:
        raise ValueError(
            f"{fields.field('convention')}: must be one of {sorted(_COEFFICIENT_NAMES)}, "
            f"got {shown(convention)}"
        )
    alpha = fields.raw("alpha_deg")
    if not isinstance(alpha, list) or len(alpha) < 2:
        raise ValueError(f"{fields.field('alpha_deg')}: must be a list of >= 2 angles (deg)")
    alpha_deg = _vector(alpha, len(alpha), fields.field("alpha_deg"))
    if np.any(np.diff(alpha_deg) <= 0.0):
        raise ValueError(f"{fields.field('alpha_deg')}: must be strictly increasing")
    tables = fields.sub("coefficients")
    slopes = fields.sub("sideslip_slopes", {})
    names = _COEFFICIENT_NAMES[convention]
    coefficients = np.column_stack(
        [tables.vector(n, alpha_deg.size, [0.0] * alpha_deg.size) for n in names]
    )
    slope_values = np.array([slopes.number(n, 0.0) for n in names])
    tables.finish()
    slopes.finish()
    aero = WingAerodynamics(
        area=fields.number("area", positive=True),
        chord=fields.number("chord", positive=True),
        span=fields.number("span", positive=True),
        position=fields.vector("position", 3),
        orientation=_quaternion(fields, "orientation"),
        convention=convention,
        alpha_deg=alpha_deg,
        coefficients=coefficients,
        sideslip_slopes=slope_values,
    )
    fields.finish()
    return aero


def _link(fields: _Fields) -> Link:
    position = fields.vector("position", 3)
    link = Link(
        name=fields.name("name"),
        parent=fields.name("parent"),
        position=position,
        orientation=_quaternion(fields, "orientation"),
        inertia=_rigid_body(fields, [0.0, 0.0, 0.0]),
        joint=_joint(fields.sub("joint"), position) if fields.has("joint") else None,
        aero=_aero(fields.sub("aero")) if fields.has("aero") else None,
    )
    fields.finish()
    return link


def _rotor(fields: _Fields) -> Rotor:
    spin = fields.raw("spin")
    if not isinstance(spin, str) or spin not in SPIN:
        raise ValueError(f"{fields.field('spin')}: must be 'ccw' or 'cw', got {shown(spin)}")
    speed = fields.vector("speed_limits", 2)
    if not 0.0 <= speed[0] < speed[1]:
        raise ValueError(
            f"{fields.field('speed_limits')}: need 0 <= min < max (rad/s), got {speed.tolist()}"
        )
    rotor = Rotor(
        name=fields.name("name"),
        parent=fields.name("parent"),
        position=fields.vector("position", 3),
        thrust_axis=fields.unit("thrust_axis", 3),
        spin=SPIN[spin],
        axis_offset=fields.vector("axis_offset", 3, [0.0, 0.0, 0.0]),
        thrust_coefficient=fields.number("thrust_coefficient", positive=True),
        drag_coefficient=fields.number("drag_coefficient", minimum=0.0),
        inertia=RigidBodyInertia(
            mass=fields.number("mass", positive=True),
            com=np.zeros(3),
            inertia=_inertia_matrix(fields.raw("inertia"), fields.field("inertia")),
        ),
        speed_min=float(speed[0]),
        speed_max=float(speed[1]),
        time_constant=fields.number("time_constant", positive=True),
    )
    fields.finish()
    return rotor


def _gains(fields: _Fields) -> ControllerGains:
    gains = ControllerGains(
        *(fields.vector(k, 3) for k in ("position", "velocity", "attitude", "angular_rate"))
    )
    fields.finish()
    for key, value in zip(("position", "velocity", "attitude", "angular_rate"),
                          (gains.position, gains.velocity, gains.attitude, gains.angular_rate),
                          strict=True):
        if np.any(value <= 0.0):
            raise ValueError(f"{fields.field(key)}: gains must be > 0, got {value.tolist()}")
    return gains


def _check_tree(links: list[Link], rotors: list[Rotor]) -> None:
    names = [BODY]
    groups: tuple[tuple[str, Sequence[Link | Rotor]], ...] = (("links", links), ("rotors", rotors))
    for kind, items in groups:
        for index, item in enumerate(items):
            if item.name in names:
                raise ValueError(f"{kind}[{index}].name: duplicate name {shown(item.name)}")
            names.append(item.name)
    link_parent = {link.name: link.parent for link in links}
    for kind, items in groups:
        for index, item in enumerate(items):
            if item.parent != BODY and item.parent not in link_parent:
                raise ValueError(
                    f"{kind}[{index}].parent: unknown parent {shown(item.parent)} "
                    f"(known: {shown([BODY, *link_parent])})"
                )
    for index, link in enumerate(links):
        seen = {link.name}
        parent = link.parent
        while parent != BODY:
            if parent in seen:
                raise ValueError(f"links[{index}].parent: cycle through {shown(parent)}")
            seen.add(parent)
            parent = link_parent[parent]


def _list(fields: _Fields, key: str) -> list[_Fields]:
    items = fields.raw(key, [])
    if not isinstance(items, list):
        raise ValueError(f"{fields.field(key)}: must be a list")
    return [_Fields(item, f"{fields.field(key)}[{k}]") for k, item in enumerate(items)]


def parse_vehicle(data: Any) -> Vehicle:
    """Validate a vehicle description already read from YAML (a dict)."""
    top = _Fields(data, "")
    body_fields = top.sub("body")
    body = _rigid_body(body_fields)
    drag = _drag(body_fields.sub("drag") if body_fields.has("drag") else None)
    body_fields.finish()
    links = [_link(f) for f in _list(top, "links")]
    rotors = [_rotor(f) for f in _list(top, "rotors")]
    if not rotors:
        raise ValueError("rotors: a vehicle needs at least one rotor")
    _check_tree(links, rotors)
    vehicle = Vehicle(
        name=top.name("name"),
        gravity=top.number("gravity", 9.81, minimum=0.0),
        air_density=top.number("air_density", 1.225, minimum=0.0),
        body=body,
        drag=drag,
        links=tuple(links),
        rotors=tuple(rotors),
        gains=_gains(top.sub("controller")) if top.has("controller") else None,
    )
    top.raw("description", "")
    top.finish()
    _check_hover(vehicle)
    return vehicle


def _check_hover(vehicle: Vehicle) -> None:
    """A vehicle whose rotors at full speed cannot carry its weight: an error, or a warning
    when it has wings (a glider or a tail-sitter may mean it)."""
    thrust = sum(r.thrust_coefficient * r.speed_max**2 for r in vehicle.rotors)
    weight = vehicle.total_mass * vehicle.gravity
    if thrust >= weight:
        return
    message = (f"rotors: the largest total thrust {thrust:.4g} N (thrust_coefficient * "
               f"speed_max^2 summed) is below the weight {weight:.4g} N: it cannot hover")
    if any(link.aero is not None for link in vehicle.links):
        warnings.warn(f"{vehicle.name}: {message} (it has wings: accepted)", stacklevel=3)
        return
    raise ValueError(message)


def parse_controller_gains(data: Any) -> ControllerGains:
    """Validate a ``controller`` block: position, velocity, attitude, angular_rate (3 each)."""
    return _gains(_Fields(data, "controller"))


def load_controller_gains(path: str | Path) -> ControllerGains:
    """Gains from a parameter file holding a top-level ``controller`` mapping."""
    path = Path(path)
    _, data = read_yaml(path, "vehicle", ValueError)
    try:
        if not isinstance(data, dict) or "controller" not in data:
            raise ValueError("controller: required field is missing")
        return parse_controller_gains(data["controller"])
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from error


def load_vehicle(path: str | Path) -> Vehicle:
    """Read and validate a vehicle YAML file; errors name the file and the field."""
    path = Path(path)
    _, data = read_yaml(path, "vehicle", ValueError)
    try:
        return parse_vehicle(data)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from error

