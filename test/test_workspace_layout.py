"""The ROS 2 workspace is consistent: manifests, setup scripts and dependency direction.

colcon on a ROS distro reads package.xml and setup.py; pip reads setup.py. A
package whose two descriptions disagree builds in one world and not the other.
"""

import ast
from pathlib import Path

import pytest
from catkin_pkg.package import parse_package

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["mav_geometry", "mav_ros_common", "mav_dynamics", "variational_sim", "trident_ekf",
            "mav_bringup"]
# Allowed project dependencies (docs/architecture.md): geometry <- dynamics <- sim;
# geometry <- ekf; the ROS plumbing under every node package; the bringup on top of all.
ALLOWED_PROJECT_DEPENDENCIES = {
    "mav_geometry": set(),
    "mav_ros_common": set(),
    "mav_dynamics": {"mav_geometry", "mav_ros_common"},
    "variational_sim": {"mav_geometry", "mav_dynamics", "mav_ros_common"},
    "trident_ekf": {"mav_geometry", "mav_ros_common"},
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


@pytest.mark.parametrize("name", PACKAGES)
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


@pytest.mark.parametrize("name", PACKAGES)
def test_project_dependencies_follow_the_architecture(name):
    package_dir = ROOT / "src" / name
    manifest = parse_package(str(package_dir / "package.xml"))
    declared = {d.name for d in manifest.exec_depends} & set(PACKAGES)
    assert declared == ALLOWED_PROJECT_DEPENDENCIES[name]
    requires = set(setup_keywords(package_dir)["install_requires"]) & set(PACKAGES)
    assert requires == declared, "setup.py install_requires and package.xml disagree"


@pytest.mark.parametrize("name", PACKAGES)
def test_code_imports_only_declared_project_packages(name):
    package_dir = ROOT / "src" / name / name
    allowed = ALLOWED_PROJECT_DEPENDENCIES[name] | {name}
    for source in package_dir.rglob("*.py"):
        stray = (imported_roots(source) & set(PACKAGES)) - allowed
        assert not stray, f"{source.relative_to(ROOT)} imports {stray}"


@pytest.mark.parametrize("name", [p for p in PACKAGES if p not in {"mav_bringup",
                                                                   "mav_ros_common"}])
def test_only_ros_shells_and_tools_import_the_ros_plumbing(name):
    package_dir = ROOT / "src" / name / name
    for source in package_dir.rglob("*.py"):
        if "mav_ros_common" in imported_roots(source):
            folder = source.relative_to(package_dir).parts[0]
            assert folder in SHELL_FOLDERS, f"core module {source.relative_to(ROOT)} imports it"


def test_geometry_core_never_imports_ros():
    for source in (ROOT / "src" / "mav_geometry" / "mav_geometry").rglob("*.py"):
        ros = {r for r in imported_roots(source) if r.startswith("rcl") or r.endswith("_msgs")}
        assert not ros, f"{source.name} imports {ros}"


def test_top_level_layout():
    for folder in ("src", "launch", "config", "test", "docker", "bench", "tools"):
        assert (ROOT / folder).is_dir(), folder
    assert (ROOT / "README.md").is_file()
    assert (ROOT / ".ci" / "run").is_file()
