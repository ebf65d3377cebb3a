"""Arrays whose data starts on a cache line, for every buffer the runtime allocates (a
graph's planned buffers and outputs, packed weights, kept constants).

numpy's allocator only promises 16 bytes: a large array comes from ``mmap`` plus malloc's
header, 16 or 32 bytes past a page boundary. A kernel's 64-byte vector loads from such an
array each span two cache lines, which costs a second load; resnet50's stem convolution ran
1.46 ms with its packed weights 16 bytes off a line and 1.18 ms on one.

Example:
    >>> a = aligned_empty((3, 5), "float32")
    >>> a.ctypes.data % CACHE_LINE, a.shape, a.flags.c_contiguous
    (0, (3, 5), True)
"""
from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from .abi import ARRAY_DATA_OFFSET

CACHE_LINE = 64     # bytes: an x86 cache line, and an AVX-512 vector


@functools.cache
def array_layout_is_known() -> bool:
    """Whether numpy arrays keep their data pointer ``ARRAY_DATA_OFFSET`` bytes into the array
    object, where ``data_address`` and the kernels' array entries read it.

    Example:
        >>> array_layout_is_known()
        True
    """
    probe = np.zeros(3, "float32")
    return ctypes.c_void_p.from_address(id(probe) + ARRAY_DATA_OFFSET).value == probe.ctypes.data


_LAYOUT_KNOWN = array_layout_is_known()


def data_address(array: np.ndarray) -> int:
    """The address of the first byte of ``array``'s data, read from the array object:
    ``array.ctypes.data`` builds a ctypes object each time (5 us against 1.8 us on the
    Skylake-SP machine), which a graph's run paid per feed and per output.

    Example:
        >>> a = np.zeros(4, "float32")
        >>> data_address(a) == a.ctypes.data, data_address(a[1:]) - data_address(a)
        (True, 4)
    """
    if _LAYOUT_KNOWN and isinstance(array, np.ndarray):
        return ctypes.c_void_p.from_address(id(array) + ARRAY_DATA_OFFSET).value or 0
    return array.ctypes.data


def aligned_empty(shape, dtype) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape`` and ``dtype`` whose data starts on a
    cache line (it views a slightly larger block, which it keeps alive); an empty array has no
    data to align. ValueError for a negative dimension.

    Example:
        >>> aligned_empty(10, "float64").ctypes.data % CACHE_LINE
        0
    """
    dtype, dims = np.dtype(dtype), _dims(shape)
    return _carve(np.empty(_block_bytes(dims, dtype), np.uint8), dims, dtype)


def aligned_bytes(shape, dtype) -> int:
    """The bytes of the block ``aligned_empty`` takes for an array of ``shape`` and ``dtype``:
    its data and a cache line to align it in. ValueError for a negative dimension.

    Example:
        >>> aligned_bytes((3, 5), "float32")
        124
    """
    return _block_bytes(_dims(shape), np.dtype(dtype))


def aligned_in(block: np.ndarray, shape, dtype) -> np.ndarray:
    """An array of ``shape`` and ``dtype`` viewing the bytes of ``block`` (uint8, C-contiguous,
    at least ``aligned_bytes(shape, dtype)`` of them) from its first cache line on.

    Example:
        >>> a = aligned_in(np.zeros(aligned_bytes(4, "int32"), np.uint8), 4, "int32")
        >>> a.ctypes.data % CACHE_LINE, a.tolist()
        (0, [0, 0, 0, 0])
    """
    return _carve(block, _dims(shape), np.dtype(dtype))


def aligned_maker(shape, dtype):
    """A function of no arguments that returns a new ``aligned_empty(shape, dtype)`` each call,
    the shape and sizes worked out once: a compiled graph's run makes its outputs so, 0.7 us an
    array against aligned_empty's 2.6 (12x128x128 float32). ValueError for a negative dimension.

    Example:
        >>> make = aligned_maker((2, 3), "float32")
        >>> a, b = make(), make()
        >>> a.shape, a.ctypes.data % CACHE_LINE, a is b
        ((2, 3), 0, False)
    """
    dtype, dims = np.dtype(dtype), _dims(shape)
    block_bytes, empty = _block_bytes(dims, dtype), np.empty
    return lambda: _carve(empty(block_bytes, np.uint8), dims, dtype)


def _block_bytes(dims: tuple, dtype: np.dtype) -> int:
    """The bytes of an array's block: its data and a cache line to align it in."""
    return math.prod(dims) * dtype.itemsize + CACHE_LINE


def _carve(block: np.ndarray, dims: tuple, dtype: np.dtype) -> np.ndarray:
    """The array of ``dims`` and ``dtype`` in ``block`` from its first cache line (it keeps the
    block alive: its base)."""
    return np.ndarray(dims, dtype, block, -data_address(block) % CACHE_LINE)


def _dims(shape) -> tuple:
    """``shape`` (an int, or a sequence of them) as a tuple of ints; ValueError for a negative one."""
    dims = (int(shape),) if isinstance(shape, (int, np.integer)) or getattr(shape, "ndim", 1) == 0 else \
        tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"negative dimensions are not allowed: {dims}")
    return dims


def aligned_zeros(shape, dtype) -> np.ndarray:
    """``aligned_empty`` filled with zeros.

    Example:
        >>> aligned_zeros((2, 2), "int32").tolist()
        [[0, 0], [0, 0]]
    """
    array = aligned_empty(shape, dtype)
    array[...] = 0
    return array


def on_cache_line(value) -> np.ndarray:
    """``value`` as a C-contiguous array whose data starts on a cache line: itself when it
    already is one, else a copy (an empty array as it is).

    Example:
        >>> import numpy as np
        >>> a = aligned_zeros(8, "float32")
        >>> on_cache_line(a) is a, on_cache_line(a[1:]).ctypes.data % CACHE_LINE
        (True, 0)
    """
    array = np.asarray(value, order="C")
    if array.size == 0 or data_address(array) % CACHE_LINE == 0:
        return array
    copy = aligned_empty(array.shape, array.dtype)
    copy[...] = array
    return copy
