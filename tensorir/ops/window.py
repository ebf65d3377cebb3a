"""Sliding-window ops of the oneDNN graph op set: Convolution, ConvTranspose, MaxPool and
AvgPool over 1, 2 or 3 spatial dimensions, in NCX or NXC data layouts.

The multiply-accumulate of Convolution and ConvTranspose is one compute whose body is
``sum(src[...] * weights[...], axis=[ci, k...])``, an outer product the "complex" template
recognises; padding (and, for ConvTranspose, spreading the input out by the stride) is its own
compute before it, and bias and the groups' channel layout one compute after it.

Example:
    >>> from tilefuse.tensorir import placeholder
    >>> x = placeholder((1, 8, 9, 9), name="x"); w = placeholder((16, 8, 3, 3), name="w")
    >>> y = conv(x, w, strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1],
    ...          data_format="NCX", weights_format="OIX")
    >>> y.shape, y.op.tag, [t.name for t in y.op.input_tensors]
    ((1, 16, 9, 9), 'conv', ['conv_pad', 'w'])
"""
from __future__ import annotations

import numpy as np

from .. import dtype as dt
from .. import intrinsics as ti
from ..reduce import max as rmax
from ..reduce import min as rmin
from ..reduce import reduce_axis
from ..reduce import sum as rsum
from ..tensor import Tensor, compute
from ._common import (FORMATS, channel_axis, check_choice, check_int, check_ints, check_same_dtype,
                      check_tensor, emax, emin, fconst, spatial_axes)

__all__ = ["conv", "conv_transpose", "pool", "max_pool", "max_pool_indices", "avg_pool", "runs_as_diagonals"]

DIAGONAL_GROUP_WIDTH = 4   # channels-last groups this narrow (and as many outputs as inputs) run as diagonals


def _window_attrs(op, x, kernel, strides, pads_begin, pads_end, dilations, data_format, min_pad: int | None = 0):
    """Checked attributes, the explicit pads and the input's spatial sizes (pads must be >=
    ``min_pad``; None allows any)."""
    check_choice(op, "data_format", data_format, FORMATS)
    nd = x.ndim - 2
    if nd not in (1, 2, 3):
        raise ValueError(f"{op}: src must have 1, 2 or 3 spatial dimensions (rank 3-5), got shape {x.shape}")
    strides = check_ints(op, "strides", strides, nd, minimum=1)
    dilations = check_ints(op, "dilations", [1] * nd if dilations is None else dilations, nd, minimum=1)
    sizes = [x.shape[a] for a in spatial_axes(data_format, x.ndim)]
    pads_begin = check_ints(op, "pads_begin", pads_begin, nd, minimum=min_pad)
    pads_end = check_ints(op, "pads_end", pads_end, nd, minimum=min_pad)
    return strides, dilations, pads_begin, pads_end, sizes


def _out_size(op, size, k, s, d, pl, pr, ceil=False) -> int:
    span = size + pl + pr - ((k - 1) * d + 1)
    if span < 0:
        raise ValueError(f"{op}: the dilated kernel ({(k - 1) * d + 1}) is larger than the padded input "
                         f"({size} + {pl} + {pr})")
    return (-(-span // s) if ceil else span // s) + 1


def _pad(x: Tensor, data_format: str, pads_begin, extents, value, name: str, tag: str, strides=None) -> Tensor:
    """``x`` with its spatial dimensions spread over ``extents``: element ``i`` of ``x`` at
    position ``pads_begin + i * stride`` (``strides`` default to 1; a negative ``pads_begin``
    drops leading elements), every other position ``value``. Its own compute, or ``x`` itself
    when that is the identity."""
    axes = spatial_axes(data_format, x.ndim)
    sizes = [x.shape[a] for a in axes]
    strides = strides or [1] * len(axes)
    if all(p == 0 and s == 1 and e <= n for p, s, e, n in zip(pads_begin, strides, extents, sizes)):
        return x
    shape = list(x.shape)
    for a, e in zip(axes, extents):
        shape[a] = e

    def body(*idx):
        index, conds = list(idx), []
        for a, p, s, e, n in zip(axes, pads_begin, strides, extents, sizes):
            q = idx[a] - p if p else idx[a]
            last = p + (n - 1) * s                 # where the last element of x lands
            if p > 0:
                conds.append(idx[a] >= p)
            if e - 1 > last:
                conds.append(idx[a] <= last)
            if s > 1:
                conds.append(q % s == 0)
                q = q // s
            index[a] = q
        read = x[tuple(index)]
        if not conds:
            return read
        cond = conds[0]
        for c in conds[1:]:
            cond = cond & c
        return ti.if_then_else(cond, read, fconst(value, x.dtype))
    return compute(tuple(shape), body, name=name, tag=tag)


def _crop(x: Tensor, data_format: str, begin, end, name: str, tag: str) -> Tensor:
    """``x`` without the first ``begin[d]`` and the last ``end[d]`` elements of each spatial
    dimension (``x`` itself when nothing is cropped)."""
    if not any(begin) and not any(end):
        return x
    axes = spatial_axes(data_format, x.ndim)
    shape = list(x.shape)
    for a, b, e in zip(axes, begin, end):
        shape[a] -= b + e

    def body(*idx):
        index = list(idx)
        for a, b in zip(axes, begin):
            index[a] = idx[a] + b if b else idx[a]
        return x[tuple(index)]
    return compute(tuple(shape), body, name=name, tag=tag)


def _data_shape(data_format, n, c, spatial):
    return (n, c, *spatial) if data_format == "NCX" else (n, *spatial, c)


def _split_data_index(data_format, idx):
    """(n, c, spatial indices) of a data-tensor index."""
    return (idx[0], idx[1], idx[2:]) if data_format == "NCX" else (idx[0], idx[-1], idx[1:-1])


def _grouped(g, size, local):
    """The global channel ``g * size + local`` (``local`` when ``g`` is None: one group)."""
    return local if g is None else g * size + local


def _multiply_accumulate(src: Tensor, weight_at, kernel, strides, dilations, outs, groups: int, icg: int, ocg: int,
                         data_format: str, bias: Tensor | None, base: str, tag: str) -> Tensor:
    """``dst[n, g*ocg + o, y] = sum_{ci, k} src[n, g*icg + ci, y * stride + k * dilation] *
    weight_at(g, o, ci, k)`` (+ bias), ``src`` already padded. The accumulation is one compute,
    laid out ``(N, G, O/G, *X)`` / ``(N, *X, G, O/G)`` when ``groups > 1``, except in NXC with
    one output channel per group (depthwise): ``(N, *X, 1, G)``, the channels last, so that
    the window template vectorizes them (the unit axis, read by the weights alone, keeps it
    a product's class, not a reduction's). One more compute restores the channel axis and adds the
    bias where there is either. ``weight_at`` gets ``g=None`` when there is one group."""
    grouped = groups > 1
    depthwise_last = grouped and ocg == 1 and data_format != "NCX"

    def body(*idx):
        n = idx[0]
        if depthwise_last:
            g, o, sp = idx[-1], idx[-2], idx[1:-2]
        elif grouped:
            g, o, sp = (idx[1], idx[2], idx[3:]) if data_format == "NCX" else (idx[-2], idx[-1], idx[1:-2])
        else:
            g, (_, o, sp) = None, _split_data_index(data_format, idx)
        ci = reduce_axis((0, icg), name="ci")
        ks = [reduce_axis((0, k), name=f"k{d}") for d, k in enumerate(kernel)]
        pos = [y * s + k * d if s != 1 else y + k * d for y, s, k, d in zip(sp, strides, ks, dilations)]
        ch = _grouped(g, icg, ci)
        read = src[(n, ch, *pos) if data_format == "NCX" else (n, *pos, ch)]
        return rsum(read * weight_at(g, o, ci, ks), axis=[ci, *ks])
    n, oc = src.shape[0], groups * ocg
    if depthwise_last:
        acc_shape = (n, *outs, 1, groups)
    elif grouped:
        acc_shape = (n, groups, ocg, *outs) if data_format == "NCX" else (n, *outs, groups, ocg)
    else:
        acc_shape = _data_shape(data_format, n, oc, outs)
    last = bias is None and not grouped
    acc = compute(acc_shape, body, name=base if last else base + "_acc", tag=tag)
    if last:
        return acc

    def epilogue(*idx):
        n_, o, sp = _split_data_index(data_format, idx)
        if depthwise_last:
            v = acc[(n_, *sp, 0, o)]
        elif grouped:
            g, og = o // ocg, o % ocg
            v = acc[(n_, g, og, *sp) if data_format == "NCX" else (n_, *sp, g, og)]
        else:
            v = acc[idx]
        return v if bias is None else v + bias[o]
    return compute(_data_shape(data_format, n, oc, outs), epilogue, name=base, tag=tag)


def _check_bias(op: str, x: Tensor, bias, oc: int):
    if bias is not None:
        check_tensor(op, "bias", bias)
        check_same_dtype(op, src=x, bias=bias)
        if bias.shape != (oc,):
            raise ValueError(f"{op}: bias must be 1-D with {oc} elements (output channels), got {bias.shape}")


def conv(x: Tensor, w: Tensor, strides, pads_begin, pads_end, dilations, groups: int = 1,
         data_format: str = "NXC", weights_format: str = "XIO", bias: Tensor | None = None,
         name: str | None = None) -> Tensor:
    """Convolution over 1, 2 or 3 spatial dimensions.

    ``x`` is ``(N, C, *X)`` for ``data_format="NCX"`` or ``(N, *X, C)`` for ``"NXC"`` (the
    default); ``w`` is ``(O, C/groups, *K)`` for ``weights_format="OIX"`` or ``(*K, C/groups, O)``
    for ``"XIO"`` (the default). Output size per spatial axis:
    ``(X + pads_begin + pads_end - ((K - 1) * dilation + 1)) // stride + 1``. Pads are explicit
    numbers (``auto_pad`` is resolved by the graph front end).

    Stages: a zero-padding compute (only when padding is read), the multiply-accumulate
    ``sum(pad[...] * w[...], axis=[ci, k...])`` (with ``groups > 1`` laid out as
    ``(N, G, O/G, *X)`` / ``(N, *X, G, O/G)``), then one compute that restores the channel axis
    and adds ``bias`` where there is either. Channels-last groups of 2 to
    ``DIAGONAL_GROUP_WIDTH`` channels (``runs_as_diagonals``) sum diagonals instead
    (``_diagonals``).

    Example:
        >>> from tilefuse.tensorir import placeholder
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
        op, x, kernel, strides, pads_begin, pads_end, dilations, data_format)
    groups = check_int(op, "groups", groups, minimum=1)
    c = x.shape[channel_axis(data_format, x.ndim)]
    if c % groups or oc % groups:
        raise ValueError(f"Convolution: src channels ({c}) and output channels ({oc}) must be divisible by "
                         f"groups={groups}")
    if icg != c // groups:
        raise ValueError(f"Convolution: weights {w.shape} ({weights_format}) have {icg} input channels per group "
                         f"but src {x.shape} ({data_format}) has {c} channels / groups={groups} = {c // groups}")
    _check_bias(op, x, bias, oc)
    outs = [_out_size(op, *a) for a in zip(sizes, kernel, strides, dilations, pads_begin, pads_end)]
    extents = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(outs, strides, kernel, dilations)]
    base = name or "conv"
    padded = _pad(x, data_format, pads_begin, extents, 0, base + "_pad", "conv")
    ocg = oc // groups

    def weight_at(g, o, ci, ks):
        out_ch = _grouped(g, ocg, o)
        return w[(out_ch, ci, *ks) if weights_format == "OIX" else (*ks, ci, out_ch)]
    if runs_as_diagonals(groups, icg, ocg, data_format):
        return _diagonals(padded, weight_at, kernel, strides, dilations, outs, icg, bias, base)
    return _multiply_accumulate(padded, weight_at, kernel, strides, dilations, outs, groups, icg, ocg, data_format,
                                bias, base, "conv")


def runs_as_diagonals(groups: int, icg: int, ocg: int, data_format: str) -> bool:
    """Whether a grouped convolution runs as ``_diagonals``: channels-last, in groups of as
    many input as output channels, 2 to ``DIAGONAL_GROUP_WIDTH`` of them.

    Example:
        >>> runs_as_diagonals(32, 4, 4, "NXC"), runs_as_diagonals(32, 4, 4, "NCX"), runs_as_diagonals(16, 8, 8, "NXC")
        (True, False, False)
    """
    return groups > 1 and data_format != "NCX" and icg == ocg and 2 <= icg <= DIAGONAL_GROUP_WIDTH


def _diagonals(src: Tensor, weight_at, kernel, strides, dilations, outs, width: int, bias: Tensor | None,
               base: str) -> Tensor:
    """A channels-last convolution in groups of ``width`` input and output channels as a
    window over the channels too: output channel ``c`` (``o = c % width`` of its group) sums
    input channels ``c + d - (width - 1)`` for ``d`` in ``[0, 2 * width - 1)`` times
    ``diagonal[*k, d, 0, c]``, the weight of input channel ``o + d - (width - 1)`` of its
    group, zero where that falls outside the group. Each diagonal is a depthwise convolution of
    the input shifted by ``d`` channels: a vector of output channels reads a contiguous vector
    of input channels, where a group narrower than a vector would need each lane's input
    channel apart (a gather). ``2 * width - 1`` multiply-adds per weight: 1.75x the product's
    for groups of 4, against two transposes around the product in NCHW.
    ``src`` is padded already along the spatial axes; the channels get ``width - 1`` zeros on
    each side. The diagonal weights read only ``weight_at``'s tensor: a stage the build runs
    once per weight array (``schedule.hoist``)."""
    n, *_, c = src.shape
    span, shift = 2 * width - 1, width - 1
    sp_shape = src.shape[1:-1]

    def shifted(*idx):
        ch = idx[-1]
        return ti.if_then_else((ch >= shift) & (ch < c + shift), src[(*idx[:-1], ch - shift)], fconst(0, src.dtype))
    wide = compute((n, *sp_shape, c + 2 * shift), shifted, name=base + "_channel_pad", tag="conv")

    def diagonal_weight(*idx):
        ks, d, ch = idx[:-3], idx[-3], idx[-1]
        o = ch % width
        ci = o + d - shift
        inside = (ci >= 0) & (ci < width)
        return ti.if_then_else(inside, weight_at(ch // width, o, emin(emax(ci, 0), width - 1), ks),
                               fconst(0, src.dtype))
    diagonal = compute((*kernel, span, 1, c), diagonal_weight, name=base + "_diagonals", tag="conv")

    def body(*idx):
        n_, sp, u, ch = idx[0], idx[1:-2], idx[-2], idx[-1]
        d = reduce_axis((0, span), name="d")
        ks = [reduce_axis((0, k), name=f"k{i}") for i, k in enumerate(kernel)]
        pos = [y * s + k * dl if s != 1 else y + k * dl for y, s, k, dl in zip(sp, strides, ks, dilations)]
        return rsum(wide[(n_, *pos, ch + d)] * diagonal[(*ks, d, u, ch)], axis=[d, *ks])
    acc = compute((n, *outs, 1, c), body, name=base + "_acc", tag="conv")

    def epilogue(*idx):
        v = acc[(*idx[:-1], 0, idx[-1])]
        return v if bias is None else v + bias[idx[-1]]
    return compute((n, *outs, c), epilogue, name=base, tag="conv")


CONVT_WEIGHTS_FORMATS = ("XOI", "IOX", "OIX", "XIO")


def conv_transpose(x: Tensor, w: Tensor, strides, pads_begin, pads_end, dilations, groups: int = 1,
                   data_format: str = "NXC", weights_format: str = "XOI", output_padding=None,
                   bias: Tensor | None = None, name: str | None = None) -> Tensor:
    """ConvTranspose (deconvolution, the gradient of Convolution with respect to its src) over
    1, 2 or 3 spatial dimensions: ``dst[n, g*O/G + o, i * stride + k * dilation - pads_begin] +=
    src[n, g*C/G + c, i] * weights[c, o, k]`` over every input position ``i`` and tap ``k``.

    ``weights_format``: ``"IOX"`` is ``(C, O/groups, *K)``, ``"XOI"`` (the default) is
    ``(*K, O/groups, C)``; ``"OIX"`` ``(O/groups, C, *K)`` and ``"XIO"`` ``(*K, C, O/groups)`` are
    accepted too. Output size per spatial axis: ``(X - 1) * stride + (K - 1) * dilation + 1 -
    pads_begin - pads_end + output_padding``.

    Stages, with strides, one group and no dilation: the input padded, the weights regrouped
    by output phase and the multiply-accumulate per phase (``_conv_transpose_by_phases``: no
    multiply meets a zero), then ``bias``. Otherwise: the input spread out by the stride over
    a zero background with ``(K - 1) * dilation - pads_begin`` in front (its own compute), the
    multiply-accumulate of a stride-1 convolution over it with the kernel flipped,
    ``sum(spread[...] * w[..., K - 1 - k], axis=[ci, k...])`` (the "complex" outer product),
    then the channel layout and ``bias`` as in ``conv``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> x = placeholder((2, 4, 5, 5), name="x"); w = placeholder((4, 3, 3, 3), name="w")
        >>> y = conv_transpose(x, w, strides=[2, 2], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1],
        ...                    data_format="NCX", weights_format="IOX", output_padding=[1, 1])
        >>> y.shape, y.op.tag
        ((2, 3, 10, 10), 'conv_transpose')
    """
    op = "ConvTranspose"
    check_tensor(op, "src", x)
    check_tensor(op, "weights", w)
    check_same_dtype(op, src=x, weights=w)
    check_choice(op, "weights_format", weights_format, CONVT_WEIGHTS_FORMATS)
    if w.ndim != x.ndim:
        raise ValueError(f"ConvTranspose: weights {w.shape} must have the rank of src {x.shape}")
    if weights_format in ("IOX", "OIX"):
        kernel = list(w.shape[2:])
        ic, ocg = (w.shape[0], w.shape[1]) if weights_format == "IOX" else (w.shape[1], w.shape[0])
    else:
        kernel = list(w.shape[:-2])
        ic, ocg = (w.shape[-1], w.shape[-2]) if weights_format == "XOI" else (w.shape[-2], w.shape[-1])
    check_choice(op, "data_format", data_format, FORMATS)
    nd = x.ndim - 2
    if nd not in (1, 2, 3):
        raise ValueError(f"ConvTranspose: src must have 1, 2 or 3 spatial dimensions (rank 3-5), got shape "
                         f"{x.shape}")
    strides = check_ints(op, "strides", strides, nd, minimum=1)
    dilations = check_ints(op, "dilations", [1] * nd if dilations is None else dilations, nd, minimum=1)
    pads_begin = check_ints(op, "pads_begin", pads_begin, nd, minimum=0)
    pads_end = check_ints(op, "pads_end", pads_end, nd, minimum=0)
    output_padding = check_ints(op, "output_padding", [0] * nd if output_padding is None else output_padding,
                                nd, minimum=0)
    groups = check_int(op, "groups", groups, minimum=1)
    c = x.shape[channel_axis(data_format, x.ndim)]
    if c % groups:
        raise ValueError(f"ConvTranspose: src channels ({c}) must be divisible by groups={groups}")
    if ic != c:
        raise ValueError(f"ConvTranspose: weights {w.shape} ({weights_format}) have {ic} input channels but src "
                         f"{x.shape} ({data_format}) has {c}")
    oc, icg = ocg * groups, c // groups
    _check_bias(op, x, bias, oc)
    sizes = [x.shape[a] for a in spatial_axes(data_format, x.ndim)]
    outs = [(n - 1) * s + (k - 1) * d + 1 - pb - pe + op_
            for n, s, k, d, pb, pe, op_ in zip(sizes, strides, kernel, dilations, pads_begin, pads_end, output_padding)]
    if any(o <= 0 for o in outs):
        raise ValueError(f"ConvTranspose: the output spatial size {outs} is not positive (src {x.shape}, kernel "
                         f"{kernel}, pads {pads_begin} + {pads_end})")
    base = name or "conv_transpose"
    tag = "conv_transpose"
    if groups == 1 and any(st > 1 for st in strides) and all(d == 1 for d in dilations):
        return _conv_transpose_by_phases(x, w, strides, pads_begin, kernel, outs, data_format, weights_format,
                                         bias, base, tag)
    front = [(k - 1) * d - pb for k, d, pb in zip(kernel, dilations, pads_begin)]
    extents = [o + (k - 1) * d for o, k, d in zip(outs, kernel, dilations)]
    spread = _pad(x, data_format, front, extents, 0, base + "_spread", tag, strides=strides)

    def weight_at(g, o, ci, ks):
        flipped = [(k - 1) - t for k, t in zip(kernel, ks)]
        in_ch = _grouped(g, icg, ci)
        return w[{"IOX": (in_ch, o, *flipped), "OIX": (o, in_ch, *flipped),
                  "XOI": (*flipped, o, in_ch), "XIO": (*flipped, in_ch, o)}[weights_format]]
    return _multiply_accumulate(spread, weight_at, kernel, [1] * nd, dilations, outs, groups, icg, ocg,
                                data_format, bias, base, tag)


def _conv_transpose_by_phases(x: Tensor, w: Tensor, strides, pads_begin, kernel, outs, data_format: str,
                              weights_format: str, bias, base: str, tag: str) -> Tensor:
    """ConvTranspose with strides (one group, no dilation) as a convolution per output phase:
    output position ``y`` (``q = y + pads_begin``) receives the taps ``k = q % s + s * t`` from
    input positions ``q // s - t``, ``t < ceil(K / s)``. So no multiply meets a zero of a
    spread-out input (an s-fold saving per strided axis). The weights are regrouped once, into
    ``(*phases, *taps, C, O)`` with the taps past the kernel zero (a stage reading only the
    constant weights, which a prepacked kernel runs once per weight array), and the input is
    padded by the taps that reach before or past it."""
    axes = spatial_axes(data_format, x.ndim)
    sizes = [x.shape[a] for a in axes]
    taps = [-(-k // st) for k, st in zip(kernel, strides)]
    c = x.shape[channel_axis(data_format, x.ndim)]
    oc = w.shape[1] if weights_format == "IOX" else (w.shape[0] if weights_format == "OIX" else
                                                    (w.shape[-2] if weights_format == "XOI" else w.shape[-1]))
    # input positions read: from pads_begin // s - (T - 1) to (out - 1 + pads_begin) // s
    lowest = [p // st - (t - 1) for p, st, t in zip(pads_begin, strides, taps)]
    highest = [(o - 1 + p) // st for o, p, st in zip(outs, pads_begin, strides)]
    padded = _pad(x, data_format, [-lo for lo in lowest], [hi - lo + 1 for lo, hi in zip(lowest, highest)], 0,
                  base + "_pad", tag)

    def regroup(*idx):
        nd = len(kernel)
        phases, ts, ci, o = idx[:nd], idx[nd:2 * nd], idx[2 * nd], idx[2 * nd + 1]
        ks = [r + st * t for r, st, t in zip(phases, strides, ts)]
        read = w[{"IOX": (ci, o, *ks), "OIX": (o, ci, *ks), "XOI": (*ks, o, ci), "XIO": (*ks, ci, o)}[weights_format]]
        inside = [k < kk for k, kk, st, t in zip(ks, kernel, strides, taps) if st * t > kk]   # taps past K
        if not inside:
            return read
        cond = inside[0]
        for extra in inside[1:]:
            cond = cond & extra
        return ti.if_then_else(cond, read, fconst(0, w.dtype))
    regrouped = compute((*strides, *taps, c, oc), regroup, name=base + "_weights", tag=tag)

    def body(*idx):
        n, o, ys = _split_data_index(data_format, idx)
        ci = reduce_axis((0, c), name="ci")
        ts = [reduce_axis((0, t), name=f"t{d}") for d, t in enumerate(taps)]
        qs = [y + p if p else y for y, p in zip(ys, pads_begin)]
        pos = [q // st - t - lo if st > 1 else q - t - lo for q, st, t, lo in zip(qs, strides, ts, lowest)]
        phases = [q % st if st > 1 else 0 for q, st in zip(qs, strides)]
        src = padded[(n, ci, *pos) if data_format == "NCX" else (n, *pos, ci)]
        return rsum(src * regrouped[(*phases, *ts, ci, o)], axis=[ci, *ts])
    shape = _data_shape(data_format, x.shape[0], oc, outs)
    acc = compute(shape, body, name=base if bias is None else base + "_acc", tag=tag)
    if bias is None:
        return acc
    return compute(shape, lambda *idx: acc[idx] + bias[_split_data_index(data_format, idx)[1]], name=base, tag=tag)


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
         name: str | None = None) -> Tensor:
    """MaxPool (``kind="max"``) or AvgPool (``kind="avg"``) over 1, 2 or 3 spatial dimensions.

    Output size per spatial axis: ``(X + pads_begin + pads_end - ((kernel - 1) * dilation + 1)) /
    stride + 1``, rounded down (``rounding_type="floor"``) or up (``"ceil"``; the last window may
    then run past ``pads_end``). Max ignores padding (a window of padding only gives the lowest
    finite value, oneDNN's initial maximum). Average divides by the number of taps inside the
    input (``exclude_pad=True``) or inside the padded input (``exclude_pad=False``), at least 1.
    With ``rounding_type="ceil"`` the average always excludes padding, as oneDNN runs it
    (floor rounding over extra end padding with the exclude-padding algorithm).

    A negative pad crops the input (``pads_end=[-1]`` drops its last element).

    Stages: a padding compute (only when padding is read; a cropping one for negative pads),
    the window reduction (max or sum), and for avg the division by the count.

    Example:
        >>> from tilefuse.tensorir import placeholder
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
        op, x, kernel, strides, pads_begin, pads_end, dilations, data_format, min_pad=None)
    check_choice(op, "rounding_type", rounding_type, ("floor", "ceil"))
    if not isinstance(exclude_pad, bool):
        raise ValueError(f"{op}: attribute exclude_pad must be a bool, got {exclude_pad!r}")
    if kind == "avg" and not dt.is_float(x.dtype):
        raise TypeError(f"AvgPool: src must have a float dtype, got {x.dtype}")
    tag = "max_pool" if kind == "max" else "avg_pool"
    base = name or tag
    # a negative pad crops the input
    crop_begin, crop_end = [max(-p, 0) for p in pads_begin], [max(-p, 0) for p in pads_end]
    if any(b + e >= n for b, e, n in zip(crop_begin, crop_end, sizes)):
        raise ValueError(f"{op}: negative pads {pads_begin} and {pads_end} crop away all of src {x.shape}")
    x = _crop(x, data_format, crop_begin, crop_end, base + "_crop", tag)
    sizes = [n - b - e for n, b, e in zip(sizes, crop_begin, crop_end)]
    pads_begin, pads_end = [max(p, 0) for p in pads_begin], [max(p, 0) for p in pads_end]
    attrs = list(zip(sizes, kernel, strides, dilations, pads_begin, pads_end))
    outs = [_out_size(op, *a, ceil=rounding_type == "ceil") for a in attrs]
    extents = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(outs, strides, kernel, dilations)]
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
             data_format: str = "NXC", name: str | None = None) -> Tensor:
    """MaxPool: ``pool("max", ...)`` with oneDNN's MaxPool attributes.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> max_pool(placeholder((1, 7, 7, 3)), kernel=[2, 2], strides=[2, 2], pads_begin=[0, 0],
        ...          pads_end=[0, 0], rounding_type="ceil").shape
        (1, 4, 4, 3)
    """
    return pool("max", x, kernel, strides, pads_begin, pads_end, dilations, False, rounding_type,
                data_format, name)


def max_pool_indices(x: Tensor, y: Tensor, kernel, strides, pads_begin, pads_end, dilations=None,
                     storage_order: int = 0, name: str | None = None) -> Tensor:
    """Where each maximum of a MaxPool lies: for ``x`` (NCX) and ``y``, its MaxPool with these
    attributes (any output size: ``y``'s spatial dims say how many windows), the int64 position
    in ``x`` flattened of the first element of each window (in row-major order over the
    window) equal to the window's maximum, as ONNX's MaxPool Indices output: ``n``, ``c`` and
    the spatial position row-major, or with ``storage_order=1`` the spatial position
    column-major (``h + w * H`` in 2-D). Windows start at ``o * stride - pads_begin``; taps in
    the padding never count. A window without an element equal to its maximum (one of padding
    only) gives the position -1 along every spatial axis put through the same formula, as
    onnxruntime does (``base - W - 1`` in 2-D row-major). A negative pad crops (the windows
    start after the input's begin).

    Stages: the first row-major position per window (a min reduction over the taps), then its
    spatial part re-ordered for ``storage_order=1`` and the empty windows' position set.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> x = placeholder((1, 2, 7, 5), name="x"); y = placeholder((1, 2, 3, 5), name="y")
        >>> i = max_pool_indices(x, y, kernel=[3, 1], strides=[2, 1], pads_begin=[0, 0], pads_end=[0, 0])
        >>> i.shape, i.dtype
        ((1, 2, 3, 5), 'int64')
    """
    op = "MaxPoolIndices"
    check_tensor(op, "src", x)
    check_tensor(op, "dst", y)
    check_same_dtype(op, src=x, dst=y)
    if x.ndim - 2 not in (1, 2, 3) or y.ndim != x.ndim or y.shape[:2] != x.shape[:2]:
        raise ValueError(f"{op}: src {x.shape} and dst {y.shape} must be N, C and 1 to 3 spatial dims, with the "
                         f"same N and C")
    kernel = check_ints(op, "kernel", kernel, x.ndim - 2, minimum=1)
    strides, dilations, pads_begin, pads_end, sizes = _window_attrs(
        op, x, kernel, strides, pads_begin, pads_end, dilations, "NCX", min_pad=None)
    storage_order = check_int(op, "storage_order", storage_order, minimum=0)
    if storage_order > 1:
        raise ValueError(f"{op}: storage_order must be 0 or 1, got {storage_order}")
    base = name or "max_pool_indices"
    channels, plane = x.shape[1], int(np.prod(sizes))
    big = dt.max_value("int64")

    def first(n, c, *out):
        ks = [reduce_axis((0, k), name=f"k{d}") for d, k in enumerate(kernel)]
        pos = [o * s - p + k * d for o, s, p, k, d in zip(out, strides, pads_begin, ks, dilations)]
        inside = None
        for q, size in zip(pos, sizes):
            cond = (q >= 0) & (q < size)
            inside = cond if inside is None else inside & cond
        clamped = [emin(emax(q, 0), size - 1) for q, size in zip(pos, sizes)]
        flat = n * channels + c
        for q, size in zip(pos, sizes):
            flat = flat * size + q
        hit = inside & (x[(n, c, *clamped)] == y[(n, c, *out)])
        return rmin(ti.if_then_else(hit, ti.cast("int64", flat), big), axis=ks)
    found = compute(y.shape, first, name=base + "_rows", tag="max_pool_indices")
    row_weights = [int(np.prod(sizes[k + 1:])) for k in range(len(sizes))]
    weights = row_weights if storage_order == 0 else [int(np.prod(sizes[:k])) for k in range(len(sizes))]

    def ordered(n, c, *out):
        r = found[(n, c, *out)]
        start = ti.cast("int64", (n * channels + c) * plane)
        index = r
        if weights != row_weights:
            index, rest = start, r - start
            for k, inner in enumerate(row_weights):   # dim k's index, row-major -> its column-major weight
                index = index + (rest // inner) % sizes[k] * weights[k]
        return ti.if_then_else(r == big, start - sum(weights), index)
    return compute(y.shape, ordered, name=base, tag="max_pool_indices")


def avg_pool(x: Tensor, kernel, strides, pads_begin, pads_end, exclude_pad: bool, rounding_type: str = "floor",
             data_format: str = "NXC", name: str | None = None) -> Tensor:
    """AvgPool: ``pool("avg", ...)`` with oneDNN's AvgPool attributes (no dilations).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> avg_pool(placeholder((1, 7, 7, 3)), kernel=[3, 3], strides=[1, 1], pads_begin=[1, 1],
        ...          pads_end=[1, 1], exclude_pad=False).shape
        (1, 7, 7, 3)
    """
    return pool("avg", x, kernel, strides, pads_begin, pads_end, None, exclude_pad, rounding_type,
                data_format, name)
