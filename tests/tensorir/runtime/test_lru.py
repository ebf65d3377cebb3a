"""LRUCache: bounded, least recently used first out, refuses a bad capacity, safe across threads."""
import threading

import pytest

from tilefuse.tensorir.runtime.lru import LRUCache


def test_the_least_recently_used_entry_goes_first():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1            # "b" is now the least recently used
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3 and len(cache) == 2
    cache.put("a", 10)                    # replacing a value keeps one entry
    assert cache.get("a") == 10 and len(cache) == 2
    cache.clear()
    assert len(cache) == 0 and cache.get("a") is None


@pytest.mark.parametrize("capacity", [0, -1, 1.5, True, "2"])
def test_a_capacity_that_is_not_a_positive_int_is_refused(capacity):
    with pytest.raises(ValueError, match="positive int"):
        LRUCache(capacity)


def test_threads_putting_and_getting_at_once_keep_it_bounded():
    cache = LRUCache(16)

    def work(k):
        for n in range(2000):
            cache.put((k, n % 40), n)
            cache.get((k, (n * 7) % 40))
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 16
