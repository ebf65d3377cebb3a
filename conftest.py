"""Doctests of the packages, imported under their installed names.

The packages keep their folders at the repository's root (``tensorir/``, ``schedule/``, ...)
and install as ``tilefuse.tensorir``, ``tilefuse.schedule``, ... (pyproject's package-dir). Left
to itself, pytest's doctest collector would import ``tensorir/expr.py`` as a top-level module
``tensorir.expr``, a second copy beside ``tilefuse.tensorir.expr`` with classes of its own; here
each file's doctests run in the module the installed package has.
"""
import importlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from _pytest.doctest import DoctestModule

# The loop-IR verifier runs after every loop pass in the tests and doctests (users get it off,
# for speed); TILEFUSE_VERIFY=0 turns it off here too (to time the suite without it).
os.environ.setdefault("TILEFUSE_VERIFY", "1")

# The kernel disk cache is on in the tests, as for users, in a folder of this run's own (made by
# the first process, inherited by the workers and the programs tests start; removed at the end):
# a run never reads kernels an earlier run left, nor fills the user's cache.
if "TILEFUSE_TEST_CACHE_OWNER" not in os.environ:
    os.environ["TILEFUSE_TEST_CACHE_OWNER"] = str(os.getpid())
    os.environ["TILEFUSE_CACHE_DIR"] = tempfile.mkdtemp(prefix="tilefuse-test-kernels-")

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


def _in_package(path: Path) -> bool:
    try:
        return path.resolve().relative_to(ROOT).parts[0] in PACKAGES
    except (ValueError, IndexError):
        return False


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent):
    """A package folder is collected as a plain directory: pytest would import its
    ``__init__.py`` under the folder's name (``graph_api``), a second copy of the package."""
    if _in_package(path):
        return pytest.Dir.from_parent(parent, path=path)
    return None


class InstalledModule(pytest.Module):
    """A package file named on the command line (pytest then collects it as a test module),
    imported by its installed name."""

    def _getobj(self):
        return importlib.import_module(installed_name(self.path))


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent):
    if _in_package(module_path):
        return InstalledModule.from_parent(parent, path=module_path)
    return None


def pytest_collect_file(file_path: Path, parent):
    """Every Python file's doctests (as ``--doctest-modules`` would), package files imported by
    their installed names."""
    if file_path.suffix != ".py" or file_path.name in ("__main__.py", "conftest.py", "setup.py"):
        return None
    return (InstalledDoctestModule if _in_package(file_path) else DoctestModule).from_parent(parent, path=file_path)


def pytest_unconfigure(config):
    if os.environ.get("TILEFUSE_TEST_CACHE_OWNER") == str(os.getpid()):
        shutil.rmtree(os.environ["TILEFUSE_CACHE_DIR"], ignore_errors=True)
