"""What each node of the simulation graph publishes, subscribes, serves and calls, read from
the nodes themselves, so that the keystore's permissions are never a hand-kept list.

The nodes of ``config/graph.yaml`` (the nodes, classes and parameter files of
``sim.launch.py``, which test/test_launch_files.py keeps in step) are created with the
launch file's ``use_sim_time``, in a private context whose discovery is off, and asked
through the ROS graph API what they have: the same names a peer sees over DDS. The operator
(the person who resets the simulator, injects faults, sends setpoints and watches) gets
what the graph offers it: every service of the nodes, the topics the graph subscribes to
but no node publishes, and every topic the nodes publish.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mav_bringup.discovery import forced_range

if TYPE_CHECKING:
    from rclpy.node import Node

OPERATOR = "operator"
OPERATOR_NODE_NAMES = (OPERATOR, "_ros2cli_*")
"""Names an operator's own node may have (DDS permissions take fnmatch patterns): a tool
of one's own names its node ``operator``; the ros2 command-line tools name theirs
``_ros2cli_...``. Its own parameter services are allowed under these names only."""


@dataclass(frozen=True)
class Endpoints:
    """Fully qualified ROS names of a node's topics and services, by direction."""

    publishes: frozenset[str] = frozenset()
    subscribes: frozenset[str] = frozenset()
    serves: frozenset[str] = frozenset()
    calls: frozenset[str] = frozenset()

    def __or__(self, other: Endpoints) -> Endpoints:
        return Endpoints(self.publishes | other.publishes, self.subscribes | other.subscribes,
                         self.serves | other.serves, self.calls | other.calls)


def _names(pairs: Iterable[tuple[str, list[str]]]) -> frozenset[str]:
    return frozenset(name for name, _types in pairs)


def observed_endpoints(observer: Node, name: str, namespace: str = "/") -> Endpoints:
    """The endpoints of node ``namespace/name`` as ``observer``'s view of the ROS graph has
    them: at once for ``observer`` itself, once discovered for a node elsewhere."""
    return Endpoints(
        publishes=_names(observer.get_publisher_names_and_types_by_node(name, namespace)),
        subscribes=_names(observer.get_subscriber_names_and_types_by_node(name, namespace)),
        serves=_names(observer.get_service_names_and_types_by_node(name, namespace)),
        calls=_names(observer.get_client_names_and_types_by_node(name, namespace)))


def own_endpoints(node: Node) -> Endpoints:
    return observed_endpoints(node, node.get_name(), node.get_namespace())


def graph_endpoints(graph_file: Path | None = None) -> dict[str, Endpoints]:
    """Every node of the simulation graph by name, and the operator (``OPERATOR``)."""
    # rclpy and the graph's node classes only here: mav-keystore --help needs neither
    import rclpy
    from rclpy.context import Context
    from rclpy.node import Node

    from mav_bringup.graph.components import default_graph_file, load_graph

    components = load_graph(graph_file or default_graph_file())
    context = Context()
    with forced_range("OFF"):  # the nodes are only looked at: they talk to nobody
        rclpy.init(context=context, args=[])
    try:
        graph = {}
        for component in components:
            # sim.launch.py runs every node on sim time (its use_sim_time argument).
            node = component.load_class()(
                context=context, cli_args=component.ros_arguments({"use_sim_time": True}))
            try:
                graph[component.name] = own_endpoints(node)
            finally:
                node.destroy_node()
        probe = Node(OPERATOR, context=context)
        try:
            own = own_endpoints(probe)
        finally:
            probe.destroy_node()
    finally:
        context.try_shutdown()
    return {**graph, OPERATOR: operator_endpoints(graph, own)}


def operator_endpoints(graph: Mapping[str, Endpoints], own: Endpoints) -> Endpoints:
    """What the operator may do, from the graph's nodes and a plain node's own endpoints
    (``own``: a node named ``OPERATOR``, whose parameter services are allowed under every
    name of ``OPERATOR_NODE_NAMES``)."""
    offered = Endpoints()
    for endpoints in graph.values():
        offered = offered | endpoints
    external_inputs = offered.subscribes - offered.publishes
    prefix = f"/{OPERATOR}/"
    own_services = {f"/{name}/{service.removeprefix(prefix)}" for service in own.serves
                    for name in OPERATOR_NODE_NAMES}
    return Endpoints(publishes=own.publishes | external_inputs,
                     subscribes=own.subscribes | offered.publishes,
                     serves=frozenset(own_services), calls=own.calls | offered.serves)
