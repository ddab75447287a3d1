#!/usr/bin/env bash
# Source the distro and the workspace overlay, then run the command. DDS discovery stays on
# this container's own network unless the user passes -e ROS_AUTOMATIC_DISCOVERY_RANGE=...
# (docs/security.md).
set -eo pipefail
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
source "/opt/ros/${ROS_DISTRO}/setup.bash"
source /ws/install/setup.bash
exec "$@"
