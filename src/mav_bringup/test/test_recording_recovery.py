"""A recording killed with SIGKILL (as ``kill -9``, an out-of-memory kill or a power cut
would leave it) is recovered up to its last complete chunk by trident-bag-recover.

A child process records a topic with mav-sim's recorder (``graph/recorder.py``, over real
DDS on a private domain) and is killed once the recorder has received every message. The
rosbags writer keeps the current chunk (up to 1 MiB) in memory and writes neither the
summary nor metadata.yaml before it is closed, so the bag left behind cannot be read by
rosbags, and the messages of the chunk in memory are gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from rosbags.rosbag2 import Reader
from rosbags.rosbag2.errors import ReaderError

from mav_bringup.graph.recorder import TYPESTORE
from mav_ros_common.exit_codes import EXIT_OK
from trident_ekf.tools import bag_recover
from trident_ekf.tools.bag_reader import BagReader

MESSAGES = 20
PAYLOAD_BYTES = 200_000  # five of them fill most of a chunk: the sixth closes it
CHUNK_BYTES = 1 << 20  # rosbags closes a chunk once it holds more than this

RECORDER = f"""
import sys, time
from pathlib import Path
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import Image
from mav_bringup.graph.recorder import BagRecorder, topic_specs
from mav_ros_common.testing import private_context

with private_context() as context:
    node = Node("killed_recorder", context=context)
    publisher = node.create_publisher(Image, "frames", 10)
    recorder = BagRecorder(node, Path(sys.argv[1]))
    recorder.record(topic_specs([node]))
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    while publisher.get_subscription_count() == 0:
        executor.spin_once(timeout_sec=0.1)
    for i in range({MESSAGES}):
        frame = Image(height=1, width={PAYLOAD_BYTES}, encoding="mono8", step={PAYLOAD_BYTES})
        frame.header.stamp.sec = i
        frame.data = bytes([i]) * {PAYLOAD_BYTES}
        publisher.publish(frame)
        while recorder.counts["/frames"] <= i:
            executor.spin_once(timeout_sec=0.1)
    print("recorded", flush=True)
    time.sleep(60.0)
"""


@pytest.fixture(scope="module")
def killed_recording(tmp_path_factory) -> Path:
    bag = tmp_path_factory.mktemp("killed") / "recording"
    process = subprocess.Popen([sys.executable, "-c", RECORDER, str(bag)],
                               stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "recorded\n"
    finally:
        process.send_signal(signal.SIGKILL)
        assert process.wait() == -signal.SIGKILL
    return bag


def test_a_killed_recording_is_recovered_up_to_its_last_chunk(killed_recording, tmp_path,
                                                             capsys):
    assert not (killed_recording / "metadata.yaml").exists()
    with pytest.raises((ReaderError, FileNotFoundError)):  # what ros2 bag and rosbags see
        Reader(killed_recording).open()
    fixed = tmp_path / "fixed"
    assert bag_recover.main([str(killed_recording), "--output", str(fixed)]) == EXIT_OK
    assert "not recovered: " in capsys.readouterr().err
    with Reader(fixed) as reader:
        (connection,) = reader.connections
        assert connection.topic == "/frames"
        assert connection.msgtype == "sensor_msgs/msg/Image"
        frames = [TYPESTORE.deserialize_cdr(raw, connection.msgtype)
                  for _, _, raw in reader.messages()]
        assert connection.ext.offered_qos_profiles  # the recorder's QoS kept
    # Every frame of the complete chunks (six frames each: 18), in order and intact; the
    # two frames of the chunk the killed writer held in memory are gone.
    per_chunk = CHUNK_BYTES // PAYLOAD_BYTES + 1
    stamps = [frame.header.stamp.sec for frame in frames]
    assert stamps == list(range(MESSAGES // per_chunk * per_chunk))
    assert all(bytes(frame.data) == bytes([frame.header.stamp.sec]) * PAYLOAD_BYTES
               for frame in frames)


def test_trident_tools_read_a_killed_recording_and_say_what_was_lost(killed_recording):
    reader = BagReader(killed_recording)
    assert reader.salvaged
    msgtype, count = reader.topics["/frames"]
    assert msgtype == "sensor_msgs/msg/Image"
    assert sum(1 for _ in reader.raw(["/frames"])) == count
    (cut, unknown) = reader.loss()
    assert "the file ends" in cut
    assert unknown == "message counts lost per topic unknown (no readable metadata.yaml)"
