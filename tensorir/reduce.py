"""Reduction axes and the commutative reducers sum, prod, max and min, and ``max_skip_nan``:
the largest value that is not NaN (-inf when there is none), one compare-and-select per
element where ``max`` (NaN-propagating, like numpy's) needs several."""
from __future__ import annotations

from . import dtype as dt
from .dtype import DTypeError
from .expr import Const, Expr, IterVar, Reduce, as_expr


def reduce_axis(dom, name: str = "r") -> IterVar:
    """A reduction axis over ``dom = (lo, hi)``, i.e. lo <= r < hi.

    Example:
        >>> r = reduce_axis((0, 16), name="r")
        >>> r.dom
        (0, 16)
    """
    try:
        lo, hi = (int(v) for v in dom)
    except (TypeError, ValueError):
        raise ValueError(f"reduce_axis {name!r}: domain must be a pair of ints (lo, hi), got {dom!r}") from None
    if hi < lo:
        raise ValueError(f"reduce_axis {name!r}: empty domain ({lo}, {hi}) has hi < lo")
    return IterVar(name, dt.INDEX_DTYPE, 0, lo, hi - lo, "reduce")


def _identity(combiner: str, dtype: str) -> Const:
    value = {"sum": 0, "prod": 1, "max": dt.min_value(dtype), "max_skip_nan": dt.min_value(dtype),
             "min": dt.max_value(dtype)}[combiner]
    if dt.is_float(dtype):
        value = float(value)
    return Const(value, dtype)


def _reducer(combiner: str):
    def reducer(expr, axis) -> Expr:
        source = as_expr(expr)
        axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
        if not axes:
            raise ValueError(f"{combiner}(): axis must name at least one reduce axis")
        for a in axes:
            if not isinstance(a, IterVar) or a.kind != "reduce":
                raise ValueError(f"{combiner}(): axis {a} is not a reduce axis; make one with reduce_axis((lo, hi))")
        if len({a.uid for a in axes}) != len(axes):
            raise ValueError(f"{combiner}(): the same reduce axis is given twice in {list(axes)}")
        if source.dtype == "bool":
            raise DTypeError(f"{combiner}() over a bool expression; cast it to a numeric dtype first")
        return Reduce(combiner, source, axes, _identity(combiner, source.dtype), source.dtype)
    reducer.__name__ = combiner
    reducer.__doc__ = (f"The {combiner} of ``expr`` over one reduce axis or a list of them.\n\n"
                       f"    Example:\n"
                       f"        >>> from tilefuse.tensorir import placeholder, compute, reduce_axis\n"
                       f"        >>> A = placeholder((4, 8), name='A')\n"
                       f"        >>> r = reduce_axis((0, 8), name='r')\n"
                       f"        >>> B = compute((4,), lambda i: {combiner}(A[i, r], axis=r), name='B')\n")
    return reducer


sum = _reducer("sum")  # noqa: A001 - the DSL names, as in TVM
prod = _reducer("prod")
max = _reducer("max")  # noqa: A001
min = _reducer("min")  # noqa: A001
max_skip_nan = _reducer("max_skip_nan")
