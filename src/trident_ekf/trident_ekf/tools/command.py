"""How trident-import, trident-replay and trident-bag-recover end: one line on stderr for
every failure (naming the file and the problem, never a traceback), the suite's exit codes
(``mav_ros_common.exit_codes``), SIGTERM handled like Ctrl-C, and outputs checked for
writability before the long work starts."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import NoReturn

from mav_ros_common.exit_codes import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    EXIT_USAGE,
)

SHOWN_CHARACTERS = 300
"""Longest error line: it may quote paths and library messages of any length."""


class UsageError(ValueError):
    """A wrong command line or an output that may not be written (exit ``EXIT_USAGE``)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, stopping the command like Ctrl-C (outputs are discarded on the way out)."""


def one_line(text: str) -> str:
    """``text`` on one line, cut in the middle to ``SHOWN_CHARACTERS``."""
    text = " ".join(text.split())
    if len(text) <= SHOWN_CHARACTERS:
        return text
    half = SHOWN_CHARACTERS // 2 - 3
    return f"{text[:half]} ... {text[-half:]}"


def fail(prog: str, message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``prog: error: message`` (one line) and exit with ``code``."""
    print(f"{prog}: error: {one_line(message)}", file=sys.stderr)
    raise SystemExit(code)


def check_writable(path: Path, flag: str) -> None:
    """UsageError unless the directory ``path`` can be created (or, if it exists, written
    into): checked before the work, so that a bad ``--output``/``--report`` does not fail
    only at the end."""
    ancestor = Path(os.path.abspath(path))
    while not (ancestor.exists() or ancestor.is_symlink()) and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        where = "" if ancestor == Path(os.path.abspath(path)) else f" ({ancestor} is a file)"
        raise UsageError(f"{flag} {path} cannot be created as a directory{where}")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path} cannot be written: no write permission in {ancestor}")


def _terminate(_signal: int, _frame: FrameType | None) -> None:
    raise Terminated


def run_command(prog: str, body: Callable[[], int]) -> int:
    """Run ``body`` (which returns the exit code) with SIGTERM raising ``Terminated``; turn
    what can go wrong into one line and an exit code: ``UsageError`` 2, a ``ValueError``
    (an input that cannot be read, a result that cannot be made) or ``OSError`` 1, Ctrl-C
    130, SIGTERM 143. The command's context managers discard partial outputs on the way."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return body()
    except Terminated:
        print(f"\n{prog}: stopped by SIGTERM; unfinished outputs removed", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        print(f"\n{prog}: interrupted; unfinished outputs removed", file=sys.stderr)
        return EXIT_INTERRUPTED
    except UsageError as error:
        print(f"\n{prog}: error: {one_line(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, OSError) as error:
        print(f"\n{prog}: error: {one_line(str(error))}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        signal.signal(signal.SIGTERM, previous)
