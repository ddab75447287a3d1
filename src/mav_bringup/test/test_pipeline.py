"""The ROS-free closed-loop pipeline (``mav_bringup.pipeline``): it flies the trajectory the
graph flies for the same seed, deterministically, with the readings the estimator would get
as messages, and refuses bad options with one clear error."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mav_bringup.graph.runner import RunOptions, run
from mav_bringup.graph.series import RunSeries, read_run
from mav_bringup.pipeline import LoopOptions, LoopResult, run_closed_loop
from mav_bringup.pipeline.cores import build_cores
from mav_bringup.pipeline.node_parameters import read_graph_parameters
from mav_bringup.pipeline.run_metrics import nees
from mav_ros_common.parameter_file import read_node_parameters
from trident_ekf.adapters import build_profile
from trident_ekf.adapters.base import absolute

EQUIVALENCE_S = 4.0
"""Sim time of the graph-against-pipeline run: the estimator starts at 1.06 s, the climb on
its odometry at 2.06 s, so two seconds of the loop closed through the estimate."""
SHORT_S = 1.5
"""Sim time of the short runs: the filter runs from 1.06 s (noise-driven estimates), the
vehicle still sits (take-off at 2.06 s)."""
PATIENT = {"simulator": {"lockstep_timeout_s": 10.0}}
"""The graph's lock-step waits for the controller's command even on a loaded machine (past
the timeout it would go on with the held command, which the pipeline never does)."""
DATUM = (47.3977, 8.5456, 488.0)
"""config/simulator.yaml's datum (deg, deg, m): the bag's fixes in ENU."""


@pytest.fixture(scope="module")
def short_run() -> LoopResult:
    return run_closed_loop(LoopOptions(duration_s=SHORT_S))


def _xyz(columns: dict[str, np.ndarray], prefix: str) -> np.ndarray:
    return np.column_stack([columns[f"{prefix}_{axis}"] for axis in "enu"])


def _graph_in_lock_step(directory: Path) -> RunSeries:
    """A recorded ``mav-sim`` run; its lock-step never went on without a command (the
    simulator's ``lockstep_timeouts`` stayed 0: the controller ticks once per /clock boundary,
    ``mav_ros_common.ticks``)."""
    graph = run(RunOptions(duration_s=EQUIVALENCE_S, output_dir=directory, report=False,
                           progress=False, overrides=PATIENT))
    assert graph.bag is not None
    bag = read_run(graph.bag, DATUM)
    _, timeouts = bag.diagnostics["simulator"]["lockstep_timeouts"]
    assert timeouts[-1] == 0
    return bag


def test_the_pipeline_flies_the_graphs_trajectory_bit_for_bit(tmp_path):
    """Same cores, same inputs in the same order: the graph's bag (ground truth and the
    estimator's odometry at 100 Hz) and the pipeline's series sampled at those stamps are
    equal to the last bit, with the loop closed through the estimate from the climb on."""
    bag = _graph_in_lock_step(tmp_path)
    result = run_closed_loop(LoopOptions(duration_s=EQUIVALENCE_S, overrides=PATIENT),
                             series_rate_hz=100.0)
    series = result.series
    stamps = np.round(series["t_s"] * 1e3).astype(int)  # ms: every sample on the 10 ms grid
    truth_rows = np.searchsorted(stamps, np.round(bag.truth.time * 1e3).astype(int))
    assert len(bag.truth) == len(stamps) == 400
    np.testing.assert_array_equal(np.round(bag.truth.time * 1e3), stamps[truth_rows])
    truth = _xyz(series, "truth")[truth_rows]
    assert np.array_equal(bag.truth.position, truth), np.abs(bag.truth.position - truth).max()
    assert bag.truth.position[-1, 2] > 0.2  # flying: climbing on the estimate
    estimate_rows = np.searchsorted(stamps, np.round(bag.estimate.time * 1e3).astype(int))
    estimated = _xyz(series, "estimate")
    assert len(bag.estimate) == np.isfinite(estimated[:, 0]).sum() == 295  # 1.06 s .. 4 s
    estimate = estimated[estimate_rows]
    assert np.array_equal(bag.estimate.position, estimate), np.abs(
        bag.estimate.position - estimate).max()
    assert result.metrics["start_time_s"] == pytest.approx(bag.estimate.time[0])


def test_a_seed_repeats_its_run_exactly_and_another_seed_differs(short_run):
    again = run_closed_loop(LoopOptions(duration_s=SHORT_S))
    other = run_closed_loop(LoopOptions(duration_s=SHORT_S, seed=1))
    for name, column in short_run.series.items():
        assert np.array_equal(column, again.series[name], equal_nan=True), name
    for name, column in short_run.updates.items():
        assert np.array_equal(column, again.updates[name]), name
    timing = {"wall_time_s", "real_time_factor"}
    assert ({k: v for k, v in short_run.metrics.items() if k not in timing}
            == {k: v for k, v in again.metrics.items() if k not in timing})
    assert not np.array_equal(short_run.series["estimate_e"], other.series["estimate_e"],
                              equal_nan=True)
    assert short_run.metrics["nis_mean_gnss_position"] != other.metrics["nis_mean_gnss_position"]


def test_metrics_are_flat_json_and_series_equal_length_columns(short_run):
    metrics = short_run.metrics
    assert all(type(value) in (bool, int, float, str) for value in metrics.values())
    json.dumps(metrics)
    assert metrics["filter_started"] is True
    assert metrics["crashed"] is False
    assert metrics["sim_time_s"] == pytest.approx(SHORT_S)
    # the filter starts on the first fix after the 1 s levelling; one output per 10 ms on
    assert metrics["start_time_s"] == pytest.approx(1.06)
    # every update row is one measurement (re-applied ones replaced): the filter's counts
    for source in ("gnss_position", "gnss_velocity", "barometer", "magnetometer"):
        assert (metrics[f"accepted_{source}"]
                == metrics[f"estimator_{source}_accepted"] > 0), source
    updates = short_run.updates
    assert len({len(column) for column in updates.values()}) == 1
    assert set(updates["source"]) == {"gnss_position", "gnss_velocity", "barometer",
                                      "magnetometer"}
    series = short_run.series
    assert len({len(column) for column in series.values()}) == 1
    np.testing.assert_allclose(series["t_s"], np.arange(1, 16) * 0.1)
    started = np.isfinite(series["estimate_e"])
    assert list(started) == [False] * 10 + [True] * 5  # outputs from 1.06 s: from 1.1 s on
    # sitting on the ground: truth at the origin, no reference yet (the controller idles)
    assert np.all(series["truth_u"] == 0.0)
    assert np.all(np.isnan(series["tracking_error_x"]))
    for kind in ("position", "velocity", "attitude"):
        error = np.column_stack([series[f"error_{kind}_{axis}"] for axis in "xyz"])[started]
        sigma = np.column_stack([series[f"sigma_{kind}_{axis}"] for axis in "xyz"])[started]
        assert np.all(sigma > 0.0)
        assert np.all(series[f"nees_{kind}"][started] >= 0.0)
        assert np.all(np.abs(error) < 10.0 * sigma), kind
    truth = _xyz(series, "truth")[started]
    np.testing.assert_allclose(_xyz(series, "estimate")[started],
                               truth - np.column_stack([series[f"error_position_{axis}"]
                                                        for axis in "xyz"])[started],
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize(("estimator_mount", "yaw_error_deg"), [
    ((0.0, 0.0, math.sqrt(0.5), math.sqrt(0.5)), 0.0),  # told the simulator's mount
    ((0.0, 0.0, 0.0, 1.0), 90.0),  # not told: the body yaw is off by the mount
])
def test_the_imu_reads_in_imu_link_and_the_estimator_turns_it_by_its_own_mount(
        estimator_mount, yaw_error_deg):
    """The simulator's IMU (and magnetometer) turned 90 deg about base_link z: the samples
    stay in imu_link axes, as the messages carry them, and the estimate is compared with the
    base_link truth."""
    mount = [0.0, 0.0, math.sqrt(0.5), math.sqrt(0.5)]
    result = run_closed_loop(LoopOptions(duration_s=SHORT_S, overrides={
        "simulator": {"imu_mount_rotation_xyzw": mount},
        "trident_ekf": {"imu_rotation_xyzw": list(estimator_mount)}}))
    yaw = np.degrees(result.series["error_attitude_z"])
    started = np.isfinite(yaw)
    assert started.sum() == 5
    np.testing.assert_allclose(np.abs(yaw[started]), yaw_error_deg, atol=2.0)
    tilt = np.hypot(result.series["error_attitude_x"], result.series["error_attitude_y"])
    assert np.degrees(tilt[started]).max() < 2.0


def test_nees_is_the_error_squared_over_the_full_covariance():
    covariance = np.array([[4.0, 1.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 9.0]])
    error = np.array([1.0, -2.0, 3.0])
    expected = error @ np.linalg.inv(covariance) @ error
    values = nees(np.stack([error, 2.0 * error]), np.stack([covariance, covariance]))
    np.testing.assert_allclose(values, [expected, 4.0 * expected], rtol=1e-12)
    assert nees(np.zeros((0, 3)), np.zeros((0, 3, 3))).shape == (0,)


def test_settling_back_at_the_start_of_the_climb_is_no_crash():
    # Seed 4: the thrust passes the weight, the vehicle lifts millimetres and settles back
    # (a touchdown at a few mm/s) before the climb carries it up.
    result = run_closed_loop(LoopOptions(seed=4, duration_s=3.0))
    assert result.metrics["touchdowns"] >= 1
    assert result.metrics["crashed"] is False
    assert result.metrics["sim_time_s"] == pytest.approx(3.0)


def test_a_rotor_failure_in_the_climb_is_a_crash_that_ends_the_run(tmp_path):
    scenario = tmp_path / "failure.yaml"
    scenario.write_text("description: rotor 0 fails in the climb\n"
                        "events:\n  - {type: motor_failure, start_s: 3.0, rotor: 0}\n")
    result = run_closed_loop(LoopOptions(duration_s=30.0, scenario=str(scenario)))
    assert result.metrics["crashed"] is True
    assert 3.0 < result.metrics["sim_time_s"] < 4.0  # stopped at the touchdown
    assert len(result.series["t_s"]) == math.floor(result.metrics["sim_time_s"] * 10 + 1e-9)


def _same_sample(first: Any, second: Any) -> bool:
    """Samples (named tuples of numbers, tuples, arrays and dicts) equal to the last bit."""
    if type(first) is not type(second):
        return False
    if isinstance(first, dict):
        return first.keys() == second.keys() and all(
            _same_sample(first[key], second[key]) for key in first)
    if isinstance(first, str | int | float):
        return first == second or (isinstance(first, float) and math.isnan(first)
                                   and math.isnan(second))
    if isinstance(first, tuple) and not hasattr(first, "_fields") and not any(
            isinstance(item, np.ndarray | dict) for item in first):
        return np.array_equal(np.asarray(first, dtype=float), np.asarray(second, dtype=float),
                              equal_nan=True)
    if isinstance(first, tuple):
        return len(first) == len(second) and all(
            _same_sample(a, b) for a, b in zip(first, second, strict=True))
    return np.array_equal(np.asarray(first), np.asarray(second), equal_nan=True)


def test_readings_reach_the_estimator_as_the_message_path_delivers_them():
    """Every reading of 1.3 s (IMU, GNSS fixes with velocities, barometer, magnetometer),
    filled into the simulator node's messages and converted by the estimator's ``ros``
    profile (the IMU through its CDR bytes), gives the feed's samples exactly."""
    from rclpy.serialization import serialize_message

    from variational_sim.ros.vehicle_channel import _message_class

    parameters = read_graph_parameters({})
    cores = build_cores(parameters)
    settings = parameters.estimator.settings
    inputs = {absolute(item.topic): item
              for item in build_profile(settings.inputs).selected(settings.aiding)}
    messages = {name: [_message_class(output)() for output in sensor.outputs]
                for name, sensor in cores.simulator.sensors.items()}
    delivered: dict[str, int] = {}
    for _ in range(1300):
        for sensor, reading in cores.simulator.step().readings:
            flags = sensor.fill(reading, messages[sensor.name])
            expected = []
            for output, message, published in zip(sensor.outputs, messages[sensor.name], flags,
                                                  strict=True):
                item = inputs.get(absolute(output.topic))
                if published and item is not None:
                    expected += item.convert(serialize_message(message) if item.raw
                                             else message)
            samples = cores.feed.samples(sensor, reading)
            assert len(samples) == len(expected), sensor.name
            for mine, theirs in zip(samples, expected, strict=True):
                assert _same_sample(mine, theirs), (sensor.name, mine, theirs)
            delivered[sensor.name] = delivered.get(sensor.name, 0) + len(samples)
    # 200 Hz IMU, 10 Hz GNSS fix + velocity (50 ms late), 50 Hz barometer and magnetometer
    assert delivered == {"imu": 260, "gnss": 2 * 13 - 2, "barometer": 65, "magnetometer": 65}


def test_an_estimator_without_an_aiding_source_is_not_fed_its_readings():
    parameters = read_graph_parameters({"trident_ekf": {"barometer.enabled": False}})
    feed = build_cores(parameters).feed
    assert feed.connected("barometer") == (False,)
    assert feed.connected("magnetometer") == (True,)
    assert feed.connected("gnss") == (True, True)


@pytest.mark.parametrize(("options", "words"), [
    (LoopOptions(vehicle="no_such_vehicle"), ["node 'simulator'", "'vehicle_file'",
                                              "'no_such_vehicle'"]),
    (LoopOptions(scenario="no_such_scenario"), ["node 'simulator'", "'scenario'",
                                                "'no_such_scenario'"]),
    (LoopOptions(overrides={"estimator": {"gyro_noise": 0.01}}),
     ["name no node of the pipeline", "'estimator'", "trident_ekf"]),
    (LoopOptions(overrides={"trident_ekf": {"gyro_nosie": 0.01}}),
     ["node 'trident_ekf'", "unknown parameter(s) 'gyro_nosie'", "did you mean ['gyro_noise'"]),
    (LoopOptions(overrides={"controller": {"rate_hz": -5.0}}),
     ["node 'controller'", "parameter 'rate_hz' = -5.0 is invalid"]),
    (LoopOptions(seed=-1), ["node 'simulator'", "parameter 'seed' = -1 is invalid"]),
    (LoopOptions(trajectory="loop"), ["node 'controller'", "'trajectory' = 'loop'",
                                      "figure_eight"]),
    (LoopOptions(duration_s=0.0), ["duration must be > 0 s, got 0.0"]),
    (LoopOptions(overrides={"simulator": {"duration_s": 0.0}}), ["duration must be > 0 s"]),
    (LoopOptions(duration_s=math.inf), ["node 'simulator'", "'duration_s' = inf"]),
])
def test_bad_options_are_one_clear_value_error_before_anything_runs(options, words):
    with pytest.raises(ValueError, match=re.escape(words[0])) as raised:
        run_closed_loop(options)
    message = str(raised.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)


def test_parameter_files_are_read_as_the_node_reads_them(tmp_path):
    from mav_dynamics.ros.parameters import SPECS

    path = tmp_path / "controller.yaml"
    path.write_text("/**:\n  ros__parameters:\n    use_sim_time: true\n"
                    "    speed_mps: 2\n    gains: {position: [1, 2, 3]}\n")
    values = read_node_parameters(SPECS, "controller", path, {"rate_hz": 50})
    assert values["speed_mps"] == 2.0
    assert isinstance(values["speed_mps"], float)
    assert values["gains.position"] == (1.0, 2.0, 3.0)
    assert values["rate_hz"] == 50.0
    assert values["trajectory"] == "figure_eight"
    path.write_text("controller:\n  ros__parameters: {speed_mps: 2.0}\n")
    with pytest.raises(ValueError, match=r"no 'simulator: ros__parameters:' block"):
        read_node_parameters(SPECS, "simulator", path)


def test_the_pipeline_imports_no_rclpy():
    script = ("import sys\n"
              "from mav_bringup.pipeline import LoopOptions, run_closed_loop\n"
              "result = run_closed_loop(LoopOptions(duration_s=0.1))\n"
              "assert result.metrics['sim_time_s'] == 0.1, result.metrics\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] in "
              "('rclpy', 'rosbags', 'rcl_interfaces')))\n")
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                               timeout=120, cwd=Path(__file__).parent, check=False)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "[]"
