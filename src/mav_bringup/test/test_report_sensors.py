"""The run report's sensor figure, scenario events and estimator counters on constructed data,
and ``mav-sim --scenario`` (parsing and the error path; no ROS is started)."""

from __future__ import annotations

import json
import math

import matplotlib.pyplot as plt
import numpy as np
import pytest

from mav_bringup.graph import events as scenario_events
from mav_bringup.graph import report, report_figures
from mav_bringup.graph.accumulator import RunAccumulator
from mav_bringup.graph.metrics import (
    barometer_height_error,
    declination,
    estimator_sources,
    magnetometer_heading_error,
    standard_pressure_altitude,
)
from mav_bringup.graph.runner import SIMULATOR, RunOptions, main, parse_args
from mav_bringup.graph.series import OdometrySeries, RunSeries, SensorSamples, SensorSite
from mav_geometry import quaternion as Q
from variational_sim.sensors import barometer as baro
from variational_sim.vehicle_sim.scenario import parse_scenario

DATUM = (47.3977, 8.5456, 488.0)
EARTH_FIELD_NED_T = (2.1523e-05, 1.3340e-06, 4.3290e-05)
"""The simulator's default field (declination +3.55 deg)."""
IMU_MOUNT_XYZW = tuple(Q.from_rotation_vector([0.0, 0.0, math.pi / 2]))
"""imu_link turned 90 deg about up in base_link: the magnetometer reads in other axes."""
BODY_RATE = np.array([0.05, -0.03, 0.4])
"""Constant body rate of the truth (rad/s): yaw turns, roll and pitch up to about 16 deg."""
DURATION_S = 10.0
BARO_OFFSET_M = 2.0
SCENARIO = {
    "description": "made-up faults for the report test",
    "events": [
        {"type": "barometer_offset", "start_s": 2.0, "duration_s": 3.0, "offset_pa": 30.0},
        {"type": "gnss_outage", "start_s": 6.0},                       # to the end of the run
        {"type": "imu_spike", "start_s": 7.0, "gyro_rad_s": [0.0, 0.0, 1.0],
         "accel_m_s2": [0.0, 0.0, 0.0]},                               # one sample
        {"type": "magnetometer_disturbance", "start_s": 50.0, "duration_s": 1.0,
         "field_T": [1e-5, 0.0, 0.0]},                                 # after the run
    ],
}


def _truth() -> OdometrySeries:
    time = np.arange(0.0, DURATION_S + 1e-9, 0.01)
    n = len(time)
    attitude = Q.from_rotation_vector(time[:, None] * BODY_RATE)
    position = np.column_stack([np.sin(time), np.cos(time), 2.0 + 0.5 * np.sin(0.7 * time)])
    return OdometrySeries(time, position, attitude, np.zeros((n, 3)), np.ones((n, 6)),
                          np.ones((n, 6)))


def _magnetometer(time: np.ndarray, rotation_deg: float = 0.0) -> SensorSamples:
    """Noise-free readings (imu_link) of the Earth field turned by ``rotation_deg`` about up
    in the map, at the true attitude of ``time``."""
    north, east, down = EARTH_FIELD_NED_T
    turn = Q.from_rotation_vector([0.0, 0.0, math.radians(rotation_deg)])
    field_map = Q.rotate(turn, [east, north, -down])
    attitude = Q.from_rotation_vector(time[:, None] * BODY_RATE)
    body = Q.rotate(Q.conjugate(attitude), field_map)
    return SensorSamples(time, Q.rotate(Q.conjugate(np.asarray(IMU_MOUNT_XYZW)), body))


def _series(barometer: bool = True, magnetometer: bool = True,
            rotation_deg: float = 0.0) -> RunSeries:
    truth = _truth()
    # Sensor stamps off the truth's 10 ms grid: the truth is interpolated.
    time = np.arange(0.005, DURATION_S, 0.02)
    up = np.interp(time, truth.time, truth.position[:, 2])
    pressure = np.array([baro.troposphere_pressure(DATUM[2] + z + BARO_OFFSET_M) for z in up])
    stamps = np.arange(1.0, DURATION_S + 0.5, 1.0)
    simulator = {
        "barometer_offset_m": (stamps, np.full(len(stamps), BARO_OFFSET_M)),
        "barometer_drift_pa": (stamps, np.linspace(-3.0, 3.0, len(stamps))),
        "barometer_ground_effect_pa": (stamps, np.zeros(len(stamps))),
        "barometer_fault_pa": (stamps, np.where((stamps >= 2) & (stamps < 5), 30.0, 0.0)),
        "magnetometer_disturbance_T": (stamps, np.zeros(len(stamps))),
        "magnetometer_heading_error_deg": (stamps, np.full(len(stamps), rotation_deg)),
    }
    estimator = {
        "barometer_accepted": (stamps, np.linspace(0, 400, len(stamps))),
        "barometer_gated": (stamps, np.full(len(stamps), 150.0)),
        "barometer_nis_mean": (stamps, np.full(len(stamps), 0.8)),
        "magnetometer_accepted": (stamps, np.full(len(stamps), 480.0)),
        "magnetometer_disturbed": (stamps, np.full(len(stamps), 20.0)),
        "magnetometer_nis_mean": (stamps, np.full(len(stamps), 1.2)),
        "gnss_position_accepted": (stamps, np.full(len(stamps), 90.0)),
        "gnss_position_resets": (stamps, np.full(len(stamps), 1.0)),
        "gnss_position_nis_mean": (stamps, np.full(len(stamps), 2.9)),
        "imu_accepted": (stamps, np.full(len(stamps), 2000.0)),   # not an aiding source
    }
    return RunSeries(
        truth=truth, estimate=truth, reference=truth, fix_time=np.zeros(0),
        fix_enu=np.zeros((0, 3)), fix_valid=np.zeros(0, dtype=bool),
        diagnostics={"simulator": simulator, "trident_ekf": estimator},
        topic_counts={"/barometer/pressure": len(time), "/magnetic_field": len(time)},
        barometer=(SensorSamples(time, pressure) if barometer else SensorSamples.empty()),
        magnetometer=(_magnetometer(time, rotation_deg) if magnetometer
                      else SensorSamples.empty(3)),
        site=SensorSite(DATUM, EARTH_FIELD_NED_T, IMU_MOUNT_XYZW))


def _run_facts() -> dict:
    scenario = parse_scenario(SCENARIO, "made_up")
    return {"vehicle": "quadrotor_x.yaml", "sim_time_s": DURATION_S,
            **scenario_events.scenario_facts(scenario)}


# ----- sensor metrics on constructed data ---------------------------------------------------
def test_the_pressure_altitude_is_the_icao_standard_one():
    pressures = np.array([101325.0, 95000.0, 89874.6])
    expected = 44330.77 * (1.0 - (pressures / 101325.0) ** 0.190263)
    assert standard_pressure_altitude(pressures) == pytest.approx(expected, abs=0.01)
    assert standard_pressure_altitude(pressures) == pytest.approx(
        [baro.standard_pressure_altitude(p) for p in pressures], abs=1e-9)
    assert np.isnan(standard_pressure_altitude(0.0))


def test_a_constant_barometer_offset_is_its_mean_and_leaves_nothing_after_removal():
    series = _series()
    time, error = barometer_height_error(series.barometer, series.truth, DATUM[2])
    assert len(time) == len(series.barometer)
    assert error == pytest.approx(np.full(len(error), BARO_OFFSET_M), abs=1e-6)
    assert error - error.mean() == pytest.approx(np.zeros(len(error)), abs=1e-6)
    summary = report.summarize(series, {})["barometer"]
    assert summary["height_error_mean_m"] == pytest.approx(BARO_OFFSET_M, abs=1e-6)
    assert summary["height_error_std_m"] == pytest.approx(0.0, abs=1e-6)
    assert summary["true_offset_mean_m"] == pytest.approx(BARO_OFFSET_M)
    assert summary["true_drift_max_abs_pa"] == pytest.approx(3.0)


def test_a_clean_field_levelled_with_the_true_attitude_gives_no_yaw_error():
    series = _series()
    time, error = magnetometer_heading_error(series.magnetometer, series.truth,
                                             EARTH_FIELD_NED_T, IMU_MOUNT_XYZW)
    assert len(time) == len(series.magnetometer)
    assert np.max(np.abs(error)) < 1e-9
    assert math.degrees(declination(EARTH_FIELD_NED_T)) == pytest.approx(3.546, abs=1e-3)


@pytest.mark.parametrize("rotation_deg", [10.0, -10.0])
def test_a_field_turned_by_10_deg_gives_a_10_deg_yaw_error(rotation_deg):
    """Turned clockwise (seen from above), the field pulls a compass's yaw counter-clockwise:
    a positive error, the sign of the simulator's magnetometer_heading_error_deg."""
    series = _series(rotation_deg=-rotation_deg)
    _, error = magnetometer_heading_error(series.magnetometer, series.truth,
                                          EARTH_FIELD_NED_T, IMU_MOUNT_XYZW)
    assert np.degrees(error) == pytest.approx(np.full(len(error), rotation_deg), abs=1e-9)
    summary = report.summarize(series, {})["magnetometer"]
    assert summary["heading_error_rms_deg"] == pytest.approx(10.0)
    assert summary["heading_error_mean_deg"] == pytest.approx(rotation_deg)


def test_the_mount_matters_a_wrong_one_shows_as_a_yaw_error():
    series = _series()
    _, error = magnetometer_heading_error(series.magnetometer, series.truth,
                                          EARTH_FIELD_NED_T)  # identity mount: wrong
    # 90 deg while level; tilted, the field's vertical part leaks in as well.
    assert math.degrees(abs(error[0])) == pytest.approx(90.0, abs=0.1)
    assert np.degrees(np.abs(error)).min() > 30.0


# ----- estimator counters -------------------------------------------------------------------
def test_the_estimators_final_counters_are_grouped_by_aiding_source():
    sources = estimator_sources(_series().diagnostics["trident_ekf"])
    assert sources == {
        "barometer": {"accepted": 400, "gated": 150, "nis_mean": 0.8},
        "gnss_position": {"accepted": 90, "resets": 1, "nis_mean": 2.9},
        "magnetometer": {"accepted": 480, "disturbed": 20, "nis_mean": 1.2},
    }
    assert isinstance(sources["barometer"]["accepted"], int)


# ----- scenario events ----------------------------------------------------------------------
def test_scenario_facts_are_json_with_open_and_one_sample_ends():
    facts = _run_facts()
    assert facts["scenario"] == "made_up"
    assert facts["scenario_description"] == SCENARIO["description"]
    by_type = {e["type"]: e for e in facts["events"]}
    assert by_type["barometer_offset"] == {
        "type": "barometer_offset", "label": "barometer offset", "start_s": 2.0, "end_s": 5.0,
        "values": {"offset_pa": 30.0}}
    assert by_type["gnss_outage"]["end_s"] is None
    assert by_type["imu_spike"]["end_s"] == 7.0
    assert by_type["imu_spike"]["values"] == {"gyro_rad_s": [0.0, 0.0, 1.0],
                                              "accel_m_s2": [0.0, 0.0, 0.0]}
    json.loads(json.dumps(facts), parse_constant=pytest.fail)  # no Infinity/NaN


def test_events_are_shaded_on_every_panel_and_labelled_once():
    facts = _run_facts()
    figure = report_figures.plot_sensors(RunAccumulator.from_series(_series()),
                                 report_figures.Marks(facts["events"], DURATION_S))
    try:
        axes = figure.axes
        assert len(axes) == 4
        for axis in axes:
            spans = [p for p in axis.patches if p.get_gid() == scenario_events.EVENT_GID]
            lines = [ln for ln in axis.lines if ln.get_gid() == scenario_events.EVENT_GID]
            # The outage is shaded to the end of the run; the spike is a line; the event
            # after the end of the run is not drawn.
            extents = sorted((p.get_x(), p.get_x() + p.get_width()) for p in spans)
            assert extents == [(2.0, 5.0), (6.0, DURATION_S)]
            assert [ln.get_xdata()[0] for ln in lines] == [7.0]
        labels = axes[0].get_legend_handles_labels()[1]
        assert "barometer offset 2-5 s" in labels
        assert "gnss outage 6 s to end" in labels
        assert "imu spike at 7 s" in labels
        for axis in axes[1:]:
            assert not any("outage" in label for label in axis.get_legend_handles_labels()[1])
    finally:
        plt.close(figure)


def test_the_figures_drawn_by_the_report_workers_are_those_drawn_here(tmp_path):
    """The runner hands the figures to worker processes: same files, same summary."""
    assert list(report_figures.FIGURES) == list(report.FIGURE_NAMES)
    here, there = tmp_path / "here", tmp_path / "there"
    run_data = RunAccumulator.from_series(_series(), report.PLOTTED_DIAGNOSTICS)
    summary = report.write_accumulated(run_data, here, _run_facts())
    with report.report_workers(2) as workers:
        assert workers.parallel
        assert report.write_accumulated(run_data, there, _run_facts(), workers) == summary
    for name in report.FIGURE_NAMES:
        assert (here / name).read_bytes() == (there / name).read_bytes(), name
    assert (here / "report.md").read_text() == (there / "report.md").read_text()


def test_the_report_writes_the_sensor_figure_summary_and_markdown(tmp_path):
    summary = report.write_report(_series(), tmp_path, _run_facts())
    names = {"trajectory.png", "estimate_errors.png", "tracking.png", "integrator.png",
             "sensors.png", "summary.json", "report.md"}
    assert names <= {p.name for p in tmp_path.iterdir()}
    assert (tmp_path / "sensors.png").stat().st_size > 10_000
    stored = json.loads((tmp_path / "summary.json").read_text(), parse_constant=pytest.fail)
    assert stored["scenario"] == "made_up"
    assert [e["type"] for e in stored["events"]] == [
        "barometer_offset", "gnss_outage", "imu_spike", "magnetometer_disturbance"]
    assert stored["barometer"]["height_error_mean_m"] == pytest.approx(BARO_OFFSET_M, abs=1e-6)
    assert stored["magnetometer"]["heading_error_rms_deg"] == pytest.approx(0.0, abs=1e-6)
    assert stored["estimator_sources"]["magnetometer"]["disturbed"] == 20
    assert summary["events"] == stored["events"]

    markdown = (tmp_path / "report.md").read_text()
    assert "## Scenario `made_up`" in markdown
    assert SCENARIO["description"] in markdown
    assert "| barometer_offset | 2 | 5 | offset_pa 30 |" in markdown
    assert "| gnss_outage | 6 | end of run | - |" in markdown
    assert "| imu_spike | 7 | one sample |" in markdown
    assert "| magnetometer_disturbance (after the end of the run) | 50 | 51 |" in markdown
    # Columns for the counters some source has; the rest when non-zero.
    assert "| source | accepted | gated | disturbed | other (non-zero) | NIS mean |" in markdown
    assert "| barometer | 400 | 150 | - | - | 0.800 |" in markdown
    assert "| gnss_position | 90 | - | - | resets 1 | 2.900 |" in markdown
    assert "| magnetometer | 480 | - | 20 | - | 1.200 |" in markdown
    assert "![sensors.png](sensors.png)" in markdown
    assert "barometer: " in markdown
    assert "magnetometer: " in markdown


def test_disabled_sensors_are_said_so_instead_of_failing(tmp_path):
    series = _series(barometer=False, magnetometer=False)
    series.diagnostics = {}
    summary = report.write_report(series, tmp_path, {})
    assert summary["barometer"] is None
    assert summary["magnetometer"] is None
    assert summary["scenario"] is None
    assert summary["events"] == []
    markdown = (tmp_path / "report.md").read_text()
    assert "barometer: no readings in the bag (disabled)" in markdown
    assert "magnetometer: no readings in the bag (disabled)" in markdown
    assert "No per-source counters" in markdown
    figure = report_figures.plot_sensors(RunAccumulator.from_series(series),
                                 report_figures.Marks([], DURATION_S))
    try:
        texts = [t.get_text() for axis in figure.axes for t in axis.texts]
        assert any("no /barometer/pressure in the bag" in t for t in texts)
        assert any("no /magnetic_field in the bag" in t for t in texts)
    finally:
        plt.close(figure)


# ----- mav-sim --scenario -------------------------------------------------------------------
def test_the_scenario_option_reaches_the_simulator_only_when_given():
    args = parse_args(["--scenario", "gusty"])
    assert RunOptions(scenario=args.scenario).node_parameters()[SIMULATOR]["scenario"] == "gusty"
    default = parse_args([])
    assert default.scenario is None
    assert "scenario" not in RunOptions(scenario=default.scenario).node_parameters()[SIMULATOR]
    # An explicit --set still wins.
    overridden = RunOptions(scenario="gusty", overrides={SIMULATOR: {"scenario": "calm"}})
    assert overridden.node_parameters()[SIMULATOR]["scenario"] == "calm"


@pytest.mark.parametrize(("make_scenario", "message"), [
    (lambda tmp: "no_such_scenario", "no scenario file 'no_such_scenario'"),
    (lambda tmp: _write(tmp / "bad.yaml", "events:\n  - {type: gnss_outagee, start_s: 1}\n"),
     "did you mean 'gnss_outage'"),
])
def test_a_bad_scenario_is_one_error_line_and_exit_2_before_anything_runs(
        tmp_path, monkeypatch, capsys, make_scenario, message):
    monkeypatch.setenv("ROS_DOMAIN_ID", "173")  # nothing should start; if it did: isolated
    output = tmp_path / "out"
    code = main(["--scenario", str(make_scenario(tmp_path)), "--duration", "1",
                 "--output-dir", str(output), "--quiet"])
    assert code == 2
    error_lines = capsys.readouterr().err.strip().splitlines()
    assert len(error_lines) == 1
    assert error_lines[0].startswith("mav-sim: ")
    assert message in error_lines[0]
    assert not output.exists()


def _write(path, text):
    path.write_text(text)
    return path
