"""The ROS 2 workspace is consistent: manifests, setup scripts and dependency direction.

colcon on a ROS distro reads package.xml and setup.py; pip reads setup.py. A
package whose two descriptions disagree builds in one world and not the other.
Interface packages (ament_cmake, rosidl) have no setup.py: colcon builds them from
package.xml and CMakeLists.txt, tools/bootstrap builds them into the venv.
"""

import ast
import re
from pathlib import Path

import pytest
from catkin_pkg.package import parse_package

ROOT = Path(__file__).resolve().parents[1]
PYTHON_PACKAGES = ["mav_geometry", "mav_ros_common", "mav_dynamics", "variational_sim",
                   "trident_ekf", "mav_bringup"]
INTERFACE_PACKAGES = ["trident_ekf_interfaces"]
PACKAGES = PYTHON_PACKAGES + INTERFACE_PACKAGES
# Allowed project dependencies (docs/architecture.md): geometry <- dynamics <- sim;
# geometry <- ekf; the ROS plumbing under every node package; the estimator's services
# (trident_ekf_interfaces, which depends on no project package) under the estimator;
# the bringup on top of all.
ALLOWED_PROJECT_DEPENDENCIES = {
    "mav_geometry": set(),
    "mav_ros_common": set(),
    "trident_ekf_interfaces": set(),
    "mav_dynamics": {"mav_geometry", "mav_ros_common"},
    "variational_sim": {"mav_geometry", "mav_dynamics", "mav_ros_common"},
    "trident_ekf": {"mav_geometry", "mav_ros_common", "trident_ekf_interfaces"},
    "mav_bringup": {"mav_geometry", "mav_dynamics", "variational_sim", "trident_ekf",
                    "mav_ros_common"},
}
# Where the ROS plumbing may be imported: the ROS shells and command-line tools, never a core.
SHELL_FOLDERS = {"ros", "tools", "experiments"}


def setup_keywords(package_dir: Path) -> dict[str, object]:
    """Literal keyword arguments of the setup() call, read without running setup.py."""
    tree = ast.parse((package_dir / "setup.py").read_text())
    constants = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
    }
    call = next(
        node for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setup"
    )
    keywords = {}
    for keyword in call.keywords:
        if isinstance(keyword.value, ast.Name):
            if keyword.value.id in constants:  # not, e.g., a list of Extension objects
                keywords[keyword.arg] = constants[keyword.value.id]
        elif not isinstance(keyword.value, ast.Call):
            try:
                keywords[keyword.arg] = ast.literal_eval(keyword.value)
            except ValueError:
                continue  # f-strings and the like are not needed here
    return keywords


def imported_roots(source: Path) -> set[str]:
    """Top-level names of every absolute import in a Python file."""
    roots = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_src_holds_exactly_the_product_packages():
    found = sorted(p.parent.name for p in (ROOT / "src").glob("*/package.xml"))
    assert found == sorted(PACKAGES)


@pytest.mark.parametrize("name", PYTHON_PACKAGES)
def test_manifest_and_setup_agree(name):
    package_dir = ROOT / "src" / name
    manifest = parse_package(str(package_dir / "package.xml"))
    manifest.validate()
    assert manifest.name == name
    assert manifest.package_format == 3
    assert [e.content for e in manifest.exports if e.tagname == "build_type"] == ["ament_python"]
    keywords = setup_keywords(package_dir)
    assert keywords["name"] == name
    assert keywords["version"] == manifest.version
    assert (package_dir / "resource" / name).is_file()
    assert (package_dir / name / "__init__.py").is_file()
    assert (package_dir / "test").is_dir()
    # colcon test runs pytest only for packages that declare it as their test requirement.
    assert "pytest" in keywords["extras_require"]["test"]
    assert "python3-pytest" in {d.name for d in manifest.test_depends}
    setup_cfg = (package_dir / "setup.cfg").read_text()
    assert f"script_dir=$base/lib/{name}" in setup_cfg
    assert f"install_scripts=$base/lib/{name}" in setup_cfg


def interface_files(package_dir: Path) -> list[str]:
    """The package's interface definitions, relative to it (msg/, srv/, action/)."""
    return sorted(str(path.relative_to(package_dir)) for folder in ("msg", "srv", "action")
                  for path in (package_dir / folder).glob(f"*.{folder}"))


@pytest.mark.parametrize("name", INTERFACE_PACKAGES)
def test_interface_package_manifest_and_cmake_agree(name):
    package_dir = ROOT / "src" / name
    manifest = parse_package(str(package_dir / "package.xml"))
    manifest.validate()
    assert manifest.name == name
    assert manifest.package_format == 3
    assert [e.content for e in manifest.exports if e.tagname == "build_type"] == ["ament_cmake"]
    assert "rosidl_interface_packages" in {g.name for g in manifest.member_of_groups}
    assert {"ament_cmake", "rosidl_default_generators"} <= {
        d.name for d in manifest.buildtool_depends}
    assert "rosidl_default_runtime" in {d.name for d in manifest.exec_depends}
    assert not (package_dir / "setup.py").exists(), "an interface package is not pip-installed"
    cmake = (package_dir / "CMakeLists.txt").read_text()
    assert f"project({name}" in cmake
    files = interface_files(package_dir)
    assert files, f"{name} defines no interface"
    generated = re.search(r"rosidl_generate_interfaces\((.*?)\)", cmake, re.DOTALL)
    assert generated is not None
    assert sorted(re.findall(r'"([^"]+)"', generated.group(1))) == files
    # Every package a definition uses is a dependency in both files.
    used = {match for file in files
            for match in re.findall(r"^\s*(\w+)/\w+", (package_dir / file).read_text(),
                                    re.MULTILINE)}
    assert used <= {d.name for d in manifest.build_depends} & {
        d.name for d in manifest.exec_depends}
    for package in used:
        assert f"find_package({package} REQUIRED)" in cmake
    if used:
        _, _, dependencies = generated.group(1).partition("DEPENDENCIES")
        assert set(re.findall(r"\w+", dependencies)) >= used
    # colcon test runs the package's pytest suite (test/test_colcon.py counts it).
    assert (package_dir / "test").is_dir()
    assert "python3-pytest" in {d.name for d in manifest.test_depends}
    assert "ament_add_test(" in cmake or "ament_add_pytest_test(" in cmake


@pytest.mark.parametrize("name", PACKAGES)
def test_project_dependencies_follow_the_architecture(name):
    package_dir = ROOT / "src" / name
    manifest = parse_package(str(package_dir / "package.xml"))
    declared = {d.name for d in manifest.exec_depends} & set(PACKAGES)
    assert declared == ALLOWED_PROJECT_DEPENDENCIES[name]
    if name in PYTHON_PACKAGES:
        # Interface packages are built by colcon or tools/bootstrap, never pip-installed.
        requires = set(setup_keywords(package_dir)["install_requires"]) & set(PACKAGES)
        assert requires == declared & set(PYTHON_PACKAGES), \
            "setup.py install_requires and package.xml disagree"


@pytest.mark.parametrize("name", PYTHON_PACKAGES)
def test_code_imports_only_declared_project_packages(name):
    package_dir = ROOT / "src" / name / name
    allowed = ALLOWED_PROJECT_DEPENDENCIES[name] | {name}
    for source in package_dir.rglob("*.py"):
        stray = (imported_roots(source) & set(PACKAGES)) - allowed
        assert not stray, f"{source.relative_to(ROOT)} imports {stray}"


@pytest.mark.parametrize("name", [p for p in PYTHON_PACKAGES if p not in {"mav_bringup",
                                                                          "mav_ros_common"}])
def test_only_ros_shells_and_tools_import_the_ros_plumbing(name):
    package_dir = ROOT / "src" / name / name
    plumbing = {"mav_ros_common", *INTERFACE_PACKAGES}
    for source in package_dir.rglob("*.py"):
        if plumbing & imported_roots(source):
            folder = source.relative_to(package_dir).parts[0]
            assert folder in SHELL_FOLDERS, f"core module {source.relative_to(ROOT)} imports it"


def test_geometry_core_never_imports_ros():
    for source in (ROOT / "src" / "mav_geometry" / "mav_geometry").rglob("*.py"):
        ros = {r for r in imported_roots(source) if r.startswith("rcl") or r.endswith("_msgs")}
        assert not ros, f"{source.name} imports {ros}"


def test_pytest_runs_every_package_suite():
    """./tools/test runs pytest's testpaths; test_colcon only collects most suites, so a
    package missing here would run nowhere."""
    import tomllib

    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())
    testpaths = settings["tool"]["pytest"]["ini_options"]["testpaths"]
    assert sorted(testpaths) == sorted([f"src/{name}/test" for name in PACKAGES] + ["test"])


def test_top_level_layout():
    for folder in ("src", "launch", "config", "test", "docker", "bench", "tools"):
        assert (ROOT / folder).is_dir(), folder
    assert (ROOT / "README.md").is_file()
    assert (ROOT / ".ci" / "run").is_file()
