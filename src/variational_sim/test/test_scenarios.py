"""Scenario files (``vehicle_sim.scenario``) and what they do in the simulator.

The shipped files load and hold what their names say; a bad file gives one
``ScenarioError`` naming the file and the entry (an unknown word names the closest known
one, long user text is cut); and in ``VehicleSimulator`` each event type changes exactly
its sensor's readings or its rotor's thrust, by exactly its amount, over exactly its
window ``[start_s, end_s)``, compared with the same seed without the event. The flights
are short and mostly landed (the sensors and motors run, the plant rests: cheap).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from mav_ros_common.resources import find_named_file
from variational_sim.sensors.barometer import BarometerConfig
from variational_sim.sensors.gnss import GnssConfig
from variational_sim.sensors.magnetometer import MagnetometerConfig
from variational_sim.vehicle_sim.scenario import (
    EVENT_TYPES,
    Scenario,
    ScenarioError,
    load_scenario,
    parse_scenario,
)
from variational_sim.vehicle_sim.simulator import SimulatorConfig, VehicleSimulator

SHIPPED = ("calm", "gusty", "gnss_outage_30s", "spoofing_jump", "motor_failure",
           "sensor_faults")
QUADROTOR = str(find_named_file("quadrotor_x", "vehicles"))
HEXAROTOR = str(find_named_file("hexarotor", "vehicles"))
FITTED: dict[str, Any] = {"barometer": BarometerConfig(), "magnetometer": MagnetometerConfig()}
"""The optional sensors the default simulator.yaml enables."""


def shipped(name: str) -> Scenario:
    return load_scenario(find_named_file(name, "scenarios"))


def scenario(*events: dict[str, Any], wind: dict[str, Any] | None = None) -> Scenario:
    document: dict[str, Any] = {"events": list(events)}
    if wind is not None:
        document["wind"] = wind
    return parse_scenario(document, "test")


CALM = Scenario()


def simulator(scenario: Scenario = CALM, vehicle: str = QUADROTOR, seed: int = 7,
              **config: Any) -> VehicleSimulator:
    return VehicleSimulator(SimulatorConfig(vehicle_file=vehicle, seed=seed,
                                            scenario=scenario, **config))


def readings(sim: VehicleSimulator, sensor: str, duration_s: float) -> list[Any]:
    """The readings of ``sensor`` that fell due over ``duration_s`` of sim time."""
    out = []
    for _ in range(round(duration_s / sim.step_size)):
        out += [r for s, r in sim.step().readings if s.name == sensor]
    return out


def hover_speed(sim: VehicleSimulator) -> float:
    """Equal rotor speed whose thrust balances the weight (rad/s)."""
    return math.sqrt(sim.plant.weight / sim.plant.allocation()[5].sum())


def inside(reading: Any, start: float, end: float) -> bool:
    return bool(start <= reading.time_s < end)


# -- shipped files --------------------------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_scenario_loads_and_builds_its_simulator(name):
    path = find_named_file(name, "scenarios")
    assert path.read_text().startswith("#"), "each file starts with a comment header"
    loaded = load_scenario(path)
    assert loaded.name == name
    assert loaded.description
    vehicle = HEXAROTOR if name == "motor_failure" else QUADROTOR
    sim = simulator(loaded, vehicle, **FITTED)  # the default demo's sensors fit every event
    assert sim.config.scenario is loaded


def test_calm_is_still_air_without_events():
    calm = shipped("calm")
    assert calm.wind is None
    assert calm.events == ()


def test_shipped_scenarios_hold_what_their_names_say():
    gusty = shipped("gusty")
    assert gusty.wind is not None
    assert not gusty.events
    assert 2.0 <= math.hypot(*gusty.wind.mean_enu_mps) <= 5.0
    assert gusty.wind.turbulent
    assert 2 <= len(gusty.wind.gusts) <= 3
    assert all(g.start_s > 5.0 and g.start_s + g.duration_s < 60.0 for g in gusty.wind.gusts)

    (outage,) = shipped("gnss_outage_30s").events
    assert (outage.type, outage.start_s, outage.end_s) == ("gnss_outage", 20.0, 50.0)
    breeze = shipped("gnss_outage_30s").wind
    assert breeze is not None
    assert math.hypot(*breeze.mean_enu_mps) <= 2.0

    (jump,) = shipped("spoofing_jump").events
    assert (jump.type, jump.start_s, jump.end_s) == ("gnss_position_jump", 25.0, 35.0)
    assert 30.0 <= math.hypot(*jump.value[:2]) <= 50.0

    motors = shipped("motor_failure").events
    failure = next(e for e in motors if e.type == "motor_failure")
    assert 25.0 <= failure.start_s <= 35.0
    assert math.isinf(failure.end_s)
    assert all(e.sensor is None for e in motors)

    faults = shipped("sensor_faults").events
    assert {e.type for e in faults} == {
        "magnetometer_disturbance", "barometer_offset", "imu_saturation", "imu_spike",
        "gnss_degraded", "gnss_no_fix"}
    starts = [e.start_s for e in faults]
    assert len(set(starts)) == len(starts)
    assert min(starts) >= 5.0
    assert max(starts) < 60.0


def test_shipped_motor_failure_needs_the_hexarotor():
    with pytest.raises(ScenarioError,
                       match=r"motor_failure.*rotor 4.*quadrotor_x has rotors 0\.\.3"):
        simulator(shipped("motor_failure"), QUADROTOR)


# -- validation -----------------------------------------------------------------------------

GOOD_EVENT = "{type: gnss_outage, start_s: 1.0, duration_s: 2.0}"
BAD_FILES = {
    # unknown words name the closest known one
    "unknown type": ("events: [{type: gnss_outtage, start_s: 1}]",
                     ["events[0]", "'gnss_outtage'", "did you mean 'gnss_outage'"]),
    "unknown event key": ("events: [{type: gnss_outage, start_s: 1, duraton_s: 2}]",
                          ["events[0]", "'duraton_s'", "did you mean 'duration_s'"]),
    "unknown top key": ("event: []", ["'event'", "did you mean 'events'"]),
    "unknown wind key": ("wind: {mean_enu: [1, 0, 0]}",
                         ["wind", "'mean_enu'", "did you mean 'mean_enu_mps'"]),
    "unknown gust key": ("wind: {gusts: [{start_s: 1, duration: 2, amplitude_enu_mps: [1, 0, 0]}]}",
                         ["wind.gusts[0]", "'duration'", "did you mean 'duration_s'"]),
    # missing fields
    "missing type": ("events: [{start_s: 1}]", ["events[0]", "'type'"]),
    "missing start": ("events: [{type: gnss_outage, duration_s: 2}]",
                      ["events[0]", "needs start_s"]),
    "missing value": ("events: [{type: gnss_position_jump, start_s: 1}]",
                      ["events[0]", "needs offset_enu_m"]),
    "missing rotor": ("events: [{type: motor_failure, start_s: 1}]", ["events[0]", "needs rotor"]),
    # numbers out of range or not numbers
    "negative duration": ("events: [" + GOOD_EVENT
                          + ", {type: gnss_outage, start_s: 1, duration_s: -5}]",
                          ["events[1]", "duration_s = -5"]),
    "zero duration": ("events: [{type: gnss_outage, start_s: 1, duration_s: 0}]",
                      ["events[0]", "duration_s = 0"]),
    "negative start": ("events: [{type: gnss_no_fix, start_s: -1}]", ["events[0]", "start_s = -1"]),
    "text start": ("events: [{type: gnss_outage, start_s: soon}]",
                   ["events[0]", "start_s = 'soon'"]),
    "nan start": ("events: [{type: gnss_outage, start_s: .nan}]", ["events[0]", "start_s = nan"]),
    "text factor": ("events: [{type: gnss_degraded, start_s: 1, factor: big}]",
                    ["events[0]", "factor = 'big'"]),
    "bool offset": ("events: [{type: barometer_offset, start_s: 1, offset_pa: true}]",
                    ["events[0]", "offset_pa = True"]),
    "text in vector": ("events: [{type: gnss_position_jump, start_s: 1, "
                       "offset_enu_m: [1, two, 3]}]",
                       ["events[0]", "offset_enu_m[1] = 'two'"]),
    "short vector": ("events: [{type: magnetometer_disturbance, start_s: 1, "
                     "field_T: [1.0e-6, 0]}]",
                     ["events[0]", "field_T", "3 numbers"]),
    "efficiency above 1": ("events: [{type: motor_efficiency, start_s: 1, rotor: 0, "
                           "efficiency: 1.5}]",
                           ["events[0]", "efficiency = 1.5"]),
    "zero saturation range": ("events: [{type: imu_saturation, start_s: 1, gyro_range_rad_s: 0, "
                              "accel_range_m_s2: 20}]", ["events[0]", "gyro_range_rad_s = 0"]),
    # rotor indices
    "fractional rotor": ("events: [{type: motor_failure, start_s: 1, rotor: 1.5}]",
                         ["events[0]", "rotor = 1.5", "rotor index"]),
    "text rotor": ("events: [{type: motor_failure, start_s: 1, rotor: '2'}]",
                   ["events[0]", "rotor = '2'"]),
    "bool rotor": ("events: [{type: motor_failure, start_s: 1, rotor: true}]",
                   ["events[0]", "rotor = True"]),
    "negative rotor": ("events: [{type: motor_efficiency, start_s: 1, rotor: -1, efficiency: 0.5}]",
                       ["events[0]", "rotor = -1"]),
    # wind
    "short mean wind": ("wind: {mean_enu_mps: [1, 2]}", ["wind", "mean_enu_mps"]),
    "negative turbulence": ("wind: {turbulence_w20_mps: -3}", ["wind", "turbulence_w20_mps"]),
    "two turbulence intensities": ("wind: {turbulence_w20_mps: 5, "
                                   "turbulence_sigma_horizontal_mps: 1}",
                                   ["wind", "at most one"]),
    "wind not a mapping": ("wind: 5", ["wind", "must be a mapping"]),
    "gusts not a list": ("wind: {gusts: {start_s: 1}}", ["wind.gusts", "must be a list"]),
    "gust not a mapping": ("wind: {gusts: [3]}", ["wind.gusts[0]", "must be a mapping"]),
    "short gust amplitude": ("wind: {gusts: [{start_s: 1, duration_s: 1, "
                             "amplitude_enu_mps: [1, 2]}]}",
                             ["wind.gusts[0]", "amplitude_enu_mps"]),
    # structure
    "events not a list": ("events: {type: gnss_outage, start_s: 1}", ["events must be a list"]),
    "event not a mapping": ("events: [gnss_outage]", ["events[0]", "must be a mapping"]),
    "document a list": ("- gnss_outage\n- motor_failure\n", ["must be a mapping"]),
    "document a scalar": ("just some text", ["must be a mapping"]),
}


@pytest.mark.parametrize(("text", "expected"), BAD_FILES.values(), ids=BAD_FILES.keys())
def test_bad_entry_is_one_scenario_error_naming_the_file_and_entry(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert message.startswith("bad: "), message
    for fragment in expected:
        assert fragment in message, (fragment, message)
    assert caught.value.__cause__ is None  # one error, not a chain
    assert len(message) < 500


def test_invalid_yaml_and_unreadable_paths_are_scenario_errors(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("events: [{type: gnss_outage, start_s: 1}\n")
    with pytest.raises(ScenarioError, match=r"broken\.yaml: not valid YAML"):
        load_scenario(broken)
    for unreadable in (tmp_path / "missing.yaml", tmp_path):
        with pytest.raises(ScenarioError, match="cannot be read"):
            load_scenario(unreadable)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00events")
    with pytest.raises(ScenarioError, match=r"binary\.yaml"):
        load_scenario(binary)


def test_empty_file_is_calm(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing\n")
    assert load_scenario(path) == Scenario("empty")


LONG = "x" * 10_000
LONG_ENTRIES = {
    "top-level key": {LONG: 1},
    "event key": {"events": [{"type": "gnss_outage", "start_s": 1, LONG: 2}]},
    "event type": {"events": [{"type": LONG, "start_s": 1}]},
    "event value": {"events": [{"type": "gnss_outage", "start_s": LONG}]},
    "vector": {"events": [{"type": "gnss_position_jump", "start_s": 1,
                           "offset_enu_m": [LONG] * 3}]},
    "rotor": {"events": [{"type": "motor_failure", "start_s": 1, "rotor": LONG}]},
    "wind key": {"wind": {LONG: 1}},
    "wind value": {"wind": {"mean_enu_mps": LONG}},
    "gust key": {"wind": {"gusts": [{LONG: 1}]}},
}


@pytest.mark.parametrize("document", LONG_ENTRIES.values(), ids=LONG_ENTRIES.keys())
def test_long_user_text_is_cut_in_messages(document):
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(document, "long")
    message = str(caught.value)
    assert len(message) < 500, len(message)
    assert "x" * 300 not in message  # cut to 60 characters (300: WindConfig's own message)


@pytest.mark.parametrize(("wind", "field"), [
    ({"turbulence_w20_mps": "strong"}, "turbulence_w20_mps"),
    ({"mean_enu_mps": ["a", "b", "c"]}, "mean_enu_mps"),
    ({"gusts": [{"start_s": "soon", "duration_s": 1, "amplitude_enu_mps": [1, 0, 0]}]}, "start_s"),
], ids=["turbulence", "mean", "gust"])
def test_text_in_the_wind_block_names_the_field(wind, field):
    with pytest.raises(ScenarioError, match=field):
        parse_scenario({"wind": wind}, "text")


@pytest.mark.parametrize("text", [
    "events: [{type: gnss_outage, start_s: " + "9" * 400 + "}]",
    "events: [{type: motor_failure, start_s: 1, rotor: " + "9" * 400 + "}]",
    "wind: {turbulence_w20_mps: " + "9" * 400 + "}",
], ids=["start", "rotor", "wind"])
def test_huge_integer_is_a_scenario_error(tmp_path, text):
    path = tmp_path / "huge.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError, match="huge"):
        load_scenario(path)


# -- GNSS events ----------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "publish_during_outage", "published"), [
    ("gnss_outage", True, True),
    ("gnss_outage", False, False),
    ("gnss_no_fix", False, True),   # the receiver itself reports NO_FIX
])
def test_gnss_outage_window_gives_no_fix_exactly_inside(kind, publish_during_outage, published):
    start, end = 0.5, 1.5
    sim = simulator(scenario({"type": kind, "start_s": start, "duration_s": end - start}),
                    gnss=GnssConfig(publish_during_outage=publish_during_outage))
    fixes = readings(sim, "gnss", 2.0)
    assert len(fixes) == 19  # 10 Hz, 50 ms latency
    lost = [f for f in fixes if inside(f, start, end)]
    assert len(lost) == 10
    for fix in lost:
        assert not fix.fix
        assert fix.published == published
        assert np.isnan(fix.position_enu).all()
        assert not fix.position_covariance_enu.any()
    for fix in fixes:
        if not inside(fix, start, end):
            assert fix.fix
            assert fix.published
            assert np.isfinite(fix.position_enu).all()
            assert np.isfinite(fix.latitude_deg)
            assert np.all(np.diag(fix.position_covariance_enu) > 0.0)


def gnss_pair(event: dict[str, Any], duration_s: float = 1.5) -> list[tuple[Any, Any]]:
    """(without, with the event) fixes of two runs of the same seed."""
    plain = readings(simulator(), "gnss", duration_s)
    faulty = readings(simulator(scenario(event)), "gnss", duration_s)
    assert [f.time_s for f in plain] == [f.time_s for f in faulty]
    return list(zip(plain, faulty, strict=True))


def test_position_jump_offsets_the_fixes_inside_the_window_only():
    offset = np.array([30.0, -40.0, 2.0])
    start, end = 0.45, 1.05
    pairs = gnss_pair({"type": "gnss_position_jump", "start_s": start, "duration_s": end - start,
                       "offset_enu_m": offset.tolist()})
    jumped = 0
    for plain, faulty in pairs:
        assert faulty.fix
        np.testing.assert_array_equal(faulty.velocity_enu, plain.velocity_enu)
        # spoofing: the reported accuracy does not change
        np.testing.assert_array_equal(faulty.position_covariance_enu, plain.position_covariance_enu)
        if inside(faulty, start, end):
            jumped += 1
            np.testing.assert_allclose(faulty.position_enu - plain.position_enu, offset,
                                       atol=1e-9)
            assert faulty.latitude_deg < plain.latitude_deg - 3e-4  # 40 m south: ~3.6e-4 deg
        else:
            np.testing.assert_array_equal(faulty.position_enu, plain.position_enu)
            assert faulty.latitude_deg == plain.latitude_deg
    assert jumped == 6


def test_gnss_degraded_scales_errors_by_factor_and_covariance_by_its_square():
    factor, start, end = 3.0, 0.45, 1.05
    pairs = gnss_pair({"type": "gnss_degraded", "start_s": start, "duration_s": end - start,
                       "factor": factor})
    truth = np.zeros(3)  # landed at the origin, antenna at base_link
    degraded = 0
    for plain, faulty in pairs:
        if inside(faulty, start, end):
            degraded += 1
            np.testing.assert_allclose(faulty.position_covariance_enu,
                                       factor**2 * plain.position_covariance_enu, rtol=1e-12)
            np.testing.assert_allclose(faulty.position_enu - truth,
                                       factor * (plain.position_enu - truth), rtol=1e-9,
                                       atol=1e-12)
        else:
            np.testing.assert_array_equal(faulty.position_enu, plain.position_enu)
            np.testing.assert_array_equal(faulty.position_covariance_enu,
                                          plain.position_covariance_enu)
    assert degraded == 6


# -- IMU events -----------------------------------------------------------------------------


def imu_pair(event: dict[str, Any], duration_s: float = 0.5) -> list[tuple[Any, Any]]:
    plain = readings(simulator(), "imu", duration_s)
    faulty = readings(simulator(scenario(event)), "imu", duration_s)
    return list(zip(plain, faulty, strict=True))


SPIKE_GYRO, SPIKE_ACCEL = np.array([0.5, -1.0, 2.0]), np.array([-3.0, 4.0, 30.0])


@pytest.mark.parametrize("start", [0.2, 0.25, 0.1023])
def test_imu_spike_adds_to_exactly_one_sample(start):
    pairs = imu_pair({"type": "imu_spike", "start_s": start,
                      "gyro_rad_s": SPIKE_GYRO.tolist(), "accel_m_s2": SPIKE_ACCEL.tolist()})
    changed = [(p, f) for p, f in pairs if not np.array_equal(p.gyro, f.gyro)
               or not np.array_equal(p.accel, f.accel)]
    assert len(changed) == 1
    plain, faulty = changed[0]
    assert start <= faulty.time_s < start + 0.005
    np.testing.assert_allclose(faulty.gyro - plain.gyro, SPIKE_GYRO, atol=1e-12)
    np.testing.assert_allclose(faulty.accel - plain.accel, SPIKE_ACCEL, atol=1e-12)
    assert not faulty.saturated


def test_imu_spike_on_the_sample_grid_at_0_1_s_hits_one_sample():
    pairs = imu_pair({"type": "imu_spike", "start_s": 0.1,
                      "gyro_rad_s": SPIKE_GYRO.tolist(), "accel_m_s2": SPIKE_ACCEL.tolist()})
    assert sum(not np.array_equal(p.gyro, f.gyro) for p, f in pairs) == 1


def test_imu_spike_with_a_duration_lasts_its_window():
    start, end = 0.2023, 0.2523
    pairs = imu_pair({"type": "imu_spike", "start_s": start, "duration_s": end - start,
                      "gyro_rad_s": SPIKE_GYRO.tolist(), "accel_m_s2": SPIKE_ACCEL.tolist()})
    spiked = [f for p, f in pairs if not np.array_equal(p.gyro, f.gyro)]
    assert [f.time_s for f in spiked] == [f.time_s for _, f in pairs if inside(f, start, end)]
    assert len(spiked) == 10


def test_imu_saturation_clips_to_the_lowered_ranges_inside_the_window():
    gyro_range, accel_range, start, end = 0.005, 5.0, 0.2, 0.4
    pairs = imu_pair({"type": "imu_saturation", "start_s": start, "duration_s": end - start,
                      "gyro_range_rad_s": gyro_range, "accel_range_m_s2": accel_range})
    clipped = 0
    for plain, faulty in pairs:
        assert 9.0 < plain.accel[2] < 10.6
        assert not plain.saturated
        if inside(faulty, start, end):
            clipped += 1
            np.testing.assert_array_equal(faulty.gyro, np.clip(plain.gyro, -gyro_range, gyro_range))
            np.testing.assert_array_equal(faulty.accel,
                                          np.clip(plain.accel, -accel_range, accel_range))
            assert faulty.accel[2] == accel_range
            assert faulty.saturated
        else:
            np.testing.assert_array_equal(faulty.gyro, plain.gyro)
            np.testing.assert_array_equal(faulty.accel, plain.accel)
            assert not faulty.saturated
    assert clipped == 40


# -- barometer and magnetometer events --------------------------------------------------------


@pytest.mark.parametrize(("sensor", "event", "difference"), [
    ("barometer", {"type": "barometer_offset", "offset_pa": 150.0},
     lambda p, f: np.array([f.pressure_pa - p.pressure_pa])),
    ("magnetometer", {"type": "magnetometer_disturbance", "field_T": [1.0e-5, -2.0e-5, 3.0e-6]},
     lambda p, f: np.subtract(f.field_T, p.field_T)),
])
def test_barometer_and_magnetometer_faults_add_their_amount_in_the_window(
        sensor: str, event: dict[str, Any], difference: Callable[[Any, Any], np.ndarray]):
    start, end = 0.3, 0.6
    value = np.array([v for k, v in event.items() if k != "type"]).ravel()
    event = {**event, "start_s": start, "duration_s": end - start}
    plain = readings(simulator(**FITTED), sensor, 1.0)
    faulty = readings(simulator(scenario(event), **FITTED), sensor, 1.0)
    assert len(plain) == len(faulty) == 50
    shifted = 0
    for p, f in zip(plain, faulty, strict=True):
        assert p.time_s == f.time_s
        if inside(f, start, end):
            shifted += 1
            np.testing.assert_allclose(difference(p, f), value, rtol=1e-9,
                                       atol=1e-12 * np.abs(value).max())
        else:
            assert not difference(p, f).any()
    assert shifted == 15


@pytest.mark.parametrize("event", [
    {"type": "barometer_offset", "start_s": 1.0, "offset_pa": 50.0},
    {"type": "magnetometer_disturbance", "start_s": 1.0, "field_T": [1e-6, 0.0, 0.0]},
])
def test_event_for_a_sensor_not_fitted_names_the_sensor(event):
    sensor = event["type"].split("_")[0]
    with pytest.raises(ScenarioError, match=f"{event['type']} at 1.0 s needs a {sensor}"):
        simulator(scenario(event))
    other = "magnetometer" if event["type"].startswith("barometer") else "barometer"
    with pytest.raises(ScenarioError):
        simulator(scenario(event), **{other: FITTED[other]})
    simulator(scenario(event), **FITTED)  # fitted: fine


@pytest.mark.parametrize(("vehicle", "event"), [
    (QUADROTOR, {"type": "motor_failure", "start_s": 1.0, "rotor": 4}),
    (HEXAROTOR, {"type": "motor_failure", "start_s": 1.0, "rotor": 6}),
    (HEXAROTOR, {"type": "motor_efficiency", "start_s": 1.0, "rotor": 17, "efficiency": 0.5}),
])
def test_rotor_beyond_the_vehicle_is_a_scenario_error(vehicle, event):
    with pytest.raises(ScenarioError,
                       match=f"{event['type']} at 1.0 s names rotor {event['rotor']}"):
        simulator(scenario(event), vehicle)


def test_every_event_type_reaches_a_sensor_of_that_fault_kind():
    sim = simulator(**FITTED)
    for name, kind in EVENT_TYPES.items():
        if kind.sensor is not None:
            assert kind.kind in sim.sensors[kind.sensor].fault_kinds, name


# -- motor events ---------------------------------------------------------------------------


def thrust_history(sim: VehicleSimulator, duration_s: float, every: int = 10) -> np.ndarray:
    """(time s, thrust per rotor N) every ``every`` steps under equal hover commands."""
    sim.set_command([hover_speed(sim)] * sim.rotor_count)
    rows = []
    for _ in range(round(duration_s / sim.step_size)):
        sim.step()
        if sim.steps % every == 0:
            rows.append([sim.time_s, *sim.rotor_thrusts()[2]])
    return np.array(rows)


def test_motor_failure_drops_the_rotor_thrust_and_leaves_the_others():
    start, end = 0.3, 0.45
    sim = simulator(scenario({"type": "motor_failure", "start_s": start, "duration_s": end - start,
                              "rotor": 2}), HEXAROTOR)
    history = thrust_history(sim, 0.8)
    healthy = thrust_history(simulator(vehicle=HEXAROTOR), 0.8)
    times, thrusts = history[:, 0], history[:, 1:]
    hover_thrust = healthy[-1, 1]
    np.testing.assert_allclose(healthy[-1, 1:], hover_thrust, rtol=1e-12)  # equal rotors
    failed = (times > start) & (times <= end)
    others = 1 + np.array([0, 1, 3, 4, 5])
    np.testing.assert_array_equal(history[:, others], healthy[:, others])
    np.testing.assert_array_equal(thrusts[times <= start], healthy[times <= start, 1:])
    assert thrusts[failed, 2].max() == 0.0
    assert np.all(thrusts[times <= start, 2][-5:] > 0.99 * hover_thrust)
    # the motor spins down meanwhile; after the window it spins up again
    assert sim.truth.rotor_speeds[2] > 0.99 * hover_speed(sim)
    assert thrusts[-1, 2] == pytest.approx(hover_thrust, rel=1e-3)
    # a reset run repeats the schedule exactly
    sim.reset()
    np.testing.assert_array_equal(thrust_history(sim, 0.8), history)


def test_motor_failure_spins_the_motor_down_for_good():
    sim = simulator(scenario({"type": "motor_failure", "start_s": 0.2, "rotor": 2}), HEXAROTOR)
    thrust_history(sim, 0.5)
    speeds = sim.truth.rotor_speeds
    assert speeds[2] < 1e-3 * speeds[0]  # 15 time constants after the failure
    assert sim.rotor_thrusts()[2][2] == 0.0


def test_motor_efficiency_halves_the_thrust_in_its_window_and_restores_it_after():
    start, end = 0.3, 0.5
    sim = simulator(scenario({"type": "motor_efficiency", "start_s": start,
                              "duration_s": end - start, "rotor": 4, "efficiency": 0.5}), HEXAROTOR)
    history = thrust_history(sim, 0.7)
    healthy = thrust_history(simulator(vehicle=HEXAROTOR), 0.7)
    times = history[:, 0]
    window = (times > start) & (times <= end)
    assert window.sum() == 20
    np.testing.assert_allclose(history[window, 5], 0.5 * healthy[window, 5], rtol=1e-12)
    np.testing.assert_array_equal(history[~window, 5], healthy[~window, 5])
    np.testing.assert_array_equal(np.delete(history, 5, axis=1), np.delete(healthy, 5, axis=1))
    np.testing.assert_array_equal(sim.truth.rotor_speeds, sim.truth.rotor_speeds[0])


def test_efficiency_window_does_not_revive_a_failed_rotor():
    sim = simulator(scenario({"type": "motor_failure", "start_s": 0.1, "rotor": 1},
                             {"type": "motor_efficiency", "start_s": 0.2, "duration_s": 0.1,
                              "rotor": 1, "efficiency": 0.5}), HEXAROTOR)
    history = thrust_history(sim, 0.4)
    assert history[history[:, 0] > 0.1, 2].max() == 0.0


# -- wind -----------------------------------------------------------------------------------


def fly(sim: VehicleSimulator, steps: int, lift: float = 1.02) -> tuple[np.ndarray, int]:
    """Equal rotor commands ``lift`` times hover (the simulator starts landed: a little
    more than hover takes off); returns the truth ``[t, p, q, v, wind]`` every 10 steps
    and the number of steps in the air."""
    sim.set_command([lift * hover_speed(sim)] * sim.rotor_count)
    rows, airborne = [], 0
    for _ in range(steps):
        sim.step()
        truth = sim.truth
        airborne += not truth.landed
        if sim.steps % 10 == 0:
            rows.append([truth.time_s, *truth.position_enu, *truth.orientation_xyzw,
                         *truth.velocity_enu, *sim.wind_enu])
    return np.array(rows), airborne


def test_steady_wind_makes_a_hovering_drag_body_drift_downwind():
    wind = np.array([3.0, -2.0, 0.0])
    calm, calm_airborne = fly(simulator(vehicle=HEXAROTOR), 1500)
    windy_sim = simulator(scenario(wind={"mean_enu_mps": wind.tolist()}), HEXAROTOR)
    windy, airborne = fly(windy_sim, 1500)
    assert airborne == calm_airborne > 1000  # the wind does not change the lift-off
    np.testing.assert_array_equal(windy[:, 11:14], np.tile(wind, (len(windy), 1)))
    np.testing.assert_allclose(calm[:, 1:3], 0.0, atol=1e-12)  # still air: straight up
    np.testing.assert_allclose(windy[:, 3], calm[:, 3], rtol=1e-9)  # climb unchanged
    np.testing.assert_allclose(windy[:, 4:8], calm[:, 4:8], atol=1e-12)  # level, no yaw
    # m dv/dt = D1 (w - v) along each horizontal axis from the lift-off
    vehicle = windy_sim.vehicle
    tau = windy_sim.plant.body.mass / vehicle.drag.linear[3]
    expected = wind[:2] * (1.0 - math.exp(-airborne * windy_sim.step_size / tau))
    np.testing.assert_allclose(windy[-1, 8:10], expected, rtol=2e-3)
    drift = windy[-1, 1:3]
    assert np.dot(drift, wind[:2]) > 0.0
    assert np.linalg.norm(drift) > 0.02
    assert abs(drift[0] * wind[1] - drift[1] * wind[0]) < 1e-9 * np.linalg.norm(drift)


def test_same_seed_and_scenario_repeat_the_flight_exactly():
    gusty = shipped("gusty")
    assert gusty.wind is not None
    first, _ = fly(simulator(gusty, HEXAROTOR, seed=3), 1200, lift=1.05)
    again_sim = simulator(gusty, HEXAROTOR, seed=3)
    again, _ = fly(again_sim, 1200, lift=1.05)
    np.testing.assert_array_equal(again, first)
    again_sim.reset()
    after_reset, _ = fly(again_sim, 1200, lift=1.05)
    np.testing.assert_array_equal(after_reset, first)
    other_seed, _ = fly(simulator(gusty, HEXAROTOR, seed=4), 1200, lift=1.05)
    assert not np.array_equal(other_seed[:, 11:14], first[:, 11:14])  # turbulence drawn anew
    assert np.abs(first[:, 11:14] - gusty.wind.mean_enu_mps).max() > 0.1  # turbulent
    assert np.abs(first[-1, 1:3]).max() > 1e-3  # and it moved the vehicle
