"""Analytic Jacobians of the base acceleration against central finite differences (§6 test 25)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from mav_dynamics.derivatives import Linearizer, bar_ad
from mav_dynamics.model import TreeModel
from mav_dynamics.vehicle_file import parse_vehicle
from mav_geometry.groups import SE3, SO3

VEHICLES = Path(__file__).resolve().parents[3] / "config" / "vehicles"
STEP = 1e-6


def _model(name: str) -> TreeModel:
    """A shipped vehicle without body drag, body frame moved off the COM (coupled G_T)."""
    data = yaml.safe_load((VEHICLES / f"{name}.yaml").read_text())
    data["body"].pop("drag", None)
    data["body"]["com"] = [0.02, -0.01, 0.03]
    return TreeModel(parse_vehicle(data))


def _central(function, x: np.ndarray, step: float) -> np.ndarray:
    return np.column_stack([(function(x + step * e) - function(x - step * e)) / (2 * step)
                            for e in np.eye(x.size)])


def test_bar_ad_swaps_the_arguments_of_ad_transpose() -> None:
    rng = np.random.default_rng(0)
    twist, wrench = rng.normal(size=6), rng.normal(size=6)
    assert np.allclose(SE3.ad(twist).T @ wrench, bar_ad(wrench) @ twist, atol=1e-14)


@pytest.mark.parametrize("name", ["quadrotor_x", "hexarotor", "tilted_hexarotor",
                                  "tilting_quadrotor"])
def test_jacobians_match_finite_differences_of_the_tree_model(name: str) -> None:
    model = _model(name)
    linearizer = Linearizer(model)
    rng = np.random.default_rng(3)
    rotation, twist = SO3.exp(rng.normal(size=3)), rng.normal(size=6)
    speeds = rng.uniform(400.0, 600.0, model.rotor_count)
    tilt = rng.uniform(-0.4, 0.4, model.tilt_count) if model.tilt_count else None

    def accel(rotation=rotation, twist=twist, speeds=speeds, tilt=tilt):
        return model.evaluate(rotation, twist, speeds, tilt_angles=tilt,
                              torques=False).base_acceleration

    lin = linearizer.linearize(rotation, twist, speeds, tilt)
    assert np.allclose(lin.acceleration, accel(), rtol=1e-10, atol=1e-10)
    assert np.allclose(lin.twist, _central(lambda v: accel(twist=v), twist, STEP), atol=1e-6)
    pose = _central(lambda xi: accel(rotation=rotation @ SO3.exp(xi[:3])), np.zeros(6), STEP)
    assert np.allclose(lin.pose, pose, atol=1e-6)
    assert np.abs(lin.pose).max() > 1.0                           # gravity turns with the body
    speed = _central(lambda w: accel(speeds=w), speeds, 1e-4)
    assert np.allclose(lin.rotor_speeds, speed, rtol=1e-6, atol=1e-8)
    if tilt is not None:
        tilt_fd = _central(lambda p: accel(tilt=p), tilt, STEP)
        assert np.allclose(lin.tilt_angles, tilt_fd, rtol=1e-6, atol=1e-6)
        assert np.abs(lin.tilt_angles).max() > 1.0


def test_linearization_rejects_nested_tilting_links() -> None:
    data = yaml.safe_load((VEHICLES / "tilting_quadrotor.yaml").read_text())
    data["links"][1]["parent"] = "tilt_1"
    with pytest.raises(ValueError, match="jointed to the body"):
        Linearizer(TreeModel(parse_vehicle(data)))
