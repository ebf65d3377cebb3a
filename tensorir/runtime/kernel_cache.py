"""Where compiled kernels are kept between compiles.

``KernelCache`` is the protocol a persistent store implements (``autotune.Database`` keeps
artifacts in its sqlite file): bytes under a key the caller derives from the workload, the
config, the target and the code generator's version. ``LRUCache`` is the bounded in-process
cache of built objects that sits in front of it.

Example:
    >>> cache = LRUCache(2)
    >>> cache.put("a", 1); cache.put("b", 2); cache.get("a"); cache.put("c", 3)
    1
    >>> cache.get("b") is None, cache.get("a"), cache.get("c")
    (True, 1, 3)
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Protocol, runtime_checkable

from .artifact import TOOLCHAIN
from .target import Target


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


def cache_key(workload) -> str:
    """The key of compiled code for ``workload`` (any repr-able description of what is
    compiled: a signature and a config) on this host, with this code generator: code cached
    by another CPU or another version of the generator is never found.

    Example:
        >>> len(cache_key(("matmul", 64))), cache_key("a") == cache_key("a") != cache_key("b")
        (64, True)
    """
    text = repr((workload, Target.host().key, TOOLCHAIN))
    return hashlib.sha256(text.encode()).hexdigest()


class LRUCache:
    """At most ``capacity`` entries; the least recently used one goes first. Thread safe.

    Example:
        >>> c = LRUCache(1); c.put("k", "v"); c.get("k"), len(c)
        ('v', 1)
    """

    def __init__(self, capacity: int):
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"cache capacity must be a positive int, got {capacity!r}")
        self.capacity = capacity
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        """The value under ``key`` (now the most recently used), or None.

        Example:
            >>> LRUCache(4).get("missing") is None
            True
        """
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key, value) -> None:
        """Keep ``value`` under ``key``, dropping the least recently used entry when full.

        Example:
            >>> c = LRUCache(1); c.put("a", 1); c.put("b", 2); c.get("a") is None
            True
        """
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def clear(self) -> None:
        """Drop every entry.

        Example:
            >>> c = LRUCache(2); c.put("a", 1); c.clear(); len(c)
            0
        """
        with self._lock:
            self._items.clear()

    def __len__(self):
        return len(self._items)
