"""MatMul: batched matrix products with numpy broadcasting of the batch dims, optional
transposes and a bias.

Example:
    >>> from tilefuse.graph_api.ops import op_def
    >>> op_def("MatMul").schema.attrs["transpose_b"].default
    False
"""
from __future__ import annotations

import numpy as np
from tilefuse.tensorir import ops as T

from ..op import Op
from ._lower import _inputs
from ._numpy import _err, _check_broadcasts_to, _bool, _nin, _f64
from ._shapes import _require, broadcast_shapes, _one_way
from .registry import define
from .schema import FP, optional, schema, get_attr


# ---- shape rule -------------------------------------------------------------------------------------

def _shape_matmul(op, s):
    a, b = list(s[0]), list(s[1])
    _require(a and b, "MatMul inputs need rank >= 1")
    if get_attr(op, "transpose_a") and len(a) > 1:
        a[-2], a[-1] = a[-1], a[-2]
    if get_attr(op, "transpose_b") and len(b) > 1:
        b[-2], b[-1] = b[-1], b[-2]
    k_b = b[0] if len(b) == 1 else b[-2]
    _require(a[-1] == k_b, f"inner dims differ: {list(s[0])} x {list(s[1])} (after transposes {a} x {b})")
    if len(a) == 1 and len(b) == 1:
        out = ()
    elif len(a) == 1:
        out = tuple(b[:-2] + b[-1:])
    elif len(b) == 1:
        out = tuple(a[:-1])
    else:
        out = broadcast_shapes(a[:-2], b[:-2]) + (a[-2], b[-1])
    if len(s) == 3:
        _one_way(s[2], out, "bias")
    return [out]


# ---- reference --------------------------------------------------------------------------------------

def _ref_matmul(op: Op, xs: list) -> list:
    _nin(op, xs, {2, 3})
    a, b = _f64(xs[0]), _f64(xs[1])
    if a.ndim == 0 or b.ndim == 0:
        raise _err(op, "inputs must have at least 1 dim")
    if _bool(op, "transpose_a") and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if _bool(op, "transpose_b") and b.ndim >= 2:
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


# ---- lowering ---------------------------------------------------------------------------------------

def _lower_matmul(op, xs):
    _inputs(op, xs, 2, 3)
    return T.matmul(xs[0], xs[1], get_attr(op, "transpose_a"), get_attr(op, "transpose_b"),
                    bias=xs[2] if len(xs) == 3 else None)


# ---- the records ----------------------------------------------------------------------------------

define(schema("MatMul", "src:T weights:T bias:T", "dst:T1",
              {"transpose_a": optional("bool", False), "transpose_b": optional("bool", False),
               "accumulation_mode": optional("string", "strict", ("strict", "relaxed", "any", "f32", "s32", "f16"))},
              {"T": FP, "T1": FP}, n_in={2, 3}),
       shape=_shape_matmul, reference=_ref_matmul, lower=_lower_matmul)
