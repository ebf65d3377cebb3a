"""MaxPool and AvgPool over 1, 2 or 3 spatial dims: floor or ceil rounding, padding excluded
or counted, negative pads as crops, ``auto_pad`` resolved by ``_window.normalize_window``; and
MaxPoolIndices, where a MaxPool's maxima lie (ONNX MaxPool's Indices output).

Example:
    >>> from tilefuse.graph_api.ops import op_def
    >>> op_def("MaxPool").schema.attrs["rounding_type"].default
    'floor'
"""
from __future__ import annotations

import numpy as np
from tilefuse.tensorir import ops as T

from ..logical_tensor import DataType
from ..op import Op, OpKind
from ._lower import _attrs, _inputs
from ._numpy import _err, _bool, _ints, _choice, _nin, _f64, _data_format, _to_ncx, _from_ncx, _out_dtype, _window_attrs
from ._shapes import _split_data, _join_data, _positive
from ._window import normalize_window, check_pads, windows
from .registry import define
from .schema import FP, optional, required, schema, get_attr
from .conv import WINDOW_ATTRS


# ---- normalization ----------------------------------------------------------------------------------

def _normalize(attrs, shapes):
    return normalize_window(attrs, shapes[0], attrs.get("kernel"))


# ---- shape rule -------------------------------------------------------------------------------------

def _shape_pool(op, s):
    fmt = get_attr(op, "data_format")
    n, c, sp = _split_data(s[0], fmt)
    kernel = list(get_attr(op, "kernel"))
    ceil = get_attr(op, "rounding_type") == "ceil"
    out_sp = []
    for x, k, (st, d, pb, pe) in zip(sp, kernel, windows(op.attrs, len(sp))):
        span = x + pb + pe - ((k - 1) * d + 1)
        out_sp.append((-(-span // st) if ceil else span // st) + 1)
    return [_positive(_join_data(n, c, out_sp, fmt))]


# ---- reference --------------------------------------------------------------------------------------

def _ref_pool(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    is_max = op.kind is OpKind.MaxPool
    fmt = _data_format(op)
    x = _f64(xs[0])
    if x.ndim < 3 or x.ndim > 5:
        raise _err(op, f"src must be 3-D, 4-D or 5-D, got shape {x.shape}")
    x = _to_ncx(x, fmt)
    in_sp = x.shape[2:]
    kernel = _ints(op, "kernel")
    if len(kernel) != len(in_sp) or any(k <= 0 for k in kernel):
        raise _err(op, f"kernel {kernel} must hold {len(in_sp)} positive values")
    s, d, pb, pe = _window_attrs(op, in_sp, negative_pads=True)
    # a negative pad crops the src
    crop = [slice(max(-b, 0), n - max(-e, 0)) for b, e, n in zip(pb, pe, in_sp)]
    if any(c.start >= c.stop for c in crop):
        raise _err(op, f"negative pads {pb} and {pe} crop away all of src {x.shape}")
    x = x[(slice(None), slice(None), *crop)]
    in_sp = x.shape[2:]
    pb, pe = [max(b, 0) for b in pb], [max(e, 0) for e in pe]
    rounding = _choice(op, "rounding_type", ("floor", "ceil"))
    exclude_pad = False if is_max else _bool(op, "exclude_pad")
    out_sp = []
    for i, k, ss, dd, b, e in zip(in_sp, kernel, s, d, pb, pe):
        span = i + b + e - ((k - 1) * dd + 1)
        out_sp.append((-(-span // ss) if rounding == "ceil" else span // ss) + 1)
    if any(o <= 0 for o in out_sp):
        raise _err(op, f"output spatial size {out_sp} is not positive")
    # pad far enough for the last (possibly ceil-mode) window; `valid` marks real src elements
    ends = [max(e, (o - 1) * ss + (k - 1) * dd + 1 - i - b)
            for i, k, ss, dd, b, e, o in zip(in_sp, kernel, s, d, pb, pe, out_sp)]
    pads = [(0, 0), (0, 0)] + list(zip(pb, ends))
    xp = np.pad(x, pads, constant_values=-np.inf if is_max else 0.0)
    valid = np.pad(np.ones(in_sp), pads[2:])
    acc = np.full(x.shape[:2] + tuple(out_sp), -np.inf if is_max else 0.0)
    count = np.zeros(out_sp)
    for kidx in np.ndindex(*kernel):
        sl = tuple(slice(k * dd, k * dd + (o - 1) * ss + 1, ss)
                   for k, dd, o, ss in zip(kidx, d, out_sp, s))
        win = xp[(slice(None), slice(None)) + sl]
        acc = np.maximum(acc, win) if is_max else acc + win
        count += valid[sl]
    if is_max:
        # a window made only of padding yields the lowest value (oneDNN's initial max)
        dt = _out_dtype(op, 0, np.dtype(np.float32))
        acc = np.where(count > 0, acc, np.finfo(dt).min if np.issubdtype(dt, np.floating) else 0)
    else:
        # rounding_type=ceil is run by oneDNN as an exclude-padding average over extra right padding
        denom = count if (exclude_pad or rounding == "ceil") else float(np.prod(kernel))
        acc = acc / np.maximum(denom, 1.0)
    return [_from_ncx(acc, fmt)]


def _ref_max_pool_indices(op: Op, xs: list) -> list:
    """For each window (``dst``'s spatial dims count them), the position in ``src`` flattened
    (row-major, or with storage_order=1 its spatial part column-major) of the first element in
    row-major order equal to the window's maximum in ``dst``; padding never counts, and a window
    of padding only gives position -1 on each spatial axis (as onnxruntime)."""
    _nin(op, xs, {2})
    x, y = np.asarray(xs[0]), np.asarray(xs[1])
    if x.ndim < 3 or x.ndim > 5 or y.ndim != x.ndim or y.shape[:2] != x.shape[:2]:
        raise _err(op, f"src {x.shape} and dst {y.shape} must be N, C and 1 to 3 spatial dims, with the same N and C")
    in_sp, out_sp = x.shape[2:], y.shape[2:]
    kernel = _ints(op, "kernel")
    if len(kernel) != len(in_sp) or any(k <= 0 for k in kernel):
        raise _err(op, f"kernel {kernel} must hold {len(in_sp)} positive values")
    s, d, pb, _ = _window_attrs(op, in_sp, negative_pads=True)
    order = get_attr(op, "storage_order")
    if order not in (0, 1):
        raise _err(op, f"storage_order must be 0 or 1, got {order!r}")
    big = np.iinfo(np.int64).max
    found = np.full(y.shape, big, np.int64)
    grid = np.meshgrid(*[np.arange(o) for o in out_sp], indexing="ij")
    plane = np.arange(x.shape[0] * x.shape[1]).reshape(x.shape[:2] + (1,) * len(in_sp)) * int(np.prod(in_sp))
    for kidx in reversed(list(np.ndindex(*kernel))):     # the first tap in row-major order wins
        pos = [g * ss - b + k * dd for g, ss, b, k, dd in zip(grid, s, pb, kidx, d)]
        inside = np.logical_and.reduce([(p >= 0) & (p < n) for p, n in zip(pos, in_sp)])
        clamped = [np.clip(p, 0, n - 1) for p, n in zip(pos, in_sp)]
        hit = inside & (x[(slice(None), slice(None), *clamped)] == y)
        sizes = in_sp if order == 0 else in_sp[::-1]
        flat = np.ravel_multi_index(clamped if order == 0 else clamped[::-1], sizes)
        found = np.where(hit, plane + flat, found)
    n = len(in_sp)
    none = -sum(int(np.prod(in_sp[k + 1:] if order == 0 else in_sp[:k])) for k in range(n))
    return [np.where(found == big, plane + none, found)]      # a window of padding only: position -1 on each axis


# ---- lowering ---------------------------------------------------------------------------------------

def _lower_max_pool(op, xs):
    return T.max_pool(_inputs(op, xs, 1)[0], **_attrs(op, "kernel", "strides", "pads_begin", "pads_end", "dilations",
                                                      "rounding_type", "data_format"))


def _lower_max_pool_indices(op, xs):
    x, y = _inputs(op, xs, 2)
    return T.max_pool_indices(x, y, **_attrs(op, "kernel", "strides", "pads_begin", "pads_end", "dilations",
                                             "storage_order"))


def _lower_avg_pool(op, xs):
    return T.avg_pool(_inputs(op, xs, 1)[0], **_attrs(op, "kernel", "strides", "pads_begin", "pads_end",
                                                      "exclude_pad", "rounding_type", "data_format"))


# ---- the records ----------------------------------------------------------------------------------
POOL_ATTRS = {**WINDOW_ATTRS, "kernel": required("s64[]")}
_ROUNDING = optional("string", "floor", ("floor", "ceil"))

define(schema("MaxPool", "src:T", "dst:T", {**POOL_ATTRS, "dilations": optional("s64[]"), "rounding_type": _ROUNDING},
              checks=[check_pads]),
       normalize=_normalize, shape=_shape_pool, reference=_ref_pool, lower=_lower_max_pool)
define(schema("MaxPoolIndices", "src:T dst:T", "indices:T2",
              {"kernel": required("s64[]"), "strides": required("s64[]"), "pads_begin": required("s64[]"),
               "pads_end": required("s64[]"), "dilations": optional("s64[]"),
               "storage_order": optional("s64", 0), "data_format": optional("string", "NCX", ("NCX",))},
              {"T": FP, "T2": frozenset({DataType.s64})}, checks=[check_pads]),
       normalize=_normalize, shape=lambda op, s: [s[1]], reference=_ref_max_pool_indices,
       lower=_lower_max_pool_indices)
define(schema("AvgPool", "src:T", "dst:T", {**POOL_ATTRS, "exclude_pad": required("bool"), "rounding_type": _ROUNDING},
              checks=[check_pads]),
       normalize=_normalize, shape=_shape_pool, reference=_ref_pool, lower=_lower_avg_pool)
