"""Start-up stays lean: importing a command's module loads no plotting or statistics.

A command-line tool's ``--help`` and a node's start imported matplotlib, scipy.stats and
friends (about 2 s) although only the report or one solver needs them; those imports are
now local to their users. This checks the property structurally, in a fresh interpreter:
which heavy modules the module of each console script (src/*/setup.py) loads. No timing
here (bench/bench_startup.py measures it, on the same commands).
"""

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from bench_startup import NODES, TOOLS, console_scripts

COMMANDS = [*TOOLS, *NODES]
"""Imported in this order (mav-sim and mav-keystore first: their paths are checked alone)."""
NEVER_AT_START = ["matplotlib", "scipy.stats", "scipy.optimize", "scipy.integrate",
                  "scipy.spatial", "pymavlink"]
"""Loaded only by a report, a reference integrator, a conversion to scipy's Rotation or a
DataFlash import, never by importing a command."""
NOT_FOR_MAV_SIM_HELP = ["rclpy", "numpy", "yaml", "scipy", "rosbags",
                        "variational_sim.ros.simulator_node"]
"""``mav-sim`` loads rclpy, numpy, the graph's nodes and the recorder when it runs, not for
``--help`` (its module needs argparse only); ``mav-keystore`` loads rclpy and the nodes only
to read their endpoints."""
LEAN_COMMANDS = ["mav-sim", "mav-keystore"]
"""Loaded first, in this order: none of ``NOT_FOR_MAV_SIM_HELP`` may come with them."""

# Imports each module in turn and prints, per module, the watched modules it added.
PROBE = """
import importlib, json, sys
watched = json.loads(sys.argv[1])
added = {}
for module in sys.argv[2:]:
    before = set(sys.modules)
    importlib.import_module(module)
    added[module] = sorted((set(sys.modules) - before) & set(watched))
print(json.dumps(added))
"""


def entry_modules() -> dict[str, str]:
    """Command -> the module of its console-script entry point (src/*/setup.py)."""
    scripts = console_scripts()
    return {command: scripts[command].partition(":")[0] for command in COMMANDS}


def test_importing_a_command_loads_no_report_or_solver_module():
    modules = entry_modules()
    watched = sorted(set(NEVER_AT_START) | set(NOT_FOR_MAV_SIM_HELP))
    probe = subprocess.run([sys.executable, "-c", PROBE, json.dumps(watched), *modules.values()],
                           capture_output=True, text=True, timeout=120, check=True)
    added = json.loads(probe.stdout)
    loaded = {command: added[module] for command, module in modules.items()}
    assert {command: [name for name in names if name in NEVER_AT_START]
            for command, names in loaded.items()} == {command: [] for command in COMMANDS}
    assert {command: loaded[command] for command in LEAN_COMMANDS} == {
        command: [] for command in LEAN_COMMANDS}
    # The probe sees what is loaded: trident-replay's bag reader needs rosbags' interface
    # types, and it is the first command here to load them. (Not scipy any more: the
    # chi-square gates of the default probabilities are tabulated, core.chi_square.)
    assert "rosbags" in loaded["trident-replay"]
    assert "scipy" not in loaded["trident-replay"]
    # No command loads scipy at all on import (checked in order, so for every one): the
    # simulator's integrator takes LAPACK only in its reference solve, the estimator's gates
    # are tabulated, the allocator's bounded least squares is mav_dynamics.bounded_lsq.
    assert [command for command, names in loaded.items() if "scipy" in names] == []


# Makes the default vehicle's allocator and saturates it (the bounded stages run); prints
# the scipy modules then loaded.
ALLOCATOR_PROBE = """
import sys
import numpy as np
from mav_dynamics.allocation import ControlAllocator
from mav_dynamics.model import TreeModel
from mav_dynamics.vehicle_file import load_vehicle
allocator = ControlAllocator(TreeModel(load_vehicle(sys.argv[1])))
status = allocator.allocate(np.array([5.0, -5.0, 1.0, 0.0, 0.0, 200.0])).status
assert status.saturated
print(sorted(name for name in sys.modules if name.split(".")[0] == "scipy"))
"""


def test_a_saturated_allocation_loads_no_scipy():
    vehicle = Path(__file__).resolve().parents[1] / "config" / "vehicles" / "quadrotor_x.yaml"
    probe = subprocess.run([sys.executable, "-c", ALLOCATOR_PROBE, str(vehicle)],
                           capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(probe.stdout.replace("'", '"')) == []
