"""Data movement: Reorder, Identity, TypeCast, Cast, StaticReshape, StaticTranspose, Concat,
Gather, Slice, Pad, Expand, GenIndex and (inference) Dropout.

Example:
    >>> from tilefuse.graph_api.ops import op_def
    >>> op_def("Pad").schema.attrs["mode"].default
    'constant'
"""
from __future__ import annotations

import math
import numpy as np
from tilefuse.tensorir import ops as T

from ..logical_tensor import DataType, GraphError
from ..op import Op
from ._lower import _inputs
from ._numpy import _err, _int, _float, _bool, _ints, _choice, _nin, _nout, _axis, _out_dtype
from ._shapes import _require, _shape_axis, broadcast_shapes, _identity, _checked_axis_identity
from ._window import check_pads
from .registry import RuleError, define
from .schema import FP, F32, S32, ALL_TYPES, optional, required, schema, get_attr
from .eltwise import lower_unary


# ---- schema rules -----------------------------------------------------------------------------------

_ONEDNN_FP = FP - {DataType.f64}      # oneDNN's TypeCast converts between f32, bf16 and f16 only


def _check_typecast(op):
    src, dst = op.inputs[0].dtype, op.outputs[0].dtype
    if src is dst:
        return f"input and output have the same data type {src.value}"
    if {src, dst} == {DataType.bf16, DataType.f16}:
        return "casting between bf16 and f16 is not supported"
    return None


def _check_cast(op):
    to = op.attrs.get("to")
    if op.outputs and to is not None and op.outputs[0].dtype.value != to:
        return f"attribute to={to!r} but the output has data type {op.outputs[0].dtype.value}"
    return None


def _check_slice(op):
    starts, ends = op.attrs.get("starts", ()), op.attrs.get("ends", ())
    axes, steps = op.attrs.get("axes"), op.attrs.get("steps")
    if len(starts) != len(ends):
        return f"starts {list(starts)} and ends {list(ends)} differ in length"
    for name, v in (("axes", axes), ("steps", steps)):
        if v is not None and len(v) != len(starts):
            return f"{name} {list(v)} must have one entry per start ({len(starts)})"
    if steps is not None and 0 in steps:
        return f"steps {list(steps)} must not be 0"
    return None


# ---- shape rules ------------------------------------------------------------------------------------

def _shape_reshape(op, s):
    src, shape = s[0], list(get_attr(op, "shape"))
    _require(all(d >= -1 for d in shape), f"shape {shape} has a dim below -1")
    _require(shape.count(-1) <= 1, f"shape {shape} has more than one -1")
    if get_attr(op, "special_zero"):
        _require(all(k < len(src) for k, d in enumerate(shape) if d == 0),
                 f"special_zero: shape {shape} copies a dim the input {list(src)} does not have")
        shape = [src[k] if d == 0 else d for k, d in enumerate(shape)]
    size, known = math.prod(src), math.prod([d for d in shape if d != -1])
    if -1 in shape:
        _require(known != 0 and size % known == 0, f"cannot infer the -1 in {shape} for input {list(src)}")
        shape[shape.index(-1)] = size // known
    _require(math.prod(shape) == size, f"cannot reshape {list(src)} to {shape}")
    return [tuple(shape)]


def _shape_transpose(op, s):
    ndim, order = len(s[0]), list(get_attr(op, "order"))
    if not order:
        return [tuple(reversed(s[0]))]
    _require(len(order) == ndim, f"order {order} needs {ndim} entries")
    order = [_shape_axis(a, ndim, "order entry") for a in order]
    _require(sorted(order) == list(range(ndim)), f"order {list(get_attr(op, 'order'))} is not a permutation")
    return [tuple(s[0][a] for a in order)]


def _shape_concat(op, s):
    ndim = len(s[0])
    axis = _shape_axis(get_attr(op, "axis"), ndim)
    for i, shape in enumerate(s):
        _require(len(shape) == ndim and all(d == e for k, (d, e) in enumerate(zip(shape, s[0])) if k != axis),
                 f"input {i} shape {list(shape)} differs from input 0 {list(s[0])} outside axis {axis}")
    return [tuple(sum(shape[axis] for shape in s) if k == axis else d for k, d in enumerate(s[0]))]


def _shape_gather(op, s):
    axis = _shape_axis(get_attr(op, "axis"), len(s[0]))
    return [tuple(s[0][:axis]) + tuple(s[1]) + tuple(s[0][axis + 1:])]


def _shape_slice_ranges(op, shape) -> list:
    """``range`` objects, one per dim of ``shape``: the indices a Slice op reads along it
    (ONNX/Python clamping of starts and ends; dims the op does not name are whole).

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (5, 4)); y = LogicalTensor(1, DataType.f32, None)
        >>> op = Op(0, OpKind.Slice, [x], [y], {"starts": [-1], "ends": [-10**9], "axes": [0], "steps": [-2]})
        >>> _shape_slice_ranges(op, (5, 4))
        [range(4, -1, -2), range(0, 4)]
    """
    starts, ends = list(get_attr(op, "starts")), list(get_attr(op, "ends"))
    axes = get_attr(op, "axes")
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = get_attr(op, "steps")
    steps = [1] * len(starts) if steps is None else list(steps)
    if len(axes) != len(starts) or len(steps) != len(starts) or len(ends) != len(starts):
        raise GraphError(f"op {op.id} (Slice): starts, ends, axes and steps differ in length")
    ranges = [range(n) for n in shape]
    seen = set()
    for start, end, axis, step in zip(starts, ends, axes, steps):
        if not -len(shape) <= axis < len(shape):
            raise GraphError(f"op {op.id} (Slice): axis {axis} is out of range for rank {len(shape)}")
        axis %= len(shape)
        if axis in seen:
            raise GraphError(f"op {op.id} (Slice): axis {axis} is sliced twice")
        if step == 0:
            raise GraphError(f"op {op.id} (Slice): step 0 along axis {axis}")
        seen.add(axis)
        ranges[axis] = range(*slice(start, end, step).indices(shape[axis]))
    return ranges


def slice_view(op) -> tuple | None:
    """The numpy index of a Slice op's output in its input when that output is one contiguous
    block of it, starting ``PARAM_ALIGN``-aligned (steps of 1, unit dims before the first
    sliced axis, whole dims after it: the channels of a batch-1 NCHW tensor), so the output
    can be a view of the input, with no copy; else None (or when the shapes are unknown).

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (1, 8, 4, 4)); y = LogicalTensor(1, DataType.f32, (1, 4, 4, 4))
        >>> slice_view(Op(0, OpKind.Slice, [x], [y], {"starts": [4], "ends": [8], "axes": [1]}))
        (slice(0, 1, 1), slice(4, 8, 1), slice(0, 4, 1), slice(0, 4, 1))
        >>> slice_view(Op(0, OpKind.Slice, [x], [y], {"starts": [0], "ends": [4], "axes": [2]})) is None
        True
    """
    from tilefuse.tensorir.runtime.abi import PARAM_ALIGN
    src = op.inputs[0]
    if op.kind.value != "Slice" or src.shape is None or any(not isinstance(n, int) for n in src.shape):
        return None
    try:
        ranges = _shape_slice_ranges(op, src.shape)
    except GraphError:
        return None
    cut = [d for d, (r, n) in enumerate(zip(ranges, src.shape)) if len(r) != n]
    if not cut or any(r.step != 1 and len(r) > 1 for r in ranges) or any(len(r) == 0 for r in ranges):
        return None
    first = cut[0]
    if any(len(ranges[d]) != 1 for d in range(first)) or any(d > first for d in cut):
        return None
    offset = 0
    for r, n in zip(ranges, src.shape):
        offset = offset * n + r.start
    if (offset * src.dtype.numpy.itemsize) % PARAM_ALIGN:
        return None
    return tuple(slice(r.start, r.start + len(r), 1) for r in ranges)


def _shape_slice(op, s):
    try:
        return [tuple(len(r) for r in _shape_slice_ranges(op, s[0]))]
    except GraphError as e:
        raise RuleError(str(e).split(": ", 1)[1]) from None


def _shape_pad(op, s):
    pb, pe = list(get_attr(op, "pads_begin")), list(get_attr(op, "pads_end"))
    _require(len(pb) == len(pe) == len(s[0]), f"pads_begin {pb} and pads_end {pe} need {len(s[0])} values each")
    out = tuple(d + b + e for d, b, e in zip(s[0], pb, pe))
    _require(all(d >= 0 for d in out), f"pads {pb}, {pe} crop more than the input {list(s[0])} holds")
    if get_attr(op, "mode") != "constant":
        _require(all(d > 0 for d, b, e in zip(s[0], pb, pe) if b > 0 or e > 0),
                 f"mode {get_attr(op, 'mode')} cannot pad an empty dim of {list(s[0])}")
    return [out]


def _shape_expand(op, s):
    return [broadcast_shapes(s[0], tuple(get_attr(op, "shape")))]


# ---- reference --------------------------------------------------------------------------------------

def _ref_reorder(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    return [np.array(xs[0], copy=True)]


def _ref_type_cast(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    _nout(op, {1})
    if op.inputs[0].dtype is op.outputs[0].dtype and op.inputs[0].dtype is not DataType.undef:
        raise _err(op, f"input and output must have different data types, both are "
                       f"{op.inputs[0].dtype.value}")
    return [np.array(xs[0], copy=True)]


def _ref_dropout(op: Op, xs: list) -> list:
    """Inference semantics: dst = src; the optional mask output is all ones (u8)."""
    _nin(op, xs, {1, 2, 3, 4})
    _nout(op, {1, 2})
    x = np.array(xs[0], copy=True)
    return [x, np.ones(x.shape, np.uint8)][:len(op.outputs)]


def _ref_reshape(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    x = np.asarray(xs[0])
    shape = _ints(op, "shape")
    special_zero = _bool(op, "special_zero")
    out = []
    for i, d in enumerate(shape):
        if d < -1:
            raise _err(op, f"shape {shape} has the invalid dim {d}")
        if d == 0 and special_zero:
            if i >= x.ndim:
                raise _err(op, f"shape {shape}: a special zero at position {i} has no src dim to copy")
            d = x.shape[i]
        out.append(d)
    if out.count(-1) > 1:
        raise _err(op, f"shape {shape} has more than one -1")
    known = math.prod([d for d in out if d != -1])
    if -1 in out:
        if known == 0 or x.size % known:
            raise _err(op, f"cannot reshape src {x.shape} to {shape}")
        out[out.index(-1)] = x.size // known
    elif known != x.size:
        raise _err(op, f"cannot reshape src {x.shape} ({x.size} elements) to {shape}")
    return [x.reshape(out)]


def _ref_transpose(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    x = np.asarray(xs[0])
    order = _ints(op, "order")
    if not order:
        order = list(range(x.ndim))[::-1]
    if len(order) != x.ndim:
        raise _err(op, f"order {order} has {len(order)} entries for a rank-{x.ndim} src")
    axes = [_axis(op, a, x.ndim, "order entry") for a in order]
    if sorted(axes) != list(range(x.ndim)):
        raise _err(op, f"order {order} is not a permutation")
    return [np.transpose(x, axes)]


def _ref_concat(op: Op, xs: list) -> list:
    if not 1 <= len(xs) <= 64:
        raise _err(op, f"expects 1 to 64 inputs, got {len(xs)}")
    arrs = [np.asarray(x) for x in xs]
    nd = arrs[0].ndim
    axis = _axis(op, _int(op, "axis"), nd)
    for a in arrs[1:]:
        if a.ndim != nd or any(a.shape[i] != arrs[0].shape[i] for i in range(nd) if i != axis):
            raise _err(op, f"input shapes {[v.shape for v in arrs]} do not match outside axis {axis}")
    return [np.concatenate(arrs, axis=axis)]


def _ref_gen_index(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    x = np.asarray(xs[0])
    axis = _axis(op, _int(op, "axis"), x.ndim)
    shape = [1] * x.ndim
    shape[axis] = -1
    return [np.broadcast_to(np.arange(x.shape[axis]).reshape(shape), x.shape).copy()]


def _ref_cast_op(op: Op, xs: list) -> list:
    """numpy ``astype`` to the output's data type: float to integer truncates toward zero."""
    _nin(op, xs, {1})
    x = np.asarray(xs[0])
    dt = _out_dtype(op, 0, x.dtype)
    with np.errstate(all="ignore"):
        return [x.astype(dt)]


def _ref_gather(op: Op, xs: list) -> list:
    """``numpy.take(src, indices, axis)``; a negative index counts from the end."""
    _nin(op, xs, {2})
    x, idx = np.asarray(xs[0]), np.asarray(xs[1])
    if not np.issubdtype(idx.dtype, np.integer):
        raise _err(op, f"indices must be integers, got {idx.dtype}")
    axis = _axis(op, _int(op, "axis"), x.ndim)
    n = x.shape[axis]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise _err(op, f"indices {idx.min()}..{idx.max()} are out of range for dim {axis} of size {n}")
    return [np.take(x, np.where(idx < 0, idx + n, idx), axis=axis)]


def _ref_slice(op: Op, xs: list) -> list:
    """``src[start:end:step]`` along each axis, with Python's clamping (ONNX Slice)."""
    _nin(op, xs, {1})
    x = np.asarray(xs[0])
    starts, ends = _ints(op, "starts"), _ints(op, "ends")
    axes = _ints(op, "axes", list(range(len(starts))))
    steps = _ints(op, "steps", [1] * len(starts))
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise _err(op, "starts, ends, axes and steps differ in length")
    index = [slice(None)] * x.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        if step == 0:
            raise _err(op, f"step 0 along axis {axis}")
        index[_axis(op, axis, x.ndim)] = slice(start, end, step)
    return [np.array(x[tuple(index)], copy=True)]


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def _ref_pad(op: Op, xs: list) -> list:
    """Pad by ``pads_begin``/``pads_end`` (negative: crop first) in ``mode``."""
    _nin(op, xs, {1})
    x = np.asarray(xs[0])
    pb, pe = _ints(op, "pads_begin"), _ints(op, "pads_end")
    if not len(pb) == len(pe) == x.ndim:
        raise _err(op, f"pads_begin {pb} and pads_end {pe} need {x.ndim} values each")
    mode = _choice(op, "mode", tuple(_PAD_MODES))
    crop = tuple(slice(max(-b, 0), n - max(-e, 0)) for b, e, n in zip(pb, pe, x.shape))
    x = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(pb, pe)]
    if mode != "constant" and any(n == 0 and (b or e) for n, (b, e) in zip(x.shape, widths)):
        raise _err(op, f"mode {mode} cannot pad an empty dim of shape {x.shape}")
    if mode == "constant":
        return [np.pad(x, widths, mode="constant", constant_values=_float(op, "value"))]
    return [np.pad(x, widths, mode=_PAD_MODES[mode])]


def _ref_expand(op: Op, xs: list) -> list:
    """numpy broadcasting of ``src`` and the attribute ``shape``."""
    _nin(op, xs, {1})
    x = np.asarray(xs[0])
    shape = _ints(op, "shape")
    try:
        out = np.broadcast_shapes(x.shape, tuple(shape))
    except ValueError:
        raise _err(op, f"src shape {x.shape} and shape {shape} do not broadcast") from None
    return [np.broadcast_to(x, out).copy()]


# ---- lowering ---------------------------------------------------------------------------------------

def _lower_gather(op, xs):
    return T.gather(*_inputs(op, xs, 2), axis=get_attr(op, "axis"))


def _lower_concat(op, xs):
    return T.concat(xs, get_attr(op, "axis"))


def _lower_dropout(op, xs):
    # inference semantics (the reference's): the seed, offset and probability inputs are not read
    return T.dropout(_inputs(op, xs, 1, 2, 3, 4)[0])


# ---- the records ----------------------------------------------------------------------------------
define(schema("Reorder", "src:T", "dst:T"), shape=_identity, reference=_ref_reorder,
       lower=lower_unary(lambda op, x: T.reorder(x)))
define(schema("Identity", "src:T", "dst:T", {}, {"T": ALL_TYPES}), shape=_identity, reference=_ref_reorder,
       lower=lower_unary(lambda op, x: T.identity(x)))
define(schema("TypeCast", "src:T1", "dst:T2", {}, {"T1": _ONEDNN_FP, "T2": _ONEDNN_FP}, checks=[_check_typecast]),
       shape=_identity, reference=_ref_type_cast,
       lower=lower_unary(lambda op, x: T.typecast(x, op.outputs[0].dtype.numpy.name)))
define(schema("Cast", "src:T1", "dst:T2", {"to": required("string", tuple(d.value for d in sorted(ALL_TYPES, key=str)))},
              {"T1": ALL_TYPES, "T2": ALL_TYPES}, checks=[_check_cast]),
       shape=_identity, reference=_ref_cast_op,
       lower=lower_unary(lambda op, x: T.typecast(x, op.outputs[0].dtype.numpy.name)))
define(schema("StaticReshape", "src:T", "dst:T", {"shape": required("s64[]"), "special_zero": required("bool")},
              {"T": ALL_TYPES}),
       shape=_shape_reshape, reference=_ref_reshape,
       lower=lower_unary(lambda op, x: T.reshape(x, get_attr(op, "shape"), get_attr(op, "special_zero"))))
define(schema("StaticTranspose", "src:T", "dst:T", {"order": required("s64[]")}, {"T": ALL_TYPES}),
       shape=_shape_transpose, reference=_ref_transpose,
       lower=lower_unary(lambda op, x: T.transpose(x, get_attr(op, "order"))))
define(schema("Concat", "src_i:T", "dst:T", {"axis": required("s64")}, {"T": ALL_TYPES}, n_in=range(1, 65),
              variadic=True),
       shape=_shape_concat, reference=_ref_concat, lower=_lower_concat)
define(schema("Gather", "src:T1 indices:T2", "dst:T1", {"axis": optional("s64", 0)},
              {"T1": ALL_TYPES, "T2": frozenset({DataType.s32, DataType.s64})}),
       shape=_shape_gather, reference=_ref_gather, lower=_lower_gather)
define(schema("Slice", "src:T", "dst:T", {"starts": required("s64[]"), "ends": required("s64[]"),
                                         "axes": optional("s64[]"), "steps": optional("s64[]")},
              {"T": ALL_TYPES}, checks=[_check_slice]),
       shape=_shape_slice, reference=_ref_slice,
       lower=lower_unary(lambda op, x: T.slice(x, get_attr(op, "starts"), get_attr(op, "ends"), get_attr(op, "axes"),
                                               get_attr(op, "steps"))))
define(schema("Pad", "src:T", "dst:T", {"pads_begin": required("s64[]"), "pads_end": required("s64[]"),
                                       "mode": optional("string", "constant", ("constant", "reflect", "edge", "wrap")),
                                       "value": optional("f32", 0.0)}, {"T": ALL_TYPES}, checks=[check_pads]),
       shape=_shape_pad, reference=_ref_pad,
       lower=lower_unary(lambda op, x: T.pad(x, get_attr(op, "pads_begin"), get_attr(op, "pads_end"),
                                             get_attr(op, "mode"), get_attr(op, "value"))))
define(schema("Expand", "src:T", "dst:T", {"shape": required("s64[]")}, {"T": ALL_TYPES}),
       shape=_shape_expand, reference=_ref_expand, lower=lower_unary(lambda op, x: T.expand(x, get_attr(op, "shape"))))
define(schema("GenIndex", "src:T1", "dst:T2", {"axis": required("s64")}, {"T1": FP, "T2": S32}),
       shape=_checked_axis_identity, reference=_ref_gen_index,
       lower=lower_unary(lambda op, x: T.gen_index(x, get_attr(op, "axis"))))
define(schema("Dropout", "src:T seed:T_seed offset:T_offset probability:T_p", "dst:T mask:T_mask", {},
              {"T": FP, "T_seed": frozenset({DataType.s64}), "T_offset": frozenset({DataType.s64}), "T_p": F32,
               "T_mask": frozenset({DataType.u8})}, n_out={1, 2}),
       shape=_identity, reference=_ref_dropout, lower=_lower_dropout)
