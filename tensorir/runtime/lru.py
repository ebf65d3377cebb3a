"""A bounded, thread-safe map that forgets its least recently used entry first: the in-process
caches of built kernels (``graph_api.build``) and of compiled object code
(``tensorir.runtime.kernel.compile_llvm``).

Example:
    >>> cache = LRUCache(2)
    >>> cache.put("a", 1); cache.put("b", 2); cache.get("a"); cache.put("c", 3)
    1
    >>> cache.get("b") is None, cache.get("a"), cache.get("c")
    (True, 1, 3)
"""
from __future__ import annotations

import threading
from collections import OrderedDict


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
