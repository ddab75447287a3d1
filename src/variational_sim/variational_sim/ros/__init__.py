"""ROS 2 shell of the simulator: ``simulator_node`` (the node), ``convert`` (messages <->
numpy), ``parameters`` (specs and settings) and ``vehicle_setup`` (the core built from the
settings, files resolved; no rclpy); QoS profiles, stamps, diagnostics and the parameter
layer come from ``mav_ros_common``."""
