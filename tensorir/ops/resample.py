"""Interpolate (resampling) of the oneDNN graph op set: nearest and (bi/tri)linear over the
spatial dimensions, sizes given directly or as scales.

Source coordinates are computed exactly, in integer arithmetic on the output index: for
``half_pixel`` the source coordinate of output ``o`` is ``((2o + 1) * in - out) / (2 * out)``
(oneDNN's ``(o + 0.5) / scale - 0.5`` with ``scale = out / in``), for ``align_corners`` it is
``o * (in - 1) / (out - 1)`` (0 when ``out == 1``). Nearest reads ``floor((o + 0.5) * in /
out)``; linear blends the two neighbours of the coordinate clamped to ``[0, in - 1]``, one axis
after another (separable), in one injective compute.

Example:
    >>> from tensorir import placeholder
    >>> y = interpolate(placeholder((2, 3, 7, 13)), mode="linear", sizes=[14, 9], data_format="NCX")
    >>> y.shape, y.op.tag
    ((2, 3, 14, 9), 'interpolate')
"""
from __future__ import annotations

import itertools
import numbers

import numpy as np

from .. import intrinsics as ti
from ..errors import Unsupported
from ..tensor import Tensor, compute
from ._common import FORMATS, check_choice, check_float, check_ints, emax, emin, fconst, spatial_axes

__all__ = ["interpolate", "interpolate_sizes"]

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
        >>> from tensorir import placeholder
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

