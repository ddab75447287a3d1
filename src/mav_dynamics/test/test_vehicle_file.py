"""Vehicle files: every shipped file loads; bad files are rejected naming the field."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import yaml

from mav_dynamics.closed_form import QuadrotorParameters
from mav_dynamics.controller import TrackingController
from mav_dynamics.model import TreeModel
from mav_dynamics.vehicle_file import load_controller_gains, load_vehicle, parse_vehicle

VEHICLES = Path(__file__).resolve().parents[3] / "config" / "vehicles"
SHIPPED = sorted(VEHICLES.glob("*.yaml"))
REQUIRED = {
    "quadrotor_plus", "quadrotor_x", "hexarotor", "tilted_hexarotor", "tilting_quadrotor",
    "quadrotor_two_wings", "quadrotor_four_tilting_wings",
}


def test_every_required_vehicle_is_shipped() -> None:
    assert {path.stem for path in SHIPPED} >= REQUIRED


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_vehicle_loads_with_consistent_numbers(path: Path) -> None:
    vehicle = load_vehicle(path)
    assert vehicle.name == path.stem
    for rotor in vehicle.rotors:
        assert np.isclose(np.linalg.norm(rotor.thrust_axis), 1.0)
        assert rotor.speed_min < rotor.speed_max
    for link in vehicle.links:
        assert np.all(np.linalg.eigvalsh(link.inertia.inertia) > 0.0)
    spatial = vehicle.body.spatial()
    assert np.allclose(spatial, spatial.T)
    assert np.all(np.linalg.eigvalsh(spatial) > 0.0)


def _quad() -> dict:
    return QuadrotorParameters().vehicle_data()


def _winged() -> dict:
    return yaml.safe_load((VEHICLES / "quadrotor_four_tilting_wings.yaml").read_text())


def _set(data: dict, path: tuple, value: object) -> dict:
    data = copy.deepcopy(data)
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


_DELETE = object()

BAD_QUAD = [
    (("body", "inertia"), [0.01, -0.01, 0.02], "body.inertia", "positive definite"),
    (("body", "inertia"), [[0.01, 0.02, 0.0], [0.02, 0.01, 0.0], [0.0, 0.0, 0.02]],
     "body.inertia", "positive definite"),
    (("body", "inertia"), [[0.01, 0.001, 0.0], [0.0, 0.01, 0.0], [0.0, 0.0, 0.02]],
     "body.inertia", "symmetric"),
    (("body", "inertia"), [0.01, 0.01, 0.03], "body.inertia", "triangle inequality"),
    (("rotors", 0, "inertia"), [1e-5, 1e-5, 3e-5], "rotors[0].inertia", "triangle inequality"),
    (("rotors",), [{**r, "speed_limits": [10.0, 100.0]} for r in _quad()["rotors"]],
     "rotors", "cannot hover"),
    (("body", "mass"), 0.0, "body.mass", "> 0"),
    (("body", "mass"), float("nan"), "body.mass", "finite"),
    (("body", "com"), [0.0, 0.0], "body.com", "3 numbers"),
    (("body", "inertia"), _DELETE, "body.inertia", "missing"),
    (("rotors", 2, "thrust_axis"), [0.0, 0.0, 1.2], "rotors[2].thrust_axis", "unit"),
    (("rotors", 1, "position"), [0.0, float("inf"), 0.0], "rotors[1].position[1]", "finite"),
    (("rotors", 0, "parent"), "wing_9", "rotors[0].parent", "unknown parent"),
    (("rotors", 0, "spin"), "left", "rotors[0].spin", "'ccw' or 'cw'"),
    (("rotors", 3, "speed_limits"), [900.0, 100.0], "rotors[3].speed_limits", "min < max"),
    (("rotors", 3, "thrust_coefficient"), "big", "rotors[3].thrust_coefficient", "number"),
    (("rotors", 1, "name"), "rotor_1", "rotors[1].name", "duplicate"),
    (("rotors", 1, "thrust_coeficient"), 1e-5, "rotors[1].thrust_coeficient", "unknown field"),
    (("rotors",), [], "rotors", "at least one rotor"),
    (("controller", "attitude"), [1.0, 0.0, 1.0], "controller.attitude", "> 0"),
    (("gravity",), True, "gravity", "number"),
]


@pytest.mark.parametrize(("path", "value", "field", "reason"), BAD_QUAD,
                         ids=[f"{c[2]}-{c[3]}" for c in BAD_QUAD])
def test_bad_quadrotor_field_is_rejected_by_name(path, value, field, reason) -> None:
    with pytest.raises(ValueError, match="^" + field.replace("[", r"\[").replace("]", r"\]")
                       + r": .*" + reason.replace("(", r"\(")):
        parse_vehicle(_set(_quad(), path, value))


BAD_WINGED = [
    (("links", 1, "joint", "axis"), [0.0, 0.9, 0.0], "links[1].joint.axis", "unit"),
    (("links", 2, "joint", "limits"), [0.5, -0.5], "links[2].joint.limits", "min < max"),
    (("links", 0, "orientation"), [0.0, 0.0, 0.0, 2.0], "links[0].orientation", "unit"),
    (("links", 3, "parent"), "wing_4", "links[3].parent", "cycle"),
    (("links", 0, "aero", "alpha_deg"), [0.0, 10.0, 5.0], "links[0].aero.alpha_deg",
     "increasing"),
    (("links", 0, "aero", "convention"), "body", "links[0].aero.convention", "one of"),
    (("links", 0, "aero", "coefficients", "CL"), [0.1, 0.2], "links[0].aero.coefficients.CL",
     "list of 25"),
    (("links", 0, "aero", "area"), -0.1, "links[0].aero.area", "> 0"),
    (("links", 1, "inertia"), [1e-4, 1e-4, float("nan")], "links[1].inertia[2]", "finite"),
]


@pytest.mark.parametrize(("path", "value", "field", "reason"), BAD_WINGED,
                         ids=[f"{c[2]}-{c[3]}" for c in BAD_WINGED])
def test_bad_link_field_is_rejected_by_name(path, value, field, reason) -> None:
    with pytest.raises(ValueError, match="^" + field.replace("[", r"\[").replace("]", r"\]")
                       + r": .*" + reason):
        parse_vehicle(_set(_winged(), path, value))


def test_a_winged_vehicle_that_cannot_hover_is_accepted_with_a_warning() -> None:
    """A glider or a tail-sitter may mean it: the thrust check warns instead of refusing."""
    data = _winged()
    slow = {**data, "rotors": [{**r, "speed_limits": [10.0, 50.0]} for r in data["rotors"]]}
    with pytest.warns(UserWarning, match="cannot hover .*it has wings"):
        parse_vehicle(slow)


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_set(_quad(), ("body", "mass"), -1.0)))
    with pytest.raises(ValueError, match=r"bad\.yaml: body\.mass: must be > 0"):
        load_vehicle(bad)
    broken = tmp_path / "broken.yaml"
    broken.write_text("body: [unclosed")
    with pytest.raises(ValueError, match=r"broken\.yaml: not valid YAML"):
        load_vehicle(broken)
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="must be a mapping"):
        load_vehicle(listed)


def test_parsed_quadrotor_keeps_the_numbers() -> None:
    params = QuadrotorParameters()
    vehicle = parse_vehicle(params.vehicle_data())
    assert vehicle.total_mass == pytest.approx(params.total_mass)
    assert [r.spin for r in vehicle.rotors] == [-1, 1, -1, 1]
    assert np.allclose(vehicle.rotors[0].position, [-params.arm, 0.0, 0.0])


def test_gains_may_come_from_a_parameter_file(tmp_path: Path) -> None:
    data = _quad()
    del data["controller"]
    model = TreeModel(parse_vehicle(data))
    with pytest.raises(ValueError, match="no gains"):
        TrackingController(model)
    params = tmp_path / "controller.yaml"
    params.write_text(yaml.safe_dump({"controller": {
        "position": [2.0, 2.0, 3.0], "velocity": [3.0, 3.0, 4.0],
        "attitude": [100.0, 100.0, 40.0], "angular_rate": [20.0, 20.0, 10.0]}}))
    gains = load_controller_gains(params)
    assert np.allclose(TrackingController(model, gains).gains.position, [2.0, 2.0, 3.0])
    params.write_text(yaml.safe_dump({"controller": {"position": [1.0, 1.0]}}))
    with pytest.raises(ValueError, match=r"controller\.position: must be a list of 3"):
        load_controller_gains(params)
