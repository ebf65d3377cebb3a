"""Scaled dot-product attention: ``softmax(Q K^T * scale + mask) V`` over the last axis, as
one op.

Stages: the scores (a batched product of the queries by the keys), the scaled and masked
scores, their row max (a reduction), the exponentials, their row sum (a reduction), the
product of the exponentials by the values (the context), and the context divided by the
row sum. The division comes after the second product (one per output element, not one per
score), so the probabilities are never materialized; the "attention" template computes the
scores of a block of query rows at a time, which stay in cache.

Example:
    >>> from tilefuse.tensorir import placeholder
    >>> q = placeholder((2, 8, 16), name="q"); k = placeholder((2, 16, 12), name="k")
    >>> v = placeholder((2, 12, 4), name="v")
    >>> out = scaled_dot_product_attention(q, k, v, scale=0.25, key_transposed=True)
    >>> out.shape, out.op.tag
    ((2, 8, 4), 'attention')
"""
from __future__ import annotations

from .. import intrinsics as ti
from ..reduce import max_skip_nan, reduce_axis
from ..reduce import sum as rsum
from ..tensor import Tensor, compute
from ._common import (broadcast_index, broadcast_shapes, broadcasts_to, check_float, check_ints, check_number,
                      check_same_dtype, check_tensor, fconst)

__all__ = ["scaled_dot_product_attention"]


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
                                 scale: float = 1.0, key_transposed: bool = False, query_order=(),
                                 key_order=(), value_order=(), dst_order=(), name: str | None = None) -> Tensor:
    """``softmax(query @ K^T * scale + mask, axis=-1) @ value`` with ``query`` of shape
    ``(..., Sq, D)``, ``key`` of shape ``(..., Sk, D)`` (``(..., D, Sk)``, K^T itself, when
    ``key_transposed``), ``value`` of shape ``(..., Sk, Dv)`` and an optional additive ``mask``
    that broadcasts one way to the scores ``(..., Sq, Sk)``. The leading (batch) axes of the
    three operands broadcast (numpy). Returns ``(..., Sq, Dv)``.

    ``query_order``, ``key_order`` and ``value_order`` read the operands transposed (as
    ``transpose(x, order)``: the shapes above are those read), ``dst_order`` writes the result
    transposed; empty: as it is.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> q = placeholder((1, 2, 5, 8)); k = placeholder((1, 2, 7, 8)); v = placeholder((1, 2, 7, 3))
        >>> scaled_dot_product_attention(q, k, v, placeholder((1, 1, 1, 7))).shape
        (1, 2, 5, 3)
        >>> heads = placeholder((1, 5, 2, 8))          # (batch, rows, heads, depth)
        >>> scaled_dot_product_attention(heads, heads, heads, query_order=[0, 2, 1, 3], key_order=[0, 2, 1, 3],
        ...                              value_order=[0, 2, 1, 3], dst_order=[0, 2, 1, 3]).shape
        (1, 5, 2, 8)
    """
    op = "ScaledDotProductAttention"
    operands = {}
    for arg, t, order in (("query", query, query_order), ("key", key, key_order), ("value", value, value_order)):
        check_float(op, arg, t)
        operands[arg] = _Ordered(op, arg, t, order)
        if t.ndim < 2:
            raise ValueError(f"{op}: {arg} must have rank >= 2, got shape {t.shape}")
    check_same_dtype(op, query=query, key=key, value=value)
    query, key, value = operands.values()
    scale = check_number(op, "scale", scale)
    sq, depth = query.shape[-2:]
    kd, sk = key.shape[-2:] if key_transposed else key.shape[-2:][::-1]
    if kd != depth:
        raise ValueError(f"{op}: query {query.shape} has depth {depth} but key {key.shape} "
                         f"(key_transposed={bool(key_transposed)}) has {kd}")
    if value.shape[-2] != sk:
        raise ValueError(f"{op}: key {key.shape} (key_transposed={bool(key_transposed)}) has {sk} keys but value "
                         f"{value.shape} has {value.shape[-2]}")
    batch = broadcast_shapes(op, query.shape[:-2], key.shape[:-2], value.shape[:-2])
    scores_shape, out_shape = batch + (sq, sk), batch + (sq, value.shape[-1])
    written = _Ordered(op, "dst", out_shape, dst_order)
    if mask is not None:
        check_tensor(op, "mask", mask)
        check_same_dtype(op, query=query, mask=mask)
        if not broadcasts_to(mask.shape, scores_shape):
            raise ValueError(f"{op}: mask of shape {mask.shape} does not broadcast to the scores {scores_shape}")
    base, tag, nb = name or "attention", "attention", len(batch)

    def lead(t, idx):
        return broadcast_index(t.shape[:-2], batch, idx[:nb])

    def dot(*idx):
        d = reduce_axis((0, depth), name="d")
        i, j = idx[nb:]
        k_index = (d, j) if key_transposed else (j, d)
        return rsum(query[lead(query, idx) + (i, d)] * key[lead(key, idx) + k_index], axis=d)
    scores = compute(scores_shape, dot, name=base + "_scores", tag=tag)
    logits = scores
    if scale != 1.0 or mask is not None:
        def scaled(*i):
            x = scores[i] * fconst(scale, query.dtype) if scale != 1.0 else scores[i]
            return x + mask[broadcast_index(mask, scores_shape, i)] if mask is not None else x
        logits = compute(scores_shape, scaled, name=base + "_logits", tag=tag)

    def row_reduce(x, combiner, suffix):
        def body(*idx):
            j = reduce_axis((0, sk), name="j")
            return combiner(x[idx + (j,)], axis=j)
        return compute(scores_shape[:-1], body, name=base + suffix, tag=tag)
    # a NaN anywhere in a row makes its sum NaN: a max that skips NaN gives the same result
    mx = row_reduce(logits, max_skip_nan, "_max")
    # below the smallest normal float, 0: denormal exponentials would slow the product with V
    e = compute(scores_shape, lambda *i: ti.exp_flush(logits[i] - mx[i[:-1]]), name=base + "_exp", tag=tag)
    total = row_reduce(e, rsum, "_sum")

    def weighted(*idx):
        j = reduce_axis((0, sk), name="j")
        return rsum(e[idx[:-1] + (j,)] * value[lead(value, idx) + (j, idx[-1])], axis=j)
    context = compute(out_shape, weighted, name=base + "_context", tag=tag)

    def normalized(*at):
        i = written.source_index(at)
        return context[i] * (fconst(1, query.dtype) / total[i[:-1]])
    return compute(written.shape, normalized, name=base, tag=tag)


class _Ordered:
    """A tensor (or a shape) seen through an axis order: ``shape`` is ``transpose(x, order)``'s,
    ``[idx]`` loads its element ``idx`` from where it lies, ``source_index`` says where."""

    def __init__(self, op: str, arg: str, x, order):
        self.x, rank = x, len(x.shape if isinstance(x, Tensor) else x)
        self.order = check_ints(op, f"{arg}_order", order)
        if self.order and sorted(self.order) != list(range(rank)):
            raise ValueError(f"{op}: attribute {arg}_order={self.order} is not a permutation of the {rank} axes "
                             f"of {arg}")
        source = x.shape if isinstance(x, Tensor) else tuple(x)
        self.shape = tuple(source[a] for a in self.order) if self.order else tuple(source)
        self.dtype = getattr(x, "dtype", None)

    def source_index(self, idx) -> tuple:
        """The index in the tensor as it lies of element ``idx`` as read.

        Example:
            >>> _Ordered("op", "query", (2, 3, 4), [0, 2, 1]).source_index(("b", "s", "h"))
            ('b', 'h', 's')
        """
        if not self.order:
            return tuple(idx)
        index = [None] * len(idx)
        for k, a in enumerate(self.order):
            index[a] = idx[k]
        return tuple(index)

    def __getitem__(self, idx):
        return self.x[self.source_index(idx)]
