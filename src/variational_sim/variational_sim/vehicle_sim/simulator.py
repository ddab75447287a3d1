"""Vehicle simulator: plant, actuator lags and sensor models stepped at the physics rate.

``VehicleSimulator.step()`` advances one physics step and returns what fell due: the
readings of every sensor (``sensors.base.Sensor``: IMU, GNSS and the optional barometer
and magnetometer) whose delivery time (stamp + latency) was reached. Stamps are exact
multiples of the physics step (``steps * step_size``). Commands are held between
``set_command`` calls; invalid ones are rejected and counted by reason, never applied.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mav_dynamics.vehicle_file import load_vehicle
from mav_geometry.arrays import FloatArray
from variational_sim.sensors.barometer import BarometerConfig
from variational_sim.sensors.base import Matrix3, Sensor, Vector3
from variational_sim.sensors.gnss import GnssConfig, GnssFix, GnssModel
from variational_sim.sensors.imu import ImuConfig, ImuModel, ImuSample, earth_rate_enu
from variational_sim.sensors.magnetometer import MagnetometerConfig
from variational_sim.sensors.optional import OPTIONAL_SENSORS
from variational_sim.vehicle_sim.motors import RotorMotors, TiltServos
from variational_sim.vehicle_sim.plant import INTEGRATORS, STANDARD_GRAVITY, MultirotorPlant
from variational_sim.vehicle_sim.scenario import Scenario, ScenarioError
from variational_sim.vehicle_sim.wind import WindField

PHYSICS_RATE_RANGE_HZ = (100.0, 10000.0)
SEED_STREAMS = {"imu": 0, "gnss": 1, "barometer": 2, "magnetometer": 3, "wind": 4}
"""Child of the run's seed each random process draws from: adding a sensor leaves the
others' noise unchanged."""


def _check_range(name: str, value: float, low: float, high: float, unit: str) -> None:
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{name} = {value!r}: must be in [{low}, {high}] {unit}")


def steps_per_period(name: str, rate_hz: float, physics_rate_hz: float) -> int:
    """Physics steps per period at ``rate_hz`` (Hz), which must divide the physics rate."""
    _check_range(name, rate_hz, 1e-3, physics_rate_hz, "Hz (at most the physics rate)")
    steps = round(physics_rate_hz / rate_hz)
    if abs(steps * rate_hz - physics_rate_hz) > 1e-9 * physics_rate_hz:
        raise ValueError(f"{name} = {rate_hz!r}: must divide physics_rate_hz = "
                         f"{physics_rate_hz} Hz (a whole number of physics steps per sample)")
    return steps


@dataclass(frozen=True)
class SimulatorConfig:
    """Everything a simulator run needs; validated on construction (SI units, ENU)."""

    vehicle_file: str
    """Path of the vehicle file (the ROS shell resolves names to installed files)."""
    integrator: str = "dqvi"
    physics_rate_hz: float = 1000.0
    seed: int = 0
    initial_position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """m, ENU; the ground plane is at its z (the vehicle starts landed)."""
    initial_yaw: float = 0.0
    """rad, heading about ENU z."""
    imu: ImuConfig = field(default_factory=ImuConfig)
    gnss: GnssConfig = field(default_factory=GnssConfig)
    barometer: BarometerConfig | None = None
    """None: no barometer fitted."""
    magnetometer: MagnetometerConfig | None = None
    """None: no magnetometer fitted (it sits in the IMU package: imu_link axes)."""
    scenario: Scenario = field(default_factory=Scenario)
    """Wind and timed faults (``vehicle_sim.scenario``); the default is calm, no events."""

    def __post_init__(self) -> None:
        if self.integrator not in INTEGRATORS:
            raise ValueError(f"integrator = {self.integrator!r}: must be one of "
                             f"{sorted(INTEGRATORS)}")
        _check_range("physics_rate_hz", self.physics_rate_hz, *PHYSICS_RATE_RANGE_HZ, "Hz")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed = {self.seed!r}: must be an integer >= 0")
        if len(self.initial_position) != 3:
            raise ValueError(f"initial_position = {self.initial_position!r}: must be 3 "
                             "numbers (m, ENU)")
        for axis, value in zip("xyz", self.initial_position, strict=True):
            _check_range(f"initial_position.{axis}", value, -1e6, 1e6, "m")
        _check_range("initial_yaw", self.initial_yaw, -2.0 * math.pi, 2.0 * math.pi, "rad")
        for name, sensor in self.sensor_configs().items():
            steps_per_period(f"{name}.rate_hz", sensor.rate_hz, self.physics_rate_hz)
            _check_range(f"{name}.latency_s", getattr(sensor, "latency_s", 0.0), 0.0, 10.0,
                         "s")

    def sensor_configs(self) -> dict[str, Any]:
        """The fitted sensors' configurations by sensor name."""
        fitted = {"imu": self.imu, "gnss": self.gnss,
                  **{name: getattr(self, name) for name in OPTIONAL_SENSORS}}
        return {name: config for name, config in fitted.items() if config is not None}

    @property
    def step_size(self) -> float:
        """Physics step (s)."""
        return 1.0 / self.physics_rate_hz


@dataclass(frozen=True, slots=True)
class StepOutput:
    """What fell due at ``time_s`` (s): ``(sensor, reading)`` pairs to publish now, each
    reading stamped with its own ``time_s`` (``latency_s`` earlier)."""

    time_s: float
    readings: tuple[tuple[Sensor, Any], ...]

    @property
    def imu(self) -> ImuSample | None:
        """The IMU sample that fell due, if any."""
        return next((r for s, r in self.readings if s.name == "imu"), None)

    @property
    def gnss(self) -> tuple[GnssFix, ...]:
        """The GNSS fixes that fell due."""
        return tuple(r for s, r in self.readings if s.name == "gnss")


@dataclass(frozen=True)
class Truth:
    """Ground truth at ``time_s`` (s): O in ENU (m, m/s), attitude body->ENU ``[x, y, z, w]``,
    body twist ``(omega, v)`` (rad/s, m/s), actual rotor speeds (rad/s) and tilts (rad)."""

    time_s: float
    position_enu: FloatArray
    orientation_xyzw: FloatArray
    twist_body: FloatArray
    velocity_enu: FloatArray
    rotor_speeds: FloatArray
    tilt_angles: FloatArray
    landed: bool


@dataclass(frozen=True)
class SimulatorDiagnostics:
    """Health of the run: balance errors since the last anchor (J, N m s, N s), Newton
    iterations of the last step, contact and command counters."""

    time_s: float
    physics_steps: int
    energy_error_j: float
    angular_momentum_error: float
    linear_momentum_error: float
    newton_iterations: int
    max_newton_iterations: int
    landed: bool
    touchdowns: int
    rejected_commands: dict[str, int]
    clamped_commands: int


class PlantTruth:
    """The simulator's state as the sensors read it (``sensors.base.SensorTruth``)."""

    def __init__(self, simulator: VehicleSimulator) -> None:
        self._simulator = simulator
        self._plant = simulator.plant
        self.gravity_enu: Vector3 = (0.0, 0.0, -STANDARD_GRAVITY)
        motors = simulator.motors
        self._inverse_squared_max = [1.0 / (high * high) for high in motors.speed_max]

    @property
    def time_s(self) -> float:
        return self._simulator.time_s

    @property
    def rotation_rows(self) -> Matrix3:
        return self._plant.rotation_rows

    @property
    def position_enu(self) -> Vector3:
        return self._plant.position

    @property
    def velocity_enu(self) -> Vector3:
        return self._plant.velocity_enu

    @property
    def angular_velocity_body(self) -> Vector3:
        wx, wy, wz = self._plant.twist[:3]
        return (wx, wy, wz)

    def accelerations(self) -> tuple[Vector3, Vector3]:
        return self._plant.accelerations()

    @property
    def height_above_ground_m(self) -> float:
        return self._plant.position[2] - self._plant.ground_height

    @property
    def rotor_load(self) -> float:
        speeds = self._simulator.motors.speeds
        if not speeds:
            return 0.0
        return sum(w * w * k for w, k in zip(speeds, self._inverse_squared_max,
                                              strict=True)) / len(speeds)


class VehicleSimulator:
    """One multirotor with motors, servos and sensors; see ``SimulatorConfig``."""

    def __init__(self, config: SimulatorConfig) -> None:
        self.config = config
        self.vehicle_path = Path(config.vehicle_file)
        self.vehicle = load_vehicle(self.vehicle_path)
        self.step_size = config.step_size
        self.plant = MultirotorPlant(self.vehicle, config.integrator, self.step_size,
                                     STANDARD_GRAVITY, config.initial_position[2])
        self.motors = RotorMotors(self.vehicle, self.step_size)
        self.servos = TiltServos(self.vehicle, self.step_size)
        self.rotor_count = self.motors.count
        self.tilt_count = self.servos.count
        self._earth_rate = earth_rate_enu(config.gnss.datum[0])
        self._truth = PlantTruth(self)
        self._motor_changes = self._motor_schedule(config.scenario)
        self.reset()

    def _motor_schedule(self, scenario: Scenario) -> list[tuple[float, int, float, bool]]:
        """(time s, rotor, efficiency, failed) at each start and end of the scenario's motor
        events, in time order. A rotor's state at a time combines every event active on it
        then (efficiencies multiply, any failure fails it), so overlapping events on one
        rotor do not undo each other."""
        events = scenario.events_for(None)
        for event in events:
            rotor = int(event.value[0])
            if rotor >= self.rotor_count:
                raise ScenarioError(
                    f"scenario '{scenario.name}': {event.type} at {event.start_s} s names "
                    f"rotor {rotor}, but {self.vehicle.name} has rotors 0..{self.rotor_count - 1}")
        changes = []
        boundaries = sorted({(t, int(e.value[0])) for e in events
                             for t in (e.start_s, e.end_s) if math.isfinite(t)})
        for time_s, rotor in boundaries:
            active = [e for e in events if int(e.value[0]) == rotor
                      and e.start_s <= time_s < e.end_s]
            failed = any(e.type == "motor_failure" for e in active)
            efficiency = math.prod(e.value[1] for e in active if e.type == "motor_efficiency")
            changes.append((time_s, rotor, 0.0 if failed else efficiency, failed))
        return changes

    def reset(self) -> None:
        """Back to the initial state: landed at the initial pose, motors off, sensors
        re-seeded (a reset run repeats the first one exactly), counters cleared."""
        config = self.config
        self.plant.reset(config.initial_position, config.initial_yaw)
        self.plant.set_wind((0.0, 0.0, 0.0))
        self.motors.reset()
        self.servos.reset()
        self.sensors = self._build_sensors()
        self._wind = (None if config.scenario.wind is None else WindField(
            config.scenario.wind, self._rng("wind"), self.step_size))
        self._next_motor_change = 0
        self.imu: ImuModel = self.sensors["imu"]
        self.gnss: GnssModel = self.sensors["gnss"]
        self._schedule: list[tuple[Sensor, int, int, deque[tuple[int, Any]]]] = [
            (sensor, steps_per_period(f"{name}.rate_hz", sensor.rate_hz,
                                              config.physics_rate_hz),
             math.ceil(sensor.latency_s / self.step_size - 1e-9), deque())
            for name, sensor in self.sensors.items()]
        self.steps = 0
        self._next_due: float = 0  # no reading falls due before this step
        self.rejected_commands: Counter[str] = Counter()
        self.clamped_commands = 0
        self._max_newton = 0

    def _rng(self, name: str) -> np.random.Generator:
        """The generator of one random process: its own child of the seed."""
        children = np.random.SeedSequence(self.config.seed).spawn(len(SEED_STREAMS))
        return np.random.default_rng(children[SEED_STREAMS[name]])

    def _build_sensors(self) -> dict[str, Any]:
        """Fresh sensor models with the scenario's faults (ScenarioError for an event on a
        sensor that is not fitted)."""
        config = self.config
        rng = self._rng
        sensors: dict[str, Any] = {
            "imu": ImuModel(config.imu, rng("imu"), self._earth_rate),
            "gnss": GnssModel(config.gnss, rng("gnss")),
        }
        for name, optional in OPTIONAL_SENSORS.items():
            fitted = getattr(config, name)
            if fitted is not None:
                sensors[name] = optional.build(fitted, rng(name), config)
        scenario = config.scenario
        for event in scenario.events:
            if event.sensor is None:
                continue
            if event.sensor not in sensors:
                raise ScenarioError(
                    f"scenario '{scenario.name}': {event.type} at {event.start_s} s needs a "
                    f"{event.sensor}, which this simulator does not fit (enable it: "
                    f"{event.sensor}.enabled)")
            sensor = sensors[event.sensor]
            sensor.inject(event.fault(1.0 / sensor.rate_hz, self.step_size))
        return sensors

    @property
    def time_s(self) -> float:
        """Simulation time (s) of the current node."""
        return self.steps * self.step_size

    def set_command(self, rotor_speeds: FloatArray | list[float],
                    tilt_angles: FloatArray | list[float] | None = None) -> bool:
        """Hold new commands: rotor speeds (rad/s, file order, 0 = motor off) and, for
        vehicles with tilting links, tilt angles (rad; None keeps the last ones).

        Wrong lengths or non-finite values reject the whole command (counted by reason,
        ``rejected_commands``); in-range clamping is counted in ``clamped_commands``.
        Returns whether the command was accepted.
        """
        speeds = [float(v) for v in rotor_speeds]
        tilts = None if tilt_angles is None else [float(v) for v in tilt_angles]
        if len(speeds) != self.rotor_count or (tilts is not None
                                               and len(tilts) != self.tilt_count):
            self.rejected_commands["wrong_length"] += 1
            return False
        if not all(map(math.isfinite, speeds)) or (
                tilts is not None and not all(map(math.isfinite, tilts))):
            self.rejected_commands["non_finite"] += 1
            return False
        self.clamped_commands += self.motors.command(speeds)
        if tilts is not None:
            self.clamped_commands += self.servos.command(tilts)
        return True

    def step(self) -> StepOutput:
        """Advance one physics step; return every sensor reading that fell due."""
        plant = self.plant
        if self._next_motor_change < len(self._motor_changes):
            self._apply_motor_changes()
        if self._wind is not None:
            self._blow()
        plant.step(self.motors.thrust_speeds, self.servos.angles)
        self.motors.step()
        if self.tilt_count:
            self.servos.step()
        iterations = plant.newton_iterations
        if iterations > self._max_newton:
            self._max_newton = iterations
        self.steps += 1
        steps = self.steps
        if steps < self._next_due:
            return StepOutput(self.time_s, ())
        due: list[tuple[Sensor, Any]] = []
        next_due = math.inf
        for sensor, every, delay, pending in self._schedule:
            if steps % every == 0:
                reading = sensor.measure(self._truth)
                if delay:
                    pending.append((steps + delay, reading))
                else:
                    due.append((sensor, reading))
            while pending and pending[0][0] <= steps:
                due.append((sensor, pending.popleft()[1]))
            next_sample = steps - steps % every + every
            if next_sample < next_due:
                next_due = next_sample
            if pending and pending[0][0] < next_due:
                next_due = pending[0][0]
        self._next_due = next_due
        return StepOutput(self.time_s, tuple(due))

    def _apply_motor_changes(self) -> None:
        changes, now = self._motor_changes, self.time_s
        while (self._next_motor_change < len(changes)
               and changes[self._next_motor_change][0] <= now + 1e-12):
            _, rotor, efficiency, failed = changes[self._next_motor_change]
            self.motors.set_fault(rotor, efficiency, failed)
            self._next_motor_change += 1

    def _blow(self) -> None:
        """The scenario's wind at the vehicle, held over the next step."""
        wind = self._wind
        assert wind is not None
        plant = self.plant
        time_s = self.time_s
        if wind.refreshes_at(time_s):
            vx, vy, vz = plant.velocity_enu
            wx, wy, wz = plant.wind_enu
            airspeed = math.sqrt((vx - wx) ** 2 + (vy - wy) ** 2 + (vz - wz) ** 2)
            velocity = wind.velocity(time_s, self._truth.height_above_ground_m, airspeed)
        else:  # between refreshes the field reads neither height nor airspeed
            velocity = wind.velocity(time_s, math.nan, math.nan)
        if velocity != plant.wind_enu:  # an equal wind would leave the plant as it is
            plant.set_wind(velocity)

    @property
    def wind_enu(self) -> Vector3:
        """The air velocity at the vehicle (m/s, ENU) over the last step."""
        return self.plant.wind_enu

    @property
    def truth(self) -> Truth:
        """Ground truth at the current node."""
        plant = self.plant
        return Truth(
            time_s=self.time_s,
            position_enu=np.array(plant.position),
            orientation_xyzw=np.array(plant.orientation),
            twist_body=np.array(plant.twist),
            velocity_enu=np.array(plant.velocity_enu),
            rotor_speeds=np.array(self.motors.speeds),
            tilt_angles=np.array(self.servos.angles),
            landed=plant.landed,
        )

    def rotor_thrusts(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Per rotor at the actual speeds and tilts: position (m) and unit thrust axis in
        base_link, and thrust ``k_l w^2`` (N); arrays of shape (rotors, 3), (rotors, 3),
        (rotors,)."""
        positions, axes = self.plant.rotor_frames(self.servos.angles)
        coefficients = np.array([r.thrust_coefficient for r in self.vehicle.rotors])
        return positions, axes, coefficients * np.square(self.motors.thrust_speeds)

    def inject_gnss_outage(self, duration_s: float) -> None:
        """GNSS outage from now for ``duration_s`` (s, > 0)."""
        if not (math.isfinite(duration_s) and duration_s > 0.0):
            raise ValueError(f"duration_s = {duration_s!r}: must be a positive number of s")
        self.gnss.inject_outage(self.time_s, duration_s)

    def inject_imu_spike(self, gyro: FloatArray | list[float],
                         accel: FloatArray | list[float]) -> None:
        """Add ``gyro`` (rad/s) and ``accel`` (m/s^2), imu_link, to the next IMU sample once."""
        gyro, accel = np.asarray(gyro, dtype=float), np.asarray(accel, dtype=float)
        if gyro.shape != (3,) or accel.shape != (3,) or not (
                np.isfinite(gyro).all() and np.isfinite(accel).all()):
            raise ValueError(f"IMU spike must be two finite 3-vectors, got {gyro!r}, {accel!r}")
        self.imu.inject_spike(gyro, accel)

    def diagnostics(self) -> SimulatorDiagnostics:
        """Balance errors and counters now (the balances cost a few tens of us: on demand)."""
        plant = self.plant
        momentum = plant.momentum_error()
        return SimulatorDiagnostics(
            time_s=self.time_s,
            physics_steps=self.steps,
            energy_error_j=plant.energy_error(),
            angular_momentum_error=float(np.linalg.norm(momentum[:3])),
            linear_momentum_error=float(np.linalg.norm(momentum[3:])),
            newton_iterations=plant.newton_iterations,
            max_newton_iterations=self._max_newton,
            landed=plant.landed,
            touchdowns=plant.touchdowns,
            rejected_commands=dict(self.rejected_commands),
            clamped_commands=self.clamped_commands,
        )
