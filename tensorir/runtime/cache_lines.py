"""Push arrays out of every cache level: each of their 64-byte lines is written back (when
dirty) and invalidated (x86 ``clflushopt``, or ``clflush`` where the CPU lacks it), then a
fence waits for all of it.

A measurement uses it to give a kernel what it meets in a model: its weights come from
memory (the model's other layers have pushed them out since the last run), while its data
inputs are in the cache the kernel before it wrote them to. Evicting the caches with a large
copy instead would also push the data inputs out, and a layer whose activations are a few
MB then takes up to twice its time in a model.

The function is a few lines of LLVM IR, compiled once per process for the host.

Example:
    >>> import numpy as np
    >>> weights = np.ones(1 << 16, "float32")
    >>> flush_from_caches(weights)          # its lines now come from memory on the next read
    >>> float(weights.sum())                # the values are untouched
    65536.0
"""
from __future__ import annotations

import ctypes
import threading
from pathlib import Path

import numpy as np

from ..errors import Unsupported
from .jit import jit_ir
from .target import Target

LINE_BYTES = 64
"""The cache line size of the x86 CPUs the project runs on."""
CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
"""Where Linux describes the first CPU's caches: one ``index*`` directory per cache."""

_IR = """
declare void @llvm.x86.{intrinsic}(ptr)

define void @tilefuse_flush_lines(ptr %start, i64 %bytes) {{
entry:
  %first = ptrtoint ptr %start to i64
  %end = add i64 %first, %bytes
  %line = and i64 %first, -{line}
  %empty = icmp eq i64 %bytes, 0
  br i1 %empty, label %done, label %loop
loop:
  %at = phi i64 [ %line, %entry ], [ %next, %loop ]
  %p = inttoptr i64 %at to ptr
  call void @llvm.x86.{intrinsic}(ptr %p)
  %next = add i64 %at, {line}
  %more = icmp ult i64 %next, %end
  br i1 %more, label %loop, label %done
done:
  fence seq_cst
  ret void
}}
"""

_lock = threading.Lock()
_flush_lines = []       # [the engine (kept alive), the ctypes function]


def flushes_here() -> bool:
    """Whether this machine's CPU can flush cache lines here (an x86 one).

    Example:
        >>> flushes_here() in (True, False)
        True
    """
    return Target.host().triple.startswith(("x86_64", "i686", "i386"))


def _compiled():
    """The native ``flush_lines(start, bytes)``, compiled on first use."""
    if _flush_lines:
        return _flush_lines[1]
    with _lock:
        if not _flush_lines:
            host = Target.host()
            if not flushes_here():
                raise Unsupported(f"flushing cache lines needs an x86 CPU; this one is {host.triple}")
            features = host.features.split(",")
            intrinsic = "clflushopt" if "+clflushopt" in features else "sse2.clflush"
            engine = jit_ir(_IR.format(intrinsic=intrinsic, line=LINE_BYTES), "tilefuse_cache_lines")
            function = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64)(
                engine.address("tilefuse_flush_lines"))
            _flush_lines.extend([engine, function])
    return _flush_lines[1]


def flush_from_caches(*arrays: np.ndarray) -> None:
    """Write back and invalidate every cache line of each array (any layout: the span from its
    lowest to its highest byte), and wait until that is done. Values are unchanged.

    Example:
        >>> a = np.arange(1000, dtype="float32")
        >>> flush_from_caches(a, a[::2]); int(a[999])
        999
    """
    flush = _compiled()
    for a in arrays:
        if not isinstance(a, np.ndarray):
            raise TypeError(f"flush_from_caches takes numpy arrays, got {type(a).__name__}")
        if a.size == 0:
            continue
        low = high = a.ctypes.data
        for n, stride in zip(a.shape, a.strides):
            low, high = low + min(0, (n - 1) * stride), high + max(0, (n - 1) * stride)
        flush(low, high + a.itemsize - low)


def last_level_cache_bytes(caches: Path = CACHES) -> int | None:
    """The size in bytes of the largest data (or unified) cache the first CPU reads through, as
    Linux describes it under ``caches``; None where it does not.

    Example:
        >>> size = last_level_cache_bytes()
        >>> size is None or size >= 1 << 20
        True
    """
    sizes = []
    for index in sorted(caches.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:].upper(), 1)
        digits = size.rstrip("KkMmGg")
        if kind in ("Data", "Unified") and digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=None)
