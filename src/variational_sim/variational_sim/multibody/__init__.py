"""Maximal-coordinate multibody dynamics with a variational integrator (no ROS).

Configuration: per body the world position of its centre of mass (m) and a unit
quaternion (scalar-last, body to world). Tangent vectors, momenta and wrenches are
6 per body in ``(angular, linear)`` order: rotation angle / angular momentum /
torque in the body frame, translation / linear momentum / force in the world frame.
"""
