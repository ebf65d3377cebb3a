"""Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1 and ReduceL2
over an ``axes`` attribute (or a run-time axes input, run by the reference interpreter).

Example:
    >>> from tilefuse.graph_api.ops import op_def
    >>> op_def("ReduceSum").schema.attrs["keep_dims"].default
    False
"""
from __future__ import annotations

import numpy as np
from tilefuse.tensorir import ops as T

from ..op import Op
from ._lower import _inputs
from ._numpy import _err, _bool, _ints, _nin, _f64, _axis
from ._shapes import _require, _shape_axis
from .registry import define
from .schema import FP, S32, optional, schema, get_attr


# ---- schema rules -----------------------------------------------------------------------------------

def _check_reduce_axes(op):
    has_axes = bool(op.attrs.get("axes"))
    if len(op.inputs) == 1 and not has_axes:
        return "axes must be given, as a non-empty attribute or as a second input"
    if len(op.inputs) == 2 and has_axes:
        return "axes given both as an attribute and as a second input"
    return None


# ---- shape rule -------------------------------------------------------------------------------------

def _shape_reduce(op, s):
    if len(s) == 2:
        return [None]                      # axes come at run time
    ndim = len(s[0])
    axes = [_shape_axis(a, ndim) for a in get_attr(op, "axes")]
    _require(len(set(axes)) == len(axes), f"axes {list(get_attr(op, 'axes'))} repeat a dim")
    if get_attr(op, "keep_dims"):
        return [tuple(1 if k in axes else d for k, d in enumerate(s[0]))]
    return [tuple(d for k, d in enumerate(s[0]) if k not in axes)]


# ---- reference --------------------------------------------------------------------------------------

def _ref_reduce(reduction):
    def reference(op: Op, xs: list) -> list:
        return _ref_reduce_with(reduction, op, xs)
    return reference


def _ref_reduce_with(reduction, op: Op, xs: list) -> list:
    _nin(op, xs, {1, 2})
    x = _f64(xs[0])
    keep = _bool(op, "keep_dims")
    if bool(op.attrs.get("axes")) == (len(xs) == 2):
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
    return [reduction(x, axes, keep)]


# ---- the records ----------------------------------------------------------------------------------

# kind: (numpy meaning over float64 (x, axes, keepdims), tensorir reduction)
_REDUCTIONS = {
    "ReduceL1": (lambda x, ax, kd: np.abs(x).sum(axis=ax, keepdims=kd), "l1"),
    "ReduceL2": (lambda x, ax, kd: np.sqrt((x * x).sum(axis=ax, keepdims=kd)), "l2"),
    "ReduceMax": (lambda x, ax, kd: x.max(axis=ax, keepdims=kd), "max"),
    "ReduceMean": (lambda x, ax, kd: x.mean(axis=ax, keepdims=kd), "mean"),
    "ReduceMin": (lambda x, ax, kd: x.min(axis=ax, keepdims=kd), "min"),
    "ReduceProd": (lambda x, ax, kd: x.prod(axis=ax, keepdims=kd), "prod"),
    "ReduceSum": (lambda x, ax, kd: x.sum(axis=ax, keepdims=kd), "sum"),
}


def _lower(name):
    # axes given as a second (run-time) input are not lowered: the shapes depend on them
    return lambda op, xs: T.reduce(name, _inputs(op, xs, 1)[0], get_attr(op, "axes"), get_attr(op, "keep_dims"))


for _kind, (_meaning, _name) in _REDUCTIONS.items():
    define(schema(_kind, "src:T1 axes:T2", "dst:T1", {"axes": optional("s64[]", ()), "keep_dims": optional("bool", False)},
                  {"T1": FP, "T2": S32}, n_in={1, 2}, checks=[_check_reduce_axes]),
           shape=_shape_reduce, reference=_ref_reduce(_meaning), lower=_lower(_name))
