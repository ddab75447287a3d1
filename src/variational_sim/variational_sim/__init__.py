"""Variational-integrator simulator for multirotors and multibody robots.

``integrators``: one-step integrators behind ``step(state, inputs) -> state`` (the
DQVI for one rigid body, left-rectangle and midpoint QVIs for the coupled/morphing
body, and RK4, RKMK4 and scipy baselines). ``models``: rigid bodies about any
reference point, the QVI paper's coupled bodies and a morphing multibody UAV.
``demos``: the zero-gravity reorientation manoeuvre. ``multibody``, ``minimal`` and
``experiments``: the maximal-coordinate multibody (Fly-Hopper) and its experiments.
``vehicle_sim`` and ``sensors``: the multirotor simulator (plant, motors, IMU, GNSS).
No ROS imports in any of these; ``ros`` is the ``simulator`` node and ``graph`` the
one-process runner ``mav-sim``.
"""
