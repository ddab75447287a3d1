"""Scenario files: the wind and the timed faults of a test flight, in one YAML file.

A scenario is what happens to the vehicle, independent of which vehicle flies and of the
seed, so that a flight can be run again (``config/scenarios/*.yaml``)::

    description: 30 s GNSS outage in a light breeze
    wind:                              # optional; vehicle_sim.wind.WindConfig fields
      mean_enu_mps: [2.0, 0.0, 0.0]
      turbulence_w20_mps: 7.7
      gusts:
        - {start_s: 12.0, duration_s: 2.0, amplitude_enu_mps: [4.0, 0.0, 0.0]}
    events:
      - {type: gnss_outage, start_s: 30.0, duration_s: 30.0}
      - {type: motor_failure, start_s: 45.0, rotor: 2}

Event types (times in sim s; ``duration_s`` omitted = until the end of the run):

==========================  ==========================================================
type                        fields
==========================  ==========================================================
gnss_outage                 start_s, duration_s (no fixes; NO_FIX messages or silence
                            as ``gnss_publish_during_outage``)
gnss_no_fix                 start_s, duration_s (the receiver reports NO_FIX)
gnss_position_jump          start_s, duration_s, offset_enu_m (spoofing: the position
                            jumps, the reported accuracy does not change)
gnss_degraded               start_s, duration_s, factor (position error and reported
                            sigma times factor)
magnetometer_disturbance    start_s, duration_s, field_T (added, imu_link axes, T)
barometer_offset            start_s, duration_s, offset_pa
imu_saturation              start_s, duration_s, gyro_range_rad_s, accel_range_m_s2
imu_spike                   start_s, gyro_rad_s, accel_m_s2 (one IMU sample; a
                            duration_s makes it last)
motor_efficiency            start_s, duration_s, rotor, efficiency (0..1 of the thrust)
motor_failure               start_s, duration_s, rotor (spins down; no thrust)
==========================  ==========================================================

Every problem is one ``ScenarioError`` naming the file, the entry and what is allowed
(an unknown key names the closest known one). Whether the vehicle carries the sensor an
event needs, or has the rotor it names, is checked when a simulator is built with it.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

from mav_geometry.shown import shown
from mav_geometry.yaml_file import finite_number, read_yaml
from variational_sim.sensors.base import Fault
from variational_sim.vehicle_sim.wind import Gust, WindConfig


class ScenarioError(ValueError):
    """A scenario file or entry that cannot be used."""


@dataclass(frozen=True)
class EventType:
    """An event type: the sensor it acts on (None: the motors), the fault kind, and the
    event's value fields in the order of the fault's value (each a number or a 3-vector)."""

    sensor: str | None
    kind: str
    values: tuple[tuple[str, int], ...] = ()
    one_sample: bool = False
    """Without ``duration_s`` the event lasts one sample (else: to the end of the run)."""


EVENT_TYPES: dict[str, EventType] = {
    "gnss_outage": EventType("gnss", "outage"),
    "gnss_no_fix": EventType("gnss", "no_fix"),
    "gnss_position_jump": EventType("gnss", "position_offset", (("offset_enu_m", 3),)),
    "gnss_degraded": EventType("gnss", "accuracy_scale", (("factor", 1),)),
    "magnetometer_disturbance": EventType("magnetometer", "field_offset_T", (("field_T", 3),)),
    "barometer_offset": EventType("barometer", "offset_pa", (("offset_pa", 1),)),
    "imu_saturation": EventType("imu", "saturation", (("gyro_range_rad_s", 1),
                                                      ("accel_range_m_s2", 1))),
    "imu_spike": EventType("imu", "spike", (("gyro_rad_s", 3), ("accel_m_s2", 3)),
                           one_sample=True),
    "motor_efficiency": EventType(None, "efficiency", (("rotor", 1), ("efficiency", 1))),
    "motor_failure": EventType(None, "failure", (("rotor", 1),)),
}
_TIMING = ("type", "start_s", "duration_s")
_POSITIVE_VALUES = {"factor": (1e-3, 1e3), "gyro_range_rad_s": (1e-3, 1e4),
                    "accel_range_m_s2": (1e-3, 1e5), "efficiency": (0.0, 1.0)}
MAX_TIME_S = 1e7


@dataclass(frozen=True)
class ScenarioEvent:
    """One timed event: active while ``start_s <= t < end_s`` (s; ``end_s`` may be inf)."""

    type: str
    start_s: float
    end_s: float
    value: tuple[float, ...] = ()

    @property
    def sensor(self) -> str | None:
        return EVENT_TYPES[self.type].sensor

    def fault(self, sample_period_s: float, physics_step_s: float) -> Fault:
        """The sensor fault of this event. A one-sample event covers the one sample at or
        after its start: one sample period from half a physics step before the first
        physics node at or after the start (samples fall on physics nodes, so neither end
        of the window falls on one)."""
        if math.isinf(self.end_s) and EVENT_TYPES[self.type].one_sample:
            node = math.ceil(self.start_s / physics_step_s - 1e-9) * physics_step_s
            start = node - 0.5 * physics_step_s
            return Fault(EVENT_TYPES[self.type].kind, start, start + sample_period_s,
                         self.value)
        return Fault(EVENT_TYPES[self.type].kind, self.start_s, self.end_s, self.value)

    @property
    def label(self) -> str:
        """Short text for plots and reports."""
        return self.type.replace("_", " ")


@dataclass(frozen=True)
class Scenario:
    """Wind and events of a test flight (``name`` from the file name)."""

    name: str = "calm"
    description: str = ""
    wind: WindConfig | None = None
    events: tuple[ScenarioEvent, ...] = ()

    def events_for(self, sensor: str | None) -> tuple[ScenarioEvent, ...]:
        """The events acting on ``sensor`` (None: the motors)."""
        return tuple(e for e in self.events if e.sensor == sensor)


def _closest(word: str, known: list[str]) -> str:
    match = difflib.get_close_matches(word, known, n=1)
    return f" (did you mean '{match[0]}'?)" if match else ""


def _check_keys(where: str, entry: dict[str, Any], known: list[str]) -> None:
    for key in entry:
        if key not in known:
            raise ScenarioError(f"{where}: unknown key '{str(key)[:60]}'"
                                f"{_closest(str(key), known)}; known: {', '.join(known)}")


def _number(where: str, name: str, value: Any, low: float = -math.inf,
            high: float = math.inf) -> float:
    number = finite_number(value)
    if not low <= number <= high:  # NaN: not a finite number
        raise ScenarioError(f"{where}: {name} = {shown(value)} must be a number in "
                            f"[{low}, {high}]")
    return number


def _vector(where: str, name: str, value: Any) -> tuple[float, float, float]:
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise ScenarioError(f"{where}: {name} = {shown(value)} must be 3 numbers")
    x, y, z = (_number(where, f"{name}[{i}]", v) for i, v in enumerate(value))
    return (x, y, z)


def parse_event(where: str, entry: Any) -> ScenarioEvent:
    """One event from its mapping (ScenarioError naming ``where`` on any problem)."""
    if not isinstance(entry, dict) or "type" not in entry:
        raise ScenarioError(f"{where}: must be a mapping with a 'type' (one of "
                            f"{', '.join(EVENT_TYPES)})")
    kind = entry["type"] if isinstance(entry["type"], str) else shown(entry["type"])
    event_type = EVENT_TYPES.get(kind)
    if event_type is None:
        raise ScenarioError(f"{where}: unknown type '{kind[:60]}'"
                            f"{_closest(kind, list(EVENT_TYPES))}; known: "
                            f"{', '.join(EVENT_TYPES)}")
    names = [name for name, _ in event_type.values]
    _check_keys(where, entry, [*_TIMING, *names])
    if "start_s" not in entry:
        raise ScenarioError(f"{where}: {kind} needs start_s")
    start = _number(where, "start_s", entry["start_s"], 0.0, MAX_TIME_S)
    duration = (_number(where, "duration_s", entry["duration_s"], 1e-6, MAX_TIME_S)
                if "duration_s" in entry else math.inf)
    value: list[float] = []
    for name, size in event_type.values:
        if name not in entry:
            raise ScenarioError(f"{where}: {kind} needs {name}")
        if size == 3:
            value += _vector(where, name, entry[name])
        elif name == "rotor":
            rotor = entry[name]
            if isinstance(rotor, bool) or not isinstance(rotor, int) or not 0 <= rotor < 1000:
                raise ScenarioError(f"{where}: rotor = {shown(rotor)} must be a rotor "
                                    "index (0-based, vehicle file order)")
            value.append(float(rotor))
        else:
            value.append(_number(where, name, entry[name], *_POSITIVE_VALUES.get(
                name, (-math.inf, math.inf))))
    return ScenarioEvent(kind, start, start + duration, tuple(value))


def parse_wind(where: str, entry: Any) -> WindConfig | None:
    """The wind block (``WindConfig`` fields; ``gusts`` a list of ``Gust`` mappings); an
    empty block is still air (None)."""
    if not isinstance(entry, dict):
        raise ScenarioError(f"{where}: must be a mapping of "
                            f"{[f.name for f in fields(WindConfig)]}")
    if not entry:
        return None
    values = dict(entry)
    gusts = values.pop("gusts", [])
    if not isinstance(gusts, list):
        raise ScenarioError(f"{where}.gusts: must be a list of gusts")
    parsed = []
    for index, gust in enumerate(gusts):
        at = f"{where}.gusts[{index}]"
        if not isinstance(gust, dict):
            raise ScenarioError(f"{at}: must be a mapping of {[f.name for f in fields(Gust)]}")
        parsed.append(_build(at, Gust, gust))
    wind: WindConfig = _build(where, WindConfig, values, gusts=tuple(parsed))
    return wind


def _build(where: str, cls: Any, values: dict[str, Any], **built: Any) -> Any:
    """``cls`` from the mapping ``values``: each field checked as a number or a 3-vector by
    its default's type first, then by the class itself."""
    known = {f.name: f for f in fields(cls)}
    _check_keys(where, values, list(known))
    checked: dict[str, Any] = {}
    for name, value in values.items():
        if name in built:
            continue
        default = known[name].default
        checked[name] = (_vector(where, name, value) if isinstance(default, tuple)
                         or (default is MISSING and isinstance(value, list))
                         else _number(where, name, value))
    try:
        return cls(**checked, **built)
    except (TypeError, ValueError) as error:
        raise ScenarioError(f"{where}: {str(error)[:200]}") from None


def parse_scenario(document: Any, name: str = "scenario") -> Scenario:
    """A scenario from a parsed YAML document; errors name the entry."""
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ScenarioError(f"{name}: must be a mapping with 'description', 'wind', 'events'")
    _check_keys(name, document, ["description", "wind", "events"])
    wind = parse_wind(f"{name}: wind", document["wind"]) if document.get(
        "wind") is not None else None
    entries = document.get("events")
    entries = [] if entries is None else entries
    if not isinstance(entries, list):
        raise ScenarioError(f"{name}: events must be a list")
    description = document.get("description", "")
    if not isinstance(description, str):
        raise ScenarioError(f"{name}: description must be text")
    events = tuple(parse_event(f"{name}: events[{i}]", e) for i, e in enumerate(entries))
    return Scenario(name, description, wind,
                    tuple(sorted(events, key=lambda e: e.start_s)))


def load_scenario(path: Path) -> Scenario:
    """A scenario file (ScenarioError for an unreadable file or any bad entry)."""
    _, document = read_yaml(path, "scenario", ScenarioError)
    return parse_scenario(document, Path(path).stem)
