"""ament_python build of `mav_dynamics` (colcon on a ROS 2 distro, or pip into a venv)."""

from setuptools import Extension, find_packages, setup

PACKAGE = "mav_dynamics"

# The hot loops in C, next to the numpy code they speed up (mav_geometry.kernels). No
# -ffast-math and no FMA contraction: they must agree with the numpy reference to round-off.
COMPILE_ARGS = ["-O3", "-std=c11", "-ffp-contract=off"]
KERNELS = [Extension(name, [name.replace(".", "/") + ".c"], extra_compile_args=COMPILE_ARGS)
           for name in ("mav_dynamics._kernels",)]

setup(
    name=PACKAGE,
    version="0.1.0",
    ext_modules=KERNELS,
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["mav_geometry", "numpy", "pyyaml", "mav_ros_common"],
    entry_points={
        "console_scripts": [
            "controller_node = mav_dynamics.ros.controller_node:main",
        ],
    },
    extras_require={"test": ["pytest", "hypothesis", "scipy"]},
    python_requires=">=3.11",
    zip_safe=False,
    maintainer="Trident suite maintainers",
    maintainer_email="maintainers@trident-suite.invalid",
    description="Screw-theory multirotor model, control allocation and tracking controller.",
    license="Apache-2.0",
)
