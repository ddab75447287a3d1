"""ROS 2 shell of the simulator: ``simulator_node`` (the node), ``convert`` (messages <->
numpy), ``parameters`` (declaration and validation) and ``qos`` (the contract's profiles)."""
