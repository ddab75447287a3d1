"""The DDS-Security governance and permissions documents of the keystore (OMG DDS-Security
1.1, the XML that SROS2 writes), from each enclave's endpoints.

A grant allows an enclave exactly the DDS topics behind its ROS endpoints, named as the
ROS middleware names them: a topic ``/imu/data`` is ``rt/imu/data``; a service
``/simulator/reset`` is the request topic ``rq/simulator/resetRequest`` and the reply topic
``rr/simulator/resetReply`` (its server subscribes to requests and publishes replies, a
client the other way round). Every participant also publishes and subscribes
``ros_discovery_info``, the middleware's own map of nodes to endpoints. Anything else is
denied (``<default>DENY</default>``), and the governance refuses unauthenticated
participants and encrypts discovery, liveliness and data.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime

from mav_bringup.security.endpoints import Endpoints

DISCOVERY_TOPIC = "ros_discovery_info"
"""The middleware's node-to-endpoint topic; it keeps its name unmangled (no ``rt``)."""
XSI = "http://www.w3.org/2001/XMLSchema-instance"
SCHEMAS = "http://www.omg.org/spec/DDS-SECURITY/20170901/omg_shared_ca_{}.xsd"


@dataclass(frozen=True)
class DdsTopics:
    """The DDS topic names one enclave may write (publish) and read (subscribe)."""

    publish: frozenset[str]
    subscribe: frozenset[str]


def dds_topics(endpoints: Endpoints) -> DdsTopics:
    """The DDS topics behind a node's ROS endpoints (module docstring)."""
    publish = ({f"rt{topic}" for topic in endpoints.publishes}
               | {f"rr{service}Reply" for service in endpoints.serves}
               | {f"rq{service}Request" for service in endpoints.calls})
    subscribe = ({f"rt{topic}" for topic in endpoints.subscribes}
                 | {f"rq{service}Request" for service in endpoints.serves}
                 | {f"rr{service}Reply" for service in endpoints.calls})
    return DdsTopics(frozenset(publish | {DISCOVERY_TOPIC}),
                     frozenset(subscribe | {DISCOVERY_TOPIC}))


def subject_name(enclave: str) -> str:
    """The certificate subject of an enclave's identity, as SROS2 names it."""
    return f"CN={enclave}"


def _document(kind: str) -> ET.Element:
    root = ET.Element("dds")
    root.set("xmlns:xsi", XSI)
    root.set("xsi:noNamespaceSchemaLocation", SCHEMAS.format(kind))
    return root


def _domains(parent: ET.Element, domain_id: int) -> None:
    ET.SubElement(ET.SubElement(parent, "domains"), "id").text = str(domain_id)


def _text(element: ET.Element) -> bytes:
    ET.indent(element)
    text: bytes = ET.tostring(element, encoding="UTF-8", xml_declaration=True)
    return text + b"\n"


def governance_xml(domain_id: int) -> bytes:
    """Authenticated participants only, join access control, everything encrypted, and
    read and write access control on every topic."""
    root = _document("governance")
    rule = ET.SubElement(ET.SubElement(root, "domain_access_rules"), "domain_rule")
    _domains(rule, domain_id)
    for tag, value in (("allow_unauthenticated_participants", "false"),
                       ("enable_join_access_control", "true"),
                       ("discovery_protection_kind", "ENCRYPT"),
                       ("liveliness_protection_kind", "ENCRYPT"),
                       ("rtps_protection_kind", "ENCRYPT")):
        ET.SubElement(rule, tag).text = value
    topic_rule = ET.SubElement(ET.SubElement(rule, "topic_access_rules"), "topic_rule")
    for tag, value in (("topic_expression", "*"),
                       ("enable_discovery_protection", "true"),
                       ("enable_liveliness_protection", "true"),
                       ("enable_read_access_control", "true"),
                       ("enable_write_access_control", "true"),
                       ("metadata_protection_kind", "ENCRYPT"),
                       ("data_protection_kind", "ENCRYPT")):
        ET.SubElement(topic_rule, tag).text = value
    return _text(root)


def permissions_xml(enclave: str, topics: DdsTopics, domain_id: int, not_before: datetime,
                    not_after: datetime) -> bytes:
    """One grant: the enclave's identity may write and read exactly ``topics`` on the
    domain between the two times (UTC); everything else is denied."""
    root = _document("permissions")
    grant = ET.SubElement(ET.SubElement(root, "permissions"), "grant", name=enclave)
    ET.SubElement(grant, "subject_name").text = subject_name(enclave)
    validity = ET.SubElement(grant, "validity")
    ET.SubElement(validity, "not_before").text = not_before.strftime("%Y-%m-%dT%H:%M:%S")
    ET.SubElement(validity, "not_after").text = not_after.strftime("%Y-%m-%dT%H:%M:%S")
    rule = ET.SubElement(grant, "allow_rule")
    _domains(rule, domain_id)
    for direction, names in (("publish", topics.publish), ("subscribe", topics.subscribe)):
        listed = ET.SubElement(ET.SubElement(rule, direction), "topics")
        for name in sorted(names):
            ET.SubElement(listed, "topic").text = name
    ET.SubElement(grant, "default").text = "DENY"
    return _text(root)
