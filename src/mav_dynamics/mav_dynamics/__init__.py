"""Screw-theory multirotor model, control allocation and tracking controller (numpy core).

Modules (no ROS imports):

- ``vehicle`` / ``vehicle_file``: vehicle dataclasses and the validating YAML loader
  (``config/vehicles/*.yaml``);
- ``model``: ``TreeModel``, the exact tree recursion of docs/theory/mav-screw-theory.md §2.8
  (base acceleration, motor and tilt torques); ``aero``: wing and body aerodynamics;
- ``allocation``: ``allocation_matrix`` and ``ControlAllocator`` (limits, priorities,
  status); ``controller``: ``TrackingController`` on SE(3);
- ``trajectories``: flight plans (hover, minimum-jerk moves, waypoints, figure-eight,
  take-off); ``flight``: ``FlightControl``, the ``controller`` node's logic (odometry
  screening, take-off, setpoints, plan changes, control tick, status), shared with the
  ROS-free closed-loop pipeline;
- ``derivatives``: analytic Jacobians of the base acceleration;
  ``identification``: regressor and least-squares identification;
- ``closed_form``: the paper's quadrotor and winged-quadrotor closed forms (oracles).

Typical use::

    vehicle = load_vehicle("config/vehicles/quadrotor_x.yaml")
    model = TreeModel(vehicle)
    allocator = ControlAllocator(model)
    controller = TrackingController(model, rank=allocator.rank)
    wrench = controller.update(R, p, twist, TrackingReference(p_ref)).wrench
    command = allocator.allocate(wrench)          # rotor speeds (rad/s), tilts (rad)
    dV = model.evaluate(R, twist, command.rotor_speeds).base_acceleration
"""
