"""Signatures of the compiled kernels in _kernels.c (their docstrings say what they do)."""

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

MAX_STATES: int
ACC_SIZE: int
MAX_MEASUREMENT: int
ESTIMATE_SIZE: int
MAX_HYPOTHESES: int

def trident_propagate(x: Sequence[float], omega: Sequence[float], force: Sequence[float],
                      dt: float, rates: Sequence[float], acc: NDArray[np.float64],
                      ) -> tuple[float, ...]: ...
def conventional_propagate(q: Sequence[float], v: Sequence[float], p: Sequence[float],
                           omega: Sequence[float], force: Sequence[float], dt: float,
                           rates: Sequence[float], acc: NDArray[np.float64],
                           ) -> tuple[tuple[float, float, float, float],
                                      tuple[float, float, float], tuple[float, float, float]]: ...
def trident_flush(P: NDArray[np.float64], F: NDArray[np.float64], q_error: NDArray[np.float64],
                  acc: NDArray[np.float64], x: Sequence[float], position_limit: float,
                  ) -> bool: ...
def conventional_flush(P: NDArray[np.float64], F: NDArray[np.float64],
                       q_error: NDArray[np.float64], acc: NDArray[np.float64],
                       q: Sequence[float], p: Sequence[float], position_limit: float,
                       ) -> bool: ...
def covariance_step(P: NDArray[np.float64], F: NDArray[np.float64],
                    q_error: NDArray[np.float64], T: float, sampling_attitude: float,
                    sampling_velocity: float) -> None: ...
def innovation(P: NDArray[np.float64], H: NDArray[np.float64], R: NDArray[np.float64],
               z: NDArray[np.float64], K: NDArray[np.float64], dx: NDArray[np.float64],
               S_inv: NDArray[np.float64]) -> float: ...
def joseph_update(P: NDArray[np.float64], H: NDArray[np.float64], R: NDArray[np.float64],
                  K: NDArray[np.float64], turn: NDArray[np.float64] | None) -> None: ...
def trident_inject(x: Sequence[float], dx: Sequence[float]) -> tuple[float, ...]: ...
def conventional_inject(q: Sequence[float], v: Sequence[float], p: Sequence[float],
                        dx: Sequence[float],
                        ) -> tuple[tuple[float, float, float, float],
                                   tuple[float, float, float], tuple[float, float, float]]: ...
def gnss_antenna(q: NDArray[np.float64], v: NDArray[np.float64], p: NDArray[np.float64],
                 omega: Sequence[float], lever: Sequence[float], out: NDArray[np.float64],
                 ) -> None: ...
def fix_drift(P: NDArray[np.float64], N: NDArray[np.float64], C: NDArray[np.float64],
              p: NDArray[np.float64], drift: NDArray[np.float64]) -> None: ...
def magnetometer_level(q: NDArray[np.float64], axes: NDArray[np.float64],
                       field: NDArray[np.float64], sample: NDArray[np.float64],
                       row: NDArray[np.float64]) -> tuple[float, float, float]: ...
def estimate_outputs(P: NDArray[np.float64], q: NDArray[np.float64], v: NDArray[np.float64],
                     p: NDArray[np.float64], R: NDArray[np.float64],
                     origin: NDArray[np.float64], to_enu: Sequence[float],
                     omega: Sequence[float], rate_variance: float, body_errors: bool,
                     out: NDArray[np.float64]) -> None: ...
def yaw_bank_advance(rotation: NDArray[np.float64], gyro_bias: NDArray[np.float64],
                     velocity: NDArray[np.float64], covariance: NDArray[np.float64],
                     dv_enu: NDArray[np.float64], window_q: Sequence[float],
                     dv: Sequence[float], duration: float, expected: Sequence[float],
                     direction: Sequence[float], share: float, bias_gain: float,
                     yaw_noise: float, mode: int) -> None: ...
