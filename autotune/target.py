"""What a measurement belongs to: the machine (``tensorir.runtime.target.Target``, the one
target of the project, whose ``key`` tuning records are keyed by) and the versions of the
software that produced it.

Example:
    >>> current_target() == Target.host()
    True
"""
from __future__ import annotations

import functools
import importlib.metadata
import platform

from tilefuse.tensorir.runtime.target import Target, normalize_features, target_key

__all__ = ["Target", "current_target", "normalize_features", "target_key", "versions"]


def current_target() -> Target:
    """The host CPU as a Target (``Target.host()``): what this process measures on.

    Example:
        >>> t = current_target()
        >>> t.key == Target.of(t.cpu, t.features).key
        True
    """
    return Target.host()


def _distribution_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@functools.lru_cache(maxsize=None)
def _versions() -> tuple[tuple[str, str], ...]:
    return (
        ("tilefuse", _distribution_version("tilefuse")),
        ("llvmlite", _distribution_version("llvmlite")),
        ("xgboost", _distribution_version("xgboost")),
        ("python", platform.python_version()),
    )


def versions() -> dict[str, str]:
    """Versions of the software that shapes a measurement, for the records (a fresh dict each call).

    Example:
        >>> sorted(versions())
        ['llvmlite', 'python', 'tilefuse', 'xgboost']
    """
    return dict(_versions())
