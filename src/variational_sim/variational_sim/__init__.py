"""Variational-integrator simulator for multirotors and multibody robots.

``integrators``: one-step integrators behind ``step(state, inputs) -> state`` (the
DQVI for one rigid body, left-rectangle and midpoint QVIs for the coupled/morphing
body, and RK4, RKMK4 and scipy baselines). ``models``: rigid bodies about any
reference point, the QVI paper's coupled bodies and a morphing multibody UAV.
``demos``: the zero-gravity reorientation manoeuvre. No ROS imports here.
"""
