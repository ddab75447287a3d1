"""Trident-quaternion IMU/GNSS error-state EKF (skeleton)."""
