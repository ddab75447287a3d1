"""Vehicle simulator: plant, actuator lags and sensor models stepped at the physics rate.

``VehicleSimulator.step()`` advances one physics step and returns what fell due: an IMU
sample when the time reaches an IMU stamp, and the GNSS fixes whose publication time
(stamp + latency) was reached. Stamps are exact multiples of the physics step
(``steps * step_size``). Commands are held between ``set_command`` calls; invalid ones
are rejected and counted by reason, never applied.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mav_dynamics.vehicle_file import load_vehicle
from mav_geometry.arrays import FloatArray
from variational_sim.sensors.gnss import GnssConfig, GnssFix, GnssModel
from variational_sim.sensors.imu import ImuConfig, ImuModel, ImuSample, earth_rate_enu
from variational_sim.vehicle_sim.motors import RotorMotors, TiltServos
from variational_sim.vehicle_sim.plant import INTEGRATORS, STANDARD_GRAVITY, MultirotorPlant

PHYSICS_RATE_RANGE_HZ = (100.0, 10000.0)


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
        steps_per_period("imu.rate_hz", self.imu.rate_hz, self.physics_rate_hz)
        steps_per_period("gnss.rate_hz", self.gnss.rate_hz, self.physics_rate_hz)
        _check_range("gnss.latency_s", self.gnss.latency_s, 0.0, 10.0, "s")

    @property
    def step_size(self) -> float:
        """Physics step (s)."""
        return 1.0 / self.physics_rate_hz


@dataclass(frozen=True, slots=True)
class StepOutput:
    """What fell due at ``time_s`` (s): an IMU sample stamped ``time_s``, and GNSS fixes
    to publish now (each stamped with its own ``time_s``, ``latency_s`` earlier)."""

    time_s: float
    imu: ImuSample | None
    gnss: tuple[GnssFix, ...]


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


class VehicleSimulator:
    """One multirotor with motors, servos, IMU and GNSS; see ``SimulatorConfig``."""

    def __init__(self, config: SimulatorConfig) -> None:
        self.config = config
        self.vehicle_path = Path(config.vehicle_file)
        self.vehicle = load_vehicle(self.vehicle_path)
        self.step_size = config.step_size
        self.plant = MultirotorPlant(self.vehicle, config.integrator, self.step_size,
                                     STANDARD_GRAVITY, config.initial_position[2])
        self._gravity = (0.0, 0.0, -STANDARD_GRAVITY)  # m/s^2, ENU
        self.motors = RotorMotors(self.vehicle, self.step_size)
        self.servos = TiltServos(self.vehicle, self.step_size)
        self.rotor_count = self.motors.count
        self.tilt_count = self.servos.count
        self._imu_every = steps_per_period("imu.rate_hz", config.imu.rate_hz,
                                            config.physics_rate_hz)
        self._gnss_every = steps_per_period("gnss.rate_hz", config.gnss.rate_hz,
                                             config.physics_rate_hz)
        self._gnss_delay = math.ceil(config.gnss.latency_s / self.step_size - 1e-9)
        self._earth_rate = earth_rate_enu(config.gnss.datum[0])
        self.reset()

    def reset(self) -> None:
        """Back to the initial state: landed at the initial pose, motors off, sensors
        re-seeded (a reset run repeats the first one exactly), counters cleared."""
        config = self.config
        self.plant.reset(config.initial_position, config.initial_yaw)
        self.motors.reset()
        self.servos.reset()
        imu_seed, gnss_seed = np.random.SeedSequence(config.seed).spawn(2)
        self.imu = ImuModel(config.imu, np.random.default_rng(imu_seed), self._earth_rate)
        self.gnss = GnssModel(config.gnss, np.random.default_rng(gnss_seed))
        self.steps = 0
        self._pending_fixes: deque[tuple[int, GnssFix]] = deque()
        self.rejected_commands: Counter[str] = Counter()
        self.clamped_commands = 0
        self._max_newton = 0

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
        """Advance one physics step; return the IMU sample and GNSS fixes that fell due."""
        plant = self.plant
        plant.step(self.motors.speeds, self.servos.angles)
        self.motors.step()
        if self.tilt_count:
            self.servos.step()
        self._max_newton = max(self._max_newton, plant.newton_iterations)
        self.steps += 1
        steps = self.steps
        imu = self._sample_imu() if steps % self._imu_every == 0 else None
        if steps % self._gnss_every == 0:
            self._pending_fixes.append((steps + self._gnss_delay, self._measure_gnss()))
        pending = self._pending_fixes
        if not pending or pending[0][0] > steps:
            return StepOutput(self.time_s, imu, ())
        due = []
        while pending and pending[0][0] <= steps:
            due.append(pending.popleft()[1])
        return StepOutput(self.time_s, imu, tuple(due))

    def _sample_imu(self) -> ImuSample:
        plant = self.plant
        angular_acceleration, acceleration = plant.accelerations()
        return self.imu.sample(plant.rotation_rows, plant.twist[:3], angular_acceleration,
                               acceleration, self._gravity, plant.velocity_enu)

    def _measure_gnss(self) -> GnssFix:
        plant = self.plant
        return self.gnss.measure(self.time_s, plant.rotation, np.array(plant.position),
                                 np.array(plant.velocity_enu), np.array(plant.twist[:3]))

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
        return positions, axes, coefficients * np.square(self.motors.speeds)

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
