"""The loop pipeline: the passes a lowered loop nest goes through before code generation, in
order. Each is a plain function from statement to statement that never changes its input.

1. ``simplify_stmt``: fold constants, drop dead branches and empty loops;
2. ``partition_loops``: split loops at their guards, so the main body has none and the
   guards stay in the tails;
3. ``simplify_stmt`` again: the partitioned pieces simplify further.

``lower`` returns the loop nest after these (what the tuner's features and the printer see).
Code generation first runs ``CODEGEN_PASSES``, which turn loop kinds into explicit structure:

1. ``unroll_loops``: unrolled loops (and vectorized loops inside vectorized ones) become
   their copies, each with the loop variable bound by a let;
2. ``outline_parallel_loops``: each outermost parallel loop becomes a ``ParallelFor`` naming
   its closure; nested parallel loops run serially;
3. ``vectorize_loops``: each vectorized loop becomes its body under ``let var = ramp(min, 1,
   lanes)``; code generation emits what depends on a ramp on vectors.

Code generation only translates: it refuses unrolled, parallel and vectorized loops.

Example:
    >>> from tilefuse.tensorir.expr import Buffer, const, var
    >>> from tilefuse.tensorir.stmt import BufferStore, For
    >>> A = Buffer("A", (4,), "float32"); i = var("i")
    >>> loop = For(i, const(0), const(4), "serial", BufferStore(A, const(1.0) + const(1.0), (i,)))
    >>> [p.__name__ for p in LOWERING_PASSES]
    ['simplify_stmt', 'partition_loops', 'simplify_stmt']
    >>> print(run_passes(loop))
    for (i, 0, 4) {
      A[i] = 2f
    }
"""
from __future__ import annotations

from . import stmt as S
from .passes import outline_parallel_loops, partition_loops, simplify_stmt, unroll_loops, vectorize_loops

LOWERING_PASSES = (simplify_stmt, partition_loops, simplify_stmt)
"""The passes between lowering and code generation, in order."""

CODEGEN_PASSES = (unroll_loops, outline_parallel_loops, vectorize_loops)
"""The passes code generation runs first, in order: loop kinds made explicit."""


def run_passes(body: S.Stmt, passes=LOWERING_PASSES) -> S.Stmt:
    """``body`` after each of ``passes`` in order.

    Example:
        >>> from tilefuse.tensorir.stmt import SeqStmt
        >>> run_passes(SeqStmt(()), passes=()) == SeqStmt(())
        True
    """
    for p in passes:
        body = p(body)
    return body
