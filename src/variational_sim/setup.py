"""ament_python build of `variational_sim` (colcon on a ROS 2 distro, or pip into a venv)."""

from setuptools import Extension, find_packages, setup

PACKAGE = "variational_sim"

# The hot loops in C, next to the numpy code they speed up (mav_geometry.kernels). No
# -ffast-math and no FMA contraction: they must agree with the numpy reference to round-off.
COMPILE_ARGS = ["-O3", "-std=c11", "-ffp-contract=off"]
KERNELS = [Extension(name, [name.replace(".", "/") + ".c"], extra_compile_args=COMPILE_ARGS)
           for name in ("variational_sim.integrators._kernels",
                        "variational_sim.multibody._kernels")]

setup(
    name=PACKAGE,
    version="0.1.0",
    ext_modules=KERNELS,
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["mav_geometry", "mav_dynamics", "numpy", "scipy", "pyyaml", "matplotlib",
                      "pymap3d", "rosbags", "mav_ros_common"],
    extras_require={"test": ["pytest", "hypothesis"]},
    python_requires=">=3.11",
    zip_safe=False,
    entry_points={
        "console_scripts": [
            "variational-sim-reorientation = variational_sim.demos.reorientation:main",
            "hopper-passive-swing = variational_sim.experiments.passive_swing:main",
            "hopper-pd-manoeuvre = variational_sim.experiments.pd_manoeuvre:main",
            "hopper-drop-test = variational_sim.experiments.drop_test:main",
            "hopper-hop = variational_sim.experiments.hop:main",
            "simulator_node = variational_sim.ros.simulator_node:main",
        ],
    },
    maintainer="Trident suite maintainers",
    maintainer_email="maintainers@trident-suite.invalid",
    description="Variational-integrator simulator for multirotors and multibody robots.",
    license="Apache-2.0",
)
