"""Interpolate (resampling): nearest and (bi/tri)linear with half_pixel or align_corners
coordinates, to given sizes or scales; and Resize, ONNX's resampling of any axes with its
coordinate transformations and nearest rounding modes.

Example:
    >>> from tilefuse.graph_api.ops import op_def
    >>> op_def("Interpolate").schema.attrs["coordinate_transformation_mode"].default
    'half_pixel'
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from tilefuse.tensorir import ops as T
from tilefuse.tensorir.errors import Unsupported

from ..op import Op, OpKind
from ._lower import _inputs
from ._numpy import _err, _ints, _floats, _choice, _nin, _f64, _data_format, _to_ncx, _from_ncx
from ._shapes import _require, _positive
from .registry import define
from .schema import FP, S32, optional, required, schema, DATA_FORMAT, get_attr


# ---- schema rules -----------------------------------------------------------------------------------

def check_interpolate(op):
    """Schema rule: one of sizes, scales or a sizes input."""
    sizes, scales = op.attrs.get("sizes"), op.attrs.get("scales")
    if sizes and scales:
        return "only one of sizes and scales may be given"
    n_sizes_inputs = {OpKind.Interpolate: 2, OpKind.InterpolateBackward: 3}[op.kind]
    if not sizes and not scales and len(op.inputs) < n_sizes_inputs:
        return "one of sizes, scales or a sizes input must be given"
    return None


# ---- shape rule -------------------------------------------------------------------------------------

def _shape_interpolate(op, s):
    if len(s) == 2:
        return [None]                      # sizes come at run time
    fmt, src = get_attr(op, "data_format"), list(s[0])
    start = 2 if fmt == "NCX" else 1
    n_sp = len(src) - 2
    sizes, scales = get_attr(op, "sizes"), get_attr(op, "scales")
    for name, v in (("sizes", sizes), ("scales", scales)):
        _require(not v or len(v) == n_sp, f"{name} {list(v or [])} needs {n_sp} values, one per spatial dim")
    for k in range(n_sp):
        if scales:    # oneDNN multiplies in f32 and truncates
            src[start + k] = int(np.float32(src[start + k]) * np.float32(scales[k]))
        if sizes:
            src[start + k] = sizes[k]
    return [_positive(tuple(src))]


# ---- reference --------------------------------------------------------------------------------------

def _ref_interp_coords(out_n: int, in_n: int, mode: str) -> np.ndarray:
    o = np.arange(out_n, dtype=np.float64)
    if mode == "align_corners":
        return np.zeros(out_n) if out_n == 1 else o * (in_n - 1) / (out_n - 1)
    return (o + 0.5) * in_n / out_n - 0.5


def _ref_interpolate(op: Op, xs: list) -> list:
    """oneDNN resampling: half_pixel nearest picks floor((o + 0.5) * in / out) (in integer
    arithmetic, so ties do not depend on rounding); linear modes
    interpolate separably between trunc(s) and ceil(s), clamped to the border, at
    s = (o + 0.5) * in / out - 0.5 (align_corners: s = o * (in - 1) / (out - 1))."""
    _nin(op, xs, {1, 2})
    fmt = _data_format(op)
    x = _to_ncx(_f64(xs[0]), fmt)
    if x.ndim < 3:
        raise _err(op, f"src must have spatial dims, got shape {x.shape}")
    mode = _choice(op, "mode", ("nearest", "linear", "bilinear", "trilinear"))
    ctm = _choice(op, "coordinate_transformation_mode", ("half_pixel", "align_corners"))
    in_sp = x.shape[2:]
    nsp = len(in_sp)
    has_sizes, has_scales = bool(op.attrs.get("sizes")), bool(op.attrs.get("scales"))
    if has_sizes == has_scales and len(xs) == 1:
        raise _err(op, "exactly one of the attributes 'sizes' and 'scales' must be given")
    if len(xs) == 2:                 # a sizes input tensor overrides the attributes
        sizes = [int(v) for v in np.asarray(xs[1]).reshape(-1)]
    elif has_sizes:
        sizes = _ints(op, "sizes")
    else:
        scales = _floats(op, "scales")
        if len(scales) != nsp:
            raise _err(op, f"scales {scales} must hold {nsp} values")
        sizes = [int(np.float32(n) * np.float32(sc)) for n, sc in zip(in_sp, scales)]   # oneDNN: f32, truncated
    if len(sizes) != nsp or any(v <= 0 for v in sizes):
        raise _err(op, f"sizes {sizes} must hold {nsp} positive values")
    y = x
    for ax, (n_in, n_out) in enumerate(zip(in_sp, sizes)):
        axis = 2 + ax
        if mode == "nearest":
            if ctm != "half_pixel":
                raise _err(op, "nearest mode supports only half_pixel coordinates")
            idx = (2 * np.arange(n_out) + 1) * n_in // (2 * n_out)     # floor((o + 0.5) * in / out), exactly
            y = np.take(y, idx, axis=axis)
            continue
        s = _ref_interp_coords(n_out, n_in, ctm)
        left = np.maximum(np.trunc(s), 0).astype(np.int64)
        right = np.minimum(np.where(s < 0, 0, np.ceil(s)), n_in - 1).astype(np.int64)
        left = np.minimum(left, n_in - 1)
        w1 = np.abs(s - left)
        w1 = np.where(left == right, 0.0, w1)
        shape = [1] * y.ndim
        shape[axis] = -1
        y = np.take(y, left, axis=axis) * (1 - w1).reshape(shape) + \
            np.take(y, right, axis=axis) * w1.reshape(shape)
    return [_from_ncx(y, fmt)]


def _ref_resize(op: Op, xs: list) -> list:
    """ONNX Resize, nearest or linear: each resized axis in turn, source coordinates exact
    (``tensorir.ops.resample.source_coordinate``), indices clamped to the input."""
    _nin(op, xs, {1})
    x = _f64(xs[0])
    sizes = _ints(op, "sizes")
    if len(sizes) != x.ndim:
        raise _err(op, f"sizes {sizes} must hold {x.ndim} values, one per axis")
    scales = get_attr(op, "scales") or [Fraction(o, n) for o, n in zip(sizes, x.shape)]
    mode, ctm = get_attr(op, "mode"), get_attr(op, "coordinate_transformation_mode")
    nearest = {"floor": math.floor, "ceil": math.ceil,
               "round_prefer_floor": lambda q: math.ceil(q - Fraction(1, 2)),
               "round_prefer_ceil": lambda q: math.floor(q + Fraction(1, 2))}[get_attr(op, "nearest_mode")]
    y = x
    for axis, (n_in, n_out, scale) in enumerate(zip(x.shape, sizes, scales)):
        if n_in == n_out and scale == 1:
            continue
        slope, intercept = T.resample.source_coordinate(n_in, n_out, T.resample.resize_scale(scale), ctm)
        coords = [slope * o + intercept for o in range(n_out)]
        if mode == "nearest":
            y = np.take(y, np.clip([nearest(q) for q in coords], 0, n_in - 1), axis=axis)
            continue
        left = np.array([math.floor(q) for q in coords])
        weight = np.array([float(q - math.floor(q)) for q in coords]).reshape([-1 if k == axis else 1
                                                                               for k in range(y.ndim)])
        y = np.take(y, np.clip(left, 0, n_in - 1), axis=axis) * (1 - weight) + \
            np.take(y, np.clip(left + 1, 0, n_in - 1), axis=axis) * weight
    return [y]


def _shape_resize(op, s):
    sizes = tuple(get_attr(op, "sizes"))
    scales = get_attr(op, "scales")
    _require(len(sizes) == len(s[0]), f"sizes {list(sizes)} need {len(s[0])} values, one per axis")
    _require(not scales or len(scales) == len(s[0]), f"scales {list(scales or [])} need {len(s[0])} values")
    _require(not scales or all(v > 0 for v in scales), f"scales {list(scales or [])} must be positive")
    return [_positive(sizes)]


# ---- lowering ---------------------------------------------------------------------------------------

def _lower_interpolate(op, xs):
    x = _inputs(op, xs, 1, 2)[0]
    fmt = get_attr(op, "data_format")
    sizes, scales = get_attr(op, "sizes"), get_attr(op, "scales")
    if len(xs) == 2:    # a sizes tensor, read at run time: the output's known shape says the same
        out = op.outputs[0]
        if not out.is_known():
            raise Unsupported("sizes come from an input tensor and the output shape is unknown")
        sizes, scales = list(out.shape[2:] if fmt == "NCX" else out.shape[1:-1]), None
    return T.interpolate(x, get_attr(op, "mode"), sizes=sizes, scales=scales,
                         coordinate_transformation_mode=get_attr(op, "coordinate_transformation_mode"),
                         data_format=fmt)


# ---- the records ----------------------------------------------------------------------------------

INTERP_ATTRS = {"mode": required("string", ("nearest", "linear", "bilinear", "trilinear")),
                "sizes": optional("s64[]"), "scales": optional("f32[]"),
                "coordinate_transformation_mode": optional("string", "half_pixel", ("half_pixel", "align_corners")),
                "data_format": DATA_FORMAT}

define(schema("Interpolate", "src:T1 sizes:T2", "dst:T1", INTERP_ATTRS, {"T1": FP, "T2": S32}, n_in={1, 2},
              checks=[check_interpolate]),
       shape=_shape_interpolate, reference=_ref_interpolate, lower=_lower_interpolate)

RESIZE_ATTRS = {"mode": required("string", T.resample.RESIZE_MODES), "sizes": required("s64[]"),
                "scales": optional("f32[]"),
                "coordinate_transformation_mode": optional("string", "half_pixel",
                                                           T.resample.RESIZE_COORDINATE_MODES),
                "nearest_mode": optional("string", "round_prefer_floor", T.resample.NEAREST_MODES)}

define(schema("Resize", "src:T", "dst:T", RESIZE_ATTRS, {"T": FP}),
       shape=_shape_resize, reference=_ref_resize,
       lower=lambda op, xs: T.resize(_inputs(op, xs, 1, 1)[0], get_attr(op, "sizes"), get_attr(op, "scales") or None,
                                     get_attr(op, "mode"), get_attr(op, "coordinate_transformation_mode"),
                                     get_attr(op, "nearest_mode")))
