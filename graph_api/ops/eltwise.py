"""Element-wise ops: unary (ReLU, Exp, GELU, Clamp, ...), binary with numpy broadcasting
(Add, Multiply, ..., GreaterEqual), comparisons and logic of our own (Equal, Greater,
LogicalAnd/Or/Xor/Not, IsNaN), Select, Pow, PReLU and BiasAdd.

Example:
    >>> from tilefuse.graph_api.ops import op_def
    >>> op_def("GELU").schema.attrs["mode"].default
    'gelu_erf'
"""
from __future__ import annotations

import math

import numpy as np
from tilefuse.tensorir import ops as T

from ..logical_tensor import DataType, GraphError
from ..op import Op, OpKind
from ._lower import _attrs, _inputs
from ._numpy import _err, _attr, _float, _bool, _choice, _nin, _f64, _data_format, _channel_axis, _broadcast, _vec_erf
from ._shapes import _require, broadcast_shapes, _one_way, _channels, _identity
from .registry import define
from .schema import ALL_TYPES, FP, FP_S32, optional, required, schema, DATA_FORMAT, AUTO_BROADCAST, get_attr


# ---- schema rules -----------------------------------------------------------------------------------

def _check_pow(op):
    has_beta = op.attrs.get("beta") is not None
    if has_beta == (len(op.inputs) == 2):
        return "exactly one of the attribute 'beta' and an exponent input must be given"
    return None


# ---- shape rules ------------------------------------------------------------------------------------

def _shape_binary(op, s):
    if get_attr(op, "auto_broadcast") == "none":
        _require(s[0] == s[1], f"auto_broadcast=none needs equal shapes, got {list(s[0])} and {list(s[1])}")
        return [s[0]]
    return [broadcast_shapes(s[0], s[1])]


def _shape_select(op, s):
    if get_attr(op, "auto_broadcast") == "none":
        _require(s[0] == s[1] == s[2], f"auto_broadcast=none needs equal shapes, got {[list(x) for x in s]}")
        return [s[1]]
    out = broadcast_shapes(s[1], s[2])
    _one_way(s[0], out, "cond")
    return [out]


def _shape_pow(op, s):
    return [s[0]] if len(s) == 1 else _shape_binary(op, s)


def _shape_bias_add(op, s):
    c = _channels(op, s)
    _require(tuple(s[1]) == (c,), f"bias shape {list(s[1])} must be [{c}] (the channels)")
    return [s[0]]


# ---- reference --------------------------------------------------------------------------------------

def _ref_softplus(x: np.ndarray, beta: float) -> np.ndarray:
    return np.logaddexp(0.0, beta * x) / beta


def _ref_gelu(op: Op, x: np.ndarray) -> np.ndarray:
    mode = _choice(op, "mode", ("gelu_erf", "gelu_tanh"))
    if mode == "gelu_erf":
        return 0.5 * x * (1.0 + _vec_erf(x / math.sqrt(2.0)))
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _ref_unary(meaning):
    def reference(op: Op, xs: list) -> list:
        _nin(op, xs, {1})
        with np.errstate(all="ignore"):
            return [meaning(op, _f64(xs[0]))]
    return reference


def _ref_binary(meaning):
    def reference(op: Op, xs: list) -> list:
        _nin(op, xs, {2})
        a, b = np.asarray(xs[0]), np.asarray(xs[1])
        _broadcast(op, a, b)
        integral = all(np.issubdtype(v.dtype, np.integer) for v in (a, b))
        if not integral or op.kind is OpKind.Divide:
            a, b = _f64(a), _f64(b)
        else:
            a, b = a.astype(np.int64), b.astype(np.int64)
        with np.errstate(all="ignore"):
            return [meaning(a, b)]
    return reference


def _ref_pow(op: Op, xs: list) -> list:
    """oneDNN's Pow is unary: ``dst = src ** beta``. A legacy two-input form (``src_0 ** src_1``
    with auto_broadcast) is accepted too."""
    _nin(op, xs, {1, 2})
    with np.errstate(all="ignore"):
        if len(xs) == 2:
            a, b = _f64(xs[0]), _f64(xs[1])
            _broadcast(op, a, b)
            return [np.power(a, b)]
        return [np.power(_f64(xs[0]), _float(op, "beta"))]


def _ref_bias_add(op: Op, xs: list) -> list:
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


def _ref_prelu(op: Op, xs: list) -> list:
    _nin(op, xs, {2})
    x, slope = _f64(xs[0]), _f64(xs[1])
    per_channel = _bool(op, "per_channel_broadcast")
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


def _ref_predicate(meaning):
    def reference(op: Op, xs: list) -> list:
        _nin(op, xs, {2})
        a, b = np.asarray(xs[0]), np.asarray(xs[1])
        _broadcast(op, a, b)
        return [meaning(a, b)]
    return reference


def _ref_select(op: Op, xs: list) -> list:
    _nin(op, xs, {3})
    cond = np.asarray(xs[0]).astype(bool)
    a, b = np.asarray(xs[1]), np.asarray(xs[2])
    out = _broadcast(op, a, b)
    mode = _attr(op, "auto_broadcast")
    if mode == "none" and cond.shape != out:
        raise _err(op, f"cond shape {cond.shape} differs from {out} and auto_broadcast is 'none'")
    try:
        if np.broadcast_shapes(cond.shape, out) != out:
            raise ValueError
    except ValueError:
        raise _err(op, f"cond shape {cond.shape} does not broadcast one-way to {out}") from None
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":     # exact: no float round trip for int64
        return [np.where(cond, a, b)]
    return [np.where(cond, _f64(a), _f64(b))]


def _ref_neg(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    x = np.asarray(xs[0])
    return [-(x if np.issubdtype(x.dtype, np.integer) else _f64(x))]


# ---- lowering ---------------------------------------------------------------------------------------

def _lower_pow(op, xs):
    _inputs(op, xs, 1, 2)
    if len(xs) == 2:
        if get_attr(op, "auto_broadcast").lower() == "none" and xs[0].shape != xs[1].shape:
            raise GraphError(f"op {op.id} (Pow): auto_broadcast=none needs equal shapes, got {xs[0].shape} and "
                             f"{xs[1].shape}")
        return T.pow(xs[0], xs[1])
    return T.pow(xs[0], get_attr(op, "beta"))


def _lower_select(op, xs):
    return T.select(*_inputs(op, xs, 3), get_attr(op, "auto_broadcast").lower())


def _lower_bias_add(op, xs):
    return T.bias_add(*_inputs(op, xs, 2), get_attr(op, "data_format"))


def _lower_prelu(op, xs):
    return T.prelu(*_inputs(op, xs, 2), **_attrs(op, "data_format", "per_channel_broadcast"))


# ---- the records ----------------------------------------------------------------------------------

GELU_MODE = optional("string", "gelu_erf", ("gelu_erf", "gelu_tanh"))


def lower_unary(fn):
    """A lowering from ``fn(op, x)`` for a one-input op.

    Example:
        >>> callable(lower_unary(lambda op, x: x))
        True
    """
    return lambda op, xs: fn(op, _inputs(op, xs, 1)[0])


def _lower_binary(fn):
    return lambda op, xs: fn(*_inputs(op, xs, 2), get_attr(op, "auto_broadcast").lower())


def _required_f32(*names) -> dict:
    return {n: required("f32") for n in names}


# kind: (attributes, numpy meaning in float64, compute definition)
_UNARY = {
    "Abs": ({}, lambda op, x: np.abs(x), lambda op, x: T.abs(x)),
    "Exp": ({}, lambda op, x: np.exp(x), lambda op, x: T.exp(x)),
    "Log": ({}, lambda op, x: np.log(x), lambda op, x: T.log(x)),
    "ReLU": ({}, lambda op, x: np.maximum(x, 0.0), lambda op, x: T.relu(x)),
    # oneDNN's eltwise_round is nearbyintf(): half to even under the default rounding mode
    "Round": ({}, lambda op, x: np.rint(x), lambda op, x: T.round(x)),
    "Sigmoid": ({}, lambda op, x: 0.5 * (1.0 + np.tanh(0.5 * x)), lambda op, x: T.sigmoid(x)),
    "Sqrt": ({}, lambda op, x: np.sqrt(x), lambda op, x: T.sqrt(x)),
    "Square": ({}, lambda op, x: x * x, lambda op, x: T.square(x)),
    "Tanh": ({}, lambda op, x: np.tanh(x), lambda op, x: T.tanh(x)),
    "Reciprocal": ({}, lambda op, x: 1.0 / x, lambda op, x: T.reciprocal(x)),
    "Mish": ({}, lambda op, x: x * np.tanh(np.logaddexp(0.0, x)), lambda op, x: T.mish(x)),
    "HardSwish": ({}, lambda op, x: x * np.clip(x / 6.0 + 0.5, 0.0, 1.0), lambda op, x: T.hardswish(x)),
    "Clamp": (_required_f32("min", "max"), lambda op, x: np.minimum(np.maximum(x, _float(op, "min")), _float(op, "max")),
              lambda op, x: T.clamp(x, get_attr(op, "min"), get_attr(op, "max"))),
    "Elu": (_required_f32("alpha"), lambda op, x: np.where(x > 0, x, _float(op, "alpha") * np.expm1(np.minimum(x, 0.0))),
            lambda op, x: T.elu(x, get_attr(op, "alpha"))),
    "LeakyReLU": (_required_f32("alpha"), lambda op, x: np.where(x >= 0, x, _float(op, "alpha") * x),
                  lambda op, x: T.leaky_relu(x, get_attr(op, "alpha"))),
    "HardSigmoid": (_required_f32("alpha", "beta"),
                    lambda op, x: np.clip(_float(op, "alpha") * x + _float(op, "beta"), 0.0, 1.0),
                    lambda op, x: T.hardsigmoid(x, get_attr(op, "alpha"), get_attr(op, "beta"))),
    "SoftPlus": ({"beta": optional("f32", 1.0)}, lambda op, x: _ref_softplus(x, _float(op, "beta")),
                 lambda op, x: T.softplus(x, get_attr(op, "beta"))),
    "GELU": ({"mode": GELU_MODE}, _ref_gelu, lambda op, x: T.gelu(x, get_attr(op, "mode"))),
    "Erf": ({}, lambda op, x: _vec_erf(x), lambda op, x: T.erf(x)),
}
for _kind, (_attrs_, _meaning, _lowering) in _UNARY.items():
    define(schema(_kind, "src:T", "dst:T", _attrs_), shape=_identity, reference=_ref_unary(_meaning),
           lower=lower_unary(_lowering))
define(schema("Neg", "src:T", "dst:T", {}, {"T": FP | {DataType.s32, DataType.s64, DataType.s8}}),
       shape=_identity, reference=_ref_neg, lower=lower_unary(lambda op, x: T.neg(x)))
# Pow: oneDNN's unary form (attribute beta) or the binary form of older oneDNN versions (and ONNX)
define(schema("Pow", "src:T exponent:T", "dst:T", {"beta": optional("f32"), "auto_broadcast": AUTO_BROADCAST},
              n_in={1, 2}, checks=[_check_pow]), shape=_shape_pow, reference=_ref_pow, lower=_lower_pow)

# binary: both inputs and the output share one data type
# kind: (numpy meaning, compute definition)
_BINARY = {"Add": (np.add, T.add), "Subtract": (np.subtract, T.subtract), "Multiply": (np.multiply, T.multiply),
           "Divide": (np.divide, T.divide), "Maximum": (np.maximum, T.maximum), "Minimum": (np.minimum, T.minimum),
           "SquaredDifference": (lambda a, b: (a - b) * (a - b), T.squared_difference),
           "GreaterEqual": (np.greater_equal, T.greater_equal)}
for _kind, (_meaning, _fn) in _BINARY.items():
    if _kind == "GreaterEqual":
        _sch = schema(_kind, "src_0:T1 src_1:T1", "dst:T2", {"auto_broadcast": AUTO_BROADCAST},
                      {"T1": FP_S32, "T2": frozenset({DataType.boolean})})
    else:
        _sch = schema(_kind, "src_0:T src_1:T", "dst:T", {"auto_broadcast": AUTO_BROADCAST},
                      {"T": FP_S32} if _kind in ("Add", "Subtract") else None)
    define(_sch, shape=_shape_binary, reference=_ref_binary(_meaning), lower=_lower_binary(_fn))
_BOOL = frozenset({DataType.boolean})
# comparisons and logic (our own kinds, for masks): kind: (input types, numpy meaning, compute definition)
_PREDICATES = {"Equal": (ALL_TYPES, np.equal, T.equal), "Greater": (ALL_TYPES - _BOOL, np.greater, T.greater),
               "LogicalAnd": (_BOOL, np.logical_and, T.logical_and), "LogicalOr": (_BOOL, np.logical_or, T.logical_or),
               "LogicalXor": (_BOOL, np.logical_xor, T.logical_xor)}
for _kind, (_types, _meaning, _fn) in _PREDICATES.items():
    define(schema(_kind, "src_0:T1 src_1:T1", "dst:T2", {"auto_broadcast": AUTO_BROADCAST}, {"T1": _types, "T2": _BOOL}),
           shape=_shape_binary, reference=_ref_predicate(_meaning), lower=_lower_binary(_fn))
define(schema("LogicalNot", "src:T", "dst:T", {}, {"T": _BOOL}), shape=_identity,
       reference=_ref_unary(lambda op, x: np.logical_not(x)),
       lower=lower_unary(lambda op, x: T.logical_not(x)))
define(schema("IsNaN", "src:T1", "dst:T2", {}, {"T1": FP, "T2": _BOOL}), shape=_identity,
       reference=_ref_unary(lambda op, x: np.isnan(x)),
       lower=lower_unary(lambda op, x: T.is_nan(x)))
define(schema("Select", "cond:T1 src_0:T2 src_1:T2", "dst:T2", {"auto_broadcast": AUTO_BROADCAST},
              {"T1": _BOOL, "T2": ALL_TYPES}),
       shape=_shape_select, reference=_ref_select, lower=_lower_select)
define(schema("PReLU", "src:T slope:T", "dst:T", {"data_format": DATA_FORMAT,
                                                  "per_channel_broadcast": optional("bool", True)}),
       shape=_identity, reference=_ref_prelu, lower=_lower_prelu)
define(schema("BiasAdd", "src:T bias:T", "dst:T", {"data_format": DATA_FORMAT}),
       shape=_shape_bias_add, reference=_ref_bias_add, lower=_lower_bias_add)
