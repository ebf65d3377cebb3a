"""Scratch memory for kernels' large intermediate buffers (a padded input, Winograd's
transformed tiles): one grow-only block per thread, reused by every kernel that thread calls.

A kernel's entry calls ``void *tilefuse_scratch(int64_t nbytes)`` once with the total size of
its large buffers and places them at fixed offsets in the block. Memory from ``malloc`` would
go back to the system at every ``free`` (the sizes are above glibc's trim threshold) and be
faulted in page by page on the next call, which costs as much as a convolution; the block is
touched once. Kernels do not call kernels, so one block per thread is never shared by two
running calls. The function is Python (it takes the GIL for a microsecond, once per call of a
kernel that has large buffers) and returns NULL when the memory cannot be had.

Example:
    >>> from tilefuse.tensorir.runtime.scratch import scratch_address
    >>> scratch_address(1000) % SCRATCH_ALIGN, scratch_address(10) == scratch_address(1000)
    (0, True)
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from .aligned import CACHE_LINE, aligned_empty

SCRATCH = "tilefuse_scratch"
SCRATCH_ALIGN = CACHE_LINE      # where the block starts

_local = threading.local()


def scratch_address(nbytes: int) -> int:
    """The address of this thread's scratch block, grown to at least ``nbytes`` bytes (its
    contents are lost when it grows); 0 when the memory cannot be had.

    Example:
        >>> scratch_address(64) != 0
        True
    """
    _local.asked = max(getattr(_local, "asked", 0), int(nbytes))
    held = getattr(_local, "held", None)           # (block, its address): no ctypes object per call
    if held is None or held[0].nbytes < nbytes:
        try:
            block = aligned_empty(max(int(nbytes), 1), np.uint8)
        except (MemoryError, ValueError):
            return 0
        held = _local.held = (block, block.ctypes.data)
    return held[1]


def scratch_used_by(call) -> np.ndarray:
    """Run ``call()`` on this thread and return the part of this thread's scratch block that
    the kernels it ran asked for (an empty array when none did), e.g. to flush it from the
    caches before timing the call again.

    Example:
        >>> used = scratch_used_by(lambda: scratch_address(1000))
        >>> used.nbytes, used.ctypes.data == scratch_address(1000)
        (1000, True)
        >>> scratch_used_by(lambda: None).nbytes
        0
    """
    _local.asked = 0
    call()
    asked, held = getattr(_local, "asked", 0), getattr(_local, "held", None)
    if held is None or not asked:
        return np.empty(0, np.uint8)
    return held[0][:asked]


def _native_scratch(nbytes: int) -> int:
    """``scratch_address`` for native callers: 0 on any exception (an exception escaping a
    ctypes callback would hand the kernel an undefined pointer)."""
    try:
        return scratch_address(nbytes)
    except BaseException:           # noqa: BLE001 - a KeyboardInterrupt too: the kernel reports no memory
        return 0


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int64)(_native_scratch)


def callback_address() -> int:
    """Where native code calls ``scratch_address`` (``tilefuse_scratch``, 0 on any exception); the callback lives
    as long as the process.

    Example:
        >>> callback_address() != 0
        True
    """
    return ctypes.cast(_CALLBACK, ctypes.c_void_p).value
