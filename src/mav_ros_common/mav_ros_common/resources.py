"""Where an installed package's shared files are: launch, parameter, vehicle and robot files.

A package's ``share/<package>/`` directory is found, in order, through

1. the ament index on ``AMENT_PREFIX_PATH`` (a colcon install or a sourced ROS distro);
2. the files pip recorded for the package's distribution (``pip install``, any prefix);
3. the ament index inside this interpreter's prefix (``sys.prefix``), which
   ``tools/bootstrap`` writes for the editable installs of a development venv.

Nothing here derives a path from ``__file__``: a package finds its data the same way
whether it runs from a colcon install, a wheel or a source checkout.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

BRINGUP = "mav_bringup"
"""The package that owns the suite's launch, parameter, vehicle, robot and rviz files."""


class ShareNotFoundError(FileNotFoundError):
    """A package's share directory, or a file in it, is not installed where we look."""


def _from_ament_index(package: str) -> Path | None:
    if not os.environ.get("AMENT_PREFIX_PATH"):
        return None
    try:
        return Path(get_package_share_directory(package))
    except PackageNotFoundError:
        return None


def _from_pip_record(package: str) -> Path | None:
    from importlib import metadata  # 25 ms to import; a colcon install never gets here

    try:
        files = metadata.distribution(package).files or []
    except metadata.PackageNotFoundError:
        return None
    manifest = f"share/{package}/package.xml"
    for record in files:
        if record.as_posix().endswith(manifest):
            return Path(str(record.locate())).resolve().parent
    return None


def _from_interpreter_prefix(package: str) -> Path | None:
    prefix = Path(sys.prefix)
    marker = prefix / "share" / "ament_index" / "resource_index" / "packages" / package
    share = prefix / "share" / package
    return share if marker.is_file() and share.is_dir() else None


def package_share(package: str) -> Path:
    """The ``share/<package>`` directory of an installed package."""
    for lookup in (_from_ament_index, _from_pip_record, _from_interpreter_prefix):
        share = lookup(package)
        if share is not None:
            return share
    raise ShareNotFoundError(
        f"package '{package}' is not installed where ROS or pip can find it: source the "
        f"colcon install (install/setup.bash), pip-install it, or run tools/bootstrap "
        f"for a development venv")


def share_file(package: str, relative: str | Path) -> Path:
    """A file under ``share/<package>/``, which must exist."""
    path = package_share(package) / relative
    if not path.exists():
        raise ShareNotFoundError(f"{path} is not installed (package '{package}')")
    return path


def config_file(relative: str | Path) -> Path:
    """A file of the bringup's ``config/`` folder, e.g. ``config_file("estimator.yaml")``."""
    return share_file(BRINGUP, Path("config") / relative)


def find_named_file(name: str | Path, kind: str) -> Path:
    """A vehicle or robot file given as a path or as a name in the bringup's config.

    ``kind`` is the config sub-folder (``"vehicles"``, ``"robots"`` or ``"scenarios"``). An
    absolute path, or a path relative to the working directory that exists, wins; otherwise
    ``name`` (with or without ``.yaml``) is looked up in ``share/mav_bringup/config/<kind>/``.
    """
    path = Path(name).expanduser()
    if path.is_absolute() or path.exists():
        if not path.is_file():
            raise ShareNotFoundError(f"{kind[:-1]} file {path} does not exist")
        return path.resolve()
    folder = package_share(BRINGUP) / "config" / kind
    for candidate in (folder / path, folder / f"{path}.yaml"):
        if candidate.is_file():
            return candidate
    known = sorted(p.stem for p in folder.glob("*.yaml"))
    raise ShareNotFoundError(
        f"no {kind[:-1]} file '{name}': not a file from the working directory and not one "
        f"of the installed {kind} {known}")
