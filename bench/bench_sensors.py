"""Per-call cost of the simulator's sensor models against plain numpy/pymap3d baselines.

Usage: python bench/bench_sensors.py [--repeats K] [--output-dir DIR]

- IMU: ``ImuModel.sample`` (the compiled reading of ``integrators/_kernels.c``, or its
  scalar Python reference under ``MAV_KERNELS=reference``; blocked noise) against the same
  model written
  the obvious way with numpy 3-vectors, both fed the same normals from the same seed
  (lever arm, mount rotation, Earth rate and Coriolis on). The simulator calls it 200
  times per simulated second; the budget is 20 us per sample.
- GNSS: ``GnssModel.measure`` against the bare ``pymap3d.enu2geodetic`` of the same
  antenna point, which was the floor of any fix (10 per simulated second) until the
  compiled conversion (``enu_to_geodetic`` of ``integrators/_kernels.c``) replaced it.

Before timing, each pair must agree on its first output.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pymap3d
from harness import Case, run, write_report

from mav_geometry import quaternion as Q
from variational_sim.sensors.gnss import GnssConfig, GnssModel
from variational_sim.sensors.imu import ImuConfig, ImuModel, earth_rate_enu
from variational_sim.sensors.noise import gauss_markov_coefficients

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
SEED = 11
IMU_CONFIG = ImuConfig(
    mount_rotation_xyzw=tuple(Q.from_rotation_vector([0.0, 0.0, 0.3]).tolist()),
    mount_position_m=(0.05, -0.02, 0.01),
)
EARTH_RATE = earth_rate_enu(47.4)
ROTATION = Q.to_matrix(Q.from_rotation_vector([0.1, -0.2, 0.8]))
OMEGA = np.array([0.3, -0.2, 0.5])
ALPHA = np.array([1.0, 0.5, -0.3])
ACCELERATION = np.array([0.5, -0.4, 0.2])
GRAVITY = np.array([0.0, 0.0, -9.80665])
VELOCITY = np.array([5.0, -3.0, 1.0])


class NumpyImu:
    """The IMU model with numpy 3-vectors throughout; same noise layout as ``ImuModel``."""

    def __init__(self, config: ImuConfig, rng: np.random.Generator, earth_rate: np.ndarray):
        self.config, self.rng, self.earth_rate = config, rng, earth_rate
        power_on = rng.standard_normal(12)
        self.gyro = [config.gyro_turn_on_sigma * power_on[0:3],
                     config.gyro_bias_instability * power_on[3:6], np.zeros(3)]
        self.accel = [config.accel_turn_on_sigma * power_on[6:9],
                      config.accel_bias_instability * power_on[9:12], np.zeros(3)]
        dt = 1.0 / config.rate_hz
        self.phi, self.drive = gauss_markov_coefficients(dt, config.bias_correlation_time_s)
        self.sqrt_dt, self.sqrt_rate = math.sqrt(dt), math.sqrt(config.rate_hz)
        self.mount = Q.to_matrix(np.array(config.mount_rotation_xyzw))
        self.lever = np.array(config.mount_position_m)
        self.block, self.row = np.empty((0, 18)), 0

    def _advance(self, bias: list, instability: float, walk: float, n: np.ndarray) -> np.ndarray:
        bias[1] = self.phi * bias[1] + instability * self.drive * n[0:3]
        bias[2] = bias[2] + walk * self.sqrt_dt * n[3:6]
        return bias[0] + bias[1] + bias[2]

    def sample(self, R, omega, alpha, acceleration, gravity, velocity):
        if self.row == len(self.block):
            self.block, self.row = self.rng.standard_normal((512, 18)), 0
        n = self.block[self.row]
        self.row += 1
        c = self.config
        force = R.T @ (acceleration - gravity + 2.0 * np.cross(self.earth_rate, velocity))
        force = force + np.cross(alpha, self.lever) + np.cross(omega, np.cross(omega,
                                                                               self.lever))
        rate = omega + R.T @ self.earth_rate
        gyro_bias = self._advance(self.gyro, c.gyro_bias_instability, c.gyro_bias_walk, n[6:12])
        accel_bias = self._advance(self.accel, c.accel_bias_instability, c.accel_bias_walk,
                                   n[12:18])
        gyro = self.mount.T @ rate - gyro_bias + c.gyro_noise_density * self.sqrt_rate * n[0:3]
        accel = (self.mount.T @ force - accel_bias
                 + c.accel_noise_density * self.sqrt_rate * n[3:6])
        clipped_gyro = np.clip(gyro, -c.gyro_range, c.gyro_range)
        clipped_accel = np.clip(accel, -c.accel_range, c.accel_range)
        saturated = bool(np.any(clipped_gyro != gyro) or np.any(clipped_accel != accel))
        return clipped_gyro, clipped_accel, saturated


def imu_case() -> Case:
    ours = ImuModel(IMU_CONFIG, np.random.default_rng(SEED), EARTH_RATE)
    baseline = NumpyImu(IMU_CONFIG, np.random.default_rng(SEED), EARTH_RATE)
    arguments = (ROTATION, OMEGA, ALPHA, ACCELERATION, GRAVITY, VELOCITY)

    def agree(a, b) -> bool:
        return (bool(np.allclose(a.gyro, b[0], rtol=0, atol=1e-12))
                and bool(np.allclose(a.accel, b[1], rtol=0, atol=1e-12))
                and a.saturated == b[2])

    return Case("ImuModel.sample", 1, lambda: ours.sample(*arguments),
                lambda: baseline.sample(*arguments), agree)


def gnss_case() -> Case:
    config = GnssConfig(antenna_position_m=(0.1, 0.0, 0.15))
    model = GnssModel(config, np.random.default_rng(SEED))
    clock = iter(range(10**12))
    position = np.array([120.0, -45.0, 30.0])
    antenna = position + ROTATION @ config.antenna_position_m

    def ours():
        return model.measure_at(0.1 * next(clock), ROTATION, position, VELOCITY, OMEGA)

    def baseline():
        return pymap3d.enu2geodetic(*antenna, *config.datum)

    def agree(fix, geodetic) -> bool:  # the fix is the antenna point plus metre-level noise
        east, north, up = pymap3d.geodetic2enu(fix.latitude_deg, fix.longitude_deg,
                                               fix.height_m, *geodetic)
        return bool(fix.fix and math.hypot(east, north, up) < 10.0)

    return Case("GnssModel.measure", 1, ours, baseline, agree)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timing repeats (default 5)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be positive")
    results = run([imu_case(), gnss_case()], args.repeats)
    _, markdown = write_report(results, "Simulator sensor models vs numpy/pymap3d baselines",
                               "baseline", args.output_dir, "sensors")
    print(markdown.read_text())
    imu = results[0].ours_s
    print(f"IMU: {imu * 1e6:.2f} us per sample, {imu * 200 * 100:.2f} % of real time at "
          f"200 Hz; GNSS: {results[1].ours_s * 1e6:.1f} us per fix")
    return 0


if __name__ == "__main__":
    sys.exit(main())
