"""Choose between a package's compiled kernels and their numpy references.

Each package with hot loops ships a small C extension (built by ``tools/bootstrap``
in a venv and by ``colcon build`` on a ROS distro) next to the numpy code it speeds
up. The numpy code stays the reference: tests compare the two, and
``MAV_KERNELS=reference`` runs it everywhere, for debugging or to check a result.
"""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType

ENVIRONMENT_VARIABLE = "MAV_KERNELS"
CHOICES = ("compiled", "reference")


def kernel_choice() -> str:
    """``compiled`` (the default) or ``reference``, from ``MAV_KERNELS``."""
    choice = os.environ.get(ENVIRONMENT_VARIABLE, "compiled").strip().lower() or "compiled"
    if choice not in CHOICES:
        raise ValueError(f"{ENVIRONMENT_VARIABLE}={choice!r}: expected one of {', '.join(CHOICES)}")
    return choice


def load_kernels(module: str) -> ModuleType | None:
    """The compiled extension ``module``, or None to run the numpy reference.

    An extension that is not built is not fatal (the reference computes the same
    numbers), but it is several times slower, so it is reported as a RuntimeWarning.
    """
    if kernel_choice() == "reference":
        return None
    try:
        return importlib.import_module(module)
    except ImportError as error:
        warnings.warn(f"{module} is not built ({error}); running the numpy reference, several "
                      "times slower. Build it with tools/bootstrap (venv) or colcon build.",
                      RuntimeWarning, stacklevel=2)
        return None
