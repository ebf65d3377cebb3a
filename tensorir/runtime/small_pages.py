"""Small pages for a large array about to be filled once: ``madvise(MADV_NOHUGEPAGE)``.

numpy asks the kernel for transparent huge pages for every array of 4 MB or more, and where
the kernel grants them on first touch (``/sys/kernel/mm/transparent_hugepage/enabled``:
``madvise``) a huge page can cost far more to fault in than the 512 small pages it replaces:
on this project's virtual machines, touching 340 MB of new arrays took 0.07-0.77 s with huge
pages (0.33 s typical) and 0.13-0.15 s with small pages. A model's weights are such arrays,
read once at a session's start (``graph_api.onnx.weights``; their memory then holds the packed
weights), so they ask for small pages. The price is in the kernels' address translation:
ViT-B/16's runs measured 0-4% slower (2% on a quiet machine, the best of 15 runs: 100 against
98 ms), BERT-base's and GPT-2's alike within noise.

The call is made without releasing the GIL (``ctypes.PyDLL``): it returns at once, and a
thread that gave the GIL up would wait for it again. Where there is no ``madvise`` or no
such advice (not Linux), it does nothing.

Example:
    >>> import numpy as np
    >>> use_small_pages(np.empty(1 << 22, np.uint8))     # advice only: nothing to see
"""
from __future__ import annotations

import ctypes
import functools
import mmap

import numpy as np

from .aligned import data_address


def use_small_pages(array: np.ndarray) -> None:
    """Advise the kernel to back the whole pages of ``array``'s data (C-contiguous) with small
    pages, before they are first touched. See the module docstring.

    Example:
        >>> import numpy as np
        >>> a = np.zeros(1 << 22, np.uint8); use_small_pages(a); int(a.sum())
        0
    """
    madvise = _madvise()
    if madvise is None:
        return
    page = mmap.PAGESIZE
    start = data_address(array)
    first, last = -(-start // page) * page, (start + array.nbytes) // page * page
    if last > first:
        madvise(first, last - first, mmap.MADV_NOHUGEPAGE)


@functools.cache
def _madvise():
    """libc's ``madvise`` called with the GIL held, or None where there is none to call."""
    if not hasattr(mmap, "MADV_NOHUGEPAGE"):
        return None
    try:
        function = ctypes.PyDLL(None).madvise
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    function.restype = ctypes.c_int
    return function
