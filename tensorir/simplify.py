"""Arithmetic simplification of index and bound expressions.

* constant folding with the wrap-around and rounding of each dtype;
* integer sums put in a canonical linear form (``i*64 + j*16 + k + 3``), so that equal sums
  print and compare equal and ``x - x`` vanishes;
* floordiv / floormod rules: ``(q*c + r) // c = q + r // c``, terms that are multiples of ``c``
  vanish under ``% c``, ``(x // c) * c + x % c = x``, and a quotient or remainder whose
  operand provably lies in one block of ``c`` folds;
* interval bounds of integer expressions from the ranges of loop variables, used to prove
  comparisons (``i < n`` for i in [0, n)), min/max and the rules above.

``simplify(e, ranges)`` takes ``ranges`` mapping a variable (or its uid) to ``(min, extent)``.
"""
from __future__ import annotations

import math

import numpy as np

from . import dtype as dt
from . import expr as E
from .node import map_children, same
from .walk import reads_var
from .visitor import Mutator

INF = math.inf
Ranges = dict  # uid -> (min, extent)


# ---------------------------------------------------------------------------- constants

def wrap_int(value: int, dtype: str) -> int:
    """``value`` wrapped into the range of integer ``dtype`` (two's complement).

    Example:
        >>> wrap_int(130, "int8")
        -126
    """
    lo, hi = dt.min_value(dtype), dt.max_value(dtype)
    span = hi - lo + 1
    return (value - lo) % span + lo


def make_const(value, dtype: str) -> E.Const:
    """A constant of ``dtype`` holding ``value`` converted as numpy would (wrapping ints,
    rounding floats to the dtype).

    Example:
        >>> make_const(1 / 3, "float32").value == float(np.float32(1 / 3))
        True
    """
    if dtype == "bool":
        return E.Const(bool(value), dtype)
    if dt.is_float(dtype):
        return E.Const(float(np.array(value, dtype=dtype)), dtype)
    return E.Const(wrap_int(int(value), dtype), dtype)


def _fold_float(cls, a: float, b: float, dtype: str):
    x, y = np.array(a, dtype=dtype), np.array(b, dtype=dtype)
    with np.errstate(all="ignore"):
        if cls is E.Add: return x + y
        if cls is E.Sub: return x - y
        if cls is E.Mul: return x * y
        if cls is E.Div: return x / y if y != 0 else None
        if cls is E.FloorDiv: return np.floor_divide(x, y) if y != 0 else None
        if cls is E.FloorMod: return np.mod(x, y) if y != 0 else None
        if cls is E.Min: return np.minimum(x, y)
        if cls is E.Max: return np.maximum(x, y)
    return None


def fold_int(cls, a: int, b: int):
    """``a <cls> b`` for Python ints (floor division and modulo as Python's), or None when
    ``cls`` is not an arithmetic node or the divisor is 0.

    Example:
        >>> fold_int(E.FloorDiv, -7, 2), fold_int(E.Max, 3, 5), fold_int(E.FloorMod, 1, 0)
        (-4, 5, None)
    """
    if cls is E.Add: return a + b
    if cls is E.Sub: return a - b
    if cls is E.Mul: return a * b
    if cls is E.FloorDiv: return a // b if b != 0 else None
    if cls is E.FloorMod: return a % b if b != 0 else None
    if cls is E.Min: return min(a, b)
    if cls is E.Max: return max(a, b)
    return None


COMPARISONS = {E.EQ: lambda a, b: a == b, E.NE: lambda a, b: a != b, E.LT: lambda a, b: a < b,
               E.LE: lambda a, b: a <= b, E.GT: lambda a, b: a > b, E.GE: lambda a, b: a >= b}
"""Each comparison node's class -> the comparison of two Python values."""


def _is_const(e, value=None) -> bool:
    return isinstance(e, E.Const) and (value is None or e.value == value)


# ---------------------------------------------------------------------------- linear form

class Linear:
    """``sum(coeff * atom) + const`` over integer atoms, keyed structurally."""

    __slots__ = ("terms", "const", "dtype")

    def __init__(self, terms: dict, const: int, dtype: str):
        self.terms, self.const, self.dtype = terms, const, dtype  # terms: atom -> coeff

    @staticmethod
    def of(e: E.Expr) -> "Linear":
        if isinstance(e, E.Const):
            return Linear({}, int(e.value), e.dtype)
        if isinstance(e, (E.Add, E.Sub)):
            a, b = Linear.of(e.a), Linear.of(e.b)
            return a.add(b, 1 if isinstance(e, E.Add) else -1)
        if isinstance(e, E.Mul):
            if isinstance(e.b, E.Const):
                return Linear.of(e.a).scale(int(e.b.value))
            if isinstance(e.a, E.Const):
                return Linear.of(e.b).scale(int(e.a.value))
        return Linear({e: 1}, 0, e.dtype)

    def add(self, other: "Linear", sign: int = 1) -> "Linear":
        terms = dict(self.terms)
        for atom, c in other.terms.items():
            terms[atom] = terms.get(atom, 0) + sign * c
        return Linear({a: c for a, c in terms.items() if c != 0}, self.const + sign * other.const, self.dtype)

    def scale(self, k: int) -> "Linear":
        if k == 0:
            return Linear({}, 0, self.dtype)
        return Linear({a: c * k for a, c in self.terms.items()}, self.const * k, self.dtype)

    def to_expr(self) -> E.Expr:
        items = sorted(self.terms.items(), key=lambda t: (-abs(t[1]), str(t[0])))
        out = None
        for atom, c in items:
            term = atom if abs(c) == 1 else E.Mul(atom, make_const(abs(c), self.dtype), self.dtype)
            if out is None:
                out = term if c > 0 else E.Sub(make_const(0, self.dtype), term, self.dtype)
            else:
                out = E.Add(out, term, self.dtype) if c > 0 else E.Sub(out, term, self.dtype)
        if out is None:
            return make_const(self.const, self.dtype)
        if self.const > 0:
            return E.Add(out, make_const(self.const, self.dtype), self.dtype)
        if self.const < 0:
            return E.Sub(out, make_const(-self.const, self.dtype), self.dtype)
        return out


def sum_of_simplified(terms) -> E.Expr:
    """``sum(expr * coeff for expr, coeff in terms)`` over simplified int64 expressions, as
    ``simplify`` writes the sum: one linear form (like terms gathered, ``c*(x // c) + x % c``
    merged) without simplifying each expression again (``simplify`` walks every node of every
    expression anew; a flattened address of an unrolled copy has hundreds).

    Example:
        >>> from tilefuse.tensorir.expr import var
        >>> i, j = var("i"), var("j")
        >>> str(sum_of_simplified([(i // 4, 32), (i % 4, 8), (j, 1)]))
        'i * 8 + j'
    """
    flat = Linear({}, 0, dt.INDEX_DTYPE)
    for expr, coeff in terms:
        flat = flat.add(Linear.of(expr).scale(coeff))
    return _merge_div_mod(flat).to_expr()


def _merge_div_mod(lin: Linear) -> Linear:
    """Replace ``k*c*(x // c) + k*(x % c)`` by ``k*x``, and ``k*c*((x // c) % m) + k*(x % c)``
    by ``k*(x % (c*m))`` (a middle dim of a flattened index), wherever both terms are present;
    the remainder's operand may differ from ``x`` by a multiple of ``c`` (``(x + c*y) % c``, as
    the floormod rule leaves ``(64*i + j) % 28`` as ``(8*i + j) % 28``)."""
    changed = True
    while changed:
        changed = False
        for atom, k in list(lin.terms.items()):
            if not (isinstance(atom, E.FloorMod) and _is_const(atom.b) and atom.b.value > 0):
                continue
            c = atom.b.value
            for div, kd in lin.terms.items():
                if kd != k * c:
                    continue
                if isinstance(div, E.FloorDiv) and _is_const(div.b) and div.b.value == c \
                        and _congruent(div.a, atom.a, c):
                    merged = Linear.of(div.a)
                elif isinstance(div, E.FloorMod) and _is_const(div.b) and div.b.value > 0 \
                        and isinstance(div.a, E.FloorDiv) and _is_const(div.a.b) and div.a.b.value == c \
                        and _congruent(div.a.a, atom.a, c):       # c*((y // c) % m) + y % c = y % (c*m)
                    merged = Linear.of(E.FloorMod(div.a.a, make_const(c * div.b.value, atom.dtype), atom.dtype))
                else:
                    continue
                rest = Linear({a: v for a, v in lin.terms.items() if not (same(a, atom) or same(a, div))},
                              lin.const, lin.dtype)
                lin = rest.add(merged.scale(k))
                changed = True
                break
            if changed:
                break
    return lin


def _congruent(x: E.Expr, y: E.Expr, c: int) -> bool:
    """Whether integer expressions ``x`` and ``y`` differ by a multiple of ``c`` term by term."""
    if same(x, y):
        return True
    d = Linear.of(x).add(Linear.of(y), -1)
    return d.const % c == 0 and all(k % c == 0 for k in d.terms.values())


def linear_coefficient(e: E.Expr, v: E.Var):
    """``(coeff, rest)`` with ``e == coeff*v + rest`` and ``v`` not in ``rest``, or None when
    ``e`` is not affine in ``v`` with a constant coefficient.

    Example:
        >>> from tilefuse.tensorir.expr import var
        >>> i, j = var("i"), var("j")
        >>> c, rest = linear_coefficient(i * 64 + j * 2 + 1, j)
        >>> c, str(rest)
        (2, 'i * 64 + 1')
    """
    if not dt.is_int(e.dtype):
        return None
    lin = _merge_div_mod(Linear.of(e))
    coeff, rest = 0, {}
    for atom, c in lin.terms.items():
        if isinstance(atom, E.Var) and atom.uid == v.uid:
            coeff += c
        elif reads_var(atom, v):
            return None
        else:
            rest[atom] = c
    return coeff, Linear(rest, lin.const, lin.dtype).to_expr()


def _is_index(e: E.Expr) -> bool:
    """Index arithmetic: int64 built from variables and constants only. Overflow-free rules
    (floordiv/floormod rewriting, deciding comparisons and min/max from bounds) apply only to
    it; data of small or loaded integers wraps like numpy and is left alone."""
    from .walk import walk
    return e.dtype == dt.INDEX_DTYPE and not any(isinstance(n, (E.BufferLoad, E.TensorLoad)) for n in walk(e))


# ---------------------------------------------------------------------------- bounds

def _range_of(v: E.Var, ranges: Ranges):
    r = ranges.get(v.uid)
    if r is None and isinstance(v, E.IterVar) and v.dom_extent > 0:
        r = v.dom
    if r is None:
        return (dt.min_value(v.dtype), dt.max_value(v.dtype)) if dt.is_int(v.dtype) else (-INF, INF)
    lo, ext = r
    return lo, lo + ext - 1


def bound(e: E.Expr, ranges: Ranges | None = None) -> tuple:
    """Inclusive integer interval ``(lo, hi)`` containing every value of ``e`` (may be infinite).

    Example:
        >>> from tilefuse.tensorir.expr import var
        >>> i = var("i")
        >>> bound(i * 4 + 3, {i.uid: (0, 8)})
        (3, 31)
    """
    ranges = ranges or {}
    if isinstance(e, E.Const):
        v = e.value
        return (v, v) if not isinstance(v, bool) else (int(v), int(v))
    if isinstance(e, E.Var):
        return _range_of(e, ranges)
    if isinstance(e, (E.Add, E.Sub, E.Mul, E.Min, E.Max)):
        (a0, a1), (b0, b1) = bound(e.a, ranges), bound(e.b, ranges)
        if isinstance(e, E.Add):
            return a0 + b0, a1 + b1
        if isinstance(e, E.Sub):
            return a0 - b1, a1 - b0
        if isinstance(e, E.Min):
            return min(a0, b0), min(a1, b1)
        if isinstance(e, E.Max):
            return max(a0, b0), max(a1, b1)
        products = [_mul(x, y) for x in (a0, a1) for y in (b0, b1)]
        return min(products), max(products)
    if isinstance(e, (E.FloorDiv, E.FloorMod)) and _is_const(e.b) and e.b.value > 0:
        c = e.b.value
        a0, a1 = bound(e.a, ranges)
        if isinstance(e, E.FloorDiv):
            return (a0 // c if a0 != -INF else -INF), (a1 // c if a1 != INF else INF)
        if a0 != -INF and a1 != INF and a0 // c == a1 // c:
            return a0 % c, a1 % c
        return 0, c - 1
    if isinstance(e, E.Select):
        (a0, a1), (b0, b1) = bound(e.true_value, ranges), bound(e.false_value, ranges)
        return min(a0, b0), max(a1, b1)
    if isinstance(e, E.Cast) and dt.is_int(e.dtype) and dt.is_int(e.value.dtype):
        lo, hi = bound(e.value, ranges)
        if dt.min_value(e.dtype) <= lo and hi <= dt.max_value(e.dtype):
            return lo, hi
    if e.dtype == "bool":
        return 0, 1
    if dt.is_int(e.dtype):
        return dt.min_value(e.dtype), dt.max_value(e.dtype)
    return -INF, INF


def _mul(x, y):
    if x == 0 or y == 0:
        return 0
    return x * y


def prove(cond: E.Expr, ranges: Ranges | None = None):
    """True or False when ``cond`` can be decided from the ranges, else None.

    Example:
        >>> from tilefuse.tensorir.expr import var
        >>> i = var("i")
        >>> prove(i < 10, {i.uid: (0, 10)}), prove(i < 5, {i.uid: (0, 10)})
        (True, None)
    """
    c = simplify(cond, ranges)
    return bool(c.value) if isinstance(c, E.Const) else None


# ---------------------------------------------------------------------------- rules

def simplify(e: E.Expr, ranges: Ranges | None = None) -> E.Expr:
    """Simplify ``e`` given the ranges of its variables (uid or Var -> (min, extent)).

    Example:
        >>> from tilefuse.tensorir.expr import var
        >>> i, j = var("i"), var("j")
        >>> r = {i.uid: (0, 4), j.uid: (0, 16)}
        >>> str(simplify((i * 16 + j) // 16, r)), str(simplify((i * 16 + j) % 16, r))
        ('i', 'j')
    """
    if ranges:
        ranges = {(k.uid if isinstance(k, E.Var) else k): v for k, v in ranges.items()}
    return _Simplifier(ranges or {}).visit(e)


class _Simplifier(Mutator):
    """Bottom up: a node's ``visit_`` method sees its children already simplified."""

    def __init__(self, ranges: Ranges):
        super().__init__()
        self.ranges = ranges

    def visit(self, e: E.Expr) -> E.Expr:
        if isinstance(e, (E.Const, E.Var)):      # leaves: nothing to simplify
            return e
        return super().visit(map_children(e, self.visit))

    def generic_visit(self, e: E.Expr) -> E.Expr:
        return e

    # -- integer sums
    def _linear(self, e):
        lin = _merge_div_mod(Linear.of(e))
        return lin.to_expr()

    def _arith(self, e):
        a, b = e.a, e.b
        if _is_const(a) and _is_const(b):
            folded = self._fold(type(e), a, b, e.dtype)
            if folded is not None:
                return folded
        if dt.is_int(e.dtype):
            return self._linear(e)
        return self._float_identities(e)

    visit_Add = visit_Sub = visit_Mul = _arith

    def _float_identities(self, e):
        # Only identities exact in IEEE arithmetic: x*1, x/1, x+0 (x+0 turns -0 into +0, which
        # no comparison or later arithmetic can tell apart except 1/x; accepted here).
        if isinstance(e, E.Mul):
            if _is_const(e.b, 1.0): return e.a
            if _is_const(e.a, 1.0): return e.b
        if isinstance(e, (E.Add, E.Sub)) and _is_const(e.b, 0.0):
            return e.a
        if isinstance(e, E.Add) and _is_const(e.a, 0.0):
            return e.b
        if isinstance(e, E.Div) and _is_const(e.b, 1.0):
            return e.a
        return e

    def _fold(self, cls, a: E.Const, b: E.Const, dtype: str):
        if dt.is_float(dtype):
            v = _fold_float(cls, a.value, b.value, dtype)
        else:
            v = fold_int(cls, int(a.value), int(b.value))
        return None if v is None else make_const(v, dtype)

    def visit_Div(self, e):
        if _is_const(e.a) and _is_const(e.b):
            folded = self._fold(E.Div, e.a, e.b, e.dtype)
            if folded is not None:
                return folded
        return self._float_identities(e)

    def visit_FloorDiv(self, e):
        if _is_const(e.a) and _is_const(e.b):
            folded = self._fold(E.FloorDiv, e.a, e.b, e.dtype)
            if folded is not None:
                return folded
        if not (_is_const(e.b) and e.b.value > 0 and _is_index(e.a)):
            return e
        c = e.b.value
        if c == 1:
            return e.a
        if isinstance(e.a, E.FloorDiv) and _is_const(e.a.b) and e.a.b.value > 0:
            return self.visit(E.FloorDiv(e.a.a, make_const(e.a.b.value * c, e.dtype), e.dtype))
        lin = Linear.of(e.a)
        quotient = Linear({a: k // c for a, k in lin.terms.items() if k % c == 0}, lin.const // c, lin.dtype)
        rest = Linear({a: k for a, k in lin.terms.items() if k % c != 0}, lin.const % c, lin.dtype)
        rest_expr = rest.to_expr()
        lo, hi = bound(rest_expr, self.ranges)
        if lo != -INF and hi != INF and lo // c == hi // c:
            return self._linear(quotient.add(Linear({}, lo // c, lin.dtype)).to_expr())
        blocked = self._blocks(rest, c)
        if blocked is not None:        # (g*a + b) // c = a // (c/g) for b in [0, g)
            high, g = blocked
            inner = self.visit(E.FloorDiv(high.to_expr(), make_const(c // g, e.dtype), e.dtype))
            return self._linear(E.Add(quotient.to_expr(), inner, e.dtype))
        if quotient.terms or quotient.const:
            inner = E.FloorDiv(rest_expr, e.b, e.dtype)
            return self._linear(E.Add(quotient.to_expr(), inner, e.dtype))
        return E.FloorDiv(rest_expr, e.b, e.dtype) if not same(rest_expr, e.a) else e

    def visit_FloorMod(self, e):
        if _is_const(e.a) and _is_const(e.b):
            folded = self._fold(E.FloorMod, e.a, e.b, e.dtype)
            if folded is not None:
                return folded
        if not (_is_const(e.b) and e.b.value > 0 and _is_index(e.a)):
            return e
        c = e.b.value
        if c == 1:
            return make_const(0, e.dtype)
        if isinstance(e.a, E.FloorMod) and _is_const(e.a.b) and e.a.b.value > 0 and e.a.b.value % c == 0:
            return self.visit(E.FloorMod(e.a.a, e.b, e.dtype))
        lin = Linear.of(e.a)
        rest = Linear({a: k % c for a, k in lin.terms.items() if k % c != 0}, lin.const % c, lin.dtype)
        rest_expr = rest.to_expr()
        lo, hi = bound(rest_expr, self.ranges)
        if lo != -INF and hi != INF and lo // c == hi // c:
            return self._linear(E.Sub(rest_expr, make_const((lo // c) * c, e.dtype), e.dtype))
        blocked = self._blocks(rest, c)
        if blocked is not None:        # (g*a + b) % c = (a % (c/g))*g + b for b in [0, g)
            high, g = blocked
            low = rest.add(high.scale(g), -1).to_expr()
            inner = self.visit(E.FloorMod(high.to_expr(), make_const(c // g, e.dtype), e.dtype))
            return self._linear(E.Add(E.Mul(inner, make_const(g, e.dtype), e.dtype), low, e.dtype))
        return E.FloorMod(rest_expr, e.b, e.dtype) if not same(rest_expr, e.a) else e

    def _blocks(self, lin: "Linear", c: int):
        """Split ``lin`` as ``g*high + low`` with ``g`` a proper divisor of ``c`` (> 1) and
        ``low`` provably in [0, g): then ``lin // c`` and ``lin % c`` depend on ``high`` only
        through ``high // (c/g)`` and ``high % (c/g)``, as when a reshape flattens
        ``(c, h, w)`` to ``c*H*W + h*W + w`` and splits it again. (high, g), or None."""
        for g in sorted({math.gcd(k, c) for k in lin.terms.values()}, reverse=True):
            if g <= 1 or g == c:
                continue
            high = Linear({a: k // g for a, k in lin.terms.items() if k % g == 0}, 0, lin.dtype)
            low = Linear({a: k for a, k in lin.terms.items() if k % g != 0}, lin.const, lin.dtype)
            if not high.terms:
                continue
            lo, hi = bound(low.to_expr(), self.ranges)
            if lo >= 0 and hi < g:
                return high, g
        return None

    def _minmax(self, e):
        if _is_const(e.a) and _is_const(e.b):
            return self._fold(type(e), e.a, e.b, e.dtype)
        if same(e.a, e.b):
            return e.a
        if _is_index(e):
            (a0, a1), (b0, b1) = bound(e.a, self.ranges), bound(e.b, self.ranges)
            if isinstance(e, E.Min):
                if a1 <= b0: return e.a
                if b1 <= a0: return e.b
            else:
                if a0 >= b1: return e.a
                if b0 >= a1: return e.b
        return e

    visit_Min = visit_Max = _minmax

    # -- comparisons and logic
    def _compare(self, e):
        a, b = e.a, e.b
        if _is_const(a) and _is_const(b):
            return E.Const(bool(COMPARISONS[type(e)](a.value, b.value)), "bool")
        if same(a, b) and not dt.is_float(a.dtype):
            return E.Const(type(e) in (E.EQ, E.LE, E.GE), "bool")
        if _is_index(a) and _is_index(b):  # index arithmetic does not wrap; data might
            diff = Linear.of(a).add(Linear.of(b), -1)
            lo, hi = bound(_merge_div_mod(diff).to_expr(), self.ranges)
            decided = {
                E.LT: (hi < 0, lo >= 0), E.LE: (hi <= 0, lo > 0), E.GT: (lo > 0, hi <= 0),
                E.GE: (lo >= 0, hi < 0), E.EQ: (lo == hi == 0, lo > 0 or hi < 0),
                E.NE: (lo > 0 or hi < 0, lo == hi == 0),
            }[type(e)]
            if decided[0]:
                return E.Const(True, "bool")
            if decided[1]:
                return E.Const(False, "bool")
            # move a constant offset to the constant side: i + 96 < 100  ->  i < 4
            for side, other in ((a, b), (b, a)):
                if isinstance(other, E.Const):
                    lin = Linear.of(side)
                    if lin.const and lin.terms:
                        moved = Linear(lin.terms, 0, lin.dtype).to_expr()
                        shifted = make_const(int(other.value) - lin.const, other.dtype)
                        return type(e)(*((moved, shifted) if side is a else (shifted, moved)), "bool")
        return e

    visit_EQ = visit_NE = visit_LT = visit_LE = visit_GT = visit_GE = _compare

    def visit_And(self, e):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if _is_const(x):
                return y if x.value else x
        return e

    def visit_Or(self, e):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if _is_const(x):
                return x if x.value else y
        return e

    def visit_Not(self, e):
        if _is_const(e.a):
            return E.Const(not e.a.value, "bool")
        if isinstance(e.a, E.Not):
            return e.a.a
        return e

    def visit_Select(self, e):
        if _is_const(e.cond):
            return e.true_value if e.cond.value else e.false_value
        if same(e.true_value, e.false_value):
            return e.true_value
        return e

    def visit_Cast(self, e):
        if _is_const(e.value):
            v = e.value.value
            if dt.is_float(e.value.dtype) and not dt.is_float(e.dtype) and e.dtype != "bool":
                if not math.isfinite(v):
                    return e
                v = math.trunc(v)
            return make_const(v, e.dtype)
        if e.value.dtype == e.dtype:
            return e.value
        return e
