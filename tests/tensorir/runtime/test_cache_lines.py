import numpy as np
import pytest

from tilefuse.tensorir.runtime import cache_lines
from tilefuse.tensorir.runtime.cache_lines import flush_from_caches


def test_flushing_leaves_every_value_as_it_was():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((37, 129)).astype("float32"), rng.integers(0, 9, 1001).astype("int8"),
              np.arange(3.0)]
    copies = [a.copy() for a in arrays]
    flush_from_caches(*arrays)
    for a, c in zip(arrays, copies):
        np.testing.assert_array_equal(a, c)


def test_views_with_any_strides_are_flushed_over_their_span(monkeypatch):
    spans = []
    flush = cache_lines._compiled()
    monkeypatch.setattr(cache_lines, "_compiled", lambda: lambda start, nbytes: spans.append((start, nbytes))
                        or flush(start, nbytes))
    base = np.zeros((8, 16), "float32")
    flush_from_caches(base, base[::-1, ::3], base[2:3, 5], np.zeros(0, "float32"))
    low = base.ctypes.data
    assert spans == [(low, 512), (low, 15 * 4 + 7 * 64 + 4), (low + 2 * 64 + 5 * 4, 4)]     # the empty one: none


def test_only_arrays_are_flushed():
    with pytest.raises(TypeError, match="numpy arrays"):
        flush_from_caches([1.0, 2.0])


def test_the_native_function_is_compiled_once():
    assert cache_lines._compiled() is cache_lines._compiled()


def _cache(root, name, kind, size):
    (root / name).mkdir()
    (root / name / "type").write_text(kind + "\n")
    (root / name / "size").write_text(size + "\n")


def test_the_last_level_cache_is_the_largest_data_cache(tmp_path):
    _cache(tmp_path, "index0", "Data", "32K")
    _cache(tmp_path, "index1", "Instruction", "64M")       # not read through for data
    _cache(tmp_path, "index2", "Unified", "1024K")
    _cache(tmp_path, "index3", "Unified", "32768K")
    assert cache_lines.last_level_cache_bytes(tmp_path) == 32 << 20


def test_an_unknown_cache_size_is_none(tmp_path):
    assert cache_lines.last_level_cache_bytes(tmp_path) is None
    _cache(tmp_path, "index0", "Unified", "lots")
    (tmp_path / "index1").mkdir()                           # no files: skipped
    assert cache_lines.last_level_cache_bytes(tmp_path) is None


def test_a_cpu_without_cache_line_flushes_says_so(monkeypatch):
    from tilefuse.tensorir.errors import Unsupported
    from tilefuse.tensorir.runtime.target import Target
    host = Target.host()
    monkeypatch.setattr(cache_lines, "_flush_lines", [])
    monkeypatch.setattr(cache_lines.Target, "host", staticmethod(lambda: Target.of("cortex-a72", "+neon",
                                                                                   triple="aarch64-unknown-linux-gnu")))
    assert not cache_lines.flushes_here()
    with pytest.raises(Unsupported, match="needs an x86 CPU; this one is aarch64"):
        flush_from_caches(np.zeros(4))
    monkeypatch.undo()
    assert cache_lines.flushes_here() == host.triple.startswith("x86_64")
