"""Parallel loops made explicit: each ``parallel`` loop becomes a ``ParallelFor`` that names its
closure (the variables and buffers its body reads from outside), which code generation turns
into a task function for the thread pool. A parallel loop inside another parallel loop or
inside a vectorized loop runs serially.

Example:
    >>> from tilefuse.tensorir.expr import Buffer, const, var
    >>> A = Buffer("A", (8,), "float32"); i, n = var("i"), var("n", "float32")
    >>> print(outline_parallel_loops(S.For(i, const(0), const(8), "parallel", S.BufferStore(A, n * 2.0, (i,)))))
    parallel_for (i, 0, 8) closure (n; A) {
      A[i] = n * 2f
    }
"""
from __future__ import annotations

from .. import expr as E
from .. import stmt as S
from ..walk import free_vars, statements, walk_distinct
from ..visitor import Mutator


def outline_parallel_loops(s: S.Stmt) -> S.Stmt:
    """``s`` with each outermost parallel loop as a ``ParallelFor`` and nested ones serial.

    Example:
        >>> from tilefuse.tensorir.expr import Buffer, const, var
        >>> A = Buffer("A", (4, 4), "float32"); i, j = var("i"), var("j")
        >>> nest = S.For(i, const(0), const(4), "parallel",
        ...              S.For(j, const(0), const(4), "parallel", S.BufferStore(A, const(0.0), (i, j))))
        >>> print(outline_parallel_loops(nest))
        parallel_for (i, 0, 4) closure (; A) {
          for (j, 0, 4) {
            A[i, j] = 0f
          }
        }
    """
    return _Outline().visit(s)


def closure_of(loop_var: E.Var, body: S.Stmt) -> tuple:
    """(variables, buffers) that ``body`` reads or writes from outside, in order of first use
    (a store before the value it stores);
    buffers allocated inside are not part of it.

    Example:
        >>> from tilefuse.tensorir.expr import Buffer, const, var
        >>> A = Buffer("A", (4,), "float32"); i, n = var("i"), var("n", "float32")
        >>> params, buffers = closure_of(i, S.BufferStore(A, n * 2.0, (i,)))
        >>> [p.name for p in params], [b.name for b in buffers]
        (['n'], ['A'])
    """
    params = tuple(v for v in free_vars(body) if v.uid != loop_var.uid)
    allocated = {n.buffer.uid for n in statements(body) if isinstance(n, S.Allocate)}
    buffers, seen = [], set()
    for n in walk_distinct(body):
        if isinstance(n, (E.BufferLoad, S.BufferStore, S.Prefetch)) and n.buffer.uid not in allocated and n.buffer.uid not in seen:
            seen.add(n.buffer.uid)
            buffers.append(n.buffer)
    return params, tuple(buffers)


class _Outline(Mutator):
    def generic_visit(self, node):
        return super().generic_visit(node) if isinstance(node, S.Stmt) else node

    def visit_For(self, loop: S.For) -> S.Stmt:
        nested = any(outer.kind in ("parallel", "vectorized") for outer in self.loops)
        loop = super().visit_For(loop)
        if loop.kind != "parallel":
            return loop
        if nested:
            return S.For(loop.var, loop.min, loop.extent, "serial", loop.body)
        params, buffers = closure_of(loop.var, loop.body)
        return S.ParallelFor(loop.var, loop.min, loop.extent, loop.body, params, buffers)
