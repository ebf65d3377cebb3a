"""Vectorization: a ``vectorized`` loop of constant extent L becomes its body once, with the
loop variable bound to the vector ``ramp(min, 1, L)``. Code generation then emits every
expression that depends on a ramp on ``<L x T>`` vectors: contiguous loads and stores where the
address moves by one element per lane, gathers and scatters elsewhere, masked accesses under a
condition that depends on the lane (so a tail needs no scalar loop). Run after
``unroll_loops``, which leaves no vectorized loop inside another.

Example:
    >>> from tilefuse.tensorir.expr import Buffer, BufferLoad, const, var
    >>> A = Buffer("A", (64,), "float32"); io, ii = var("io"), var("ii")
    >>> load = BufferLoad(A, (io * 16 + ii,), "float32")
    >>> nest = S.For(io, const(0), const(4), "serial",
    ...              S.For(ii, const(0), const(16), "vectorized", S.BufferStore(A, load * 2.0, (io * 16 + ii,))))
    >>> print(vectorize_loops(nest))
    for (io, 0, 4) {
      let ii = ramp(0, 1, 16)
      A[io * 16 + ii] = A[io * 16 + ii] * 2f
    }
"""
from __future__ import annotations

from .. import expr as E
from .. import stmt as S
from ..errors import LoweringError
from ..visitor import Mutator


def vectorize_loops(s: S.Stmt) -> S.Stmt:
    """``s`` with each vectorized loop replaced by its body under ``let var = ramp(min, 1,
    extent)``; LoweringError for a vectorized loop whose extent is not a constant or that sits
    inside another vectorized loop.

    Example:
        >>> from tilefuse.tensorir.expr import Buffer, const, var
        >>> A = Buffer("A", (8,), "float32"); i, n = var("i"), var("n")
        >>> vectorize_loops(S.For(i, const(0), n, "vectorized", S.BufferStore(A, const(0.0), (i,))))
        Traceback (most recent call last):
        ...
        tilefuse.tensorir.errors.LoweringError: loop i is vectorized but its extent n is not a constant
    """
    return _Vectorize().visit(s)


class _Vectorize(Mutator):
    def generic_visit(self, node):
        return super().generic_visit(node) if isinstance(node, S.Stmt) else node

    def visit_For(self, loop: S.For) -> S.Stmt:
        if loop.kind != "vectorized":
            return super().visit_For(loop)
        if not isinstance(loop.extent, E.Const):
            raise LoweringError(f"loop {loop.var.name} is vectorized but its extent {loop.extent} is not a constant")
        if any(outer.kind == "vectorized" for outer in self.loops) or self.in_vector:
            raise LoweringError(f"loop {loop.var.name} is vectorized inside another vectorized loop; "
                                f"unroll_loops unrolls it first")
        lanes = int(loop.extent.value)
        if lanes <= 0:
            return S.SeqStmt(())
        self.in_vector = True
        try:
            body = self.visit(loop.body)
        finally:
            self.in_vector = False
        return S.LetStmt(loop.var, E.Ramp(loop.min, 1, lanes, loop.min.dtype), body)

    in_vector = False
