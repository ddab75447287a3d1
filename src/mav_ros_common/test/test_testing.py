"""The DDS test helpers (mav_ros_common.testing) over real DDS: a private context on its own
domain, restored environment, and nodes spun on a thread then destroyed."""

from __future__ import annotations

import os

import pytest
from diagnostic_msgs.msg import KeyValue
from rclpy.node import Node

from mav_ros_common.qos import RELIABLE_10
from mav_ros_common.testing import private_context, spinning, wait_for


def test_private_context_uses_its_own_domain_and_restores_the_environment():
    before = os.environ.get("ROS_DOMAIN_ID")
    with private_context() as context:
        assert context.ok()
        assert 1 <= int(os.environ["ROS_DOMAIN_ID"]) <= 232
        assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert not context.ok()
    assert os.environ.get("ROS_DOMAIN_ID") == before


def test_spinning_delivers_messages_then_destroys_the_nodes():
    with private_context() as context:
        talker, listener = Node("talker", context=context), Node("listener", context=context)
        heard: list[str] = []
        publisher = talker.create_publisher(KeyValue, "chatter", RELIABLE_10)
        listener.create_subscription(KeyValue, "chatter", lambda m: heard.append(m.value),
                                     RELIABLE_10)
        with spinning(talker, listener):
            wait_for(lambda: publisher.get_subscription_count() >= 1, "discovery")
            publisher.publish(KeyValue(key="greeting", value="hello"))
            wait_for(lambda: heard == ["hello"], "the message")
        with pytest.raises(Exception, match="destruction was requested"):
            talker.create_publisher(KeyValue, "chatter", RELIABLE_10)
