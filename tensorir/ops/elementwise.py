"""Elementwise ops of the oneDNN graph op set: unary activations and math, binary arithmetic
with numpy broadcasting, Select, BiasAdd, PReLU and TypeCast.

Every function takes tensorir Tensors and oneDNN's attributes (same names, same defaults)
and returns one new compute (tag = the op kind, name = ``name`` or the op kind).

Example:
    >>> from tilefuse.tensorir import placeholder
    >>> x = placeholder((7, 13), name="x"); b = placeholder((13,), name="b")
    >>> y = gelu(add(x, b))
    >>> y.shape, y.op.tag, [t.name for t in y.op.input_tensors]
    ((7, 13), 'gelu', ['add'])
"""
from __future__ import annotations

import math

from .. import dtype as dt
from .. import intrinsics as ti
from ..tensor import Tensor, compute
from ._common import (FORMATS, broadcast_index, broadcast_shapes, broadcasts_to, channel_axis, check_choice,
                      check_float, check_number, check_same_dtype, check_tensor, emax, emin, fconst)

__all__ = [
    "abs", "erf", "exp", "log", "neg", "sqrt", "square", "reciprocal", "relu", "leaky_relu", "elu", "gelu", "sigmoid",
    "tanh", "hardsigmoid", "hardswish", "mish", "softplus", "clamp", "round", "pow",
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "squared_difference", "greater_equal",
    "greater", "equal", "logical_and", "logical_or", "logical_xor", "logical_not", "is_nan",
    "select", "bias_add", "prelu", "typecast",
]


# ---------------------------------------------------------------------------- unary

def _unary(op: str, tag: str, x: Tensor, fn, name, float_only: bool = True) -> Tensor:
    (check_float if float_only else check_tensor)(op, "src", x)
    return compute(x.shape, lambda *i: fn(x[i]), name=name or tag, tag=tag)


def abs(x: Tensor, name: str | None = None) -> Tensor:  # noqa: A001 - oneDNN's op name
    """Abs: ``|x|``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> abs(placeholder((3,), "int32")).dtype
        'int32'
    """
    return _unary("Abs", "abs", x, ti.abs, name, float_only=False)


def exp(x: Tensor, name: str | None = None) -> Tensor:
    """Exp: ``e ** x``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> exp(placeholder((3,))).op.tag
        'exp'
    """
    return _unary("Exp", "exp", x, ti.exp, name)


def log(x: Tensor, name: str | None = None) -> Tensor:
    """Log: natural logarithm.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> log(placeholder((3,))).shape
        (3,)
    """
    return _unary("Log", "log", x, ti.log, name)


def erf(x: Tensor, name: str | None = None) -> Tensor:
    """Erf: the error function ``2 / sqrt(pi) * integral(exp(-t * t), 0, x)``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> erf(placeholder((3,))).op.tag
        'erf'
    """
    return _unary("Erf", "erf", x, ti.erf, name)


def neg(x: Tensor, name: str | None = None) -> Tensor:
    """Neg: ``-x`` (any signed numeric dtype).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> neg(placeholder((3,), "int32")).dtype
        'int32'
    """
    check_tensor("Neg", "src", x)
    if x.dtype == "bool" or not dt.is_signed(x.dtype):
        raise TypeError(f"Neg: src must have a signed dtype, got {x.dtype}")
    return compute(x.shape, lambda *i: -x[i], name=name or "neg", tag="neg")


def sqrt(x: Tensor, name: str | None = None) -> Tensor:
    """Sqrt: square root.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> sqrt(placeholder((3,))).op.tag
        'sqrt'
    """
    return _unary("Sqrt", "sqrt", x, ti.sqrt, name)


def square(x: Tensor, name: str | None = None) -> Tensor:
    """Square: ``x * x``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> square(placeholder((3,), "int32")).dtype
        'int32'
    """
    return _unary("Square", "square", x, lambda v: v * v, name, float_only=False)


def reciprocal(x: Tensor, name: str | None = None) -> Tensor:
    """Reciprocal: ``1 / x``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> reciprocal(placeholder((3,))).op.tag
        'reciprocal'
    """
    return _unary("Reciprocal", "reciprocal", x, lambda v: fconst(1, v.dtype) / v, name)


def relu(x: Tensor, name: str | None = None) -> Tensor:
    """ReLU: ``max(x, 0)`` (NaN stays NaN).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> relu(placeholder((3,))).op.tag
        'relu'
    """
    return _unary("ReLU", "relu", x, lambda v: emax(v, fconst(0, v.dtype)), name, float_only=False)


def leaky_relu(x: Tensor, alpha: float, name: str | None = None) -> Tensor:
    """LeakyReLU: ``x`` where ``x >= 0``, else ``alpha * x``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> leaky_relu(placeholder((3,)), alpha=0.01).op.tag
        'leaky_relu'
    """
    alpha = check_number("LeakyReLU", "alpha", alpha)
    return _unary("LeakyReLU", "leaky_relu", x,
                  lambda v: ti.if_then_else(v >= fconst(0, v.dtype), v, v * fconst(alpha, v.dtype)), name)


def elu(x: Tensor, alpha: float, name: str | None = None) -> Tensor:
    """Elu: ``x`` where ``x >= 0``, else ``alpha * (exp(x) - 1)``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> elu(placeholder((3,)), alpha=1.0).op.tag
        'elu'
    """
    alpha = check_number("Elu", "alpha", alpha)
    if alpha < 0:
        raise ValueError(f"Elu: attribute alpha must be non-negative, got {alpha}")
    return _unary("Elu", "elu", x, lambda v: ti.if_then_else(
        v >= fconst(0, v.dtype), v, fconst(alpha, v.dtype) * (ti.exp(v) - fconst(1, v.dtype))), name)


def gelu(x: Tensor, mode: str = "gelu_erf", name: str | None = None) -> Tensor:
    """GELU. ``mode="gelu_erf"`` (default): ``0.5 x (1 + erf(x / sqrt 2))``; ``"gelu_tanh"``:
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, computed as the equal ``x sigmoid(2
    sqrt(2/pi) (x + 0.044715 x^3))`` (one exp and no division's rounding near 1 + tanh = 0).
    ``"erf"`` and ``"tanh"`` are accepted as aliases.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> gelu(placeholder((3,)), mode="gelu_tanh").op.tag
        'gelu'
    """
    mode = {"erf": "gelu_erf", "tanh": "gelu_tanh"}.get(mode, mode)
    check_choice("GELU", "mode", mode, ("gelu_erf", "gelu_tanh"))

    def f(v):
        c = lambda value: fconst(value, v.dtype)  # noqa: E731
        if mode == "gelu_erf":
            return c(0.5) * v * (c(1) + ti.erf(v * c(1 / math.sqrt(2))))
        scale = 2 * math.sqrt(2 / math.pi)       # 1 + tanh(u) = 2 sigmoid(2u)
        return v * ti.sigmoid(v * (c(scale) + c(scale * 0.044715) * v * v))
    return _unary("GELU", "gelu", x, f, name)


def sigmoid(x: Tensor, name: str | None = None) -> Tensor:
    """Sigmoid: ``1 / (1 + exp(-x))``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> sigmoid(placeholder((3,))).op.tag
        'sigmoid'
    """
    return _unary("Sigmoid", "sigmoid", x, ti.sigmoid, name)


def tanh(x: Tensor, name: str | None = None) -> Tensor:
    """Tanh.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> tanh(placeholder((3,))).op.tag
        'tanh'
    """
    return _unary("Tanh", "tanh", x, ti.tanh, name)


def hardsigmoid(x: Tensor, alpha: float, beta: float, name: str | None = None) -> Tensor:
    """HardSigmoid: ``max(0, min(1, alpha * x + beta))``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> hardsigmoid(placeholder((3,)), alpha=1 / 6, beta=0.5).op.tag
        'hardsigmoid'
    """
    alpha = check_number("HardSigmoid", "alpha", alpha)
    beta = check_number("HardSigmoid", "beta", beta)
    return _unary("HardSigmoid", "hardsigmoid", x, lambda v: emax(
        emin(fconst(alpha, v.dtype) * v + fconst(beta, v.dtype), fconst(1, v.dtype)), fconst(0, v.dtype)), name)


def hardswish(x: Tensor, name: str | None = None) -> Tensor:
    """HardSwish: ``x * min(max(x / 6 + 0.5, 0), 1)`` (ONNX's ``alpha * x + beta``; a
    multiply-add where ``min(max(x + 3, 0), 6) / 6`` would divide).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> hardswish(placeholder((3,))).op.tag
        'hardswish'
    """
    return _unary("HardSwish", "hardswish", x, lambda v: v * emin(
        emax(v * fconst(1 / 6, v.dtype) + fconst(0.5, v.dtype), fconst(0, v.dtype)), fconst(1, v.dtype)), name)


def _softplus(v, beta: float):
    """``log(1 + exp(beta v)) / beta`` without overflow: max(bv, 0) + log(1 + exp(-|bv|))."""
    c = lambda value: fconst(value, v.dtype)  # noqa: E731
    bv = v if beta == 1 else v * c(beta)
    sp = emax(bv, c(0)) + ti.log(c(1) + ti.exp(c(0) - ti.abs(bv)))
    return sp if beta == 1 else sp / c(beta)


def softplus(x: Tensor, beta: float = 1.0, name: str | None = None) -> Tensor:
    """SoftPlus: ``1 / beta * log(exp(beta * x) + 1)``, computed without overflow.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> softplus(placeholder((3,)), beta=2.0).op.tag
        'softplus'
    """
    beta = check_number("SoftPlus", "beta", beta)
    if beta == 0:
        raise ValueError("SoftPlus: attribute beta must be non-zero (the formula divides by it)")
    return _unary("SoftPlus", "softplus", x, lambda v: _softplus(v, beta), name)


def mish(x: Tensor, name: str | None = None) -> Tensor:
    """Mish: ``x * tanh(softplus(x))``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> mish(placeholder((3,))).op.tag
        'mish'
    """
    return _unary("Mish", "mish", x, lambda v: v * ti.tanh(_softplus(v, 1.0)), name)


def clamp(x: Tensor, min: float, max: float, name: str | None = None) -> Tensor:  # noqa: A002 - oneDNN's names
    """Clamp: ``min(max(x, min), max)``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> clamp(placeholder((3,)), min=0.0, max=6.0).op.tag
        'clamp'
    """
    lo, hi = check_number("Clamp", "min", min), check_number("Clamp", "max", max)
    if lo > hi:
        raise ValueError(f"Clamp: attribute min={lo} is greater than max={hi}")
    return _unary("Clamp", "clamp", x, lambda v: emin(emax(v, fconst(lo, v.dtype)), fconst(hi, v.dtype)), name)


def round(x: Tensor, mode: str = "half_to_even", name: str | None = None) -> Tensor:  # noqa: A001
    """Round to the nearest integer. Ties go to the even neighbour (``mode="half_to_even"``, the
    default: oneDNN's kernels use ``nearbyintf`` under the default rounding mode, as numpy's
    ``np.rint``) or away from zero (``mode="half_away_from_zero"``, C's ``roundf``).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> round(placeholder((3,))).op.tag
        'round'
    """
    check_choice("Round", "mode", mode, ("half_away_from_zero", "half_to_even"))

    def f(v):
        if mode == "half_away_from_zero":
            c = lambda value: fconst(value, v.dtype)  # noqa: E731
            a = ti.abs(v)
            t = ti.floor(a)            # a - t is exact, so a tie is seen as one (unlike floor(a + 0.5))
            r = t + ti.if_then_else(a - t >= c(0.5), c(1), c(0))
            return ti.if_then_else(v < c(0), c(0) - r, r)
        return rint(v)
    return _unary("Round", "round", x, f, name)


def rint(v):
    """The float expression ``v`` rounded to the nearest integer, ties to even (numpy's
    ``np.rint``), as a float expression.

    Example:
        >>> from tilefuse.tensorir import var
        >>> rint(var("x", "float32")).dtype
        'float32'
    """
    c = lambda value: fconst(value, v.dtype)  # noqa: E731
    t = ti.floor(v)
    d = v - t
    odd = (t - c(2) * ti.floor(t * c(0.5))) == c(1)
    return t + ti.if_then_else((d > c(0.5)) | ((d == c(0.5)) & odd), c(1), c(0))


def pow(x: Tensor, beta, name: str | None = None) -> Tensor:  # noqa: A001
    """Pow: ``x ** beta``; ``beta`` is oneDNN's f32 attribute, or a Tensor (numpy-broadcast,
    the binary Pow of older oneDNN versions). Whole exponents from -4 to 4 (but 0) multiply
    (GELU's ``x ** 3`` ran through a scalar pow call, 1.8 ms over 128x3072 elements), 0.5 is a
    square root.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> pow(placeholder((3,)), beta=3.0).op.tag
        'pow'
    """
    if isinstance(beta, Tensor):
        return _binary("Pow", "pow", x, beta, ti.pow, name, "numpy", float_only=True)
    beta = check_number("Pow", "beta", beta)
    if float(beta).is_integer() and -4 <= beta <= 4 and beta != 0:     # GELU's x ** 3: multiplies
        power = int(beta) if beta > 0 else -int(beta)
        def product(v):
            out = v
            for _ in range(power - 1):
                out = out * v
            return out if beta > 0 else fconst(1.0, v.dtype) / out
        return _unary("Pow", "pow", x, product, name)
    if beta == 0.5:
        return _unary("Pow", "pow", x, ti.sqrt, name)
    return _unary("Pow", "pow", x, lambda v: ti.pow(v, fconst(beta, v.dtype)), name)


# ---------------------------------------------------------------------------- binary

def _binary(op: str, tag: str, a: Tensor, b: Tensor, fn, name, auto_broadcast: str,
            float_only: bool = False) -> Tensor:
    check = check_float if float_only else check_tensor
    check(op, "src_0", a)
    check(op, "src_1", b)
    check_same_dtype(op, src_0=a, src_1=b)
    check_choice(op, "auto_broadcast", auto_broadcast, ("none", "numpy"))
    if auto_broadcast == "none" and a.shape != b.shape:
        raise ValueError(f"{op}: auto_broadcast='none' needs equal shapes, got {a.shape} and {b.shape}")
    shape = broadcast_shapes(op, a.shape, b.shape)
    return compute(shape, lambda *i: fn(a[broadcast_index(a, shape, i)], b[broadcast_index(b, shape, i)]),
                   name=name or tag, tag=tag)


def add(a: Tensor, b: Tensor, auto_broadcast: str = "numpy", name: str | None = None) -> Tensor:
    """Add: ``a + b`` with numpy broadcasting (``auto_broadcast="none"``: equal shapes only).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> add(placeholder((7, 1)), placeholder((13,))).shape
        (7, 13)
    """
    return _binary("Add", "add", a, b, lambda u, v: u + v, name, auto_broadcast)


def subtract(a: Tensor, b: Tensor, auto_broadcast: str = "numpy", name: str | None = None) -> Tensor:
    """Subtract: ``a - b`` with numpy broadcasting.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> subtract(placeholder((2, 3)), placeholder((3,))).shape
        (2, 3)
    """
    return _binary("Subtract", "subtract", a, b, lambda u, v: u - v, name, auto_broadcast)


def multiply(a: Tensor, b: Tensor, auto_broadcast: str = "numpy", name: str | None = None) -> Tensor:
    """Multiply: ``a * b`` with numpy broadcasting.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> multiply(placeholder((2, 1, 4)), placeholder((3, 1))).shape
        (2, 3, 4)
    """
    return _binary("Multiply", "multiply", a, b, lambda u, v: u * v, name, auto_broadcast)


def divide(a: Tensor, b: Tensor, auto_broadcast: str = "numpy", name: str | None = None) -> Tensor:
    """Divide: ``a / b`` (true division of floats) with numpy broadcasting.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> divide(placeholder((2, 3)), placeholder((1,))).shape
        (2, 3)
    """
    return _binary("Divide", "divide", a, b, lambda u, v: u / v, name, auto_broadcast, float_only=True)


def maximum(a: Tensor, b: Tensor, auto_broadcast: str = "numpy", name: str | None = None) -> Tensor:
    """Maximum: elementwise ``max(a, b)`` with numpy broadcasting (NaN-propagating).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> maximum(placeholder((2, 3)), placeholder((3,))).op.tag
        'maximum'
    """
    return _binary("Maximum", "maximum", a, b, emax, name, auto_broadcast)


def minimum(a: Tensor, b: Tensor, auto_broadcast: str = "numpy", name: str | None = None) -> Tensor:
    """Minimum: elementwise ``min(a, b)`` with numpy broadcasting (NaN-propagating).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> minimum(placeholder((2, 3)), placeholder((3,))).op.tag
        'minimum'
    """
    return _binary("Minimum", "minimum", a, b, emin, name, auto_broadcast)


def squared_difference(a: Tensor, b: Tensor, auto_broadcast: str = "numpy", name: str | None = None) -> Tensor:
    """SquaredDifference: ``(a - b) ** 2`` with numpy broadcasting.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> squared_difference(placeholder((2, 3)), placeholder((3,))).op.tag
        'squared_difference'
    """
    def f(u, v):
        d = u - v
        return d * d
    return _binary("SquaredDifference", "squared_difference", a, b, f, name, auto_broadcast)


def greater_equal(a: Tensor, b: Tensor, auto_broadcast: str = "numpy", name: str | None = None) -> Tensor:
    """GreaterEqual: ``a >= b`` (a bool tensor) with numpy broadcasting.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> greater_equal(placeholder((2, 3)), placeholder((3,))).dtype
        'bool'
    """
    return _binary("GreaterEqual", "greater_equal", a, b, lambda u, v: u >= v, name, auto_broadcast)


def greater(a: Tensor, b: Tensor, auto_broadcast: str = "numpy", name: str | None = None) -> Tensor:
    """Greater: ``a > b`` (a bool tensor) with numpy broadcasting; ``less(a, b)`` is
    ``greater(b, a)``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> greater(placeholder((2, 3), "int64"), placeholder((3,), "int64")).dtype
        'bool'
    """
    return _binary("Greater", "greater", a, b, lambda u, v: u > v, name, auto_broadcast)


def equal(a: Tensor, b: Tensor, auto_broadcast: str = "numpy", name: str | None = None) -> Tensor:
    """Equal: ``a == b`` (a bool tensor) with numpy broadcasting; any data type, bool included.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> equal(placeholder((4,), "bool"), placeholder((1,), "bool")).shape
        (4,)
    """
    return _binary("Equal", "equal", a, b, lambda u, v: u == v, name, auto_broadcast)


def _logical_binary(op: str, tag: str, a: Tensor, b: Tensor, fn, name, auto_broadcast: str) -> Tensor:
    for arg, t in (("src_0", a), ("src_1", b)):
        if check_tensor(op, arg, t).dtype != "bool":
            raise TypeError(f"{op}: {arg} must be a bool tensor, got {t.dtype}")
    return _binary(op, tag, a, b, fn, name, auto_broadcast)


def logical_and(a: Tensor, b: Tensor, auto_broadcast: str = "numpy", name: str | None = None) -> Tensor:
    """LogicalAnd: ``a & b`` of bool tensors, with numpy broadcasting.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> logical_and(placeholder((2, 1), "bool"), placeholder((3,), "bool")).shape
        (2, 3)
    """
    return _logical_binary("LogicalAnd", "logical_and", a, b, lambda u, v: u & v, name, auto_broadcast)


def logical_or(a: Tensor, b: Tensor, auto_broadcast: str = "numpy", name: str | None = None) -> Tensor:
    """LogicalOr: ``a | b`` of bool tensors, with numpy broadcasting.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> logical_or(placeholder((3,), "bool"), placeholder((3,), "bool")).op.tag
        'logical_or'
    """
    return _logical_binary("LogicalOr", "logical_or", a, b, lambda u, v: u | v, name, auto_broadcast)


def logical_xor(a: Tensor, b: Tensor, auto_broadcast: str = "numpy", name: str | None = None) -> Tensor:
    """LogicalXor: ``a != b`` of bool tensors, with numpy broadcasting.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> logical_xor(placeholder((3,), "bool"), placeholder((3,), "bool")).dtype
        'bool'
    """
    return _logical_binary("LogicalXor", "logical_xor", a, b, lambda u, v: u != v, name, auto_broadcast)


def logical_not(x: Tensor, name: str | None = None) -> Tensor:
    """LogicalNot: ``~x`` of a bool tensor.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> logical_not(placeholder((3,), "bool")).dtype
        'bool'
    """
    if check_tensor("LogicalNot", "src", x).dtype != "bool":
        raise TypeError(f"LogicalNot: src must be a bool tensor, got {x.dtype}")
    return compute(x.shape, lambda *i: ~x[i], name=name or "logical_not", tag="logical_not")


def is_nan(x: Tensor, name: str | None = None) -> Tensor:
    """IsNaN: whether each element of a float tensor is NaN (``x != x``, unordered), as bool.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> is_nan(placeholder((3,))).dtype
        'bool'
    """
    check_float("IsNaN", "src", x)
    return compute(x.shape, lambda *i: x[i] != x[i], name=name or "is_nan", tag="is_nan")


def select(cond: Tensor, a: Tensor, b: Tensor, auto_broadcast: str = "numpy", name: str | None = None) -> Tensor:
    """Select: ``a`` where ``cond`` else ``b``. ``a`` and ``b`` broadcast to each other (numpy);
    ``cond`` (bool) broadcasts one way to that shape.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> select(placeholder((13,), "bool"), placeholder((7, 13)), placeholder((1,))).shape
        (7, 13)
    """
    for arg, t in (("cond", cond), ("src_0", a), ("src_1", b)):
        check_tensor("Select", arg, t)
    if cond.dtype != "bool":
        raise TypeError(f"Select: cond must be a bool tensor, got {cond.dtype}")
    check_same_dtype("Select", src_0=a, src_1=b)
    check_choice("Select", "auto_broadcast", auto_broadcast, ("none", "numpy"))
    if auto_broadcast == "none" and not cond.shape == a.shape == b.shape:
        raise ValueError(f"Select: auto_broadcast='none' needs equal shapes, got cond {cond.shape}, "
                         f"src_0 {a.shape}, src_1 {b.shape}")
    shape = broadcast_shapes("Select", a.shape, b.shape)
    if not broadcasts_to(cond.shape, shape):
        raise ValueError(f"Select: cond of shape {cond.shape} does not broadcast one way to {shape}")
    return compute(shape, lambda *i: ti.if_then_else(
        cond[broadcast_index(cond, shape, i)], a[broadcast_index(a, shape, i)], b[broadcast_index(b, shape, i)]),
        name=name or "select", tag="select")


def bias_add(x: Tensor, bias: Tensor, data_format: str = "NXC", name: str | None = None) -> Tensor:
    """BiasAdd: add the 1-D ``bias`` along the channel axis of ``x`` (axis 1 for ``NCX``, the
    last for ``NXC``).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> bias_add(placeholder((2, 5, 7)), placeholder((5,)), data_format="NCX").shape
        (2, 5, 7)
    """
    check_tensor("BiasAdd", "src", x)
    check_tensor("BiasAdd", "bias", bias)
    check_same_dtype("BiasAdd", src=x, bias=bias)
    check_choice("BiasAdd", "data_format", data_format, FORMATS)
    if x.ndim < 2:
        raise ValueError(f"BiasAdd: src must have at least 2 dimensions, got shape {x.shape}")
    c = channel_axis(data_format, x.ndim)
    if bias.ndim != 1 or bias.shape[0] != x.shape[c]:
        raise ValueError(f"BiasAdd: bias must be 1-D with {x.shape[c]} elements (the channels of src "
                         f"{x.shape} in {data_format}), got shape {bias.shape}")
    return compute(x.shape, lambda *i: x[i] + bias[i[c]], name=name or "bias_add", tag="bias_add")


def prelu(x: Tensor, slope: Tensor, data_format: str = "NXC", per_channel_broadcast: bool = True,
          name: str | None = None) -> Tensor:
    """PReLU: ``x`` where ``x >= 0``, else ``slope * x``. A 1-D ``slope`` runs along the channel
    axis (``per_channel_broadcast=True``) or the last axis; an n-D slope broadcasts one way
    (numpy, aligned right).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> prelu(placeholder((2, 5, 7)), placeholder((5,)), data_format="NCX").shape
        (2, 5, 7)
    """
    check_float("PReLU", "src", x)
    check_tensor("PReLU", "slope", slope)
    check_same_dtype("PReLU", src=x, slope=slope)
    check_choice("PReLU", "data_format", data_format, FORMATS)
    if slope.ndim == 1 and x.ndim >= 2:
        axis = channel_axis(data_format, x.ndim) if per_channel_broadcast else x.ndim - 1
        if slope.shape[0] not in (1, x.shape[axis]):
            raise ValueError(f"PReLU: 1-D slope of {slope.shape[0]} elements does not match dimension {axis} "
                             f"({x.shape[axis]}) of src {x.shape} (per_channel_broadcast={per_channel_broadcast}, "
                             f"data_format={data_format})")
        at = lambda i: slope[0 if slope.shape[0] == 1 else i[axis]]  # noqa: E731
    else:
        if not broadcasts_to(slope.shape, x.shape):
            raise ValueError(f"PReLU: slope of shape {slope.shape} does not broadcast one way to src {x.shape}")
        at = lambda i: slope[broadcast_index(slope, x.shape, i)]  # noqa: E731
    return compute(x.shape, lambda *i: ti.if_then_else(x[i] >= fconst(0, x.dtype), x[i], at(i) * x[i]),
                   name=name or "prelu", tag="prelu")


def typecast(x: Tensor, dtype: str, name: str | None = None) -> Tensor:
    """TypeCast: convert every element to ``dtype`` (numpy ``astype`` for in-range values).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> typecast(placeholder((3,), "float32"), "float64").dtype
        'float64'
    """
    check_tensor("TypeCast", "src", x)
    try:
        dtype = dt.check_dtype(dtype)
    except dt.DTypeError as e:
        raise ValueError(f"TypeCast: dst dtype: {e}") from None
    return compute(x.shape, lambda *i: ti.cast(dtype, x[i]), name=name or "typecast", tag="typecast")

