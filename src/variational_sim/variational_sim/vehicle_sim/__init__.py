"""Multirotor vehicle simulator core (no ROS): plant, actuators, sensors, stepping.

- ``plant.MultirotorPlant``: the vehicle as one rigid body under rotor/drag/wing wrenches
  (drag and wings in the air-relative twist), ground contact, energy and momentum balances;
- ``motors``: rotor motor lag (with loss of efficiency and failure) and tilt servos;
- ``wind``: mean wind, 1-cosine gusts and Dryden turbulence;
- ``scenario``: scenario files (wind and timed sensor and motor faults);
- ``simulator.VehicleSimulator``: the above plus the sensors (``variational_sim.sensors``)
  at the physics rate.
"""
