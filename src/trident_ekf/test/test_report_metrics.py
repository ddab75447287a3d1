"""The replay report's error metrics on constructed series with known answers: the map
offset between estimate and reference, the drift inside a simulated GNSS outage, and the NIS
table when the filter re-applies updates after a delayed measurement."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from trident_ekf.core.filter import UpdateResult
from trident_ekf.tools.report import ReportSeries

MAP_OFFSET = np.array([2.0, -1.0, 0.5])  # m, estimate minus reference while aided
OUTAGE = (10.0, 20.0)  # s
DRIFT_RATE = np.array([3.0, 4.0, 0.2])  # m/s inside the outage: 5 m/s horizontally


def _estimate(position: np.ndarray, sigma: float) -> dict[str, np.ndarray]:
    return {"position": position, "velocity": np.zeros(3), "attitude": np.array([1.0, 0, 0, 0]),
            "position_cov": np.eye(3) * sigma**2, "attitude_cov": np.eye(3) * 1e-4}


def _series(start_error: float = 0.0) -> ReportSeries:
    """A 30 s flight at 10 Hz: a constant map offset, and a linear drift in the outage;
    ``start_error`` (m, east) from 1 s before the outage to its end."""
    series = ReportSeries()
    for t in np.arange(0.0, 30.0, 0.1):
        reference = np.array([t, 0.0, 10.0])
        drift = DRIFT_RATE * (t - OUTAGE[0]) if OUTAGE[0] <= t < OUTAGE[1] else np.zeros(3)
        if OUTAGE[0] - 1.0 <= t < OUTAGE[1]:
            drift = drift + np.array([start_error, 0.0, 0.0])
        sigma = 1.0 + 10.0 * (t - OUTAGE[0]) if OUTAGE[0] <= t < OUTAGE[1] else 1.0
        series.add_reference(float(t), reference, np.zeros(3), np.array([1.0, 0, 0, 0]),
                             _estimate(reference + MAP_OFFSET + drift, sigma), OUTAGE)
    return series


def test_the_map_offset_comes_from_the_aided_flight_only():
    summary = _series().summary()
    assert summary["position_offset_enu_m"] == pytest.approx(MAP_OFFSET.tolist(), abs=1e-12)
    aided = [row for row in _series().comparisons if not row["in_outage"]]
    assert len(aided) == 200


def test_the_outage_drift_is_measured_from_the_map_offset():
    summary = _series().summary()
    last = OUTAGE[1] - OUTAGE[0] - 0.1  # s into the outage of its last row
    assert summary["outage_samples"] == 100
    assert summary["outage_max_horizontal_error_m"] == pytest.approx(5.0 * last, rel=1e-9)
    assert summary["outage_max_vertical_error_m"] == pytest.approx(0.2 * last, rel=1e-9)
    # 3 sigma (3 + 30 s^-1 t) against 5 m/s t horizontal per axis: always inside.
    assert summary["outage_horizontal_inside_3sigma"] == 1.0


def test_the_drift_from_the_outage_start_is_measured_apart_from_the_start_error():
    """A 5 m disagreement with the reference at the outage start against a 3-sigma bound of
    3 m at the first row (sigma grows 10 m/s): that row's error lies outside, the drift from
    the start never does."""
    summary = _series(start_error=5.0).summary()
    assert summary["position_offset_enu_m"] == pytest.approx(MAP_OFFSET.tolist(), abs=1e-12)
    assert summary["outage_horizontal_inside_3sigma"] == pytest.approx(0.99)  # 99 of 100
    assert summary["outage_horizontal_drift_inside_3sigma"] == 1.0
    assert _series().summary()["outage_horizontal_inside_3sigma"] == 1.0


def test_a_re_applied_update_replaces_its_first_result():
    """After a delayed fix the filter re-applies the updates stamped after it and reports
    them again: the table keeps one row per measurement, with its last result."""
    series = ReportSeries()
    for t, nis in ((1.0, 9.0), (2.0, 1.0), (1.0, 3.0)):  # stamp 1.0 again, after a rewind
        series.add_update(UpdateResult("barometer", t, np.array([0.1]), nis, 1, True), 2.0)
    series.add_update(UpdateResult("barometer", 3.0, np.array([5.0]), 30.0, 1, False, "gated"),
                      3.0)
    table = series.summary()["nis_by_source"]["barometer"]
    assert (table["updates"], table["accepted"]) == (3, 2)
    assert table["nis_mean"] == pytest.approx(2.0)  # (3 + 1) / 2: the first 9.0 is replaced


def test_a_late_measurement_re_applied_long_after_its_stamp_is_still_one_row():
    """A measurement that arrived later than the filter's history is applied at the filter's
    time; a delayed fix can re-apply it more than the history after its stamp (seen on
    data/px4_real: a barometer reading re-applied 2.3 s after its stamp). Its first result
    is still replaceable then, because settling goes by when the filter applied it."""
    series = ReportSeries(history_s=1.0)
    for k in range(400):  # 50 Hz up to 7.98 s, applied on time
        series.add_update(UpdateResult("barometer", k / 50, np.array([0.1]), 1.0, 1, True),
                          k / 50)
    late = UpdateResult("barometer", 5.51, np.array([0.1]), 9.0, 1, True)
    series.add_update(late, 7.9)  # 2.39 s late: applied at the filter's time
    series.add_update(UpdateResult("barometer", 8.0, np.array([0.1]), 1.0, 1, True), 8.0)
    series.add_update(replace(late, nis=4.0), 8.01)  # re-applied after a delayed fix
    table = series.summary()["nis_by_source"]["barometer"]
    assert (table["updates"], table["accepted"]) == (402, 402)
    assert table["nis_mean"] == pytest.approx((401 + 4.0) / 402)  # 9.0 replaced
