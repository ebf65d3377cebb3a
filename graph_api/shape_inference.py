"""Shape inference: output shapes of forward ops from their input shapes and attributes, with
oneDNN's rules (``src/graph/interface/shape_infer.cpp``). Given output shapes are checked.

Example:
    >>> from graph_api import DataType, LogicalTensor, Op, OpKind, Graph
    >>> a = LogicalTensor(0, DataType.f32, (8, 1, 3)); b = LogicalTensor(1, DataType.f32, (5, 1))
    >>> g = Graph(); _ = g.add_op(Op(0, OpKind.Add, [a, b], [LogicalTensor(2, DataType.f32, None)]))
    >>> infer_shapes(g)[2].shape
    (8, 5, 3)
"""
from __future__ import annotations

import numpy as np

from .ir import GraphIR
from .logical_tensor import GraphError, LayoutType, LogicalTensor
from .op import Op, OpKind
from .schema import get_attr


class _ShapeError(Exception):
    """A shape rule failed; infer_shapes turns it into a GraphError naming the op."""


def infer_shapes(graph) -> dict[int, LogicalTensor]:
    """Every logical tensor of the graph (inputs included) by id, with output shapes filled in
    where an op's input shapes are known and its kind is in INFERABLE_KINDS. A given output
    shape that disagrees with the inferred one, or inputs the op cannot take, raise GraphError
    naming the op. The graph is not changed.

    Example:
        >>> from graph_api import DataType, LogicalTensor, Op, OpKind, Graph
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 4))
        >>> g = Graph(); _ = g.add_op(Op(5, OpKind.ReLU, [x], [y]))
        >>> infer_shapes(g)
        Traceback (most recent call last):
        ...
        graph_api.logical_tensor.GraphError: op 5 (ReLU): output 0 (tensor 1) is given shape [2, 4] but ...
    """
    tensors = graph.tensors
    for op in graph.topological_ops():
        rule = _RULES.get(op.kind)
        ins = [tensors[t.id] for t in op.inputs]
        if rule is None or not all(t.is_known() for t in ins):
            continue
        try:
            shapes = rule(op, [t.shape for t in ins])
        except _ShapeError as e:
            raise GraphError(f"op {op.id} ({op.kind.value}): {e}") from None
        for i, (out, shape) in enumerate(zip(op.outputs, shapes)):
            if shape is None:
                continue
            given, shape = tensors[out.id], tuple(int(d) for d in shape)
            if given.shape is not None and (len(given.shape) != len(shape) or any(
                    g >= 0 and g != d for g, d in zip(given.shape, shape))):
                raise GraphError(f"op {op.id} ({op.kind.value}): output {i} (tensor {out.id}) is given shape "
                                 f"{list(given.shape)} but the inputs make it {list(shape)}")
            if not given.is_known() or given.layout_type in (LayoutType.any, LayoutType.undef):
                tensors[out.id] = given.with_shape(shape)
    return tensors


def infer_op_shapes(op: Op, input_shapes) -> list:
    """The output shapes of ``op`` (a tuple per output, None where unknown) for the given input
    shapes (all known); GraphError naming the op when its inputs do not fit, or when its kind
    has no shape rule.

    Example:
        >>> from graph_api import DataType, LogicalTensor, Op, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (3, 1)); y = LogicalTensor(1, DataType.f32, None)
        >>> infer_op_shapes(Op(0, OpKind.Expand, [x], [y], {"shape": [2, 1, 4]}), [(3, 1)])
        [(2, 3, 4)]
    """
    rule = _RULES.get(op.kind)
    if rule is None:
        raise GraphError(f"op {op.id} ({op.kind.value}): no shape rule for this op kind")
    try:
        shapes = rule(op, [tuple(s) for s in input_shapes])
    except _ShapeError as e:
        raise GraphError(f"op {op.id} ({op.kind.value}): {e}") from None
    return [None if sh is None else tuple(int(d) for d in sh) for sh in shapes]


def with_inferred_shapes(graph) -> GraphIR:
    """The graph (a ``Graph`` or its IR) as an IR whose ops carry the tensors ``infer_shapes``
    completes.

    Example:
        >>> from graph_api import DataType, LogicalTensor, Op, OpKind, Graph
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, None)
        >>> g = Graph(); _ = g.add_op(Op(0, OpKind.Tanh, [x], [y]))
        >>> with_inferred_shapes(g).ops[0].outputs[0].shape
        (2, 3)
    """
    tensors = infer_shapes(graph)
    ir = graph if isinstance(graph, GraphIR) else graph.ir()
    return ir.with_ops([Op(op.id, op.kind, [tensors[t.id] for t in op.inputs], [tensors[t.id] for t in op.outputs],
                           op.attrs, op.name) for op in ir.ops])


# ---- helpers -----------------------------------------------------------------------------------------

def _require(cond, msg):
    if not cond:
        raise _ShapeError(msg)


def _axis(axis: int, ndim: int, what="axis") -> int:
    _require(-ndim <= axis < ndim, f"{what} {axis} is out of range for rank {ndim}")
    return axis + ndim if axis < 0 else axis


def broadcast_shapes(a, b) -> tuple:
    """numpy broadcasting of two shapes (oneDNN's ``auto_broadcast=numpy``).

    Example:
        >>> broadcast_shapes((8, 1, 3), (5, 1))
        (8, 5, 3)
    """
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        _require(x == y or x == 1 or y == 1, f"shapes {list(a)} and {list(b)} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


def _one_way(src, dst, what):
    ok = len(src) <= len(dst) and all(s in (1, d) for s, d in zip(src[::-1], dst[::-1]))
    _require(ok, f"{what} shape {list(src)} does not broadcast to {list(dst)}")


def _split_data(shape, fmt):
    """(N, C, spatial) of a data tensor in NCX or NXC."""
    _require(len(shape) >= 2, f"data tensor needs rank >= 2, got shape {list(shape)}")
    return (shape[0], shape[1], list(shape[2:])) if fmt == "NCX" else (shape[0], shape[-1], list(shape[1:-1]))


def _join_data(n, c, sp, fmt):
    return (n, c, *sp) if fmt == "NCX" else (n, *sp, c)


def _split_weights(shape, fmt):
    """(O, I, spatial) of a weights tensor in OIX, XIO, IOX or XOI."""
    _require(len(shape) >= 2, f"weights need rank >= 2, got shape {list(shape)}")
    if fmt in ("OIX", "IOX"):
        o, i, sp = shape[0], shape[1], list(shape[2:])
        return (i, o, sp) if fmt == "IOX" else (o, i, sp)
    o, i, sp = shape[-1], shape[-2], list(shape[:-2])
    return (i, o, sp) if fmt == "XOI" else (o, i, sp)


def _window(op, sp, kernel, deconv=False):
    """Per spatial dim: (stride, dilation, pad_begin, pad_end), with auto_pad applied."""
    n = len(sp)
    strides, dil = list(get_attr(op, "strides")), _fit(op.attrs.get("dilations"), n, 1)
    pb, pe = list(get_attr(op, "pads_begin")) or [0] * n, list(get_attr(op, "pads_end")) or [0] * n
    for name, v in (("strides", strides), ("dilations", dil), ("pads_begin", pb), ("pads_end", pe),
                    ("kernel", kernel)):
        _require(len(v) == n, f"{name} {list(v)} needs {n} values, one per spatial dim")
    _require(all(s > 0 for s in strides) and all(d > 0 for d in dil), "strides and dilations must be positive")
    auto_pad = get_attr(op, "auto_pad").upper()
    for k in range(n):
        if auto_pad == "VALID":
            pb[k] = pe[k] = 0
        elif auto_pad in ("SAME_UPPER", "SAME_LOWER") and deconv:
            # oneDNN: kernel - stride in all (negative: a crop), C's division, dilations of 1
            _require(dil[k] == 1, f"auto_pad {get_attr(op, 'auto_pad')} needs dilations of 1, got {dil}")
            total = kernel[k] - strides[k]
            pb[k] = int((total + (auto_pad == "SAME_LOWER")) / 2)
            pe[k] = total - pb[k]
        elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            eff = (kernel[k] - 1) * dil[k] + 1
            rem = sp[k] % strides[k]
            total = max(eff - (strides[k] if rem == 0 else rem), 0)
            pb[k] = (total + 1) // 2 if auto_pad == "SAME_LOWER" else total // 2
            pe[k] = total - pb[k]
    return [(strides[k], dil[k], pb[k], pe[k]) for k in range(n)]


def _fit(values, n, default):
    """An optional per-spatial-dim attribute as n values. oneDNN's defaults hold 12 (its maximum
    rank), so longer lists whose tail is the default are cut."""
    if not values:
        return [default] * n
    values = list(values)
    return values[:n] if len(values) > n and all(v == default for v in values[n:]) else values


def _positive(shape):
    _require(all(d > 0 for d in shape), f"inferred output shape {list(shape)} has a non-positive dim")
    return shape


# ---- rules: op, input shapes -> one shape (or None: unknown) per output -------------------------------

def _identity(op, s):
    return [s[0]] * len(op.outputs)


def _binary(op, s):
    if get_attr(op, "auto_broadcast") == "none":
        _require(s[0] == s[1], f"auto_broadcast=none needs equal shapes, got {list(s[0])} and {list(s[1])}")
        return [s[0]]
    return [broadcast_shapes(s[0], s[1])]


def _select(op, s):
    if get_attr(op, "auto_broadcast") == "none":
        _require(s[0] == s[1] == s[2], f"auto_broadcast=none needs equal shapes, got {[list(x) for x in s]}")
        return [s[1]]
    out = broadcast_shapes(s[1], s[2])
    _one_way(s[0], out, "cond")
    return [out]


def _matmul(op, s):
    a, b = list(s[0]), list(s[1])
    _require(a and b, "MatMul inputs need rank >= 1")
    if get_attr(op, "transpose_a") and len(a) > 1:
        a[-2], a[-1] = a[-1], a[-2]
    if get_attr(op, "transpose_b") and len(b) > 1:
        b[-2], b[-1] = b[-1], b[-2]
    k_b = b[0] if len(b) == 1 else b[-2]
    _require(a[-1] == k_b, f"inner dims differ: {list(s[0])} x {list(s[1])} (after transposes {a} x {b})")
    if len(a) == 1 and len(b) == 1:
        out = ()
    elif len(a) == 1:
        out = tuple(b[:-2] + b[-1:])
    elif len(b) == 1:
        out = tuple(a[:-1])
    else:
        out = broadcast_shapes(a[:-2], b[:-2]) + (a[-2], b[-1])
    if len(s) == 3:
        _one_way(s[2], out, "bias")
    return [out]


def _conv(op, s):
    fmt = get_attr(op, "data_format")
    n, c, sp = _split_data(s[0], fmt)
    o, i, ksp = _split_weights(s[1], get_attr(op, "weights_format"))
    g = get_attr(op, "groups")
    _require(len(ksp) == len(sp), f"src {list(s[0])} and weights {list(s[1])} differ in spatial rank")
    _require(g > 0 and c % g == 0 and c // g == i,
             f"src channels {c} / groups {g} must equal the weights' input channels {i}")
    out_sp = [(x + pb + pe - ((k - 1) * d + 1)) // st + 1
              for x, k, (st, d, pb, pe) in zip(sp, ksp, _window(op, sp, ksp))]
    if len(s) == 3:
        _require(tuple(s[2]) == (o,), f"bias shape {list(s[2])} must be [{o}]")
    return [_positive(_join_data(n, o, out_sp, fmt))]


def _conv_transpose(op, s):
    fmt = get_attr(op, "data_format")
    n, c, sp = _split_data(s[0], fmt)
    o, i, ksp = _split_weights(s[1], get_attr(op, "weights_format"))
    g = get_attr(op, "groups")
    _require(len(ksp) == len(sp), f"src {list(s[0])} and weights {list(s[1])} differ in spatial rank")
    _require(g > 0, f"groups must be positive, got {g}")
    out_pad = _fit(get_attr(op, "output_padding"), len(sp), 0)
    _require(len(out_pad) == len(sp), f"output_padding {list(out_pad)} needs {len(sp)} values")
    out_sp = [st * (x - 1) + (k - 1) * d + 1 + op_ - pb - pe
              for x, k, op_, (st, d, pb, pe) in zip(sp, ksp, out_pad, _window(op, sp, ksp, deconv=True))]
    if len(s) == 3:
        _require(tuple(s[2]) == (o * g,), f"bias shape {list(s[2])} must be [{o * g}]")
    return [_positive(_join_data(n, o * g, out_sp, fmt))]


def _pool(op, s):
    fmt = get_attr(op, "data_format")
    n, c, sp = _split_data(s[0], fmt)
    kernel = list(get_attr(op, "kernel"))
    ceil = get_attr(op, "rounding_type") == "ceil"
    out_sp = []
    for x, k, (st, d, pb, pe) in zip(sp, kernel, _window(op, sp, kernel)):
        span = x + pb + pe - ((k - 1) * d + 1)
        out_sp.append((-(-span // st) if ceil else span // st) + 1)
    return [_positive(_join_data(n, c, out_sp, fmt))]


def _channels(op, s):
    return _split_data(s[0], get_attr(op, "data_format"))[1]


def _batchnorm(op, s):
    c = _channels(op, s)
    for i, shape in enumerate(s[1:], 1):
        _require(tuple(shape) == (c,), f"input {i} shape {list(shape)} must be [{c}] (the channels)")
    return [s[0]] + [(c,)] * (len(op.outputs) - 1)


def _batchnorm_backward(op, s):
    c = _channels(op, s)
    _require(tuple(s[1]) == tuple(s[0]), f"diff_dst shape {list(s[1])} must be src's {list(s[0])}")
    for i, shape in enumerate(s[2:], 2):
        _require(tuple(shape) == (c,), f"input {i} shape {list(shape)} must be [{c}] (the channels)")
    return [s[0], (c,), (c,)][:len(op.outputs)]


def _bias_add(op, s):
    c = _channels(op, s)
    _require(tuple(s[1]) == (c,), f"bias shape {list(s[1])} must be [{c}] (the channels)")
    return [s[0]]


def _layernorm(op, s):
    axis = _axis(get_attr(op, "begin_norm_axis"), len(s[0]), "begin_norm_axis")
    return [s[0]] + [s[0][:axis]] * (len(op.outputs) - 1)


def _groupnorm(op, s):
    g, c = get_attr(op, "groups"), _channels(op, s)
    _require(g > 0 and c % g == 0, f"channels {c} are not divisible by groups {g}")
    return [s[0]] + [(s[0][0], g)] * (len(op.outputs) - 1)


def _softmax(op, s):
    axis = _axis(get_attr(op, "axis"), len(s[0]))
    stats = tuple(1 if k == axis else d for k, d in enumerate(s[0]))
    return [s[0], stats][:len(op.outputs)]


def _rms_norm(op, s):
    axis = _axis(get_attr(op, "begin_norm_axis"), len(s[0]), "begin_norm_axis")
    return [s[0], s[0][:axis]][:len(op.outputs)]


def _same_shapes(op, s):
    """diff_src of an elementwise backward op: the shape of its two (equal-shaped) inputs."""
    _require(tuple(s[0]) == tuple(s[1]), f"inputs of shapes {list(s[0])} and {list(s[1])} must have the same shape")
    return [s[0]]


def _softmax_backward(op, s):
    _axis(get_attr(op, "axis"), len(s[0]))
    return _same_shapes(op, s)


def _bias_add_backward(op, s):
    _require(len(s[0]) >= 2, f"diff_dst needs rank >= 2, got shape {list(s[0])}")
    return [(_channels(op, s),)]


def _checked_axis_identity(op, s):
    _axis(get_attr(op, "axis"), len(s[0]))
    return [s[0]]


def _reduce(op, s):
    if len(s) == 2:
        return [None]                      # axes come at run time
    ndim = len(s[0])
    axes = [_axis(a, ndim) for a in get_attr(op, "axes")]
    _require(len(set(axes)) == len(axes), f"axes {list(get_attr(op, 'axes'))} repeat a dim")
    if get_attr(op, "keep_dims"):
        return [tuple(1 if k in axes else d for k, d in enumerate(s[0]))]
    return [tuple(d for k, d in enumerate(s[0]) if k not in axes)]


def _reshape(op, s):
    src, shape = s[0], list(get_attr(op, "shape"))
    _require(all(d >= -1 for d in shape), f"shape {shape} has a dim below -1")
    _require(shape.count(-1) <= 1, f"shape {shape} has more than one -1")
    if get_attr(op, "special_zero"):
        _require(all(k < len(src) for k, d in enumerate(shape) if d == 0),
                 f"special_zero: shape {shape} copies a dim the input {list(src)} does not have")
        shape = [src[k] if d == 0 else d for k, d in enumerate(shape)]
    size, known = int(np.prod(src, dtype=np.int64)), int(np.prod([d for d in shape if d != -1], dtype=np.int64))
    if -1 in shape:
        _require(known != 0 and size % known == 0, f"cannot infer the -1 in {shape} for input {list(src)}")
        shape[shape.index(-1)] = size // known
    _require(int(np.prod(shape, dtype=np.int64)) == size, f"cannot reshape {list(src)} to {shape}")
    return [tuple(shape)]


def _transpose(op, s):
    ndim, order = len(s[0]), list(get_attr(op, "order"))
    if not order:
        return [tuple(reversed(s[0]))]
    _require(len(order) == ndim, f"order {order} needs {ndim} entries")
    order = [_axis(a, ndim, "order entry") for a in order]
    _require(sorted(order) == list(range(ndim)), f"order {list(get_attr(op, 'order'))} is not a permutation")
    return [tuple(s[0][a] for a in order)]


def _concat(op, s):
    ndim = len(s[0])
    axis = _axis(get_attr(op, "axis"), ndim)
    for i, shape in enumerate(s):
        _require(len(shape) == ndim and all(d == e for k, (d, e) in enumerate(zip(shape, s[0])) if k != axis),
                 f"input {i} shape {list(shape)} differs from input 0 {list(s[0])} outside axis {axis}")
    return [tuple(sum(shape[axis] for shape in s) if k == axis else d for k, d in enumerate(s[0]))]


def _interpolate(op, s):
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


def _pow(op, s):
    return [s[0]] if len(s) == 1 else _binary(op, s)


def _gather(op, s):
    axis = _axis(get_attr(op, "axis"), len(s[0]))
    return [tuple(s[0][:axis]) + tuple(s[1]) + tuple(s[0][axis + 1:])]


def slice_ranges(op, shape) -> list:
    """``range`` objects, one per dim of ``shape``: the indices a Slice op reads along it
    (ONNX/Python clamping of starts and ends; dims the op does not name are whole).

    Example:
        >>> from graph_api import DataType, LogicalTensor, Op, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (5, 4)); y = LogicalTensor(1, DataType.f32, None)
        >>> op = Op(0, OpKind.Slice, [x], [y], {"starts": [-1], "ends": [-10**9], "axes": [0], "steps": [-2]})
        >>> slice_ranges(op, (5, 4))
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


def _slice(op, s):
    try:
        return [tuple(len(r) for r in slice_ranges(op, s[0]))]
    except GraphError as e:
        raise _ShapeError(str(e).split(": ", 1)[1]) from None


def _pad(op, s):
    pb, pe = list(get_attr(op, "pads_begin")), list(get_attr(op, "pads_end"))
    _require(len(pb) == len(pe) == len(s[0]), f"pads_begin {pb} and pads_end {pe} need {len(s[0])} values each")
    out = tuple(d + b + e for d, b, e in zip(s[0], pb, pe))
    _require(all(d >= 0 for d in out), f"pads {pb}, {pe} crop more than the input {list(s[0])} holds")
    if get_attr(op, "mode") != "constant":
        _require(all(d > 0 for d, b, e in zip(s[0], pb, pe) if b > 0 or e > 0),
                 f"mode {get_attr(op, 'mode')} cannot pad an empty dim of {list(s[0])}")
    return [out]


def _expand(op, s):
    return [broadcast_shapes(s[0], tuple(get_attr(op, "shape")))]


_K = OpKind
_RULES = {k: _identity for k in (
    _K.Abs, _K.Clamp, _K.Elu, _K.Exp, _K.GELU, _K.HardSigmoid, _K.HardSwish, _K.LeakyReLU, _K.Log, _K.Mish,
    _K.Reciprocal, _K.ReLU, _K.Round, _K.Sigmoid, _K.SoftPlus, _K.Sqrt, _K.Square, _K.Tanh,
    _K.TypeCast, _K.Reorder, _K.Quantize, _K.Dequantize, _K.DynamicQuantize, _K.DynamicDequantize,
    _K.PReLU, _K.Dropout, _K.Erf, _K.Neg, _K.Identity, _K.Cast)}
_RULES.update({k: _binary for k in (_K.Add, _K.Subtract, _K.Multiply, _K.Divide, _K.Maximum, _K.Minimum,
                                    _K.SquaredDifference, _K.GreaterEqual)})
_RULES.update({k: _reduce for k in (_K.ReduceL1, _K.ReduceL2, _K.ReduceMax, _K.ReduceMean, _K.ReduceMin,
                                    _K.ReduceProd, _K.ReduceSum)})
_RULES.update({
    _K.Select: _select, _K.MatMul: _matmul, _K.Convolution: _conv, _K.ConvTranspose: _conv_transpose,
    _K.MaxPool: _pool, _K.AvgPool: _pool, _K.BatchNormInference: _batchnorm,
    _K.BatchNormForwardTraining: _batchnorm, _K.BiasAdd: _bias_add, _K.LayerNorm: _layernorm,
    _K.GroupNorm: _groupnorm, _K.SoftMax: _softmax, _K.LogSoftmax: _checked_axis_identity,
    _K.GenIndex: _checked_axis_identity, _K.StaticReshape: _reshape, _K.StaticTranspose: _transpose,
    _K.Concat: _concat, _K.Interpolate: _interpolate, _K.End: lambda op, s: [], _K.RMSNorm: _rms_norm,
    _K.SoftMaxBackward: _softmax_backward, _K.LogSoftmaxBackward: _softmax_backward,
    _K.BiasAddBackward: _bias_add_backward, _K.BiasAddBackprop: _bias_add_backward,
    _K.BatchNormTrainingBackward: _batchnorm_backward})
_RULES.update({_K.Pow: _pow, _K.Gather: _gather, _K.Slice: _slice, _K.Pad: _pad, _K.Expand: _expand})
_RULES.update({k: _same_shapes for k in (
    _K.AbsBackward, _K.ClampBackward, _K.EluBackward, _K.GELUBackward, _K.HardSigmoidBackward,
    _K.HardSwishBackward, _K.MishBackward, _K.ReLUBackward, _K.SigmoidBackward, _K.SoftPlusBackward,
    _K.SqrtBackward, _K.TanhBackward)})

INFERABLE_KINDS = frozenset(_RULES)
