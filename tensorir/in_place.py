"""Which outputs of a kernel may be written over one of its inputs (the same array passed twice).

An output ``O`` may take an input ``P``'s memory when every element of ``O`` is computed from
``P``'s element at the same index and nothing else reads ``P``: a residual added in a
convolution's epilogue, either input of an elementwise add. A graph whose planned tensor ``P``
is last read by such a kernel then writes ``O`` into ``P``'s buffer: one buffer fewer, and the
output's cache lines are the ones the input's read just brought in (no separate write stream).

The conditions, checked on the lowered loop IR (before vectorizing, so an index is one
expression):

* ``P`` and ``O`` have the same shape and dtype, ``P`` is never stored, and ``O`` is stored only
  by stores that do not read ``O`` (so no store reads an element of ``O`` another one wrote);
* every store to ``O`` reads ``P`` exactly at the index it stores, and nothing else reads ``P``:
  an element of ``P`` is read only just before the store that replaces it.

Lowering stores each element of a root stage once (splits that do not divide guard their
store; only windows computed at a tile are shifted, and those are not outputs), so the read
always comes first.

Example:
    >>> from tilefuse.tensorir import compute, placeholder
    >>> from tilefuse.schedule import create_schedule, lower
    >>> A, B = placeholder((8,), name="A"), placeholder((8,), name="B")
    >>> C = compute((8,), lambda i: A[i] + B[i] * 2.0, name="C")
    >>> in_place_inputs(lower(create_schedule(C), [A, B, C]))
    {2: (0, 1)}
"""
from __future__ import annotations

from .expr import Buffer, BufferLoad
from .node import same
from .stmt import BufferStore, PrimFunc
from .walk import statements, walk


def in_place_inputs(func: PrimFunc) -> dict[int, tuple[int, ...]]:
    """For each output parameter of ``func`` (by position) that may be the very array of some
    input parameters, those inputs' positions (see the module's doc); outputs with none are
    absent.

    Example:
        >>> from tilefuse.tensorir import compute, placeholder, reduce_axis, sum
        >>> from tilefuse.schedule import create_schedule, lower
        >>> X, W, R = placeholder((4, 8), name="X"), placeholder((8, 4), name="W"), placeholder((4, 4), name="R")
        >>> r = reduce_axis((0, 8), name="r")
        >>> M = compute((4, 4), lambda i, j: sum(X[i, r] * W[r, j], axis=r), name="M")
        >>> O = compute((4, 4), lambda i, j: M[i, j] + R[i, j], name="O")      # a residual add
        >>> in_place_inputs(lower(create_schedule(O), [X, W, R, O]))           # O over the residual R
        {3: (2,)}
        >>> T = compute((4, 4), lambda i, j: R[j, i], name="T")                # reads R elsewhere than it stores
        >>> in_place_inputs(lower(create_schedule(T), [R, T]))
        {}
    """
    stores = [s for s in statements(func.body) if isinstance(s, BufferStore)]
    written = {s.buffer.uid for s in stores}
    loads = {}              # a buffer's uid -> how many loads of it the function holds
    for node in walk(func.body):
        if isinstance(node, BufferLoad):
            loads[node.buffer.uid] = loads.get(node.buffer.uid, 0) + 1
    buffers = [(k, p) for k, p in enumerate(func.params) if isinstance(p, Buffer)]
    found = {}
    for k, out in buffers:
        own = [s for s in stores if s.buffer.uid == out.uid]
        reads = [[n for n in walk(s.value) if isinstance(n, BufferLoad)] for s in own]
        if not own or any(n.buffer.uid == out.uid for r in reads for n in r):
            continue
        shares = tuple(i for i, p in buffers
                       if p.uid not in written and tuple(p.shape) == tuple(out.shape) and p.dtype == out.dtype
                       and _read_only_where_stored(p, own, reads, loads.get(p.uid, 0)))
        if shares:
            found[k] = shares
    return found


def _read_only_where_stored(p: Buffer, stores: list, reads: list, total: int) -> bool:
    """Whether each of ``stores`` reads ``p`` at its own index only, and these are all of the
    function's ``total`` loads of ``p``."""
    seen = 0
    for store, loaded in zip(stores, reads):
        mine = [n for n in loaded if n.buffer.uid == p.uid]
        if not mine or not all(same(n.indices, store.indices) for n in mine):
            return False
        seen += len(mine)
    return seen == total
