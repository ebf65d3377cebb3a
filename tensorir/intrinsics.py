"""Math intrinsics, selection and casts on expressions."""
from __future__ import annotations

from . import dtype as dt
from .dtype import DTypeError
from .expr import Call, Cast, Expr, Select, as_expr

FLOAT_UNARY = ("exp", "exp_flush", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "floor", "ceil")
INTRINSICS = FLOAT_UNARY + ("abs", "pow")


def _float_arg(name: str, x) -> Expr:
    x = as_expr(x)
    if not dt.is_float(x.dtype):
        raise DTypeError(f"{name}() needs a float argument, got {x.dtype}: {x}; cast it first")
    return x


def _unary(name: str):
    def intrinsic(x) -> Expr:
        x = _float_arg(name, x)
        return Call(name, (x,), x.dtype)
    intrinsic.__name__ = name
    intrinsic.__doc__ = (f"Elementwise {name} of a float expression.\n\n"
                         f"    Example:\n"
                         f"        >>> from tilefuse.tensorir import placeholder\n"
                         f"        >>> A = placeholder((4,), name='A')\n"
                         f"        >>> {name}(A[0]).dtype\n"
                         f"        'float32'\n")
    return intrinsic


exp = _unary("exp")
exp_flush = _unary("exp_flush")     # exp, but 0 where the result would be below the smallest normal float
log = _unary("log")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
erf = _unary("erf")
floor = _unary("floor")
ceil = _unary("ceil")


def abs(x) -> Expr:  # noqa: A001 - the DSL name, as in numpy
    """Absolute value of a numeric expression.

    Example:
        >>> from tilefuse.tensorir import var
        >>> str(abs(var("n", "int32")))
        'abs(n)'
    """
    x = as_expr(x)
    if x.dtype == "bool":
        raise DTypeError(f"abs() needs a numeric argument, got bool: {x}")
    return Call("abs", (x,), x.dtype)


def pow(x, y) -> Expr:  # noqa: A001
    """``x`` raised to the power ``y`` (both float, same dtype).

    Example:
        >>> from tilefuse.tensorir import var
        >>> pow(var("x", "float32"), 2.0).dtype
        'float32'
    """
    if isinstance(x, Expr):
        y = as_expr(y, x.dtype)
    else:
        y = as_expr(y)
        x = as_expr(x, y.dtype)
    x, y = _float_arg("pow", x), _float_arg("pow", y)
    return Call("pow", (x, y), dt.unify("pow", x.dtype, y.dtype))


def if_then_else(cond, true_value, false_value) -> Expr:
    """``true_value`` where ``cond`` is true, else ``false_value``. Only the chosen side is
    evaluated, so the other may read out of bounds (as when padding).

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> A = placeholder((8,), name="A")
        >>> P = compute((10,), lambda i: if_then_else((i >= 1) & (i < 9), A[i - 1], 0.0), name="P")
    """
    cond = as_expr(cond)
    if cond.dtype != "bool":
        raise DTypeError(f"if_then_else condition must be bool, got {cond.dtype}: {cond}")
    if isinstance(true_value, Expr):
        false_value = as_expr(false_value, true_value.dtype)
    elif isinstance(false_value, Expr):
        true_value = as_expr(true_value, false_value.dtype)
    else:
        true_value, false_value = as_expr(true_value), as_expr(false_value)
        if true_value.dtype != false_value.dtype:
            false_value = as_expr(false_value.value, true_value.dtype)
    dtype = dt.unify("if_then_else", true_value.dtype, false_value.dtype)
    return Select(cond, true_value, false_value, dtype)


def cast(dtype: str, x) -> Expr:
    """Convert ``x`` to ``dtype`` (numpy's ``astype`` semantics for in-range values).

    Example:
        >>> from tilefuse.tensorir import var
        >>> cast("float32", var("i")).dtype
        'float32'
    """
    dtype = dt.check_dtype(dtype)
    x = as_expr(x)
    return x if x.dtype == dtype else Cast(x, dtype)
