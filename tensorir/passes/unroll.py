"""Unrolling: an ``unrolled`` loop becomes its body once per iteration, each copy with the loop
variable bound to ``min + k`` by a ``LetStmt``; a select the copy's index decides is replaced
by the side it takes. A ``vectorized`` loop nested in another vectorized loop is unrolled too
(one vector dimension per kernel).

Example:
    >>> from tilefuse.tensorir.expr import Buffer, const, var
    >>> A = Buffer("A", (2,), "float32"); i = var("i")
    >>> print(unroll_loops(S.For(i, const(0), const(2), "unrolled", S.BufferStore(A, const(0.0), (i,)))))
    let i = 0 + 0
    A[i] = 0f
    let i = 0 + 1
    A[i] = 0f
"""
from __future__ import annotations

from .. import expr as E
from .. import stmt as S
from ..errors import LoweringError
from ..simplify import simplify
from ..walk import reads_var, rewrite, substitute, walk
from ..visitor import Mutator


def unroll_loops(s: S.Stmt) -> S.Stmt:
    """``s`` with every unrolled loop (and every vectorized loop inside a vectorized loop)
    replaced by its copies; LoweringError when such a loop's extent is not a constant.

    Example:
        >>> from tilefuse.tensorir.expr import Buffer, const, var
        >>> A = Buffer("A", (8,), "float32"); i = var("i")
        >>> unroll_loops(S.For(i, const(0), i + 8, "unrolled", S.BufferStore(A, const(0.0), (i,))))
        Traceback (most recent call last):
        ...
        tilefuse.tensorir.errors.LoweringError: loop i is unrolled but its extent i + 8 is not a constant
    """
    return _Unroll().visit(s)


class _Unroll(Mutator):
    def generic_visit(self, node):
        return super().generic_visit(node) if isinstance(node, S.Stmt) else node

    def visit_For(self, loop: S.For) -> S.Stmt:
        in_vector = any(outer.kind == "vectorized" for outer in self.loops)
        unroll = loop.kind == "unrolled" or (loop.kind == "vectorized" and in_vector)
        loop = super().visit_For(loop)
        if not unroll:
            return loop
        if not isinstance(loop.extent, E.Const):
            raise LoweringError(f"loop {loop.var.name} is {'unrolled' if loop.kind == 'unrolled' else 'vectorized'}"
                                f" but its extent {loop.extent} is not a constant")
        copies = range(int(loop.extent.value))
        bodies = [_fold_selects(loop.body, loop.var, loop.min, k) for k in copies] \
            if _selects_on(loop.body, loop.var) else [loop.body] * len(copies)
        return S.seq(*[S.LetStmt(loop.var, E.Add(loop.min, E.Const(k, "int64"), "int64"), body)
                       for k, body in zip(copies, bodies)]) or S.SeqStmt(())


def _fold_selects(body: S.Stmt, var: E.Var, start: E.Expr, k: int) -> S.Stmt:
    """``body`` of copy ``k`` with each select whose condition is decided by ``var = start +
    k`` replaced by the side it takes (a table of coefficients picked by the unrolled index
    leaves one entry per copy, not the whole table)."""
    if not isinstance(start, E.Const):
        return body
    value = E.Const(int(start.value) + k, var.dtype)

    def fold(node):
        if isinstance(node, E.Select) and reads_var(node.cond, var):
            decided = simplify(substitute(node.cond, {var: value}))
            if isinstance(decided, E.Const):
                return node.true_value if decided.value else node.false_value
        return node
    return rewrite(body, fold)


def _selects_on(body: S.Stmt, var: E.Var) -> bool:
    """Whether some select in ``body`` has a condition that reads ``var``.

    Example:
        >>> from tilefuse.tensorir.expr import Buffer, const, var
        >>> from tilefuse.tensorir.intrinsics import if_then_else
        >>> A = Buffer("A", (2,), "float32"); i = var("i")
        >>> _selects_on(S.BufferStore(A, if_then_else(i < 1, 1.0, 2.0), (i,)), i), \\
        ...     _selects_on(S.BufferStore(A, const(0.0), (i,)), i)
        (True, False)
    """
    return any(isinstance(n, E.Select) and reads_var(n.cond, var) for n in walk(body))
