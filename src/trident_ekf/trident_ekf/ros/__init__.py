"""ROS 2 shell of trident_ekf: the estimator node, its parameters and message conversion."""
