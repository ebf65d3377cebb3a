"""Quantization: Quantize and Dequantize with attribute scales and zero points, and their
dynamic forms taking scales (and zero points) as inputs; per tensor or per channel.

Example:
    >>> from tilefuse.graph_api.ops import op_def
    >>> op_def("Quantize").schema.attrs["qtype"].default
    'per_tensor'
"""
from __future__ import annotations

import numpy as np
from tilefuse.tensorir import ops as T
from tilefuse.tensorir.errors import Unsupported

from ..logical_tensor import DataType
from ..op import Op
from ._lower import _inputs
from ._numpy import _err, _int, _ints, _floats, _choice, _nin, _f64, _axis, _out_dtype
from ._shapes import _identity
from .registry import define
from .schema import FP, F32, QUANT, optional, required, schema, get_attr


# ---- schema rules -----------------------------------------------------------------------------------

def _check_scales_zps(op):
    scales, zps = op.attrs.get("scales"), op.attrs.get("zps")
    if get_attr(op, "qtype") == "per_tensor" and scales is not None and len(scales) != 1:
        return f"per_tensor quantization takes one scale, got {len(scales)}"
    if scales is not None and zps is not None and len(zps) != len(scales):
        return f"{len(scales)} scales but {len(zps)} zero points"
    return None


# ---- reference --------------------------------------------------------------------------------------

def _ref_q_params(op: Op, x: np.ndarray, scales, zps):
    qtype = _choice(op, "qtype", ("per_tensor", "per_channel"))
    scales = np.asarray(scales, np.float64).reshape(-1)
    zps = np.zeros(scales.shape) if zps is None else np.asarray(zps, np.float64).reshape(-1)
    if zps.size != scales.size:
        raise _err(op, f"{scales.size} scales but {zps.size} zero points")
    if qtype == "per_tensor":
        if scales.size != 1:
            raise _err(op, f"per_tensor needs one scale, got {scales.size}")
        return scales.reshape(()), zps.reshape(())
    axis = _axis(op, _int(op, "axis"), x.ndim)
    if scales.size != x.shape[axis]:
        raise _err(op, f"per_channel along axis {axis} needs {x.shape[axis]} scales, got {scales.size}")
    shape = [1] * x.ndim
    shape[axis] = -1
    return scales.reshape(shape), zps.reshape(shape)


def _ref_quantize(op: Op, x: np.ndarray, scales, zps) -> list:
    s, z = _ref_q_params(op, x, scales, zps)
    dt = _out_dtype(op, 0, np.dtype(np.int8))
    if not np.issubdtype(dt, np.integer):
        raise _err(op, f"output data type must be s8 or u8, got {dt}")
    info = np.iinfo(dt)
    # oneDNN reorders round to nearest even and saturate
    return [np.clip(np.rint(x / s + z), info.min, info.max)]


def _ref_dequantize(op: Op, x: np.ndarray, scales, zps) -> list:
    s, z = _ref_q_params(op, x, scales, zps)
    return [(x - z) * s]


def _ref_quantize_static(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    return _ref_quantize(op, _f64(xs[0]), _floats(op, "scales"), _ints(op, "zps") if "zps" in op.attrs else None)


def _ref_dequantize_static(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    return _ref_dequantize(op, _f64(xs[0]), _floats(op, "scales"), _ints(op, "zps") if "zps" in op.attrs else None)


def _ref_quantize_dynamic(op: Op, xs: list) -> list:
    _nin(op, xs, {2, 3})
    return _ref_quantize(op, _f64(xs[0]), xs[1], xs[2] if len(xs) == 3 else None)


def _ref_dequantize_dynamic(op: Op, xs: list) -> list:
    _nin(op, xs, {2, 3})
    return _ref_dequantize(op, _f64(xs[0]), xs[1], xs[2] if len(xs) == 3 else None)


# ---- lowering ---------------------------------------------------------------------------------------

def _lower_quant_params(op):
    zps = get_attr(op, "zps")
    return dict(scales=get_attr(op, "scales"), zps=None if zps is None else list(zps), qtype=get_attr(op, "qtype"),
                axis=get_attr(op, "axis"))


def _lower_quantize(op, xs):
    return T.quantize(_inputs(op, xs, 1)[0], dtype=op.outputs[0].dtype.numpy.name, **_lower_quant_params(op))


def _lower_dequantize(op, xs):
    return T.dequantize(_inputs(op, xs, 1)[0], dtype=op.outputs[0].dtype.numpy.name, **_lower_quant_params(op))


def _lower_dynamic_params(op, xs):
    _inputs(op, xs, 2, 3)
    if get_attr(op, "qtype") not in ("per_tensor", "per_channel"):
        raise Unsupported(f"qtype {get_attr(op, 'qtype')!r} is not compiled")
    return dict(scales=xs[1], zps=xs[2] if len(xs) == 3 else None, qtype=get_attr(op, "qtype"),
                axis=get_attr(op, "axis"))


def _lower_dynamic_quantize(op, xs):
    return T.dynamic_quantize(xs[0], dtype=op.outputs[0].dtype.numpy.name, **_lower_dynamic_params(op, xs))


def _lower_dynamic_dequantize(op, xs):
    return T.dynamic_dequantize(xs[0], dtype=op.outputs[0].dtype.numpy.name, **_lower_dynamic_params(op, xs))


# ---- the records ----------------------------------------------------------------------------------

_QTYPE = optional("string", "per_tensor", ("per_tensor", "per_channel"))
_STATIC = {"qtype": _QTYPE, "axis": optional("s64", 1), "scales": required("f32[]"), "zps": optional("s64[]")}

define(schema("Quantize", "src:T1", "dst:T2", _STATIC, {"T1": F32, "T2": QUANT}, checks=[_check_scales_zps]),
       shape=_identity, reference=_ref_quantize_static, lower=_lower_quantize)
define(schema("Dequantize", "src:T1", "dst:T2", _STATIC, {"T1": QUANT, "T2": F32}, checks=[_check_scales_zps]),
       shape=_identity, reference=_ref_dequantize_static, lower=_lower_dequantize)
define(schema("DynamicQuantize", "src:T1 scales:T1 zps:T2", "dst:T3",
              {"qtype": _QTYPE, "axis": optional("s64", 1), "mask": optional("s64")},
              {"T1": F32, "T2": frozenset({DataType.u8, DataType.s8, DataType.s32}), "T3": QUANT}, n_in={2, 3}),
       shape=_identity, reference=_ref_quantize_dynamic, lower=_lower_dynamic_quantize)
define(schema("DynamicDequantize", "src:T1 scales:T2 zps:T3", "dst:T2",
              {"qtype": optional("string", "per_tensor", ("per_tensor", "per_channel", "per_group")),
               "axis": optional("s64", 1), "mask": optional("s64"), "group_shape": optional("s64[]")},
              {"T1": QUANT | {DataType.s4, DataType.u4}, "T2": FP,
               "T3": frozenset({DataType.u4, DataType.s4, DataType.u8, DataType.s8, DataType.s32})}, n_in={2, 3}),
       shape=_identity, reference=_ref_dequantize_dynamic, lower=_lower_dynamic_dequantize)
