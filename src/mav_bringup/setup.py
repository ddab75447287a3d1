"""ament_python build of `mav_bringup` (colcon on a ROS 2 distro, or pip into a venv).

`launch` and `config` here are links to the repository's top-level folders, the single
source of truth; every file under them is installed to `share/mav_bringup/`.
"""

from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "mav_bringup"
SHARED_FOLDERS = ("launch", "config")


def share_files() -> list[tuple[str, list[str]]]:
    """(install folder, files) for every file under SHARED_FOLDERS, keeping the tree."""
    here = Path(__file__).resolve().parent
    entries = []
    for folder in SHARED_FOLDERS:
        directories = [here / folder, *(p for p in (here / folder).rglob("*") if p.is_dir())]
        for directory in sorted(d for d in directories if "__pycache__" not in d.parts):
            files = sorted(str(f.relative_to(here)) for f in directory.iterdir() if f.is_file())
            if files:
                entries.append((f"share/{PACKAGE}/{directory.relative_to(here)}", files))
    return entries


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        *share_files(),
    ],
    install_requires=["mav_ros_common", "mav_geometry", "mav_dynamics", "variational_sim",
                      "trident_ekf", "numpy", "pyyaml", "matplotlib", "pymap3d", "rosbags",
                      "ray", "pyarrow"],
    extras_require={"test": ["pytest", "hypothesis"]},
    python_requires=">=3.11",
    zip_safe=True,
    entry_points={
        "console_scripts": [
            "mav-sim = mav_bringup.graph.runner:main",
            "mav-keystore = mav_bringup.security.keystore:main",
            "mav-campaign = mav_bringup.campaign.command:main",
        ],
    },
    maintainer="Trident suite maintainers",
    maintainer_email="maintainers@trident-suite.invalid",
    description="Launch files, parameter, vehicle, robot and rviz files of the suite, "
                "mav-sim, the simulation graph in one process, and mav-keystore, its SROS2 "
                "keystore.",
    license="Apache-2.0",
)
