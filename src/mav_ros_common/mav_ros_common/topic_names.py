"""Topic names shared by the nodes and the offline tools, importable without ROS: a replay
that writes the node's topics into a bag must not load rclpy for a name."""

DIAGNOSTICS_TOPIC = "/diagnostics"
"""The topic every node reports on (absolute: one aggregated stream, as ROS tools expect)."""
