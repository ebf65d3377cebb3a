"""Arrays on cache lines: every shape and dtype starts on one, a copy is made only when the
array does not, and values survive the copy."""
import numpy as np
import pytest

from tilefuse.tensorir.runtime.aligned import (CACHE_LINE, aligned_empty, aligned_maker, aligned_zeros, data_address,
                                               on_cache_line)


@pytest.mark.parametrize("shape, dtype", [((), "float32"), (0, "float32"), (1, "int8"), ((3, 5), "float64"),
                                          ((1 << 20) + 3, "uint8"), ((7, 1, 9), "bool")])
def test_every_shape_and_dtype_starts_on_a_cache_line(shape, dtype):
    make = aligned_maker(shape, dtype)
    kept = []
    for _ in range(4):          # numpy's own large blocks are 16 or 32 bytes past a page
        for a in (aligned_empty(shape, dtype), make()):
            assert a.size == 0 or a.ctypes.data % CACHE_LINE == 0
            assert a.shape == np.empty(shape).shape and a.dtype == np.dtype(dtype) and a.flags.c_contiguous
            assert a.flags.writeable
            kept.append(a)
    # each call a new array of its own: none shares memory with another
    assert not any(np.shares_memory(a, b) for i, a in enumerate(kept) for b in kept[i + 1:] if a.size)
    assert not aligned_zeros(shape, dtype).any()


def test_a_misaligned_or_strided_array_is_copied_onto_a_cache_line():
    block = aligned_zeros(100, "float32")
    block[:] = np.arange(100)
    assert on_cache_line(block) is block
    for view in (block[1:], block[4:68].reshape(8, 8), block[::3], block[2:50].reshape(6, 8).T):
        copy = on_cache_line(view)
        assert copy.ctypes.data % CACHE_LINE == 0 and copy.flags.c_contiguous
        np.testing.assert_array_equal(copy, view)
    assert on_cache_line([1.5, 2.5]).tolist() == [1.5, 2.5]
    empty = block[1:1]
    assert on_cache_line(empty).size == 0


def test_a_negative_size_is_refused():
    with pytest.raises(ValueError):
        aligned_empty((2, -3), "float32")
    with pytest.raises(ValueError):
        aligned_maker((2, -3), "float32")


@pytest.mark.parametrize("make", [lambda: np.arange(100, dtype="float32"),
                                  lambda: np.arange(100, dtype="float64")[3:],       # a view
                                  lambda: np.arange(60, dtype="int32").reshape(6, 10)[:, 2:5],   # strided
                                  lambda: np.zeros(0, "float32"),
                                  lambda: np.array(2.5, "float32")])                  # 0-d
def test_data_address_is_where_numpy_says_the_data_is(make):
    a = make()
    assert data_address(a) == a.ctypes.data


def test_aligned_empty_takes_a_scalar_or_a_sequence_for_its_shape():
    assert aligned_empty(np.int64(5), "float32").shape == (5,)
    assert aligned_empty(np.array(4), "int8").shape == (4,)
    assert aligned_empty([2, 3], "float32").shape == aligned_empty(np.array([2, 3]), "float32").shape == (2, 3)
