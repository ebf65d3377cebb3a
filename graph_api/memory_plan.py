"""The memory plan of a compiled graph: its intermediate tensors placed in a few blocks that are
allocated once and reused by liveness, so a run allocates (and page-faults) nothing but its
outputs.

A tensor is planned when a compiled step writes it and it is no graph output (the caller keeps
those) and no constant result kept between runs. A concat computed in place is one planned
tensor whose slices (its producers' outputs, and concats nested in it) are views of it, live
from its first producer to its last reader. Blocks are handed out in run order: a tensor takes
the smallest free block that holds it, else the largest free block grown to hold it, else a
new block; a tensor's block is free again after the last step that reads it (or any view of it).

Example:
    >>> f32 = "float32"        # three steps: 1 is read by the second, 2 by the third: 3 reuses 1's block
    >>> plan = plan_memory([([], [(1, (4,), f32)]), ([1], [(2, (4,), f32)]), ([2], [(3, (4,), f32)])],
    ...                    views={}, keep=set())
    >>> plan.block_sizes, {tid: block for tid, (block, _, _) in plan.tensors.items()}
    ((64, 64), {1: 0, 2: 1, 3: 0})
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tilefuse.tensorir.runtime.aligned import aligned_empty


@dataclass(frozen=True)
class MemoryPlan:
    """Block sizes in bytes, and for each planned tensor id its (block, shape, dtype).

    Example:
        >>> MemoryPlan((64,), {7: (0, (4, 4), "float32")}).arena()[7].shape
        (4, 4)
    """
    block_sizes: tuple
    tensors: dict

    @property
    def nbytes(self) -> int:
        """The bytes one arena holds.

        Example:
            >>> MemoryPlan((64, 32), {}).nbytes
            96
        """
        return sum(self.block_sizes)

    def arena(self) -> dict:
        """The planned tensors as arrays over freshly allocated blocks (one set per concurrent
        run), by tensor id.

        Example:
            >>> MemoryPlan((16,), {1: (0, (2, 2), "float32")}).arena()[1].dtype
            dtype('float32')
        """
        blocks = [aligned_empty(size, np.uint8) for size in self.block_sizes]
        arrays = {}
        for tid, (block, shape, dtype) in self.tensors.items():
            dtype = np.dtype(dtype)
            count = math.prod(shape)
            arrays[tid] = blocks[block][:count * dtype.itemsize].view(dtype).reshape(shape)
        return arrays


def plan_memory(steps, views: dict, keep: set, wholes: dict | None = None, in_place: dict | None = None) -> MemoryPlan:
    """The plan of ``steps`` run in order, each (ids of the tensors it reads, (id, shape, dtype)
    of the tensors it writes that may be planned); ``views`` maps a tensor id to the id of the
    tensor it is a view of (a concat's slice to the concat), and ``wholes`` gives (shape, dtype)
    of the tensors views are of that no step writes whole (concats computed in place); ``keep``:
    ids never planned (graph outputs). ``in_place`` maps (step index, id written) to the ids of
    tensors the step reads that its kernel may write that output over (``Kernel.in_place``):
    the output takes the first one's block when that one is planned, has the output's shape
    and dtype, is no view and is read for the last time there.

    Example:
        >>> f32 = "float32"        # 2 may be computed over 1, 1's last reader: they share a block
        >>> plan = plan_memory([([], [(1, (4,), f32)]), ([1], [(2, (4,), f32)])], views={}, keep=set(),
        ...                    in_place={(1, 2): (1,)})
        >>> plan.block_sizes, {tid: block for tid, (block, _, _) in plan.tensors.items()}
        ((64,), {1: 0, 2: 0})
    """
    def root(tid):
        while tid in views:
            tid = views[tid]
        return tid

    specs = {tid: (tuple(shape), np.dtype(dtype).str) for tid, (shape, dtype) in (wholes or {}).items()}
    first, last = {}, {}
    for k, (reads, writes) in enumerate(steps):
        for tid, shape, dtype in writes:
            r = root(tid)
            first.setdefault(r, k)
            if r == tid:
                specs[r] = (tuple(shape), np.dtype(dtype).str)
        for tid in reads:
            last[root(tid)] = k
    planned = [r for r in first if r in specs and r not in keep]
    ending = {}
    for r in planned:
        ending.setdefault(max(last.get(r, first[r]), first[r]), []).append(r)
    sizes, free, tensors = [], [], {}
    for k in range(len(steps)):
        for r in (r for r in planned if first[r] == k):
            shape, dtype = specs[r]
            over = next((t for t in (in_place or {}).get((k, r), ()) if t in tensors and t not in views
                         and last.get(t) == k and specs[t] == specs[r]), None)
            if over is not None:            # computed over a tensor read for the last time: its block
                tensors[r] = (tensors[over][0], shape, dtype)
                ending[k].remove(over)      # now the block of r, freed after r's last reader
                continue
            need = max(math.prod(shape) * np.dtype(dtype).itemsize, 1)
            fitting = [b for b in free if sizes[b] >= need]
            if fitting:
                block = min(fitting, key=lambda b: sizes[b])
            elif free:
                block = max(free, key=lambda b: sizes[b])
                sizes[block] = need
            else:
                block = len(sizes)
                sizes.append(need)
            if block in free:
                free.remove(block)
            tensors[r] = (block, shape, dtype)
        free += [tensors[r][0] for r in ending.get(k, ())]
    return MemoryPlan(tuple(-(-s // 64) * 64 for s in sizes), tensors)
