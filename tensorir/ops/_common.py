"""Helpers shared by the op library: attribute checks, broadcasting, typed constants."""
from __future__ import annotations

import numbers

from .. import dtype as dt
from ..expr import Const, Expr, Max, Min, as_expr
from ..tensor import Tensor

FORMATS = ("NCX", "NXC")


def check_tensor(op: str, name: str, x) -> Tensor:
    """``x`` if it is a Tensor, else a TypeError naming the op and the argument."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {name} must be a tensorir Tensor, got {type(x).__name__}")
    return x


def check_float(op: str, name: str, x: Tensor) -> Tensor:
    check_tensor(op, name, x)
    if not dt.is_float(x.dtype):
        raise TypeError(f"{op}: {name} must have a float dtype (float32, float64), got {x.dtype}; "
                        f"TypeCast it first")
    return x


def check_same_dtype(op: str, **tensors: Tensor) -> str:
    names = list(tensors)
    first = tensors[names[0]].dtype
    for n in names[1:]:
        if tensors[n].dtype != first:
            raise TypeError(f"{op}: {names[0]} has dtype {first} but {n} has dtype {tensors[n].dtype}; "
                            f"insert a TypeCast")
    return first


def check_choice(op: str, attr: str, value, choices) -> str:
    if value not in choices:
        raise ValueError(f"{op}: attribute {attr}={value!r} is not one of {', '.join(map(repr, choices))}")
    return value


def check_number(op: str, attr: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{op}: attribute {attr} must be a number, got {value!r}")
    return float(value)


def check_int(op: str, attr: str, value, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{op}: attribute {attr} must be an int, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{op}: attribute {attr} must be >= {minimum}, got {value}")
    return int(value)


def check_ints(op: str, attr: str, values, length: int | None = None, minimum: int | None = None) -> list[int]:
    """A list of ints of the given length, each >= minimum."""
    try:
        values = list(values)
    except TypeError:
        raise ValueError(f"{op}: attribute {attr} must be a list of ints, got {values!r}") from None
    if any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in values):
        raise ValueError(f"{op}: attribute {attr} must be a list of ints, got {values!r}")
    if length is not None and len(values) != length:
        raise ValueError(f"{op}: attribute {attr}={values} has {len(values)} value(s) but the op has "
                         f"{length} spatial dimension(s)")
    if minimum is not None and any(v < minimum for v in values):
        kind = "positive" if minimum == 1 else f">= {minimum}"
        raise ValueError(f"{op}: attribute {attr}={values} must contain {kind} values")
    return [int(v) for v in values]


def normalize_axis(op: str, attr: str, axis, rank: int) -> int:
    """``axis`` in [-rank, rank) as a non-negative axis."""
    axis = check_int(op, attr, axis)
    if not -rank <= axis < rank:
        raise ValueError(f"{op}: attribute {attr}={axis} is out of range [{-rank}, {rank - 1}] "
                         f"for a tensor of rank {rank}")
    return axis % rank


def fconst(value, dtype: str) -> Const:
    """A constant of ``dtype`` (the dtype of the tensor it meets)."""
    return as_expr(float(value) if dt.is_float(dtype) else value, dtype)


def emax(a: Expr, b) -> Expr:
    """Elementwise maximum of two expressions (NaN-propagating for floats, like numpy)."""
    b = as_expr(b, a.dtype)
    return Max(a, b, dt.unify("maximum", a.dtype, b.dtype))


def emin(a: Expr, b) -> Expr:
    """Elementwise minimum of two expressions (NaN-propagating for floats, like numpy)."""
    b = as_expr(b, a.dtype)
    return Min(a, b, dt.unify("minimum", a.dtype, b.dtype))


def broadcast_shapes(op: str, *shapes) -> tuple[int, ...]:
    """The numpy broadcast of ``shapes``; ValueError naming ``op`` if they do not broadcast."""
    rank = max(len(s) for s in shapes)
    out = []
    for d in range(rank):
        sizes = {s[d - rank + len(s)] for s in shapes if d - rank + len(s) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            raise ValueError(f"{op}: shapes {', '.join(str(tuple(s)) for s in shapes)} do not broadcast "
                             f"(numpy rules)")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_index(x, out_shape, idx):
    """Indices into ``x`` (a Tensor or a shape) for output indices ``idx``, numpy-broadcasting
    ``x`` to ``out_shape``: dimensions aligned to the right, a dimension of 1 reads index 0."""
    shape = x.shape if isinstance(x, Tensor) else tuple(x)
    offset = len(out_shape) - len(shape)
    return tuple(0 if n == 1 and out_shape[offset + d] != 1 else idx[offset + d]
                 for d, n in enumerate(shape))


def broadcasts_to(shape, target) -> bool:
    """True if ``shape`` broadcasts one way (numpy, aligned right) to ``target``."""
    return len(shape) <= len(target) and all(
        n in (1, target[len(target) - len(shape) + d]) for d, n in enumerate(shape))


def channel_axis(data_format: str, rank: int) -> int:
    return 1 if data_format == "NCX" else rank - 1


def spatial_axes(data_format: str, rank: int) -> list[int]:
    return list(range(2, rank)) if data_format == "NCX" else list(range(1, rank - 1))


def lookup(index: Expr, values, dtype: str) -> Expr:
    """``values[index]`` for a Python list of constants and an index expression in
    ``[0, len(values))``: a constant when all values are equal, else a balanced tree of
    selects (``log2(len)`` comparisons deep).

    Example:
        >>> from tilefuse.tensorir import var
        >>> str(lookup(var("c"), [0.5, 0.5], "float32"))
        '0.5f'
    """
    from ..intrinsics import if_then_else
    values = list(values)
    if not values:
        raise ValueError("lookup: needs at least one value")

    def tree(lo: int, hi: int) -> Expr:
        if len(set(values[lo:hi])) == 1:
            return fconst(values[lo], dtype)
        mid = (lo + hi) // 2
        return if_then_else(index < mid, tree(lo, mid), tree(mid, hi))
    return tree(0, len(values))
