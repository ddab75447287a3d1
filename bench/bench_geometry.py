"""mav_geometry rotation ops against scipy.spatial.transform.Rotation.

Usage: python bench/bench_geometry.py [--size N] [--repeats K] [--output-dir DIR]

Each op runs on one element (unbatched: a quaternion of shape (4,) against scipy's single
Rotation) and on a batch of N elements (default 1e5), in the same process as scipy doing
the same work, after checking both agree. ``MAV_KERNELS=reference`` times the numpy
reference instead of the compiled kernels (mav_geometry._kernels).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from harness import Case, run, write_report
from scipy.spatial.transform import Rotation

from mav_geometry import quaternion as Q
from mav_geometry.groups import SO3

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"


def _same_rotation(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.allclose(np.abs(np.sum(a * b, axis=-1)), 1.0, atol=1e-12))


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.allclose(a, b, atol=1e-12))


def cases(size: int, seed: int = 0) -> list[Case]:
    rng = np.random.default_rng(seed)
    result = []
    for n in (1, size):
        # one element unbatched (quaternion shape (4,), scipy's single Rotation): the
        # per-call cost a filter or a controller pays
        count = None if n == 1 else n
        r1 = Rotation.random(count, rng=rng)
        r2 = Rotation.random(count, rng=rng)
        q1, q2 = r1.as_quat(), r2.as_quat()
        vectors = rng.normal(size=(3,) if count is None else (n, 3))
        rotvecs = r1.as_rotvec()
        matrices = r1.as_matrix()
        result += [
            Case("compose", n, lambda q1=q1, q2=q2: Q.multiply(q1, q2),
                 lambda r1=r1, r2=r2: (r1 * r2).as_quat(), _same_rotation),
            Case("exp (from rotation vector)", n, lambda v=rotvecs: Q.from_rotation_vector(v),
                 lambda v=rotvecs: Rotation.from_rotvec(v).as_quat(), _same_rotation),
            Case("log (to rotation vector)", n, lambda q=q1: Q.to_rotation_vector(q),
                 lambda r=r1: r.as_rotvec(), _close),
            Case("rotate vectors", n, lambda q=q1, v=vectors: Q.rotate(q, v),
                 lambda r=r1, v=vectors: r.apply(v), _close),
            Case("to matrix", n, lambda q=q1: Q.to_matrix(q),
                 lambda r=r1: r.as_matrix(), _close),
            Case("from matrix", n, lambda m=matrices: Q.from_matrix(m),
                 lambda m=matrices: Rotation.from_matrix(m).as_quat(), _same_rotation),
            Case("SO3 exp (matrix)", n, lambda v=rotvecs: SO3.exp(v),
                 lambda v=rotvecs: Rotation.from_rotvec(v).as_matrix(), _close),
        ]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="batch size (default 1e5)")
    parser.add_argument("--repeats", type=int, default=5, help="timing repeats (default 5)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where the JSON and Markdown go (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if args.size < 1 or args.repeats < 1:
        parser.error("--size and --repeats must be positive")
    results = run(cases(args.size), args.repeats)
    _, markdown = write_report(
        results, "mav_geometry vs scipy Rotation", "scipy", args.output_dir, "geometry"
    )
    print(markdown.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
