"""What the launch files share: whether rviz2 is installed, checked before any node starts.

``ros2 launch`` starts actions in order and a missing package fails only when its node is
reached, after the others run. The launch files therefore default ``rviz`` to whether rviz2
is installed, and put ``OpaqueFunction(function=require_rviz2)`` before every node, so an
explicit ``rviz:=true`` without rviz2 stops the launch before anything starts.
"""

from __future__ import annotations

import os
from typing import Any

from ament_index_python.packages import PackageNotFoundError, get_package_prefix

RVIZ_PACKAGE = "rviz2"


def rviz2_installed() -> bool:
    """rviz2 is on the ament prefix path (a sourced distro or overlay)."""
    if not os.environ.get("AMENT_PREFIX_PATH"):
        return False
    try:
        get_package_prefix(RVIZ_PACKAGE)
    except PackageNotFoundError:
        return False
    return True


def rviz_default() -> str:
    """Default of the ``rviz`` launch argument: ``"true"`` only where rviz2 is installed."""
    return "true" if rviz2_installed() else "false"


def require_rviz2(context: Any) -> list[Any]:
    """OpaqueFunction body: refuse ``rviz:=true`` without rviz2, before any node starts."""
    wanted = str(context.launch_configurations.get("rviz", "false")).lower() in {"true", "1"}
    if wanted and not rviz2_installed():
        raise RuntimeError(
            "rviz:=true but rviz2 is not installed (apt install ros-$ROS_DISTRO-rviz2, or "
            "run rviz2 on another machine on the same ROS_DOMAIN_ID); nothing was started. "
            "Run with rviz:=false to go on without it.")
    return []
