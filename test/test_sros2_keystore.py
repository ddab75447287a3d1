"""mav-keystore writes an SROS2 keystore whose permissions are exactly what the nodes use.

The script runs once into a temporary folder while the simulator, the controller and the
trident EKF run as sim.launch.py starts them (the launch file's parameter files, overrides,
remappings and ROS arguments, read by test_launch_files.py); an observer node on another
participant reads their endpoints over DDS with the ROS graph API. openssl checks the
certificate chain and the S/MIME signatures. The test reads the permissions back with its
own reading of the middleware's names (rt/, rq/...Request, rr/...Reply), not with the code
that wrote them.

The Fast DDS of the PyPI wheels is built without DDS Security: a node started with
ROS_SECURITY_ENABLE=true refuses to start there. The last test holds that (it fails
closed, never falls back to plain DDS); secured traffic itself needs a ROS distro built
with security (docs/security.md).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import rclpy
from rclpy.context import Context
from rclpy.node import Node, NodeNameNonExistentError

from mav_bringup.security import keystore
from mav_bringup.security.endpoints import OPERATOR, Endpoints, observed_endpoints
from mav_ros_common.testing import module_from_file

ROOT = Path(__file__).resolve().parents[1]
launch_files = module_from_file(ROOT / "test" / "test_launch_files.py",
                                "_sibling_test_launch_files")
NODES = ("simulator", "controller", "trident_ekf")
ENCLAVE_FILES = ("cert.pem", "key.pem", "identity_ca.cert.pem", "permissions_ca.cert.pem",
                 "governance.p7s", "permissions.p7s")
"""What rcl's security support reads from an enclave folder."""
DISCOVERY_WAIT_S = 60.0
TRIGGER = "std_srvs/srv/Trigger"


def openssl(*arguments: str, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["openssl", *arguments], input=data, capture_output=True)


@dataclass
class Run:
    """The keystore the script wrote and what the observer saw of the running nodes."""

    path: Path
    observed: dict[str, Endpoints]
    service_types: dict[str, dict[str, list[str]]]
    plain_node: Endpoints
    """A node with nothing of its own, named like the operator's (rosout, parameters)."""


def observe(observer: Node, names: tuple[str, ...], expected: dict[str, Endpoints]
            ) -> dict[str, Endpoints]:
    """The nodes' endpoints once discovery shows what ``expected`` says (or at the deadline,
    for the tests to report the difference)."""
    deadline = time.monotonic() + DISCOVERY_WAIT_S
    while True:
        seen = {}
        for name in names:
            with contextlib.suppress(NodeNameNonExistentError):  # not discovered yet
                seen[name] = observed_endpoints(observer, name)
        if seen == {name: expected[name] for name in names} or time.monotonic() > deadline:
            return seen
        time.sleep(0.2)  # discovery updates the graph on the middleware's threads


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, ros_env: dict[str, str]) -> Iterator[Run]:
    path = tmp_path_factory.mktemp("keystore") / "store"
    launched = launch_files.workspace_nodes(launch_files.reader("sim.launch.py").launch())
    assert sorted(node.name for node in launched) == sorted(NODES)
    # The nodes as sim.launch.py starts them, on a participant of their own; the observer
    # on another one sees them through DDS discovery.
    # The script's entry point, in this process. First: rcl keeps one /rosout publisher per
    # node name in a process, and the script's nodes of the same names come and go.
    assert keystore.main([str(path), "--domain-id", ros_env["ROS_DOMAIN_ID"]]) == 0
    expected = {name: read_grant(path, name) for name in NODES}
    nodes_context, observer_context = Context(), Context()
    with contextlib.ExitStack() as stack:
        for context in (nodes_context, observer_context):
            rclpy.init(context=context, args=[])
            stack.callback(context.try_shutdown)
        for node in launched:
            stack.enter_context(launch_files.instantiated(node, nodes_context))
        observer = Node("keystore_observer", context=observer_context,
                        start_parameter_services=False)
        plain = Node(OPERATOR, context=observer_context)
        observed = observe(observer, NODES, expected)
        yield Run(path, observed, {
            name: dict(observer.get_service_names_and_types_by_node(name, "/"))
            for name in NODES}, observed_endpoints(plain, OPERATOR))


# ---------------------------------------------------------------- reading the permissions


def grant_of(path: Path, name: str) -> ET.Element:
    document = ET.parse(path / "enclaves" / name / "permissions.xml").getroot()
    (grant,) = document.findall("permissions/grant")
    return grant


def allowed(grant: ET.Element, direction: str) -> set[str]:
    (rule,) = grant.findall("allow_rule")
    return {topic.text or "" for topic in rule.findall(f"{direction}/topics/topic")}


def read_grant(path: Path, name: str) -> Endpoints:
    """A grant as ROS endpoints, read with the middleware's naming: topics ``rt<name>``,
    service requests ``rq<name>Request``, replies ``rr<name>Reply``."""
    grant = grant_of(path, name)
    sides: dict[str, dict[str, set[str]]] = {}
    for direction in ("publish", "subscribe"):
        kinds: dict[str, set[str]] = {"rt": set(), "rq": set(), "rr": set()}
        for topic in allowed(grant, direction) - {"ros_discovery_info"}:
            match = re.fullmatch(r"(rt|rq|rr)(/.+?)(Request|Reply)?", topic)
            assert match, f"{name}: {topic} is not a ROS topic or service"
            kind, ros_name, suffix = match.groups()
            assert suffix == {"rt": None, "rq": "Request", "rr": "Reply"}[kind], topic
            kinds[kind].add(ros_name)
        sides[direction] = kinds
    publish, subscribe = sides["publish"], sides["subscribe"]
    # A server reads requests and writes replies; a client the other way round.
    assert publish["rr"] == subscribe["rq"], name
    assert publish["rq"] == subscribe["rr"], name
    return Endpoints(publishes=frozenset(publish["rt"]), subscribes=frozenset(subscribe["rt"]),
                     serves=frozenset(publish["rr"]), calls=frozenset(publish["rq"]))


# ---------------------------------------------------------------- tests


def test_each_node_is_allowed_exactly_the_endpoints_it_has_over_dds(run):
    for name in NODES:
        assert read_grant(run.path, name) == run.observed[name], name
        grant = grant_of(run.path, name)
        assert grant.get("name") == f"/{name}"
        assert grant.findtext("subject_name") == f"CN=/{name}"
        assert grant.findtext("default") == "DENY"
        assert {"ros_discovery_info"} <= allowed(grant, "publish") & allowed(grant, "subscribe")
    # The names as they travel, spelled out once.
    simulator = grant_of(run.path, "simulator")
    assert {"rt/imu/data", "rr/simulator/resetReply"} <= allowed(simulator, "publish")
    assert {"rt/actuator_commands", "rq/simulator/resetRequest"} <= allowed(
        simulator, "subscribe")


def test_only_the_controller_commands_the_actuators_and_only_the_operator_resets(run):
    enclaves = [*NODES, OPERATOR]
    writers = {name: allowed(grant_of(run.path, name), "publish") for name in enclaves}
    assert {name for name in enclaves if "rt/actuator_commands" in writers[name]} == {
        "controller"}
    triggers = {service for service, types in run.service_types["simulator"].items()
                if types == [TRIGGER]}
    assert triggers == {"/simulator/reset", "/simulator/inject_gnss_outage",
                        "/simulator/inject_imu_spike"}
    for service in triggers:
        assert {name for name in enclaves if f"rq{service}Request" in writers[name]} == {
            OPERATOR}, service


def test_the_operator_calls_every_service_and_feeds_only_the_graphs_open_inputs(run):
    operator = read_grant(run.path, OPERATOR)
    offered = Endpoints()
    for name in NODES:
        offered = offered | run.observed[name]
    assert operator.calls == offered.serves
    assert operator.subscribes == offered.publishes | run.plain_node.subscribes
    open_inputs = offered.subscribes - offered.publishes
    assert open_inputs == {"/controller/setpoint"}
    assert operator.publishes == open_inputs | run.plain_node.publishes
    # Its own node's parameter services, as `operator` or as a ros2 command-line node.
    own = {service.removeprefix(f"/{OPERATOR}/") for service in run.plain_node.serves}
    assert operator.serves == {f"/{node}/{service}" for service in own
                               for node in (OPERATOR, "_ros2cli_*")}


def test_every_certificate_chains_to_the_keystore_ca(run):
    ca = run.path / "public" / "ca.cert.pem"
    for name in [*NODES, OPERATOR]:
        cert = run.path / "enclaves" / name / "cert.pem"
        verified = openssl("verify", "-CAfile", str(ca), str(cert))
        assert verified.returncode == 0, verified.stderr
        assert verified.stdout.strip().endswith(b": OK")
        text = openssl("x509", "-in", str(cert), "-noout", "-subject", "-text").stdout.decode()
        assert f"subject=CN = /{name}\n" in text
        assert "ASN1 OID: prime256v1" in text  # DDS-Security's curve
        assert "CA:FALSE" in text
    ca_text = openssl("x509", "-in", str(ca), "-noout", "-text").stdout.decode()
    assert "CA:TRUE" in ca_text
    # A certificate from another CA does not verify against this one.
    other = run.path.parent / "other"
    keystore.write_keystore(other, {"simulator": Endpoints()}, 0, 1)
    stranger = openssl("verify", "-CAfile", str(ca),
                       str(other / "enclaves" / "simulator" / "cert.pem"))
    assert stranger.returncode != 0


def signed_content(signed: Path, ca: Path) -> bytes | None:
    """The document inside an S/MIME file if the CA's signature verifies, else None."""
    result = openssl("smime", "-verify", "-in", str(signed), "-CAfile", str(ca))
    if result.returncode != 0:
        return None
    header, _, body = result.stdout.replace(b"\r\n", b"\n").partition(b"\n\n")
    assert header == b"Content-Type: text/plain"
    return body


def test_governance_and_permissions_are_signed_by_the_ca(run):
    ca = run.path / "public" / "permissions_ca.cert.pem"
    enclaves = run.path / "enclaves"
    documents = [(enclaves / "governance.p7s", enclaves / "governance.xml")] + [
        (enclaves / name / "permissions.p7s", enclaves / name / "permissions.xml")
        for name in [*NODES, OPERATOR]]
    for signed, document in documents:
        assert signed_content(signed, ca) == document.read_bytes(), signed
    # A grant widened after signing no longer verifies.
    signed = (enclaves / "controller" / "permissions.p7s").read_bytes()
    tampered = run.path.parent / "tampered.p7s"
    tampered.write_bytes(signed.replace(b"<topic>rt/actuator_commands</topic>",
                                        b"<topic>rt/*</topic>", 1))
    assert tampered.read_bytes() != signed
    assert signed_content(tampered, ca) is None


def test_the_governance_admits_only_authenticated_encrypted_participants(run):
    rule = ET.parse(run.path / "enclaves" / "governance.xml").getroot().find(
        "domain_access_rules/domain_rule")
    assert rule is not None
    assert rule.findtext("domains/id") == os.environ["ROS_DOMAIN_ID"]
    assert rule.findtext("allow_unauthenticated_participants") == "false"
    assert rule.findtext("enable_join_access_control") == "true"
    for kind in ("discovery", "liveliness", "rtps"):
        assert rule.findtext(f"{kind}_protection_kind") == "ENCRYPT"
    (topic_rule,) = rule.findall("topic_access_rules/topic_rule")
    assert topic_rule.findtext("topic_expression") == "*"
    for access in ("read", "write"):
        assert topic_rule.findtext(f"enable_{access}_access_control") == "true"
    assert topic_rule.findtext("data_protection_kind") == "ENCRYPT"


def test_each_enclave_holds_what_rcl_reads_and_keys_stay_private(run):
    ca = (run.path / "public" / "ca.cert.pem").read_bytes()
    for name in [*NODES, OPERATOR]:
        folder = run.path / "enclaves" / name
        for file in ENCLAVE_FILES:
            assert (folder / file).is_file(), f"{name}/{file}"
        for file in ("identity_ca.cert.pem", "permissions_ca.cert.pem"):
            assert (folder / file).read_bytes() == ca
        assert (folder / "key.pem").stat().st_mode & 0o077 == 0
        grant = grant_of(run.path, name)
        assert {domain.text for domain in grant.iter("id")} == {os.environ["ROS_DOMAIN_ID"]}
    assert (run.path / "private").stat().st_mode & 0o077 == 0
    assert (run.path / "private" / "ca.key.pem").stat().st_mode & 0o077 == 0


def test_a_second_run_keeps_the_ca_and_keys_and_renews_the_permissions(tmp_path):
    store = tmp_path / "store"
    keystore.write_keystore(store, {"simulator": Endpoints(publishes=frozenset({"/a"}))}, 7, 2)
    kept = [store / "public" / "ca.cert.pem", store / "private" / "ca.key.pem",
            store / "enclaves" / "simulator" / "key.pem",
            store / "enclaves" / "simulator" / "cert.pem"]
    before = [path.read_bytes() for path in kept]
    keystore.write_keystore(store, {"simulator": Endpoints(publishes=frozenset({"/b"}))}, 7, 2)
    assert [path.read_bytes() for path in kept] == before
    assert read_grant(store, "simulator").publishes == {"/b"}
    ca = store / "public" / "ca.cert.pem"
    assert signed_content(store / "enclaves" / "simulator" / "permissions.p7s", ca) == (
        store / "enclaves" / "simulator" / "permissions.xml").read_bytes()


def test_an_invalid_enclave_or_domain_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="not a valid ROS enclave name"):
        keystore.write_keystore(tmp_path / "a", {"bad name": Endpoints()}, 0, 1)
    with pytest.raises(ValueError, match=r"outside 0\.\.232"):
        keystore.write_keystore(tmp_path / "b", {"simulator": Endpoints()}, 233, 1)
    assert not (tmp_path / "a").exists()
    assert not (tmp_path / "b").exists()


def test_a_secured_node_is_refused_by_the_wheels_fast_dds_never_started_plain(run, ros_env):
    # Enforce with this keystore: the PyPI Fast DDS has no security plugins, so rcl must
    # stop the node (a node started anyway would talk unencrypted and unauthenticated).
    secured = {**ros_env, "ROS_SECURITY_ENABLE": "true", "ROS_SECURITY_STRATEGY": "Enforce",
               "ROS_SECURITY_KEYSTORE": str(run.path)}
    script = ("import rclpy\nrclpy.init()\nrclpy.create_node('simulator')\n"
              "print('STARTED', flush=True)\n")
    result = subprocess.run(
        [sys.executable, "-c", script, "--ros-args", "--enclave", "/simulator"],
        env=secured, capture_output=True, text=True, timeout=60)
    assert "STARTED" not in result.stdout
    assert result.returncode != 0
    assert "doesn't have the security libraries" in result.stderr, result.stderr[-2000:]
