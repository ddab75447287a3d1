"""ROS 2 shell of the simulator: ``simulator_node`` (the node), ``convert`` (messages <->
numpy) and ``parameters`` (specs and settings); QoS profiles, stamps, diagnostics and the
parameter layer come from ``mav_ros_common``."""
