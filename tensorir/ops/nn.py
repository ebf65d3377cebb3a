"""Neural-network ops of the oneDNN graph op set: MatMul, BatchNormInference, LayerNorm,
GroupNorm, RMSNorm, SoftMax/LogSoftmax and the Reduce* family (the sliding-window ops are in
``window``).

The multiply-accumulate of MatMul is one compute whose body is ``sum(a[...] * b[...],
axis=k)``, an outer product the "complex" template recognises; bias is its own compute after
it. Softmax, the norms and the reductions are chains of separate reduction and elementwise
computes, so the "reduction" template can compute each reduction one row at a time.

Example:
    >>> from tilefuse.tensorir import placeholder
    >>> x = placeholder((7, 13), name="x"); w = placeholder((13, 37), name="w")
    >>> y = softmax(matmul(x, w), axis=-1)
    >>> y.shape, y.op.tag, [t.name for t in y.op.input_tensors]
    ((7, 37), 'softmax', ['softmax_exp', 'softmax_sum'])
"""
from __future__ import annotations

import math

from .. import dtype as dt
from .. import intrinsics as ti
from ..errors import Unsupported
from ..reduce import max as rmax
from ..reduce import max_skip_nan
from ..reduce import min as rmin
from ..reduce import prod as rprod
from ..reduce import reduce_axis
from ..reduce import sum as rsum
from ..tensor import Tensor, compute
from .transform import reshape
from ._common import (FORMATS, broadcast_index, broadcast_shapes, broadcasts_to, channel_axis, check_choice,
                      check_float, check_int, check_number, check_same_dtype, check_tensor, fconst,
                      normalize_axis, spatial_axes)

__all__ = ["matmul", "batch_norm_inference", "layer_norm", "group_norm", "rms_norm", "softmax", "log_softmax",
           "reduce", "REDUCE_KINDS"]

REDUCE_KINDS = ("sum", "mean", "max", "min", "prod", "l1", "l2")


# ---------------------------------------------------------------------------- MatMul

def matmul(a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False,
           bias: Tensor | None = None, name: str | None = None) -> Tensor:
    """MatMul: ``dst[..., m, n] = sum_k a[..., m, k] * b[..., k, n] (+ bias)``.

    The last two axes are the matrix; leading (batch) axes broadcast (numpy). ``transpose_a`` /
    ``transpose_b`` swap the last two axes of an operand of rank >= 2. A 1-D ``a`` is read as
    ``[1, K]`` and a 1-D ``b`` as ``[K, 1]``, and that unit axis is dropped from ``dst``.
    ``bias`` broadcasts one way to ``dst``, added by its own compute after the product.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> a = placeholder((2, 1, 7, 13), name="a"); b = placeholder((3, 37, 13), name="b")
        >>> c = matmul(a, b, transpose_b=True)
        >>> c.shape, c.op.tag
        ((2, 3, 7, 37), 'matmul')
    """
    op = "MatMul"
    check_tensor(op, "src", a)
    check_tensor(op, "weights", b)
    check_same_dtype(op, src=a, weights=b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"MatMul: src and weights must have rank >= 1, got shapes {a.shape} and {b.shape}")
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    ta, tb = bool(transpose_a) and not a_vec, bool(transpose_b) and not b_vec
    m, k = (1, a.shape[0]) if a_vec else ((a.shape[-1], a.shape[-2]) if ta else a.shape[-2:])
    k2, n = (b.shape[0], 1) if b_vec else ((b.shape[-1], b.shape[-2]) if tb else b.shape[-2:])
    if k != k2:
        raise ValueError(f"MatMul: src {a.shape} (transpose_a={transpose_a}) has K={k} but weights {b.shape} "
                         f"(transpose_b={transpose_b}) has K={k2}")
    a_batch, b_batch = a.shape[:-2] if not a_vec else (), b.shape[:-2] if not b_vec else ()
    batch = broadcast_shapes(op, a_batch, b_batch)
    shape = batch + (() if a_vec else (m,)) + (() if b_vec else (n,))
    base = name or "matmul"

    def body(*idx):
        r = reduce_axis((0, k), name="k")
        lead, rest = idx[:len(batch)], idx[len(batch):]
        if a_vec:
            ai = (r,)
        else:
            i = rest[0]
            ai = broadcast_index(a_batch, batch, lead) + ((r, i) if ta else (i, r))
        if b_vec:
            bi = (r,)
        else:
            j = rest[-1]
            bi = broadcast_index(b_batch, batch, lead) + ((j, r) if tb else (r, j))
        return rsum(a[ai] * b[bi], axis=r)
    out = compute(shape, body, name=base if bias is None else base + "_acc", tag="matmul")
    if bias is None:
        return out
    check_tensor(op, "bias", bias)
    check_same_dtype(op, src=a, bias=bias)
    if not broadcasts_to(bias.shape, shape):
        raise ValueError(f"MatMul: bias of shape {bias.shape} does not broadcast to dst {shape}")
    return compute(shape, lambda *i: out[i] + bias[broadcast_index(bias, shape, i)], name=base, tag="matmul")


# ---------------------------------------------------------------------------- normalization

def batch_norm_inference(x: Tensor, gamma: Tensor, beta: Tensor, mean: Tensor, variance: Tensor,
                         epsilon: float, data_format: str = "NXC", name: str | None = None) -> Tensor:
    """BatchNormInference: ``gamma * (x - mean) / sqrt(variance + epsilon) + beta``, each
    parameter 1-D along the channel axis (axis 1 for ``NCX``, the last for ``NXC``).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> x = placeholder((2, 5, 7)); p = [placeholder((5,)) for _ in range(4)]
        >>> batch_norm_inference(x, *p, epsilon=1e-5, data_format="NCX").op.tag
        'batch_norm_inference'
    """
    op = "BatchNormInference"
    check_float(op, "src", x)
    check_choice(op, "data_format", data_format, FORMATS)
    eps = check_number(op, "epsilon", epsilon)
    if eps < 0:
        raise ValueError(f"BatchNormInference: attribute epsilon must be non-negative, got {eps}")
    if x.ndim < 2:
        raise ValueError(f"BatchNormInference: src must have rank >= 2, got shape {x.shape}")
    c_axis = channel_axis(data_format, x.ndim)
    c = x.shape[c_axis]
    for arg, t in (("gamma", gamma), ("beta", beta), ("mean", mean), ("variance", variance)):
        check_tensor(op, arg, t)
        check_same_dtype(op, src=x, **{arg: t})
        if t.shape != (c,):
            raise ValueError(f"BatchNormInference: {arg} must be 1-D with {c} elements (the channels of src "
                             f"{x.shape} in {data_format}), got shape {t.shape}")

    def body(*i):
        ch = i[c_axis]
        return (x[i] - mean[ch]) / ti.sqrt(variance[ch] + fconst(eps, x.dtype)) * gamma[ch] + beta[ch]
    return compute(x.shape, body, name=name or "batch_norm_inference", tag="batch_norm_inference")


def _mean_var(read, shape, extents, dtype: str, base: str, tag: str):
    """(mean, variance) over the reduce domain ``extents`` of ``read(idx, reduce_axes)`` (an
    element of the input) for each index of ``shape``: a sum, a division, the sum of squared
    deviations (two-pass, as numpy), a division."""
    count = fconst(math.prod(extents), dtype)

    def axes():
        return [reduce_axis((0, n), name=f"r{d}") for d, n in enumerate(extents)]

    def total(*idx):
        rs = axes()
        return rsum(read(idx, rs), axis=rs)
    s = compute(shape, total, name=base + "_sum", tag=tag)
    mean = compute(shape, lambda *i: s[i] / count, name=base + "_mean", tag=tag)

    def squares(*idx):
        rs = axes()
        dev = read(idx, rs) - mean[idx]
        return rsum(dev * dev, axis=rs)
    sq = compute(shape, squares, name=base + "_sqsum", tag=tag)
    var = compute(shape, lambda *i: sq[i] / count, name=base + "_var", tag=tag)
    return mean, var


def _affine(op: str, x: Tensor, gamma, beta, shape, what: str, base: str):
    """``gamma`` and ``beta`` checked against ``shape`` (any shape of as many elements is read in
    row-major order, through a reshape)."""
    out = []
    for arg, t in (("gamma", gamma), ("beta", beta)):
        if t is None:
            raise ValueError(f"{op}: use_affine=True needs the {arg} input")
        check_tensor(op, arg, t)
        check_same_dtype(op, src=x, **{arg: t})
        if math.prod(t.shape) != math.prod(shape):
            raise ValueError(f"{op}: {arg} must have the {math.prod(shape)} elements of {what} {shape}, "
                             f"got shape {t.shape}")
        out.append(t if t.shape == tuple(shape) else reshape(t, shape, name=f"{base}_{arg}"))
    return out


def _norm_args(op: str, x: Tensor, begin_norm_axis: int, epsilon: float) -> tuple[int, float]:
    """Checked (first normalized axis, epsilon) of a LayerNorm-like op."""
    check_float(op, "src", x)
    if x.ndim == 0:
        raise ValueError(f"{op}: src must have rank >= 1")
    axis = normalize_axis(op, "begin_norm_axis", begin_norm_axis, x.ndim)
    eps = check_number(op, "epsilon", epsilon)
    if eps < 0:
        raise ValueError(f"{op}: attribute epsilon must be non-negative, got {eps}")
    return axis, eps


def layer_norm(x: Tensor, gamma: Tensor | None = None, beta: Tensor | None = None, begin_norm_axis: int = -1,
               epsilon: float = 1e-5, use_affine: bool = True, keep_stats: bool = True,
               name: str | None = None):
    """LayerNorm over the axes ``begin_norm_axis ..`` last: ``dst = (x - mean) /
    sqrt(var + epsilon) * gamma + beta`` (``gamma``/``beta`` of shape ``x.shape[begin_norm_axis:]``,
    or any shape of that many elements, read in row-major order; used when ``use_affine``).
    Returns ``(dst, mean, variance)`` when ``keep_stats`` (oneDNN's default), else ``dst``; mean
    and variance have shape ``x.shape[:begin_norm_axis]``.

    Stages: sum, mean, sum of squared deviations, variance (two-pass, as numpy), dst.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> x = placeholder((7, 37)); g = placeholder((37,)); b = placeholder((37,))
        >>> dst, mean, var = layer_norm(x, g, b)
        >>> dst.shape, mean.shape, dst.op.tag
        ((7, 37), (7,), 'layer_norm')
    """
    op = "LayerNorm"
    axis, eps = _norm_args(op, x, begin_norm_axis, epsilon)
    norm_shape = x.shape[axis:]
    base = name or "layer_norm"
    if use_affine:
        gamma, beta = _affine(op, x, gamma, beta, norm_shape,
                              f"the normalized shape (src {x.shape} from begin_norm_axis={begin_norm_axis})", base)
    mean, var = _mean_var(lambda idx, rs: x[tuple(idx) + tuple(rs)], x.shape[:axis], norm_shape, x.dtype, base,
                          "layer_norm")

    def body(*i):
        lead, inner = i[:axis], i[axis:]
        v = (x[i] - mean[lead]) / ti.sqrt(var[lead] + fconst(eps, x.dtype))
        return v * gamma[inner] + beta[inner] if use_affine else v
    dst = compute(x.shape, body, name=base, tag="layer_norm")
    return (dst, mean, var) if keep_stats else dst


def group_norm(x: Tensor, gamma: Tensor | None = None, beta: Tensor | None = None, groups: int = 1,
               epsilon: float = 1e-5, use_affine: bool = True, keep_stats: bool = True, data_format: str = "NXC",
               name: str | None = None):
    """GroupNorm: the channels split into ``groups`` groups; per batch item and group, ``dst =
    (x - mean) / sqrt(var + epsilon) * gamma[c] + beta[c]`` with mean and variance over the
    group's channels and all spatial positions. ``gamma``/``beta`` are 1-D over the channels.
    Returns ``(dst, mean, variance)`` (mean and variance of shape ``(N, groups)``) when
    ``keep_stats`` (oneDNN's default), else ``dst``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> x = placeholder((2, 6, 7, 5)); g = placeholder((6,)); b = placeholder((6,))
        >>> dst, mean, var = group_norm(x, g, b, groups=3, data_format="NCX")
        >>> dst.shape, mean.shape, dst.op.tag
        ((2, 6, 7, 5), (2, 3), 'group_norm')
    """
    op = "GroupNorm"
    check_float(op, "src", x)
    check_choice(op, "data_format", data_format, FORMATS)
    if x.ndim < 2:
        raise ValueError(f"GroupNorm: src must have rank >= 2, got shape {x.shape}")
    eps = check_number(op, "epsilon", epsilon)
    if eps < 0:
        raise ValueError(f"GroupNorm: attribute epsilon must be non-negative, got {eps}")
    c_axis = channel_axis(data_format, x.ndim)
    c = x.shape[c_axis]
    groups = check_int(op, "groups", groups, minimum=1)
    if c % groups:
        raise ValueError(f"GroupNorm: attribute groups={groups} does not divide the {c} channels of src {x.shape}")
    cg = c // groups
    base = name or "group_norm"
    if use_affine:
        gamma, beta = _affine(op, x, gamma, beta, (c,), "the channels", base)
    spatial = [x.shape[a] for a in spatial_axes(data_format, x.ndim)]
    if data_format == "NCX":       # reduce over (channel in group, *spatial); NXC keeps the channel innermost
        extents, read = [cg, *spatial], lambda idx, rs: x[(idx[0], idx[1] * cg + rs[0], *rs[1:])]
    else:
        extents, read = [*spatial, cg], lambda idx, rs: x[(idx[0], *rs[:-1], idx[1] * cg + rs[-1])]
    mean, var = _mean_var(read, (x.shape[0], groups), extents, x.dtype, base, "group_norm")

    def body(*i):
        ch = i[c_axis]
        g = (i[0], ch // cg)
        v = (x[i] - mean[g]) / ti.sqrt(var[g] + fconst(eps, x.dtype))
        return v * gamma[ch] + beta[ch] if use_affine else v
    dst = compute(x.shape, body, name=base, tag="group_norm")
    return (dst, mean, var) if keep_stats else dst


def rms_norm(x: Tensor, gamma: Tensor | None = None, begin_norm_axis: int = -1, epsilon: float = 1e-5,
             name: str | None = None):
    """RMSNorm over the axes ``begin_norm_axis ..`` last: ``dst = gamma * x * rrms`` with
    ``rrms = 1 / sqrt(mean(x ** 2) + epsilon)``; the optional ``gamma`` broadcasts one way to
    ``x``. Returns ``(dst, rrms)``, rrms of shape ``x.shape[:begin_norm_axis]`` (oneDNN's optional
    second output).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> dst, rrms = rms_norm(placeholder((7, 37)), placeholder((37,)))
        >>> dst.shape, rrms.shape, dst.op.tag
        ((7, 37), (7,), 'rms_norm')
    """
    op = "RMSNorm"
    axis, eps = _norm_args(op, x, begin_norm_axis, epsilon)
    if gamma is not None:
        check_tensor(op, "gamma", gamma)
        check_same_dtype(op, src=x, gamma=gamma)
        if not broadcasts_to(gamma.shape, x.shape):
            raise ValueError(f"RMSNorm: gamma of shape {gamma.shape} does not broadcast to src {x.shape}")
    base = name or "rms_norm"
    lead, inner = x.shape[:axis], x.shape[axis:]
    count = fconst(math.prod(inner), x.dtype)

    def squares(*idx):
        rs = [reduce_axis((0, n), name=f"r{d}") for d, n in enumerate(inner)]
        v = x[tuple(idx) + tuple(rs)]
        return rsum(v * v, axis=rs)
    sq = compute(lead, squares, name=base + "_sqsum", tag="rms_norm")
    rrms = compute(lead, lambda *i: fconst(1, x.dtype) / ti.sqrt(sq[i] / count + fconst(eps, x.dtype)),
                   name=base + "_rrms", tag="rms_norm")

    def body(*i):
        v = x[i] * rrms[i[:axis]]
        return v if gamma is None else v * gamma[broadcast_index(gamma, x.shape, i)]
    return compute(x.shape, body, name=base, tag="rms_norm"), rrms


# ---------------------------------------------------------------------------- softmax

def _row_reduce(x: Tensor, axis: int, combiner, fn, name: str, tag: str) -> Tensor:
    """``combiner(fn(x[..., r, ...]))`` over ``axis`` (dropped from the shape)."""
    shape = x.shape[:axis] + x.shape[axis + 1:]

    def body(*idx):
        r = reduce_axis((0, x.shape[axis]), name="r")
        i = idx[:axis] + (r,) + idx[axis:]
        return combiner(fn(x[i], i), axis=r)
    return compute(shape, body, name=name, tag=tag)


def softmax(x: Tensor, axis: int = 1, mode: str = "none", stats: bool = False, name: str | None = None):
    """SoftMax along ``axis``: ``exp(x - max) / sum(exp(x - max))``. ``mode="inf_as_zero"``
    gives 0 (not NaN) along a row that is all -inf. With ``stats`` it returns ``(dst, stats)``,
    oneDNN's optional second output: ``max + log(sum(exp(x - max)))`` (the row's log-sum-exp,
    -inf for an all -inf row), shaped like ``x`` with ``axis`` of size 1.

    Stages: max (reduction), exp(x - max), sum (reduction), the product with the sum's
    reciprocal (and the stats). Exponentials below the smallest normal float are 0, not
    denormals (which cost microcode assists in every kernel that reads them).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> y = softmax(placeholder((7, 37)), axis=-1)
        >>> y.op.tag, [t.name for t in y.op.input_tensors]
        ('softmax', ['softmax_exp', 'softmax_sum'])
    """
    op = "SoftMax"
    check_float(op, "src", x)
    axis = normalize_axis(op, "axis", axis, x.ndim)
    check_choice(op, "mode", mode, ("none", "inf_as_zero"))
    base, tag = name or "softmax", "softmax"
    # a NaN in a row makes its sum, hence the whole row, NaN whatever its max is: a max that
    # skips NaN (cheaper) gives the same softmax, except that inf_as_zero must see an all-NaN
    # row's max as NaN, not -inf
    mx = _row_reduce(x, axis, max_skip_nan if mode == "none" else rmax, lambda v, i: v, base + "_max", tag)
    row = lambda i: i[:axis] + i[axis + 1:]  # noqa: E731
    # exp of a difference below log(FLT_MIN) would be denormal: flushed to 0 (an attention mask's
    # -100 made Swin's masked rows denormal, and the product with V ran 100x slower on them)
    e = compute(x.shape, lambda *i: ti.exp_flush(x[i] - mx[row(i)]), name=base + "_exp", tag=tag)
    s = _row_reduce(e, axis, rsum, lambda v, i: v, base + "_sum", tag)

    def body(*i):
        v = e[i] * (fconst(1, x.dtype) / s[row(i)])      # one division per row, hoisted out of it
        if mode == "inf_as_zero":
            return ti.if_then_else(mx[row(i)] == fconst(-math.inf, x.dtype), fconst(0, x.dtype), v)
        return v
    dst = compute(x.shape, body, name=base, tag=tag)
    if not stats:
        return dst

    def lse(*i):
        m = mx[row(i)]
        return ti.if_then_else(m == fconst(-math.inf, x.dtype), m, m + ti.log(s[row(i)]))
    stats_shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    return dst, compute(stats_shape, lse, name=base + "_stats", tag=tag)


def log_softmax(x: Tensor, axis: int = -1, name: str | None = None) -> Tensor:
    """LogSoftmax along ``axis``: ``x - max - log(sum(exp(x - max)))``.

    Stages: max (reduction), sum of exp(x - max) (reduction), the difference.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> log_softmax(placeholder((7, 37))).op.tag
        'log_softmax'
    """
    op = "LogSoftmax"
    check_float(op, "src", x)
    axis = normalize_axis(op, "axis", axis, x.ndim)
    base, tag = name or "log_softmax", "log_softmax"
    mx = _row_reduce(x, axis, max_skip_nan, lambda v, i: v, base + "_max", tag)   # a NaN reaches the sum
    row = lambda i: i[:axis] + i[axis + 1:]  # noqa: E731
    s = _row_reduce(x, axis, rsum, lambda v, i: ti.exp(v - mx[row(i)]), base + "_sum", tag)
    return compute(x.shape, lambda *i: x[i] - mx[row(i)] - ti.log(s[row(i)]), name=base, tag=tag)


# ---------------------------------------------------------------------------- Reduce*

def reduce(kind: str, x: Tensor, axes=(), keep_dims: bool = False, name: str | None = None) -> Tensor:
    """ReduceSum / ReduceMean / ReduceMax / ReduceMin / ReduceProd / ReduceL1 / ReduceL2
    (``kind`` = sum, mean, max, min, prod, l1, l2) over ``axes`` (in [-r, r-1]); reduced axes are
    dropped, or kept with size 1 when ``keep_dims``. Empty ``axes`` make the op an identity (a
    copy, for every kind, as oneDNN specifies). Mean divides the sum by the count and l2 takes the square root of the
    sum of squares, each in a second compute.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> y = reduce("mean", placeholder((7, 13, 5)), axes=[-1, 1], keep_dims=True)
        >>> y.shape, y.op.tag
        ((7, 1, 1), 'reduce_mean')
    """
    check_choice("Reduce", "kind", kind, REDUCE_KINDS)
    op = "Reduce" + {"l1": "L1", "l2": "L2"}.get(kind, kind.capitalize())
    check_tensor(op, "src", x)
    if kind in ("mean", "l2") and not dt.is_float(x.dtype):
        raise Unsupported(f"{op}: src must have a float dtype to be compiled, got {x.dtype}")
    try:
        axes = list(axes)
    except TypeError:
        axes = [axes]
    axes = [normalize_axis(op, "axes", a, x.ndim) for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: attribute axes repeats an axis: {axes}")
    axes = sorted(axes)
    tag = "reduce_" + kind
    base = name or tag
    if not axes:
        return compute(x.shape, lambda *i: x[i], name=base, tag=tag)
    shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape) if keep_dims or d not in axes)
    combiner = {"sum": rsum, "mean": rsum, "l1": rsum, "l2": rsum, "max": rmax, "min": rmin, "prod": rprod}[kind]
    term = {"l1": ti.abs, "l2": lambda v: v * v}.get(kind, lambda v: v)

    def body(*idx):
        rs = [reduce_axis((0, x.shape[d]), name=f"r{d}") for d in axes]
        it_i, it_r, index = iter(idx), iter(rs), []
        for d in range(x.ndim):
            if d in axes:
                index.append(next(it_r))
                if keep_dims:
                    next(it_i)
            else:
                index.append(next(it_i))
        return combiner(term(x[tuple(index)]), axis=rs)
    last = kind not in ("mean", "l2")
    red = compute(shape, body, name=base if last else base + "_sum", tag=tag)
    if kind == "mean":
        count = fconst(math.prod(x.shape[d] for d in axes), x.dtype)
        return compute(shape, lambda *i: red[i] / count, name=base, tag=tag)
    if kind == "l2":
        return compute(shape, lambda *i: ti.sqrt(red[i]), name=base, tag=tag)
    return red
