"""Multirotor vehicle simulator core (no ROS): plant, actuators, sensors, stepping.

- ``plant.MultirotorPlant``: the vehicle as one rigid body under rotor/drag/wing wrenches,
  ground contact, energy and momentum balances;
- ``motors``: rotor motor lag and tilt servos;
- ``simulator.VehicleSimulator``: the above plus IMU and GNSS models at the physics rate.
"""
