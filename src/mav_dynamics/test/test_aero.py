"""Wing aerodynamics: frame checks of mav-screw-theory.md §5.6 / §6 test 24, (53) erratum."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mav_dynamics.aero import WingModel, air_angles, body_drag_wrench, wind_rotation
from mav_dynamics.model import TreeModel
from mav_dynamics.vehicle import WIND_AXES, WING_AXES, BodyDrag, WingAerodynamics
from mav_dynamics.vehicle_file import load_vehicle
from mav_geometry.groups import SO3

VEHICLES = Path(__file__).resolve().parents[3] / "config" / "vehicles"
VELOCITY = np.array([12.0, 1.0, -2.0])
RHO, AREA = 1.225, 0.2
WIND_COEFFICIENTS = {"CD": 0.08, "CC": 0.02, "CL": 0.6}


def _wing(convention: str, forces: tuple[float, float, float],
          moments: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> WingModel:
    """A wing whose coefficients are constant in alpha (two table rows)."""
    row = np.array([*moments, *forces])
    aero = WingAerodynamics(
        area=AREA, chord=0.2, span=1.0, position=np.zeros(3), orientation=np.array([0, 0, 0, 1.0]),
        convention=convention, alpha_deg=np.array([-180.0, 180.0]),
        coefficients=np.vstack([row, row]), sideslip_slopes=np.zeros(6))
    return WingModel(aero, RHO)


def test_corrected_wind_rotation_aligns_x_with_the_air_velocity() -> None:
    speed, alpha, beta = air_angles(VELOCITY)
    assert alpha > 0.0
    assert beta < 0.0
    assert np.allclose(wind_rotation(alpha, beta).T @ VELOCITY, [speed, 0.0, 0.0], atol=1e-12)
    # the printed (53), Rot(y, -alpha) Rot(z, beta) read as active rotations, does not
    printed = SO3.exp(np.array([0.0, -alpha, 0.0])) @ SO3.exp(np.array([0.0, 0.0, beta]))
    assert np.linalg.norm(printed.T @ VELOCITY - [speed, 0.0, 0.0]) > 1.0


def test_drag_opposes_the_air_velocity_and_lift_is_normal_to_it() -> None:
    c = WIND_COEFFICIENTS
    wrench = _wing(WIND_AXES, (c["CD"], c["CC"], c["CL"])).wrench_aero_frame(
        np.concatenate([np.zeros(3), VELOCITY]))
    speed = np.linalg.norm(VELOCITY)
    dynamic = 0.5 * RHO * AREA * speed**2
    assert wrench[3:] @ VELOCITY / speed == pytest.approx(-dynamic * c["CD"], rel=1e-12)
    assert np.linalg.norm(wrench[3:]) == pytest.approx(
        dynamic * np.linalg.norm([c["CD"], c["CC"], c["CL"]]), rel=1e-12)
    assert wrench[5] > 0.0                                     # lift up for a positive alpha
    assert np.allclose(wrench[:3], 0.0)


def test_wing_and_wind_axes_formulations_agree() -> None:
    """(51)-(52) with (C_A, C_Y, C_N) = R (-C_D, C_C, C_L) equals (55)-(57)."""
    c = WIND_COEFFICIENTS
    moments = (0.01, -0.03, 0.02)
    wind_model = _wing(WIND_AXES, (c["CD"], c["CC"], c["CL"]), moments)
    _, alpha, beta = air_angles(VELOCITY)
    rotation = wind_rotation(alpha, beta)
    forces = rotation @ np.array([-c["CD"], c["CC"], c["CL"]])
    scale = np.array([1.0, 0.2, 1.0])                           # span, chord, span
    wing_moments = rotation @ (np.array(moments) * scale) / scale
    wing_model = _wing(WING_AXES, tuple(forces), tuple(wing_moments))
    twist = np.concatenate([np.zeros(3), VELOCITY])
    assert np.allclose(wind_model.wrench_aero_frame(twist), wing_model.wrench_aero_frame(twist),
                       rtol=1e-12, atol=1e-12)


def test_no_air_speed_no_wrench_and_aero_frame_offsets_move_the_moment() -> None:
    model = _wing(WIND_AXES, (0.1, 0.0, 0.5))
    assert np.allclose(model.wrench_aero_frame(np.zeros(6)), 0.0)
    aero = model.aero
    shifted = WingModel(WingAerodynamics(**{**aero.__dict__, "position": np.array([0.1, 0, 0])}),
                        RHO)
    # same air velocity at the aero origin (no rotation): same force, moment gains r x f
    link_twist = np.concatenate([np.zeros(3), VELOCITY])
    base, moved = model.wrench_link_frame(link_twist), shifted.wrench_link_frame(link_twist)
    assert np.allclose(moved[3:], base[3:])
    assert np.allclose(moved[:3], np.cross([0.1, 0.0, 0.0], base[3:]))


@pytest.mark.parametrize("name", ["quadrotor_two_wings", "quadrotor_four_tilting_wings"])
def test_uniform_wind_is_equivalent_to_the_opposite_vehicle_velocity(name: str) -> None:
    """Galilean check: wind v_w plus vehicle velocity +v_w changes nothing (no rotation)."""
    model = TreeModel(load_vehicle(VEHICLES / f"{name}.yaml"))
    rng = np.random.default_rng(2)
    rotation = SO3.exp(rng.normal(size=3) * 0.3)
    wind = np.array([5.0, -2.0, 1.0])
    twist = np.concatenate([np.zeros(3), rng.normal(size=3) * 3])
    kwargs = {"rotor_speeds": rng.uniform(400, 600, 4),
              "rotor_accelerations": rng.normal(size=4) * 30}
    if model.tilt_count:
        kwargs |= {"tilt_angles": rng.uniform(-0.4, 0.4, 4), "tilt_rates": rng.normal(size=4)}
    still_air = model.evaluate(rotation, twist, **kwargs)
    windy = model.evaluate(rotation, twist + np.concatenate([np.zeros(3), rotation.T @ wind]),
                           wind=wind, **kwargs)
    assert np.allclose(windy.base_acceleration, still_air.base_acceleration, atol=1e-9)
    calm = model.evaluate(rotation, twist, **kwargs, wind=np.zeros(3))
    headwind = model.evaluate(rotation, twist, **kwargs, wind=wind)
    assert np.abs(headwind.base_acceleration - calm.base_acceleration).max() > 1e-2


def test_body_drag_opposes_the_air_relative_twist() -> None:
    drag = BodyDrag(np.full(6, 0.1), np.full(6, 0.02))
    twist = np.array([0.5, -1.0, 0.2, 3.0, -2.0, 1.0])
    wrench = body_drag_wrench(drag, twist)
    assert np.all(wrench * twist < 0.0)
    assert np.allclose(wrench, -0.1 * twist - 0.02 * np.abs(twist) * twist)


def test_coefficient_tables_interpolate_linearly_and_clamp() -> None:
    model = TreeModel(load_vehicle(VEHICLES / "quadrotor_two_wings.yaml"))
    wing = model.wings[0][1]
    grid = np.deg2rad(wing.aero.alpha_deg)
    for alpha in [*np.random.default_rng(0).uniform(-np.pi, np.pi, 20), grid[0], grid[-1],
                  grid[3], -4.0, 4.0]:
        expected = [np.interp(alpha, grid, wing.aero.coefficients[:, k]) for k in range(6)]
        assert np.allclose(wing.coefficients(alpha, 0.0), expected, atol=1e-14)
    slopes = wing.coefficients(0.2, 0.1) - wing.coefficients(0.2, 0.0)
    assert np.allclose(slopes, 0.1 * wing.aero.sideslip_slopes)
