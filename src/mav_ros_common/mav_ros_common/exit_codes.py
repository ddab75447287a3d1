"""Exit codes of every command and node of the suite (no rclpy import: the offline tools use
them too).

- ``EXIT_OK`` (0): done (a node also on Ctrl-C or a shutdown from outside);
- ``EXIT_FAILED`` (1): the work could not be done: an input cannot be read, an output cannot
  be written, an unexpected error in a node;
- ``EXIT_USAGE`` (2): a usage error, a parameter refused, an output that exists;
- ``EXIT_PARTIAL`` (3): the input was truncated or corrupt; what could be read was used and
  a warning says what was lost (``--allow-partial`` makes this 0);
- ``EXIT_INTERRUPTED`` (130) and ``EXIT_TERMINATED`` (143): stopped by SIGINT (Ctrl-C) or
  SIGTERM (docker stop, systemd, CI), the shells' 128 + signal number.
"""

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
