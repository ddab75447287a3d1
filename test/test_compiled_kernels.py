"""Every package's C kernels are built, found, and can be switched off (mav_geometry.kernels)."""

from pathlib import Path

import pytest
from catkin_pkg.package import parse_package

from mav_geometry import kernels

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "src").glob("*/*/**/_kernels.c"))


def module_name(source: Path) -> str:
    package_dir = source.relative_to(ROOT / "src").parts[0]
    return ".".join(source.relative_to(ROOT / "src" / package_dir).with_suffix("").parts)


def test_the_four_computing_packages_have_kernels():
    assert {s.relative_to(ROOT / "src").parts[0] for s in SOURCES} == {
        "mav_geometry", "mav_dynamics", "variational_sim", "trident_ekf"}


@pytest.mark.parametrize("source", SOURCES, ids=module_name)
def test_kernels_are_built_and_loaded(source, monkeypatch):
    monkeypatch.delenv(kernels.ENVIRONMENT_VARIABLE, raising=False)
    # pytest turns RuntimeWarning into an error: a missing build fails here.
    module = kernels.load_kernels(module_name(source))
    assert module is not None
    assert Path(module.__file__).parent == source.parent


@pytest.mark.parametrize("source", SOURCES, ids=module_name)
def test_packages_with_kernels_build_depend_on_the_python_headers(source):
    package_dir = ROOT / "src" / source.relative_to(ROOT / "src").parts[0]
    manifest = parse_package(str(package_dir / "package.xml"))
    assert "python3-dev" in {d.name for d in manifest.build_depends}
    assert "ext_modules=KERNELS" in (package_dir / "setup.py").read_text()


def test_reference_choice_loads_nothing(monkeypatch):
    monkeypatch.setenv(kernels.ENVIRONMENT_VARIABLE, "reference")
    assert kernels.load_kernels(module_name(SOURCES[0])) is None


def test_a_missing_extension_warns_and_falls_back(monkeypatch):
    monkeypatch.setenv(kernels.ENVIRONMENT_VARIABLE, "compiled")
    with pytest.warns(RuntimeWarning, match="not built"):
        assert kernels.load_kernels("mav_geometry._no_such_kernels") is None


def test_an_unknown_choice_is_refused(monkeypatch):
    monkeypatch.setenv(kernels.ENVIRONMENT_VARIABLE, "numba")
    with pytest.raises(ValueError, match="MAV_KERNELS='numba'"):
        kernels.load_kernels(module_name(SOURCES[0]))
