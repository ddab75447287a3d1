"""ament_python build of `mav_ros_common` (colcon on a ROS 2 distro, or pip into a venv)."""

from setuptools import find_packages, setup

PACKAGE = "mav_ros_common"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=[],
    extras_require={"test": ["pytest", "hypothesis"]},
    python_requires=">=3.11",
    zip_safe=True,
    maintainer="Trident suite maintainers",
    maintainer_email="maintainers@trident-suite.invalid",
    description="ROS 2 plumbing shared by the suite's nodes: parameters, QoS, stamps, "
                "diagnostics, exit codes and installed-file lookup.",
    license="Apache-2.0",
)
