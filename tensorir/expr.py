"""Expression nodes of the algorithm and loop IRs, and Python operator overloading on them.

``A[i, r] * B[r, j] + 1.0`` builds ``Add(Mul(TensorLoad(A, (i, r)), TensorLoad(B, (r, j))),
Const(1.0))``. ``==`` and ``!=`` build comparison nodes too; their truth value (used by dicts
and ``in``) is structural equality, as in TVM.
"""
from __future__ import annotations

import itertools
import numbers
from dataclasses import dataclass

import numpy as np

from . import dtype as dt
from .dtype import DTypeError
from .node import Node, same

_uids = itertools.count(1)


def next_uid() -> int:
    """A process-unique id for a new variable, buffer or tensor.

    Example:
        >>> next_uid() != next_uid()
        True
    """
    return next(_uids)


def reserve_uids_through(top: int) -> None:
    """Make every later ``next_uid()`` larger than ``top``: IR unpickled from another process
    keeps its ids, and ids made here afterwards must not collide with them.

    Example:
        >>> reserve_uids_through(10**6); next_uid() > 10**6
        True
    """
    global _uids
    current = next(_uids)
    _uids = itertools.count(max(current, top + 1))


class Expr(Node):
    """Base class of expressions. Every expression has a ``dtype``."""

    __slots__ = ()

    def __add__(self, other): return _binary(Add, "+", self, other)
    def __radd__(self, other): return _binary(Add, "+", other, self)
    def __sub__(self, other): return _binary(Sub, "-", self, other)
    def __rsub__(self, other): return _binary(Sub, "-", other, self)
    def __mul__(self, other): return _binary(Mul, "*", self, other)
    def __rmul__(self, other): return _binary(Mul, "*", other, self)
    def __truediv__(self, other): return _binary(Div, "/", self, other)
    def __rtruediv__(self, other): return _binary(Div, "/", other, self)
    def __floordiv__(self, other): return _binary(FloorDiv, "//", self, other)
    def __rfloordiv__(self, other): return _binary(FloorDiv, "//", other, self)
    def __mod__(self, other): return _binary(FloorMod, "%", self, other)
    def __rmod__(self, other): return _binary(FloorMod, "%", other, self)
    def __neg__(self): return _binary(Sub, "-", _zero_like(self), self)
    def __pos__(self): return self
    def __lt__(self, other): return _binary(LT, "<", self, other)
    def __le__(self, other): return _binary(LE, "<=", self, other)
    def __gt__(self, other): return _binary(GT, ">", self, other)
    def __ge__(self, other): return _binary(GE, ">=", self, other)
    def __eq__(self, other): return _binary(EQ, "==", self, other)
    def __ne__(self, other): return _binary(NE, "!=", self, other)
    def __and__(self, other): return _logical(And, "&", self, other)
    def __rand__(self, other): return _logical(And, "&", other, self)
    def __or__(self, other): return _logical(Or, "|", self, other)
    def __ror__(self, other): return _logical(Or, "|", other, self)

    def __invert__(self):
        if self.dtype != "bool":
            raise DTypeError(f"'~' needs a bool expression, got {self.dtype}: {self}")
        return Not(self)

    __hash__ = Node.__hash__

    def __bool__(self):
        raise TypeError(f"the symbolic expression {self} has no Python truth value; "
                        f"use if_then_else(cond, a, b) to choose between values")

    def __str__(self):
        from .printer import expr_str
        return expr_str(self)

    __repr__ = __str__


def _zero_like(e: Expr) -> "Const":
    return Const(0.0 if dt.is_float(e.dtype) else 0, e.dtype)


# ---------------------------------------------------------------------------- leaves

@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Const(Expr):
    """A constant of a given dtype."""
    value: object
    dtype: str


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Var(Expr):
    """A scalar variable: a loop index, a let-bound value or a scalar kernel parameter."""
    name: str
    dtype: str = dt.INDEX_DTYPE
    uid: int = 0

    def __post_init__(self):
        if self.uid == 0:
            object.__setattr__(self, "uid", next_uid())


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class IterVar(Var):
    """An axis of a compute: a variable with a domain [dom_min, dom_min + dom_extent).

    ``kind`` is "data" for output axes and "reduce" for reduction axes.
    """
    dom_min: int = 0
    dom_extent: int = 0
    kind: str = "data"

    @property
    def dom(self) -> tuple[int, int]:
        """(min, extent) of the axis."""
        return self.dom_min, self.dom_extent


# ---------------------------------------------------------------------------- arithmetic

@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BinaryOp(Expr):
    a: Expr
    b: Expr
    dtype: str


class Add(BinaryOp): __slots__ = ()
class Sub(BinaryOp): __slots__ = ()
class Mul(BinaryOp): __slots__ = ()
class Div(BinaryOp):
    """True division of floats."""
    __slots__ = ()
class FloorDiv(BinaryOp):
    """Division rounding toward minus infinity (Python's ``//``)."""
    __slots__ = ()
class FloorMod(BinaryOp):
    """Remainder with the sign of the divisor (Python's ``%``)."""
    __slots__ = ()
class Min(BinaryOp): __slots__ = ()
class Max(BinaryOp): __slots__ = ()


class CmpOp(BinaryOp):
    __slots__ = ()


class EQ(CmpOp):
    __slots__ = ()

    def __bool__(self):
        return same(self.a, self.b)


class NE(CmpOp):
    __slots__ = ()

    def __bool__(self):
        return not same(self.a, self.b)


class LT(CmpOp): __slots__ = ()
class LE(CmpOp): __slots__ = ()
class GT(CmpOp): __slots__ = ()
class GE(CmpOp): __slots__ = ()
class And(BinaryOp): __slots__ = ()
class Or(BinaryOp): __slots__ = ()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Not(Expr):
    a: Expr
    dtype: str = "bool"


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Select(Expr):
    """``true_value`` where ``cond`` holds, else ``false_value``; only the chosen side is read."""
    cond: Expr
    true_value: Expr
    false_value: Expr
    dtype: str


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Cast(Expr):
    value: Expr
    dtype: str


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Ramp(Expr):
    """The vector ``<base, base + stride, ..., base + (lanes - 1) * stride>``: the value of a
    vectorized loop's variable (``passes.vectorize_loops``)."""
    base: Expr
    stride: int
    lanes: int
    dtype: str


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Call(Expr):
    """A math intrinsic such as ``exp`` applied to ``args``."""
    name: str
    args: tuple
    dtype: str


# ---------------------------------------------------------------------------- memory

@dataclass(frozen=True, slots=True, eq=False, repr=False)
class TensorLoad(Expr):
    """A read of a tensor element in the algorithm: ``A[i, j]``."""
    tensor: object
    indices: tuple
    dtype: str


@dataclass(frozen=True, slots=True)
class Buffer:
    """A named, typed, row-major region of memory in the loop IR.

    ``scope`` is "global" (a kernel argument or a heap allocation) or "local" (stack).
    """
    name: str
    shape: tuple
    dtype: str
    scope: str = "global"
    uid: int = 0

    def __post_init__(self):
        if self.uid == 0:
            object.__setattr__(self, "uid", next_uid())

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    def strides(self) -> tuple:
        """Row-major strides in elements.

        Example:
            >>> Buffer("A", (2, 3, 4), "float32").strides()
            (12, 4, 1)
        """
        out, acc = [], 1
        for n in reversed(self.shape):
            out.append(acc)
            acc *= n
        return tuple(reversed(out))

    def __str__(self):
        return self.name


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BufferLoad(Expr):
    """A read of a buffer element in the loop IR."""
    buffer: Buffer
    indices: tuple
    dtype: str


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Reduce(Expr):
    """A commutative reduction (``combiner`` in sum, prod, max, min, max_skip_nan) of ``source``
    over ``axis``."""
    combiner: str
    source: Expr
    axis: tuple
    identity: Expr
    dtype: str
    binders = ("axis",)


# ---------------------------------------------------------------------------- construction

def as_expr(value, like: str | None = None) -> Expr:
    """Turn a Python or numpy number into a Const, adapting to dtype ``like`` when given.

    Example:
        >>> as_expr(2, "float32").dtype
        'float32'
    """
    if isinstance(value, Expr):
        return value
    if isinstance(value, (bool, np.bool_)):
        if like is not None and like != "bool":
            raise DTypeError(f"a bool constant met an expression of dtype {like}")
        return Const(bool(value), "bool")
    if isinstance(value, np.generic):
        name = dt.check_dtype(value.dtype)
        return Const(value.item(), name)
    if isinstance(value, numbers.Integral):
        target = like if like is not None else dt.INDEX_DTYPE
        if target == "bool":
            raise DTypeError(f"an int constant {value} met a bool expression")
        return Const(float(value) if dt.is_float(target) else int(value), target)
    if isinstance(value, numbers.Real):
        target = like if like is not None else "float32"
        if not dt.is_float(target):
            raise DTypeError(f"a float constant {value} met an expression of dtype {target}; "
                             f"cast the expression to a float dtype first")
        return Const(float(value), target)
    if hasattr(value, "op") and hasattr(value, "shape"):
        raise TypeError(f"tensor {getattr(value, 'name', value)} used as a value; "
                        f"index it to read an element, e.g. {getattr(value, 'name', 'A')}[i]")
    raise TypeError(f"cannot use {value!r} of type {type(value).__name__} in a tensor expression")


def _binary(cls, op: str, a, b) -> Expr:
    if not isinstance(a, Expr):
        a = as_expr(a, b.dtype)
    elif not isinstance(b, Expr):
        b = as_expr(b, a.dtype)
    dtype = dt.unify(op, a.dtype, b.dtype)
    if cls is Div and not dt.is_float(dtype):
        raise DTypeError(f"'/' is true division and needs float operands, got {dtype}; "
                         f"use '//' for integer division")
    if dtype == "bool" and not issubclass(cls, (EQ, NE)):
        raise DTypeError(f"operator {op!r} is not defined on bool operands; use &, |, ~")
    if issubclass(cls, CmpOp):
        return cls(a, b, "bool")
    return cls(a, b, dtype)


def _logical(cls, op: str, a, b) -> Expr:
    a, b = as_expr(a, "bool"), as_expr(b, "bool")
    for side in (a, b):
        if side.dtype != "bool":
            raise DTypeError(f"operator {op!r} needs bool operands, got {side.dtype}: {side}")
    return cls(a, b, "bool")


def const(value, dtype: str | None = None) -> Const:
    """A constant; ``dtype`` defaults to int64 for ints, float32 for floats.

    Example:
        >>> const(1.5).dtype, const(3, "int8").dtype
        ('float32', 'int8')
    """
    if dtype is not None:
        dtype = dt.check_dtype(dtype)
        if dt.is_float(dtype):
            return Const(float(value), dtype)
        if dtype == "bool":
            return Const(bool(value), dtype)
        if isinstance(value, float) and not float(value).is_integer():
            raise DTypeError(f"constant {value} is not an integer but dtype {dtype} was asked for")
        info = np.iinfo(dtype)
        if not info.min <= int(value) <= info.max:
            raise DTypeError(f"constant {value} does not fit in {dtype}")
        return Const(int(value), dtype)
    return as_expr(value)


def var(name: str, dtype: str = "int64") -> Var:
    """A named scalar variable, e.g. a scalar kernel parameter.

    Example:
        >>> alpha = var("alpha", "float32")
        >>> str(alpha * 2.0)
        'alpha * 2f'
    """
    return Var(name, dt.check_dtype(dtype))
