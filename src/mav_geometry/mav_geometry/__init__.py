"""Rotation and pose algebra shared by the multirotor suite (numpy only, no ROS).

Modules:
- ``quaternion``: Hamilton quaternions, scalar-last ``[x, y, z, w]``.
- ``groups``: ``SO3``, ``SE3`` and ``SE23`` (exp, log, Ad, ad, Jacobians) on matrices.
- ``nilpotent``: ``DUAL`` (pose) and ``TRIDENT`` (attitude, velocity, position) quaternions.
- ``convert``: scipy Rotation, scalar-first papers and ROS message field order.
- ``shown``: user values quoted in error messages, short and cheap whatever the value.
"""
