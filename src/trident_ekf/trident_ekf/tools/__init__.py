"""Command-line tools: ``trident-import`` (flight log to rosbag2 MCAP) and ``trident-replay``."""
