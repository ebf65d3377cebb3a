"""Simplify every expression of a statement with the ranges of the loops around it, and drop
what becomes dead: loops of extent 0, branches whose condition is decided, empty sequences.
A loop of extent 1 is replaced by its body with the loop variable set to the loop's start."""
from __future__ import annotations

from .. import expr as E
from .. import stmt as S
from ..simplify import bound, simplify
from ..visit import substitute

NOOP = S.SeqStmt(())


def simplify_stmt(s: S.Stmt, ranges: dict | None = None) -> S.Stmt:
    """Simplify ``s``; ``ranges`` maps var uid -> (min, extent) of enclosing loops.

    Example:
        >>> from tensorir.expr import Buffer, var, const
        >>> A = Buffer("A", (8,), "float32"); i = var("i")
        >>> loop = S.For(i, const(0), const(8), "serial",
        ...              S.IfThenElse(i < 8, S.BufferStore(A, const(0.0), (i,))))
        >>> print(simplify_stmt(loop))
        for (i, 0, 8) {
          A[i] = 0f
        }
    """
    return _visit(s, dict(ranges or {}))


def _visit(s: S.Stmt, ranges: dict) -> S.Stmt:
    if isinstance(s, S.SeqStmt):
        return S.seq(*[c for c in (_visit(c, ranges) for c in s.stmts) if not S.is_noop(c)]) or NOOP
    if isinstance(s, S.For):
        lo, extent = simplify(s.min, ranges), simplify(s.extent, ranges)
        if isinstance(extent, E.Const) and extent.value <= 0:
            return NOOP
        if isinstance(extent, E.Const) and extent.value == 1:
            return _visit(substitute(s.body, {s.var: lo}), ranges)
        inner = dict(ranges)
        if isinstance(lo, E.Const) and isinstance(extent, E.Const):
            inner[s.var.uid] = (lo.value, extent.value)
        else:
            b_lo, _ = bound(lo, ranges)
            _, b_hi = bound(simplify(lo + extent, ranges), ranges)
            if b_lo != -float("inf") and b_hi != float("inf"):
                inner[s.var.uid] = (b_lo, b_hi - b_lo)
        body = _visit(s.body, inner)
        return NOOP if S.is_noop(body) else S.For(s.var, lo, extent, s.kind, body)
    if isinstance(s, S.BufferStore):
        return S.BufferStore(s.buffer, simplify(s.value, ranges), tuple(simplify(i, ranges) for i in s.indices))
    if isinstance(s, S.IfThenElse):
        cond = simplify(s.cond, ranges)
        if isinstance(cond, E.Const):
            chosen = s.then_body if cond.value else s.else_body
            return NOOP if chosen is None else _visit(chosen, ranges)
        then_body = _visit(s.then_body, ranges)
        else_body = None if s.else_body is None else _visit(s.else_body, ranges)
        if else_body is not None and S.is_noop(else_body):
            else_body = None
        if S.is_noop(then_body) and else_body is None:
            return NOOP
        return S.IfThenElse(cond, then_body, else_body)
    if isinstance(s, S.LetStmt):
        value = simplify(s.value, ranges)
        inner = dict(ranges)
        if not isinstance(value, E.Const):
            lo, hi = bound(value, ranges)
            if lo != -float("inf") and hi != float("inf"):
                inner[s.var.uid] = (lo, hi - lo + 1)
        body = _visit(s.body, inner)
        return NOOP if S.is_noop(body) else S.LetStmt(s.var, value, body)
    if isinstance(s, S.Allocate):
        body = _visit(s.body, ranges)
        return NOOP if S.is_noop(body) else S.Allocate(s.buffer, body)
    return s
