"""Gradient ops (oneDNN's training op set): element-wise backward ops, SoftMax/LogSoftmax,
BiasAdd and BatchNorm backward with shape rules, references and compute definitions; the
convolution, pooling, PReLU, LayerNorm and Interpolate gradients as schemas only.

Example:
    >>> from tilefuse.graph_api.ops import op_def
    >>> op_def("ReLUBackward").schema.attrs["use_dst"].default, op_def("MaxPoolBackward").lower is None
    (True, True)
"""
from __future__ import annotations

import math

import numpy as np
from tilefuse.tensorir import ops as T

from ..op import Op, OpKind
from ._lower import _attrs, _inputs
from ._numpy import (_err, _int, _float, _bool, _choice, _nin, _nout, _f64, _axis, _data_format, _channel_axis,
    _vec_erf, _sigmoid)
from ._shapes import _require, _shape_axis, _channels, _same_shapes
from ._window import check_pads
from .registry import define
from .schema import FP, FP_PARAMS, S32, optional, required, schema, DATA_FORMAT, get_attr
from .conv import CONV_ATTRS, CONVT_ATTRS
from .eltwise import GELU_MODE, lower_unary
from .norm import BN_ATTRS
from .pool import POOL_ATTRS
from .resample import INTERP_ATTRS, check_interpolate


# ---- shape rules ------------------------------------------------------------------------------------

def _shape_softmax_backward(op, s):
    _shape_axis(get_attr(op, "axis"), len(s[0]))
    return _same_shapes(op, s)


def _shape_bias_add_backward(op, s):
    _require(len(s[0]) >= 2, f"diff_dst needs rank >= 2, got shape {list(s[0])}")
    return [(_channels(op, s),)]


def _shape_batchnorm_backward(op, s):
    c = _channels(op, s)
    _require(tuple(s[1]) == tuple(s[0]), f"diff_dst shape {list(s[1])} must be src's {list(s[0])}")
    for i, shape in enumerate(s[2:], 2):
        _require(tuple(shape) == (c,), f"input {i} shape {list(shape)} must be [{c}] (the channels)")
    return [s[0], (c,), (c,)][:len(op.outputs)]


# ---- reference --------------------------------------------------------------------------------------

def _ref_gelu_grad(op: Op, x: np.ndarray) -> np.ndarray:
    if _choice(op, "mode", ("gelu_erf", "gelu_tanh")) == "gelu_erf":
        return 0.5 * (1.0 + _vec_erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    k, fit = math.sqrt(2.0 / math.pi), 0.044715
    t = np.tanh(k * (x + fit * x ** 3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * fit * x * x)


def _ref_hardswish_grad(x: np.ndarray) -> np.ndarray:
    return np.where((x > -3.0) & (x < 3.0), (2.0 * x + 3.0) / 6.0, np.where(x >= 3.0, 1.0, 0.0))


def _ref_mish_grad(x: np.ndarray) -> np.ndarray:
    t = np.tanh(np.logaddexp(0.0, x))
    return t + x * _sigmoid(x) * (1.0 - t * t)


def _ref_eltwise_backward(gradient):
    """diff_src = diff_dst * f'(...), from (src or dst, diff_dst); ``gradient(op, v)`` is f'."""
    def reference(op: Op, xs: list) -> list:
        _nin(op, xs, {2})
        v, dd = _f64(xs[0]), _f64(xs[1])
        if v.shape != dd.shape:
            raise _err(op, f"src/dst shape {v.shape} and diff_dst shape {dd.shape} differ")
        with np.errstate(all="ignore"):
            return [dd * gradient(op, v)]
    return reference


def _ref_softmax_backward(op: Op, xs: list) -> list:
    """SoftMax: diff_src = dst * (diff_dst - sum(diff_dst * dst)); LogSoftmax: diff_src =
    diff_dst - exp(dst) * sum(diff_dst), sums along ``axis``."""
    _nin(op, xs, {2})
    dd, y = _f64(xs[0]), _f64(xs[1])
    if dd.shape != y.shape:
        raise _err(op, f"diff_dst shape {dd.shape} and dst shape {y.shape} differ")
    is_log = op.kind is OpKind.LogSoftmaxBackward
    axis = _axis(op, _int(op, "axis"), y.ndim)
    with np.errstate(all="ignore"):
        if is_log:
            return [dd - np.exp(y) * dd.sum(axis=axis, keepdims=True)]
        return [y * (dd - (dd * y).sum(axis=axis, keepdims=True))]


def _ref_bias_add_backward(op: Op, xs: list) -> list:
    """diff_bias: diff_dst summed over every axis but the channel axis."""
    _nin(op, xs, {1})
    dd = _f64(xs[0])
    if dd.ndim < 2:
        raise _err(op, f"diff_dst must have at least 2 dims, got shape {dd.shape}")
    c = _channel_axis(op, dd.ndim, _data_format(op))
    return [dd.sum(axis=tuple(a for a in range(dd.ndim) if a != c))]


def _ref_batchnorm_backward(op: Op, xs: list) -> list:
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


# ---- lowering ---------------------------------------------------------------------------------------

def _lower_batch_norm_backward(op, xs):
    _inputs(op, xs, 4, 5)
    return T.batch_norm_backward(*xs[:4], gamma=xs[4] if len(xs) == 5 else None,
                                 **_attrs(op, "epsilon", "data_format"))


# ---- the records ----------------------------------------------------------------------------------
USE_DST = {"use_dst": optional("bool", True)}


def _lower_pair(fn):
    return lambda op, xs: fn(op, *_inputs(op, xs, 2))


def _required_f32(*names) -> dict:
    return {n: required("f32") for n in names}


def _use_dst(op) -> bool:
    return _bool(op, "use_dst")


# kind: (attributes, f' in float64 from src (or dst when use_dst), compute definition of diff_src)
_ELTWISE = {
    "ReLUBackward": (USE_DST, lambda op, v: (v > 0).astype(np.float64),
                     lambda op, d, g: T.relu_backward(d, g, get_attr(op, "use_dst"))),
    "SigmoidBackward": (USE_DST, lambda op, v: (lambda s: s * (1.0 - s))(v if _use_dst(op) else _sigmoid(v)),
                        lambda op, d, g: T.sigmoid_backward(d, g, get_attr(op, "use_dst"))),
    "TanhBackward": (USE_DST, lambda op, v: (lambda t: (1.0 - t) * (1.0 + t))(v if _use_dst(op) else np.tanh(v)),
                     lambda op, d, g: T.tanh_backward(d, g, get_attr(op, "use_dst"))),
    "EluBackward": ({**_required_f32("alpha"), **USE_DST}, lambda op, v: np.where(
        v > 0, 1.0, v + _float(op, "alpha") if _use_dst(op) else _float(op, "alpha") * np.exp(np.minimum(v, 0.0))),
        lambda op, d, g: T.elu_backward(d, g, get_attr(op, "alpha"), get_attr(op, "use_dst"))),
    "GELUBackward": ({"mode": GELU_MODE}, _ref_gelu_grad, lambda op, d, g: T.gelu_backward(d, g, get_attr(op, "mode"))),
    "HardSigmoidBackward": (_required_f32("alpha", "beta"), lambda op, v: np.where(
        (lambda a: (a > 0) & (a < 1))(_float(op, "alpha") * v + _float(op, "beta")), _float(op, "alpha"), 0.0),
        lambda op, d, g: T.hardsigmoid_backward(d, g, get_attr(op, "alpha"), get_attr(op, "beta"))),
    "HardSwishBackward": ({}, lambda op, v: _ref_hardswish_grad(v), lambda op, d, g: T.hardswish_backward(d, g)),
    "MishBackward": ({}, lambda op, v: _ref_mish_grad(v), lambda op, d, g: T.mish_backward(d, g)),
    "SoftPlusBackward": ({"beta": optional("f32", 1.0)}, lambda op, v: _sigmoid(_float(op, "beta") * v),
                         lambda op, d, g: T.softplus_backward(d, g, get_attr(op, "beta"))),
    "SqrtBackward": (USE_DST, lambda op, v: 0.5 / (v if _use_dst(op) else np.sqrt(v)),
                     lambda op, d, g: T.sqrt_backward(d, g, get_attr(op, "use_dst"))),
    "AbsBackward": ({}, lambda op, v: np.sign(v), lambda op, d, g: T.abs_backward(d, g)),
    "ClampBackward": ({**_required_f32("min", "max"), **USE_DST},
                      lambda op, v: ((v > _float(op, "min")) & (v < _float(op, "max"))).astype(np.float64),
                      lambda op, d, g: T.clamp_backward(d, g, get_attr(op, "min"), get_attr(op, "max"),
                                                        get_attr(op, "use_dst"))),
}
# element-wise: src (or dst):T, diff_dst:T -> diff_src:T
for _kind, (_attrs_, _gradient, _lowering) in _ELTWISE.items():
    define(schema(_kind, "src:T diff_dst:T", "diff_src:T", _attrs_), shape=_same_shapes,
           reference=_ref_eltwise_backward(_gradient), lower=_lower_pair(_lowering))
define(schema("LogSoftmaxBackward", "diff_dst:T dst:T", "diff_src:T", {"axis": optional("s64", -1)}),
       shape=_shape_softmax_backward, reference=_ref_softmax_backward,
       lower=_lower_pair(lambda op, g, d: T.log_softmax_backward(g, d, get_attr(op, "axis"))))
define(schema("SoftMaxBackward", "diff_dst:T1 dst:T1", "diff_src:T2", {"axis": optional("s64", 1)},
              {"T1": FP, "T2": FP}),
       shape=_shape_softmax_backward, reference=_ref_softmax_backward,
       lower=_lower_pair(lambda op, g, d: T.softmax_backward(g, d, get_attr(op, "axis"))))
define(schema("PReLUBackward", "src:T slope:T diff_dst:T", "diff_src:T diff_slope:T", {"data_format": DATA_FORMAT}))
for _kind in ("BiasAddBackward", "BiasAddBackprop"):
    define(schema(_kind, "diff_dst:T", "diff_bias:T", {"data_format": DATA_FORMAT}), shape=_shape_bias_add_backward,
           reference=_ref_bias_add_backward,
           lower=lower_unary(lambda op, x: T.bias_add_backward(x, get_attr(op, "data_format"))))
define(schema("BatchNormTrainingBackward", "src:T1 diff_dst:T1 mean:T2 variance:T2 gamma:T2",
              "diff_src:T1 diff_gamma:T2 diff_beta:T2", BN_ATTRS, {"T1": FP, "T2": FP_PARAMS}, n_in={4, 5},
              n_out={1, 2, 3}),
       shape=_shape_batchnorm_backward, reference=_ref_batchnorm_backward, lower=_lower_batch_norm_backward)
define(schema("LayerNormBackward", "src:T1 diff_dst:T1 mean:T2 variance:T2 gamma:T2 beta:T2",
              "diff_src:T1 diff_gamma:T2 diff_beta:T2",
              {"begin_norm_axis": optional("s64", -1), "use_affine": optional("bool", True),
               "epsilon": optional("f32", 1e-5)},
              {"T1": FP, "T2": FP_PARAMS}, n_in={4, 5, 6}, n_out={1, 3}))

# convolution and pooling gradients: schemas only (no shape rule, reference or compute definition)
define(schema("ConvolutionBackwardData", "diff_dst:T1 weights:T1 dst_shape:T2", "diff_src:T1",
              {**CONV_ATTRS, "output_padding": optional("s64[]"), "dst_shape": optional("s64[]")},
              {"T1": FP, "T2": S32}, n_in={2, 3}, checks=[check_pads]))
define(schema("ConvolutionBackwardWeights", "src:T1 diff_dst:T1 weights_shape:T2", "diff_weights:T1",
              {**CONV_ATTRS, "weights_shape": optional("s64[]")}, {"T1": FP, "T2": S32}, n_in={2, 3},
              checks=[check_pads]))
define(schema("ConvTransposeBackwardData", "diff_dst:T weights:T", "diff_src:T", CONVT_ATTRS, checks=[check_pads]))
define(schema("ConvTransposeBackwardWeights", "src:T1 diff_dst:T1 weights_shape:T2", "diff_weights:T1",
              {**CONVT_ATTRS, "weights_shape": optional("s64[]")}, {"T1": FP, "T2": S32}, n_in={2, 3},
              checks=[check_pads]))
define(schema("MaxPoolBackward", "src:T diff_dst:T", "diff_src:T", {**POOL_ATTRS, "dilations": optional("s64[]")},
              checks=[check_pads]))
define(schema("AvgPoolBackward", "diff_dst:T src_shape:T1", "diff_src:T",
              {**POOL_ATTRS, "exclude_pad": required("bool"), "src_shape": optional("s64[]")}, {"T": FP, "T1": S32},
              n_in={1, 2}, checks=[check_pads]))
define(schema("InterpolateBackward", "src:T1 diff_dst:T1 sizes:T2", "diff_src:T1", INTERP_ATTRS,
              {"T1": FP, "T2": S32}, n_in={2, 3}, checks=[check_interpolate]))
