"""ScaledDotProductAttention: ``softmax(query @ K^T * scale + mask, axis=-1) @ value``, one op
for what models spell as a MatMul, a scale, a mask, a SoftMax and a MatMul
(``graph_api.passes.fuse_attention``).

Inputs: ``query`` ``(..., Sq, D)``; ``key`` ``(..., Sk, D)``, or ``(..., D, Sk)`` (K^T itself,
as the first MatMul reads it) when ``key_transposed``; ``value`` ``(..., Sk, Dv)``; optional
``mask``, added to the scaled scores ``(..., Sq, Sk)``, to which it broadcasts one way. The
leading (batch) dims of the three operands broadcast (numpy). Output: ``(..., Sq, Dv)``.

Layouts: the op reads ``query``, ``key`` and ``value`` transposed by ``query_order``,
``key_order`` and ``value_order`` and writes its output transposed by ``dst_order`` (each as
StaticTranspose's ``order``: ``read.shape[k] = input.shape[order[k]]``; empty, the default:
as it is). The shapes above are those of the operands as read and of the output before its
transposition. With them the heads a model splits from its projections, ``(B, S, H, D)`` read
as ``(B, H, S, D)`` (``order`` ``[0, 2, 1, 3]``), and merges back after, need no copy
(``graph_api.passes.fold_transposes_into_attention``).

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
from ._numpy import _bool, _check_broadcasts_to, _err, _f64, _float, _ints, _nin
from ._shapes import _one_way, _require, broadcast_shapes
from .registry import define
from .schema import FP, optional, schema, get_attr

OPERAND_ORDERS = ("query_order", "key_order", "value_order")


def order_problem(order, rank: int) -> str | None:
    """What is wrong with ``order`` as the axis order of a rank-``rank`` tensor (a permutation
    of its axes, or empty: as it is), or None.

    Example:
        >>> order_problem([0, 2, 1, 3], 4), order_problem([], 3), order_problem([0, 2, 2], 3)
        (None, None, 'is not a permutation of the axes 0..2')
    """
    order = list(order)
    if order and sorted(order) != list(range(rank)):
        return "is not a permutation of the axes 0.." + str(rank - 1)
    return None


def _ordered(shape, order) -> tuple:
    return tuple(shape[a] for a in order) if order else tuple(shape)


def read_shapes(op: Op) -> list:
    """The shapes of an attention op's query, key and value as it reads them (through their
    orders), its inputs' shapes known.

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (1, 5, 2, 8))
        >>> read_shapes(Op(0, OpKind.ScaledDotProductAttention, [x, x, x], [], {"query_order": [0, 2, 1, 3]}))
        [(1, 2, 5, 8), (1, 5, 2, 8), (1, 5, 2, 8)]
    """
    return [_ordered(t.shape, get_attr(op, name)) for t, name in zip(op.inputs, OPERAND_ORDERS)]


# ---- shape rule -------------------------------------------------------------------------------------

def _checked_order(op, name: str, rank: int, what: str) -> list:
    order = list(get_attr(op, name))
    problem = order_problem(order, rank)
    _require(problem is None, f"{name} {order} {problem} of {what}")
    return order


def _shape_attention(op, s):
    query, key, value = (_ordered(x, _checked_order(op, name, len(x), f"{name.split('_')[0]} {list(x)}"))
                         for x, name in zip(s[:3], OPERAND_ORDERS))
    _require(min(len(query), len(key), len(value)) >= 2,
             f"query, key and value need rank >= 2, got shapes {list(query)}, {list(key)}, {list(value)}")
    depth, keys = key[-2:] if get_attr(op, "key_transposed") else key[-2:][::-1]
    _require(depth == query[-1], f"query {list(query)} has depth {query[-1]} but key {list(key)} has {depth} "
                                 f"(key_transposed={get_attr(op, 'key_transposed')})")
    _require(value[-2] == keys, f"key {list(key)} has {keys} keys but value {list(value)} has {value[-2]}")
    batch = broadcast_shapes(broadcast_shapes(query[:-2], key[:-2]), value[:-2])
    if len(s) == 4:
        _one_way(s[3], batch + (query[-2], keys), "mask")
    out = batch + (query[-2], value[-1])
    return [_ordered(out, _checked_order(op, "dst_order", len(out), f"the output {list(out)}"))]


# ---- reference --------------------------------------------------------------------------------------

def _transposed(op, name: str, x: np.ndarray, what: str) -> np.ndarray:
    order = _ints(op, name, [])
    problem = order_problem(order, x.ndim)
    if problem:
        raise _err(op, f"{name} {order} {problem} of {what} {x.shape}")
    return np.transpose(x, order) if order else x


def _ref_attention(op: Op, xs: list) -> list:
    _nin(op, xs, {3, 4})
    query, key, value = (_transposed(op, name, _f64(x), name.split("_")[0]) for x, name in zip(xs[:3], OPERAND_ORDERS))
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
    return [_transposed(op, "dst_order", np.matmul(probabilities, value), "the output")]


# ---- lowering ---------------------------------------------------------------------------------------

def _lower_attention(op, xs):
    _inputs(op, xs, 3, 4)
    orders = {name: get_attr(op, name) for name in (*OPERAND_ORDERS, "dst_order")}
    return T.scaled_dot_product_attention(*xs[:3], mask=xs[3] if len(xs) == 4 else None,
                                          scale=get_attr(op, "scale"), key_transposed=get_attr(op, "key_transposed"),
                                          **orders)


# ---- the record -------------------------------------------------------------------------------------

define(schema("ScaledDotProductAttention", "query:T key:T value:T mask:T", "dst:T",
              {"scale": optional("f32", 1.0), "key_transposed": optional("bool", False),
               **{name: optional("s64[]", []) for name in (*OPERAND_ORDERS, "dst_order")}}, {"T": FP}, n_in={3, 4}),
       shape=_shape_attention, reference=_ref_attention, lower=_lower_attention)
