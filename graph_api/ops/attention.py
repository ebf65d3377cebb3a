"""ScaledDotProductAttention: ``softmax(query @ K^T * scale + mask, axis=-1) @ value``, one op
for what models spell as a MatMul, a scale, a mask, a SoftMax and a MatMul
(``graph_api.passes.fuse_attention``).

Inputs: ``query`` ``(..., Sq, D)``; ``key`` ``(..., Sk, D)``, or ``(..., D, Sk)`` (K^T itself,
as the first MatMul reads it) when ``key_transposed``; ``value`` ``(..., Sk, Dv)``; optional
``mask``, added to the scaled scores ``(..., Sq, Sk)``, to which it broadcasts one way. The
leading (batch) dims of the three operands broadcast (numpy). Output: ``(..., Sq, Dv)``.

Example:
    >>> from tilefuse.graph_api.ops import op_def
    >>> op_def("ScaledDotProductAttention").schema.attrs["scale"].default
    1.0
"""
from __future__ import annotations

import numpy as np
from tilefuse.tensorir import ops as T

from ..op import Op
from ._lower import _inputs
from ._numpy import _bool, _check_broadcasts_to, _err, _f64, _float, _nin
from ._shapes import _one_way, _require, broadcast_shapes
from .registry import define
from .schema import FP, optional, schema, get_attr


# ---- shape rule -------------------------------------------------------------------------------------

def _shape_attention(op, s):
    query, key, value = (tuple(x) for x in s[:3])
    _require(min(len(query), len(key), len(value)) >= 2,
             f"query, key and value need rank >= 2, got shapes {list(query)}, {list(key)}, {list(value)}")
    depth, keys = key[-2:] if get_attr(op, "key_transposed") else key[-2:][::-1]
    _require(depth == query[-1], f"query {list(query)} has depth {query[-1]} but key {list(key)} has {depth} "
                                 f"(key_transposed={get_attr(op, 'key_transposed')})")
    _require(value[-2] == keys, f"key {list(key)} has {keys} keys but value {list(value)} has {value[-2]}")
    batch = broadcast_shapes(broadcast_shapes(query[:-2], key[:-2]), value[:-2])
    if len(s) == 4:
        _one_way(s[3], batch + (query[-2], keys), "mask")
    return [batch + (query[-2], value[-1])]


# ---- reference --------------------------------------------------------------------------------------

def _ref_attention(op: Op, xs: list) -> list:
    _nin(op, xs, {3, 4})
    query, key, value = (_f64(x) for x in xs[:3])
    if min(query.ndim, key.ndim, value.ndim) < 2:
        raise _err(op, f"query, key and value need rank >= 2, got shapes {query.shape}, {key.shape}, {value.shape}")
    transposed = key if _bool(op, "key_transposed") else np.swapaxes(key, -1, -2)
    try:
        np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except ValueError:
        raise _err(op, f"the batch dims of query {query.shape}, key {key.shape} and value {value.shape} "
                       f"do not broadcast") from None
    if query.shape[-1] != transposed.shape[-2] or transposed.shape[-1] != value.shape[-2]:
        raise _err(op, f"query {query.shape}, key {key.shape} (key_transposed={_bool(op, 'key_transposed')}) "
                       f"and value {value.shape} do not multiply")
    scores = np.matmul(query, transposed) * _float(op, "scale")
    for mask in xs[3:]:
        _check_broadcasts_to(op, "mask", np.shape(mask), scores.shape, "scores")
        scores = scores + _f64(mask)
    with np.errstate(all="ignore"):      # a row all -inf is NaN, as SoftMax's is
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probabilities = e / e.sum(axis=-1, keepdims=True)
    return [np.matmul(probabilities, value)]


# ---- lowering ---------------------------------------------------------------------------------------

def _lower_attention(op, xs):
    _inputs(op, xs, 3, 4)
    return T.scaled_dot_product_attention(*xs[:3], mask=xs[3] if len(xs) == 4 else None,
                                          scale=get_attr(op, "scale"), key_transposed=get_attr(op, "key_transposed"))


# ---- the record -------------------------------------------------------------------------------------

define(schema("ScaledDotProductAttention", "query:T key:T value:T mask:T", "dst:T",
              {"scale": optional("f32", 1.0), "key_transposed": optional("bool", False)}, {"T": FP}, n_in={3, 4}),
       shape=_shape_attention, reference=_ref_attention, lower=_lower_attention)
