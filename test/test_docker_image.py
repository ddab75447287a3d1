"""Static checks of docker/Dockerfile (no Docker engine runs here).

Every file it copies must exist in the build context (the repository root), it
must build from an official ROS 2 LTS image, and it must cover every package.
"""

import ast
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
LTS_DISTROS = {"humble", "jazzy"}
# setup.py requirement -> rosdep key; the rest have no key and are pip-installed.
ROSDEP_KEYS = {"numpy": "python3-numpy", "scipy": "python3-scipy", "pyyaml": "python3-yaml",
               "matplotlib": "python3-matplotlib"}
PIP_ONLY = {"pymap3d", "pyulog", "pymavlink", "rosbags"}
PROJECT = {p.parent.name for p in (ROOT / "src").glob("*/package.xml")}


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
