"""pyproject.toml installs every package folder under its tilefuse name: each folder of the
four packages that holds an ``__init__.py`` is in ``packages`` and maps to its folder, and the
package data the runtime reads is declared. (``scripts/check_installed_wheel.py`` builds and
installs the wheel itself; it is not part of the suite because it installs packages.)"""
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")       # Python 3.11 and later
ROOT = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _package_folders() -> set[str]:
    names = {"tilefuse"}
    for folder in ("tensorir", "schedule", "graph_api", "autotune"):
        for init in (ROOT / folder).rglob("__init__.py"):
            names.add(".".join(("tilefuse", *init.parent.relative_to(ROOT).parts)))
    return names


def test_every_package_folder_is_installed_under_tilefuse():
    assert set(SETUPTOOLS["packages"]) == _package_folders()


def test_each_top_package_maps_to_its_folder_at_the_root():
    mapping = SETUPTOOLS["package-dir"]
    assert mapping == {"tilefuse": "tilefuse", **{f"tilefuse.{f}": f for f in ("tensorir", "schedule", "graph_api",
                                                                                 "autotune")}}
    assert all((ROOT / folder / "__init__.py").is_file() for folder in mapping.values())


def test_the_package_data_is_declared_and_there():
    patterns = SETUPTOOLS["package-data"]["tilefuse.tensorir"]
    assert any(list((ROOT / "tensorir").glob(p)) for p in patterns)
    assert (ROOT / "tensorir" / "runtime" / "threadpool.ll").is_file()
    assert "runtime/*.ll" in patterns


def test_the_command_keeps_its_name():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"autotune": "tilefuse.autotune.cli:main"}


def test_the_license_is_apache_2_and_declared():
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert "Copyright 2026 the tilefuse authors" in text and "[yyyy]" not in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == {"text": "Apache-2.0"}
    assert "License :: OSI Approved :: Apache Software License" in project["classifiers"]
    assert project["description"] and project["readme"] == "README.md"


def test_the_package_says_it_is_typed():
    assert (ROOT / "tilefuse" / "py.typed").is_file()
    assert SETUPTOOLS["package-data"]["tilefuse"] == ["py.typed"]


def test_the_version_is_one_and_the_installed_metadata_agrees():
    import importlib.metadata
    import tilefuse
    assert tilefuse.__version__ == importlib.metadata.version("tilefuse")
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["dynamic"]["version"] == \
        {"attr": "tilefuse.__version__"}
