"""Graph ops -> tensorir compute definitions (the op library ``tensorir.ops``).

``lower_op(op, inputs)`` returns the op's output tensors built on the tensorir tensors of its
inputs, reading attributes with oneDNN's defaults (``schema.get_attr``). ``op_class(op)``
derives the op's operator class from those compute bodies rather than from a table: the
highest class among the stages it builds (complex > reduction > injective); an op that does
not lower is opaque (and not compiled).
"""
from __future__ import annotations

from tensorir import ops as T
from tensorir import placeholder
from tensorir.tensor import ComputeOp, post_order

from .fusion import dominant_class
from .logical_tensor import DataType, GraphError, LogicalTensor
from .op import Op, OpKind
from .schema import get_attr

COMPILED_DTYPES = {DataType.f32, DataType.s32, DataType.s64, DataType.s8, DataType.u8, DataType.boolean}

_UNARY = {
    OpKind.Abs: lambda op, x: T.abs(x), OpKind.Exp: lambda op, x: T.exp(x), OpKind.Log: lambda op, x: T.log(x),
    OpKind.Sqrt: lambda op, x: T.sqrt(x), OpKind.Square: lambda op, x: T.square(x),
    OpKind.Reciprocal: lambda op, x: T.reciprocal(x), OpKind.ReLU: lambda op, x: T.relu(x),
    OpKind.Sigmoid: lambda op, x: T.sigmoid(x), OpKind.Tanh: lambda op, x: T.tanh(x),
    OpKind.HardSwish: lambda op, x: T.hardswish(x), OpKind.Mish: lambda op, x: T.mish(x),
    OpKind.Round: lambda op, x: T.round(x),
    OpKind.LeakyReLU: lambda op, x: T.leaky_relu(x, get_attr(op, "alpha")),
    OpKind.Elu: lambda op, x: T.elu(x, get_attr(op, "alpha")),
    OpKind.GELU: lambda op, x: T.gelu(x, get_attr(op, "mode")),
    OpKind.HardSigmoid: lambda op, x: T.hardsigmoid(x, get_attr(op, "alpha"), get_attr(op, "beta")),
    OpKind.SoftPlus: lambda op, x: T.softplus(x, get_attr(op, "beta")),
    OpKind.Clamp: lambda op, x: T.clamp(x, get_attr(op, "min"), get_attr(op, "max")),
    OpKind.Pow: lambda op, x: T.pow(x, get_attr(op, "beta")),
    OpKind.Reorder: lambda op, x: T.reorder(x),
    OpKind.Dropout: lambda op, x: T.identity(x),
}
_BINARY = {
    OpKind.Add: T.add, OpKind.Subtract: T.subtract, OpKind.Multiply: T.multiply, OpKind.Divide: T.divide,
    OpKind.Maximum: T.maximum, OpKind.Minimum: T.minimum, OpKind.SquaredDifference: T.squared_difference,
    OpKind.GreaterEqual: T.greater_equal,
}
_REDUCE = {OpKind.ReduceSum: "sum", OpKind.ReduceMean: "mean", OpKind.ReduceMax: "max", OpKind.ReduceMin: "min",
           OpKind.ReduceProd: "prod", OpKind.ReduceL1: "l1", OpKind.ReduceL2: "l2"}


_CASE_FREE = ("auto_pad", "rounding_type", "auto_broadcast")   # oneDNN accepts any letter case


def _attrs(op, *names):
    return {n: (get_attr(op, n).lower() if n in _CASE_FREE else get_attr(op, n)) for n in names}


def _lower(op: Op, xs: list):
    kind = op.kind
    if kind in _UNARY and len(xs) == 1:
        return _UNARY[kind](op, xs[0])
    if kind in _BINARY:
        return _BINARY[kind](xs[0], xs[1], get_attr(op, "auto_broadcast").lower())
    if kind in _REDUCE and len(xs) == 1:
        return T.reduce(_REDUCE[kind], xs[0], get_attr(op, "axes"), get_attr(op, "keep_dims"))
    if kind is OpKind.Select:
        return T.select(xs[0], xs[1], xs[2], get_attr(op, "auto_broadcast").lower())
    if kind is OpKind.BiasAdd:
        return T.bias_add(xs[0], xs[1], get_attr(op, "data_format"))
    if kind is OpKind.PReLU:
        return T.prelu(xs[0], xs[1], **_attrs(op, "data_format", "per_channel_broadcast"))
    if kind is OpKind.TypeCast:
        return T.typecast(xs[0], op.outputs[0].dtype.numpy.name)
    if kind is OpKind.MatMul:
        return T.matmul(xs[0], xs[1], get_attr(op, "transpose_a"), get_attr(op, "transpose_b"),
                        bias=xs[2] if len(xs) == 3 else None)
    if kind is OpKind.Convolution:
        return T.conv(xs[0], xs[1], bias=xs[2] if len(xs) == 3 else None,
                      **_attrs(op, "strides", "pads_begin", "pads_end", "dilations", "groups", "data_format",
                               "weights_format", "auto_pad"))
    if kind is OpKind.MaxPool:
        return T.max_pool(xs[0], **_attrs(op, "kernel", "strides", "pads_begin", "pads_end", "dilations",
                                          "rounding_type", "data_format", "auto_pad"))
    if kind is OpKind.AvgPool:
        return T.avg_pool(xs[0], **_attrs(op, "kernel", "strides", "pads_begin", "pads_end", "exclude_pad",
                                          "rounding_type", "data_format", "auto_pad"))
    if kind is OpKind.BatchNormInference:
        return T.batch_norm_inference(*xs[:5], **_attrs(op, "epsilon", "data_format"))
    if kind is OpKind.LayerNorm:
        use_affine = get_attr(op, "use_affine")
        gamma, beta = (xs[1], xs[2]) if use_affine and len(xs) == 3 else (None, None)
        return T.layer_norm(xs[0], gamma, beta, get_attr(op, "begin_norm_axis"), get_attr(op, "epsilon"),
                            bool(gamma is not None), len(op.outputs) == 3)
    if kind is OpKind.SoftMax:
        return T.softmax(xs[0], get_attr(op, "axis"))
    if kind is OpKind.LogSoftmax:
        return T.log_softmax(xs[0], get_attr(op, "axis"))
    if kind is OpKind.StaticReshape:
        return T.reshape(xs[0], get_attr(op, "shape"), get_attr(op, "special_zero"))
    if kind is OpKind.StaticTranspose:
        return T.transpose(xs[0], get_attr(op, "order"))
    if kind is OpKind.Concat:
        return T.concat(xs, get_attr(op, "axis"))
    raise GraphError(f"op {op.id} ({kind.value}): no compute definition; it runs in the reference interpreter")


def lower_op(op: Op, inputs: list) -> list:
    """The op's outputs as tensorir tensors computed from ``inputs`` (tensorir tensors).

    Example:
        >>> from graph_api import LogicalTensor
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
        >>> [t.shape for t in lower_op(Op(0, OpKind.ReLU, [x], [y]), [placeholder_for(x)])]
        [(2, 3)]
    """
    try:
        out = _lower(op, inputs)
    except (ValueError, TypeError, KeyError) as err:
        if isinstance(err, GraphError):
            raise
        raise GraphError(f"op {op.id} ({op.kind.value}): {err}") from None
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
        raise GraphError(f"logical tensor {t.id} has unknown shape {t.shape}")
    if t.dtype not in COMPILED_DTYPES:
        raise GraphError(f"logical tensor {t.id}: data type {t.dtype.value} is not compiled")
    return placeholder(t.shape, t.dtype.numpy.name, name=f"t{t.id}")


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
    try:
        outs = lower_op(op, [placeholder_for(t) for t in op.inputs])
    except GraphError:
        return "opaque"
    if len(outs) != len(op.outputs) or any(o.shape != t.shape for o, t in zip(outs, op.outputs) if t.is_known()):
        return "opaque"      # e.g. SoftMax's stats or Dropout's mask output: not computed here
    return dominant_class({compute_class(c) for c in post_order(outs) if isinstance(c, ComputeOp)})
