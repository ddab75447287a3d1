"""Sensor models of the simulator (numpy and pymap3d only, no ROS).

- ``base``: the interface every sensor implements (rate, latency, seeded noise, fault
  hooks, true-error report values, message filling) and the truth it reads;
- ``imu``: gyro and accelerometer in ``imu_link`` with Earth rate, lever arm, mount,
  bias processes, white noise, spikes and saturation; WGS-84 Earth rate and normal
  gravity in ENU;
- ``gnss``: antenna position/velocity fixes (geodetic and ENU) with white and
  Gauss-Markov errors, latency, outages, spoofing and degraded accuracy;
- ``barometer``: static pressure in the day's atmosphere with drift and rotor-downwash
  ground effect;
- ``magnetometer``: the Earth field in ``imu_link`` with hard and soft iron, motor
  interference and disturbances near the ground;
- ``noise``: blocked standard normals and exact Gauss-Markov discretisation;
- ``optional``: the registry of the sensors a vehicle may carry besides IMU and GNSS.

Adding a sensor: one module here (a ``base.Sensor`` with a config of
``mav_geometry.settings.setting`` fields), its entry in ``optional.OPTIONAL_SENSORS`` with
a ``SimulatorConfig`` field and a seed stream of the same name, and its block in the
simulator's parameter file; the node then declares, builds and publishes it.
"""
