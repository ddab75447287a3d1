"""Static checks of docker/Dockerfile (no Docker engine runs here).

Every file it copies must exist in the build context (the repository root), it
must build from an official ROS 2 LTS image, cover every package and its ROS
dependencies, and by default launch the simulation with everything the launch
files read copied to where they look for it.
"""

import ast
import json
import os
import re
import shlex
import subprocess
from pathlib import Path, PurePosixPath
from types import ModuleType

from mav_ros_common.testing import module_from_file

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
LTS_DISTROS = {"jazzy"}  # Humble (Python 3.10) is not supported: README
# setup.py requirement -> rosdep key; the rest have no key and are pip-installed.
ROSDEP_KEYS = {"numpy": "python3-numpy", "scipy": "python3-scipy", "pyyaml": "python3-yaml",
               "matplotlib": "python3-matplotlib"}
PIP_ONLY = {"pymap3d", "pyulog", "pymavlink", "rosbags", "pygeomag", "ray", "pyarrow"}
PROJECT = {p.parent.name for p in (ROOT / "src").glob("*/package.xml")}
LAUNCH_FILES = sorted(p.name for p in (ROOT / "launch").glob("*.launch.py"))
BRINGUP = "mav_bringup"


def _load_sibling(name: str) -> ModuleType:
    return module_from_file(ROOT / "test" / f"{name}.py", f"_sibling_{name}")


launch_reader = _load_sibling("test_launch_files")
workspace_layout = _load_sibling("test_workspace_layout")


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with line continuations joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


def workdir() -> PurePosixPath:
    (*_, last) = [rest for keyword, rest in instructions() if keyword == "WORKDIR"]
    return PurePosixPath(last)


def repository_path(image_path: PurePosixPath) -> Path | None:
    """The build-context file that the image has at `image_path`, if any COPY puts one there.

    Later COPY instructions win, as in the image's layers.
    """
    copies = [shlex.split(rest) for keyword, rest in instructions() if keyword == "COPY"]
    for *sources, destination in reversed(copies):
        target = workdir() / destination
        for source in sources:
            if (ROOT / source).is_dir():  # the folder's contents go into the destination
                if image_path.is_relative_to(target):
                    return ROOT / source / image_path.relative_to(target)
            elif image_path == target:
                return ROOT / source
    return None


def test_base_image_is_an_official_ros_lts():
    args = dict(
        rest.split("=", 1) for keyword, rest in instructions() if keyword == "ARG" and "=" in rest
    )
    (base,) = [rest for keyword, rest in instructions() if keyword == "FROM"]
    image = base.replace("${ROS_DISTRO}", args["ROS_DISTRO"])
    assert re.fullmatch(r"ros:(\w+)-ros-(core|base)", image), image
    assert image.split(":")[1].split("-")[0] in LTS_DISTROS


def test_every_copied_path_exists():
    copies = [shlex.split(rest) for keyword, rest in instructions() if keyword == "COPY"]
    assert copies
    for *sources, _destination in copies:
        for source in sources:
            assert (ROOT / source).exists(), f"COPY source {source} is missing"


def test_every_package_is_resolved_with_rosdep():
    copied = {
        Path(shlex.split(rest)[0]).parent.name
        for keyword, rest in instructions()
        if keyword == "COPY" and rest.split()[0].endswith("package.xml")
    }
    packages = {p.parent.name for p in (ROOT / "src").glob("*/package.xml")}
    assert copied == packages
    runs = " ".join(rest for keyword, rest in instructions() if keyword == "RUN")
    assert "rosdep install --from-paths src" in runs
    # build: the C kernels need python3-dev (build_depend) on the image.
    assert all(f"--dependency-types {kind}" in runs for kind in ("build", "exec", "test"))
    assert "colcon build" in runs
    assert "colcon test" in runs


def test_entrypoint_sources_the_overlay():
    entrypoint = ROOT / "docker" / "entrypoint.sh"
    assert entrypoint.stat().st_mode & 0o111, "entrypoint.sh must be executable"
    text = entrypoint.read_text()
    assert "/opt/ros/${ROS_DISTRO}/setup.bash" in text
    assert "/ws/install/setup.bash" in text


def test_every_python_requirement_is_installed_in_the_image():
    runs = " ".join(rest for keyword, rest in instructions() if keyword == "RUN")
    for name in sorted(PIP_ONLY):
        assert f"|{name}|" in runs.replace("(", "|").replace(")", "|"), f"{name} not pip-installed"
    for setup_py in (ROOT / "src").glob("*/setup.py"):
        tree = ast.parse(setup_py.read_text())
        requires = next(
            ast.literal_eval(k.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
            for k in node.keywords if k.arg == "install_requires"
        )
        manifest = (setup_py.parent / "package.xml").read_text()
        for requirement in set(requires) - PROJECT:
            if requirement in PIP_ONLY:
                continue
            assert requirement in ROSDEP_KEYS, f"{setup_py}: no rosdep key known for {requirement}"
            key = ROSDEP_KEYS[requirement]
            assert f"<exec_depend>{key}</exec_depend>" in manifest, f"{setup_py.parent.name}: {key}"


def image_share(package: str) -> PurePosixPath:
    """A package's share directory in the image: the colcon install at the workdir."""
    return workdir() / "install" / package / "share" / package


def image_source_of_installed(path: PurePosixPath) -> PurePosixPath:
    """The source file in the image that colcon installed at `path` (a bringup share file),
    through the package's links to the top-level launch/ and config/ folders."""
    relative = path.relative_to(image_share(BRINGUP))
    link = ROOT / "src" / BRINGUP / relative.parts[0]
    target = PurePosixPath(os.readlink(link)) if link.is_symlink() else PurePosixPath(link.name)
    folder = PurePosixPath(os.path.normpath(workdir() / "src" / BRINGUP / target))
    return folder.joinpath(*relative.parts[1:])


def copied_before_build(image_path: PurePosixPath) -> bool:
    """Whether some COPY before the `colcon build` RUN puts a file at `image_path`."""
    steps = instructions()
    build = next(i for i, (keyword, rest) in enumerate(steps)
                 if keyword == "RUN" and "colcon build" in rest)
    earlier = [rest for keyword, rest in steps[:build] if keyword == "COPY"]
    for *sources, destination in (shlex.split(rest) for rest in earlier):
        target = workdir() / destination
        for source in sources:
            if (ROOT / source).is_dir() and image_path.is_relative_to(target):
                return True
            into_folder = destination.endswith("/") or len(sources) > 1
            if image_path == (target / PurePosixPath(source).name if into_folder else target):
                return True
    return False


def test_default_command_launches_the_simulation_headless():
    (command,) = [json.loads(rest) for keyword, rest in instructions() if keyword == "CMD"]
    assert command[:4] == ["ros2", "launch", BRINGUP, "sim.launch.py"]
    installed = image_source_of_installed(image_share(BRINGUP) / "launch" / command[3])
    assert repository_path(installed) == ROOT / "launch" / "sim.launch.py"
    assert copied_before_build(installed)
    reader = launch_reader.reader(command[3], image_share)
    arguments = dict(argument.split(":=", 1) for argument in command[4:])
    for name, value in arguments.items():
        assert name in reader.declarations, f"sim.launch.py has no argument {name}"
        assert value in (reader.choices(name) or [value]), f"{name}:={value}"
    launched = reader.launch(arguments)
    started = {node.package for node in launched.nodes if node.enabled}
    assert "rviz2" not in started, "ros-base has no rviz2"
    assert {"variational_sim", "mav_dynamics", "trident_ekf"} <= started


def test_every_path_the_launch_files_read_is_installed_from_copied_files():
    for launch_file in LAUNCH_FILES:
        for image_path in launch_reader.referenced_paths(launch_file, image_share):
            installed = PurePosixPath(image_path)
            assert installed.is_relative_to(image_share(BRINGUP)), installed
            source = image_source_of_installed(installed)
            assert copied_before_build(source), f"{launch_file} reads {image_path}: not copied"
            in_repository = repository_path(source)
            assert in_repository is not None, f"{launch_file} reads {image_path}: not copied"
            assert in_repository.exists(), f"{launch_file} reads {image_path}: no {source}"


def test_the_tests_run_on_the_sourced_install_and_fail_the_build():
    (step,) = [rest for keyword, rest in instructions() if keyword == "RUN" and "colcon" in rest]
    commands = [part.strip() for part in step.split("&&")]
    order = [next(i for i, c in enumerate(commands) if c.startswith(prefix)) for prefix in (
        "colcon build", "source install/setup.bash", "colcon test ", "colcon test-result")]
    assert order == sorted(order), commands
    # Every test file reads its data and settings from copies made before the build.
    for needed in ("data/px4_sitl", "pyproject.toml", "conftest.py"):
        assert copied_before_build(workdir() / needed), needed


def test_every_ros_package_the_code_imports_is_resolved_by_rosdep():
    # rosdep installs what package.xml declares: every direct dependency is declared.
    undeclared = set()
    for manifest_path in (ROOT / "src").glob("*/package.xml"):
        package_dir = manifest_path.parent
        manifest = manifest_path.read_text()
        for source in (package_dir / package_dir.name).rglob("*.py"):
            undeclared |= {
                (package_dir.name, root) for root in workspace_layout.imported_roots(source)
                if (root == "rclpy" or root.endswith(("_msgs", "_srvs", "_interfaces")))
                and f"<exec_depend>{root}</exec_depend>" not in manifest
            }
    assert not undeclared, f"(package, imported ROS package) missing from package.xml: {undeclared}"


def test_discovery_stays_in_the_container_unless_the_user_widens_it():
    # The entrypoint's default, run by bash as the image would, with and without a user value.
    lines = (ROOT / "docker" / "entrypoint.sh").read_text().splitlines()
    (setting,) = [i for i, line in enumerate(lines)
                  if line.startswith("export ROS_AUTOMATIC_DISCOVERY_RANGE=")]
    assert setting < lines.index('exec "$@"')
    script = f'{lines[setting]}; printf %s "$ROS_AUTOMATIC_DISCOVERY_RANGE"'
    for given, expected in ((None, "LOCALHOST"), ("", "LOCALHOST"), ("SUBNET", "SUBNET")):
        environment = {k: v for k, v in os.environ.items()
                       if k != "ROS_AUTOMATIC_DISCOVERY_RANGE"}
        if given is not None:
            environment["ROS_AUTOMATIC_DISCOVERY_RANGE"] = given
        result = subprocess.run(["bash", "-c", script], env=environment, capture_output=True,
                                text=True, check=True)
        assert result.stdout == expected, given


def test_no_instructions_put_the_graph_on_the_host_network():
    # Host networking would undo the container's localhost-only discovery (docs/security.md).
    texts = [ROOT / "README.md", ROOT / "launch" / "README.md", *(ROOT / "docs").rglob("*.md"),
             *(ROOT / "docker").iterdir()]
    host_network = re.compile(r"--net(work)?[= ]host\b")
    for path in texts:
        assert not host_network.search(path.read_text()), path.relative_to(ROOT)
