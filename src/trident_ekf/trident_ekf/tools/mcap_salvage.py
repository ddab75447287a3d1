"""Record-level reading of an MCAP file that may be cut short or damaged.

A recorder that is killed leaves an MCAP without its summary and footer (and a rosbag2
directory without ``metadata.yaml``); a copy that was cut short or corrupted loses them
too. Readers that start from the footer (rosbags) refuse such a file. This module walks
the records from the start instead (MCAP spec: opcode u8, length u64, content) and keeps
every complete one: schemas, channels and messages, whether inside chunks or not. It
stops at the first record whose framing cannot be trusted (cut short, or an impossible
opcode or length); a chunk whose own content is damaged is skipped and counted, and the
walk goes on after it.

Messages come out in file order, each chunk's sorted by log time: recorders write in
time order, so this is time order for their files.
"""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, NamedTuple

from rosbags.rosbag2.storage_mcap import DECOMPRESSORS

MAGIC = b"\x89MCAP0\r\n"
_HEADER = struct.Struct("<BQ")  # opcode, content length
SCHEMA, CHANNEL, MESSAGE, CHUNK, FOOTER, DATA_END = 0x03, 0x04, 0x05, 0x06, 0x02, 0x0F
_KNOWN_OPCODES = range(0x01, 0x10)
_LARGEST_RECORD = 1 << 34  # 16 GiB: a longer length field is corruption, not data


class McapError(ValueError):
    """The file is not an MCAP file at all (empty, or no magic)."""


class Schema(NamedTuple):
    name: str  # message type, e.g. sensor_msgs/msg/Imu
    encoding: str  # ros2msg, ros2idl
    data: str  # the message definition


class Channel(NamedTuple):
    topic: str
    schema_id: int
    message_encoding: str  # cdr
    metadata: dict[str, str]  # rosbag2 keeps offered_qos_profiles here


class Message(NamedTuple):
    channel_id: int
    log_time: int  # ns
    data: bytes


class _DamagedRecordError(Exception):
    """A record's content does not parse (internal: turned into a count)."""


@dataclass
class SalvageReport:
    """What a walk over the file found; complete once ``messages`` is exhausted."""

    size: int = 0  # bytes in the file
    read_up_to: int = 0  # end of the last complete record, bytes
    complete: bool = False  # the data section ended as written (a DataEnd or Footer record)
    stop_reason: str = ""  # why the walk stopped early ("" when complete)
    damaged_chunks: int = 0  # chunk records whose content could not be decoded
    schemas: dict[int, Schema] = field(default_factory=dict)
    channels: dict[int, Channel] = field(default_factory=dict)
    counts: Counter[int] = field(default_factory=Counter)  # messages read per channel id
    first_time: int | None = None  # ns, log time of the earliest message read
    last_time: int | None = None  # ns, latest


def _string(content: bytes, offset: int) -> tuple[str, int]:
    (length,) = struct.unpack_from("<I", content, offset)
    end = offset + 4 + length
    if end > len(content):
        raise _DamagedRecordError
    return content[offset + 4:end].decode(), end


def _schema(content: bytes) -> tuple[int, Schema]:
    (schema_id,) = struct.unpack_from("<H", content, 0)
    name, offset = _string(content, 2)
    encoding, offset = _string(content, offset)
    definition, _ = _string(content, offset)
    return schema_id, Schema(name, encoding, definition)


def _channel(content: bytes) -> tuple[int, Channel]:
    channel_id, schema_id = struct.unpack_from("<HH", content, 0)
    topic, offset = _string(content, 4)
    encoding, offset = _string(content, offset)
    (length,) = struct.unpack_from("<I", content, offset)
    offset += 4
    end = offset + length
    metadata = {}
    while offset < end:
        key, offset = _string(content, offset)
        metadata[key], offset = _string(content, offset)
    if offset != end:
        raise _DamagedRecordError
    return channel_id, Channel(topic, schema_id, encoding, metadata)


def _message(content: bytes) -> Message:
    channel_id, _sequence, log_time, _publish_time = struct.unpack_from("<HIQQ", content, 0)
    return Message(channel_id, log_time, content[22:])


def _chunk_records(content: bytes) -> bytes:
    """The records inside a Chunk record, decompressed and checked against its CRC."""
    _start, _end, size, crc = struct.unpack_from("<QQQI", content, 0)
    compression, offset = _string(content, 28)
    (length,) = struct.unpack_from("<Q", content, offset)
    offset += 8
    if offset + length != len(content):
        raise _DamagedRecordError
    decompress = DECOMPRESSORS.get(compression)
    if decompress is None:
        raise _DamagedRecordError
    try:
        data = decompress(content[offset:], size)
    except Exception as error:  # the codecs raise their own types on damaged input
        raise _DamagedRecordError from error
    if len(data) != size or (crc and zlib.crc32(data) != crc):
        raise _DamagedRecordError
    return data


def _records(data: bytes) -> Iterator[tuple[int, bytes]]:
    """The (opcode, content) records of a chunk's content; _DamagedRecordError if one is cut."""
    offset = 0
    while offset < len(data):
        if offset + _HEADER.size > len(data):
            raise _DamagedRecordError
        opcode, length = _HEADER.unpack_from(data, offset)
        offset += _HEADER.size
        if offset + length > len(data):
            raise _DamagedRecordError
        yield opcode, data[offset:offset + length]
        offset += length


class McapSalvage:
    """Walk over the MCAP file ``path``: ``messages()`` yields every complete message and
    fills ``report`` as it goes. ``McapError`` if the file does not start as an MCAP."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.report = SalvageReport()

    def messages(self) -> Iterator[Message]:
        report = self.report = SalvageReport()
        with self.path.open("rb") as stream:
            report.size = stream.seek(0, 2)
            stream.seek(0)
            if report.size == 0:
                raise McapError(f"{self.path.name} is empty")
            if stream.read(len(MAGIC)) != MAGIC:
                raise McapError(f"{self.path.name} is not an MCAP file (its first bytes are "
                                "not the MCAP magic)")
            report.read_up_to = len(MAGIC)
            yield from self._walk(stream)

    def _walk(self, stream: BinaryIO) -> Iterator[Message]:
        report = self.report
        while True:
            header = stream.read(_HEADER.size)
            if not header:
                report.stop_reason = "the file ends without its summary and footer"
                return
            if len(header) < _HEADER.size:
                report.stop_reason = "the file ends inside a record"
                return
            opcode, length = _HEADER.unpack(header)
            if opcode not in _KNOWN_OPCODES or length > _LARGEST_RECORD:
                report.stop_reason = (f"an invalid record (opcode {opcode:#04x}) at byte "
                                      f"{report.read_up_to}")
                return
            content = stream.read(length)
            if len(content) < length:
                report.stop_reason = "the file ends inside a record"
                return
            report.read_up_to += _HEADER.size + length
            if opcode in (DATA_END, FOOTER):
                report.complete = True
                return
            if opcode == CHUNK:
                try:
                    inner = list(_records(_chunk_records(content)))
                    messages = sorted((m for m in self._top_level(inner)), key=_log_time)
                except (_DamagedRecordError, struct.error, UnicodeDecodeError):
                    report.damaged_chunks += 1
                    continue
                yield from self._counted(messages)
                continue
            try:
                messages = list(self._top_level([(opcode, content)]))
            except (_DamagedRecordError, struct.error, UnicodeDecodeError):
                report.stop_reason = f"a damaged record at byte {report.read_up_to - length}"
                return
            yield from self._counted(messages)

    def _top_level(self, records: list[tuple[int, bytes]]) -> Iterator[Message]:
        """Messages of ``records``; schemas and channels go into the report."""
        for opcode, content in records:
            if opcode == SCHEMA:
                schema_id, schema = _schema(content)
                self.report.schemas[schema_id] = schema
            elif opcode == CHANNEL:
                channel_id, channel = _channel(content)
                self.report.channels[channel_id] = channel
            elif opcode == MESSAGE:
                message = _message(content)
                if message.channel_id not in self.report.channels:
                    raise _DamagedRecordError  # a message before its channel: not a file we wrote
                yield message

    def _counted(self, messages: list[Message]) -> Iterator[Message]:
        report = self.report
        for message in messages:
            report.counts[message.channel_id] += 1
            if report.first_time is None or message.log_time < report.first_time:
                report.first_time = message.log_time
            if report.last_time is None or message.log_time > report.last_time:
                report.last_time = message.log_time
            yield message


def _log_time(message: Message) -> int:
    return message.log_time
