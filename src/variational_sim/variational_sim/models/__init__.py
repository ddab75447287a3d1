"""Physical models integrated by ``variational_sim.integrators`` (no ROS)."""
