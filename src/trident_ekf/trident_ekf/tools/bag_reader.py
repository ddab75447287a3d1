"""Reading a rosbag2 (MCAP) directory, also one left damaged or unfinished.

A bag that rosbags reads is read with rosbags. One it refuses (an MCAP without its summary
and footer: a recorder killed, a copy cut short; no ``metadata.yaml``) is read record by
record (``mcap_salvage``): every complete message is kept, and ``loss`` says what is
missing, per topic against the counts of ``metadata.yaml`` when the bag has one. Anything
else that cannot be read is a ``BagReadError`` naming the bag and the problem.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rosbags.interfaces import (
    ConnectionExtRosbag2,
    MessageDefinition,
    MessageDefinitionFormat,
    Qos,
)

from mav_geometry.yaml_file import read_yaml

if TYPE_CHECKING:
    from trident_ekf.tools.mcap_salvage import McapSalvage, SalvageReport

# rosbags' reader (about 0.1 s to import) is imported when a bag is opened: see bagio.
_FORMATS = {"ros2msg": MessageDefinitionFormat.MSG, "ros2idl": MessageDefinitionFormat.IDL}
"""MCAP schema encodings of rosbag2's message definitions."""
RawMessage = tuple[str, str, int, bytes]
"""(topic, message type, bag time ns, CDR bytes)."""


class BagReadError(ValueError):
    """A bag that cannot be read at all; the message names it and says why."""


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _expected_counts(directory: Path) -> dict[str, int] | None:
    """Message count per topic that ``metadata.yaml`` promises, or None without one."""
    try:
        _, metadata = read_yaml(directory / "metadata.yaml", "bag metadata", ValueError)
        topics = metadata["rosbag2_bagfile_information"]["topics_with_message_count"]
        return {str(entry["topic_metadata"]["name"]): int(entry["message_count"])
                for entry in topics}
    except (KeyError, TypeError, ValueError):  # ValueError: missing, unreadable, not YAML
        return None


def _qos(text: str) -> list[Qos]:
    """The offered QoS profiles a rosbag2 MCAP channel keeps (none if they do not parse)."""
    from rosbags.rosbag2.errors import ReaderError
    from rosbags.rosbag2.metadata import parse_qos

    try:
        return parse_qos(text) if text else []
    except (ReaderError, ValueError, KeyError, TypeError, AttributeError):
        return []


class BagReader:
    """The bag directory ``path``: ``topics`` (type and count per topic), ``definitions``
    (message definitions per type), ``qos`` (offered QoS profiles per topic), ``raw``
    (messages in bag-time order) and, once ``raw`` has been read to the end, ``loss``
    (empty: nothing was lost)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._salvage: McapSalvage | None = None
        self._walk: SalvageReport | None = None  # the first, complete walk over the file
        self._short: dict[str, tuple[int, int]] = {}  # topic -> (read, promised) when fewer
        self.topics: dict[str, tuple[str, int]] = {}
        self.definitions: dict[str, MessageDefinition] = {}
        self.qos: dict[str, list[Qos]] = {}
        self.note = ""  # why the bag was read record by record ("" when rosbags read it)
        from rosbags.rosbag2 import Reader

        try:
            with Reader(path) as reader:
                for connection in reader.connections:
                    self.topics[connection.topic] = (connection.msgtype, connection.msgcount)
                    self.definitions[connection.msgtype] = connection.msgdef
                    if isinstance(connection.ext, ConnectionExtRosbag2):
                        self.qos[connection.topic] = connection.ext.offered_qos_profiles
        except Exception as error:  # rosbags raises any type on damaged bytes
            self._open_salvage(error)

    def _open_salvage(self, error: BaseException) -> None:
        """Read the bag's only MCAP file record by record (a first pass finds its topics)."""
        from trident_ekf.tools.mcap_salvage import McapSalvage

        files = sorted(self.path.glob("*.mcap")) if self.path.is_dir() else []
        if len(files) != 1:
            raise BagReadError(f"{self.path}: not a readable rosbag2 bag ({_error_text(error)}; "
                               f"{len(files)} .mcap files in it)") from error
        self._salvage = McapSalvage(files[0])
        self.note = _error_text(error)
        for found in (self.topics, self.definitions, self.qos):  # what rosbags got before
            found.clear()
        report = self._walk = self._scan()
        for channel_id, channel in report.channels.items():
            schema = report.schemas.get(channel.schema_id)
            name = schema.name if schema is not None else ""
            self.topics[channel.topic] = (name, report.counts[channel_id])
            self.qos[channel.topic] = _qos(channel.metadata.get("offered_qos_profiles", ""))
            if schema is not None:
                self.definitions[name] = MessageDefinition(
                    _FORMATS.get(schema.encoding, MessageDefinitionFormat.NONE), schema.data)

    def _scan(self) -> SalvageReport:
        from trident_ekf.tools.mcap_salvage import McapError

        assert self._salvage is not None
        try:
            for _ in self._salvage.messages():
                pass
        except McapError as error:
            raise BagReadError(f"{self.path}: {error}") from error
        except OSError as error:
            raise BagReadError(f"{self.path}: {_error_text(error)}") from error
        return self._salvage.report

    @property
    def salvaged(self) -> bool:
        """True when rosbags refused the bag and it is read record by record."""
        return self._salvage is not None

    def raw(self, topics: Sequence[str]) -> Iterator[RawMessage]:
        """Messages of ``topics`` in bag-time order (chunk by chunk for a salvaged bag)."""
        if self._salvage is None:
            yield from self._rosbags_raw(topics)
            return
        report = self._salvage.report
        wanted = set(topics)
        for message in self._salvage.messages():
            channel = report.channels[message.channel_id]
            if channel.topic in wanted:
                yield channel.topic, self.topics[channel.topic][0], message.log_time, message.data

    def _rosbags_raw(self, topics: Sequence[str]) -> Iterator[RawMessage]:
        """rosbags' messages, counted: a damaged chunk can make it skip messages without an
        error (its chunks carry no checksum), which ``loss`` then reports."""
        from rosbags.rosbag2 import Reader

        read: Counter[str] = Counter()
        try:
            with Reader(self.path) as reader:
                connections = [c for c in reader.connections if c.topic in topics]
                for connection, timestamp, raw in reader.messages(connections=connections):
                    read[connection.topic] += 1
                    yield connection.topic, connection.msgtype, timestamp, raw
        except Exception as error:  # as above: any type on damaged bytes
            raise BagReadError(f"{self.path}: damaged while reading ({_error_text(error)}); "
                               "trident-bag-recover keeps every complete message") from error
        self._short.update((topic, (read[topic], self.topics[topic][1])) for topic in topics
                           if topic in self.topics and read[topic] < self.topics[topic][1])

    def loss(self) -> list[str]:
        """What the bag lost, one line per fact (empty: nothing). For a salvaged bag: why
        rosbags refused it, where the record walk stopped and, with ``metadata.yaml``, the
        messages missing per topic; for one rosbags read, the topics that gave fewer
        messages than its summary promised."""
        if self._walk is None:
            return [f"{self.path}: damaged chunks: " + ", ".join(
                f"{topic} {read} of {promised} messages read"
                for topic, (read, promised) in self._short.items())] if self._short else []
        report = self._walk
        lines = []
        if not report.complete:
            end = ("" if report.last_time is None
                   else f"; nothing after bag time {report.last_time * 1e-9:.3f} s")
            lines.append(f"{self.path}: read up to byte {report.read_up_to} of {report.size}: "
                         f"{report.stop_reason}{end}")
        if report.damaged_chunks:
            lines.append(f"{self.path}: {report.damaged_chunks} damaged chunk(s) skipped")
        expected = _expected_counts(self.path)
        if expected is None:
            if lines:
                lines.append("message counts lost per topic unknown (no readable "
                             "metadata.yaml)")
            return lines
        missing = {topic: count - self.topics.get(topic, ("", 0))[1]
                   for topic, count in expected.items()}
        missing = {topic: count for topic, count in missing.items() if count > 0}
        if missing:
            lines.append("messages lost: " + ", ".join(
                f"{topic} {count} of {expected[topic]}" for topic, count in missing.items()))
        return lines

