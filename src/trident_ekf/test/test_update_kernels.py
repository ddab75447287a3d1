"""The compiled update-side kernels (core/_kernels.c: gnss_antenna, fix_drift,
magnetometer_level, estimate_outputs; yaw_bank_advance's bad arguments here, its run in
test_yaw_estimator.py) against the numpy reference: both GNSS models'
linearisation, the divergence screen's fix record, the magnetometer's check and heading
model and the session's estimate (ENU state, covariances, twist) to round-off on random
states, a replay with a diverged start, a reset and a jump with the same outcomes, and the
errors of bad arguments."""

from __future__ import annotations

import copy
import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mav_geometry import quaternion
from trident_ekf.core import BaselineESKF, FilterConfig, TridentEKF
from trident_ekf.core import session as session_module
from trident_ekf.core.divergence import FixRecord, fix_record
from trident_ekf.core.earth import ecef_to_geodetic, geodetic_to_ecef
from trident_ekf.core.filter import ErrorStateFilter
from trident_ekf.core.initialization import Initializer
from trident_ekf.core.measurements.base import Linearization, Measurement
from trident_ekf.core.measurements.magnetometer import (
    Magnetometer,
    MagnetometerConfig,
    _inclination,
)
from trident_ekf.core.simulation import SensorModel, Trajectory, simulate

kernels = importlib.import_module("trident_ekf.core._kernels")  # fails if not built
FILTERS = (TridentEKF, BaselineESKF)
LEVER = (0.3, -0.2, 0.5)  # m: large enough that every lever-arm term matters
BIAS_STATES = {"gnss_bias_sigma_horizontal": 0.2, "gnss_bias_sigma_vertical": 0.4,
               "gnss_covariance_includes_bias": True}


def _pair(cls: type[ErrorStateFilter], bias_states: bool, seed: int
          ) -> tuple[ErrorStateFilter, ErrorStateFilter]:
    """(reference, compiled) filters in one random state: attitude, velocity, a position
    near the Earth's surface, body rate, biases and a random covariance; with a heading
    magnetometer in a random field (dip within 72 degrees)."""
    rng = np.random.default_rng(seed)
    config = FilterConfig(lever_arm=LEVER, **(BIAS_STATES if bias_states else {}))
    horizontal, direction = rng.uniform(5e-6, 3e-5), rng.uniform(-np.pi, np.pi)
    north, east = horizontal * np.cos(direction), horizontal * np.sin(direction)
    down = rng.uniform(-3.0, 3.0) * horizontal
    compiled = cls(config, [Magnetometer(MagnetometerConfig(field_ned_T=(north, east, down)))])
    q = rng.normal(size=4)
    position = geodetic_to_ecef(rng.uniform(-80.0, 80.0), rng.uniform(-180.0, 180.0),
                                rng.uniform(-100.0, 5000.0))
    root = rng.normal(size=(compiled.state_dim, compiled.state_dim))
    compiled.initialize(0.0, q / np.linalg.norm(q), rng.normal(0.0, 20.0, 3), position,
                        root @ root.T * 0.01 + np.eye(compiled.state_dim),
                        rng.normal(0.0, 0.01, 3), rng.normal(0.0, 0.1, 3))
    compiled.last_omega = tuple(rng.normal(0.0, 2.0, 3).tolist())
    if bias_states:
        compiled.augmented["gnss_position"] = tuple(rng.normal(0.0, 0.3, 3).tolist())
    reference = copy.deepcopy(compiled)
    reference.compiled = False
    assert compiled.compiled
    return reference, compiled


def _close(ours: np.ndarray, reference: np.ndarray) -> bool:
    """Equal to round-off: 1e-12 of the largest entry (and exact zeros stay zero)."""
    scale = max(float(np.max(np.abs(reference))), 1e-300)
    return bool(np.max(np.abs(ours - reference)) <= 1e-12 * scale
                and np.array_equal(ours == 0.0, reference == 0.0))


def _same_linearization(ours: Linearization, reference: Linearization,
                        residual_scale: float = 0.0) -> bool:
    """Same H and R, and residuals within 1e-12 of the larger of theirs and
    ``residual_scale`` (an angle near zero is round-off on either side)."""
    residual_error = float(np.max(np.abs(ours.residual - reference.residual)))
    return (residual_error <= 1e-12 * max(float(np.max(np.abs(reference.residual))),
                                          residual_scale)
            and _close(ours.H, reference.H) and np.array_equal(ours.R, reference.R))


def _measurements(filter_: ErrorStateFilter, rng: np.random.Generator
                  ) -> tuple[Measurement, Measurement]:
    """A fix a few metres and a velocity a few decimetres per second off the estimate."""
    _, v, p = filter_.nominal()
    position = Measurement("gnss_position", 0.0, p + rng.normal(0.0, 3.0, 3),
                           np.diag([4.0, 5.0, 9.0]))
    velocity = Measurement("gnss_velocity", 0.0, v + rng.normal(0.0, 0.3, 3),
                           np.eye(3) * 0.04)
    return position, velocity


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), bias_states=st.booleans())
def test_gnss_models_match_the_reference(seed: int, bias_states: bool) -> None:
    for cls in FILTERS:
        reference, compiled = _pair(cls, bias_states, seed)
        position, velocity = _measurements(reference, np.random.default_rng(seed))
        for name, m in (("gnss_position", position), ("gnss_velocity", velocity)):
            assert _same_linearization(compiled.sources[name].linearize(compiled, m),
                                       reference.sources[name].linearize(reference, m))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), bias_states=st.booleans(),
       datum_offset=st.floats(-2000.0, 2000.0))
def test_the_session_estimate_matches_the_reference(
        seed: int, bias_states: bool, datum_offset: float) -> None:
    for cls in FILTERS:
        _, filter_ = _pair(cls, bias_states, seed)
        position = filter_.nominal()[2]
        latitude, longitude, height = ecef_to_geodetic(position + datum_offset)
        session = session_module.EstimationSession(filter_, Initializer(),
                                                   datum=(latitude, longitude, height))
        ours = session.estimate()
        try:
            session_module._kernels = None
            reference = session.estimate()
        finally:
            session_module._kernels = kernels
        assert ours.keys() == reference.keys()
        for name, value in reference.items():
            assert ours[name].shape == value.shape, name
            assert np.max(np.abs(ours[name] - value)) <= 1e-12 * max(
                float(np.max(np.abs(value))), 1e-300), name


def _same_record(ours: FixRecord, reference: FixRecord) -> bool:
    return (all(_close(a, b) for a, b in zip(ours.drift, reference.drift, strict=True))
            and _close(ours.shown, reference.shown)
            and all(np.array_equal(a, b) for a, b in ((ours.fix, reference.fix),
                                                      (ours.noise, reference.noise),
                                                      (ours.antenna, reference.antenna))))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), bias_states=st.booleans(), with_velocity=st.booleans())
def test_the_fix_record_matches_the_reference(seed: int, bias_states: bool,
                                              with_velocity: bool) -> None:
    for cls in FILTERS:
        reference, compiled = _pair(cls, bias_states, seed)
        position, velocity = _measurements(reference, np.random.default_rng(seed))
        epoch_velocity = velocity if with_velocity else None
        ours = fix_record(compiled, position, position.value, epoch_velocity)
        theirs = fix_record(reference, position, position.value, epoch_velocity)
        assert _same_record(ours, theirs)
        # The inertial noise the screen builds from the drift agrees as well.
        later = FixRecord(1.5, *(getattr(theirs, f) for f in (
            "fix", "noise", "antenna", "velocity", "shown", "drift", "accel_noise")))
        assert _close(ours.inertial_noise(later), theirs.inertial_noise(later))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), turn=st.floats(-np.pi, np.pi),
       scale=st.floats(0.5, 1.5))
def test_the_magnetometer_matches_the_reference(seed: int, turn: float, scale: float) -> None:
    """A sample of the model field, turned about a random axis and scaled: the check (its
    inclinations) and the heading model (residual over the whole circle, row)."""
    rng = np.random.default_rng(seed)
    axis = rng.normal(size=3)
    axis *= turn / np.linalg.norm(axis)
    for cls in FILTERS:
        reference, compiled = _pair(cls, False, seed)
        source = reference.sources["magnetometer"]
        q = reference.nominal()[0]
        rotation = quaternion.to_matrix(q)
        turned = quaternion.to_matrix(quaternion.from_rotation_vector(axis))
        sample = scale * turned @ rotation.T @ source.field_ecef
        m = source.measurement(0.0, sample)
        assert compiled.sources["magnetometer"].check(compiled, m) == source.check(reference, m)
        assert _same_linearization(compiled.sources["magnetometer"].linearize(compiled, m),
                                   source.linearize(reference, m), residual_scale=np.pi)
        levelled = source._geodetic.axes.T
        _, measured, model = kernels.magnetometer_level(q, source._geodetic.axes,
                                                        source.field_ecef, sample, np.empty(3))
        assert measured == pytest.approx(_inclination(levelled @ rotation @ sample), abs=1e-12)
        assert model == pytest.approx(_inclination(levelled @ source.field_ecef), abs=1e-12)


def _replay(filter_: ErrorStateFilter, records: list[tuple], start: tuple) -> ErrorStateFilter:
    filter_.initialize(0.0, *start, np.array([0.03] * 3 + [0.3] * 3 + [2.0] * 3
                                             + [0.01] * 3 + [0.1] * 3))
    for record in records:
        if record[1] == "imu":
            filter_.process_imu(record[0], record[2], record[3])
        else:
            filter_.process_gnss(record[0], *record[2:])
    filter_.flush()
    return filter_


@pytest.mark.parametrize("cls", FILTERS)
def test_a_diverged_replay_has_the_reference_outcomes(cls: type[ErrorStateFilter]) -> None:
    """4 s at 200 Hz with 5 Hz GNSS, started 40 m off, the fixes moved 60 m after 3 s:
    gated fixes on a coherent track, the divergence reset, accepted fixes, then a jump
    that the GNSS velocity and the IMU contradict (inconsistent, the spoofing alarm). The
    compiled run takes every decision the reference takes, and ends at its state."""
    sensors = SensorModel(lever_arm=LEVER)
    data = simulate(Trajectory(), sensors, 4.0, imu_rate=200.0, gnss_rate=5.0,
                    rng=np.random.default_rng(2))
    rv = (sensors.gnss_velocity_sigma**2,) * 3
    records: list[tuple] = [(t, "imu", tuple(g), tuple(a)) for t, g, a in
                            zip(data.imu_time[1:], data.gyro[1:], data.accel[1:], strict=True)]
    records += [(t, "gnss", p + 60.0 * (t > 3.0), data.gnss_position_covariance, v, rv)
                for t, p, v in zip(data.gnss_time, data.gnss_position, data.gnss_velocity,
                                   strict=True)]
    records.sort(key=lambda r: (r[0], r[1] == "imu"))
    truth = data.truth
    start = (truth["q"][0], truth["v"][0], truth["p"][0] + 40.0)
    config = FilterConfig(lever_arm=LEVER, max_consecutive_rejections=5)
    compiled = _replay(cls(config), records, start)
    reference = cls(config)
    reference.compiled = False
    reference = _replay(reference, records, start)
    counts = compiled.counts()
    assert counts == reference.counts()
    assert {reason: counts[f"gnss_position_{reason}"] for reason in (
        "gated", "resets", "accepted", "inconsistent", "spoofing_alarms")} == {
        "gated": 5, "resets": 1, "accepted": 10, "inconsistent": 5, "spoofing_alarms": 1}
    assert compiled.gnss_alarm == reference.gnss_alarm != ""
    for ours, theirs in zip(compiled.nominal(), reference.nominal(), strict=True):
        assert np.linalg.norm(ours - theirs) <= 1e-9 * np.linalg.norm(theirs)


def _antenna_arguments() -> list:
    return [np.array([0.0, 0.0, 0.0, 1.0]), np.zeros(3), np.array([7e6, 0.0, 0.0]),
            (0.0, 0.0, 0.0), LEVER, np.empty((5, 3, 3))]


def _drift_arguments(n: int = 15) -> list:
    return [np.eye(n), np.eye(3), np.eye(3), np.array([7e6, 0.0, 0.0]), np.empty((3, 3, 3))]


def _magnetometer_arguments() -> list:
    return [np.array([0.0, 0.0, 0.0, 1.0]), np.eye(3), np.array([2e-5, 0.0, -3e-5]),
            np.array([2e-5, 0.0, -3e-5]), np.empty(3)]


def _estimate_arguments() -> list:
    return [np.eye(15), np.array([0.0, 0.0, 0.0, 1.0]), np.zeros(3), np.array([7e6, 0.0, 0.0]),
            np.eye(3), np.array([7e6, 0.0, 0.0]), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1e-6,
            True, np.empty(kernels.ESTIMATE_SIZE)]


def _yaw_bank_arguments(n: int = 5) -> list:
    return [np.tile(np.eye(3), (n, 1, 1)), np.zeros((n, 3)), np.zeros((n, 2)),
            np.zeros((n, 3, 3)), np.empty((n, 3)), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.2),
            0.02, (0.0, 0.0, 1.0), (0.0, 0.0, 1.0), 0.5, 0.0, 1e-4, 3]


ARGUMENTS = {"gnss_antenna": _antenna_arguments, "fix_drift": _drift_arguments,
             "magnetometer_level": _magnetometer_arguments,
             "estimate_outputs": _estimate_arguments, "yaw_bank_advance": _yaw_bank_arguments}


@pytest.mark.parametrize(("kernel", "position", "replacement", "error", "message"), [
    ("gnss_antenna", 0, np.zeros(3), ValueError, "q must have 4 elements, got 3"),
    ("gnss_antenna", 2, [7e6, 0.0, 0.0], TypeError,
     "p must be a C-contiguous float64 array"),
    ("gnss_antenna", 3, (0.0, 0.0), ValueError, "omega must have 3 elements, got 2"),
    ("gnss_antenna", 4, (0.0, "x", 0.0), TypeError,
     r"lever must hold floats \(element 1 is not\)"),
    ("gnss_antenna", 5, np.empty(44), ValueError, "out must have 45 elements, got 44"),
    ("fix_drift", 0, np.eye(14), ValueError,
     "P must be n x n with 15 <= n <= 32, got 196 elements"),
    ("fix_drift", 0, np.ones(230), ValueError,
     "P must be n x n with 15 <= n <= 32, got 230 elements"),
    ("fix_drift", 1, np.eye(3, dtype=np.float32), TypeError, "N must hold float64 values"),
    ("fix_drift", 2, np.eye(4), ValueError, "C must have 9 elements, got 16"),
    ("fix_drift", 4, np.empty((3, 3, 3))[:, :, :2], TypeError,
     "drift must be a writable C-contiguous float64 array"),
    ("magnetometer_level", 1, np.eye(3)[:, :2], TypeError,
     "axes must be a C-contiguous float64 array"),
    ("magnetometer_level", 3, np.zeros(4), ValueError, "sample must have 3 elements, got 4"),
    ("estimate_outputs", 0, np.eye(14), ValueError,
     "P must be n x n with 15 <= n <= 32, got 196 elements"),
    ("estimate_outputs", 4, np.eye(4), ValueError, "R must have 9 elements, got 16"),
    ("estimate_outputs", 6, (0.0, 0.0, 1.0), ValueError, "to_enu must have 4 elements, got 3"),
    ("estimate_outputs", 8, "small", TypeError, "rate_variance must be a float"),
    ("estimate_outputs", 10, np.empty(120), ValueError, "out must have 121 elements, got 120"),
    ("yaw_bank_advance", 0, np.zeros((65, 3, 3)), ValueError,
     "rotation must be n x 3 x 3 with 1 <= n <= 64"),
    ("yaw_bank_advance", 0, np.zeros((5, 3, 2)), ValueError,
     "rotation must be n x 3 x 3 with 1 <= n <= 64"),
    ("yaw_bank_advance", 2, np.zeros((4, 2)), ValueError,
     "velocity must have 10 elements, got 8"),
    ("yaw_bank_advance", 9, (0.0, 1.0), ValueError, "direction must have 3 elements, got 2"),
    ("yaw_bank_advance", 13, "tilt", TypeError, "mode must be an integer"),
])
def test_bad_arguments_raise_one_clear_error(kernel: str, position: int, replacement: object,
                                             error: type[Exception], message: str) -> None:
    arguments = ARGUMENTS[kernel]()
    arguments[position] = replacement
    with pytest.raises(error, match=f"^{message}$"):
        getattr(kernels, kernel)(*arguments)


def test_read_only_outputs_and_argument_counts_are_refused() -> None:
    arguments = _antenna_arguments()
    arguments[5].flags.writeable = False
    with pytest.raises(TypeError, match=r"^out must be a writable C-contiguous float64 array$"):
        kernels.gnss_antenna(*arguments)
    with pytest.raises(TypeError, match=r"^fix_drift takes 5 arguments, got 4$"):
        kernels.fix_drift(*_drift_arguments()[:4])
    row = np.empty(3)
    row.flags.writeable = False
    with pytest.raises(TypeError, match=r"^row must be a writable C-contiguous float64 array$"):
        kernels.magnetometer_level(*_magnetometer_arguments()[:4], row)
