"""trident-import, trident-replay and trident-bag-recover on inputs and outputs that cannot
work: each ends with one line on stderr naming the file and the problem, the suite's exit
code (``mav_ros_common.exit_codes``), no traceback, and nothing left behind. Damaged but
readable inputs give what was readable, a warning with what was lost, and exit 3 (0 with
``--allow-partial``). SIGTERM ends a run like Ctrl-C (143), without a partial output."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from mav_ros_common.exit_codes import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_TERMINATED,
    EXIT_USAGE,
)
from trident_ekf.tools import bag_recover, bagio, import_cli, replay
from trident_ekf.tools.flightlog import read_log

DATA = Path(__file__).resolve().parents[3] / "data"
ULOG = DATA / "px4_sitl" / "sample_px4_events.ulg"
REPLAY_CSV = DATA / "px4_sitl" / "test_replay_data_ekf_gsf_reset.csv"
PROGRESS = ("writing:", "replay:", "note:")


def _mcap_bag(directory: Path, content: bytes) -> Path:
    """A bag directory with ``content`` as its MCAP file."""
    directory.mkdir()
    (directory / bagio.storage_file(directory).name).write_bytes(content)
    return directory


@pytest.fixture(scope="module")
def sitl_bag(tmp_path_factory) -> Path:
    """The PX4 SITL replay CSV imported (4.5 MB: five 1 MiB chunks)."""
    bag = tmp_path_factory.mktemp("sitl") / "sitl"
    assert import_cli.main([str(REPLAY_CSV), "--output", str(bag)]) == EXIT_OK
    return bag


def _never_starting_bag(directory: Path) -> Path:
    """IMU at rest and fixes without a fix (NO_FIX): the estimator cannot start."""
    bag = directory / "no_fix"
    with bagio.BagWriter(bag) as writer:
        for i in range(300):
            stamp = 10**9 + i * 10**7
            writer.write("/imu/data", bagio.IMU, stamp,
                         bagio.imu_message(stamp, np.zeros(3), np.array([0.0, 0.0, 9.81])))
            if i % 20 == 0:
                fix = bagio.navsatfix_message(stamp, 47.0, 8.0, 500.0, np.eye(3))
                fix.status.status = -1
                writer.write("/gnss/fix", bagio.NAVSATFIX, stamp, fix)
    return bag


@dataclass(frozen=True)
class Case:
    name: str
    command: Callable[[list[str]], int]
    setup: Callable[[Path, Path], list[str]]  # (work directory, good bag) -> arguments
    code: int
    named: str  # what the error line must name


def _file(directory: Path, name: str, content: bytes) -> Path:
    path = directory / name
    path.write_bytes(content)
    return path


def _folder(directory: Path) -> Path:
    directory.mkdir()
    _file(directory, "notes.txt", b"not a bag")
    return directory


RANDOM = random.Random(7).randbytes(20000)
EARLY_ULOG = (DATA / "px4_sitl" / "sample_logging_tagged_and_default_params.ulg").read_bytes()[
    :971_404]  # its first 5.7 s, before the receiver's first 3D fix
CASES = [
    Case("empty ULog", import_cli.main,
         lambda d, _: [str(_file(d, "empty.ulg", b"")), "--output", str(d / "out")],
         EXIT_FAILED, "empty.ulg"),
    Case("random ULog", import_cli.main,
         lambda d, _: [str(_file(d, "noise.ulg", RANDOM)), "--output", str(d / "out")],
         EXIT_FAILED, "noise.ulg"),
    Case("ULog cut before its first 3D fix", import_cli.main,
         lambda d, _: [str(_file(d, "early.ulg", EARLY_ULOG)), "--output", str(d / "out")],
         EXIT_FAILED, "early.ulg: no 3D GNSS fix"),
    Case("empty DataFlash", import_cli.main,
         lambda d, _: [str(_file(d, "empty.bin", b"")), "--output", str(d / "out")],
         EXIT_FAILED, "empty.bin"),
    Case("random DataFlash", import_cli.main,
         lambda d, _: [str(_file(d, "noise.bin", RANDOM)), "--output", str(d / "out")],
         EXIT_FAILED, "noise.bin"),
    Case("import output under a file", import_cli.main,
         lambda d, _: [str(ULOG), "--output", str(_file(d, "plain", b"x") / "out")],
         EXIT_USAGE, "plain/out"),
    Case("random MCAP", replay.main,
         lambda d, _: [str(_mcap_bag(d / "noise", RANDOM))], EXIT_FAILED, "noise_0.mcap"),
    Case("empty MCAP", replay.main,
         lambda d, _: [str(_mcap_bag(d / "void", b""))], EXIT_FAILED, "void_0.mcap"),
    Case("bag folder without metadata or MCAP", replay.main,
         lambda d, _: [str(_folder(d / "folder"))], EXIT_FAILED, "folder"),
    Case("a file given as the bag", replay.main,
         lambda d, _: [str(_file(d, "flight.txt", b"x"))], EXIT_USAGE, "flight.txt"),
    Case("replay output under a file", replay.main,
         lambda d, bag: [str(bag), "--output", str(_file(d, "plain", b"x") / "out")],
         EXIT_USAGE, "plain/out"),
    Case("report path is a file", replay.main,
         lambda d, bag: [str(bag), "--report", str(_file(d, "report", b"x"))],
         EXIT_USAGE, "work/report"),
    Case("estimator never starts", replay.main,
         lambda d, _: [str(_never_starting_bag(d)), "--output", str(d / "out"),
                       "--report", str(d / "report")], EXIT_FAILED, "no_fix"),
    Case("recover a random MCAP", bag_recover.main,
         lambda d, _: [str(_mcap_bag(d / "noise", RANDOM)), "--output", str(d / "out")],
         EXIT_FAILED, "noise_0.mcap"),
]


def _message_lines(error: str) -> list[str]:
    """stderr without the progress and note lines."""
    lines = error.replace("\r", "\n").splitlines()
    return [line for line in lines if line.strip() and not line.lstrip().startswith(PROGRESS)]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_failing_command_says_one_line_and_leaves_nothing(case, sitl_bag, tmp_path, capsys):
    work = tmp_path / "work"
    work.mkdir()
    arguments = case.setup(work, sitl_bag)
    inputs = sorted(work.rglob("*"))
    try:
        code = case.command(arguments)
    except SystemExit as exit_:
        code = exit_.code
    error = capsys.readouterr().err
    assert code == case.code, error
    assert "Traceback" not in error
    (line,) = _message_lines(error)
    assert case.named in line
    assert line.startswith(("trident-import: error: ", "trident-replay: error: ",
                            "trident-bag-recover: error: ")), line
    assert sorted(work.rglob("*")) == inputs  # no output, no staging directory


def test_a_report_path_is_checked_before_the_replay_runs(sitl_bag, tmp_path, capsys):
    blocked = tmp_path / "report"
    blocked.write_text("x")
    with pytest.raises(SystemExit) as exit_:
        replay.main([str(sitl_bag), "--report", str(blocked)])
    assert exit_.value.code == EXIT_USAGE
    assert "\rreplay:" not in capsys.readouterr().err  # not a message was read


# ----- damaged but readable inputs: what was readable, a warning, exit 3 --------------------
def test_a_ulog_cut_in_half_imports_what_it_has_and_exits_3(tmp_path, capsys):
    data = ULOG.read_bytes()
    cut = _file(tmp_path, "cut.ulg", data[:len(data) // 2])
    assert import_cli.main([str(cut), "--output", str(tmp_path / "bag")]) == EXIT_PARTIAL
    error = capsys.readouterr().err
    assert "Traceback" not in error
    assert f"cut.ulg ends inside a record at byte 781570 of {len(data) // 2}" in error
    summary = _import_summary(tmp_path / "bag")
    assert summary["data_loss"].startswith("cut.ulg ends inside a record")
    assert bagio.topic_counts(tmp_path / "bag")["/imu/data"] == 3659  # of 7783 in the whole
    assert import_cli.main([str(cut), "--output", str(tmp_path / "bag2"),
                            "--allow-partial"]) == EXIT_OK


def test_a_corrupt_block_in_a_ulog_is_reported_per_stream(tmp_path, capsys):
    """1 MB of noise in the middle of the 1.5 MB log: 5407 of the 7783 IMU samples are
    lost in one 21.7 s hole, and the warning says so for each sensor."""
    data = bytearray(ULOG.read_bytes())
    middle = len(data) // 2
    data[middle - 500_000:middle + 500_000] = random.Random(0).randbytes(1_000_000)
    corrupt = _file(tmp_path, "corrupt.ulg", bytes(data))
    assert import_cli.main([str(corrupt), "--output", str(tmp_path / "bag")]) == EXIT_PARTIAL
    error = capsys.readouterr().err
    assert "corrupt.ulg is corrupt: damaged records were skipped" in error
    assert "IMU: 2376 samples kept, about 5407 lost at 250 Hz in 1 hole(s)" in error
    assert "GNSS: 106 samples kept" in error
    assert bagio.topic_counts(tmp_path / "bag")["/imu/data"] == 2376


def test_a_dataflash_log_cut_short_or_corrupt_is_reported(tmp_path):
    data = (DATA / "ardupilot" / "log171.bin").read_bytes()
    cut = read_log(_file(tmp_path, "cut.bin", data[:len(data) // 2]))
    assert cut.damage == ("cut.bin ends inside a message at byte 1490944: it was cut short, "
                          "and whatever the log held after 132.5 s of the log clock is lost",)
    noisy = bytearray(data)
    noisy[1_000_000:1_500_000] = random.Random(0).randbytes(500_000)
    corrupt = read_log(_file(tmp_path, "corrupt.bin", bytes(noisy)))
    assert corrupt.damage[0].startswith("corrupt.bin cannot be read past byte ")
    assert corrupt.imu_time.size < 11916 // 2  # of the whole log's 11916


def test_a_truncated_bag_replays_what_it_has_and_counts_what_it_lost(sitl_bag, tmp_path,
                                                                     capsys):
    data = bagio.storage_file(sitl_bag).read_bytes()
    cut = tmp_path / "cut"
    shutil.copytree(sitl_bag, cut)
    (cut / bagio.storage_file(sitl_bag).name).write_bytes(data[:len(data) // 2])
    arguments = [str(cut), "--stop", "4", "--output", str(tmp_path / "out")]
    assert replay.main(arguments) == EXIT_PARTIAL
    error = capsys.readouterr().err
    assert "the file ends inside a record; nothing after bag time 19.152 s" in error
    assert ("messages lost: /imu/data 4923 of 9711, /gnss/fix 50 of 98, /gnss/vel 50 of 98"
            in error)
    assert bagio.topic_counts(tmp_path / "out")["/trident_ekf/odometry"] > 0
    assert replay.main([*arguments[:3], "--allow-partial"]) == EXIT_OK


# ----- a recording that was never closed ------------------------------------------------------
def test_a_bag_without_metadata_is_read_and_recovered_whole(sitl_bag, tmp_path, capsys):
    """An MCAP that is complete but has no metadata.yaml (rosbags refuses it): nothing is
    lost, and trident-bag-recover gives it its metadata."""
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(bagio.storage_file(sitl_bag), bare / "recording.mcap")
    assert bag_recover.main([str(bare / "recording.mcap"), "--output",
                             str(tmp_path / "fixed")]) == EXIT_OK
    assert "not recovered" not in capsys.readouterr().err
    assert bagio.topic_counts(tmp_path / "fixed") == bagio.topic_counts(sitl_bag)


# ----- SIGTERM --------------------------------------------------------------------------------
def test_sigterm_stops_an_import_with_143_and_leaves_no_output(tmp_path):
    """The console script's process, terminated while it writes the bag."""
    output = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "trident_ekf.tools.import_cli", str(ULOG), "--output",
         str(output)], stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    assert process.stderr is not None
    seen = ""
    while "writing:" not in seen:  # the long work is under way
        character = process.stderr.read(1)
        assert character, f"ended before it started: {seen}"
        seen += character
    process.send_signal(signal.SIGTERM)
    error = seen + process.stderr.read()
    assert process.wait() == EXIT_TERMINATED, error
    assert "Traceback" not in error
    assert _message_lines(error) == ["trident-import: stopped by SIGTERM; unfinished outputs "
                                     "removed"]
    assert list(tmp_path.iterdir()) == []


def test_sigterm_stops_a_replay_with_143_and_leaves_no_output(sitl_bag, tmp_path, capsys,
                                                              monkeypatch):
    """A real SIGTERM to this process at the 500th IMU sample of the replay."""
    imu = replay.ReplaySession.imu
    calls = []

    def terminated_midway(self: replay.ReplaySession, sample: object) -> None:
        calls.append(sample)
        if len(calls) == 500:
            os.kill(os.getpid(), signal.SIGTERM)
        imu(self, sample)  # type: ignore[arg-type]

    monkeypatch.setattr(replay.ReplaySession, "imu", terminated_midway)
    previous = signal.getsignal(signal.SIGTERM)
    code = replay.main([str(sitl_bag), "--output", str(tmp_path / "out"), "--report",
                        str(tmp_path / "report")])
    error = capsys.readouterr().err
    assert code == EXIT_TERMINATED
    assert 500 <= len(calls) < 9711
    assert _message_lines(error) == ["trident-replay: stopped by SIGTERM; unfinished outputs "
                                     "removed"]
    assert list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) == previous  # the handler is put back


def _import_summary(bag: Path) -> dict[str, str]:
    for _, _, message in bagio.read_messages(bag, [bagio.IMPORT_SUMMARY_TOPIC]):
        return {item.key: item.value for status in message.status for item in status.values}
    raise AssertionError("no import summary")
