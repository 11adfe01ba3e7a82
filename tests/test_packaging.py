"""The package layout pyproject.toml declares: every subpackage is listed (setuptools is given an
explicit list), and the recipes, inside the package (relreason/recipes/), ship as its package data."""

from __future__ import annotations

from pathlib import Path

import pytest

import relreason
from relreason.config import RECIPE_DIR, recipe_names

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (pyproject allows it): tomllib is tomli, added to the stdlib in 3.11
    tomllib = pytest.importorskip("tomli", reason="Python 3.10 reads TOML with tomli: pip install 'relreason[dev]'")

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_subpackage_is_listed_for_the_wheel():
    pkg_root = Path(relreason.__file__).parent
    found = {"relreason." + ".".join(p.parent.relative_to(pkg_root).parts) if p.parent != pkg_root else "relreason"
             for p in pkg_root.rglob("__init__.py") if "__pycache__" not in p.parts}
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    assert found == listed and "relreason.recipes" in found


def test_recipes_are_package_data_of_relreason_recipes():
    tool = _pyproject()["tool"]["setuptools"]
    assert "package-dir" not in tool  # the package is laid out as it is installed: nothing mapped
    assert tool["package-data"]["relreason.recipes"] == ["*.yaml"]
    assert RECIPE_DIR.resolve() == (ROOT / "relreason" / "recipes").resolve()
    shipped = {p.stem for p in (ROOT / "relreason" / "recipes").glob("*.yaml")}
    assert shipped == set(recipe_names()) and {"default", "quick", "rt"} <= shipped


def test_measured_costs_are_package_data_of_relreason_studies():
    """`reproduce --list` reads the measured cell costs from the package (any working directory), so the
    file scripts/bench_reproduce.py writes must ship in the wheel."""
    from relreason.studies.sweep import costs_file

    tool = _pyproject()["tool"]["setuptools"]
    assert tool["package-data"]["relreason.studies"] == ["costs.json"]
    assert costs_file().resolve() == (ROOT / "relreason" / "studies" / "costs.json").resolve()
    assert costs_file().is_file() and not (ROOT / "results" / "costs.json").exists()


def test_the_license_is_an_spdx_expression():
    """PEP 639: `project.license` is an SPDX string (setuptools >= 77 warns that the `{text = ...}` table is
    deprecated, and will refuse it), and the build backend required is one that reads it."""
    data = _pyproject()
    assert data["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in data["build-system"]["requires"][0]
