"""Sensor models of the simulator (numpy and pymap3d only, no ROS).

- ``imu``: gyro and accelerometer in ``imu_link`` with Earth rate, lever arm, mount,
  bias processes, white noise, spikes and saturation; WGS-84 Earth rate and normal
  gravity in ENU.
- ``gnss``: antenna position/velocity fixes (geodetic and ENU) with white and
  Gauss-Markov errors, latency and outages.
- ``noise``: blocked standard normals and exact Gauss-Markov discretisation.
"""
