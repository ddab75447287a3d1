"""ROS 2 shell of ``mav_dynamics``: the controller/allocator node and its message conversion.

The numpy core (``mav_dynamics.controller``, ``allocation``, ``trajectories``, and
``flight``, which holds the node's flight logic) never imports rclpy; only this subpackage
does.
"""
