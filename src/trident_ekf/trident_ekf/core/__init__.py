"""ROS-free core of the trident-quaternion EKF: Earth model, mechanization, filters, simulation.

Conventions (see docs/theory/trident-ekf.md; section numbers cited in this package are its):
- navigation frame ECEF (e), body frame b (FLU when fed from ROS), quaternions scalar-last;
- IMU biases follow the paper's sign: truth = reading + bias (``omega = omega_meas + b_g``);
- error states are 15-vectors ``[attitude, velocity, position, gyro bias, accel bias]``,
  18 with the optional GNSS position bias (first-order Gauss-Markov, ENU axes at the start;
  ``FilterConfig.gnss_bias_sigma_*``) appended.
"""

from trident_ekf.core.baseline import BaselineESKF
from trident_ekf.core.config import FilterConfig
from trident_ekf.core.filter import FilterStatus
from trident_ekf.core.trident import TridentEKF

__all__ = ["BaselineESKF", "FilterConfig", "FilterStatus", "TridentEKF"]
