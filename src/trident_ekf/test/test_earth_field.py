"""The Earth's magnetic field (trident_ekf.core.earth_field) against NOAA's published World
Magnetic Model test values (WMM2010, WMM2015v2, WMM2020, WMM2025), the choice of model by date,
the field elements <-> NED conversions, decimal years and input checks."""

from __future__ import annotations

import calendar
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trident_ekf.core import earth_field
from trident_ekf.core.earth_field import (
    decimal_year,
    field_elements,
    field_from_elements,
    wmm_field_ned,
    wmm_model_name,
)

NT = 1e-9  # T
# The tables print components to 0.1 nT and angles to 0.01 deg: one unit of the last digit.
TOL_NT = 0.1
TOL_DEG = 0.01

# Rows: (decimal year, height above the WGS-84 ellipsoid km, geodetic latitude deg,
#        longitude deg, X north nT, Y east nT, Z down nT, I deg, D deg).

# WMM2025: the 12 test points of NOAA NCEI's WMM2025_TEST_VALUES.txt (shipped with the WMM2025
# coefficients, https://www.ncei.noaa.gov/products/world-magnetic-model; the same table is in
# "The US/UK World Magnetic Model for 2025-2030: Technical Report", NOAA NCEI / BGS, 2024).
WMM2025 = [
    (2025.0, 0, 80, 0, 6521.6, 145.9, 54791.5, 83.21, 1.28),
    (2025.0, 0, 0, 120, 39677.8, -109.6, -10580.2, -14.93, -0.16),
    (2025.0, 0, -80, 240, 6117.5, 15751.9, -52022.5, -72.00, 68.78),
    (2025.0, 100, 80, 0, 6216.0, 92.4, 52598.8, 83.26, 0.85),
    (2025.0, 100, 0, 120, 37688.6, -96.2, -10152.1, -15.08, -0.15),
    (2025.0, 100, -80, 240, 5907.6, 14780.3, -49540.7, -72.19, 68.21),
    (2027.5, 0, 80, 0, 6500.8, 294.5, 54869.4, 83.24, 2.59),
    (2027.5, 0, 0, 120, 39701.6, -167.4, -10381.8, -14.65, -0.24),
    (2027.5, 0, -80, 240, 6200.7, 15730.3, -51783.7, -71.92, 68.49),
    (2027.5, 100, 80, 0, 6196.7, 233.8, 52670.5, 83.29, 2.16),
    (2027.5, 100, 0, 120, 37711.5, -148.7, -9969.8, -14.81, -0.23),
    (2027.5, 100, -80, 240, 5984.0, 14760.1, -49317.7, -72.10, 67.93),
]

# WMM2020: 14 of the 100 points of NOAA NCEI's WMM2020_TEST_VALUES.txt (shipped with the
# WMM2020 coefficients and software, https://www.ncei.noaa.gov/products/world-magnetic-model),
# spread over 2020.0-2024.5, heights 0-98 km, both poles' regions (H down to 598 nT) and the
# date line.
WMM2020 = [
    (2020.0, 28, 89, -121, -575.7, -1396.0, 56082.3, 88.46, -112.41),
    (2020.0, 65, 43, 93, 24375.3, 303.2, 49691.4, 63.87, 0.71),
    (2020.0, 51, -33, 109, 21556.3, -2183.2, -52676.0, -67.64, -5.78),
    (2020.5, 50, -70, -133, 8943.1, 13981.7, -51628.5, -72.18, 57.40),
    (2021.0, 83, 86, -46, 2408.8, -1796.2, 54184.7, 86.83, -36.71),
    (2021.5, 12, -79, 115, -9403.6, -8972.3, -58271.0, -77.43, -136.34),
    (2022.0, 54, 54, 178, 20624.8, 514.8, 45076.8, 65.41, 1.43),
    (2022.5, 98, -5, 159, 33613.6, 4601.1, -14426.9, -23.04, 7.79),
    (2022.5, 0, -13, -59, 21797.3, -6520.6, -5425.9, -13.41, -16.65),
    (2023.0, 75, 79, 125, 2605.8, -676.0, 57085.9, 87.30, -14.54),
    (2023.5, 11, 34, 0, 29033.7, 545.3, 30807.0, 46.69, 1.08),
    (2024.0, 50, 87, -154, 80.9, -592.4, 55904.6, 89.39, -82.22),
    (2024.5, 33, 17, 5, 34060.9, 362.9, 8230.6, 13.58, 0.61),
    (2024.5, 77, -18, 138, 31722.0, 2569.6, -34986.2, -47.71, 4.63),
]

# WMM2015v2 (the 2018 re-release): NOAA's WMM2015v2testvalues.pdf
# (https://www.ngdc.noaa.gov/geomag/WMM/data/WMM2015/WMM2015v2testvalues.pdf; transcribed in
# pygeomag's repository, test/test_values/WMM2015v2testvalues.txt). The 2017.5 rows tell v2
# from the original WMM2015, which differs there by tens of nT.
WMM2015V2 = [
    (2015.0, 0, 80, 0, 6636.6, -451.9, 54408.9, 83.03, -3.90),
    (2015.0, 100, 0, 120, 37538.1, 351.1, -10751.1, -15.98, 0.54),
    (2017.5, 0, 0, 120, 39569.4, 252.3, -11067.9, -15.63, 0.37),
    (2017.5, 0, -80, 240, 5864.6, 15764.1, -52706.1, -72.30, 69.59),
    (2017.5, 100, 80, 0, 6294.3, -331.1, 52337.8, 83.13, -3.01),
]

# WMM2010: NOAA's WMM2010testvalues.pdf
# (https://www.ngdc.noaa.gov/geomag/WMM/data/WMM2010/WMM2010testvalues.pdf; transcribed in
# pygeomag's repository, test/test_values/WMM2010testvalues.txt).
WMM2010 = [
    (2010.0, 0, 80, 0, 6649.5, -714.6, 54346.2, 82.98, -6.13),
    (2010.0, 100, -80, 240, 5484.3, 14762.8, -50834.8, -72.79, 69.62),
    (2012.5, 0, 0, 120, 39423.9, 608.1, -11540.5, -16.31, 0.88),
    (2012.5, 100, 80, 0, 6340.9, -625.1, 52261.9, 83.05, -5.63),
]


def _angle_difference(a: float, b: float) -> float:
    return (a - b + 180.0) % 360.0 - 180.0


@pytest.mark.parametrize(
    ("year", "height_km", "lat", "lon", "x", "y", "z", "inclination", "declination"),
    WMM2025 + WMM2020 + WMM2015V2 + WMM2010,
)
def test_matches_noaa_test_values(year, height_km, lat, lon, x, y, z, inclination, declination):
    field = wmm_field_ned(lat, lon, height_km * 1000.0, year)
    assert field.shape == (3,)
    assert field.dtype == np.float64
    np.testing.assert_allclose(field / NT, [x, y, z], rtol=0.0, atol=TOL_NT)
    d, i, f = field_elements(field)
    assert abs(_angle_difference(d, declination)) <= TOL_DEG
    assert abs(i - inclination) <= TOL_DEG
    assert f == pytest.approx(math.sqrt(x * x + y * y + z * z) * NT, abs=TOL_NT * NT)


def test_longitude_is_wrapped():
    # The tables give 240 E; the same meridian as -120 (and as 600).
    east = wmm_field_ned(-80.0, 240.0, 0.0, 2025.0)
    np.testing.assert_allclose(wmm_field_ned(-80.0, -120.0, 0.0, 2025.0), east, atol=1e-15)
    np.testing.assert_allclose(wmm_field_ned(-80.0, 600.0, 0.0, 2025.0), east, atol=1e-15)


def test_zurich_is_plausible():
    # Zurich in 2020: declination about +3 deg (east), inclination about 63 deg, 48 uT.
    d, i, f = field_elements(wmm_field_ned(47.4, 8.5, 500.0, 2020.0))
    assert 2.0 < d < 4.0
    assert 62.0 < i < 64.5
    assert 47e-6 < f < 49e-6


def test_height_is_in_metres():
    # About -3F/r = -0.023 nT per metre near the ground: 1 km up is some 20-25 nT weaker.
    ground = np.linalg.norm(wmm_field_ned(47.4, 8.5, 0.0, 2022.0))
    one_km = np.linalg.norm(wmm_field_ned(47.4, 8.5, 1000.0, 2022.0))
    assert 15 * NT < ground - one_km < 30 * NT


@pytest.mark.parametrize(
    ("year", "model"),
    [
        (2010.0, "WMM-2010"),
        (2014.999, "WMM-2010"),
        (2015.0, "WMM-2015v2"),
        (2019.999, "WMM-2015v2"),
        (2020.0, "WMM-2020"),
        (2024.999, "WMM-2020"),
        (2025.0, "WMM-2025"),
        (2029.999, "WMM-2025"),
        (2030.0, "WMM-2025"),
    ],
)
def test_model_chosen_by_date(year, model):
    assert wmm_model_name(year) == model
    assert np.all(np.isfinite(wmm_field_ned(10.0, 20.0, 100.0, year)))


def test_models_change_at_the_epochs():
    # Each model's prediction for the end of its life differs from the next model's epoch
    # value by the secular-variation error of five years (tens to ~100 nT), so a jump at the
    # boundary shows that the next model is used from its epoch on.
    for epoch in (2015.0, 2020.0, 2025.0):
        before = wmm_field_ned(0.0, 120.0, 0.0, epoch - 1e-9)
        at = wmm_field_ned(0.0, 120.0, 0.0, epoch)
        assert np.linalg.norm(at - before) > 5 * NT


@pytest.mark.parametrize("year", [2009.999, 2030.001, 1990.0, 2035.0, math.nan, math.inf])
def test_year_outside_the_models_raises(year):
    with pytest.raises(ValueError, match=r"2010\.0-2030\.0.*declination, inclination and"):
        wmm_field_ned(47.4, 8.5, 0.0, year)
    with pytest.raises(ValueError, match=r"2010\.0-2030\.0"):
        wmm_model_name(year)


@pytest.mark.parametrize(
    ("lat", "lon", "height", "match"),
    [
        (90.5, 0.0, 0.0, "latitude_deg.*deg"),
        (math.nan, 0.0, 0.0, "latitude_deg"),
        (0.0, math.inf, 0.0, "longitude_deg"),
        (0.0, 0.0, -1500.0, "height_m.*m above the WGS-84 ellipsoid"),
        (0.0, 0.0, 900e3, "height_m"),
        (0.0, 0.0, math.nan, "height_m"),
    ],
)
def test_bad_position_raises(lat, lon, height, match):
    with pytest.raises(ValueError, match=match):
        wmm_field_ned(lat, lon, height, 2022.0)


def test_geographic_poles_are_finite():
    for lat in (90.0, -90.0):
        field = wmm_field_ned(lat, 0.0, 0.0, 2026.0)
        assert np.all(np.isfinite(field))
        assert 50e-6 < np.linalg.norm(field) < 70e-6


def test_geomag_objects_are_cached():
    wmm_field_ned(0.0, 0.0, 0.0, 2021.0)
    cached = earth_field._GEOMAGS["WMM-2020"]
    wmm_field_ned(10.0, 10.0, 0.0, 2023.0)
    assert earth_field._GEOMAGS["WMM-2020"] is cached


def test_concurrent_calls_agree_with_sequential_ones():
    points = [(lat, lon, 2021.0 + k * 0.1) for k, (lat, lon) in
              enumerate([(-60.0, -170.0), (-20.0, -40.0), (10.0, 30.0), (50.0, 100.0)] * 5)]
    expected = [wmm_field_ned(lat, lon, 0.0, year) for lat, lon, year in points]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(3):
            got = list(pool.map(lambda p: wmm_field_ned(p[0], p[1], 0.0, p[2]), points))
            for a, b in zip(got, expected, strict=True):
                np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- field elements


def test_field_from_elements_by_hand():
    np.testing.assert_allclose(field_from_elements(0.0, 0.0, 5e-5), [5e-5, 0.0, 0.0], atol=1e-20)
    np.testing.assert_allclose(field_from_elements(90.0, 0.0, 5e-5), [0.0, 5e-5, 0.0], atol=1e-20)
    np.testing.assert_allclose(field_from_elements(0.0, 90.0, 5e-5), [0.0, 0.0, 5e-5], atol=1e-20)
    np.testing.assert_allclose(field_from_elements(0.0, -90.0, 5e-5), [0.0, 0.0, -5e-5],
                               atol=1e-20)
    # D = -30 deg (west), I = 60 deg: H = F/2 split as cos/sin of D, Z = F sqrt(3)/2.
    f = 4e-5
    np.testing.assert_allclose(
        field_from_elements(-30.0, 60.0, f),
        [f / 2 * math.sqrt(3) / 2, -f / 4, f * math.sqrt(3) / 2], rtol=1e-14, atol=1e-20,
    )


def test_elements_of_a_table_point_rebuild_it():
    # WMM2025 at 2025.0, 0 km, 80 S, 240 E: the table's D, I, F give back its X, Y, Z
    # (to the 0.01 deg rounding of the angles: 1e-4 rad of 54.7 uT is about 10 nT).
    field = field_from_elements(68.78, -72.00, 54698.2 * NT)
    np.testing.assert_allclose(field / NT, [6117.5, 15751.9, -52022.5], atol=15.0)


@given(
    declination=st.floats(-180.0, 180.0),
    inclination=st.floats(-89.9, 89.9),
    strength=st.floats(1e-7, 9.9e-5),
)
def test_elements_round_trip(declination, inclination, strength):
    field = field_from_elements(declination, inclination, strength)
    assert np.linalg.norm(field) == pytest.approx(strength, rel=1e-12)
    d, i, f = field_elements(field)
    assert abs(_angle_difference(d, declination)) < 1e-9
    assert i == pytest.approx(inclination, abs=1e-9)
    assert f == pytest.approx(strength, rel=1e-12)
    np.testing.assert_allclose(field_from_elements(d, i, f), field, rtol=0.0,
                               atol=1e-12 * strength)


@given(
    north=st.floats(-1e-4, 1e-4),
    east=st.floats(-1e-4, 1e-4),
    down=st.floats(-1e-4, 1e-4),
)
def test_vector_round_trip(north, east, down):
    field = np.array([north, east, down])
    strength = float(np.linalg.norm(field))
    if not 1e-9 < strength < 1e-4:
        return
    d, i, f = field_elements(field)
    assert -180.0 < d <= 180.0
    assert -90.0 <= i <= 90.0
    np.testing.assert_allclose(field_from_elements(d, i, f), field, rtol=0.0,
                               atol=1e-12 * strength)


def test_vertical_field_has_zero_declination():
    assert field_elements([0.0, 0.0, 5e-5]) == (0.0, 90.0, 5e-5)
    assert field_elements([0.0, 0.0, -5e-5]) == (0.0, -90.0, 5e-5)


@pytest.mark.parametrize(
    ("declination", "inclination", "strength", "match"),
    [
        (math.nan, 60.0, 5e-5, r"declination_deg.*deg"),
        (181.0, 60.0, 5e-5, r"declination_deg.*\[-180, 180\] deg"),
        (0.0, 90.5, 5e-5, r"inclination_deg.*\[-90, 90\] deg"),
        (0.0, -91.0, 5e-5, r"inclination_deg"),
        (0.0, math.inf, 5e-5, r"inclination_deg"),
        (0.0, 60.0, 0.0, r"strength_T.*T \(tesla"),
        (0.0, 60.0, -5e-5, r"strength_T"),
        (0.0, 60.0, 48000.0, r"strength_T.*< 0.0001 T"),  # nT typed in
        (0.0, 60.0, 1e-4, r"strength_T"),
        (0.0, 60.0, math.nan, r"strength_T"),
    ],
)
def test_bad_elements_raise(declination, inclination, strength, match):
    with pytest.raises(ValueError, match=match):
        field_from_elements(declination, inclination, strength)


@pytest.mark.parametrize(
    ("field", "match"),
    [
        ([1e-5, 2e-5], "3-vector"),
        ([[1e-5, 2e-5, 3e-5]], "3-vector"),
        ([1e-5, math.nan, 3e-5], "finite"),
        ([0.0, 0.0, 0.0], "zero"),
    ],
)
def test_bad_field_vector_raises(field, match):
    with pytest.raises(ValueError, match=match):
        field_elements(field)


# ---------------------------------------------------------------- decimal year


@pytest.mark.parametrize(
    ("date", "expected"),
    [
        ((2020, 1, 1, 0, 0, 0), 2020.0),
        ((2020, 7, 2, 0, 0, 0), 2020.5),  # leap year: 183 of 366 days
        ((2021, 7, 2, 12, 0, 0), 2021.5),  # 182.5 of 365 days
        ((2025, 1, 1, 0, 0, 0), 2025.0),
        ((1970, 1, 1, 0, 0, 0), 1970.0),
    ],
)
def test_decimal_year(date, expected):
    assert decimal_year(calendar.timegm(date)) == pytest.approx(expected, abs=1e-12)


def test_decimal_year_is_continuous_and_increasing():
    new_year = calendar.timegm((2024, 1, 1, 0, 0, 0))
    assert decimal_year(new_year - 1.0) < 2024.0 <= decimal_year(new_year)
    assert decimal_year(new_year - 1.0) == pytest.approx(2024.0, abs=1e-7)
    assert decimal_year(new_year + 0.5) > decimal_year(new_year)


@pytest.mark.parametrize("seconds", [math.nan, math.inf, -math.inf, 1e300])
def test_decimal_year_rejects_bad_times(seconds):
    with pytest.raises(ValueError, match="posix_seconds"):
        decimal_year(seconds)


def test_decimal_year_feeds_the_model():
    # 2027-07-02T12:00Z is 2027.5 (182.5 of 365 days): the WMM2025 table's 2027.5 row.
    year = decimal_year(calendar.timegm((2027, 7, 2, 12, 0, 0)))
    assert year == pytest.approx(2027.5, abs=1e-12)
    np.testing.assert_allclose(wmm_field_ned(80.0, 0.0, 0.0, year) / NT,
                               [6500.8, 294.5, 54869.4], rtol=0.0, atol=TOL_NT)
