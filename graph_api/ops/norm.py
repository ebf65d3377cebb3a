"""Normalizations: BatchNormInference (and the forward-training schema), LayerNorm,
GroupNorm and RMSNorm.

Example:
    >>> from tilefuse.graph_api.ops import op_def
    >>> op_def("LayerNorm").schema.attrs["begin_norm_axis"].default
    -1
"""
from __future__ import annotations

import numpy as np
from tilefuse.tensorir import ops as T

from ..op import Op
from ._lower import _attrs, _inputs
from ._numpy import (_err, _check_broadcasts_to, _int, _float, _bool, _nin, _nout, _f64, _axis, _data_format,
    _channel_axis, _to_ncx, _from_ncx)
from ._shapes import _require, _shape_axis, _channels
from .registry import define
from .schema import FP, FP_PARAMS, optional, required, schema, DATA_FORMAT, get_attr


# ---- schema rules -----------------------------------------------------------------------------------

def _check_stats_outputs(op):
    keep_stats = get_attr(op, "keep_stats")
    want = 3 if keep_stats else 1
    if len(op.outputs) != want:
        return f"keep_stats={keep_stats} needs {want} outputs, got {len(op.outputs)}"
    return None


def _check_epsilon(op):
    eps = op.attrs.get("epsilon")
    if eps is not None and not float(eps) >= 0:      # NaN too
        return f"epsilon must be a non-negative number, got {eps}"
    return None


# ---- shape rules ------------------------------------------------------------------------------------

def _shape_batchnorm(op, s):
    c = _channels(op, s)
    for i, shape in enumerate(s[1:], 1):
        _require(tuple(shape) == (c,), f"input {i} shape {list(shape)} must be [{c}] (the channels)")
    return [s[0]] + [(c,)] * (len(op.outputs) - 1)


def _shape_layernorm(op, s):
    axis = _shape_axis(get_attr(op, "begin_norm_axis"), len(s[0]), "begin_norm_axis")
    return [s[0]] + [s[0][:axis]] * (len(op.outputs) - 1)


def _shape_groupnorm(op, s):
    g, c = get_attr(op, "groups"), _channels(op, s)
    _require(g > 0 and c % g == 0, f"channels {c} are not divisible by groups {g}")
    return [s[0]] + [(s[0][0], g)] * (len(op.outputs) - 1)


def _shape_rms_norm(op, s):
    axis = _shape_axis(get_attr(op, "begin_norm_axis"), len(s[0]), "begin_norm_axis")
    return [s[0], s[0][:axis]][:len(op.outputs)]


# ---- reference --------------------------------------------------------------------------------------

def _ref_batchnorm(op: Op, xs: list) -> list:
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


def _ref_norm_axes(op: Op, x: np.ndarray) -> int:
    b = _int(op, "begin_norm_axis")
    return _axis(op, b, x.ndim, "begin_norm_axis")


def _ref_check_keep_stats(op: Op) -> None:
    if _bool(op, "keep_stats") and len(op.outputs) != 3:
        raise _err(op, f"keep_stats=True (the default) needs 3 outputs (dst, mean, variance), "
                       f"got {len(op.outputs)}")


def _ref_affine_param(op: Op, v: np.ndarray, norm_shape: tuple, name: str) -> np.ndarray:
    if v.size != int(np.prod(norm_shape, dtype=np.int64)):
        raise _err(op, f"{name} shape {v.shape} does not match the normalized shape {norm_shape}")
    return v.reshape(norm_shape)


def _ref_layer_norm(op: Op, xs: list) -> list:
    _nin(op, xs, {1, 3})
    _nout(op, {1, 3})
    _ref_check_keep_stats(op)
    x = _f64(xs[0])
    b = _ref_norm_axes(op, x)
    axes = tuple(range(b, x.ndim))
    eps = _float(op, "epsilon")
    use_affine = _bool(op, "use_affine")
    if use_affine and len(xs) != 3:
        raise _err(op, "use_affine=True needs gamma and beta inputs (3 inputs)")
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    if use_affine:
        norm_shape = x.shape[b:]
        y = y * _ref_affine_param(op, _f64(xs[1]), norm_shape, "gamma") + \
            _ref_affine_param(op, _f64(xs[2]), norm_shape, "beta")
    stats = [mean.reshape(x.shape[:b]), var.reshape(x.shape[:b])]
    return [y] + stats[:len(op.outputs) - 1]


def _ref_group_norm(op: Op, xs: list) -> list:
    _nin(op, xs, {1, 3})
    _nout(op, {1, 3})
    _ref_check_keep_stats(op)
    fmt = _data_format(op)
    x = _to_ncx(_f64(xs[0]), fmt)
    if x.ndim < 2:
        raise _err(op, f"src must have at least 2 dims, got shape {x.shape}")
    g = _int(op, "groups")
    n, c = x.shape[:2]
    if g <= 0 or c % g:
        raise _err(op, f"{c} channels are not divisible into groups={g}")
    eps = _float(op, "epsilon")
    use_affine = _bool(op, "use_affine")
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


def _ref_rms_norm(op: Op, xs: list) -> list:
    """dst = gamma * src / sqrt(mean(src**2 over [begin_norm_axis, rank)) + epsilon); the
    optional second output is rrms = 1 / sqrt(mean(src**2) + epsilon)."""
    _nin(op, xs, {1, 2})
    _nout(op, {1, 2})
    x = _f64(xs[0])
    b = _ref_norm_axes(op, x)
    eps = _float(op, "epsilon")
    rrms = 1.0 / np.sqrt((x * x).mean(axis=tuple(range(b, x.ndim)), keepdims=True) + eps)
    y = x * rrms
    if len(xs) == 2:
        gamma = _f64(xs[1])
        _check_broadcasts_to(op, "gamma", gamma.shape, y.shape, "src")
        y = y * gamma
    return [y, rrms.reshape(x.shape[:b])][:len(op.outputs)]


# ---- lowering ---------------------------------------------------------------------------------------

def _lower_batch_norm(op, xs):
    return T.batch_norm_inference(*_inputs(op, xs, 5), **_attrs(op, "epsilon", "data_format"))


def _lower_affine_inputs(op, xs):
    _inputs(op, xs, 1, 3)
    return (xs[1], xs[2]) if get_attr(op, "use_affine") and len(xs) == 3 else (None, None)


def _lower_layer_norm(op, xs):
    gamma, beta = _lower_affine_inputs(op, xs)
    return T.layer_norm(xs[0], gamma, beta, get_attr(op, "begin_norm_axis"), get_attr(op, "epsilon"),
                        gamma is not None, len(op.outputs) == 3)


def _lower_group_norm(op, xs):
    gamma, beta = _lower_affine_inputs(op, xs)
    return T.group_norm(xs[0], gamma, beta, get_attr(op, "groups"), get_attr(op, "epsilon"), gamma is not None,
                        len(op.outputs) == 3, get_attr(op, "data_format"))


def _lower_rms_norm(op, xs):
    _inputs(op, xs, 1, 2)
    return T.rms_norm(xs[0], xs[1] if len(xs) == 2 else None, get_attr(op, "begin_norm_axis"),
                      get_attr(op, "epsilon"))


# ---- the records ----------------------------------------------------------------------------------

BN_ATTRS = {"epsilon": required("f32"), "data_format": DATA_FORMAT}
_NORM_ATTRS = {"keep_stats": optional("bool", True), "use_affine": optional("bool", True),
               "epsilon": optional("f32", 1e-5)}

define(schema("BatchNormInference", "src:T1 gamma:T2 beta:T2 mean:T2 variance:T2", "dst:T1", BN_ATTRS,
              {"T1": FP, "T2": FP_PARAMS}, checks=[_check_epsilon]),
       shape=_shape_batchnorm, reference=_ref_batchnorm, lower=_lower_batch_norm)
define(schema("BatchNormForwardTraining", "src:T1 mean:T2 variance:T2 gamma:T2 beta:T2",
              "dst:T1 running_mean:T2 running_variance:T2 batch_mean:T2 batch_variance:T2",
              {**BN_ATTRS, "momentum": optional("f32")}, {"T1": FP, "T2": FP_PARAMS}, n_in={3, 4, 5},
              checks=[_check_epsilon]),
       shape=_shape_batchnorm)
define(schema("LayerNorm", "src:T1 gamma:T2 beta:T2", "dst:T1 mean:T2 variance:T2",
              {**_NORM_ATTRS, "begin_norm_axis": optional("s64", -1)}, {"T1": FP, "T2": FP_PARAMS}, n_in={1, 3},
              n_out={1, 3}, checks=[_check_stats_outputs, _check_epsilon]),
       shape=_shape_layernorm, reference=_ref_layer_norm, lower=_lower_layer_norm)
define(schema("GroupNorm", "src:T1 gamma:T2 beta:T2", "dst:T1 mean:T2 variance:T2",
              {**_NORM_ATTRS, "groups": required("s64"), "data_format": DATA_FORMAT}, {"T1": FP, "T2": FP_PARAMS},
              n_in={1, 3}, n_out={1, 3}, checks=[_check_stats_outputs, _check_epsilon]),
       shape=_shape_groupnorm, reference=_ref_group_norm, lower=_lower_group_norm)
define(schema("RMSNorm", "src:T1 gamma:T2", "dst:T1", {"begin_norm_axis": optional("s64", -1),
                                                      "epsilon": optional("f32", 1e-5)},
              {"T1": FP, "T2": FP}, n_in={1, 2}, checks=[_check_epsilon]),
       shape=_shape_rms_norm, reference=_ref_rms_norm, lower=_lower_rms_norm)
