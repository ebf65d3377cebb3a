"""Convolution and ConvTranspose over 1, 2 or 3 spatial dims, with groups, dilations and
``auto_pad`` (resolved once, by ``_window.normalize_window``).

Example:
    >>> from tilefuse.graph_api.ops import op_def
    >>> op_def("ConvTranspose").schema.attrs["weights_format"].default
    'XOI'
"""
from __future__ import annotations

import numpy as np
from tilefuse.tensorir import ops as T

from ..op import Op
from ._lower import _attrs, _inputs
from ._numpy import (_err, _window_attrs, _int, _ints, _choice, _nin, _f64, _data_format, _to_ncx, _from_ncx,
    _weights_to_oix)
from ._shapes import _require, _split_data, _join_data, _split_weights, _positive
from ._window import weights_spatial, normalize_window, check_pads, windows
from .registry import define
from .schema import optional, required, schema, AUTO_PAD, DATA_FORMAT, get_attr


# ---- normalization ----------------------------------------------------------------------------------

def _normalize(deconv):
    def normalize(attrs, shapes):
        if deconv:
            attrs = {**attrs, "output_padding": attrs.get("output_padding") or []}
        kernel = weights_spatial(shapes[1], attrs["weights_format"]) if len(shapes) > 1 and shapes[1] else None
        return normalize_window(attrs, shapes[0], kernel, deconv=deconv)
    return normalize


# ---- shape rules ------------------------------------------------------------------------------------

def _operands(op, s):
    """(data format, N, C, spatial dims, O, I, kernel dims, groups) of a conv's input shapes."""
    fmt = get_attr(op, "data_format")
    n, c, sp = _split_data(s[0], fmt)
    o, i, ksp = _split_weights(s[1], get_attr(op, "weights_format"))
    _require(len(ksp) == len(sp), f"src {list(s[0])} and weights {list(s[1])} differ in spatial rank")
    return fmt, n, c, sp, o, i, ksp, get_attr(op, "groups")


def _shape_conv(op, s):
    fmt, n, c, sp, o, i, ksp, g = _operands(op, s)
    _require(g > 0 and c % g == 0 and c // g == i,
             f"src channels {c} / groups {g} must equal the weights' input channels {i}")
    out_sp = [(x + pb + pe - ((k - 1) * d + 1)) // st + 1
              for x, k, (st, d, pb, pe) in zip(sp, ksp, windows(op.attrs, len(sp)))]
    if len(s) == 3:
        _require(tuple(s[2]) == (o,), f"bias shape {list(s[2])} must be [{o}]")
    return [_positive(_join_data(n, o, out_sp, fmt))]


def _shape_conv_transpose(op, s):
    fmt, n, c, sp, o, i, ksp, g = _operands(op, s)
    _require(g > 0, f"groups must be positive, got {g}")
    out_pad = list(get_attr(op, "output_padding") or [0] * len(sp))
    _require(len(out_pad) == len(sp), f"output_padding {out_pad} needs {len(sp)} values")
    out_sp = [st * (x - 1) + (k - 1) * d + 1 + op_ - pb - pe
              for x, k, op_, (st, d, pb, pe) in zip(sp, ksp, out_pad, windows(op.attrs, len(sp)))]
    if len(s) == 3:
        _require(tuple(s[2]) == (o * g,), f"bias shape {list(s[2])} must be [{o * g}]")
    return [_positive(_join_data(n, o * g, out_sp, fmt))]


# ---- reference --------------------------------------------------------------------------------------

IM2COL_BYTES = 64 << 20     # about how much of its windows the reference convolution copies at a time


def _ref_conv_common(op: Op, xs: list, transposed: bool):
    _nin(op, xs, {2, 3})
    x, w = _f64(xs[0]), _f64(xs[1])
    if x.ndim < 3 or x.ndim > 5 or w.ndim != x.ndim:
        raise _err(op, f"src {x.shape} and weights {w.shape} must both be 3-D, 4-D or 5-D")
    fmt = _data_format(op)
    wfmts = ("XOI", "IOX", "OIX", "XIO") if transposed else ("XIO", "OIX")
    wfmt = _choice(op, "weights_format", wfmts)
    _ints(op, "dilations")           # required
    groups = _int(op, "groups")
    if groups <= 0:
        raise _err(op, f"groups must be positive, got {groups}")
    x = _to_ncx(x, fmt)
    w = _weights_to_oix(w, wfmt)
    bias = _f64(xs[2]) if len(xs) == 3 else None
    return x, w, bias, groups, fmt


def _ref_add_bias(op: Op, y: np.ndarray, bias) -> np.ndarray:
    if bias is None:
        return y
    if bias.ndim != 1 or bias.shape[0] != y.shape[1]:
        raise _err(op, f"bias shape {bias.shape} does not match {y.shape[1]} output channels")
    return y + bias.reshape((1, -1) + (1,) * (y.ndim - 2))


def _contract_channels(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Each group's channels of ``x`` (N, G, C, *spatial) contracted with ``w`` (G, O, C): the
    (N, G, O, *spatial) sums, by a batched matrix product (BLAS; einsum's own loop took tens of
    seconds on a 256-channel layer)."""
    n, g, c = x.shape[:3]
    spatial = x.shape[3:]
    rows = np.moveaxis(x.reshape(n, g, c, -1), 2, 3)          # (N, G, pixels, C)
    y = np.matmul(rows, np.swapaxes(w, 1, 2))                  # (N, G, pixels, O)
    return np.moveaxis(y, 3, 2).reshape((n, g, w.shape[1]) + tuple(spatial))


def _windows_times_weights(xg: np.ndarray, wg: np.ndarray, strides, dilations, out_sp) -> np.ndarray:
    """A grouped convolution without padding: ``xg`` (N, G, C/G, *spatial) and ``wg``
    (G, O/G, C/G, *kernel) give (N, G, O/G, *out_sp). Each output pixel's window of C/G x kernel
    inputs is a row of a matrix (im2col), multiplied by the weights as a matrix (BLAS), a band
    of output rows at a time so the windows' copy stays near ``IM2COL_BYTES``."""
    n, g, icg = xg.shape[:3]
    ocg, k_sp = wg.shape[1], wg.shape[3:]
    nd = len(k_sp)
    spans = [(k - 1) * dd + 1 for k, dd in zip(k_sp, dilations)]
    windows = np.lib.stride_tricks.sliding_window_view(xg, spans, axis=tuple(range(3, 3 + nd)))
    windows = windows[(slice(None),) * 3 + tuple(slice(0, (o - 1) * ss + 1, ss) for o, ss in zip(out_sp, strides))
                      + tuple(slice(None, None, dd) for dd in dilations)]
    windows = np.moveaxis(windows, 2, 2 + nd)           # (N, G, *out_sp, C/G, *kernel)
    depth = icg * int(np.prod(k_sp))
    weights = np.swapaxes(wg.reshape(g, ocg, depth), 1, 2)      # (G, depth, O/G)
    y = np.empty((n, g) + tuple(out_sp) + (ocg,))
    row_bytes = n * g * int(np.prod(out_sp[1:])) * depth * 8
    band = max(1, IM2COL_BYTES // max(row_bytes, 1))
    for start in range(0, out_sp[0], band):
        rows = windows[:, :, start:start + band]
        matrix = rows.reshape(n, g, -1, depth)           # the copy: one row per output pixel
        y[:, :, start:start + band] = np.matmul(matrix, weights).reshape(rows.shape[:2 + nd] + (ocg,))
    return np.moveaxis(y, -1, 2)


def _ref_convolution(op: Op, xs: list) -> list:
    x, w, bias, g, fmt = _ref_conv_common(op, xs, transposed=False)
    n, c = x.shape[:2]
    oc, icg = w.shape[:2]
    in_sp, k_sp = x.shape[2:], w.shape[2:]
    if c % g or oc % g or c // g != icg:
        raise _err(op, f"src has {c} channels, weights {w.shape} (OIX) and groups={g} do not agree")
    s, d, pb, pe = _window_attrs(op, in_sp)
    out_sp = [(i + b + e - ((k - 1) * dd + 1)) // ss + 1
              for i, k, ss, dd, b, e in zip(in_sp, k_sp, s, d, pb, pe)]
    if any(o <= 0 for o in out_sp):
        raise _err(op, f"output spatial size {out_sp} is not positive")
    xp = np.pad(x, [(0, 0), (0, 0)] + [(b, e) for b, e in zip(pb, pe)])
    ocg = oc // g
    xg = xp.reshape((n, g, icg) + xp.shape[2:])
    wg = w.reshape((g, ocg, icg) + tuple(k_sp))
    y = _windows_times_weights(xg, wg, s, d, out_sp)
    y = _ref_add_bias(op, y.reshape((n, oc) + tuple(out_sp)), bias)
    return [_from_ncx(y, fmt)]


def _ref_conv_transpose(op: Op, xs: list) -> list:
    """Canonical (OIX) ConvTranspose weights are (OC/groups, IC, K...); IOX is (IC, OC/groups, K...)
    as in PyTorch, XOI is (K..., OC/groups, IC) and XIO is (K..., IC, OC/groups)."""
    x, w, bias, g, fmt = _ref_conv_common(op, xs, transposed=True)
    n, c = x.shape[:2]
    ocg, ic = w.shape[:2]
    in_sp, k_sp = x.shape[2:], w.shape[2:]
    if c != ic or c % g:
        raise _err(op, f"src has {c} channels, weights {w.shape} (OIX) and groups={g} do not agree")
    s, d, pb, pe = _window_attrs(op, in_sp)
    opad = _ints(op, "output_padding") or [0] * len(in_sp)
    if len(opad) != len(in_sp) or any(p < 0 for p in opad):
        raise _err(op, f"output_padding {opad} must hold {len(in_sp)} non-negative values")
    full = [(i - 1) * ss + (k - 1) * dd + 1 for i, k, ss, dd in zip(in_sp, k_sp, s, d)]
    out_sp = [f + p - b - e for f, p, b, e in zip(full, opad, pb, pe)]
    if any(o <= 0 for o in out_sp):
        raise _err(op, f"output spatial size {out_sp} is not positive")
    icg = c // g
    xg = x.reshape((n, g, icg) + tuple(in_sp))
    # (OC/g, G*ICg, K) -> (G, ICg, OC/g, K)
    wg = np.moveaxis(w.reshape((ocg, g, icg) + tuple(k_sp)), 0, 2)
    # buffer position p holds dst position p - shift - pads_begin (shift absorbs negative pads)
    shift = [max(0, -b) for b in pb]
    buf_sp = [max(f + sh, o + b + sh) for f, o, b, sh in zip(full, out_sp, pb, shift)]
    y = np.zeros((n, g, ocg) + tuple(buf_sp))
    for kidx in np.ndindex(*k_sp):
        sl = tuple(slice(sh + k * dd, sh + k * dd + (i - 1) * ss + 1, ss)
                   for k, dd, i, ss, sh in zip(kidx, d, in_sp, s, shift))
        y[(slice(None),) * 3 + sl] += _contract_channels(xg, np.swapaxes(wg[(slice(None),) * 3 + kidx], 1, 2))
    crop = tuple(slice(b + sh, b + sh + o) for b, o, sh in zip(pb, out_sp, shift))
    y = y[(slice(None),) * 3 + crop].reshape((n, g * ocg) + tuple(out_sp))
    return [_from_ncx(_ref_add_bias(op, y, bias), fmt)]


# ---- lowering ---------------------------------------------------------------------------------------

def _lower_convolution(op, xs):
    _inputs(op, xs, 2, 3)
    return T.conv(xs[0], xs[1], bias=xs[2] if len(xs) == 3 else None,
                  **_attrs(op, "strides", "pads_begin", "pads_end", "dilations", "groups", "data_format",
                           "weights_format"))


def _lower_conv_transpose(op, xs):
    _inputs(op, xs, 2, 3)
    return T.conv_transpose(xs[0], xs[1], bias=xs[2] if len(xs) == 3 else None,
                            **_attrs(op, "strides", "pads_begin", "pads_end", "dilations", "output_padding",
                                     "groups", "data_format", "weights_format"))


# ---- the records ----------------------------------------------------------------------------------

WINDOW_ATTRS = {"strides": required("s64[]"), "pads_begin": required("s64[]"), "pads_end": required("s64[]"),
                "auto_pad": AUTO_PAD, "data_format": DATA_FORMAT}
CONV_ATTRS = {**WINDOW_ATTRS, "dilations": required("s64[]"), "groups": optional("s64", 1),
              "weights_format": optional("string", "XIO", ("XIO", "OIX"))}
CONVT_ATTRS = {**CONV_ATTRS, "weights_format": optional("string", "XOI", ("XOI", "IOX"))}

define(schema("Convolution", "src:T weights:T bias:T", "dst:T", CONV_ATTRS, n_in={2, 3}, checks=[check_pads]),
       normalize=_normalize(False), shape=_shape_conv, reference=_ref_convolution, lower=_lower_convolution)
define(schema("ConvTranspose", "src:T weights:T bias:T", "dst:T", {**CONVT_ATTRS, "output_padding": optional("s64[]")},
              n_in={2, 3}, checks=[check_pads]),
       normalize=_normalize(True), shape=_shape_conv_transpose, reference=_ref_conv_transpose,
       lower=_lower_conv_transpose)
