"""Interpolate (resampling) of the oneDNN graph op set: nearest and (bi/tri)linear over the
spatial dimensions, sizes given directly or as scales.

Source coordinates are computed exactly, in integer arithmetic on the output index: for
``half_pixel`` the source coordinate of output ``o`` is ``((2o + 1) * in - out) / (2 * out)``
(oneDNN's ``(o + 0.5) / scale - 0.5`` with ``scale = out / in``), for ``align_corners`` it is
``o * (in - 1) / (out - 1)`` (0 when ``out == 1``). Nearest reads ``floor((o + 0.5) * in /
out)``; linear blends the two neighbours of the coordinate clamped to ``[0, in - 1]``, one axis
after another (separable), in one injective compute.

Example:
    >>> from tilefuse.tensorir import placeholder
    >>> y = interpolate(placeholder((2, 3, 7, 13)), mode="linear", sizes=[14, 9], data_format="NCX")
    >>> y.shape, y.op.tag
    ((2, 3, 14, 9), 'interpolate')
"""
from __future__ import annotations

import itertools
import math
import numbers
from fractions import Fraction

import numpy as np

from .. import intrinsics as ti
from ..errors import Unsupported
from ..tensor import Tensor, compute
from ._common import FORMATS, check_choice, check_float, check_ints, emax, emin, fconst, spatial_axes

__all__ = ["interpolate", "interpolate_sizes", "resize"]

MODES = ("nearest", "linear", "bilinear", "trilinear")
COORDINATE_MODES = ("half_pixel", "align_corners")


def interpolate_sizes(op: str, in_sizes, sizes=None, scales=None) -> list[int]:
    """The output spatial sizes: ``sizes``, or ``int(float32(in) * float32(scale))`` per axis
    (oneDNN multiplies in f32 and truncates).

    Example:
        >>> interpolate_sizes("Interpolate", [21, 4], scales=[0.809524, 2.0])
        [17, 8]
    """
    nd = len(in_sizes)
    if bool(sizes) == bool(scales):
        raise ValueError(f"{op}: exactly one of the attributes sizes and scales must be given, got sizes={sizes!r}, "
                         f"scales={scales!r}")
    if sizes:
        return check_ints(op, "sizes", sizes, nd, minimum=1)
    scales = list(scales)
    if len(scales) != nd or any(isinstance(v, bool) or not isinstance(v, numbers.Real) for v in scales):
        raise ValueError(f"{op}: attribute scales={scales!r} must hold {nd} numbers, one per spatial dimension")
    out = [int(np.float32(n) * np.float32(s)) for n, s in zip(in_sizes, scales)]
    if any(o <= 0 for o in out):
        raise ValueError(f"{op}: scales {scales} make the output spatial size {out}, not positive")
    return out


def _linear_taps(o, n_in: int, n_out: int, coordinate_mode: str, dtype: str):
    """(left index, right index, weight of right) of output position ``o`` along one axis, or
    None when the axis maps each position to itself."""
    if coordinate_mode == "align_corners":
        if n_out == 1:
            return 0, 0, None
        if n_in == n_out:
            return None
        num, den = o * (n_in - 1), n_out - 1
        left = num // den
        frac = ti.cast(dtype, num - left * den) / fconst(den, dtype)
        return left, emin(left + 1, n_in - 1), frac
    if n_in == n_out:
        return None
    num, den = emax(o * (2 * n_in) + (n_in - n_out), 0), 2 * n_out
    raw = num // den
    left = emin(raw, n_in - 1)
    frac = ti.if_then_else(raw >= n_in - 1, fconst(0, dtype), ti.cast(dtype, num - raw * den) / fconst(den, dtype))
    return left, emin(left + 1, n_in - 1), frac


def interpolate(x: Tensor, mode: str, sizes=None, scales=None, coordinate_transformation_mode: str = "half_pixel",
                data_format: str = "NXC", name: str | None = None) -> Tensor:
    """Interpolate ``x`` over its spatial dimensions to ``sizes`` (or to the sizes ``scales``
    give, ``interpolate_sizes``). ``mode``: ``nearest``, or ``linear``/``bilinear``/``trilinear``
    (all the same separable linear blend). ``coordinate_transformation_mode``: ``half_pixel``
    (default) or ``align_corners`` (linear only).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> interpolate(placeholder((1, 5, 3)), mode="nearest", scales=[2.0]).shape
        (1, 10, 3)
    """
    op = "Interpolate"
    check_float(op, "src", x)
    check_choice(op, "mode", mode, MODES)
    check_choice(op, "coordinate_transformation_mode", coordinate_transformation_mode, COORDINATE_MODES)
    check_choice(op, "data_format", data_format, FORMATS)
    if x.ndim < 3:
        raise ValueError(f"Interpolate: src must have spatial dimensions (rank >= 3), got shape {x.shape}")
    if mode == "nearest" and coordinate_transformation_mode != "half_pixel":
        raise Unsupported("Interpolate: mode='nearest' is compiled only with coordinate_transformation_mode="
                          "'half_pixel'")
    axes = spatial_axes(data_format, x.ndim)
    in_sizes = [x.shape[a] for a in axes]
    out_sizes = interpolate_sizes(op, in_sizes, sizes, scales)
    shape = list(x.shape)
    for a, n in zip(axes, out_sizes):
        shape[a] = n

    if mode == "nearest":
        def nearest(*idx):
            index = list(idx)
            for a, n_in, n_out in zip(axes, in_sizes, out_sizes):
                if n_in != n_out:
                    index[a] = (idx[a] * (2 * n_in) + n_in) // (2 * n_out)
            return x[tuple(index)]
        return compute(tuple(shape), nearest, name=name or "interpolate", tag="interpolate")

    def linear(*idx):
        taps = []
        for a, n_in, n_out in zip(axes, in_sizes, out_sizes):
            t = _linear_taps(idx[a], n_in, n_out, coordinate_transformation_mode, x.dtype)
            if t is not None:
                taps.append((a, t))
        if not taps:
            return x[idx]
        one = fconst(1, x.dtype)
        total = None
        for corner in itertools.product((0, 1), repeat=len(taps)):
            index, weight = list(idx), None
            for side, (a, (left, right, frac)) in zip(corner, taps):
                index[a] = right if side else left
                if frac is None:
                    continue
                w = frac if side else one - frac
                weight = w if weight is None else weight * w
            if any(side and frac is None for side, (_, (_, _, frac)) in zip(corner, taps)):
                continue            # an axis with one source position: only its left side
            term = x[tuple(index)] if weight is None else x[tuple(index)] * weight
            total = term if total is None else total + term
        return total
    return compute(tuple(shape), linear, name=name or "interpolate", tag="interpolate")



# ---------------------------------------------------------------------------- ONNX Resize

RESIZE_MODES = ("nearest", "linear")
RESIZE_COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                           "asymmetric")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
MAX_SCALE_DENOMINATOR = 1024     # a float scale within float32 precision of a fraction is that fraction


def resize_scale(scale: float) -> Fraction:
    """``scale`` as a fraction: the simplest one (denominator up to ``MAX_SCALE_DENOMINATOR``)
    within float32 precision of it (``1.3333334`` is 4/3), else its exact binary value.

    Example:
        >>> resize_scale(2.0), resize_scale(1.3333334), resize_scale(0.5)
        (Fraction(2, 1), Fraction(4, 3), Fraction(1, 2))
    """
    exact = Fraction(float(scale))
    simple = exact.limit_denominator(MAX_SCALE_DENOMINATOR)
    return simple if abs(simple - exact) <= abs(exact) * 2.0 ** -23 else exact


def source_coordinate(n_in: int, n_out: int, scale: Fraction, mode: str) -> tuple[Fraction, Fraction]:
    """(slope, intercept): ONNX Resize's source coordinate of output position ``o`` along one
    axis is ``slope * o + intercept`` under the coordinate transformation ``mode``, exactly.

    Example:
        >>> source_coordinate(40, 80, Fraction(2), "half_pixel")
        (Fraction(1, 2), Fraction(-1, 4))
    """
    inv = 1 / scale
    if mode == "asymmetric":
        return inv, Fraction(0)
    if mode == "align_corners":
        return (Fraction(0), Fraction(0)) if n_out == 1 else (Fraction(n_in - 1, n_out - 1), Fraction(0))
    if mode == "pytorch_half_pixel" and n_out == 1:
        return Fraction(0), Fraction(0)
    intercept = (inv - 1) / 2
    if mode == "half_pixel_symmetric":
        adjustment = Fraction(n_out) / (scale * n_in)
        intercept += Fraction(n_in, 2) * (1 - adjustment)
    return inv, intercept


def _axis_taps(o, n_in: int, n_out: int, scale: Fraction, mode: str, coordinate_mode: str, nearest_mode: str,
               dtype: str):
    """([(source index, clamped source index, weight or None)], (first, last) output position
    whose unclamped indices are all inside ``[0, n_in)``) along one axis."""
    slope, intercept = source_coordinate(n_in, n_out, scale, coordinate_mode)
    den = math.lcm(slope.denominator, intercept.denominator)
    num_slope, num_const = int(slope * den), int(intercept * den)     # coordinate = (a*o + b) / den

    def affine_floor(a, b, d):               # floor((a*o + b) / d) as an index expression
        numerator = o * a + b if a else None
        if numerator is None:
            return b // d, (lambda p: b // d)
        return numerator // d, (lambda p: (a * p + b) // d)
    if mode == "nearest":
        a, b, d = {"floor": (num_slope, num_const, den),
                   "ceil": (num_slope, num_const + den - 1, den),
                   "round_prefer_floor": (2 * num_slope, 2 * num_const + den - 1, 2 * den),
                   "round_prefer_ceil": (2 * num_slope, 2 * num_const + den, 2 * den)}[nearest_mode]
        index, at = affine_floor(a, b, d)
        inside = [p for p in range(n_out) if 0 <= at(p) < n_in]
        taps = [(index, _clamp(index, n_in), None)]
    elif den == 1:                           # whole source coordinates: one tap
        left, at = affine_floor(num_slope, num_const, den)
        inside = [p for p in range(n_out) if 0 <= at(p) < n_in]
        taps = [(left, _clamp(left, n_in), None)]
    else:
        left, at = affine_floor(num_slope, num_const, den)
        inside = [p for p in range(n_out) if 0 <= at(p) and at(p) + 1 < n_in]
        numerator = o * num_slope + num_const if num_slope else num_const
        frac = ti.cast(dtype, numerator % den) / fconst(den, dtype)
        right = left + 1
        taps = [(left, _clamp(left, n_in), fconst(1, dtype) - frac), (right, _clamp(right, n_in), frac)]
    span = (inside[0], inside[-1]) if inside and inside[-1] - inside[0] + 1 == len(inside) else None
    return taps, span


def _clamp(index, n: int):
    if isinstance(index, int):
        return min(max(index, 0), n - 1)
    return emin(emax(index, 0), n - 1)


def resize(x: Tensor, sizes, scales=None, mode: str = "nearest", coordinate_transformation_mode: str = "half_pixel",
           nearest_mode: str = "round_prefer_floor", name: str | None = None) -> Tensor:
    """ONNX Resize (opset 11 and later) of ``x`` to the shape ``sizes`` (every axis), nearest
    or linear, with ONNX's coordinate transformations and nearest rounding modes. ``scales``
    (one per axis, default ``sizes / x.shape``) enter the coordinate transformation as ONNX
    says; each is taken as the simplest fraction within float32 precision of it.

    The source coordinate of each output position is an affine function of it with rational
    coefficients, so indices are exact integer arithmetic (``(a * o + b) // d``; a 2x nearest
    upsampling reads ``o // 2``) and linear weights are ``((a * o + b) % d) / d``. Indices
    outside the input are clamped to its border (ONNX's edge behaviour for these modes);
    the clamp is a select on the output position, which loop partitioning confines to the
    border positions, so the interior reads without one. Cubic mode, ``tf_crop_and_resize``
    and antialiasing are not compiled (``Unsupported``).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> y = resize(placeholder((1, 2, 5, 7)), sizes=(1, 2, 10, 14), mode="linear")
        >>> y.shape, y.op.tag
        ((1, 2, 10, 14), 'resize')
    """
    op = "Resize"
    check_float(op, "src", x)
    check_choice(op, "mode", mode, RESIZE_MODES + ("cubic",))
    check_choice(op, "coordinate_transformation_mode", coordinate_transformation_mode,
                 RESIZE_COORDINATE_MODES + ("tf_crop_and_resize",))
    check_choice(op, "nearest_mode", nearest_mode, NEAREST_MODES)
    sizes = check_ints(op, "sizes", sizes, x.ndim, minimum=1)
    if scales is None:
        scales = [Fraction(o, n) for o, n in zip(sizes, x.shape)]
    else:
        if len(scales) != x.ndim or any(isinstance(v, bool) or not isinstance(v, numbers.Real) or v <= 0
                                        for v in scales):
            raise ValueError(f"{op}: scales={list(scales)!r} must hold {x.ndim} positive numbers, one per axis")
        scales = [resize_scale(v) for v in scales]
    if mode == "cubic" or coordinate_transformation_mode == "tf_crop_and_resize":
        raise Unsupported(f"Resize: mode={mode!r} with coordinate_transformation_mode="
                          f"{coordinate_transformation_mode!r} is not compiled")
    axes = [a for a in range(x.ndim) if sizes[a] != x.shape[a] or scales[a] != 1]

    def body(*idx):
        per_axis, inside = [], []
        for a in axes:
            taps, span = _axis_taps(idx[a], x.shape[a], sizes[a], scales[a], mode, coordinate_transformation_mode,
                                    nearest_mode, x.dtype)
            per_axis.append((a, taps))
            if span is not None:
                if span[0] > 0:
                    inside.append(idx[a] >= span[0])
                if span[1] < sizes[a] - 1:
                    inside.append(idx[a] <= span[1])
            else:
                inside.append(None)           # clamped everywhere

        def blend(clamped: bool):
            total = None
            for combo in itertools.product(*[taps for _, taps in per_axis]):
                index, weight = list(idx), None
                for (a, _), (raw, safe, w) in zip(per_axis, combo):
                    index[a] = safe if clamped else raw
                    if w is not None:
                        weight = w if weight is None else weight * w
                term = x[tuple(index)] if weight is None else x[tuple(index)] * weight
                total = term if total is None else total + term
            return total
        if not inside:
            return blend(False)
        if any(c is None for c in inside):
            return blend(True)
        cond = inside[0]
        for c in inside[1:]:
            cond = cond & c
        return ti.if_then_else(cond, blend(False), blend(True))
    return compute(tuple(sizes), body, name=name or "resize", tag="resize")
