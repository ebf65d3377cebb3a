"""Doctests of the packages, imported under their installed names.

The packages keep their folders at the repository's root (``tensorir/``, ``schedule/``, ...)
and install as ``tilefuse.tensorir``, ``tilefuse.schedule``, ... (pyproject's package-dir). Left
to itself, pytest's doctest collector would import ``tensorir/expr.py`` as a top-level module
``tensorir.expr``, a second copy beside ``tilefuse.tensorir.expr`` with classes of its own; here
each file's doctests run in the module the installed package has. Nothing else imports a package
file by its folder's name: a package folder is collected as a plain folder (pytest's ``Package``
would import its ``__init__.py`` as ``graph_api``), and a package file named on the command line
gives its doctests only (pytest would import it as a test module too).
"""
import importlib
from pathlib import Path

import pytest
from _pytest.doctest import DoctestModule

ROOT = Path(__file__).resolve().parent
PACKAGES = ("tilefuse", "tensorir", "schedule", "graph_api", "autotune")


def installed_name(path: Path) -> str:
    """The module name a file of a package folder has once installed: ``graph_api/ops/__init__.py``
    is ``tilefuse.graph_api.ops``."""
    parts = list(path.resolve().relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts if parts[0] == "tilefuse" else ["tilefuse", *parts])


class InstalledDoctestModule(DoctestModule):
    """A module's doctests, the module imported by its installed name."""

    def _getobj(self):
        return importlib.import_module(installed_name(self.path))


def in_package(path: Path) -> bool:
    """Whether ``path`` is in one of the package folders."""
    parts = path.resolve().relative_to(ROOT).parts
    return bool(parts) and parts[0] in PACKAGES


def pytest_collect_directory(path: Path, parent):
    """A package folder as a plain folder: its files' doctests import the installed modules."""
    return pytest.Dir.from_parent(parent, path=path) if in_package(path) else None


def pytest_collect_file(file_path: Path, parent):
    """Every Python file's doctests (as ``--doctest-modules`` would), package files imported by
    their installed names (those named on the command line: ``pytest_pycollect_makemodule``)."""
    if file_path.suffix != ".py" or file_path.name in ("__main__.py", "conftest.py", "setup.py"):
        return None
    if not in_package(file_path):
        return DoctestModule.from_parent(parent, path=file_path)
    return None if parent.session.isinitpath(file_path) else InstalledDoctestModule.from_parent(parent, path=file_path)


def pytest_pycollect_makemodule(module_path: Path, parent):
    """A package file named on the command line: its doctests, not a test module."""
    return InstalledDoctestModule.from_parent(parent, path=module_path) if in_package(module_path) else None
