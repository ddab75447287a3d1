"""Shared pieces of the experiment scripts: output folder and the figure backend."""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # scripts write files; no display needed

DEFAULT_OUTPUT = Path("/tmp/variational_sim_hopper")


def parser(description: str) -> argparse.ArgumentParser:
    """Argument parser with ``--output-dir`` (PNG destination)."""
    result = argparse.ArgumentParser(description=description)
    result.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"folder for the PNG plots (default {DEFAULT_OUTPUT})")
    return result


def output_dir(path: Path) -> Path:
    """Create the output folder and return it."""
    path.mkdir(parents=True, exist_ok=True)
    return path
