"""SoftMax (with its optional stats output and ``inf_as_zero`` mode) and LogSoftmax.

Example:
    >>> from tilefuse.graph_api.ops import op_def
    >>> op_def("SoftMax").schema.attrs["axis"].default, op_def("LogSoftmax").schema.attrs["axis"].default
    (1, -1)
"""
from __future__ import annotations

import numpy as np
from tilefuse.tensorir import ops as T

from ..op import Op, OpKind
from ._numpy import _int, _choice, _nin, _nout, _f64, _axis
from ._shapes import _shape_axis, _checked_axis_identity
from .registry import define
from .schema import FP, F32, optional, schema, get_attr
from .eltwise import lower_unary


# ---- shape rule -------------------------------------------------------------------------------------

def _shape_softmax(op, s):
    axis = _shape_axis(get_attr(op, "axis"), len(s[0]))
    stats = tuple(1 if k == axis else d for k, d in enumerate(s[0]))
    return [s[0], stats][:len(op.outputs)]


# ---- reference --------------------------------------------------------------------------------------

def _ref_softmax(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    x = _f64(xs[0])
    is_log = op.kind is OpKind.LogSoftmax
    _nout(op, {1} if is_log else {1, 2})
    axis = _axis(op, _int(op, "axis"), x.ndim)
    inf_as_zero = not is_log and _choice(op, "mode", ("none", "inf_as_zero")) == "inf_as_zero"
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


# ---- the records ----------------------------------------------------------------------------------
define(schema("SoftMax", "src:T1", "dst:T2 stats:T3",
              {"axis": optional("s64", 1), "mode": optional("string", "none", ("none", "inf_as_zero"))},
              {"T1": FP, "T2": FP, "T3": F32}, n_out={1, 2}),
       shape=_shape_softmax, reference=_ref_softmax,
       lower=lower_unary(lambda op, x: T.softmax(x, get_attr(op, "axis"), get_attr(op, "mode"),
                                                 stats=len(op.outputs) == 2)))
define(schema("LogSoftmax", "src:T", "dst:T", {"axis": optional("s64", -1)}),
       shape=_checked_axis_identity, reference=_ref_softmax,
       lower=lower_unary(lambda op, x: T.log_softmax(x, get_attr(op, "axis"))))
