#!/usr/bin/env bash
# Source the distro and the workspace overlay, then run the command.
set -eo pipefail
source "/opt/ros/${ROS_DISTRO}/setup.bash"
source /ws/install/setup.bash
exec "$@"
