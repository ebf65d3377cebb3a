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

import numpy as np

CACHE_LINE = 64     # bytes: an x86 cache line, and an AVX-512 vector


def aligned_empty(shape, dtype) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape`` and ``dtype`` whose data starts on a
    cache line (it views a slightly larger block, which it keeps alive); an empty array has no
    data to align. ValueError for a negative dimension.

    Example:
        >>> aligned_empty(10, "float64").ctypes.data % CACHE_LINE
        0
    """
    dtype = np.dtype(dtype)
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"negative dimensions are not allowed: {shape}")
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + CACHE_LINE, np.uint8)
    start = -raw.ctypes.data % CACHE_LINE
    return raw[start:start + nbytes].view(dtype).reshape(shape)


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
    if array.size == 0 or array.ctypes.data % CACHE_LINE == 0:
        return array
    copy = aligned_empty(array.shape, array.dtype)
    copy[...] = array
    return copy
