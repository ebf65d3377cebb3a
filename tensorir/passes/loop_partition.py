"""Loop partitioning: split a loop where a guard inside it changes from always-true to
sometimes-false, so the main part carries no guard and only a short tail keeps it.

``for io in [0, 7): for ii in [0, 16): if (io*16 + ii < 100) body`` becomes
``for io in [0, 6): for ii ...: body`` followed by the guarded tail ``io = 6``.
Vectorized loops are left whole: their guards become masked accesses in codegen.

A select on index comparisons splits its loop the same way: a concat's ``select(c < 64,
A[c], B[c - 64])``, so each piece reads one buffer, and a padding's ``select(y >= 1 && y <= 56,
X[y - 1], 0)``, so the interior reads without a select and only the border rows keep it. A
condition that is a conjunction is decided one comparison at a time.
"""
from __future__ import annotations

import math

from .. import expr as E
from .. import stmt as S
from ..node import map_children, same
from ..simplify import Linear, bound, linear_coefficient, simplify
from ..walk import rewrite, statements, walk
from ..visitor import Mutator
from .simplify_stmt import simplify_stmt


def partition_loops(s: S.Stmt, ranges: dict | None = None) -> S.Stmt:
    """Partition every non-vectorized loop of constant bounds at the guards in its body.

    Example:
        >>> from tilefuse.tensorir.expr import Buffer, var, const
        >>> A = Buffer("A", (10,), "float32"); io, ii = var("io"), var("ii")
        >>> guard = S.IfThenElse(io * 4 + ii < 10, S.BufferStore(A, const(0.0), (io * 4 + ii,)))
        >>> nest = S.For(io, const(0), const(3), "serial", S.For(ii, const(0), const(4), "serial", guard))
        >>> print(partition_loops(nest))
        for (io, 0, 2) {
          for (ii, 0, 4) {
            A[io * 4 + ii] = 0f
          }
        }
        for (ii, 0, 2) {
          A[ii + 8] = 0f
        }
    """
    return _Partition().visit(s, dict(ranges or {}))


class _Partition(Mutator):
    """Statements are visited with the constant ranges of the loops around them."""

    def generic_visit(self, s, ranges):
        if isinstance(s, (S.LetStmt, S.Allocate)):
            return map_children(s, lambda c: self.visit(c, ranges) if isinstance(c, S.Stmt) else c)
        return s

    def visit_For(self, s, ranges):
        with self.inside(s):
            if s.kind != "vectorized" and isinstance(s.min, E.Const) and isinstance(s.extent, E.Const):
                parts = _split(s, ranges)
                if parts is not None:
                    return S.seq(*[self.visit(p, ranges) for p in parts])
                inner = dict(ranges)
                inner[s.var.uid] = (s.min.value, s.extent.value)
                return S.For(s.var, s.min, s.extent, s.kind, self.visit(s.body, inner))
            return S.For(s.var, s.min, s.extent, s.kind, self.visit(s.body, ranges))

    def visit_SeqStmt(self, s, ranges):
        return S.seq(*[self.visit(c, ranges) for c in s.stmts])

    def visit_IfThenElse(self, s, ranges):
        return S.IfThenElse(s.cond, self.visit(s.then_body, ranges),
                            None if s.else_body is None else self.visit(s.else_body, ranges))


def _inner_ranges(body: S.Stmt, ranges: dict) -> dict:
    out = dict(ranges)
    for n in statements(body):
        if isinstance(n, S.For) and isinstance(n.min, E.Const) and isinstance(n.extent, E.Const):
            out[n.var.uid] = (n.min.value, n.extent.value)
    return out


def _as_negative(cond: E.Expr):
    """Linear ``d`` with ``cond`` equivalent to ``d < 0``, for integer comparisons."""
    if not isinstance(cond, (E.LT, E.LE, E.GT, E.GE)) or not cond.a.dtype.startswith(("int", "uint")):
        return None
    a, b = Linear.of(cond.a), Linear.of(cond.b)
    if isinstance(cond, E.LT):
        d = a.add(b, -1)
    elif isinstance(cond, E.LE):
        d = a.add(b, -1).add(Linear({}, 1, a.dtype), -1)
    elif isinstance(cond, E.GT):
        d = b.add(a, -1)
    else:
        d = b.add(a, -1).add(Linear({}, 1, a.dtype), -1)
    return d.to_expr()


def _conjuncts(cond: E.Expr):
    if isinstance(cond, E.And):
        yield from _conjuncts(cond.a)
        yield from _conjuncts(cond.b)
    else:
        yield cond


def _comparisons(node) -> list:
    """The comparisons a guard without else, or a select, is decided by: the conjuncts of its
    condition."""
    if isinstance(node, S.IfThenElse) and node.else_body is None or isinstance(node, E.Select):
        return list(_conjuncts(node.cond))
    return []


def _split(loop: S.For, ranges: dict):
    lo, hi = loop.min.value, loop.min.value + loop.extent.value
    inner = _inner_ranges(loop.body, ranges)
    seen = []
    for node in walk(loop.body):
        for comparison in _comparisons(node):
            if any(same(comparison, c) for c in seen):
                continue
            seen.append(comparison)
            pieces = _split_at(loop, comparison, lo, hi, inner, ranges)
            if pieces is not None:
                return pieces
    return None


def _split_at(loop: S.For, comparison: E.Expr, lo: int, hi: int, inner: dict, ranges: dict):
    """The loop cut where ``comparison`` (an integer comparison, linear in the loop variable)
    goes from always to never holding, each piece with the comparison replaced by what it is
    there; None when it cannot be decided in any piece."""
    d = _as_negative(comparison)
    if d is None:
        return None
    lin = linear_coefficient(d, loop.var)
    if lin is None or lin[0] == 0:
        return None
    c, rest = lin
    rest_lo, rest_hi = bound(simplify(rest, inner), inner)
    if rest_hi == math.inf or rest_lo == -math.inf:
        return None
    # the comparison d = c*v + rest < 0 holds for every inner iteration when c*v + rest_hi <= -1
    # and for none when c*v + rest_lo >= 0
    if c > 0:
        t_lo, t_hi = lo, (-1 - rest_hi) // c + 1       # always true for v < t_hi
        f_lo, f_hi = -(rest_lo // c), hi                # never true for v >= f_lo
    else:
        t_lo, t_hi = -((-1 - rest_hi) // -c), hi        # always true for v >= t_lo
        f_lo, f_hi = lo, rest_lo // -c + 1              # never true for v < f_hi
    t_lo, t_hi = max(t_lo, lo), min(t_hi, hi)
    if t_hi <= t_lo and not (lo < f_hi and f_lo < hi):
        return None
    if t_lo <= lo and t_hi >= hi:
        return None
    cuts = sorted({lo, hi} | {p for p in (t_lo, t_hi, f_lo, f_hi) if lo < p < hi})
    pieces = []
    for p_lo, p_hi in zip(cuts, cuts[1:]):
        always = t_lo <= p_lo and p_hi <= t_hi
        never = f_lo <= p_lo and p_hi <= f_hi
        body = loop.body
        if always or never:
            decided = E.Const(bool(always), "bool")
            body = rewrite(body, lambda n: decided if same(n, comparison) else n)
        piece = S.For(loop.var, E.Const(p_lo, "int64"), E.Const(p_hi - p_lo, "int64"), loop.kind, body)
        piece = simplify_stmt(piece, ranges)   # a piece where a guard never holds vanishes
        if not S.is_noop(piece):
            pieces.append(piece)
    return pieces
