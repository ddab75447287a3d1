"""Static checks of launch/*.launch.py and config/rviz/trident.rviz against the real nodes.

launch_ros is not installable here, so the launch files are read with `ast`, never imported:
`LaunchFileReader` performs their substitutions (LaunchConfiguration, PathJoinSubstitution,
ParameterValue, conditions, includes) the way `ros2 launch` does, for the default arguments
or any others. The nodes they start are then instantiated with real rclpy (private context,
isolated DDS domain from the `ros_env` fixture, never spun) with the same parameter files,
overrides and remappings, which tells which parameters they declare and which topics they
publish and subscribe, with which types and QoS. test/test_docker_image.py reuses the reader
to find every file the launch files read inside the image.
"""

from __future__ import annotations

import array
import ast
import contextlib
import importlib
import math
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

import pytest
import rclpy
import yaml
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from mav_bringup import discovery
from mav_bringup.launch_support import fleet_node_arguments, rviz2_installed
from mav_bringup.security.keystore import enclave_of
from mav_ros_common.parameters import flattened
from mav_ros_common.resources import package_share

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_DIR = ROOT / "launch"
CONFIG_DIR = ROOT / "config"
RVIZ_CONFIG = CONFIG_DIR / "rviz" / "trident.rviz"
GRAPH_FILE = CONFIG_DIR / "graph.yaml"
BRINGUP = "mav_bringup"
PACKAGES = {"mav_geometry", "mav_dynamics", "variational_sim", "trident_ekf", "mav_ros_common",
            BRINGUP}
LAUNCH_FILES = ["sim.launch.py", "estimator.launch.py", "replay.launch.py", "fleet.launch.py"]
# The launch files that can start rviz2 (fleet.launch.py shows no single vehicle: none).
RVIZ_LAUNCH_FILES = ["sim.launch.py", "estimator.launch.py", "replay.launch.py"]
# Node factories of OpaqueFunction actions, by function name: what they build, as
# launch_ros.actions.Node keyword arguments, from the launch configurations.
NODE_FACTORIES = {"launch_fleet": fleet_node_arguments}
# What each launch file starts with its default arguments (launch/README.md): rviz2 only
# where it is installed.
RVIZ = {"rviz2"} if rviz2_installed() else set()
DEFAULT_NODES = {
    "sim.launch.py": {"simulator", "controller", "trident_ekf"} | RVIZ,
    "estimator.launch.py": {"trident_ekf"},
    "replay.launch.py": {"trident_ekf"} | RVIZ,
    "fleet.launch.py": {"simulator", "controller", "trident_ekf"},
}
# Inputs of the estimator, which a replay must play from the bag.
ESTIMATOR_INPUTS = {"/imu/data", "/gnss/fix", "/gnss/vel"}
# Arguments without a default must be given on the command line; these stand in for them.
REQUIRED_ARGUMENT_VALUES = {"bag": "/data/flight_bag"}
# Values tried beyond each argument's declared choices: every shipped vehicle and scenario.
MORE_ARGUMENT_VALUES = {
    "vehicle": sorted(p.name for p in (CONFIG_DIR / "vehicles").glob("*.yaml")),
    # motor_failure names rotor 4: it is for the hexarotor, not the default vehicle.
    "scenario": sorted(p.stem for p in (CONFIG_DIR / "scenarios").glob("*.yaml")
                       if p.stem != "motor_failure"),
}
# Topics the simulation graph leaves to the user (commands), not fed by any of its nodes.
EXTERNAL_INPUTS = {"/controller/setpoint"}
# Message type each rviz2 display subscribes to.
RVIZ_DISPLAY_TYPES = {
    "rviz_default_plugins/Odometry": "nav_msgs/msg/Odometry",
    "rviz_default_plugins/MarkerArray": "visualization_msgs/msg/MarkerArray",
    "rviz_default_plugins/Marker": "visualization_msgs/msg/Marker",
    "rviz_default_plugins/Path": "nav_msgs/msg/Path",
    "rviz_default_plugins/Pose": "geometry_msgs/msg/PoseStamped",
    "rviz_default_plugins/WrenchStamped": "geometry_msgs/msg/WrenchStamped",
}
# rviz2's QoS wording.
RVIZ_RELIABILITY = {"Reliable": ReliabilityPolicy.RELIABLE,
                    "Best Effort": ReliabilityPolicy.BEST_EFFORT}
RVIZ_DURABILITY = {"Transient Local": DurabilityPolicy.TRANSIENT_LOCAL,
                   "Volatile": DurabilityPolicy.VOLATILE}


# ---------------------------------------------------------------- reading launch files


def call_name(node: ast.AST) -> str | None:
    """`Node` for `Node(...)` and for `launch_ros.actions.Node(...)`; None if not a call."""
    if not isinstance(node, ast.Call):
        return None
    function = node.func
    if isinstance(function, ast.Attribute):
        return function.attr
    return function.id if isinstance(function, ast.Name) else None


def keyword(call: ast.Call, name: str, position: int | None = None) -> ast.expr | None:
    """The argument `name` of a call, given by keyword or at `position`."""
    for item in call.keywords:
        if item.arg == name:
            return item.value
    if position is not None and len(call.args) > position:
        return call.args[position]
    return None


def is_true(text: str) -> bool:
    """A launch condition's value, as IfCondition reads it."""
    lowered = str(text).lower()
    if lowered not in {"true", "1", "false", "0"}:
        raise ValueError(f"condition value {text!r} is not true/false/1/0")
    return lowered in {"true", "1"}


def coerce(text: str, value_type: str | None) -> Any:
    """ParameterValue(substitution, value_type=...) as launch's coerce_to_type performs it."""
    if value_type == "str":
        return text
    if value_type in {"int", "float"}:
        return {"int": int, "float": float}[value_type](text)
    value = yaml.safe_load(text)
    if value_type == "bool" and not isinstance(value, bool):
        raise ValueError(f"{text!r} is not a bool")
    return value



@dataclass
class NodeLaunch:
    """One Node(...) action with its substitutions performed."""

    launch_file: str
    package: str
    executable: str
    name: str
    enabled: bool
    namespace: str = ""
    parameter_files: list[Path] = field(default_factory=list)
    overrides: dict[str, Any] = field(default_factory=dict)
    remappings: list[tuple[str, str]] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)
    ros_arguments: list[str] = field(default_factory=list)

    def given_parameters(self) -> dict[str, Any]:
        """Every parameter value the node gets: its files in order, then the overrides."""
        values = {}
        for path in self.parameter_files:
            document = yaml.safe_load(path.read_text())
            values |= flattened(document[self.name]["ros__parameters"])
        return values | self.overrides

    def cli_args(self) -> list[str]:
        """The node's command line as launch_ros builds it (overrides go separately)."""
        arguments = ["--ros-args", *self.ros_arguments, "-r", f"__node:={self.name}"]
        if self.namespace:
            arguments += ["-r", f"__ns:=/{self.namespace}"]
        for path in self.parameter_files:
            arguments += ["--params-file", str(path)]
        for source, target in self.remappings:
            arguments += ["-r", f"{source}:={target}"]
        return arguments


@dataclass
class Launched:
    """Everything one `ros2 launch` would start, includes expanded."""

    nodes: list[NodeLaunch] = field(default_factory=list)
    processes: list[list[str]] = field(default_factory=list)
    launch_files: list[Path] = field(default_factory=list)
    configurations: dict[str, str] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)  # SetEnvironmentVariable

    def node(self, name: str) -> NodeLaunch:
        (found,) = [n for n in self.nodes if n.name == name]
        return found


ShareOf = Callable[[str], PurePath]
"""Where a package's share directory is (FindPackageShare): installed here, or in an image."""


def installed_share(package: str) -> PurePath:
    return package_share(package)


class LaunchFileReader:
    """A launch file of the repository read with `ast`, as installed where `share_of` says."""

    def __init__(self, path: Path, share_of: ShareOf = installed_share) -> None:
        self.path = path
        self.share_of = share_of
        self.location = share_of(BRINGUP) / "launch" / path.name
        self.tree = ast.parse(path.read_text(), filename=str(path))
        self.constants = self._module_constants()
        (entry_point,) = [
            statement for statement in self.tree.body
            if isinstance(statement, ast.FunctionDef)
            and statement.name == "generate_launch_description"
        ]
        # Local names of the entry point (substitutions, actions), by expression.
        self.locals = {
            statement.targets[0].id: statement.value
            for statement in ast.walk(entry_point)
            if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name)
        }
        self.declarations = {
            ast.literal_eval(call.args[0]): call for call in self.calls("DeclareLaunchArgument")
        }

    def calls(self, name: str) -> list[ast.Call]:
        return [node for node in ast.walk(self.tree) if call_name(node) == name]

    def choices(self, argument: str) -> list[str]:
        """The values an argument is restricted to; empty when it takes any."""
        choices = keyword(self.declarations[argument], "choices")
        return [] if choices is None else self.evaluate(choices, {})

    def used_configurations(self) -> set[str]:
        return {ast.literal_eval(call.args[0]) for call in self.calls("LaunchConfiguration")}

    def _module_constants(self) -> dict[str, Any]:
        """Module-level names computable without launch (paths, lists of strings)."""
        constants: dict[str, Any] = {}
        for statement in self.tree.body:
            # The bringup's own helpers are plain Python: imported for real.
            if isinstance(statement, ast.ImportFrom) and statement.module and (
                    statement.module.split(".")[0] == BRINGUP):
                module = importlib.import_module(statement.module)
                constants |= {alias.name: getattr(module, alias.name) for alias in statement.names}
            if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name):
                with contextlib.suppress(NameError):
                    constants[statement.targets[0].id] = self._python(statement.value, constants)
        return constants

    def _python(self, expr: ast.expr, constants: dict[str, Any]) -> Any:
        namespace = {"__builtins__": {"str": str}, "Path": Path, "__file__": str(self.location)}
        code = compile(ast.Expression(expr), str(self.path), "eval")
        return eval(code, {**namespace, **constants})

    def evaluate(self, expr: ast.expr, configurations: dict[str, str]) -> Any:
        """Perform the substitutions of `expr` for the given launch configurations."""
        if isinstance(expr, ast.Name) and expr.id in self.locals:
            return self.evaluate(self.locals[expr.id], configurations)
        name = call_name(expr)
        if name == "LaunchConfiguration":
            return configurations[ast.literal_eval(expr.args[0])]
        if name == "FindPackageShare":
            return str(self.share_of(self.evaluate(expr.args[0], configurations)))
        if name == "PathJoinSubstitution":
            return os.path.join(*map(str, self.evaluate(expr.args[0], configurations)))
        if name == "ParameterValue":
            value_type = keyword(expr, "value_type", 1)
            text = str(self.evaluate(expr.args[0], configurations))
            return coerce(text, value_type.id if value_type is not None else None)
        if name in {"IfCondition", "UnlessCondition"}:
            value = is_true(self.evaluate(expr.args[0], configurations))
            return value if name == "IfCondition" else not value
        if isinstance(expr, ast.List | ast.Tuple):
            items: list[Any] = []
            for element in expr.elts:
                if isinstance(element, ast.Starred):
                    items += self.evaluate(element.value, configurations)
                else:
                    items.append(self.evaluate(element, configurations))
            return items
        if isinstance(expr, ast.Dict):
            return {self.evaluate(k, configurations): self.evaluate(v, configurations)
                    for k, v in zip(expr.keys, expr.values, strict=True)}
        return self._python(expr, self.constants)

    def parameter_value(self, expr: ast.expr, configurations: dict[str, str]) -> Any:
        """A value of a Node's parameter dict: bare substitutions are read as YAML."""
        value = self.evaluate(expr, configurations)
        if call_name(expr) in {"LaunchConfiguration", "PathJoinSubstitution"}:
            return yaml.safe_load(value)
        return value

    def configurations(self, given: dict[str, str]) -> dict[str, str]:
        """Launch configurations after this file's DeclareLaunchArgument actions."""
        result = dict(given)
        for name, declaration in self.declarations.items():
            if name in result:
                continue
            default = keyword(declaration, "default_value", 1)
            if default is None:
                raise KeyError(f"{self.path.name}: argument '{name}' has no default; give it")
            result[name] = str(self.evaluate(default, result))
        return result

    def launch(self, given: dict[str, str] | None = None) -> Launched:
        """What `ros2 launch <file> name:=value ...` starts, for `given` arguments."""
        configurations = self.configurations(given or {})
        launched = Launched(launch_files=[self.location], configurations=configurations)
        for call in self.calls("Node"):
            if not call.args and all(item.arg is None for item in call.keywords):
                continue  # Node(**arguments) inside a node factory: see NODE_FACTORIES
            launched.nodes.append(self._node(call, configurations))
        for call in self.calls("OpaqueFunction"):
            factory = NODE_FACTORIES.get(ast.unparse(keyword(call, "function", 0)))
            for arguments in factory(configurations) if factory else []:
                launched.nodes.append(NodeLaunch(
                    launch_file=self.path.name, package=arguments["package"],
                    executable=arguments["executable"], name=arguments["name"], enabled=True,
                    namespace=arguments.get("namespace", ""),
                    overrides=flattened({k: v for entry in arguments["parameters"]
                                         for k, v in entry.items()})))
        for call in self.calls("SetEnvironmentVariable"):
            variable, value = (self.evaluate(a, configurations) for a in call.args[:2])
            launched.environment[str(variable)] = str(value)
        for call in self.calls("ExecuteProcess"):
            launched.processes.append(
                [str(part) for part in self.evaluate(keyword(call, "cmd", 0), configurations)])
        for call in self.calls("IncludeLaunchDescription"):
            (source,) = call.args
            included = Path(self.evaluate(source.args[0], configurations))
            arguments = keyword(call, "launch_arguments")  # {name: value}.items()
            passed = self.evaluate(arguments.func.value, configurations) if arguments else {}
            # Included files share the launch context: the includer's configurations show.
            assert included.parent == PurePath(self.share_of(BRINGUP)) / "launch", included
            reader = LaunchFileReader(LAUNCH_DIR / included.name, self.share_of)
            child = reader.launch({**configurations, **passed})
            launched.nodes += child.nodes
            launched.processes += child.processes
            launched.launch_files += child.launch_files
            launched.environment |= child.environment
        return launched

    def _node(self, call: ast.Call, configurations: dict[str, str]) -> NodeLaunch:
        def argument(name: str, default: Any) -> Any:
            expr = keyword(call, name)
            return default if expr is None else self.evaluate(expr, configurations)

        node = NodeLaunch(
            launch_file=self.path.name,
            package=argument("package", None),
            executable=argument("executable", None),
            name=argument("name", None),
            enabled=argument("condition", True),
            remappings=[tuple(pair) for pair in argument("remappings", [])],
            arguments=argument("arguments", []),
            ros_arguments=argument("ros_arguments", []),
        )
        parameters = keyword(call, "parameters")
        for entry in parameters.elts if parameters is not None else []:
            if isinstance(entry, ast.Dict):
                for key, value in zip(entry.keys, entry.values, strict=True):
                    name = ast.literal_eval(key)
                    node.overrides[name] = self.parameter_value(value, configurations)
            else:
                node.parameter_files.append(Path(self.evaluate(entry, configurations)))
        return node


def reader(launch_file: str, share_of: ShareOf = installed_share) -> LaunchFileReader:
    return LaunchFileReader(LAUNCH_DIR / launch_file, share_of)


def referenced_paths(launch_file: str, share_of: ShareOf) -> set[PurePath]:
    """Every file or folder in the bringup's share directory that launching with defaults
    reads."""
    share = PurePath(share_of(BRINGUP))
    launched = reader(launch_file, share_of).launch(dict(REQUIRED_ARGUMENT_VALUES))
    values: list[Any] = [launched.launch_files, launched.processes]
    for node in launched.nodes:
        values += [node.parameter_files, list(node.overrides.values()), node.arguments]
    paths = set()
    while values:
        value = values.pop()
        if isinstance(value, list):
            values += value
        elif isinstance(value, str | PurePath) and PurePath(value).is_relative_to(share):
            paths.add(PurePath(value))
    return paths


# ---------------------------------------------------------------- workspace facts


def console_scripts(package: str) -> dict[str, str]:
    """Console script name -> `module:function`, from the package's setup.py."""
    tree = ast.parse((ROOT / "src" / package / "setup.py").read_text())
    (setup_call,) = [n for n in ast.walk(tree) if call_name(n) == "setup"]
    entry_points = keyword(setup_call, "entry_points")
    scripts = ast.literal_eval(entry_points).get("console_scripts", []) if entry_points else []
    return dict(
        (part.strip() for part in script.split("=", 1)) for script in scripts
    )


def graph_file_nodes() -> dict[str, dict[str, Any]]:
    """The one-process graph (config/graph.yaml) by node name."""
    return {entry["name"]: entry for entry in yaml.safe_load(GRAPH_FILE.read_text())["nodes"]}


def node_class(name: str) -> type[Node]:
    """The node class of a workspace node name, as the graph file names it."""
    module_name, _, class_name = graph_file_nodes()[name]["plugin"].partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def comparable(value: Any) -> Any:
    """Parameter values as plain Python: arrays (array.array from rclpy) as lists, an
    empty list as unset (None), which is how rcl reads `[]` in a parameter file, and NaN
    (a "not given" value) as the string "nan" so that it equals itself."""
    if isinstance(value, array.array | tuple | list):
        return [comparable(item) for item in value] or None
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


def type_name(message_class: type) -> str:
    return f"{message_class.__module__.split('.')[0]}/msg/{message_class.__name__}"


@dataclass
class NodeFacts:
    """Topics an instantiated node publishes and subscribes: name -> (type, QoS)."""

    publishers: dict[str, tuple[str, QoSProfile]]
    subscriptions: dict[str, tuple[str, QoSProfile]]


@pytest.fixture(scope="module")
def ros_context(ros_env: dict[str, str]) -> Iterator[Context]:
    context = Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        context.try_shutdown()


@contextlib.contextmanager
def instantiated(node: NodeLaunch, context: Context) -> Iterator[Node]:
    """The node as launch would start it (same files, overrides, remappings), never spun."""
    overrides = [Parameter(name, value=value) for name, value in node.overrides.items()]
    instance = node_class(node.name)(
        context=context, cli_args=node.cli_args(), parameter_overrides=overrides)
    try:
        yield instance
    finally:
        instance.destroy_node()


def interfaces_importable(node: NodeLaunch) -> bool:
    """False for an estimator whose `inputs` profile needs an interface package that is not
    installed (px4_msgs: optional, tools/bootstrap builds it into the venv)."""
    if node.overrides.get("inputs") != "px4":
        return True
    try:
        importlib.import_module("px4_msgs.msg")
    except ImportError:
        return False
    return True


def workspace_nodes(launched: Launched) -> list[NodeLaunch]:
    return [node for node in launched.nodes if node.package in PACKAGES]


@pytest.fixture(scope="module")
def sim_graph(ros_context: Context) -> dict[str, NodeFacts]:
    """Topics of every workspace node of sim.launch.py with default arguments."""
    facts = {}
    for node in workspace_nodes(reader("sim.launch.py").launch()):
        with instantiated(node, ros_context) as instance:
            facts[node.name] = NodeFacts(
                publishers={p.topic_name: (type_name(p.msg_type), p.qos_profile)
                            for p in instance.publishers},
                subscriptions={s.topic_name: (type_name(s.msg_type), s.qos_profile)
                               for s in instance.subscriptions},
            )
    return facts


def publishers_of(graph: dict[str, NodeFacts]) -> dict[str, list[tuple[str, QoSProfile]]]:
    """Every publisher of the graph by topic (several nodes publish /tf and /diagnostics)."""
    publishers: dict[str, list[tuple[str, QoSProfile]]] = {}
    for facts in graph.values():
        for topic, publisher in facts.publishers.items():
            publishers.setdefault(topic, []).append(publisher)
    return publishers


def assert_subscription_matches(
        what: str, topic: str, message_type: str, reliability: ReliabilityPolicy,
        durability: DurabilityPolicy, graph: dict[str, NodeFacts]) -> None:
    """`what` subscribing `topic` with this type and QoS gets data from the graph's publishers."""
    publishers = publishers_of(graph).get(topic)
    assert publishers, f"{what}: no node of the graph publishes {topic}"
    for published_type, qos in publishers:
        assert published_type == message_type, f"{what}: {topic} is {published_type}"
        # A reliable or transient-local subscription ignores weaker publishers.
        if reliability == ReliabilityPolicy.RELIABLE:
            assert qos.reliability == reliability, f"{what}: {topic} is published best effort"
        if durability == DurabilityPolicy.TRANSIENT_LOCAL:
            assert qos.durability == durability, f"{what}: {topic} is published volatile"


# ---------------------------------------------------------------- launch files


@pytest.mark.parametrize("launch_file", LAUNCH_FILES)
def test_every_configuration_is_declared_and_every_argument_used(launch_file):
    launch = reader(launch_file)
    declared, used = set(launch.declarations), launch.used_configurations()
    assert used - declared == set(), "LaunchConfiguration without DeclareLaunchArgument"
    assert declared - used == set(), "declared arguments that nothing uses"
    for include in launch.calls("IncludeLaunchDescription"):
        included = reader(Path(launch.evaluate(include.args[0].args[0], {})).name)
        configurations = launch.configurations(dict(REQUIRED_ARGUMENT_VALUES))
        passed = launch.evaluate(keyword(include, "launch_arguments").func.value, configurations)
        assert set(passed) <= set(included.declarations), f"passed to {included.path.name}"


@pytest.mark.parametrize("launch_file", LAUNCH_FILES)
def test_default_arguments_start_the_documented_nodes(launch_file):
    launch = reader(launch_file)
    launched = launch.launch(dict(REQUIRED_ARGUMENT_VALUES))
    assert {node.name for node in launched.nodes if node.enabled} == DEFAULT_NODES[launch_file]
    for name in launch.declarations:
        choices = launch.choices(name)
        assert not choices or launched.configurations[name] in choices, name


@pytest.mark.parametrize("launch_file", LAUNCH_FILES)
def test_nodes_run_console_scripts_of_workspace_packages(launch_file):
    for node in reader(launch_file).launch(dict(REQUIRED_ARGUMENT_VALUES)).nodes:
        if node.package == "rviz2":
            assert node.executable == "rviz2"
            flag, path = node.arguments
            assert flag == "-d"
            assert Path(path).resolve() == RVIZ_CONFIG.resolve()
            continue
        assert node.package in PACKAGES, node.package
        scripts = console_scripts(node.package)
        assert node.executable in scripts, f"{node.package} has no console script {node.executable}"
        module, _, function = scripts[node.executable].partition(":")
        source = ROOT / "src" / node.package / (module.replace(".", "/") + ".py")
        assert source.is_file(), f"{node.executable} -> {module}: no {source.relative_to(ROOT)}"
        defined = {f.name for f in ast.parse(source.read_text()).body
                   if isinstance(f, ast.FunctionDef)}
        assert function in defined, f"{source.relative_to(ROOT)} defines no {function}()"


@pytest.mark.parametrize("launch_file", LAUNCH_FILES)
def test_parameter_files_are_ros2_params_of_the_node(launch_file):
    for node in workspace_nodes(reader(launch_file).launch(dict(REQUIRED_ARGUMENT_VALUES))):
        if node.namespace:
            # A file keyed by the plain name does not reach a node in a namespace: it gets
            # the shipped file's values as a dictionary (launch_ros keys it by full name).
            shipped = CONFIG_DIR / {"controller": "controller.yaml",
                                    "trident_ekf": "estimator.yaml"}[node.name]
            values = yaml.safe_load(shipped.read_text())[node.name]["ros__parameters"]
            assert set(flattened(values)) <= set(node.overrides), node.name
            continue
        assert node.parameter_files, f"{node.name} gets no parameter file"
        for path in node.parameter_files:
            assert path.is_file(), f"{node.name}: {path} is missing"
            document = yaml.safe_load(path.read_text())
            assert list(document) == [node.name], f"{path.name}: top-level key must be the name"
            assert list(document[node.name]) == ["ros__parameters"], path.name
            assert isinstance(document[node.name]["ros__parameters"], dict), path.name


@pytest.mark.parametrize("launch_file", LAUNCH_FILES)
def test_discovery_stays_on_this_machine_unless_the_user_widens_it(launch_file, monkeypatch):
    launch = reader(launch_file)
    assert launch.choices("discovery_range") == list(discovery.RANGES)
    monkeypatch.delenv(discovery.VARIABLE, raising=False)
    launched = launch.launch(dict(REQUIRED_ARGUMENT_VALUES))
    assert launched.environment == {discovery.VARIABLE: "LOCALHOST"}
    widened = launch.launch({**REQUIRED_ARGUMENT_VALUES, "discovery_range": "SUBNET"})
    assert widened.environment == {discovery.VARIABLE: "SUBNET"}
    # A range the user already exported is kept.
    monkeypatch.setenv(discovery.VARIABLE, "OFF")
    assert launch.launch(dict(REQUIRED_ARGUMENT_VALUES)).environment == {
        discovery.VARIABLE: "OFF"}


@pytest.mark.parametrize("launch_file", LAUNCH_FILES)
def test_the_discovery_range_is_set_before_anything_starts(launch_file):
    # Processes inherit the environment at their start: a later SetEnvironmentVariable
    # would leave the nodes before it on the middleware's default range (the subnet).
    launch = reader(launch_file)
    (description,) = [call for call in launch.calls("LaunchDescription") if call.args]
    actions = [call_name(a) or getattr(a, "id", None) for a in description.args[0].elts]
    starts = [i for i, action in enumerate(actions) if action not in {
        "DeclareLaunchArgument", "OpaqueFunction", "SetEnvironmentVariable"}]
    (setting,) = launch.calls("SetEnvironmentVariable")
    assert actions.index("SetEnvironmentVariable") < min(starts), actions
    assert ast.unparse(setting.args[1]) == "LaunchConfiguration('discovery_range')"
    if launch_file == "fleet.launch.py":  # its per-vehicle nodes come from an OpaqueFunction
        assert actions.index("SetEnvironmentVariable") < actions.index("OpaqueFunction")


def argument_variants(launch_file: str) -> Iterator[dict[str, str]]:
    """The default arguments, then each choice (or shipped value) of each argument in turn."""
    yield dict(REQUIRED_ARGUMENT_VALUES)
    launch = reader(launch_file)
    for name in launch.declarations:
        for value in launch.choices(name) + MORE_ARGUMENT_VALUES.get(name, []):
            yield {**REQUIRED_ARGUMENT_VALUES, name: value}


@pytest.mark.parametrize("launch_file", LAUNCH_FILES)
def test_nodes_declare_and_accept_every_parameter_they_are_given(launch_file, ros_context):
    seen = set()
    for arguments in argument_variants(launch_file):
        for node in workspace_nodes(reader(launch_file).launch(arguments)):
            key = repr((node.name, node.parameter_files, sorted(node.overrides.items())))
            if key in seen or not interfaces_importable(node):
                continue
            seen.add(key)
            with instantiated(node, ros_context) as instance:
                for name, value in node.given_parameters().items():
                    where = f"{node.name} ({launch_file}, {arguments})"
                    assert instance.has_parameter(name), f"{where} does not declare '{name}'"
                    actual = comparable(instance.get_parameter_or(name).value)
                    assert actual == comparable(value), f"{where}: {name}={actual!r}, not {value!r}"


@pytest.mark.parametrize("launch_file", LAUNCH_FILES)
def test_remappings_connect_topics_of_the_graph(launch_file, sim_graph):
    for node in workspace_nodes(reader(launch_file).launch(dict(REQUIRED_ARGUMENT_VALUES))):
        own = sim_graph[node.name]
        for source, target in node.remappings:
            assert source in own.subscriptions, f"{node.name} remaps {source}, not an input"
            message_type, qos = own.subscriptions[source]
            # With default arguments the remapping is the identity onto the simulator's topic.
            assert_subscription_matches(f"{node.name} ({launch_file})", target, message_type,
                                        qos.reliability, qos.durability, sim_graph)


def test_sim_graph_feeds_every_subscription_with_matching_type_and_qos(sim_graph):
    for name, facts in sim_graph.items():
        for topic, (message_type, qos) in facts.subscriptions.items():
            if topic not in EXTERNAL_INPUTS:
                assert_subscription_matches(
                    name, topic, message_type, qos.reliability, qos.durability, sim_graph)


def test_sim_nodes_agree_on_lock_step_and_map_origin():
    launched = reader("sim.launch.py").launch()
    simulator = launched.node("simulator").given_parameters()
    controller = launched.node("controller").given_parameters()
    estimator = launched.node("trident_ekf").given_parameters()
    # The simulator waits for one actuator command per lock-step period.
    assert controller["rate_hz"] * simulator["lockstep_period_s"] == pytest.approx(1.0)
    # Ground truth and estimate are drawn in one map frame only if both put it at the datum.
    assert simulator["datum"] == [estimator["datum_latitude_deg"],
                                  estimator["datum_longitude_deg"], estimator["datum_height_m"]]


def test_sim_launch_and_the_one_process_graph_agree():
    graph = graph_file_nodes()
    nodes = workspace_nodes(reader("sim.launch.py").launch())
    assert {node.name for node in nodes} == set(graph)
    for node in nodes:
        module = console_scripts(node.package)[node.executable].partition(":")[0]
        assert graph[node.name]["plugin"].partition(":")[0] == module, node.name
        expected = (CONFIG_DIR / graph[node.name]["parameters"]).resolve()
        assert [p.resolve() for p in node.parameter_files] == [expected], node.name


def test_sim_nodes_run_in_the_enclaves_of_the_keystore():
    # mav-keystore writes one enclave per node of the graph; with ROS_SECURITY_ENABLE=true
    # each node must start in its own, or it is refused (or gets another's permissions).
    for node in workspace_nodes(reader("sim.launch.py").launch()):
        assert node.ros_arguments == ["--enclave", enclave_of(node.name)], node.name


def test_sim_runs_every_node_on_sim_time_and_ends_with_the_simulator():
    launch = reader("sim.launch.py")
    for node in launch.launch().nodes:
        assert node.overrides.get("use_sim_time") is True, node.name
    simulator_call = next(call for call in launch.calls("Node")
                          if ast.literal_eval(keyword(call, "name")) == "simulator")
    assert call_name(keyword(simulator_call, "on_exit")) == "Shutdown"


# The estimator's subscriptions per `inputs` profile (trident_ekf.adapters) for the given
# namespace: the IMU and GNSS ones always, the barometer and magnetometer ones when the
# parameter file enables those sources.
ESTIMATOR_PROFILES = {
    "ros": ({"imu_topic": "/vehicle/imu"}, {
        "/vehicle/imu": "sensor_msgs/msg/Imu", "/gnss/fix": "sensor_msgs/msg/NavSatFix",
        "/gnss/vel": "geometry_msgs/msg/TwistWithCovarianceStamped"}, {
        "barometer": ("/barometer/pressure", "sensor_msgs/msg/FluidPressure"),
        "magnetometer": ("/magnetic_field", "sensor_msgs/msg/MagneticField")}),
    "mavros": ({"mavros_namespace": "/uav1/mavros"}, {
        "/uav1/mavros/imu/data_raw": "sensor_msgs/msg/Imu",
        "/uav1/mavros/global_position/raw/fix": "sensor_msgs/msg/NavSatFix",
        "/uav1/mavros/global_position/raw/gps_vel": "geometry_msgs/msg/TwistStamped"}, {
        "barometer": ("/uav1/mavros/imu/static_pressure", "sensor_msgs/msg/FluidPressure"),
        "magnetometer": ("/uav1/mavros/imu/mag", "sensor_msgs/msg/MagneticField")}),
    "px4": ({"px4_namespace": "/px4_1/fmu"}, {
        "/px4_1/fmu/out/sensor_combined": "px4_msgs/msg/SensorCombined",
        "/px4_1/fmu/out/vehicle_gps_position": "px4_msgs/msg/SensorGps"}, {
        "barometer": ("/px4_1/fmu/out/vehicle_air_data", "px4_msgs/msg/VehicleAirData"),
        "magnetometer": ("/px4_1/fmu/out/vehicle_magnetometer",
                         "px4_msgs/msg/VehicleMagnetometer")}),
}


@pytest.mark.parametrize("profile", list(ESTIMATOR_PROFILES))
def test_estimator_inputs_argument_selects_the_vehicle_interface(profile, ros_context):
    launch = reader("estimator.launch.py")
    assert launch.choices("inputs") == list(ESTIMATOR_PROFILES)
    arguments, expected, aiding = ESTIMATOR_PROFILES[profile]
    node = launch.launch({"inputs": profile, **arguments}).node("trident_ekf")
    assert node.overrides["inputs"] == profile
    given = node.given_parameters()
    for name, (topic, message_type) in aiding.items():
        if given.get(f"{name}.enabled"):
            expected = expected | {topic: message_type}
    if profile == "px4":
        pytest.importorskip("px4_msgs.msg", reason="the px4 profile needs px4_msgs")
    with instantiated(node, ros_context) as instance:
        subscriptions = {s.topic_name: (type_name(s.msg_type), s.qos_profile)
                         for s in instance.subscriptions}
    assert {topic: subscriptions[topic][0] for topic in expected if topic in subscriptions} == (
        expected)
    # No input of another profile, and sensor streams best effort (PX4's bridge and MAVROS
    # publish best effort; a reliable subscription would receive nothing).
    others = {topic for name, (_, inputs, extra) in ESTIMATOR_PROFILES.items()
              if name != profile for topic in [*inputs, *(t for t, _ in extra.values())]}
    assert not others & set(subscriptions)
    for topic in expected:
        assert subscriptions[topic][1].reliability == ReliabilityPolicy.BEST_EFFORT, topic


def test_replay_plays_the_bag_on_its_clock_beside_a_live_estimator(sim_graph):
    launched = reader("replay.launch.py").launch({"bag": "/data/flight_bag", "rate": "2.5"})
    (command,) = launched.processes
    assert command[:4] == ["ros2", "bag", "play", "/data/flight_bag"]
    assert command[command.index("--rate") + 1] == "2.5"
    assert "--clock" in command
    assert launched.node("trident_ekf").overrides["use_sim_time"] is True
    # rosbag2 remaps the player node too: a /clock remap would move the clock it publishes.
    assert "--remap" not in command
    # A recorded run also holds /clock, /tf, diagnostics and the old estimate: the player
    # leaves out everything the live estimator publishes, and nothing it subscribes to.
    excluded = re.compile(command[command.index("--exclude-regex") + 1])
    estimator = sim_graph["trident_ekf"]
    # (/parameter_events is every node's own, and nothing reads a replayed one.)
    for topic in {*estimator.publishers, "/clock", "/tf", "/diagnostics"} - {
            "/parameter_events"}:
        assert excluded.fullmatch(topic), f"{topic} would be replayed over the live one"
    # The estimator's /clock comes from the player's --clock, not from the bag.
    for topic in {*estimator.subscriptions, *ESTIMATOR_INPUTS, "/tf_static",
                  "/ground_truth/odometry"} - {"/clock", "/parameter_events"}:
        assert not excluded.fullmatch(topic), f"{topic} would not be replayed"


def test_replay_passes_the_inputs_and_the_parameter_file_to_the_estimator():
    replay, estimator = reader("replay.launch.py"), reader("estimator.launch.py")
    assert replay.choices("inputs") == estimator.choices("inputs")
    default = replay.launch({"bag": "/data/flight_bag"}).node("trident_ekf")
    assert [p.name for p in default.parameter_files] == ["estimator_live.yaml"]
    assert default.overrides["inputs"] == "ros"
    given = CONFIG_DIR / "estimator.yaml"
    node = replay.launch({"bag": "/data/px4_bag", "inputs": "px4",
                          "params_file": str(given)}).node("trident_ekf")
    assert node.overrides["inputs"] == "px4"
    assert node.parameter_files == [given]


@pytest.mark.parametrize("launch_file", RVIZ_LAUNCH_FILES)
def test_a_missing_rviz2_stops_the_launch_before_any_node_starts(launch_file):
    launch = reader(launch_file)
    (description,) = [call for call in launch.calls("LaunchDescription") if call.args]
    actions = [call_name(a) or getattr(a, "id", None) for a in description.args[0].elts]
    check = actions.index("OpaqueFunction")
    starts = [i for i, name in enumerate(actions) if name not in {
        "DeclareLaunchArgument", "OpaqueFunction"}]
    assert starts, actions
    assert check < min(starts), f"{launch_file}: the rviz2 check runs after {actions[:check]}"
    (opaque,) = launch.calls("OpaqueFunction")
    assert ast.unparse(keyword(opaque, "function")) == "require_rviz2"
    assert launch.declarations["rviz"] is not None
    default = launch.configurations(dict(REQUIRED_ARGUMENT_VALUES))["rviz"]
    assert default == ("true" if rviz2_installed() else "false")


# ---------------------------------------------------------------- rviz config


def rviz_displays(displays: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every display, groups expanded."""
    for display in displays:
        yield display
        yield from rviz_displays(display.get("Displays", []))


def test_rviz_fixed_frame_is_the_estimator_map_frame():
    config = yaml.safe_load(RVIZ_CONFIG.read_text())
    estimator = reader("estimator.launch.py").launch().node("trident_ekf")
    assert config["Visualization Manager"]["Global Options"]["Fixed Frame"] == (
        estimator.overrides["map_frame"])


def test_rviz_topics_are_published_with_the_displayed_type_and_qos(sim_graph):
    config = yaml.safe_load(RVIZ_CONFIG.read_text())
    displays = list(rviz_displays(config["Visualization Manager"]["Displays"]))
    classes = {display["Class"] for display in displays}
    assert {"rviz_default_plugins/TF", "rviz_default_plugins/Grid"} <= classes
    shown = set()
    for display in displays:
        if "Topic" in display:
            topic = display["Topic"]
            assert display["Class"] in RVIZ_DISPLAY_TYPES, f"message type of {display['Class']}?"
            assert_subscription_matches(
                f"rviz display {display['Name']!r}", topic["Value"],
                RVIZ_DISPLAY_TYPES[display["Class"]], RVIZ_RELIABILITY[topic["Reliability Policy"]],
                RVIZ_DURABILITY[topic["Durability Policy"]], sim_graph)
            shown.add(topic["Value"])
    assert {"/ground_truth/odometry", "/trident_ekf/odometry", "/simulator/markers"} <= shown


def test_rviz_shows_the_estimate_covariance():
    config = yaml.safe_load(RVIZ_CONFIG.read_text())
    (estimate,) = [d for d in rviz_displays(config["Visualization Manager"]["Displays"])
                   if d.get("Topic", {}).get("Value") == "/trident_ekf/odometry"]
    covariance = estimate["Covariance"]
    assert covariance["Value"]
    assert covariance["Position"]["Value"]
    assert covariance["Orientation"]["Value"]
