"""Actuator lags: rotor motors (first order) and tilt servos (first order with a rate limit).

Both advance by one physics step of ``step_size`` seconds with the command held over
the step, using the exact discretisation of the first-order lag
``x_{k+1} = c + (x_k - c) exp(-h / tau)``, so the response to a step command is the
continuous exponential sampled at the nodes, whatever the step size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import ModuleType

from mav_dynamics.vehicle import Vehicle
from mav_geometry.kernels import load_kernels

_kernels = load_kernels("variational_sim.integrators._kernels")


class RotorMotors:
    """Rotor speeds (rad/s, >= 0, file order) lagging their commands.

    A command of exactly 0 rad/s switches a motor off (it spins down to 0); any other
    command is clamped to the rotor's ``[speed_min, speed_max]`` of the vehicle file.
    Motors start off. Faults (scenario events): a rotor's ``efficiency`` (0..1, thrust and
    drag moment times it: a damaged propeller or a weak ESC) and ``failed`` (the motor
    spins down whatever its command).
    """

    def __init__(self, vehicle: Vehicle, step_size: float) -> None:
        self.speed_min = tuple(r.speed_min for r in vehicle.rotors)
        self.speed_max = tuple(r.speed_max for r in vehicle.rotors)
        self.time_constants = tuple(r.time_constant for r in vehicle.rotors)
        self._decay = tuple(math.exp(-step_size / tau) for tau in self.time_constants)
        self.count = len(vehicle.rotors)
        self.kernels: ModuleType | None = _kernels
        """The compiled lag step (``integrators/_kernels.c``), or None for the Python one."""
        self.reset()

    def reset(self) -> None:
        """Motors off and stopped, no faults."""
        self.speeds = [0.0] * self.count
        self.commands = [0.0] * self.count
        self.efficiency = [1.0] * self.count
        self.failed = [False] * self.count
        self._healthy = True

    def set_fault(self, rotor: int, efficiency: float = 1.0, failed: bool = False) -> None:
        """Thrust efficiency (0..1) and failure of rotor ``rotor`` (file order) from now."""
        if not 0 <= rotor < self.count:
            raise ValueError(f"rotor index {rotor} out of range 0..{self.count - 1}")
        if not 0.0 <= efficiency <= 1.0:
            raise ValueError(f"efficiency = {efficiency!r}: must be in [0, 1]")
        self.efficiency[rotor] = efficiency
        self.failed[rotor] = failed
        self._healthy = all(e == 1.0 for e in self.efficiency) and not any(self.failed)

    @property
    def thrust_speeds(self) -> list[float]:
        """Speeds whose ``k w^2`` is the thrust actually produced: ``w sqrt(efficiency)``."""
        if self._healthy:
            return self.speeds
        return [w * math.sqrt(e) for w, e in zip(self.speeds, self.efficiency, strict=True)]

    def command(self, speeds: Sequence[float]) -> int:
        """Hold new commands (rad/s, finite, one per rotor); returns how many were clamped."""
        clamped = 0
        commands = []
        for value, low, high in zip(speeds, self.speed_min, self.speed_max, strict=True):
            held = 0.0 if value == 0.0 else min(max(value, low), high)
            clamped += held != value
            commands.append(held)
        self.commands = commands
        return clamped

    def step(self) -> None:
        """Advance the speeds by one step under the held commands (exact exponential); a
        failed motor's command is 0."""
        commands = self.commands if self._healthy else [
            0.0 if dead else c for c, dead in zip(self.commands, self.failed, strict=True)]
        if self.kernels is not None:
            self.speeds = self.kernels.lag_step(self.speeds, commands, self._decay)
            return
        self.speeds = [c + (s - c) * a for s, c, a in
                       zip(self.speeds, commands, self._decay, strict=True)]


class TiltServos:
    """Tilt angles (rad, order of ``vehicle.tilting_links``) lagging their commands.

    First order with time constant ``1 / servo_bandwidth`` and the slew limited to
    ``rate_max`` (rad/s); commands are clamped to the joint limits. Servos start at 0 rad
    (or the nearest limit).
    """

    def __init__(self, vehicle: Vehicle, step_size: float) -> None:
        joints = [link.joint for link in vehicle.tilting_links if link.joint is not None]
        self.angle_min = tuple(j.angle_min for j in joints)
        self.angle_max = tuple(j.angle_max for j in joints)
        self._gain = tuple(1.0 - math.exp(-step_size * j.servo_bandwidth) for j in joints)
        self._max_change = tuple(j.rate_max * step_size for j in joints)
        self.count = len(joints)
        self.angles = self._rest()
        self.commands = list(self.angles)

    def _rest(self) -> list[float]:
        return [min(max(0.0, low), high) for low, high in zip(self.angle_min, self.angle_max,
                                                              strict=True)]

    def reset(self) -> None:
        """Servos back at rest (0 rad or the nearest limit)."""
        self.angles = self._rest()
        self.commands = list(self.angles)

    def command(self, angles: Sequence[float]) -> int:
        """Hold new commands (rad, finite, one per servo); returns how many were clamped."""
        commands = [min(max(value, low), high) for value, low, high in
                    zip(angles, self.angle_min, self.angle_max, strict=True)]
        clamped = sum(int(held != value) for held, value in zip(commands, angles, strict=True))
        self.commands = commands
        return clamped

    def step(self) -> None:
        """Advance the angles by one step: exact first-order change, clipped by the rate limit."""
        self.angles = [a + min(max((c - a) * g, -m), m) for a, c, g, m in
                       zip(self.angles, self.commands, self._gain, self._max_change, strict=True)]
