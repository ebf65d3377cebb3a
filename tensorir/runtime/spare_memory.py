"""The memory of arrays no one holds any more, made into new aligned arrays of the same size.

Packing a model's weights (after_build's ``settle constants``) writes each packed copy into new
memory, whose pages the kernel faults in one by one as the copy first touches them, and then
drops the original, whose pages go back to the system: ViT-B/16's 50 packs took 0.17-0.19 s,
of which 0.11-0.13 s were 25,700 page faults (packing again into the same memory: 0.06 s). A
transformer's weights come in a few sizes, one of each per layer: ``SpareMemory`` keeps the
memory of an original that is dropped when a later pack wants an array of its size, and hands
it out for that array, whose pages are then already there.

Memory is kept only when nothing but the caller holds the array and its memory (CPython's
reference counts say so: another view, a caller's graph, a kept constant step all keep theirs),
when numpy allocated it (not a mapped file's), and while an array of its size is still wanted.
A bound constant's array is read-only; the memory made writable again is no one else's.

Example:
    >>> from tilefuse.tensorir.runtime.aligned import CACHE_LINE, aligned_empty, data_address
    >>> spare = SpareMemory([((256, 1024), "float32")])
    >>> weights = {"w": aligned_empty((1024, 256), "float32")}
    >>> address = data_address(weights["w"])
    >>> spare.give(weights.pop("w"))              # the last reference to it
    >>> b = spare.empty((256, 1024), "float32")
    >>> data_address(b) == address, data_address(b) % CACHE_LINE
    (True, 0)
"""
from __future__ import annotations

import sys
from collections import Counter

import numpy as np

from .aligned import aligned_bytes, aligned_empty, aligned_in


class SpareMemory:
    """Memory given back (``give``) for the arrays to be made (``empty``) of the shapes and
    dtypes in ``wanted``. See the module docstring."""

    def __init__(self, wanted=()):
        self._wanted = Counter(aligned_bytes(shape, dtype) for shape, dtype in wanted)
        self._spare: dict[int, list] = {}

    def give(self, array) -> None:
        """Keep the memory of ``array`` for a later ``empty`` of its size, when it is wanted and
        nothing else holds the array or its memory: the caller passes its last reference (a
        value popped from a dict, not a name it keeps)."""
        if type(array) is not np.ndarray:
            return
        owner = array.base
        if owner is None:
            owner, holders = array, 3           # the argument, ``owner``, getrefcount's own
        elif type(owner) is not np.ndarray or owner.base is not None or sys.getrefcount(array) > 2:
            return
        else:
            holders = 3                         # ``array.base``, ``owner``, getrefcount's own
        if sys.getrefcount(owner) > holders or not owner.flags.owndata or not owner.flags.c_contiguous:
            return
        size = owner.nbytes
        if self._wanted[size] > len(self._spare.get(size, ())):
            owner.flags.writeable = True        # a bound constant's is read-only; no one reads it now
            self._spare.setdefault(size, []).append(owner)

    def empty(self, shape, dtype) -> np.ndarray:
        """``aligned_empty(shape, dtype)``, in memory given back when some of its size was.

        Example:
            >>> SpareMemory().empty((2, 3), "int8").shape
            (2, 3)
        """
        size = aligned_bytes(shape, dtype)
        if self._wanted[size] > 0:
            self._wanted[size] -= 1
        spare = self._spare.get(size)
        if not spare:
            return aligned_empty(shape, dtype)
        return aligned_in(spare.pop().reshape(-1).view(np.uint8), shape, dtype)

