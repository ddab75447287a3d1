"""LocalGeodetic (trident_ekf.core.earth) against the exact conversion (pymap3d): the error
bounds its docstring gives, anywhere on Earth and for any displacement inside the anchor's
sphere, and a fresh exact conversion once the point has left it."""

from __future__ import annotations

import math

import numpy as np
import pymap3d
from hypothesis import given
from hypothesis import strategies as st

from trident_ekf.core.earth import SEMI_MAJOR_AXIS, LocalGeodetic, geodetic_to_ecef

RADIUS_M = 50.0
# Bounds from the docstring with the polar radius (the smallest radius of curvature is
# b^2/a, 6.34e6 m) and a 10 % margin.
SMALLEST_CURVATURE_RADIUS_M = 6.33e6
ANGLE_BOUND_DEG = math.degrees(1.1 * RADIUS_M / SMALLEST_CURVATURE_RADIUS_M)
HEIGHT_BOUND_M = 1.1 * RADIUS_M**2 / (2.0 * SMALLEST_CURVATURE_RADIUS_M)


def _exact(position: np.ndarray) -> tuple[float, float, float]:
    latitude, longitude, height = pymap3d.ecef2geodetic(*position)
    return float(latitude), float(longitude), float(height)


@given(latitude=st.floats(-89.0, 89.0), longitude=st.floats(-180.0, 180.0),
       height=st.floats(-400.0, 20_000.0),
       step=st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3),
       fraction=st.floats(0.0, 1.0))
def test_inside_the_sphere_the_errors_stay_within_the_stated_bounds(
        latitude, longitude, height, step, fraction):
    anchor = geodetic_to_ecef(latitude, longitude, height)
    local = LocalGeodetic(RADIUS_M)
    assert local(anchor) == _exact(anchor)  # the first call converts exactly
    direction = np.array(step)
    norm = float(np.linalg.norm(direction))
    offset = direction / norm * fraction * RADIUS_M if norm > 1e-6 else np.zeros(3)
    near = anchor + offset
    approximate, exact = local(near), _exact(near)
    assert abs(approximate[0] - exact[0]) <= ANGLE_BOUND_DEG
    # Longitude error scales with 1/cos(latitude) (meridians converge): compare east metres.
    east_m = math.radians(approximate[1] - exact[1]) * math.cos(math.radians(exact[0])) \
        * SEMI_MAJOR_AXIS
    assert abs(east_m) <= 1.1 * RADIUS_M * SEMI_MAJOR_AXIS / SMALLEST_CURVATURE_RADIUS_M
    assert abs(approximate[2] - exact[2]) <= HEIGHT_BOUND_M


def test_leaving_the_sphere_converts_exactly_and_moves_the_anchor():
    local = LocalGeodetic(RADIUS_M)
    start = geodetic_to_ecef(47.3977, 8.5456, 488.0)
    local(start)
    east = np.array([-math.sin(math.radians(8.5456)), math.cos(math.radians(8.5456)), 0.0])
    far = start + 2.0 * RADIUS_M * east
    assert local(far) == _exact(far)
    back_near_far = far + 0.5 * RADIUS_M * east
    assert local(back_near_far) != _exact(back_near_far)  # inside the new sphere: local
    assert abs(local(back_near_far)[2] - _exact(back_near_far)[2]) <= HEIGHT_BOUND_M
