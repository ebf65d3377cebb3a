"""Kernels run one after another by native code, in one call from Python.

A compiled graph's run called each kernel from Python: about 1.5-2 us of ctypes and
interpreter a kernel, 0.15-0.25 ms a run of a small CNN's 80-130 kernels (MobileNetV3's
kernels take 2.6 ms in all). A ``KernelSequence`` holds, for each kernel, the address of its
packed entry (``Kernel.packed_entry_address``: ``i32 f(void **pointers)``) and an array of its
arguments' data pointers; ``run()`` calls ``tilefuse_run_kernels`` (hand-written LLVM IR,
compiled once per machine like the thread pool's), which calls them in order and stops at the
first that does not return 0. The caller sets the pointers that change between runs (feeds,
new outputs) with ``point`` before each run; the others stay as given.

Example:
    >>> import numpy as np
    >>> from tilefuse.tensorir import placeholder, compute
    >>> from tilefuse.schedule import create_schedule, build
    >>> A = placeholder((4,), name="A"); B = compute((4,), lambda i: A[i] + 1.0, name="B")
    >>> add_one = build(create_schedule(B), [A, B])
    >>> a, b, c = np.zeros(4, "float32"), np.empty(4, "float32"), np.empty(4, "float32")
    >>> seq = KernelSequence([(add_one.packed_entry_address, [a.ctypes.data, b.ctypes.data]),
    ...                       (add_one.packed_entry_address, [b.ctypes.data, 0])])
    >>> seq.point(1, 1, c.ctypes.data)        # the second kernel writes c
    >>> seq.run(), c.tolist()                  # 0: every kernel returned 0
    (0, [2.0, 2.0, 2.0, 2.0])
"""
from __future__ import annotations

import ctypes
import threading

from .jit import jit_ir

__all__ = ["KernelSequence"]

_IR = """
define i64 @tilefuse_run_kernels(ptr %entries, ptr %pointers, i64 %n) nounwind {
entry:
  %none = icmp eq i64 %n, 0
  br i1 %none, label %done, label %call
call:
  %k = phi i64 [ 0, %entry ], [ %next, %returned_0 ]
  %entry_slot = getelementptr inbounds ptr, ptr %entries, i64 %k
  %kernel = load ptr, ptr %entry_slot, align 8
  %pointers_slot = getelementptr inbounds ptr, ptr %pointers, i64 %k
  %arguments = load ptr, ptr %pointers_slot, align 8
  %status = call i32 %kernel(ptr %arguments)
  %next = add nuw i64 %k, 1
  %failed = icmp ne i32 %status, 0
  br i1 %failed, label %stop, label %returned_0
returned_0:
  %more = icmp ult i64 %next, %n
  br i1 %more, label %call, label %done
stop:
  ret i64 %next
done:
  ret i64 0
}
"""

_lock = threading.Lock()
_runner = None          # (the loaded code, kept alive; the ctypes function)


def _run_kernels():
    """``tilefuse_run_kernels(entries, pointers, n)``: 0 when all ``n`` returned 0, else the
    1-based place of the first that did not; compiled once per process."""
    global _runner
    if _runner is None:
        with _lock:
            if _runner is None:
                code = jit_ir(_IR, "tilefuse_kernel_sequence")
                function = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
                    code.address("tilefuse_run_kernels"))
                _runner = (code, function)
    return _runner[1]


class KernelSequence:
    """Kernels (packed entry addresses, each with its arguments' data pointers) run in order
    by one native call; see the module docstring."""

    def __init__(self, kernels: list):
        self._function = _run_kernels()
        n = len(kernels)
        self._pointers = [(ctypes.c_void_p * max(len(pointers), 1))(*pointers) for _, pointers in kernels]
        self._entries = (ctypes.c_void_p * max(n, 1))(*[address for address, _ in kernels])
        self._lists = (ctypes.c_void_p * max(n, 1))(*[ctypes.addressof(p) for p in self._pointers])
        self._call = (ctypes.addressof(self._entries), ctypes.addressof(self._lists), n)

    def point(self, kernel: int, position: int, address: int) -> None:
        """Set the data pointer of argument ``position`` of kernel ``kernel`` (0-based)."""
        self._pointers[kernel][position] = address

    def run(self) -> int:
        """Run the kernels in order: 0 when every one returned 0, else the 1-based place of the
        first that did not (those after it did not run)."""
        return self._function(*self._call)
