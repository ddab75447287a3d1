"""ament_python build of `mav_geometry` (colcon on a ROS 2 distro, or pip into a venv)."""

from setuptools import Extension, find_packages, setup

PACKAGE = "mav_geometry"

# The hot loops in C, next to the numpy code they speed up (mav_geometry.kernels). No
# -ffast-math and no FMA contraction: they must agree with the numpy reference to round-off.
COMPILE_ARGS = ["-O3", "-std=c11", "-ffp-contract=off"]
KERNELS = [Extension(name, [name.replace(".", "/") + ".c"], extra_compile_args=COMPILE_ARGS)
           for name in ("mav_geometry._kernels",)]

setup(
    name=PACKAGE,
    version="0.1.0",
    ext_modules=KERNELS,
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["numpy", "scipy", "pyyaml"],
    extras_require={"test": ["pytest", "hypothesis"]},
    python_requires=">=3.11",
    zip_safe=False,
    maintainer="Trident suite maintainers",
    maintainer_email="maintainers@trident-suite.invalid",
    description="Quaternion, dual/trident quaternion and SO(3)/SE(3)/SE2(3) algebra.",
    license="Apache-2.0",
)
