"""ament_python build of `trident_ekf` (colcon on a ROS 2 distro, or pip into a venv)."""

from setuptools import Extension, find_packages, setup

PACKAGE = "trident_ekf"

# The hot loops in C, next to the numpy code they speed up (mav_geometry.kernels). No
# -ffast-math and no FMA contraction: they must agree with the numpy reference to round-off.
COMPILE_ARGS = ["-O3", "-std=c11", "-ffp-contract=off"]
KERNELS = [Extension(name, [name.replace(".", "/") + ".c"], extra_compile_args=COMPILE_ARGS)
           for name in ("trident_ekf.core._kernels",)]

setup(
    name=PACKAGE,
    version="0.1.0",
    ext_modules=KERNELS,
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
    zip_safe=False,
    maintainer="Trident suite maintainers",
    maintainer_email="maintainers@trident-suite.invalid",
    description="Trident-quaternion IMU/GNSS error-state EKF with replay and log import.",
    license="Apache-2.0",
)
