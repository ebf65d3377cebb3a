"""Where compiled kernels are kept between compiles.

``KernelCache`` is the protocol a persistent store implements (``autotune.Database`` keeps
artifacts in its sqlite file): bytes under a key the caller derives from the workload, the
config, the target and the code generator's version. ``LRUCache`` (``tensorir.runtime.lru``)
is the bounded in-process cache of built objects that sits in front of it.

Example:
    >>> cache = LRUCache(2)
    >>> cache.put("a", 1); cache.put("b", 2); cache.get("a"); cache.put("c", 3)
    1
    >>> cache.get("b") is None, cache.get("a"), cache.get("c")
    (True, 1, 3)
"""
from __future__ import annotations

import functools
import hashlib
import importlib
from pathlib import Path
from typing import Protocol, runtime_checkable

from .artifact import TOOLCHAIN
from .lru import LRUCache
from .target import Target, as_target

__all__ = ["KernelCache", "LRUCache", "cache_key", "code_fingerprint"]

CODE_PACKAGES = ("tilefuse.tensorir", "tilefuse.schedule", "tilefuse.graph_api")
"""The packages whose code decides what a kernel compiles to (its signature, its lowering, its
schedule and its code generation)."""


@runtime_checkable
class KernelCache(Protocol):
    """A persistent store of compiled kernel artifacts (bytes) by key.

    Example:
        >>> class Dict(dict):
        ...     def cached_kernel(self, key): return self.get(key)
        ...     def cache_kernel(self, key, blob): self[key] = blob
        >>> isinstance(Dict(), KernelCache)
        True
    """

    def cached_kernel(self, key: str) -> bytes | None:
        ...

    def cache_kernel(self, key: str, blob: bytes) -> None:
        ...


def cache_key(workload, target: Target | str | None = None) -> str:
    """The key of compiled code for ``workload`` (any repr-able description of what is
    compiled: a signature and a config) for ``target`` (``as_target``: default the host),
    with this code generator: code cached for another target or by another version of the
    generator is never found.

    Example:
        >>> len(cache_key(("matmul", 64))), cache_key("a") == cache_key("a") != cache_key("b")
        (64, True)
        >>> cache_key("a") == cache_key("a", Target.host()) != cache_key("a", "llvm -mcpu=skylake-avx512")
        True
    """
    target = as_target(target)
    text = repr((workload, target.key, target.triple, TOOLCHAIN, code_fingerprint()))
    return hashlib.sha256(text.encode()).hexdigest()


@functools.cache
def code_fingerprint() -> str:
    """The sha256 of the compiler's own code (every ``.py`` and ``.ll`` file of
    ``CODE_PACKAGES``, by path and content), read once per process: an installed release and a
    working copy edited since a kernel was cached give other keys, so no cache serves code an
    older compiler made.

    Example:
        >>> len(code_fingerprint()), code_fingerprint() == code_fingerprint()
        (64, True)
    """
    digest = hashlib.sha256()
    for package in CODE_PACKAGES:
        for root in importlib.import_module(package).__path__:
            for path in sorted(p for p in Path(root).rglob("*") if p.suffix in (".py", ".ll")):
                digest.update(f"{package}/{path.relative_to(root).as_posix()}\0".encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()
