"""Property tests of the log and bag readers on damaged input: random bytes, real files cut
at random offsets and real files with random bit flips. A reader either returns what it
could read or raises its module's clean error (``LogReadError``, ``McapError``,
``BagReadError``, all ValueErrors with a message naming the file): never anything else."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from trident_ekf.tools import bagio
from trident_ekf.tools.bag_reader import BagReader, BagReadError
from trident_ekf.tools.flightlog import LogReadError, read_log
from trident_ekf.tools.mcap_salvage import McapError, McapSalvage

DATA = Path(__file__).resolve().parents[3] / "data"
PREFIX_BYTES = 150_000  # of each real log: every record kind, and fast to parse
ULOG = (DATA / "px4_sitl" / "sample_px4_events.ulg").read_bytes()[:PREFIX_BYTES]
DATAFLASH = (DATA / "ardupilot" / "log171.bin").read_bytes()[:PREFIX_BYTES]
LOGS = {"flight.ulg": ULOG, "flight.bin": DATAFLASH}


def _small_bag() -> tuple[bytes, str]:
    """The MCAP file and metadata.yaml of a bag with IMU and fixes (one chunk)."""
    with tempfile.TemporaryDirectory() as directory:
        bag = Path(directory) / "bag"
        with bagio.BagWriter(bag) as writer:
            for i in range(200):
                stamp = 10**9 + i * 10**7
                writer.write("/imu/data", bagio.IMU, stamp,
                             bagio.imu_message(stamp, np.zeros(3), np.array([0.0, 0.0, 9.8])))
                if i % 10 == 0:
                    writer.write("/gnss/fix", bagio.NAVSATFIX, stamp,
                                 bagio.navsatfix_message(stamp, 47.0, 8.0, 500.0, np.eye(3)))
        return bagio.storage_file(bag).read_bytes(), (bag / "metadata.yaml").read_text()


MCAP, METADATA = _small_bag()


def _flipped(data: bytes, flips: list[tuple[float, int]]) -> bytes:
    """``data`` with one bit flipped at each (position as a fraction of the length, bit)."""
    damaged = bytearray(data)
    for where, bit in flips:
        damaged[min(int(where * len(data)), len(data) - 1)] ^= 1 << bit
    return bytes(damaged)


def _damaged(data: bytes) -> st.SearchStrategy[bytes]:
    """Random bytes, ``data`` cut at a random offset, or ``data`` with random bit flips."""
    flips = st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, 7)), min_size=1,
                     max_size=20)
    return st.one_of(st.binary(max_size=4096),
                     st.integers(0, len(data)).map(lambda end: data[:end]),
                     flips.map(lambda flip: _flipped(data, flip)))


@contextmanager
def _written(name: str, content: bytes) -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / name
        path.write_bytes(content)
        yield path


@settings(max_examples=20)
@given(st.sampled_from(sorted(LOGS)).flatmap(
    lambda name: st.tuples(st.just(name), _damaged(LOGS[name]))))
def test_the_log_readers_raise_only_their_clean_error(log):
    name, content = log
    with _written(name, content) as path:
        try:
            flight = read_log(path)
        except LogReadError as error:
            refused = str(error)
        else:
            refused = ""
    if refused:
        assert name in refused
        return
    # Read: the series are consistent, and a damaged file says what it lost.
    assert flight.imu_time.size == flight.gyro.shape[0] == flight.accel.shape[0]
    assert all(isinstance(line, str) and line for line in flight.damage)


@settings(max_examples=50)
@given(_damaged(MCAP))
def test_the_mcap_walk_raises_only_its_clean_error(content):
    with _written("bag_0.mcap", content) as path:
        salvage = McapSalvage(path)
        try:
            count = sum(1 for _ in salvage.messages())
        except McapError as error:
            refused = str(error)
        else:
            refused = ""
    if refused:
        assert "bag_0.mcap" in refused
        return
    report = salvage.report
    assert count == sum(report.counts.values())
    assert report.read_up_to <= report.size
    assert report.complete or report.stop_reason


@settings(max_examples=50)
@given(_damaged(MCAP))
def test_the_bag_reader_raises_only_its_clean_error(content):
    with tempfile.TemporaryDirectory() as directory:
        bag = Path(directory) / "bag"
        bag.mkdir()
        (bag / "bag_0.mcap").write_bytes(content)
        (bag / "metadata.yaml").write_text(METADATA)
        try:
            reader = BagReader(bag)
            read = sum(1 for _ in reader.raw(list(reader.topics)))
        except BagReadError as error:
            refused = str(error)
        else:
            refused = ""
        if refused:
            assert str(bag) in refused
            return
        promised = sum(count for _, count in reader.topics.values())
        if reader.salvaged:  # its counts are what the walk over the file found
            assert read == promised
        if read < promised:  # rosbags skipped messages of a damaged chunk: said, not silent
            assert reader.loss()
