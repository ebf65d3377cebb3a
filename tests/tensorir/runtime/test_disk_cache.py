import os

import pytest

from tilefuse.tensorir.runtime import disk_cache
from tilefuse.tensorir.runtime.disk_cache import DiskKernelCache, KernelCacheError, default_kernel_cache


def _key(n: int) -> str:
    return f"{n:064x}"


def test_an_entry_is_read_back_whole_and_counts_its_hits(tmp_path):
    cache = DiskKernelCache(tmp_path / "c")
    assert cache.cached_kernel(_key(1)) is None and cache.entries() == []
    cache.cache_kernel(_key(1), b"code" * 100)
    assert [cache.cached_kernel(_key(1)) for _ in range(3)] == [b"code" * 100] * 3
    (entry,) = cache.entries()
    assert (entry.key, entry.hits) == (_key(1), 3) and entry.bytes > 400
    assert (tmp_path / "c" / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "other key", "not framed"])
def test_a_damaged_truncated_or_foreign_entry_is_ignored_with_a_warning_and_replaced(tmp_path, damage):
    cache = DiskKernelCache(tmp_path)
    cache.cache_kernel(_key(1), b"one" * 50)
    cache.cache_kernel(_key(2), b"two" * 50)
    path = cache.path_of(_key(1))
    data = path.read_bytes()
    path.write_bytes({"flip": data[:-5] + bytes([data[-5] ^ 1]) + data[-4:], "truncate": data[:-7], "empty": b"",
                      "other key": cache.path_of(_key(2)).read_bytes(), "not framed": b"one" * 50}[damage])
    with pytest.warns(UserWarning, match="damaged, truncated or not this key's"):
        assert cache.cached_kernel(_key(1)) is None
    cache.cache_kernel(_key(1), b"one" * 50)          # what a compile does next
    assert cache.cached_kernel(_key(1)) == b"one" * 50


def test_eviction_removes_the_least_recently_used_entries_first(tmp_path):
    cache = DiskKernelCache(tmp_path, max_bytes=10_000)
    for k in range(8):
        cache.cache_kernel(_key(k), bytes(1000))
        os.utime(cache.path_of(_key(k)), (1000 + k, 1000 + k))
    os.utime(cache.path_of(_key(0)), (2000, 2000))     # 0 used last
    for k in range(8, 12):                             # past the bound
        cache.cache_kernel(_key(k), bytes(1000))
    kept = {e.key for e in cache.entries()}
    assert cache.total_bytes() <= 10_000 * disk_cache.KEEP_AFTER_EVICTION
    assert _key(0) in kept and _key(11) in kept and _key(1) not in kept and _key(2) not in kept


def test_stale_half_written_files_go_at_eviction_and_fresh_ones_stay(tmp_path):
    cache = DiskKernelCache(tmp_path)
    cache.cache_kernel(_key(1), b"x")
    folder = cache.path_of(_key(1)).parent
    stale, fresh = folder / f".{_key(2)}.kernel.abc.tmp", folder / f".{_key(3)}.kernel.def.tmp"
    stale.write_bytes(b"half"); fresh.write_bytes(b"half")
    os.utime(stale, (1, 1))
    cache.evict()
    assert not stale.exists() and fresh.exists() and len(cache.entries()) == 1


def test_clear_removes_every_entry_and_the_hit_counts(tmp_path):
    cache = DiskKernelCache(tmp_path)
    for k in range(3):
        cache.cache_kernel(_key(k), b"x")
    cache.cached_kernel(_key(0))
    assert cache.clear() == 3 and cache.entries() == [] and cache.total_bytes() == 0
    cache.cache_kernel(_key(0), b"x")
    assert cache.entries()[0].hits == 0


def test_the_hits_log_is_compacted_past_its_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(disk_cache, "HITS_LOG_LIMIT", 500)
    cache = DiskKernelCache(tmp_path)
    cache.cache_kernel(_key(1), b"x")
    for _ in range(30):
        cache.cached_kernel(_key(1))
    assert (tmp_path / "hits.log").stat().st_size <= 500 and cache.entries()[0].hits == 30


def test_a_cache_folder_that_cannot_be_written_warns_once_and_compiles_go_on(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    cache = DiskKernelCache(tmp_path / "file" / "cache")
    with pytest.warns(UserWarning, match="cannot be written"):
        cache.cache_kernel(_key(1), b"x")
    cache.cache_kernel(_key(2), b"x")                 # no second warning (pytest would show it as an error)
    assert cache.cached_kernel(_key(1)) is None and cache.entries() == []


def test_keys_are_64_hex_digits():
    with pytest.raises(KernelCacheError, match="64 hex digits"):
        DiskKernelCache("/tmp/c").path_of("../../etc/passwd")


def test_the_environment_chooses_the_folder_and_off_turns_it_off(tmp_path):
    assert default_kernel_cache({"TILEFUSE_CACHE_DIR": "OFF"}) is None
    assert default_kernel_cache({"TILEFUSE_CACHE_DIR": str(tmp_path)}).folder == tmp_path
    assert default_kernel_cache({"XDG_CACHE_HOME": str(tmp_path)}).folder == tmp_path / "tilefuse"
    home = default_kernel_cache({}).folder
    assert home == default_kernel_cache({"XDG_CACHE_HOME": " "}).folder and home.parts[-2:] == (".cache", "tilefuse")
    assert default_kernel_cache({"TILEFUSE_CACHE_DIR": str(tmp_path)}) is \
        default_kernel_cache({"TILEFUSE_CACHE_DIR": str(tmp_path)})      # one object: it counts its writes
    for bad in ("0", "-5", "1GB", "lots"):
        with pytest.raises(KernelCacheError, match="TILEFUSE_CACHE_MAX_BYTES must be a positive whole number"):
            default_kernel_cache({"TILEFUSE_CACHE_MAX_BYTES": bad})
