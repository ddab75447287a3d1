"""ROS 2 plumbing shared by every node of the suite.

- ``parameters``: parameter specs (unit, range, choices, read-only or dynamic), declaration
  with descriptors, validation, and run-time changes that are refused with a reason or
  applied (rclpy is imported only where a node is involved);
- ``parameter_file``: a node's parameter file and overrides read without a node, each
  value checked as the node checks it (trident-replay, the closed-loop pipeline);
- ``qos``: the QoS profiles of the suite's topics;
- ``stamps``: ``builtin_interfaces/Time`` <-> seconds and nanoseconds;
- ``diagnostics``: ``/diagnostics`` messages (levels, key/values, the topic);
- ``node_main``: the ``main()`` of a node (init, spin, shutdown, exit codes);
- ``exit_codes``: the exit codes of every node and command;
- ``streams``: bounded summaries of long sample streams for the reports (running
  statistics, min/max-preserving decimation; numpy only);
- ``plot_workers``: the reports' figures drawn by worker processes on the idle cores;
- ``resources``: installed share files (launch, parameter, vehicle and robot files).

No core module imports this package: only the ROS shells (``*/ros/``) and the bringup do.
"""
