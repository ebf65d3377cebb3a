"""Neural-network ops of the oneDNN graph op set: MatMul, Convolution, MaxPool/AvgPool,
BatchNormInference, LayerNorm, GroupNorm, RMSNorm, SoftMax/LogSoftmax and the Reduce* family.

The multiply-accumulate of MatMul and Convolution is one compute whose body is
``sum(a[...] * b[...], axis=[...])``, an outer product the "complex" template recognises;
padding is its own compute before it and bias its own compute after it. Softmax, the norms
and the reductions are chains of separate reduction and elementwise computes, so the
"reduction" template can compute each reduction one row at a time.

Example:
    >>> from tensorir import placeholder
    >>> x = placeholder((1, 8, 9, 9), name="x"); w = placeholder((16, 8, 3, 3), name="w")
    >>> y = conv(x, w, strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1],
    ...          data_format="NCX", weights_format="OIX")
    >>> y.shape, y.op.tag, [t.name for t in y.op.input_tensors]
    ((1, 16, 9, 9), 'conv', ['conv_pad', 'w'])
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtype as dt
from .. import intrinsics as ti
from ..reduce import max as rmax
from ..reduce import min as rmin
from ..reduce import prod as rprod
from ..reduce import reduce_axis
from ..reduce import sum as rsum
from ..tensor import Tensor, compute
from .transform import reshape
from ._common import (FORMATS, auto_pads, broadcast_index, broadcast_shapes, broadcasts_to, channel_axis,
                      check_choice, check_float, check_int, check_ints, check_number, check_same_dtype,
                      check_tensor, emax, emin, fconst, normalize_axis, spatial_axes)

__all__ = ["matmul", "conv", "pool", "max_pool", "avg_pool", "batch_norm_inference", "layer_norm",
           "group_norm", "rms_norm", "softmax", "log_softmax", "reduce", "REDUCE_KINDS"]

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
        >>> from tensorir import placeholder
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


# ---------------------------------------------------------------------------- windows (conv, pool)

def _window_attrs(op, x, kernel, strides, pads_begin, pads_end, dilations, data_format, auto_pad):
    """Checked attributes, the explicit pads and the input's spatial sizes."""
    check_choice(op, "data_format", data_format, FORMATS)
    nd = x.ndim - 2
    if nd not in (1, 2, 3):
        raise ValueError(f"{op}: src must have 1, 2 or 3 spatial dimensions (rank 3-5), got shape {x.shape}")
    strides = check_ints(op, "strides", strides, nd, minimum=1)
    dilations = check_ints(op, "dilations", [1] * nd if dilations is None else dilations, nd, minimum=1)
    sizes = [x.shape[a] for a in spatial_axes(data_format, x.ndim)]
    if auto_pad in ("none", None):
        pads_begin = check_ints(op, "pads_begin", pads_begin, nd, minimum=0)
        pads_end = check_ints(op, "pads_end", pads_end, nd, minimum=0)
    pads_begin, pads_end = auto_pads(op, auto_pad or "none", sizes, strides, kernel, dilations, pads_begin, pads_end)
    return strides, dilations, pads_begin, pads_end, sizes


def _out_size(op, size, k, s, d, pl, pr, ceil=False) -> int:
    span = size + pl + pr - ((k - 1) * d + 1)
    if span < 0:
        raise ValueError(f"{op}: the dilated kernel ({(k - 1) * d + 1}) is larger than the padded input "
                         f"({size} + {pl} + {pr})")
    return (-(-span // s) if ceil else span // s) + 1


def _pad(x: Tensor, data_format: str, pads_begin, extents, value, name: str, tag: str) -> Tensor:
    """``x`` with its spatial dimensions padded with ``value`` to ``extents``, starting at
    ``-pads_begin``: its own compute, or ``x`` itself when no padding is read."""
    axes = spatial_axes(data_format, x.ndim)
    sizes = [x.shape[a] for a in axes]
    if all(p == 0 and e <= n for p, e, n in zip(pads_begin, extents, sizes)):
        return x
    shape = list(x.shape)
    for a, e in zip(axes, extents):
        shape[a] = e

    def body(*idx):
        index, cond = list(idx), None
        for a, p, e, n in zip(axes, pads_begin, extents, sizes):
            index[a] = idx[a] - p
            parts = ([idx[a] >= p] if p > 0 else []) + ([idx[a] < p + n] if e > p + n else [])
            for c in parts:
                cond = c if cond is None else cond & c
        read = x[tuple(index)]
        return read if cond is None else ti.if_then_else(cond, read, fconst(value, x.dtype))
    return compute(tuple(shape), body, name=name, tag=tag)


def _data_shape(data_format, n, c, spatial):
    return (n, c, *spatial) if data_format == "NCX" else (n, *spatial, c)


def _split_data_index(data_format, idx):
    """(n, c, spatial indices) of a data-tensor index."""
    return (idx[0], idx[1], idx[2:]) if data_format == "NCX" else (idx[0], idx[-1], idx[1:-1])


def conv(x: Tensor, w: Tensor, strides, pads_begin, pads_end, dilations, groups: int = 1,
         data_format: str = "NXC", weights_format: str = "XIO", bias: Tensor | None = None,
         auto_pad: str = "none", name: str | None = None) -> Tensor:
    """Convolution over 1, 2 or 3 spatial dimensions.

    ``x`` is ``(N, C, *X)`` for ``data_format="NCX"`` or ``(N, *X, C)`` for ``"NXC"`` (the
    default); ``w`` is ``(O, C/groups, *K)`` for ``weights_format="OIX"`` or ``(*K, C/groups, O)``
    for ``"XIO"`` (the default). Output size per spatial axis:
    ``(X + pads_begin + pads_end - ((K - 1) * dilation + 1)) // stride + 1``. ``auto_pad``
    (``none``, ``same_upper``, ``same_lower``, ``valid``) overrides the explicit pads.

    Stages: a zero-padding compute (only when padding is read), the multiply-accumulate
    ``sum(pad[...] * w[...], axis=[ci, k...])`` (with ``groups > 1`` laid out as
    ``(N, G, O/G, *X)`` / ``(N, *X, G, O/G)``), then one compute that restores the channel axis
    and adds ``bias`` where there is either.

    Example:
        >>> from tensorir import placeholder
        >>> x = placeholder((2, 9, 9, 6), name="x"); w = placeholder((3, 3, 3, 4), name="w")
        >>> y = conv(x, w, strides=[2, 2], pads_begin=[0, 1], pads_end=[1, 0], dilations=[1, 1], groups=2)
        >>> y.shape, y.op.tag
        ((2, 4, 4, 4), 'conv')
    """
    op = "Convolution"
    check_tensor(op, "src", x)
    check_tensor(op, "weights", w)
    check_same_dtype(op, src=x, weights=w)
    check_choice(op, "weights_format", weights_format, ("OIX", "XIO"))
    if w.ndim != x.ndim:
        raise ValueError(f"Convolution: weights {w.shape} must have the rank of src {x.shape}")
    if weights_format == "OIX":
        oc, icg, kernel = w.shape[0], w.shape[1], list(w.shape[2:])
    else:
        oc, icg, kernel = w.shape[-1], w.shape[-2], list(w.shape[:-2])
    strides, dilations, pads_begin, pads_end, sizes = _window_attrs(
        op, x, kernel, strides, pads_begin, pads_end, dilations, data_format, auto_pad)
    groups = check_int(op, "groups", groups, minimum=1)
    c = x.shape[channel_axis(data_format, x.ndim)]
    if c % groups or oc % groups:
        raise ValueError(f"Convolution: src channels ({c}) and output channels ({oc}) must be divisible by "
                         f"groups={groups}")
    if icg != c // groups:
        raise ValueError(f"Convolution: weights {w.shape} ({weights_format}) have {icg} input channels per group "
                         f"but src {x.shape} ({data_format}) has {c} channels / groups={groups} = {c // groups}")
    if bias is not None:
        check_tensor(op, "bias", bias)
        check_same_dtype(op, src=x, bias=bias)
        if bias.shape != (oc,):
            raise ValueError(f"Convolution: bias must be 1-D with {oc} elements (output channels), got {bias.shape}")
    outs = [_out_size(op, *a) for a in zip(sizes, kernel, strides, dilations, pads_begin, pads_end)]
    extents = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(outs, strides, kernel, dilations)]
    base = name or "conv"
    padded = _pad(x, data_format, pads_begin, extents, 0, base + "_pad", "conv")
    ocg = oc // groups
    grouped = groups > 1

    def body(*idx):
        n = idx[0]
        if grouped:
            g, o, sp = (idx[1], idx[2], idx[3:]) if data_format == "NCX" else (idx[-2], idx[-1], idx[1:-2])
            ch, out_ch = (lambda ci: g * icg + ci), g * ocg + o
        else:
            _, out_ch, sp = _split_data_index(data_format, idx)
            ch = lambda ci: ci  # noqa: E731
        ci = reduce_axis((0, icg), name="ci")
        ks = [reduce_axis((0, k), name=f"k{d}") for d, k in enumerate(kernel)]
        pos = [o * s + k * d for o, s, k, d in zip(sp, strides, ks, dilations)]
        src = padded[(n, ch(ci), *pos) if data_format == "NCX" else (n, *pos, ch(ci))]
        wei = w[(out_ch, ci, *ks) if weights_format == "OIX" else (*ks, ci, out_ch)]
        return rsum(src * wei, axis=[ci, *ks])
    n = x.shape[0]
    if grouped:
        acc_shape = (n, groups, ocg, *outs) if data_format == "NCX" else (n, *outs, groups, ocg)
    else:
        acc_shape = _data_shape(data_format, n, oc, outs)
    last = bias is None and not grouped
    acc = compute(acc_shape, body, name=base if last else base + "_acc", tag="conv")
    if last:
        return acc

    def epilogue(*idx):
        n_, o, sp = _split_data_index(data_format, idx)
        if grouped:
            g, og = o // ocg, o % ocg
            v = acc[(n_, g, og, *sp) if data_format == "NCX" else (n_, *sp, g, og)]
        else:
            v = acc[idx]
        return v if bias is None else v + bias[o]
    return compute(_data_shape(data_format, n, oc, outs), epilogue, name=base, tag="conv")


def _window_count(o, size, k, s, d, pl, pr, exclude_pad):
    """Python: how many of the k taps of output position o fall in the averaged range
    ([0, size) with exclude_pad, else the padded input [-pl, size + pr))."""
    lo, hi = (0, size) if exclude_pad else (-pl, size + pr)
    start = o * s - pl
    return sum(1 for t in range(k) if lo <= start + t * d < hi)


def _window_count_expr(o, size, k, s, d, pl, pr, exclude_pad):
    """The same count as an index expression of the output axis ``o``."""
    lo, hi = (0, size) if exclude_pad else (-pl, size + pr)
    start = o * s - pl
    first = emax((lo - start + (d - 1)) // d, 0)
    last = emin((hi - 1 - start) // d, k - 1)
    return last - first + 1


def pool(kind: str, x: Tensor, kernel, strides, pads_begin, pads_end, dilations=None,
         exclude_pad: bool = False, rounding_type: str = "floor", data_format: str = "NXC",
         auto_pad: str = "none", name: str | None = None) -> Tensor:
    """MaxPool (``kind="max"``) or AvgPool (``kind="avg"``) over 1, 2 or 3 spatial dimensions.

    Output size per spatial axis: ``(X + pads_begin + pads_end - ((kernel - 1) * dilation + 1)) /
    stride + 1``, rounded down (``rounding_type="floor"``) or up (``"ceil"``; the last window may
    then run past ``pads_end``). Max ignores padding (a window of padding only gives the lowest
    finite value, oneDNN's initial maximum). Average divides by the number of taps inside the
    input (``exclude_pad=True``) or inside the padded input (``exclude_pad=False``), at least 1.
    With ``rounding_type="ceil"`` the average always excludes padding, as oneDNN runs it
    (floor rounding over extra end padding with the exclude-padding algorithm).

    Stages: a padding compute (only when padding is read), the window reduction (max or sum),
    and for avg the division by the count.

    Example:
        >>> from tensorir import placeholder
        >>> x = placeholder((1, 3, 14, 14), name="x")
        >>> y = pool("avg", x, kernel=[3, 3], strides=[2, 2], pads_begin=[1, 1], pads_end=[1, 1],
        ...          exclude_pad=True, rounding_type="ceil", data_format="NCX")
        >>> y.shape, y.op.tag
        ((1, 3, 8, 8), 'avg_pool')
    """
    check_choice("Pool", "kind", kind, ("max", "avg"))
    op = "MaxPool" if kind == "max" else "AvgPool"
    check_tensor(op, "src", x)
    if x.ndim - 2 not in (1, 2, 3):
        raise ValueError(f"{op}: src must have 1, 2 or 3 spatial dimensions (rank 3-5), got shape {x.shape}")
    kernel = check_ints(op, "kernel", kernel, x.ndim - 2, minimum=1)
    strides, dilations, pads_begin, pads_end, sizes = _window_attrs(
        op, x, kernel, strides, pads_begin, pads_end, dilations, data_format, auto_pad)
    check_choice(op, "rounding_type", rounding_type, ("floor", "ceil"))
    if not isinstance(exclude_pad, bool):
        raise ValueError(f"{op}: attribute exclude_pad must be a bool, got {exclude_pad!r}")
    if kind == "avg" and not dt.is_float(x.dtype):
        raise TypeError(f"AvgPool: src must have a float dtype, got {x.dtype}")
    attrs = list(zip(sizes, kernel, strides, dilations, pads_begin, pads_end))
    outs = [_out_size(op, *a, ceil=rounding_type == "ceil") for a in attrs]
    extents = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(outs, strides, kernel, dilations)]
    tag = "max_pool" if kind == "max" else "avg_pool"
    base = name or tag
    # max: padding reads the lowest finite value, oneDNN's initial maximum, so a window that
    # holds only padding gives that value (not -inf)
    fill = 0
    if kind == "max":
        fill = float(np.finfo(x.dtype).min) if dt.is_float(x.dtype) else dt.min_value(x.dtype)
    # oneDNN runs ceil rounding as floor rounding over extra end padding with the
    # exclude-padding average, whatever exclude_pad says
    exclude_pad = exclude_pad or rounding_type == "ceil"
    padded = _pad(x, data_format, pads_begin, extents, fill, base + "_pad", tag)
    out_shape = list(x.shape)
    for a, o in zip(spatial_axes(data_format, x.ndim), outs):
        out_shape[a] = o
    out_shape = tuple(out_shape)

    def body(*idx):
        n, c, sp = _split_data_index(data_format, idx)
        ks = [reduce_axis((0, k), name=f"k{d}") for d, k in enumerate(kernel)]
        pos = [o * s + k * d for o, s, k, d in zip(sp, strides, ks, dilations)]
        src = padded[(n, c, *pos) if data_format == "NCX" else (n, *pos, c)]
        return (rmax if kind == "max" else rsum)(src, axis=ks)
    red = compute(out_shape, body, name=base if kind == "max" else base + "_sum", tag=tag)
    if kind == "max":
        return red
    # the divisor per output position: a constant where it does not vary along an axis
    constant, varying = 1, []
    for axis_pos, (o_n, a) in enumerate(zip(outs, attrs)):
        counts = {_window_count(o, *a, exclude_pad) for o in range(o_n)}
        if len(counts) == 1:
            constant *= counts.pop()
        else:
            varying.append((axis_pos, a, min(counts) == 0))
    constant = max(constant, 1)

    def divide(*idx):
        _, _, sp = _split_data_index(data_format, idx)
        count = None
        for axis_pos, a, may_be_empty in varying:
            cnt = _window_count_expr(sp[axis_pos], *a, exclude_pad)
            cnt = emax(cnt, 1) if may_be_empty else cnt
            count = cnt if count is None else count * cnt
        if count is None:
            return red[idx] / fconst(constant, x.dtype)
        denom = ti.cast(x.dtype, count)
        return red[idx] / (denom * fconst(constant, x.dtype) if constant != 1 else denom)
    return compute(out_shape, divide, name=base, tag=tag)


def max_pool(x: Tensor, kernel, strides, pads_begin, pads_end, dilations=None, rounding_type: str = "floor",
             data_format: str = "NXC", auto_pad: str = "none", name: str | None = None) -> Tensor:
    """MaxPool: ``pool("max", ...)`` with oneDNN's MaxPool attributes.

    Example:
        >>> from tensorir import placeholder
        >>> max_pool(placeholder((1, 7, 7, 3)), kernel=[2, 2], strides=[2, 2], pads_begin=[0, 0],
        ...          pads_end=[0, 0], rounding_type="ceil").shape
        (1, 4, 4, 3)
    """
    return pool("max", x, kernel, strides, pads_begin, pads_end, dilations, False, rounding_type,
                data_format, auto_pad, name)


def avg_pool(x: Tensor, kernel, strides, pads_begin, pads_end, exclude_pad: bool, rounding_type: str = "floor",
             data_format: str = "NXC", auto_pad: str = "none", name: str | None = None) -> Tensor:
    """AvgPool: ``pool("avg", ...)`` with oneDNN's AvgPool attributes (no dilations).

    Example:
        >>> from tensorir import placeholder
        >>> avg_pool(placeholder((1, 7, 7, 3)), kernel=[3, 3], strides=[1, 1], pads_begin=[1, 1],
        ...          pads_end=[1, 1], exclude_pad=False).shape
        (1, 7, 7, 3)
    """
    return pool("avg", x, kernel, strides, pads_begin, pads_end, None, exclude_pad, rounding_type,
                data_format, auto_pad, name)


# ---------------------------------------------------------------------------- normalization

def batch_norm_inference(x: Tensor, gamma: Tensor, beta: Tensor, mean: Tensor, variance: Tensor,
                         epsilon: float, data_format: str = "NXC", name: str | None = None) -> Tensor:
    """BatchNormInference: ``gamma * (x - mean) / sqrt(variance + epsilon) + beta``, each
    parameter 1-D along the channel axis (axis 1 for ``NCX``, the last for ``NXC``).

    Example:
        >>> from tensorir import placeholder
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
        >>> from tensorir import placeholder
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
        >>> from tensorir import placeholder
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
        >>> from tensorir import placeholder
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


def softmax(x: Tensor, axis: int = 1, mode: str = "none", name: str | None = None) -> Tensor:
    """SoftMax along ``axis``: ``exp(x - max) / sum(exp(x - max))``. ``mode="inf_as_zero"``
    gives 0 (not NaN) along a row that is all -inf.

    Stages: max (reduction), exp(x - max), sum (reduction), division.

    Example:
        >>> from tensorir import placeholder
        >>> y = softmax(placeholder((7, 37)), axis=-1)
        >>> y.op.tag, [t.name for t in y.op.input_tensors]
        ('softmax', ['softmax_exp', 'softmax_sum'])
    """
    op = "SoftMax"
    check_float(op, "src", x)
    axis = normalize_axis(op, "axis", axis, x.ndim)
    check_choice(op, "mode", mode, ("none", "inf_as_zero"))
    base, tag = name or "softmax", "softmax"
    mx = _row_reduce(x, axis, rmax, lambda v, i: v, base + "_max", tag)
    row = lambda i: i[:axis] + i[axis + 1:]  # noqa: E731
    e = compute(x.shape, lambda *i: ti.exp(x[i] - mx[row(i)]), name=base + "_exp", tag=tag)
    s = _row_reduce(e, axis, rsum, lambda v, i: v, base + "_sum", tag)

    def body(*i):
        v = e[i] / s[row(i)]
        if mode == "inf_as_zero":
            return ti.if_then_else(mx[row(i)] == fconst(-math.inf, x.dtype), fconst(0, x.dtype), v)
        return v
    return compute(x.shape, body, name=base, tag=tag)


def log_softmax(x: Tensor, axis: int = -1, name: str | None = None) -> Tensor:
    """LogSoftmax along ``axis``: ``x - max - log(sum(exp(x - max)))``.

    Stages: max (reduction), sum of exp(x - max) (reduction), the difference.

    Example:
        >>> from tensorir import placeholder
        >>> log_softmax(placeholder((7, 37))).op.tag
        'log_softmax'
    """
    op = "LogSoftmax"
    check_float(op, "src", x)
    axis = normalize_axis(op, "axis", axis, x.ndim)
    base, tag = name or "log_softmax", "log_softmax"
    mx = _row_reduce(x, axis, rmax, lambda v, i: v, base + "_max", tag)
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
        >>> from tensorir import placeholder
        >>> y = reduce("mean", placeholder((7, 13, 5)), axes=[-1, 1], keep_dims=True)
        >>> y.shape, y.op.tag
        ((7, 1, 1), 'reduce_mean')
    """
    check_choice("Reduce", "kind", kind, REDUCE_KINDS)
    op = "Reduce" + {"l1": "L1", "l2": "L2"}.get(kind, kind.capitalize())
    check_tensor(op, "src", x)
    if kind in ("mean", "l2") and not dt.is_float(x.dtype):
        raise TypeError(f"{op}: src must have a float dtype, got {x.dtype}")
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
