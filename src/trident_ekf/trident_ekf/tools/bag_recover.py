"""trident-bag-recover: rebuild a readable rosbag2 bag from one a recorder left unfinished.

A recorder that is killed (``kill -9``, power loss, out of memory) leaves its MCAP without
the summary and footer that readers start from, and the bag directory without
``metadata.yaml``; ``ros2 bag`` and rosbags refuse it. This command reads every complete
record of it (``mcap_salvage``) and writes them, with their types and offered QoS, into a
new bag with its metadata. What was lost (the chunk the recorder still held in memory, a
record cut short) is listed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mav_ros_common.exit_codes import EXIT_OK
from trident_ekf.tools import bagio
from trident_ekf.tools.bag_reader import BagReader
from trident_ekf.tools.command import check_writable, fail, run_command

PROG = "trident-bag-recover"

EPILOG = """exit status:
  0    bag written (the lines after it say what could not be recovered)
  1    the input cannot be read at all (no MCAP file in it, not an MCAP file) or the bag
       cannot be written
  2    usage error, or the output exists (without --force) or cannot be created
  130  interrupted (Ctrl-C), 143 stopped by SIGTERM: no bag is left behind"""


def recover(source: Path, output: Path, overwrite: bool = False) -> tuple[dict[str, int],
                                                                         list[str]]:
    """Write every complete message of the bag ``source`` (a directory, damaged or not)
    into the new bag ``output``; returns the messages written per topic and what the
    source lost (``BagReader.loss``)."""
    reader = BagReader(source)
    store = bagio.bag_typestore(reader, {msgtype for msgtype, _ in reader.topics.values()})
    counts = dict.fromkeys(reader.topics, 0)
    with bagio.BagWriter(output, overwrite) as writer:
        for topic, (msgtype, _) in reader.topics.items():
            writer.add_topic(topic, msgtype, store, reader.qos.get(topic, []))
        for topic, msgtype, stamp, data in reader.raw(list(reader.topics)):
            writer.write_cdr(topic, msgtype, stamp, data)
            counts[topic] += 1
    return counts, reader.loss()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bag", type=Path,
                        help="the unfinished bag: its directory, or the .mcap file in it")
    parser.add_argument("--output", type=Path, required=True, metavar="BAG",
                        help="rosbag2 directory to create (BAG/BAG_0.mcap + metadata.yaml); "
                             "must not exist unless --force")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing output bag (a directory with metadata.yaml, "
                             "or an empty one)")
    args = parser.parse_args(argv)
    source = bagio.bag_input(args.bag)
    if source is None:
        fail(PROG, f"{args.bag} is not a bag directory or an MCAP file"
             if args.bag.exists() else f"no such bag: {args.bag}")
    output = bagio.bag_directory(args.output)
    return run_command(PROG, lambda: _recover_and_print(source, output, args.force))


def _recover_and_print(source: Path, output: Path, overwrite: bool) -> int:
    bagio.check_output(output, overwrite)
    check_writable(output, "--output")
    counts, loss = recover(source, output, overwrite)
    print(f"{output}: {sum(counts.values())} messages on {len(counts)} topics")
    for topic, count in counts.items():
        print(f"  {topic}: {count}")
    for line in loss:
        print(f"{PROG}: not recovered: {line}", file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
