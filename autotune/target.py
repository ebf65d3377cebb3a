"""The machine a measurement belongs to: CPU name, enabled LLVM features, and the versions of the
software that produced it.

A tuning record is only meaningful on the CPU it was measured on, so every record carries a
``Target``. Its ``key`` is a short stable hash of the CPU name and the *enabled* features, sorted:
two machines with the same CPU and features get the same key whatever order LLVM lists them in.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import platform
from dataclasses import dataclass

KEY_LENGTH = 16  # hex digits of sha256 kept in Target.key


def normalize_features(features: str) -> str:
    """The enabled features of an LLVM feature string, sorted and de-duplicated, as "+a,+b".

    Disabled ("-x") features are dropped: the set of enabled features says everything.

    Example:
        >>> normalize_features("+sse2,-avx512f,+avx2,+sse2")
        '+avx2,+sse2'
        >>> normalize_features("")
        ''
    """
    if not isinstance(features, str):
        raise TypeError(f"LLVM features must be a str like '+avx2,+fma', got {type(features).__name__}")
    enabled = set()
    for item in features.split(","):
        item = item.strip()
        if not item or item.startswith("-"):
            continue
        name = item[1:] if item.startswith("+") else item
        if not name:
            raise ValueError(f"bad LLVM feature {item!r} in {features!r}")
        enabled.add(name)
    return ",".join("+" + name for name in sorted(enabled))


def target_key(cpu: str, features: str) -> str:
    """The short stable key of a CPU and its (normalised) feature string.

    Example:
        >>> target_key("skylake", "+avx2,+fma") == target_key("skylake", "+fma,-avx512f,+avx2")
        True
        >>> len(target_key("skylake", "+avx2"))
        16
    """
    text = f"{cpu}|{normalize_features(features)}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:KEY_LENGTH]


@dataclass(frozen=True, slots=True)
class Target:
    """A CPU name and its enabled LLVM features (normalised), with their stable ``key``.

    Build one with ``Target.of(cpu, features)``, which normalises the features and computes
    the key; the constructor checks that the three fields agree.

    Example:
        >>> t = Target.of("znver3", "-avx512f,+fma,+avx2")
        >>> t.features
        '+avx2,+fma'
        >>> t.key == target_key("znver3", "+avx2,+fma")
        True
    """
    cpu: str
    features: str
    key: str

    def __post_init__(self):
        if not isinstance(self.cpu, str) or not self.cpu:
            raise ValueError(f"target cpu must be a non-empty str, got {self.cpu!r}")
        if normalize_features(self.features) != self.features:
            raise ValueError(f"target features {self.features!r} are not normalised; use Target.of")
        if self.key != target_key(self.cpu, self.features):
            raise ValueError(f"target key {self.key!r} does not match cpu {self.cpu!r} and its features")

    @classmethod
    def of(cls, cpu: str, features: str) -> "Target":
        """The target of a CPU name and any LLVM feature string.

        Example:
            >>> Target.of("generic", "").features
            ''
        """
        normalized = normalize_features(features)
        return cls(cpu, normalized, target_key(cpu, normalized))


@functools.lru_cache(maxsize=None)
def current_target() -> Target:
    """The host CPU as a Target (asks LLVM once per process).

    Example:
        >>> t = current_target()
        >>> t == Target.of(t.cpu, t.features)
        True
    """
    from tensorir.runtime.target import host_cpu

    cpu, features = host_cpu()
    return Target.of(cpu, features)


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
