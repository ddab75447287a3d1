"""ament_python build of `trident_ekf` (colcon on a ROS 2 distro, or pip into a venv)."""

from setuptools import find_packages, setup

PACKAGE = "trident_ekf"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["mav_geometry", "numpy", "scipy", "matplotlib", "pymap3d", "pyulog",
                      "pymavlink", "rosbags", "pygeomag", "mav_ros_common"],
    entry_points={
        "console_scripts": [
            "trident-import = trident_ekf.tools.import_cli:main",
            "trident-replay = trident_ekf.tools.replay:main",
            "trident-bag-recover = trident_ekf.tools.bag_recover:main",
            "estimator_node = trident_ekf.ros.estimator_node:main",
        ],
    },
    extras_require={"test": ["pytest", "hypothesis"]},
    python_requires=">=3.11",
    zip_safe=True,
    maintainer="Trident suite maintainers",
    maintainer_email="maintainers@trident-suite.invalid",
    description="Trident-quaternion IMU/GNSS error-state EKF with replay and log import.",
    license="Apache-2.0",
)
