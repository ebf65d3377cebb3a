"""A plain numpy interpreter of the oneDNN Graph op set: the oracle that every test compares
compiled code against.

Two entry points:

* :func:`evaluate` runs one :class:`~graph_api.op.Op` on numpy arrays;
* :func:`run` runs a whole graph (a list of ops, or any object with ``topological_ops()``) from
  a dict of feeds and returns every graph output.

Semantics follow oneDNN's op definitions (``doc/graph/operations/*.md`` and the op schemas in
``src/graph/interface/op_def.hpp``): attribute names, defaults and input/output order are
oneDNN's. Arithmetic is done in float64 and cast once to each output's data type
(``op.outputs[i].dtype``). Each op kind is a small function in the ``_REGISTRY`` dict; a kind
that is not there raises ``GraphError("op <id> (<Kind>): the reference interpreter does not
implement this op")``.

Example:
    >>> import numpy as np
    >>> from graph_api.logical_tensor import DataType, LogicalTensor
    >>> from graph_api.op import Op, OpKind
    >>> a, b = LogicalTensor(0, DataType.f32, (2,)), LogicalTensor(1, DataType.f32, (2,))
    >>> evaluate(Op(0, OpKind.Exp, [a], [b]), [np.zeros(2, np.float32)])[0]
    array([1., 1.], dtype=float32)
"""
from __future__ import annotations

import heapq
import math
from typing import Callable

import numpy as np

from .logical_tensor import DataType, GraphError, LogicalTensor
from .op import Op, OpKind

__all__ = ["evaluate", "run", "SUPPORTED_KINDS"]

_REQUIRED = object()
_Handler = Callable[[Op, list], list]
_REGISTRY: dict[OpKind, _Handler] = {}


def _register(*kinds: OpKind):
    def deco(fn: _Handler) -> _Handler:
        for k in kinds:
            _REGISTRY[k] = fn
        return fn
    return deco


# --------------------------------------------------------------------------- helpers

def _err(op: Op, msg: str) -> GraphError:
    return GraphError(f"op {op.id} ({op.kind.value}): {msg}")


def _check_broadcasts_to(op, what: str, shape, target, target_name: str) -> None:
    """GraphError unless an operand of ``shape`` broadcasts to ``target`` one way."""
    try:
        ok = np.broadcast_shapes(target, shape) == tuple(target)
    except ValueError:
        ok = False
    if not ok:
        raise _err(op, f"{what} shape {shape} does not broadcast to {target_name} shape {tuple(target)}")


def _attr(op: Op, name: str, default=_REQUIRED):
    if name in op.attrs:
        return op.attrs[name]
    if default is _REQUIRED:
        raise _err(op, f"missing required attribute '{name}'")
    return default


def _int(op: Op, name: str, default=_REQUIRED) -> int:
    v = _attr(op, name, default)
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise _err(op, f"attribute '{name}' must be an int, got {v!r}")
    return int(v)


def _float(op: Op, name: str, default=_REQUIRED) -> float:
    v = _attr(op, name, default)
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise _err(op, f"attribute '{name}' must be a number, got {v!r}")
    return float(v)


def _bool(op: Op, name: str, default=_REQUIRED) -> bool:
    v = _attr(op, name, default)
    if not isinstance(v, (bool, np.bool_)):
        raise _err(op, f"attribute '{name}' must be a bool, got {v!r}")
    return bool(v)


def _ints(op: Op, name: str, default=_REQUIRED) -> list[int]:
    v = _attr(op, name, default)
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise _err(op, f"attribute '{name}' must be a list of ints, got {v!r}")
    v = list(v)
    if any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in v):
        raise _err(op, f"attribute '{name}' must be a list of ints, got {v!r}")
    return [int(x) for x in v]


def _floats(op: Op, name: str, default=_REQUIRED) -> list[float]:
    v = _attr(op, name, default)
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise _err(op, f"attribute '{name}' must be a list of numbers, got {v!r}")
    v = list(v)
    if any(isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)) for x in v):
        raise _err(op, f"attribute '{name}' must be a list of numbers, got {v!r}")
    return [float(x) for x in v]


def _choice(op: Op, name: str, choices, default=_REQUIRED) -> str:
    v = _attr(op, name, default)
    if v not in choices:
        raise _err(op, f"attribute '{name}' is {v!r}; expected one of {list(choices)}")
    return v


def _nin(op: Op, xs: list, allowed) -> None:
    if len(xs) not in allowed:
        want = " or ".join(str(n) for n in sorted(allowed))
        raise _err(op, f"expects {want} inputs, got {len(xs)}")


def _nout(op: Op, allowed) -> None:
    if len(op.outputs) not in allowed:
        want = " or ".join(str(n) for n in sorted(allowed))
        raise _err(op, f"expects {want} outputs, got {len(op.outputs)}")


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _axis(op: Op, axis: int, ndim: int, what: str = "axis") -> int:
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise _err(op, f"{what} {axis} is out of range for rank {ndim}")
    return axis % max(ndim, 1)


def _data_format(op: Op) -> str:
    return _choice(op, "data_format", ("NXC", "NCX"), "NXC")


def _channel_axis(op: Op, ndim: int, fmt: str) -> int:
    if ndim < 2:
        return ndim - 1 if ndim else 0
    return 1 if fmt == "NCX" else ndim - 1


def _broadcast(op: Op, a: np.ndarray, b: np.ndarray) -> tuple:
    mode = _choice(op, "auto_broadcast", ("numpy", "none"), "numpy")
    if mode == "none":
        if a.shape != b.shape:
            raise _err(op, f"input shapes {a.shape} and {b.shape} differ and auto_broadcast is 'none'")
        return a.shape
    try:
        return np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise _err(op, f"input shapes {a.shape} and {b.shape} do not broadcast") from None


def _vec_erf(x: np.ndarray) -> np.ndarray:
    return np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)


# --------------------------------------------------------------------------- element-wise

_UNARY: dict[OpKind, Callable[[Op, np.ndarray], np.ndarray]] = {
    OpKind.Abs: lambda op, x: np.abs(x),
    OpKind.Exp: lambda op, x: np.exp(x),
    OpKind.Log: lambda op, x: np.log(x),
    OpKind.ReLU: lambda op, x: np.maximum(x, 0.0),
    # oneDNN eltwise_round is nearbyintf(): round half to even under the default rounding mode.
    OpKind.Round: lambda op, x: np.rint(x),
    OpKind.Sigmoid: lambda op, x: 0.5 * (1.0 + np.tanh(0.5 * x)),
    OpKind.Sqrt: lambda op, x: np.sqrt(x),
    OpKind.Square: lambda op, x: x * x,
    OpKind.Tanh: lambda op, x: np.tanh(x),
    OpKind.Reciprocal: lambda op, x: 1.0 / x,
    OpKind.Mish: lambda op, x: x * np.tanh(np.logaddexp(0.0, x)),
    OpKind.HardSwish: lambda op, x: x * np.clip(x / 6.0 + 0.5, 0.0, 1.0),
    OpKind.Clamp: lambda op, x: np.minimum(np.maximum(x, _float(op, "min")), _float(op, "max")),
    OpKind.Elu: lambda op, x: np.where(x > 0, x, _float(op, "alpha") * np.expm1(np.minimum(x, 0.0))),
    OpKind.LeakyReLU: lambda op, x: np.where(x >= 0, x, _float(op, "alpha") * x),
    OpKind.HardSigmoid: lambda op, x: np.clip(_float(op, "alpha") * x + _float(op, "beta"), 0.0, 1.0),
    OpKind.SoftPlus: lambda op, x: _softplus(x, _float(op, "beta", 1.0)),
    OpKind.GELU: lambda op, x: _gelu(op, x),
}


def _softplus(x: np.ndarray, beta: float) -> np.ndarray:
    return np.logaddexp(0.0, beta * x) / beta


def _gelu(op: Op, x: np.ndarray) -> np.ndarray:
    mode = _choice(op, "mode", ("gelu_erf", "gelu_tanh"), "gelu_erf")
    if mode == "gelu_erf":
        return 0.5 * x * (1.0 + _vec_erf(x / math.sqrt(2.0)))
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


@_register(*_UNARY)
def _unary(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    with np.errstate(all="ignore"):
        return [_UNARY[op.kind](op, _f64(xs[0]))]


_BINARY: dict[OpKind, Callable] = {
    OpKind.Add: np.add,
    OpKind.Subtract: np.subtract,
    OpKind.Multiply: np.multiply,
    OpKind.Divide: np.divide,
    OpKind.Maximum: np.maximum,
    OpKind.Minimum: np.minimum,
    OpKind.SquaredDifference: lambda a, b: (a - b) * (a - b),
    OpKind.GreaterEqual: np.greater_equal,
}


@_register(*_BINARY)
def _binary(op: Op, xs: list) -> list:
    _nin(op, xs, {2})
    a, b = np.asarray(xs[0]), np.asarray(xs[1])
    _broadcast(op, a, b)
    integral = all(np.issubdtype(v.dtype, np.integer) for v in (a, b))
    if not integral or op.kind is OpKind.Divide:
        a, b = _f64(a), _f64(b)
    else:
        a, b = a.astype(np.int64), b.astype(np.int64)
    with np.errstate(all="ignore"):
        return [_BINARY[op.kind](a, b)]


@_register(OpKind.Pow)
def _pow(op: Op, xs: list) -> list:
    """oneDNN's Pow is unary: ``dst = src ** beta``. A legacy two-input form (``src_0 ** src_1``
    with auto_broadcast) is accepted too."""
    _nin(op, xs, {1, 2})
    with np.errstate(all="ignore"):
        if len(xs) == 2:
            a, b = _f64(xs[0]), _f64(xs[1])
            _broadcast(op, a, b)
            return [np.power(a, b)]
        return [np.power(_f64(xs[0]), _float(op, "beta"))]


@_register(OpKind.BiasAdd)
def _bias_add(op: Op, xs: list) -> list:
    _nin(op, xs, {2})
    x, bias = _f64(xs[0]), _f64(xs[1])
    if x.ndim < 2:
        raise _err(op, f"src must have at least 2 dims, got shape {x.shape}")
    if bias.ndim != 1:
        raise _err(op, f"bias must be 1-D, got shape {bias.shape}")
    c = _channel_axis(op, x.ndim, _data_format(op))
    if bias.shape[0] != x.shape[c]:
        raise _err(op, f"bias length {bias.shape[0]} does not match {x.shape[c]} channels")
    shape = [1] * x.ndim
    shape[c] = -1
    return [x + bias.reshape(shape)]


@_register(OpKind.PReLU)
def _prelu(op: Op, xs: list) -> list:
    _nin(op, xs, {2})
    x, slope = _f64(xs[0]), _f64(xs[1])
    per_channel = _bool(op, "per_channel_broadcast", True)
    fmt = _data_format(op)
    if slope.ndim == 1 and x.ndim >= 2:
        axis = _channel_axis(op, x.ndim, fmt) if per_channel else x.ndim - 1
        if slope.shape[0] not in (1, x.shape[axis]):
            raise _err(op, f"slope length {slope.shape[0]} does not match dim {axis} of src {x.shape}")
        shape = [1] * x.ndim
        shape[axis] = -1
        slope = slope.reshape(shape)
    try:
        if np.broadcast_shapes(x.shape, slope.shape) != x.shape:
            raise ValueError
    except ValueError:
        raise _err(op, f"slope shape {slope.shape} does not broadcast to src shape {x.shape}") from None
    return [np.where(x >= 0, x, slope * x)]


@_register(OpKind.Select)
def _select(op: Op, xs: list) -> list:
    _nin(op, xs, {3})
    cond = np.asarray(xs[0]).astype(bool)
    a, b = np.asarray(xs[1]), np.asarray(xs[2])
    out = _broadcast(op, a, b)
    mode = _attr(op, "auto_broadcast", "numpy")
    if mode == "none" and cond.shape != out:
        raise _err(op, f"cond shape {cond.shape} differs from {out} and auto_broadcast is 'none'")
    try:
        if np.broadcast_shapes(cond.shape, out) != out:
            raise ValueError
    except ValueError:
        raise _err(op, f"cond shape {cond.shape} does not broadcast one-way to {out}") from None
    return [np.where(cond, _f64(a), _f64(b))]


# --------------------------------------------------------------------------- backward

def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _gelu_grad(op: Op, x: np.ndarray) -> np.ndarray:
    if _choice(op, "mode", ("gelu_erf", "gelu_tanh"), "gelu_erf") == "gelu_erf":
        return 0.5 * (1.0 + _vec_erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    k, fit = math.sqrt(2.0 / math.pi), 0.044715
    t = np.tanh(k * (x + fit * x ** 3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * fit * x * x)


def _hardswish_grad(x: np.ndarray) -> np.ndarray:
    return np.where((x > -3.0) & (x < 3.0), (2.0 * x + 3.0) / 6.0, np.where(x >= 3.0, 1.0, 0.0))


def _mish_grad(x: np.ndarray) -> np.ndarray:
    t = np.tanh(np.logaddexp(0.0, x))
    return t + x * _sigmoid(x) * (1.0 - t * t)


def _use_dst(op: Op) -> bool:
    return _bool(op, "use_dst", True)


# d(forward)/dx from the op's first input: the forward src, or its dst when use_dst (oneDNN's
# formulas and comparisons, src/common/math_utils.hpp)
_GRADIENTS: dict[OpKind, Callable[[Op, np.ndarray], np.ndarray]] = {
    OpKind.ReLUBackward: lambda op, v: (v > 0).astype(np.float64),
    OpKind.SigmoidBackward: lambda op, v: (lambda s: s * (1.0 - s))(v if _use_dst(op) else _sigmoid(v)),
    OpKind.TanhBackward: lambda op, v: (lambda t: (1.0 - t) * (1.0 + t))(v if _use_dst(op) else np.tanh(v)),
    OpKind.EluBackward: lambda op, v: np.where(
        v > 0, 1.0, v + _float(op, "alpha") if _use_dst(op) else _float(op, "alpha") * np.exp(np.minimum(v, 0.0))),
    OpKind.GELUBackward: _gelu_grad,
    OpKind.HardSigmoidBackward: lambda op, v: np.where(
        (lambda a: (a > 0) & (a < 1))(_float(op, "alpha") * v + _float(op, "beta")), _float(op, "alpha"), 0.0),
    OpKind.HardSwishBackward: lambda op, v: _hardswish_grad(v),
    OpKind.MishBackward: lambda op, v: _mish_grad(v),
    OpKind.SoftPlusBackward: lambda op, v: _sigmoid(_float(op, "beta", 1.0) * v),
    OpKind.SqrtBackward: lambda op, v: 0.5 / (v if _use_dst(op) else np.sqrt(v)),
    OpKind.AbsBackward: lambda op, v: np.sign(v),
    OpKind.ClampBackward: lambda op, v: ((v > _float(op, "min")) & (v < _float(op, "max"))).astype(np.float64),
}


@_register(*_GRADIENTS)
def _eltwise_backward(op: Op, xs: list) -> list:
    """diff_src = diff_dst * f'(...), from (src or dst, diff_dst)."""
    _nin(op, xs, {2})
    v, dd = _f64(xs[0]), _f64(xs[1])
    if v.shape != dd.shape:
        raise _err(op, f"src/dst shape {v.shape} and diff_dst shape {dd.shape} differ")
    with np.errstate(all="ignore"):
        return [dd * _GRADIENTS[op.kind](op, v)]


@_register(OpKind.SoftMaxBackward, OpKind.LogSoftmaxBackward)
def _softmax_backward(op: Op, xs: list) -> list:
    """SoftMax: diff_src = dst * (diff_dst - sum(diff_dst * dst)); LogSoftmax: diff_src =
    diff_dst - exp(dst) * sum(diff_dst), sums along ``axis``."""
    _nin(op, xs, {2})
    dd, y = _f64(xs[0]), _f64(xs[1])
    if dd.shape != y.shape:
        raise _err(op, f"diff_dst shape {dd.shape} and dst shape {y.shape} differ")
    is_log = op.kind is OpKind.LogSoftmaxBackward
    axis = _axis(op, _int(op, "axis", -1 if is_log else 1), y.ndim)
    with np.errstate(all="ignore"):
        if is_log:
            return [dd - np.exp(y) * dd.sum(axis=axis, keepdims=True)]
        return [y * (dd - (dd * y).sum(axis=axis, keepdims=True))]


@_register(OpKind.BiasAddBackward, OpKind.BiasAddBackprop)
def _bias_add_backward(op: Op, xs: list) -> list:
    """diff_bias: diff_dst summed over every axis but the channel axis."""
    _nin(op, xs, {1})
    dd = _f64(xs[0])
    if dd.ndim < 2:
        raise _err(op, f"diff_dst must have at least 2 dims, got shape {dd.shape}")
    c = _channel_axis(op, dd.ndim, _data_format(op))
    return [dd.sum(axis=tuple(a for a in range(dd.ndim) if a != c))]


# --------------------------------------------------------------------------- data movement

@_register(OpKind.Reorder, OpKind.Identity)
def _reorder(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    return [np.array(xs[0], copy=True)]


@_register(OpKind.TypeCast)
def _type_cast(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    _nout(op, {1})
    if op.inputs[0].dtype is op.outputs[0].dtype and op.inputs[0].dtype is not DataType.undef:
        raise _err(op, f"input and output must have different data types, both are "
                       f"{op.inputs[0].dtype.value}")
    return [np.array(xs[0], copy=True)]


@_register(OpKind.Dropout)
def _dropout(op: Op, xs: list) -> list:
    """Inference semantics: dst = src; the optional mask output is all ones (u8)."""
    _nin(op, xs, {1, 2, 3, 4})
    _nout(op, {1, 2})
    x = np.array(xs[0], copy=True)
    return [x, np.ones(x.shape, np.uint8)][:len(op.outputs)]


@_register(OpKind.End)
def _end(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    _nout(op, {0})
    return []


@_register(OpKind.StaticReshape)
def _reshape(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    x = np.asarray(xs[0])
    shape = _ints(op, "shape")
    special_zero = _bool(op, "special_zero")
    out = []
    for i, d in enumerate(shape):
        if d < -1:
            raise _err(op, f"shape {shape} has the invalid dim {d}")
        if d == 0 and special_zero:
            if i >= x.ndim:
                raise _err(op, f"shape {shape}: a special zero at position {i} has no src dim to copy")
            d = x.shape[i]
        out.append(d)
    if out.count(-1) > 1:
        raise _err(op, f"shape {shape} has more than one -1")
    known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
    if -1 in out:
        if known == 0 or x.size % known:
            raise _err(op, f"cannot reshape src {x.shape} to {shape}")
        out[out.index(-1)] = x.size // known
    elif known != x.size:
        raise _err(op, f"cannot reshape src {x.shape} ({x.size} elements) to {shape}")
    return [x.reshape(out)]


@_register(OpKind.StaticTranspose)
def _transpose(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    x = np.asarray(xs[0])
    order = _ints(op, "order")
    if not order:
        order = list(range(x.ndim))[::-1]
    if len(order) != x.ndim:
        raise _err(op, f"order {order} has {len(order)} entries for a rank-{x.ndim} src")
    axes = [_axis(op, a, x.ndim, "order entry") for a in order]
    if sorted(axes) != list(range(x.ndim)):
        raise _err(op, f"order {order} is not a permutation")
    return [np.transpose(x, axes)]


@_register(OpKind.Concat)
def _concat(op: Op, xs: list) -> list:
    if not 1 <= len(xs) <= 64:
        raise _err(op, f"expects 1 to 64 inputs, got {len(xs)}")
    arrs = [np.asarray(x) for x in xs]
    nd = arrs[0].ndim
    axis = _axis(op, _int(op, "axis"), nd)
    for a in arrs[1:]:
        if a.ndim != nd or any(a.shape[i] != arrs[0].shape[i] for i in range(nd) if i != axis):
            raise _err(op, f"input shapes {[v.shape for v in arrs]} do not match outside axis {axis}")
    return [np.concatenate(arrs, axis=axis)]


@_register(OpKind.GenIndex)
def _gen_index(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    x = np.asarray(xs[0])
    axis = _axis(op, _int(op, "axis"), x.ndim)
    shape = [1] * x.ndim
    shape[axis] = -1
    return [np.broadcast_to(np.arange(x.shape[axis]).reshape(shape), x.shape).copy()]


# --------------------------------------------------------------------------- our own kinds (ONNX front end)

@_register(OpKind.Cast)
def _cast_op(op: Op, xs: list) -> list:
    """numpy ``astype`` to the output's data type: float to integer truncates toward zero."""
    _nin(op, xs, {1})
    x = np.asarray(xs[0])
    dt = _out_dtype(op, 0, x.dtype)
    with np.errstate(all="ignore"):
        return [x.astype(dt)]


@_register(OpKind.Neg)
def _neg(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    x = np.asarray(xs[0])
    return [-(x if np.issubdtype(x.dtype, np.integer) else _f64(x))]


@_register(OpKind.Erf)
def _erf(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    return [_vec_erf(_f64(xs[0]))]


@_register(OpKind.Gather)
def _gather(op: Op, xs: list) -> list:
    """``numpy.take(src, indices, axis)``; a negative index counts from the end."""
    _nin(op, xs, {2})
    x, idx = np.asarray(xs[0]), np.asarray(xs[1])
    if not np.issubdtype(idx.dtype, np.integer):
        raise _err(op, f"indices must be integers, got {idx.dtype}")
    axis = _axis(op, _int(op, "axis", 0), x.ndim)
    n = x.shape[axis]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise _err(op, f"indices {idx.min()}..{idx.max()} are out of range for dim {axis} of size {n}")
    return [np.take(x, np.where(idx < 0, idx + n, idx), axis=axis)]


@_register(OpKind.Slice)
def _slice(op: Op, xs: list) -> list:
    """``src[start:end:step]`` along each axis, with Python's clamping (ONNX Slice)."""
    _nin(op, xs, {1})
    x = np.asarray(xs[0])
    starts, ends = _ints(op, "starts"), _ints(op, "ends")
    axes = _ints(op, "axes", list(range(len(starts))))
    steps = _ints(op, "steps", [1] * len(starts))
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise _err(op, "starts, ends, axes and steps differ in length")
    index = [slice(None)] * x.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        if step == 0:
            raise _err(op, f"step 0 along axis {axis}")
        index[_axis(op, axis, x.ndim)] = slice(start, end, step)
    return [np.array(x[tuple(index)], copy=True)]


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


@_register(OpKind.Pad)
def _pad(op: Op, xs: list) -> list:
    """Pad by ``pads_begin``/``pads_end`` (negative: crop first) in ``mode``."""
    _nin(op, xs, {1})
    x = np.asarray(xs[0])
    pb, pe = _ints(op, "pads_begin"), _ints(op, "pads_end")
    if not len(pb) == len(pe) == x.ndim:
        raise _err(op, f"pads_begin {pb} and pads_end {pe} need {x.ndim} values each")
    mode = _choice(op, "mode", tuple(_PAD_MODES), "constant")
    crop = tuple(slice(max(-b, 0), n - max(-e, 0)) for b, e, n in zip(pb, pe, x.shape))
    x = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(pb, pe)]
    if mode != "constant" and any(n == 0 and (b or e) for n, (b, e) in zip(x.shape, widths)):
        raise _err(op, f"mode {mode} cannot pad an empty dim of shape {x.shape}")
    if mode == "constant":
        return [np.pad(x, widths, mode="constant", constant_values=_float(op, "value", 0.0))]
    return [np.pad(x, widths, mode=_PAD_MODES[mode])]


@_register(OpKind.Expand)
def _expand(op: Op, xs: list) -> list:
    """numpy broadcasting of ``src`` and the attribute ``shape``."""
    _nin(op, xs, {1})
    x = np.asarray(xs[0])
    shape = _ints(op, "shape")
    try:
        out = np.broadcast_shapes(x.shape, tuple(shape))
    except ValueError:
        raise _err(op, f"src shape {x.shape} and shape {shape} do not broadcast") from None
    return [np.broadcast_to(x, out).copy()]


@_register(OpKind.Wildcard)
def _wildcard(op: Op, xs: list) -> list:
    """A Wildcard the ONNX importer made from an op it does not map runs that ONNX node through
    onnx's own reference implementation; any other Wildcard has no semantics here."""
    if "onnx_node" not in op.attrs:
        raise _err(op, "the reference interpreter does not implement this op")
    from .onnx.node import run_onnx_node
    try:
        return run_onnx_node(op.attrs, [np.asarray(x) for x in xs])
    except GraphError as e:
        raise _err(op, str(e)) from None


# --------------------------------------------------------------------------- matmul

@_register(OpKind.MatMul)
def _matmul(op: Op, xs: list) -> list:
    _nin(op, xs, {2, 3})
    a, b = _f64(xs[0]), _f64(xs[1])
    if a.ndim == 0 or b.ndim == 0:
        raise _err(op, "inputs must have at least 1 dim")
    if _bool(op, "transpose_a", False) and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if _bool(op, "transpose_b", False) and b.ndim >= 2:
        b = np.swapaxes(b, -1, -2)
    try:
        out = np.matmul(a, b)
    except ValueError:
        raise _err(op, f"incompatible shapes {a.shape} x {b.shape} (after transposes)") from None
    if len(xs) == 3:
        bias = _f64(xs[2])
        _check_broadcasts_to(op, "bias", bias.shape, out.shape, "dst")
        out = out + bias
    return [out]


# --------------------------------------------------------------------------- convolution

def _auto_pad(op: Op, in_sp, kernel, strides, dilations, pb, pe, deconv=False):
    mode = str(_attr(op, "auto_pad", "None"))
    low = mode.lower()
    if low not in ("none", "same_upper", "same_lower", "valid"):
        raise _err(op, f"attribute 'auto_pad' is {mode!r}; expected none, same_upper, same_lower or valid")
    if low == "none":
        return pb, pe
    if low == "valid":
        return [0] * len(in_sp), [0] * len(in_sp)
    if any(d != 1 for d in dilations):
        raise _err(op, f"auto_pad {mode!r} with dilations {dilations} is not supported by oneDNN")
    pb, pe = [], []
    for n, k, s in zip(in_sp, kernel, strides):
        need = k - s if deconv else max((-(-n // s) - 1) * s + k - n, 0)
        begin = int((need + 1) / 2) if low == "same_lower" else int(need / 2)   # C++ division
        pb.append(begin)
        pe.append(need - begin)
    return pb, pe


def _window_attrs(op: Op, in_sp, kernel, dilations: str = "required", deconv=False, negative_pads=False):
    """strides, dilations, pads_begin, pads_end with auto_pad applied (lists of len(in_sp)).
    ``dilations`` is "required" (conv), "optional" (MaxPool: ones by default) or "absent";
    ``negative_pads`` accepts pads below 0 (pooling reads them as crops)."""
    nsp = len(in_sp)
    strides = _ints(op, "strides")
    if dilations == "absent":
        dil = [1] * nsp
    else:
        dil = _ints(op, "dilations", _REQUIRED if dilations == "required" else [1] * nsp)
        if dilations == "optional" and len(dil) == 12 and all(v == 1 for v in dil):
            dil = [1] * nsp          # oneDNN's schema default: DNNL_MAX_NDIMS ones
    pb = _ints(op, "pads_begin") or [0] * nsp
    pe = _ints(op, "pads_end") or [0] * nsp
    for name, v in (("strides", strides), ("dilations", dil), ("pads_begin", pb), ("pads_end", pe)):
        if len(v) != nsp:
            raise _err(op, f"attribute '{name}' {v} must have {nsp} entries (one per spatial dim)")
    if any(s <= 0 for s in strides) or any(d <= 0 for d in dil):
        raise _err(op, f"strides {strides} and dilations {dil} must be positive")
    if any(p < 0 for p in pb + pe) and not negative_pads:
        raise _err(op, f"pads_begin {pb} and pads_end {pe} must be non-negative")
    return (strides, dil) + _auto_pad(op, in_sp, kernel, strides, dil, pb, pe, deconv)


def _to_ncx(x: np.ndarray, fmt: str) -> np.ndarray:
    return np.moveaxis(x, -1, 1) if fmt == "NXC" and x.ndim > 2 else x


def _from_ncx(x: np.ndarray, fmt: str) -> np.ndarray:
    return np.moveaxis(x, 1, -1) if fmt == "NXC" and x.ndim > 2 else x


def _weights_to_oix(w: np.ndarray, fmt: str) -> np.ndarray:
    nd = w.ndim
    sp = tuple(range(nd - 2))
    return {"OIX": lambda: w,
            "XIO": lambda: np.transpose(w, (nd - 1, nd - 2) + sp),
            "XOI": lambda: np.transpose(w, (nd - 2, nd - 1) + sp),
            "IOX": lambda: np.transpose(w, (1, 0) + tuple(range(2, nd)))}[fmt]()


def _conv_common(op: Op, xs: list, transposed: bool):
    _nin(op, xs, {2, 3})
    x, w = _f64(xs[0]), _f64(xs[1])
    if x.ndim < 3 or x.ndim > 5 or w.ndim != x.ndim:
        raise _err(op, f"src {x.shape} and weights {w.shape} must both be 3-D, 4-D or 5-D")
    fmt = _data_format(op)
    wfmts = ("XOI", "IOX", "OIX", "XIO") if transposed else ("XIO", "OIX")
    wfmt = _choice(op, "weights_format", wfmts, "XOI" if transposed else "XIO")
    groups = _int(op, "groups", 1)
    if groups <= 0:
        raise _err(op, f"groups must be positive, got {groups}")
    x = _to_ncx(x, fmt)
    w = _weights_to_oix(w, wfmt)
    bias = _f64(xs[2]) if len(xs) == 3 else None
    return x, w, bias, groups, fmt


def _add_bias(op: Op, y: np.ndarray, bias) -> np.ndarray:
    if bias is None:
        return y
    if bias.ndim != 1 or bias.shape[0] != y.shape[1]:
        raise _err(op, f"bias shape {bias.shape} does not match {y.shape[1]} output channels")
    return y + bias.reshape((1, -1) + (1,) * (y.ndim - 2))


@_register(OpKind.Convolution)
def _convolution(op: Op, xs: list) -> list:
    x, w, bias, g, fmt = _conv_common(op, xs, transposed=False)
    n, c = x.shape[:2]
    oc, icg = w.shape[:2]
    in_sp, k_sp = x.shape[2:], w.shape[2:]
    if c % g or oc % g or c // g != icg:
        raise _err(op, f"src has {c} channels, weights {w.shape} (OIX) and groups={g} do not agree")
    s, d, pb, pe = _window_attrs(op, in_sp, k_sp)
    out_sp = [(i + b + e - ((k - 1) * dd + 1)) // ss + 1
              for i, k, ss, dd, b, e in zip(in_sp, k_sp, s, d, pb, pe)]
    if any(o <= 0 for o in out_sp):
        raise _err(op, f"output spatial size {out_sp} is not positive")
    xp = np.pad(x, [(0, 0), (0, 0)] + [(b, e) for b, e in zip(pb, pe)])
    ocg = oc // g
    xg = xp.reshape((n, g, icg) + xp.shape[2:])
    wg = w.reshape((g, ocg, icg) + tuple(k_sp))
    y = np.zeros((n, g, ocg) + tuple(out_sp))
    for kidx in np.ndindex(*k_sp):
        sl = tuple(slice(k * dd, k * dd + (o - 1) * ss + 1, ss)
                   for k, dd, o, ss in zip(kidx, d, out_sp, s))
        patch = xg[(slice(None),) * 3 + sl]
        y += np.einsum("ngc...,goc->ngo...", patch, wg[(slice(None),) * 3 + kidx])
    y = _add_bias(op, y.reshape((n, oc) + tuple(out_sp)), bias)
    return [_from_ncx(y, fmt)]


@_register(OpKind.ConvTranspose)
def _conv_transpose(op: Op, xs: list) -> list:
    """Canonical (OIX) ConvTranspose weights are (OC/groups, IC, K...); IOX is (IC, OC/groups, K...)
    as in PyTorch, XOI is (K..., OC/groups, IC) and XIO is (K..., IC, OC/groups)."""
    x, w, bias, g, fmt = _conv_common(op, xs, transposed=True)
    n, c = x.shape[:2]
    ocg, ic = w.shape[:2]
    in_sp, k_sp = x.shape[2:], w.shape[2:]
    if c != ic or c % g:
        raise _err(op, f"src has {c} channels, weights {w.shape} (OIX) and groups={g} do not agree")
    s, d, pb, pe = _window_attrs(op, in_sp, k_sp, deconv=True)
    opad = _ints(op, "output_padding", [0] * len(in_sp))[:len(in_sp)] or [0] * len(in_sp)
    if len(opad) != len(in_sp) or any(p < 0 for p in opad):
        raise _err(op, f"output_padding {opad} must hold {len(in_sp)} non-negative values")
    full = [(i - 1) * ss + (k - 1) * dd + 1 for i, k, ss, dd in zip(in_sp, k_sp, s, d)]
    out_sp = [f + p - b - e for f, p, b, e in zip(full, opad, pb, pe)]
    if any(o <= 0 for o in out_sp):
        raise _err(op, f"output spatial size {out_sp} is not positive")
    icg = c // g
    xg = x.reshape((n, g, icg) + tuple(in_sp))
    # (OC/g, G*ICg, K) -> (G, ICg, OC/g, K)
    wg = np.moveaxis(w.reshape((ocg, g, icg) + tuple(k_sp)), 0, 2)
    # buffer position p holds dst position p - shift - pads_begin (shift absorbs negative pads)
    shift = [max(0, -b) for b in pb]
    buf_sp = [max(f + sh, o + b + sh) for f, o, b, sh in zip(full, out_sp, pb, shift)]
    y = np.zeros((n, g, ocg) + tuple(buf_sp))
    for kidx in np.ndindex(*k_sp):
        sl = tuple(slice(sh + k * dd, sh + k * dd + (i - 1) * ss + 1, ss)
                   for k, dd, i, ss, sh in zip(kidx, d, in_sp, s, shift))
        y[(slice(None),) * 3 + sl] += np.einsum("ngc...,gco->ngo...", xg, wg[(slice(None),) * 3 + kidx])
    crop = tuple(slice(b + sh, b + sh + o) for b, o, sh in zip(pb, out_sp, shift))
    y = y[(slice(None),) * 3 + crop].reshape((n, g * ocg) + tuple(out_sp))
    return [_from_ncx(_add_bias(op, y, bias), fmt)]


# --------------------------------------------------------------------------- pooling

@_register(OpKind.MaxPool, OpKind.AvgPool)
def _pool(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    is_max = op.kind is OpKind.MaxPool
    fmt = _data_format(op)
    x = _f64(xs[0])
    if x.ndim < 3 or x.ndim > 5:
        raise _err(op, f"src must be 3-D, 4-D or 5-D, got shape {x.shape}")
    x = _to_ncx(x, fmt)
    in_sp = x.shape[2:]
    kernel = _ints(op, "kernel")
    if len(kernel) != len(in_sp) or any(k <= 0 for k in kernel):
        raise _err(op, f"kernel {kernel} must hold {len(in_sp)} positive values")
    s, d, pb, pe = _window_attrs(op, in_sp, kernel, "optional" if is_max else "absent", negative_pads=True)
    # a negative pad crops the src
    crop = [slice(max(-b, 0), n - max(-e, 0)) for b, e, n in zip(pb, pe, in_sp)]
    if any(c.start >= c.stop for c in crop):
        raise _err(op, f"negative pads {pb} and {pe} crop away all of src {x.shape}")
    x = x[(slice(None), slice(None), *crop)]
    in_sp = x.shape[2:]
    pb, pe = [max(b, 0) for b in pb], [max(e, 0) for e in pe]
    rounding = _choice(op, "rounding_type", ("floor", "ceil"), "floor")
    exclude_pad = False if is_max else _bool(op, "exclude_pad")
    out_sp = []
    for i, k, ss, dd, b, e in zip(in_sp, kernel, s, d, pb, pe):
        span = i + b + e - ((k - 1) * dd + 1)
        out_sp.append((-(-span // ss) if rounding == "ceil" else span // ss) + 1)
    if any(o <= 0 for o in out_sp):
        raise _err(op, f"output spatial size {out_sp} is not positive")
    # pad far enough for the last (possibly ceil-mode) window; `valid` marks real src elements
    ends = [max(e, (o - 1) * ss + (k - 1) * dd + 1 - i - b)
            for i, k, ss, dd, b, e, o in zip(in_sp, kernel, s, d, pb, pe, out_sp)]
    pads = [(0, 0), (0, 0)] + list(zip(pb, ends))
    xp = np.pad(x, pads, constant_values=-np.inf if is_max else 0.0)
    valid = np.pad(np.ones(in_sp), pads[2:])
    acc = np.full(x.shape[:2] + tuple(out_sp), -np.inf if is_max else 0.0)
    count = np.zeros(out_sp)
    for kidx in np.ndindex(*kernel):
        sl = tuple(slice(k * dd, k * dd + (o - 1) * ss + 1, ss)
                   for k, dd, o, ss in zip(kidx, d, out_sp, s))
        win = xp[(slice(None), slice(None)) + sl]
        acc = np.maximum(acc, win) if is_max else acc + win
        count += valid[sl]
    if is_max:
        # a window made only of padding yields the lowest value (oneDNN's initial max)
        dt = _out_dtype(op, 0, np.dtype(np.float32))
        acc = np.where(count > 0, acc, np.finfo(dt).min if np.issubdtype(dt, np.floating) else 0)
    else:
        # rounding_type=ceil is run by oneDNN as an exclude-padding average over extra right padding
        denom = count if (exclude_pad or rounding == "ceil") else float(np.prod(kernel))
        acc = acc / np.maximum(denom, 1.0)
    return [_from_ncx(acc, fmt)]


# --------------------------------------------------------------------------- normalization

@_register(OpKind.BatchNormInference)
def _batchnorm(op: Op, xs: list) -> list:
    _nin(op, xs, {5})
    x, gamma, beta, mean, var = (_f64(v) for v in xs)
    if x.ndim < 2:
        raise _err(op, f"src must have at least 2 dims, got shape {x.shape}")
    eps = _float(op, "epsilon")
    c = _channel_axis(op, x.ndim, _data_format(op))
    shape = [1] * x.ndim
    shape[c] = -1
    for name, v in (("gamma", gamma), ("beta", beta), ("mean", mean), ("variance", var)):
        if v.shape != (x.shape[c],):
            raise _err(op, f"{name} shape {v.shape} must be ({x.shape[c]},)")
    gamma, beta, mean, var = (v.reshape(shape) for v in (gamma, beta, mean, var))
    return [gamma * (x - mean) / np.sqrt(var + eps) + beta]


@_register(OpKind.BatchNormTrainingBackward)
def _batchnorm_backward(op: Op, xs: list) -> list:
    """From (src, diff_dst, mean, variance[, gamma]): diff_src = gamma * r * (diff_dst -
    mean(diff_dst) - x_hat * mean(diff_dst * x_hat)), diff_gamma = sum(diff_dst * x_hat),
    diff_beta = sum(diff_dst), with r = 1 / sqrt(variance + epsilon), x_hat = (src - mean) * r,
    means and sums over every axis but the channel axis."""
    _nin(op, xs, {4, 5})
    _nout(op, {1, 2, 3})
    x, dd = _f64(xs[0]), _f64(xs[1])
    if x.ndim < 2 or dd.shape != x.shape:
        raise _err(op, f"src {x.shape} and diff_dst {dd.shape} must have one shape of rank >= 2")
    c = _channel_axis(op, x.ndim, _data_format(op))
    shape = [1] * x.ndim
    shape[c] = -1
    params = [_f64(v) for v in xs[2:]]
    for name, v in zip(("mean", "variance", "gamma"), params):
        if v.shape != (x.shape[c],):
            raise _err(op, f"{name} shape {v.shape} must be ({x.shape[c]},)")
    mean, var = (v.reshape(shape) for v in params[:2])
    gamma = params[2].reshape(shape) if len(params) == 3 else 1.0
    axes = tuple(a for a in range(x.ndim) if a != c)
    r = 1.0 / np.sqrt(var + _float(op, "epsilon"))
    x_hat = (x - mean) * r
    diff_beta, diff_gamma = dd.sum(axis=axes), (dd * x_hat).sum(axis=axes)
    m = x.size // x.shape[c]
    diff_src = gamma * r * (dd - diff_beta.reshape(shape) / m - x_hat * diff_gamma.reshape(shape) / m)
    return [diff_src, diff_gamma, diff_beta][:len(op.outputs)]


def _norm_axes(op: Op, x: np.ndarray) -> int:
    b = _int(op, "begin_norm_axis", -1)
    return _axis(op, b, x.ndim, "begin_norm_axis")


def _check_keep_stats(op: Op) -> None:
    if _bool(op, "keep_stats", True) and len(op.outputs) != 3:
        raise _err(op, f"keep_stats=True (the default) needs 3 outputs (dst, mean, variance), "
                       f"got {len(op.outputs)}")


def _affine_param(op: Op, v: np.ndarray, norm_shape: tuple, name: str) -> np.ndarray:
    if v.size != int(np.prod(norm_shape, dtype=np.int64)):
        raise _err(op, f"{name} shape {v.shape} does not match the normalized shape {norm_shape}")
    return v.reshape(norm_shape)


@_register(OpKind.LayerNorm)
def _layer_norm(op: Op, xs: list) -> list:
    _nin(op, xs, {1, 3})
    _nout(op, {1, 3})
    _check_keep_stats(op)
    x = _f64(xs[0])
    b = _norm_axes(op, x)
    axes = tuple(range(b, x.ndim))
    eps = _float(op, "epsilon", 1e-5)
    use_affine = _bool(op, "use_affine", True)
    if use_affine and len(xs) != 3:
        raise _err(op, "use_affine=True needs gamma and beta inputs (3 inputs)")
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    if use_affine:
        norm_shape = x.shape[b:]
        y = y * _affine_param(op, _f64(xs[1]), norm_shape, "gamma") + \
            _affine_param(op, _f64(xs[2]), norm_shape, "beta")
    stats = [mean.reshape(x.shape[:b]), var.reshape(x.shape[:b])]
    return [y] + stats[:len(op.outputs) - 1]


@_register(OpKind.GroupNorm)
def _group_norm(op: Op, xs: list) -> list:
    _nin(op, xs, {1, 3})
    _nout(op, {1, 3})
    _check_keep_stats(op)
    fmt = _data_format(op)
    x = _to_ncx(_f64(xs[0]), fmt)
    if x.ndim < 2:
        raise _err(op, f"src must have at least 2 dims, got shape {x.shape}")
    g = _int(op, "groups")
    n, c = x.shape[:2]
    if g <= 0 or c % g:
        raise _err(op, f"{c} channels are not divisible into groups={g}")
    eps = _float(op, "epsilon", 1e-5)
    use_affine = _bool(op, "use_affine", True)
    if use_affine and len(xs) != 3:
        raise _err(op, "use_affine=True needs gamma and beta inputs (3 inputs)")
    xg = x.reshape((n, g, -1))
    mean = xg.mean(axis=2, keepdims=True)
    var = ((xg - mean) ** 2).mean(axis=2, keepdims=True)
    y = ((xg - mean) / np.sqrt(var + eps)).reshape(x.shape)
    if use_affine:
        shape = (1, c) + (1,) * (x.ndim - 2)
        for name, v in (("gamma", xs[1]), ("beta", xs[2])):
            if np.shape(v) != (c,):
                raise _err(op, f"{name} shape {np.shape(v)} must be ({c},)")
        y = y * _f64(xs[1]).reshape(shape) + _f64(xs[2]).reshape(shape)
    stats = [mean.reshape(n, g), var.reshape(n, g)]
    return [_from_ncx(y, fmt)] + stats[:len(op.outputs) - 1]


@_register(OpKind.RMSNorm)
def _rms_norm(op: Op, xs: list) -> list:
    """dst = gamma * src / sqrt(mean(src**2 over [begin_norm_axis, rank)) + epsilon); the
    optional second output is rrms = 1 / sqrt(mean(src**2) + epsilon)."""
    _nin(op, xs, {1, 2})
    _nout(op, {1, 2})
    x = _f64(xs[0])
    b = _norm_axes(op, x)
    eps = _float(op, "epsilon", 1e-5)
    rrms = 1.0 / np.sqrt((x * x).mean(axis=tuple(range(b, x.ndim)), keepdims=True) + eps)
    y = x * rrms
    if len(xs) == 2:
        gamma = _f64(xs[1])
        _check_broadcasts_to(op, "gamma", gamma.shape, y.shape, "src")
        y = y * gamma
    return [y, rrms.reshape(x.shape[:b])][:len(op.outputs)]


@_register(OpKind.SoftMax, OpKind.LogSoftmax)
def _softmax(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    x = _f64(xs[0])
    is_log = op.kind is OpKind.LogSoftmax
    _nout(op, {1} if is_log else {1, 2})
    axis = _axis(op, _int(op, "axis", -1 if is_log else 1), x.ndim)
    inf_as_zero = not is_log and _choice(op, "mode", ("none", "inf_as_zero"), "none") == "inf_as_zero"
    with np.errstate(all="ignore"):
        m = x.max(axis=axis, keepdims=True)
        m_safe = np.where(np.isfinite(m), m, 0.0) if inf_as_zero else m
        e = np.exp(x - m_safe)
        s = e.sum(axis=axis, keepdims=True)
        if is_log:
            return [x - m - np.log(s)]
        y = e / s
        if inf_as_zero:
            y = np.where(np.isneginf(m) | (s == 0), 0.0, y)
        stats = np.where(np.isneginf(m), -np.inf, m + np.log(s))     # log-sum-exp of the row
        return [y, stats][:len(op.outputs)]


# --------------------------------------------------------------------------- reductions

_REDUCE: dict[OpKind, Callable] = {
    OpKind.ReduceL1: lambda x, ax, kd: np.abs(x).sum(axis=ax, keepdims=kd),
    OpKind.ReduceL2: lambda x, ax, kd: np.sqrt((x * x).sum(axis=ax, keepdims=kd)),
    OpKind.ReduceMax: lambda x, ax, kd: x.max(axis=ax, keepdims=kd),
    OpKind.ReduceMean: lambda x, ax, kd: x.mean(axis=ax, keepdims=kd),
    OpKind.ReduceMin: lambda x, ax, kd: x.min(axis=ax, keepdims=kd),
    OpKind.ReduceProd: lambda x, ax, kd: x.prod(axis=ax, keepdims=kd),
    OpKind.ReduceSum: lambda x, ax, kd: x.sum(axis=ax, keepdims=kd),
}


@_register(*_REDUCE)
def _reduce(op: Op, xs: list) -> list:
    _nin(op, xs, {1, 2})
    x = _f64(xs[0])
    keep = _bool(op, "keep_dims", False)
    if ("axes" in op.attrs) == (len(xs) == 2):
        raise _err(op, "exactly one of the attribute 'axes' and an axes input must be given")
    if len(xs) == 2:
        raw = np.asarray(xs[1])
        if raw.ndim > 1 or not np.issubdtype(raw.dtype, np.integer) and raw.size:
            raise _err(op, f"the axes input must be a 1-D integer tensor, got {raw.dtype} {raw.shape}")
        raw = [int(a) for a in raw.reshape(-1)]
        if not raw:            # oneDNN: an empty axes tensor makes the op an identity
            return [x]
    else:
        raw = _ints(op, "axes")
        if not raw:
            raise _err(op, "the 'axes' attribute is empty")
    axes = tuple(_axis(op, a, x.ndim) for a in raw)
    if len(set(axes)) != len(axes):
        raise _err(op, f"axes {raw} repeat an axis")
    return [_REDUCE[op.kind](x, axes, keep)]


# --------------------------------------------------------------------------- interpolate

def _interp_coords(out_n: int, in_n: int, mode: str) -> np.ndarray:
    o = np.arange(out_n, dtype=np.float64)
    if mode == "align_corners":
        return np.zeros(out_n) if out_n == 1 else o * (in_n - 1) / (out_n - 1)
    return (o + 0.5) * in_n / out_n - 0.5


@_register(OpKind.Interpolate)
def _interpolate(op: Op, xs: list) -> list:
    """oneDNN resampling: half_pixel nearest picks floor((o + 0.5) * in / out) (in integer
    arithmetic, so ties do not depend on rounding); linear modes
    interpolate separably between trunc(s) and ceil(s), clamped to the border, at
    s = (o + 0.5) * in / out - 0.5 (align_corners: s = o * (in - 1) / (out - 1))."""
    _nin(op, xs, {1, 2})
    fmt = _data_format(op)
    x = _to_ncx(_f64(xs[0]), fmt)
    if x.ndim < 3:
        raise _err(op, f"src must have spatial dims, got shape {x.shape}")
    mode = _choice(op, "mode", ("nearest", "linear", "bilinear", "trilinear"))
    ctm = _choice(op, "coordinate_transformation_mode", ("half_pixel", "align_corners"), "half_pixel")
    in_sp = x.shape[2:]
    nsp = len(in_sp)
    has_sizes, has_scales = bool(op.attrs.get("sizes")), bool(op.attrs.get("scales"))
    if has_sizes == has_scales and len(xs) == 1:
        raise _err(op, "exactly one of the attributes 'sizes' and 'scales' must be given")
    if len(xs) == 2:                 # a sizes input tensor overrides the attributes
        sizes = [int(v) for v in np.asarray(xs[1]).reshape(-1)]
    elif has_sizes:
        sizes = _ints(op, "sizes")
    else:
        scales = _floats(op, "scales")
        if len(scales) != nsp:
            raise _err(op, f"scales {scales} must hold {nsp} values")
        sizes = [int(np.float32(n) * np.float32(sc)) for n, sc in zip(in_sp, scales)]   # oneDNN: f32, truncated
    if len(sizes) != nsp or any(v <= 0 for v in sizes):
        raise _err(op, f"sizes {sizes} must hold {nsp} positive values")
    y = x
    for ax, (n_in, n_out) in enumerate(zip(in_sp, sizes)):
        axis = 2 + ax
        if mode == "nearest":
            if ctm != "half_pixel":
                raise _err(op, "nearest mode supports only half_pixel coordinates")
            idx = (2 * np.arange(n_out) + 1) * n_in // (2 * n_out)     # floor((o + 0.5) * in / out), exactly
            y = np.take(y, idx, axis=axis)
            continue
        s = _interp_coords(n_out, n_in, ctm)
        left = np.maximum(np.trunc(s), 0).astype(np.int64)
        right = np.minimum(np.where(s < 0, 0, np.ceil(s)), n_in - 1).astype(np.int64)
        left = np.minimum(left, n_in - 1)
        w1 = np.abs(s - left)
        w1 = np.where(left == right, 0.0, w1)
        shape = [1] * y.ndim
        shape[axis] = -1
        y = np.take(y, left, axis=axis) * (1 - w1).reshape(shape) + \
            np.take(y, right, axis=axis) * w1.reshape(shape)
    return [_from_ncx(y, fmt)]


# --------------------------------------------------------------------------- quantization

def _q_params(op: Op, x: np.ndarray, scales, zps):
    qtype = _choice(op, "qtype", ("per_tensor", "per_channel"), "per_tensor")
    scales = np.asarray(scales, np.float64).reshape(-1)
    zps = np.zeros(scales.shape) if zps is None else np.asarray(zps, np.float64).reshape(-1)
    if zps.size != scales.size:
        raise _err(op, f"{scales.size} scales but {zps.size} zero points")
    if qtype == "per_tensor":
        if scales.size != 1:
            raise _err(op, f"per_tensor needs one scale, got {scales.size}")
        return scales.reshape(()), zps.reshape(())
    axis = _axis(op, _int(op, "axis", 1), x.ndim)
    if scales.size != x.shape[axis]:
        raise _err(op, f"per_channel along axis {axis} needs {x.shape[axis]} scales, got {scales.size}")
    shape = [1] * x.ndim
    shape[axis] = -1
    return scales.reshape(shape), zps.reshape(shape)


def _quantize(op: Op, x: np.ndarray, scales, zps) -> list:
    s, z = _q_params(op, x, scales, zps)
    dt = _out_dtype(op, 0, np.dtype(np.int8))
    if not np.issubdtype(dt, np.integer):
        raise _err(op, f"output data type must be s8 or u8, got {dt}")
    info = np.iinfo(dt)
    # oneDNN reorders round to nearest even and saturate
    return [np.clip(np.rint(x / s + z), info.min, info.max)]


def _dequantize(op: Op, x: np.ndarray, scales, zps) -> list:
    s, z = _q_params(op, x, scales, zps)
    return [(x - z) * s]


@_register(OpKind.Quantize)
def _quantize_static(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    return _quantize(op, _f64(xs[0]), _floats(op, "scales"), _ints(op, "zps") if "zps" in op.attrs else None)


@_register(OpKind.Dequantize)
def _dequantize_static(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    return _dequantize(op, _f64(xs[0]), _floats(op, "scales"), _ints(op, "zps") if "zps" in op.attrs else None)


@_register(OpKind.DynamicQuantize)
def _quantize_dynamic(op: Op, xs: list) -> list:
    _nin(op, xs, {2, 3})
    return _quantize(op, _f64(xs[0]), xs[1], xs[2] if len(xs) == 3 else None)


@_register(OpKind.DynamicDequantize)
def _dequantize_dynamic(op: Op, xs: list) -> list:
    _nin(op, xs, {2, 3})
    return _dequantize(op, _f64(xs[0]), xs[1], xs[2] if len(xs) == 3 else None)


# --------------------------------------------------------------------------- evaluate / run

SUPPORTED_KINDS: frozenset = frozenset(_REGISTRY)
"""The op kinds :func:`evaluate` implements."""

# outputs holding statistics: oneDNN dumps sometimes give them keep-dims shapes
_STATS_OUTPUTS = {OpKind.LayerNorm, OpKind.GroupNorm, OpKind.RMSNorm, OpKind.SoftMax}


_DEFAULT_DTYPES = {
    (OpKind.GreaterEqual, 0): np.dtype(np.bool_), (OpKind.Quantize, 0): np.dtype(np.int8),
    (OpKind.DynamicQuantize, 0): np.dtype(np.int8), (OpKind.Dequantize, 0): np.dtype(np.float32),
    (OpKind.DynamicDequantize, 0): np.dtype(np.float32), (OpKind.GenIndex, 0): np.dtype(np.int32),
    (OpKind.Dropout, 1): np.dtype(np.uint8),
}


def _out_dtype(op: Op, i: int, fallback: np.dtype) -> np.dtype:
    t = op.outputs[i].dtype if i < len(op.outputs) else DataType.undef
    if t is DataType.undef:
        return fallback
    try:
        return t.numpy
    except GraphError:
        raise _err(op, f"output {i} (tensor {op.outputs[i].id}) has data type {t.value}, "
                       f"which the reference interpreter cannot hold") from None


def _shape_matches(shape: tuple, lt: LogicalTensor) -> bool:
    if lt.shape is None:
        return True
    return len(shape) == len(lt.shape) and all(d < 0 or d == s for s, d in zip(shape, lt.shape))


def _cast(value: np.ndarray, dt: np.dtype) -> np.ndarray:
    value = np.asarray(value)
    if np.issubdtype(dt, np.integer) and not np.issubdtype(value.dtype, np.integer) \
            and value.dtype != np.bool_:
        info = np.iinfo(dt)
        value = np.clip(np.rint(value), info.min, info.max)
    with np.errstate(all="ignore"):
        return value.astype(dt)


def evaluate(op: Op, inputs: list) -> list:
    """Run one op on numpy arrays (in ``op.inputs`` order) and return its outputs (in
    ``op.outputs`` order), each cast to its logical tensor's data type.

    Raises GraphError naming the op when the op kind is not implemented, the input count or a
    shape does not fit, or an attribute is missing or bad.

    Example:
        >>> import numpy as np
        >>> from graph_api.logical_tensor import DataType, LogicalTensor
        >>> from graph_api.op import Op, OpKind
        >>> a = LogicalTensor(0, DataType.f32, (2, 3)); b = LogicalTensor(1, DataType.f32, (3, 2))
        >>> c = LogicalTensor(2, DataType.f32, (2, 2))
        >>> op = Op(0, OpKind.MatMul, [a, b], [c])
        >>> evaluate(op, [np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)])[0]
        array([[3., 3.],
               [3., 3.]], dtype=float32)
        >>> evaluate(Op(1, OpKind.Wildcard, [a], [c]), [np.ones((2, 3))])
        Traceback (most recent call last):
        ...
        graph_api.logical_tensor.GraphError: op 1 (Wildcard): the reference interpreter does not implement this op
    """
    handler = _REGISTRY.get(op.kind)
    if handler is None:
        raise _err(op, "the reference interpreter does not implement this op")
    inputs = list(inputs)
    if len(inputs) != len(op.inputs):
        raise _err(op, f"was given {len(inputs)} input arrays for its {len(op.inputs)} inputs")
    arrays = []
    for i, (lt, x) in enumerate(zip(op.inputs, inputs)):
        x = np.asarray(x)
        if not _shape_matches(x.shape, lt):
            raise _err(op, f"input {i} (tensor {lt.id}) has shape {x.shape} but the logical tensor "
                           f"says {lt.shape}")
        arrays.append(x)
    results = handler(op, arrays)
    if len(results) != len(op.outputs):
        raise _err(op, f"produces {len(results)} outputs but the op declares {len(op.outputs)}")
    # output dtype when the logical tensor's is undef: the data input's
    fallback = arrays[1 if op.kind is OpKind.Select else 0].dtype if arrays else np.dtype(np.float32)
    outs = []
    for i, (lt, value) in enumerate(zip(op.outputs, results)):
        value = np.asarray(value)
        if not _shape_matches(value.shape, lt):
            if op.kind in _STATS_OUTPUTS and i > 0 and lt.is_known() and \
                    int(np.prod(lt.shape, dtype=np.int64)) == value.size:
                value = value.reshape(lt.shape)
            else:
                raise _err(op, f"output {i} (tensor {lt.id}) has shape {value.shape} but the logical "
                               f"tensor says {lt.shape}")
        default = _DEFAULT_DTYPES.get((op.kind, i), fallback)
        if op.kind in _STATS_OUTPUTS and i > 0:
            default = np.dtype(np.float32)
        outs.append(_cast(value, _out_dtype(op, i, default)))
    return outs


def _op_list(graph_or_ops) -> list:
    ops = list(graph_or_ops.topological_ops()) if hasattr(graph_or_ops, "topological_ops") \
        else list(graph_or_ops)
    for op in ops:
        if not isinstance(op, Op):
            raise GraphError(f"run() expects Ops, got {type(op).__name__}")
    return ops


def _check_feed(tid: int, arr: np.ndarray, lt: LogicalTensor, op: Op) -> None:
    where = f"tensor {tid} (an input of op {op.id} ({op.kind.value}))"
    if lt.dtype is not DataType.undef:
        try:
            want = lt.dtype.numpy
        except GraphError:
            raise GraphError(f"{where} has data type {lt.dtype.value}, which the reference "
                             f"interpreter cannot hold") from None
        if arr.dtype != want:
            raise GraphError(f"{where}: the feed has dtype {arr.dtype} but the logical tensor is "
                             f"{lt.dtype.value}")
    if not _shape_matches(arr.shape, lt):
        raise GraphError(f"{where}: the feed has shape {arr.shape} but the logical tensor says {lt.shape}")


def run(graph_or_ops, feeds: dict) -> dict:
    """Run a graph and return ``{tensor id: array}`` for every graph output: each tensor an op
    produces and no op consumes, and each input of an End op.

    ``graph_or_ops`` is a list of Ops in any order (they are sorted by data dependence: an op
    runs once all its input tensors are available) or any object with a ``topological_ops()``
    method. ``feeds`` maps every graph input tensor id (consumed, never produced; constant
    tensors included) to an array matching its logical tensor's dtype and known shape.

    Raises GraphError naming the tensor and the op for a missing or mismatched feed, a feed for a
    tensor that is not a graph input, a tensor produced twice, or a cycle.

    Example:
        >>> import numpy as np
        >>> from graph_api.logical_tensor import DataType, LogicalTensor
        >>> from graph_api.op import Op, OpKind
        >>> t = [LogicalTensor(i, DataType.f32, (3,)) for i in range(3)]
        >>> ops = [Op(1, OpKind.ReLU, [t[1]], [t[2]]), Op(0, OpKind.Abs, [t[0]], [t[1]])]
        >>> run(ops, {0: np.array([-1, 0, 2], np.float32)})
        {2: array([1., 0., 2.], dtype=float32)}
        >>> run(ops, {})
        Traceback (most recent call last):
        ...
        graph_api.logical_tensor.GraphError: tensor 0 (input 0 of op 0 (Abs)) has no feed
    """
    ops = _op_list(graph_or_ops)
    producer: dict[int, Op] = {}
    consumed: dict[int, tuple] = {}      # tensor id -> (first consumer op, input index, lt)
    for op in ops:
        for lt in op.outputs:
            if lt.id in producer:
                raise GraphError(f"tensor {lt.id} is produced by both op {producer[lt.id].id} and op {op.id}")
            producer[lt.id] = op
    for op in ops:
        for i, lt in enumerate(op.inputs):
            consumed.setdefault(lt.id, (op, i, lt))

    values: dict[int, np.ndarray] = {}
    for tid, feed in feeds.items():
        if tid in producer:
            raise GraphError(f"tensor {tid} is produced by op {producer[tid].id} "
                             f"({producer[tid].kind.value}) and cannot be fed")
        if tid not in consumed:
            raise GraphError(f"feed for tensor {tid}, which no op of the graph uses")
        op, _, lt = consumed[tid]
        arr = np.asarray(feed)
        _check_feed(tid, arr, lt, op)
        values[tid] = arr
    for op in ops:
        for i, lt in enumerate(op.inputs):
            if lt.id not in producer and lt.id not in values:
                raise GraphError(f"tensor {lt.id} (input {i} of op {op.id} ({op.kind.value})) has no feed")

    # Kahn's algorithm, preferring the given order among ready ops
    waiting = {pos: {lt.id for lt in op.inputs if lt.id not in values} for pos, op in enumerate(ops)}
    users: dict[int, list[int]] = {}
    for pos, ids in waiting.items():
        for tid in ids:
            users.setdefault(tid, []).append(pos)
    ready = [pos for pos, ids in waiting.items() if not ids]
    heapq.heapify(ready)
    done = set()
    while ready:
        pos = heapq.heappop(ready)
        op = ops[pos]
        outs = evaluate(op, [values[lt.id] for lt in op.inputs])
        done.add(pos)
        for lt, v in zip(op.outputs, outs):
            values[lt.id] = v
            for user in users.get(lt.id, ()):
                waiting[user].discard(lt.id)
                if not waiting[user]:
                    heapq.heappush(ready, user)
    if len(done) != len(ops):
        pos = min(set(range(len(ops))) - done)
        op = ops[pos]
        tid = min(waiting[pos])
        raise GraphError(f"cycle: op {op.id} ({op.kind.value}) waits for tensor {tid}, "
                         f"which depends on the op's own outputs")

    result = {}
    for op in ops:
        for lt in op.outputs:
            if lt.id not in consumed:
                result[lt.id] = values[lt.id]
        if op.kind is OpKind.End:
            for lt in op.inputs:
                result[lt.id] = values[lt.id]
    return result
