"""Graph ops -> tensorir compute definitions (the op library ``tensorir.ops``).

``lower_op(op, inputs)`` returns the op's output tensors built on the tensorir tensors of its
inputs, reading attributes with oneDNN's defaults (``schema.get_attr``). Each op kind has one
small lowering function in the ``_LOWERINGS`` table; ``LOWERED_KINDS`` lists them.
``op_class(op)`` derives the op's operator class from those compute bodies rather than from a
table: the highest class among the stages it builds (complex > reduction > injective); an op
whose lowering raises ``Unsupported`` (a kind, attribute value or data type without a compute
definition) is opaque and runs in the reference interpreter. Any other error propagates.

Example:
    >>> from graph_api import LogicalTensor
    >>> x = LogicalTensor(0, DataType.f32, (7, 13)); y = LogicalTensor(1, DataType.f32, (7, 13))
    >>> OpKind.ConvTranspose in LOWERED_KINDS, op_class(Op(0, OpKind.SoftMax, [x], [y], {"axis": -1}))
    (True, 'reduction')
"""
from __future__ import annotations

from tensorir import ops as T
from tensorir import placeholder
from tensorir.errors import Unsupported
from tensorir.tensor import ComputeOp, post_order

from .fusion import dominant_class
from .logical_tensor import DataType, GraphError, LogicalTensor, PropertyType
from .op import Op, OpKind
from .schema import get_attr

COMPILED_DTYPES = {DataType.f32, DataType.s32, DataType.s64, DataType.s8, DataType.u8, DataType.boolean}

_CASE_FREE = ("auto_pad", "rounding_type", "auto_broadcast")   # oneDNN accepts any letter case


def _attrs(op, *names):
    return {n: (get_attr(op, n).lower() if n in _CASE_FREE else get_attr(op, n)) for n in names}


def _spatial(values, n: int, default: int):
    """A per-spatial-dimension attribute as ``n`` values: oneDNN's schema defaults hold 12 (its
    maximum rank), so a longer list whose tail is the default is cut; empty means the default."""
    if not values:
        return [default] * n
    values = list(values)
    return values[:n] if len(values) > n and all(v == default for v in values[n:]) else values


def _inputs(op: Op, xs: list, *counts: int) -> list:
    if len(xs) not in counts:
        raise GraphError(f"op {op.id} ({op.kind.value}): expected {' or '.join(map(str, counts))} inputs, "
                         f"got {len(xs)}")
    return xs


_K = OpKind
_L: dict = {}


def _unary(kind, fn):
    _L[kind] = lambda op, xs: fn(op, _inputs(op, xs, 1)[0])


for _kind, _fn in {
        _K.Abs: lambda op, x: T.abs(x), _K.Exp: lambda op, x: T.exp(x), _K.Log: lambda op, x: T.log(x),
        _K.Sqrt: lambda op, x: T.sqrt(x), _K.Square: lambda op, x: T.square(x),
        _K.Reciprocal: lambda op, x: T.reciprocal(x), _K.ReLU: lambda op, x: T.relu(x),
        _K.Sigmoid: lambda op, x: T.sigmoid(x), _K.Tanh: lambda op, x: T.tanh(x),
        _K.HardSwish: lambda op, x: T.hardswish(x), _K.Mish: lambda op, x: T.mish(x),
        _K.Round: lambda op, x: T.round(x),
        _K.LeakyReLU: lambda op, x: T.leaky_relu(x, get_attr(op, "alpha")),
        _K.Elu: lambda op, x: T.elu(x, get_attr(op, "alpha")),
        _K.GELU: lambda op, x: T.gelu(x, get_attr(op, "mode")),
        _K.HardSigmoid: lambda op, x: T.hardsigmoid(x, get_attr(op, "alpha"), get_attr(op, "beta")),
        _K.SoftPlus: lambda op, x: T.softplus(x, get_attr(op, "beta")),
        _K.Clamp: lambda op, x: T.clamp(x, get_attr(op, "min"), get_attr(op, "max")),
        _K.Reorder: lambda op, x: T.reorder(x),
        _K.SoftMax: lambda op, x: T.softmax(x, get_attr(op, "axis"), get_attr(op, "mode"),
                                            stats=len(op.outputs) == 2),
        _K.LogSoftmax: lambda op, x: T.log_softmax(x, get_attr(op, "axis")),
        _K.StaticReshape: lambda op, x: T.reshape(x, get_attr(op, "shape"), get_attr(op, "special_zero")),
        _K.StaticTranspose: lambda op, x: T.transpose(x, get_attr(op, "order")),
        _K.GenIndex: lambda op, x: T.gen_index(x, get_attr(op, "axis")),
        _K.TypeCast: lambda op, x: T.typecast(x, op.outputs[0].dtype.numpy.name),
        _K.BiasAddBackward: lambda op, x: T.bias_add_backward(x, get_attr(op, "data_format")),
        _K.BiasAddBackprop: lambda op, x: T.bias_add_backward(x, get_attr(op, "data_format")),
        # our own kinds (the ONNX front end)
        _K.Neg: lambda op, x: T.neg(x), _K.Erf: lambda op, x: T.erf(x), _K.Identity: lambda op, x: T.identity(x),
        _K.Cast: lambda op, x: T.typecast(x, op.outputs[0].dtype.numpy.name),
        _K.Slice: lambda op, x: T.slice(x, get_attr(op, "starts"), get_attr(op, "ends"), get_attr(op, "axes"),
                                        get_attr(op, "steps")),
        _K.Pad: lambda op, x: T.pad(x, get_attr(op, "pads_begin"), get_attr(op, "pads_end"), get_attr(op, "mode"),
                                    get_attr(op, "value")),
        _K.Expand: lambda op, x: T.expand(x, get_attr(op, "shape")),
}.items():
    _unary(_kind, _fn)

for _kind, _fn in {_K.Add: T.add, _K.Subtract: T.subtract, _K.Multiply: T.multiply, _K.Divide: T.divide,
                   _K.Maximum: T.maximum, _K.Minimum: T.minimum, _K.SquaredDifference: T.squared_difference,
                   _K.GreaterEqual: T.greater_equal}.items():
    _L[_kind] = (lambda fn: lambda op, xs: fn(*_inputs(op, xs, 2), get_attr(op, "auto_broadcast").lower()))(_fn)

for _kind, _name in {_K.ReduceSum: "sum", _K.ReduceMean: "mean", _K.ReduceMax: "max", _K.ReduceMin: "min",
                     _K.ReduceProd: "prod", _K.ReduceL1: "l1", _K.ReduceL2: "l2"}.items():
    # axes given as a second (run-time) input are not lowered: the shapes depend on them
    _L[_kind] = (lambda name: lambda op, xs: T.reduce(name, _inputs(op, xs, 1)[0], get_attr(op, "axes"),
                                                      get_attr(op, "keep_dims")))(_name)

# elementwise backward ops: (data, diff_dst) -> diff_src; data is dst or src per use_dst
_BACKWARD = {
    _K.ReLUBackward: lambda op, d, g: T.relu_backward(d, g, get_attr(op, "use_dst")),
    _K.SigmoidBackward: lambda op, d, g: T.sigmoid_backward(d, g, get_attr(op, "use_dst")),
    _K.TanhBackward: lambda op, d, g: T.tanh_backward(d, g, get_attr(op, "use_dst")),
    _K.SqrtBackward: lambda op, d, g: T.sqrt_backward(d, g, get_attr(op, "use_dst")),
    _K.EluBackward: lambda op, d, g: T.elu_backward(d, g, get_attr(op, "alpha"), get_attr(op, "use_dst")),
    _K.ClampBackward: lambda op, d, g: T.clamp_backward(d, g, get_attr(op, "min"), get_attr(op, "max"),
                                                        get_attr(op, "use_dst")),
    _K.GELUBackward: lambda op, d, g: T.gelu_backward(d, g, get_attr(op, "mode")),
    _K.HardSigmoidBackward: lambda op, d, g: T.hardsigmoid_backward(d, g, get_attr(op, "alpha"),
                                                                    get_attr(op, "beta")),
    _K.HardSwishBackward: lambda op, d, g: T.hardswish_backward(d, g),
    _K.MishBackward: lambda op, d, g: T.mish_backward(d, g),
    _K.SoftPlusBackward: lambda op, d, g: T.softplus_backward(d, g, get_attr(op, "beta")),
    _K.AbsBackward: lambda op, d, g: T.abs_backward(d, g),
    # these two take (diff_dst, dst)
    _K.SoftMaxBackward: lambda op, g, d: T.softmax_backward(g, d, get_attr(op, "axis")),
    _K.LogSoftmaxBackward: lambda op, g, d: T.log_softmax_backward(g, d, get_attr(op, "axis")),
}
for _kind, _fn in _BACKWARD.items():
    _L[_kind] = (lambda fn: lambda op, xs: fn(op, *_inputs(op, xs, 2)))(_fn)


def _lowering(kind):
    def register(fn):
        _L[kind] = fn
        return fn
    return register


@_lowering(_K.Pow)
def _pow(op, xs):
    _inputs(op, xs, 1, 2)
    if len(xs) == 2:
        if get_attr(op, "auto_broadcast").lower() == "none" and xs[0].shape != xs[1].shape:
            raise GraphError(f"op {op.id} (Pow): auto_broadcast=none needs equal shapes, got {xs[0].shape} and "
                             f"{xs[1].shape}")
        return T.pow(xs[0], xs[1])
    return T.pow(xs[0], get_attr(op, "beta"))


@_lowering(_K.Gather)
def _gather(op, xs):
    return T.gather(*_inputs(op, xs, 2), axis=get_attr(op, "axis"))


@_lowering(_K.Select)
def _select(op, xs):
    return T.select(*_inputs(op, xs, 3), get_attr(op, "auto_broadcast").lower())


@_lowering(_K.BiasAdd)
def _bias_add(op, xs):
    return T.bias_add(*_inputs(op, xs, 2), get_attr(op, "data_format"))


@_lowering(_K.PReLU)
def _prelu(op, xs):
    return T.prelu(*_inputs(op, xs, 2), **_attrs(op, "data_format", "per_channel_broadcast"))


@_lowering(_K.MatMul)
def _matmul(op, xs):
    _inputs(op, xs, 2, 3)
    return T.matmul(xs[0], xs[1], get_attr(op, "transpose_a"), get_attr(op, "transpose_b"),
                    bias=xs[2] if len(xs) == 3 else None)


def _dilations(op, x):
    return _spatial(get_attr(op, "dilations"), x.ndim - 2, 1)


@_lowering(_K.Convolution)
def _convolution(op, xs):
    _inputs(op, xs, 2, 3)
    return T.conv(xs[0], xs[1], dilations=_dilations(op, xs[0]), bias=xs[2] if len(xs) == 3 else None,
                  **_attrs(op, "strides", "pads_begin", "pads_end", "groups", "data_format", "weights_format",
                           "auto_pad"))


@_lowering(_K.ConvTranspose)
def _conv_transpose(op, xs):
    _inputs(op, xs, 2, 3)
    return T.conv_transpose(xs[0], xs[1], dilations=_dilations(op, xs[0]),
                            output_padding=_spatial(get_attr(op, "output_padding"), xs[0].ndim - 2, 0),
                            bias=xs[2] if len(xs) == 3 else None,
                            **_attrs(op, "strides", "pads_begin", "pads_end", "groups", "data_format",
                                     "weights_format", "auto_pad"))


@_lowering(_K.MaxPool)
def _max_pool(op, xs):
    x = _inputs(op, xs, 1)[0]
    return T.max_pool(x, dilations=_dilations(op, x), **_attrs(op, "kernel", "strides", "pads_begin", "pads_end",
                                                               "rounding_type", "data_format", "auto_pad"))


@_lowering(_K.AvgPool)
def _avg_pool(op, xs):
    return T.avg_pool(_inputs(op, xs, 1)[0], **_attrs(op, "kernel", "strides", "pads_begin", "pads_end",
                                                      "exclude_pad", "rounding_type", "data_format", "auto_pad"))


@_lowering(_K.BatchNormInference)
def _batch_norm(op, xs):
    return T.batch_norm_inference(*_inputs(op, xs, 5), **_attrs(op, "epsilon", "data_format"))


@_lowering(_K.BatchNormTrainingBackward)
def _batch_norm_backward(op, xs):
    _inputs(op, xs, 4, 5)
    return T.batch_norm_backward(*xs[:4], gamma=xs[4] if len(xs) == 5 else None,
                                 **_attrs(op, "epsilon", "data_format"))


def _affine_inputs(op, xs):
    _inputs(op, xs, 1, 3)
    return (xs[1], xs[2]) if get_attr(op, "use_affine") and len(xs) == 3 else (None, None)


@_lowering(_K.LayerNorm)
def _layer_norm(op, xs):
    gamma, beta = _affine_inputs(op, xs)
    return T.layer_norm(xs[0], gamma, beta, get_attr(op, "begin_norm_axis"), get_attr(op, "epsilon"),
                        gamma is not None, len(op.outputs) == 3)


@_lowering(_K.GroupNorm)
def _group_norm(op, xs):
    gamma, beta = _affine_inputs(op, xs)
    return T.group_norm(xs[0], gamma, beta, get_attr(op, "groups"), get_attr(op, "epsilon"), gamma is not None,
                        len(op.outputs) == 3, get_attr(op, "data_format"))


@_lowering(_K.RMSNorm)
def _rms_norm(op, xs):
    _inputs(op, xs, 1, 2)
    return T.rms_norm(xs[0], xs[1] if len(xs) == 2 else None, get_attr(op, "begin_norm_axis"),
                      get_attr(op, "epsilon"))


@_lowering(_K.Concat)
def _concat(op, xs):
    return T.concat(xs, get_attr(op, "axis"))


@_lowering(_K.Dropout)
def _dropout(op, xs):
    # inference semantics (the reference's): the seed, offset and probability inputs are not read
    return T.dropout(_inputs(op, xs, 1, 2, 3, 4)[0])


@_lowering(_K.Interpolate)
def _interpolate(op, xs):
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


def _quant_params(op):
    zps = get_attr(op, "zps")
    return dict(scales=get_attr(op, "scales"), zps=None if zps is None else list(zps), qtype=get_attr(op, "qtype"),
                axis=get_attr(op, "axis"))


@_lowering(_K.Quantize)
def _quantize(op, xs):
    return T.quantize(_inputs(op, xs, 1)[0], dtype=op.outputs[0].dtype.numpy.name, **_quant_params(op))


@_lowering(_K.Dequantize)
def _dequantize(op, xs):
    return T.dequantize(_inputs(op, xs, 1)[0], dtype=op.outputs[0].dtype.numpy.name, **_quant_params(op))


def _dynamic_params(op, xs):
    _inputs(op, xs, 2, 3)
    if get_attr(op, "qtype") not in ("per_tensor", "per_channel"):
        raise Unsupported(f"qtype {get_attr(op, 'qtype')!r} is not compiled")
    return dict(scales=xs[1], zps=xs[2] if len(xs) == 3 else None, qtype=get_attr(op, "qtype"),
                axis=get_attr(op, "axis"))


@_lowering(_K.DynamicQuantize)
def _dynamic_quantize(op, xs):
    return T.dynamic_quantize(xs[0], dtype=op.outputs[0].dtype.numpy.name, **_dynamic_params(op, xs))


@_lowering(_K.DynamicDequantize)
def _dynamic_dequantize(op, xs):
    return T.dynamic_dequantize(xs[0], dtype=op.outputs[0].dtype.numpy.name, **_dynamic_params(op, xs))


LOWERED_KINDS: frozenset = frozenset(_L)
"""The op kinds ``lower_op`` builds compute definitions for."""


def lower_op(op: Op, inputs: list) -> list:
    """The op's outputs as tensorir tensors computed from ``inputs`` (tensorir tensors).

    Example:
        >>> from graph_api import LogicalTensor
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
        >>> [t.shape for t in lower_op(Op(0, OpKind.ReLU, [x], [y]), [placeholder_for(x)])]
        [(2, 3)]
    """
    lowering = _L.get(op.kind)
    try:
        if lowering is None:
            raise Unsupported("no compute definition; it runs in the reference interpreter")
        out = lowering(op, list(inputs))
    except Unsupported as err:
        raise Unsupported(f"op {op.id} ({op.kind.value}): {err}") from None
    except Exception as err:             # a bug or bad input: it propagates, naming the op
        err.add_note(f"while lowering op {op.id} ({op.kind.value})")
        raise
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    return outs[:len(op.outputs)]


def placeholder_for(t: LogicalTensor):
    """A tensorir placeholder shaped and typed like logical tensor ``t`` (shape known, dtype
    compiled), named after its id.

    Example:
        >>> placeholder_for(LogicalTensor(3, DataType.f32, (2, 5))).name
        't3'
    """
    if not t.is_known():
        raise Unsupported(f"logical tensor {t.id} has unknown shape {t.shape}")
    if t.dtype not in COMPILED_DTYPES:
        raise Unsupported(f"logical tensor {t.id}: data type {t.dtype.value} is not compiled")
    return placeholder(t.shape, t.dtype.numpy.name, name=f"t{t.id}",
                       constant=t.property_type is PropertyType.constant)


def op_class(op: Op) -> str:
    """The operator class of a graph op, from the compute bodies it lowers to.

    Example:
        >>> from graph_api import LogicalTensor
        >>> a = LogicalTensor(0, DataType.f32, (4, 8)); b = LogicalTensor(1, DataType.f32, (8, 3))
        >>> c = LogicalTensor(2, DataType.f32, (4, 3))
        >>> op_class(Op(0, OpKind.MatMul, [a, b], [c]))
        'complex'
    """
    from schedule.templates import op_class as compute_class
    if any(t.dtype not in COMPILED_DTYPES for t in op.outputs):
        return "opaque"      # its lowering could not name the output's element type
    try:
        outs = lower_op(op, [placeholder_for(t) for t in op.inputs])
    except Unsupported:
        return "opaque"
    if len(outs) != len(op.outputs) or any(o.shape != t.shape for o, t in zip(outs, op.outputs) if t.is_known()):
        return "opaque"      # an output the lowering does not compute, or computes in another shape
    if any(t.dtype in COMPILED_DTYPES and o.dtype != t.dtype.numpy.name for o, t in zip(outs, op.outputs)):
        return "opaque"      # e.g. a dtype the op's lowering does not produce
    return dominant_class({compute_class(c) for c in post_order(outs) if isinstance(c, ComputeOp)})
