"""Load and validate a mechanism YAML file; every error names the offending field.

Layout (units SI, vectors in the frame of the body they belong to)::

    name: fly_hopper
    gravity: [0, 0, -9.807]            # world, m/s^2 (optional)
    bodies:
      - {name: base, mass: 7.0, inertia: [[...], [...], [...]]}   # kg, kg m^2 about CoM
    joints:
      - {name: hip0, type: revolute, parent: base, child: link0,
         parent_point: [..], child_point: [..], axis: [0, 1, 0],
         orientation: [0, 0, 0, 1],      # optional, child in parent at zero angle
         point_directions: [[1, 0, 0], [0, 0, 1]]}   # optional, parent frame
    actuators:
      - {name: hip0_motor, joint: hip0, peak_torque: 50.0, no_load_speed: 40.0}
    contacts:
      - {name: foot, body: link3, point: [..], radius: 0.025, friction: 0.5}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mav_geometry.arrays import FloatArray
from mav_geometry.shown import shown
from mav_geometry.yaml_file import read_yaml
from variational_sim.multibody.mechanism import (
    JOINT_TYPES,
    Actuator,
    Body,
    Contact,
    Joint,
    Mechanism,
)


class MechanismFileError(ValueError):
    """A mechanism description is invalid; the message names the field."""


def _field(entry: dict[str, Any], key: str, where: str, default: Any = None) -> Any:
    if key in entry:
        return entry[key]
    if default is None:
        raise MechanismFileError(f"{where}.{key}: missing")
    return default


def _has_shape(value: Any, shape: tuple[int, ...]) -> bool:
    """Whether nested lists have ``shape``, checked before numpy copies them (a YAML alias
    can make a list of billions of items out of a few lines)."""
    if isinstance(value, np.ndarray):
        return bool(value.shape == shape)
    if not shape:
        return not isinstance(value, list | tuple | dict)
    return (isinstance(value, list | tuple) and len(value) == shape[0]
            and all(_has_shape(item, shape[1:]) for item in value))


def _array(value: Any, shape: tuple[int, ...], where: str) -> FloatArray:
    if not _has_shape(value, shape):
        raise MechanismFileError(f"{where}: expected {shape} finite numbers, got {shown(value)}")
    try:
        array = np.array(value, dtype=float)
    except (TypeError, ValueError, OverflowError) as error:
        raise MechanismFileError(f"{where}: not numeric ({shown(value)})") from error
    if not np.all(np.isfinite(array)):
        raise MechanismFileError(f"{where}: expected {shape} finite numbers, got {shown(value)}")
    return array


def _number(value: Any, where: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError) as error:
        raise MechanismFileError(f"{where}: not a number ({shown(value)})") from error


def _positive(value: Any, where: str, allow_infinite: bool = False) -> float:
    number = _number(value, where)
    if not number > 0.0 or (np.isinf(number) and not allow_infinite):
        raise MechanismFileError(f"{where}: must be a positive number, got {shown(value)}")
    return number


def _name(entry: dict[str, Any], key: str, where: str) -> str:
    value = _field(entry, key, where)
    if isinstance(value, dict | list):
        raise MechanismFileError(f"{where}.{key}: must be a name, got {shown(value)}")
    return str(value)


def _unit(value: Any, size: int, where: str) -> FloatArray:
    array = _array(value, (size,), where)
    norm = float(np.linalg.norm(array))
    if not 0.5 < norm < 2.0:
        raise MechanismFileError(f"{where}: must be a unit vector, got norm {norm:.3g}")
    return array / norm


def _label(entry: dict[str, Any], default: str = "?") -> str:
    """An entry's name for messages: cut, and only if it is a name."""
    name = entry.get("name", default)
    return name[:60] if isinstance(name, str) else shown(name)


def _body(entry: dict[str, Any], where: str) -> Body:
    name = _name(entry, "name", where)
    mass = _positive(_field(entry, "mass", where), f"{where}.mass")
    inertia = _array(_field(entry, "inertia", where), (3, 3), f"{where}.inertia")
    if not np.allclose(inertia, inertia.T, rtol=1e-9, atol=1e-15):
        raise MechanismFileError(f"{where}.inertia: must be symmetric")
    if np.linalg.eigvalsh(inertia)[0] <= 0.0:
        raise MechanismFileError(f"{where}.inertia: must be positive definite")
    return Body(name, mass, inertia)


def _joint(entry: dict[str, Any], where: str) -> Joint:
    kind = _name(entry, "type", where)
    if kind not in JOINT_TYPES:
        raise MechanismFileError(f"{where}.type: must be one of {JOINT_TYPES}, got "
                                 f"{shown(kind)}")
    rows = _field(entry, "point_directions", where, np.eye(3).tolist())
    if not isinstance(rows, list) or not 1 <= len(rows) <= 3:
        raise MechanismFileError(f"{where}.point_directions: needs 1 to 3 rows")
    directions = _array(rows, (len(rows), 3), f"{where}.point_directions")
    directions = np.array(
        [_unit(row, 3, f"{where}.point_directions[{i}]") for i, row in enumerate(directions)]
    )
    return Joint(
        name=_name(entry, "name", where),
        type=kind,
        parent=_name(entry, "parent", where),
        child=_name(entry, "child", where),
        parent_point=_array(_field(entry, "parent_point", where), (3,), f"{where}.parent_point"),
        child_point=_array(_field(entry, "child_point", where), (3,), f"{where}.child_point"),
        axis=_unit(_field(entry, "axis", where, [0.0, 1.0, 0.0]), 3, f"{where}.axis"),
        orientation=_unit(
            _field(entry, "orientation", where, [0.0, 0.0, 0.0, 1.0]), 4, f"{where}.orientation"
        ),
        point_directions=directions,
    )


def _actuator(entry: dict[str, Any], where: str) -> Actuator:
    return Actuator(
        name=_name(entry, "name", where),
        joint=_name(entry, "joint", where),
        peak_torque=_positive(
            _field(entry, "peak_torque", where, float("inf")), f"{where}.peak_torque", True
        ),
        no_load_speed=_positive(
            _field(entry, "no_load_speed", where, float("inf")), f"{where}.no_load_speed", True
        ),
    )


def _contact(entry: dict[str, Any], where: str) -> Contact:
    friction = _number(_field(entry, "friction", where), f"{where}.friction")
    if not friction >= 0.0:
        raise MechanismFileError(f"{where}.friction: must be >= 0, got {friction!r}")
    return Contact(
        name=_name(entry, "name", where),
        body=_name(entry, "body", where),
        point=_array(_field(entry, "point", where), (3,), f"{where}.point"),
        radius=_positive(_field(entry, "radius", where), f"{where}.radius"),
        friction=friction,
    )


def _entries(document: dict[str, Any], key: str, required: bool) -> list[dict[str, Any]]:
    value = document.get(key)
    if value is None:
        if required:
            raise MechanismFileError(f"{key}: missing")
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise MechanismFileError(f"{key}: must be a list of mappings")
    return value


def mechanism_from_dict(document: Any) -> Mechanism:
    """Build a validated ``Mechanism`` from a parsed YAML document."""
    if not isinstance(document, dict):
        raise MechanismFileError("document: must be a mapping")
    builders = {"bodies": _body, "joints": _joint, "actuators": _actuator, "contacts": _contact}
    parts = {
        key: tuple(
            build(entry, f"{key}[{i}]({_label(entry)})")
            for i, entry in enumerate(_entries(document, key, key in ("bodies", "joints")))
        )
        for key, build in builders.items()
    }
    gravity = _array(document.get("gravity", [0.0, 0.0, -9.807]), (3,), "gravity")
    try:
        return Mechanism(
            name=_label(document, "mechanism"),
            gravity=gravity,
            **parts,  # type: ignore[arg-type]
        )
    except (ValueError, KeyError) as error:  # names in it are the file's: cut
        raise MechanismFileError(str(error)[:300]) from error


def load_mechanism(path: str | Path) -> Mechanism:
    """Read a mechanism YAML file (see the module docstring for the layout)."""
    _, document = read_yaml(path, "mechanism", MechanismFileError)
    try:
        return mechanism_from_dict(document)
    except MechanismFileError as error:
        raise MechanismFileError(f"{path}: {error}") from error
