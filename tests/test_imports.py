"""Every module imports on its own in a fresh interpreter (no import cycles hidden by the
order in which the test suite happens to import things)."""
import pkgutil
import subprocess
import sys

import pytest

from tilefuse import schedule
from tilefuse import tensorir

MODULES = sorted({m.name for pkg in (tensorir, schedule)
                  for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")} | {"tensorir", "schedule"})


@pytest.mark.parametrize("module", MODULES)
def test_module_imports_alone(module):
    result = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
