"""Simplify every expression of a statement with the ranges of the loops around it, and drop
what becomes dead: loops of extent 0, branches whose condition is decided, empty sequences.
A loop of extent 1 is replaced by its body with the loop variable set to the loop's start."""
from __future__ import annotations

from .. import expr as E
from .. import stmt as S
from ..simplify import bound, simplify
from ..walk import substitute
from ..visitor import Mutator

NOOP = S.SeqStmt(())


def simplify_stmt(s: S.Stmt, ranges: dict | None = None) -> S.Stmt:
    """Simplify ``s``; ``ranges`` maps var uid -> (min, extent) of enclosing loops.

    Example:
        >>> from tilefuse.tensorir.expr import Buffer, var, const
        >>> A = Buffer("A", (8,), "float32"); i = var("i")
        >>> loop = S.For(i, const(0), const(8), "serial",
        ...              S.IfThenElse(i < 8, S.BufferStore(A, const(0.0), (i,))))
        >>> print(simplify_stmt(loop))
        for (i, 0, 8) {
          A[i] = 0f
        }
    """
    return _Simplify().visit(s, dict(ranges or {}))


class _Simplify(Mutator):
    """Statements are visited with the ranges of the loops (and lets) around them."""

    def generic_visit(self, s, ranges):
        return s

    def visit_SeqStmt(self, s, ranges):
        return S.seq(*[c for c in (self.visit(c, ranges) for c in s.stmts) if not S.is_noop(c)]) or NOOP

    def visit_For(self, s, ranges):
        lo, extent = simplify(s.min, ranges), simplify(s.extent, ranges)
        if isinstance(extent, E.Const) and extent.value <= 0:
            return NOOP
        if isinstance(extent, E.Const) and extent.value == 1:
            return self.visit(substitute(s.body, {s.var: lo}), ranges)
        inner = dict(ranges)
        if isinstance(lo, E.Const) and isinstance(extent, E.Const):
            inner[s.var.uid] = (lo.value, extent.value)
        else:
            b_lo, _ = bound(lo, ranges)
            _, b_hi = bound(simplify(lo + extent, ranges), ranges)
            if b_lo != -float("inf") and b_hi != float("inf"):
                inner[s.var.uid] = (b_lo, b_hi - b_lo)
        with self.inside(s):
            body = self.visit(s.body, inner)
        return NOOP if S.is_noop(body) else S.For(s.var, lo, extent, s.kind, body)

    def visit_BufferStore(self, s, ranges):
        return S.BufferStore(s.buffer, simplify(s.value, ranges), tuple(simplify(i, ranges) for i in s.indices))

    def visit_Prefetch(self, s, ranges):
        return S.Prefetch(s.buffer, tuple(simplify(i, ranges) for i in s.indices), s.write, s.level)

    def visit_IfThenElse(self, s, ranges):
        cond = simplify(s.cond, ranges)
        if isinstance(cond, E.Const):
            chosen = s.then_body if cond.value else s.else_body
            return NOOP if chosen is None else self.visit(chosen, ranges)
        then_body = self.visit(s.then_body, ranges)
        else_body = None if s.else_body is None else self.visit(s.else_body, ranges)
        if else_body is not None and S.is_noop(else_body):
            else_body = None
        if S.is_noop(then_body) and else_body is None:
            return NOOP
        return S.IfThenElse(cond, then_body, else_body)

    def visit_LetStmt(self, s, ranges):
        value = simplify(s.value, ranges)
        inner = dict(ranges)
        if not isinstance(value, E.Const):
            lo, hi = bound(value, ranges)
            if lo != -float("inf") and hi != float("inf"):
                inner[s.var.uid] = (lo, hi - lo + 1)
        body = self.visit(s.body, inner)
        return NOOP if S.is_noop(body) else S.LetStmt(s.var, value, body)

    def visit_Allocate(self, s, ranges):
        body = self.visit(s.body, ranges)
        return NOOP if S.is_noop(body) else S.Allocate(s.buffer, body)
