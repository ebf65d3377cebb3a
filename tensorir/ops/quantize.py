"""Quantization ops of the oneDNN graph op set: Quantize (f32 -> int8/uint8) and Dequantize
(int8/uint8 -> f32), per tensor or per channel, with scales and zero points as attributes
(Python numbers; static) or as input tensors (DynamicQuantize, DynamicDequantize).

``Quantize``: ``dst = saturate(rint(src / scale + zp))`` (ties to even, clipped to the
integer type's range); ``Dequantize``: ``dst = (src - zp) * scale``. Per channel, ``scale`` and
``zp`` are read along ``axis`` (from the tensors, or for attributes a select tree over the
channel index, a constant when they are all equal).

Example:
    >>> from tilefuse.tensorir import placeholder
    >>> q = quantize(placeholder((7, 13)), scales=[0.5], zps=[3], dtype="uint8")
    >>> q.dtype, dequantize(q, scales=[0.5], zps=[3]).dtype
    ('uint8', 'float32')
"""
from __future__ import annotations

import math
import numbers

from .. import dtype as dt
from .. import intrinsics as ti
from ..tensor import Tensor, compute
from ._common import check_choice, check_tensor, emax, emin, fconst, lookup, normalize_axis
from .elementwise import rint

__all__ = ["quantize", "dequantize", "dynamic_quantize", "dynamic_dequantize"]

QUANTIZED_DTYPES = ("int8", "uint8")


def _params(op: str, x: Tensor, scales, zps, qtype: str, axis: int):
    """(scales, zero points, the axis they run along or None) checked against ``x``."""
    check_choice(op, "qtype", qtype, ("per_tensor", "per_channel"))
    try:
        scales = list(scales)
        zps = [0] * len(scales) if zps is None or len(zps) == 0 else list(zps)
    except TypeError:
        raise ValueError(f"{op}: attributes scales and zps must be lists, got {scales!r} and {zps!r}") from None
    if any(isinstance(v, bool) or not isinstance(v, numbers.Real) for v in scales):
        raise ValueError(f"{op}: attribute scales must hold numbers, got {scales!r}")
    if any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in zps):
        raise ValueError(f"{op}: attribute zps must hold ints, got {zps!r}")
    if len(zps) != len(scales):
        raise ValueError(f"{op}: {len(scales)} scales but {len(zps)} zero points")
    if qtype == "per_tensor":
        if len(scales) != 1:
            raise ValueError(f"{op}: per_tensor quantization takes one scale, got {len(scales)}")
        return scales, zps, None
    axis = normalize_axis(op, "axis", axis, x.ndim)
    if len(scales) != x.shape[axis]:
        raise ValueError(f"{op}: per_channel along axis {axis} needs {x.shape[axis]} scales (src {x.shape}), "
                         f"got {len(scales)}")
    return scales, zps, axis


def _at(values, axis, idx, dtype):
    return fconst(values[0], dtype) if axis is None else lookup(idx[axis], values, dtype)


def quantize(x: Tensor, scales, zps=None, qtype: str = "per_tensor", axis: int = 1, dtype: str = "int8",
             name: str | None = None) -> Tensor:
    """Quantize: ``saturate(rint(x / scale + zp))`` as ``dtype`` (int8 or uint8); ``scales``
    and ``zps`` (default 0) hold one value (``per_tensor``) or one per index of ``axis``
    (``per_channel``).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> quantize(placeholder((2, 3)), scales=[0.1, 0.2, 0.4], qtype="per_channel", axis=-1).dtype
        'int8'
    """
    op = "Quantize"
    check_tensor(op, "src", x)
    if not dt.is_float(x.dtype):
        raise TypeError(f"Quantize: src must have a float dtype, got {x.dtype}")
    check_choice(op, "dst dtype", dtype, QUANTIZED_DTYPES)
    scales, zps, axis = _params(op, x, scales, zps, qtype, axis)
    if any(s == 0 for s in scales):
        raise ValueError(f"Quantize: scales must be non-zero, got {scales}")
    lo, hi = dt.min_value(dtype), dt.max_value(dtype)

    def body(*i):
        v = rint(x[i] / _at(scales, axis, i, x.dtype) + _at(zps, axis, i, x.dtype))
        return ti.cast(dtype, emin(emax(v, fconst(lo, x.dtype)), fconst(hi, x.dtype)))
    return compute(x.shape, body, name=name or "quantize", tag="quantize")


def dequantize(x: Tensor, scales, zps=None, qtype: str = "per_tensor", axis: int = 1, dtype: str = "float32",
               name: str | None = None) -> Tensor:
    """Dequantize: ``(x - zp) * scale`` as ``dtype`` (float32), ``x`` int8 or uint8.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> dequantize(placeholder((2, 3), "uint8"), scales=[0.5], zps=[128]).shape
        (2, 3)
    """
    op = "Dequantize"
    check_tensor(op, "src", x)
    if x.dtype not in QUANTIZED_DTYPES:
        raise TypeError(f"Dequantize: src must be int8 or uint8, got {x.dtype}")
    if not dt.is_float(dtype):
        raise TypeError(f"Dequantize: dst dtype must be a float dtype, got {dtype}")
    scales, zps, axis = _params(op, x, scales, zps, qtype, axis)
    return compute(x.shape, lambda *i: (ti.cast(dtype, x[i]) - _at(zps, axis, i, dtype)) * _at(scales, axis, i, dtype),
                   name=name or "dequantize", tag="dequantize")


def _tensor_params(op: str, x: Tensor, scales: Tensor, zps, qtype: str, axis: int):
    """Readers ``(scale(idx), zp(idx))`` of the scale and zero-point tensors, checked against
    ``x`` (one element per tensor, or one per index of ``axis``)."""
    check_choice(op, "qtype", qtype, ("per_tensor", "per_channel"))
    check_tensor(op, "scales", scales)
    if not dt.is_float(scales.dtype):
        raise TypeError(f"{op}: scales must be a float tensor, got {scales.dtype}")
    if zps is not None:
        check_tensor(op, "zps", zps)
        if zps.dtype not in ("int8", "uint8", "int32"):
            raise TypeError(f"{op}: zps must be an int8, uint8 or int32 tensor, got {zps.dtype}")
    if qtype == "per_tensor":
        want, where = 1, None
    else:
        where = normalize_axis(op, "axis", axis, x.ndim)
        want = x.shape[where]
    for arg, t in (("scales", scales), ("zps", zps)):
        if t is not None and (math.prod(t.shape) != want or t.ndim > 1):
            raise ValueError(f"{op}: {arg} must hold {want} value(s) ({qtype}, src {x.shape}), got shape {t.shape}")

    def reader(t, dtype):
        if t is None:
            return lambda idx: fconst(0, dtype)
        if where is None:
            return lambda idx: ti.cast(dtype, t[(0,) * t.ndim])
        return lambda idx: ti.cast(dtype, t[(idx[where],)])
    return reader(scales, scales.dtype), lambda dtype: reader(zps, dtype)


def dynamic_quantize(x: Tensor, scales: Tensor, zps: Tensor | None = None, qtype: str = "per_tensor", axis: int = 1,
                     dtype: str = "int8", name: str | None = None) -> Tensor:
    """DynamicQuantize: ``quantize`` with the scales (and optional zero points) read from
    tensors at run time.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> dynamic_quantize(placeholder((2, 3)), placeholder((3,)), qtype="per_channel", axis=-1).dtype
        'int8'
    """
    op = "DynamicQuantize"
    check_tensor(op, "src", x)
    if not dt.is_float(x.dtype):
        raise TypeError(f"DynamicQuantize: src must have a float dtype, got {x.dtype}")
    check_choice(op, "dst dtype", dtype, QUANTIZED_DTYPES)
    scale, zp = _tensor_params(op, x, scales, zps, qtype, axis)
    lo, hi = dt.min_value(dtype), dt.max_value(dtype)

    def body(*i):
        v = rint(x[i] / ti.cast(x.dtype, scale(i)) + zp(x.dtype)(i))
        return ti.cast(dtype, emin(emax(v, fconst(lo, x.dtype)), fconst(hi, x.dtype)))
    return compute(x.shape, body, name=name or "dynamic_quantize", tag="dynamic_quantize")


def dynamic_dequantize(x: Tensor, scales: Tensor, zps: Tensor | None = None, qtype: str = "per_tensor",
                       axis: int = 1, dtype: str = "float32", name: str | None = None) -> Tensor:
    """DynamicDequantize: ``dequantize`` with the scales (and optional zero points) read from
    tensors at run time (``per_tensor`` or ``per_channel``).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> dynamic_dequantize(placeholder((2, 3), "int8"), placeholder((1,))).dtype
        'float32'
    """
    op = "DynamicDequantize"
    check_tensor(op, "src", x)
    if x.dtype not in QUANTIZED_DTYPES:
        raise TypeError(f"DynamicDequantize: src must be int8 or uint8, got {x.dtype}")
    if not dt.is_float(dtype):
        raise TypeError(f"DynamicDequantize: dst dtype must be a float dtype, got {dtype}")
    scale, zp = _tensor_params(op, x, scales, zps, qtype, axis)
    return compute(x.shape, lambda *i: (ti.cast(dtype, x[i]) - zp(dtype)(i)) * ti.cast(dtype, scale(i)),
                   name=name or "dynamic_dequantize", tag="dynamic_dequantize")
