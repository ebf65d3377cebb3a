"""The ONNX op -> tilefuse op mapping: ``ONNX_OPS[op_type](builder, node) -> outputs``.

Each converter reads one ONNX node (``onnx.builder.Node``) and emits our ops through the
``onnx.builder.Builder``; it returns one entry per node output: a logical tensor, or a value
known at import (an array). A node whose attributes the converter does not handle raises
``OnnxUnsupported`` (the importer then makes it a Wildcard). Semantics follow the ONNX operator
specification (opset 13 and later; older opsets where noted) and onnx's reference
implementation where the two differ.

=======================  =====================================================================
ONNX                     tilefuse
=======================  =====================================================================
Relu Sigmoid Tanh Exp    ReLU Sigmoid Tanh Exp Log Sqrt Abs Reciprocal HardSwish Mish Round
Log Sqrt Abs Reciprocal  (Neg, Erf: our own kinds)
HardSwish Mish Round
Neg Erf
Identity                 no op: its output is its input (an Identity op only for a graph output)
LeakyRelu Elu            LeakyReLU(alpha) Elu(alpha) HardSigmoid(alpha, beta) SoftPlus
HardSigmoid Softplus     GELU(mode gelu_erf / gelu_tanh) PReLU (numpy broadcast of the slope)
Gelu PRelu
Add Sub Mul Div          Add Subtract Multiply Divide (numpy broadcasting; opsets < 7 with
                         broadcast=1: the second operand reshaped to align at ``axis``)
Pow                      Pow(beta) for a constant scalar exponent, else binary Pow (Cast first
                         when the exponent's type differs)
Min Max Sum Mean         chains of Minimum / Maximum / Add (Mean: then Divide); one input: no op
Clip                     Clamp for constant bounds, else Maximum/Minimum with the bound tensors
Where                    Select (Expand of the first value when the condition is the larger)
Equal Greater Less       Equal Greater GreaterEqual (Less and LessOrEqual: operands swapped;
GreaterOrEqual           other integers: LogicalNot of Greater with the operands swapped)
LessOrEqual
And Or Xor Not IsNaN     LogicalAnd LogicalOr LogicalXor LogicalNot IsNaN
MatMul                   MatMul
Gemm                     MatMul(transpose_a/b, C as bias) [+ Multiply(alpha)] [+ Add(beta * C)]
Conv                     Convolution (NCX, OIX; auto_pad resolved to explicit pads)
ConvTranspose            ConvTranspose (NCX, IOX; output_shape/auto_pad resolved to pads and
                         output_padding: the crop split as the spec says, the odd element at
                         the begin but under SAME_UPPER)
BatchNormalization       BatchNormInference (inference mode only)
LayerNormalization       LayerNorm (+ Multiply/Add for a broadcast scale or bias; Mean and
                         InvStdDev outputs from its stats: StaticReshape, Add, Pow(-0.5))
Softmax LogSoftmax       SoftMax LogSoftmax (opset < 13: on the input flattened to 2-D)
ReduceSum/Mean/Max/Min/  ReduceSum ReduceMean ReduceMax ReduceMin ReduceL2 ReduceL1 ReduceProd
L2/L1/Prod               (empty axes: all, or no op with noop_with_empty_axes)
MaxPool AveragePool      MaxPool AvgPool (ceil_mode, whatever auto_pad: more end padding, never
                         counted, as onnxruntime counts windows; AvgPool counting pads under
                         ceil_mode: Pad + AvgPool; AvgPool with dilations: depthwise
                         Convolution / element counts; MaxPool's Indices: MaxPoolIndices; a
                         window larger than the padded input is refused)
GlobalAveragePool/Max    ReduceMean / ReduceMax over the spatial axes, keep_dims
Transpose                StaticTranspose
Reshape Flatten Squeeze  StaticReshape
Unsqueeze
Concat                   Concat
Split                    one Slice per output
Slice Gather Expand Pad  Slice Gather Expand Pad (our own kinds; Gather with constant indices in
                         arithmetic progression: Slice [+ StaticReshape])
GatherND                 constant indices, batch_dims 0: StaticReshape (the indexed dims as one),
                         Gather (or Slice) of the flat positions, StaticReshape
Cast CastLike            Cast (our own kind; no op for the same type)
Dropout                  no op (inference; the mask output is a constant of ones)
LRN                      Square, AvgPool over the channels, Multiply, Add, Pow, Divide
Resize                   Resize (opset 11 and later; nearest and linear, every coordinate
                         transformation but tf_crop_and_resize, every nearest mode)
Shape Size               folded at import (static shapes)
ConstantOfShape          folded at import (a static shape input)
Constant                 folded at import
=======================  =====================================================================

Example:
    >>> sorted(ONNX_OPS)[:4]
    ['Abs', 'Add', 'And', 'AveragePool']
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..logical_tensor import DataType
from ..op import OpKind
from ..ops._window import same_pads
from ..ops.schema import FP, FP_S32
from .builder import Builder, Node, OnnxRefused, OnnxUnsupported, data_type

ONNX_OPS: dict[str, Callable] = {}

_K = OpKind


def _register(*names):
    def deco(fn):
        for n in names:
            ONNX_OPS[n] = fn
        return fn
    return deco


def _ints(v) -> list[int]:
    return [int(x) for x in np.asarray(v).reshape(-1)]


def _x(b: Builder, node: Node, i: int = 0):
    return b.tensor(node.inputs[i])


def _rank(b: Builder, node: Node, i: int = 0) -> int:
    return len(b.shape(node.inputs[i]))


def _norm_axis(axis: int, rank: int, node: Node) -> int:
    if not -rank <= axis < max(rank, 1):
        raise OnnxRefused(f"{node.label}: axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def _scalar(b: Builder, value: float, like) -> np.ndarray:
    return np.asarray(value, dtype=b.dtype(like).numpy if isinstance(like, str) else like.dtype.numpy)


# ---- element-wise --------------------------------------------------------------------------------

_UNARY = {"Relu": _K.ReLU, "Sigmoid": _K.Sigmoid, "Tanh": _K.Tanh, "Exp": _K.Exp, "Log": _K.Log, "Sqrt": _K.Sqrt,
          "Abs": _K.Abs, "Neg": _K.Neg, "Erf": _K.Erf, "Reciprocal": _K.Reciprocal, "HardSwish": _K.HardSwish,
          "Mish": _K.Mish, "Round": _K.Round}


@_register(*_UNARY)
def _unary(b, node):
    return [b.op(_UNARY[node.op_type], [_x(b, node)])]


@_register("Identity")
def _identity(b, node):
    return [_x(b, node)]          # the same tensor (an Identity op is added only for a graph output)


@_register("LeakyRelu")
def _leaky_relu(b, node):
    return [b.op(_K.LeakyReLU, [_x(b, node)], {"alpha": float(node.attr("alpha", 0.01))})]


@_register("Elu")
def _elu(b, node):
    return [b.op(_K.Elu, [_x(b, node)], {"alpha": float(node.attr("alpha", 1.0))})]


@_register("HardSigmoid")
def _hard_sigmoid(b, node):
    return [b.op(_K.HardSigmoid, [_x(b, node)], {"alpha": float(node.attr("alpha", 0.2)),
                                                 "beta": float(node.attr("beta", 0.5))})]


@_register("Softplus")
def _softplus(b, node):
    return [b.op(_K.SoftPlus, [_x(b, node)], {"beta": 1.0})]


@_register("Gelu")
def _gelu(b, node):
    mode = {"none": "gelu_erf", "tanh": "gelu_tanh"}.get(node.attr("approximate", "none"))
    if mode is None:
        raise OnnxUnsupported(f"approximate={node.attr('approximate')!r}")
    return [b.op(_K.GELU, [_x(b, node)], {"mode": mode})]


@_register("PRelu")
def _prelu(b, node):
    # NXC: a 1-D slope applies to the last axis, as numpy broadcasting does
    return [b.op(_K.PReLU, [_x(b, node), _x(b, node, 1)], {"data_format": "NXC"})]


_BINARY = {"Add": _K.Add, "Sub": _K.Subtract, "Mul": _K.Multiply, "Div": _K.Divide}


def _legacy_broadcast(b, node, x, y):
    """Opsets < 7 broadcast the second operand only, and only when ``broadcast=1``: aligned at
    ``axis`` (default: the trailing dims), not numpy's way."""
    if node.opset >= 7 or not node.attr("broadcast", 0) or len(y.shape) == len(x.shape):
        return y
    axis = int(node.attr("axis", len(x.shape) - len(y.shape)))
    axis = axis + len(x.shape) if axis < 0 else axis
    return _reshape_to(b, y, list(y.shape) + [1] * (len(x.shape) - axis - len(y.shape)))


@_register(*_BINARY)
def _binary(b, node):
    x = _x(b, node)
    return [b.op(_BINARY[node.op_type], [x, _legacy_broadcast(b, node, x, _x(b, node, 1))])]


@_register("Pow")
def _pow(b, node):
    x, y = node.inputs[0], node.inputs[1]
    out_dtype = b.dtype(x)
    if b.has_value(y) and b.values[y].size == 1 and out_dtype in FP:
        return [b.op(_K.Pow, [b.tensor(x)], {"beta": float(np.asarray(b.values[y]).reshape(-1)[0])})]
    base = b.tensor(x)
    exponent = _legacy_broadcast(b, node, base, b.tensor(y))
    compute = base.dtype if base.dtype in (DataType.f32, DataType.f64) else DataType.f32
    if base.dtype is not compute:
        base = _cast_to(b, base, compute)
    if exponent.dtype is not compute:
        exponent = _cast_to(b, exponent, compute)
    return [_cast_to(b, b.op(_K.Pow, [base, exponent]), out_dtype)]


def _chain(b, kind, tensors):
    out = tensors[0]
    for t in tensors[1:]:
        out = b.op(kind, [out, t])
    return out


@_register("Min", "Max", "Sum", "Mean")
def _variadic(b, node):
    xs = [b.tensor(n) for n in node.inputs if n]
    if len(xs) == 1:
        return xs
    kind = {"Min": _K.Minimum, "Max": _K.Maximum, "Sum": _K.Add, "Mean": _K.Add}[node.op_type]
    out = _chain(b, kind, xs)
    if node.op_type == "Mean":
        out = b.op(_K.Divide, [out, _scalar(b, len(xs), out)])
    return [out]


@_register("Clip")
def _clip(b, node):
    x = _x(b, node)
    if node.opset < 11:
        lo, hi = node.attr("min"), node.attr("max")
        lo = -3.4028234663852886e38 if lo is None else float(lo)
        hi = 3.4028234663852886e38 if hi is None else float(hi)
        bounds = [lo, hi]
    else:
        bounds = []
        for i in (1, 2):
            name = node.input(i)
            if not name:
                bounds.append(None)
            elif b.has_value(name):
                bounds.append(float(np.asarray(b.values[name]).reshape(-1)[0]))
            else:
                bounds.append(b.tensor(name))
    if all(not hasattr(v, "id") for v in bounds) and x.dtype is DataType.f32:
        lo = -math.inf if bounds[0] is None else bounds[0]
        hi = math.inf if bounds[1] is None else bounds[1]
        if lo <= hi:
            return [b.op(_K.Clamp, [x], {"min": lo, "max": hi})]
    out = x
    for v, kind in zip(bounds, (_K.Maximum, _K.Minimum)):
        if v is not None:
            out = b.op(kind, [out, v if hasattr(v, "id") else _scalar(b, v, x)])
    return [out]


@_register("Where")
def _where(b, node):
    cond, x, y = (_x(b, node, i) for i in range(3))
    out = np.broadcast_shapes(cond.shape, x.shape, y.shape)
    if np.broadcast_shapes(x.shape, y.shape) != out:
        x = b.op(_K.Expand, [x], {"shape": list(out)})
    return [b.op(_K.Select, [cond, x, y], dtypes=x.dtype)]


# comparisons and logic: ONNX op -> (our kind, operands swapped); Less(a, b) is Greater(b, a)
_PREDICATES = {"Equal": (_K.Equal, False), "Greater": (_K.Greater, False), "Less": (_K.Greater, True),
               "GreaterOrEqual": (_K.GreaterEqual, False), "LessOrEqual": (_K.GreaterEqual, True),
               "And": (_K.LogicalAnd, False), "Or": (_K.LogicalOr, False), "Xor": (_K.LogicalXor, False)}


@_register(*_PREDICATES)
def _predicate(b, node):
    kind, swapped = _PREDICATES[node.op_type]
    x, y = _x(b, node), _x(b, node, 1)
    if swapped:
        x, y = y, x
    if kind is _K.GreaterEqual and x.dtype not in FP_S32:
        # oneDNN's kind takes floats and s32; other types: x >= y as the negation of y > x
        return [b.op(_K.LogicalNot, [b.op(_K.Greater, [y, x], dtypes=DataType.boolean)])]
    return [b.op(kind, [x, y], dtypes=DataType.boolean)]


@_register("Not")
def _not(b, node):
    return [b.op(_K.LogicalNot, [_x(b, node)])]


@_register("IsNaN")
def _is_nan(b, node):
    return [b.op(_K.IsNaN, [_x(b, node)], dtypes=DataType.boolean)]


# ---- matmul, conv ----------------------------------------------------------------------------------

@_register("MatMul")
def _matmul(b, node):
    return [b.op(_K.MatMul, [_x(b, node), _x(b, node, 1)])]


@_register("Gemm")
def _gemm(b, node):
    a, w = _x(b, node), _x(b, node, 1)
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    attrs = {"transpose_a": bool(node.attr("transA", 0)), "transpose_b": bool(node.attr("transB", 0))}
    c = b.tensor(node.inputs[2]) if node.input(2) and beta != 0 else None
    if c is not None and alpha == 1.0 and beta == 1.0:
        return [b.op(_K.MatMul, [a, w, c], attrs)]
    y = b.op(_K.MatMul, [a, w], attrs)
    if alpha != 1.0:
        y = b.op(_K.Multiply, [y, _scalar(b, alpha, y)])
    if c is not None:
        if beta != 1.0:
            c = b.op(_K.Multiply, [c, _scalar(b, beta, c)])
        y = b.op(_K.Add, [y, c])
    return [y]


def _flag(node: Node, name: str, default: int) -> bool:
    """A 0/1 attribute; any other value is an OnnxRefused."""
    value = node.attr(name, default)
    if value not in (0, 1):
        raise OnnxRefused(f"{node.label}: {name}={value!r}; it must be 0 or 1")
    return bool(value)


def _spatial_attr(node: Node, name: str, n: int, default: int) -> list[int]:
    v = node.attr(name)
    return [default] * n if not v else _ints(v)


def _explicit_pads(node: Node, n: int):
    pads = node.attr("pads")
    pads = [0] * (2 * n) if not pads else _ints(pads)
    if len(pads) != 2 * n:
        raise OnnxRefused(f"{node.label}: pads {pads} need {2 * n} values")
    return pads[:n], pads[n:]


def _conv_pads(node: Node, in_sp, kernel, strides, dilations):
    n = len(in_sp)
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("VALID", "SAME_UPPER", "SAME_LOWER"):
        return same_pads(auto, in_sp, kernel, strides, dilations)
    if auto not in ("NOTSET", ""):
        raise OnnxUnsupported(f"auto_pad={auto!r}")
    return _explicit_pads(node, n)


def _conv_inputs(b, node):
    """(data, weights, number of spatial dims) of a Conv or ConvTranspose node."""
    x, w = _x(b, node), _x(b, node, 1)
    if len(x.shape) < 3:
        raise OnnxUnsupported(f"input of rank {len(x.shape)}")
    return x, w, len(x.shape) - 2


@_register("Conv")
def _conv(b, node):
    x, w, n = _conv_inputs(b, node)
    kernel = list(w.shape[2:])
    if node.attr("kernel_shape") and _ints(node.attr("kernel_shape")) != kernel:
        raise OnnxRefused(f"{node.label}: kernel_shape {_ints(node.attr('kernel_shape'))} contradicts the "
                          f"weights' spatial shape {kernel}")
    strides, dil = _spatial_attr(node, "strides", n, 1), _spatial_attr(node, "dilations", n, 1)
    pb, pe = _conv_pads(node, x.shape[2:], kernel, strides, dil)
    ins = [x, w] + ([_x(b, node, 2)] if node.input(2) else [])
    return [b.op(_K.Convolution, ins, {"strides": strides, "dilations": dil, "pads_begin": pb, "pads_end": pe,
                                       "groups": int(node.attr("group", 1)), "data_format": "NCX",
                                       "weights_format": "OIX"})]


@_register("ConvTranspose")
def _conv_transpose(b, node):
    x, w, n = _conv_inputs(b, node)
    in_sp, kernel = list(x.shape[2:]), list(w.shape[2:])
    strides, dil = _spatial_attr(node, "strides", n, 1), _spatial_attr(node, "dilations", n, 1)
    out_pad = _spatial_attr(node, "output_padding", n, 0)[:n]
    if any(p >= max(s, d) for p, s, d in zip(out_pad, strides, dil)):
        raise OnnxRefused(f"{node.label}: output_padding {out_pad} must be less than the stride or dilation "
                          f"(strides {strides}, dilations {dil})")
    out_shape = node.attr("output_shape")
    out_shape = None if not out_shape else _ints(out_shape)[-n:]
    auto = node.attr("auto_pad", "NOTSET")
    full = [s * (i - 1) + op + (k - 1) * d + 1 for i, s, op, k, d in zip(in_sp, strides, out_pad, kernel, dil)]
    if auto not in ("NOTSET", "", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise OnnxUnsupported(f"auto_pad={auto!r}")
    same = out_shape is None and auto in ("SAME_UPPER", "SAME_LOWER") and not node.attr("pads")
    if same:                        # in * stride, never more than the full output (as onnxruntime)
        out_shape = [min(i * s, f) for i, s, f in zip(in_sp, strides, full)]
    if out_shape is not None:       # the spec: pads ignored, the crop split as auto_pad says
        pb, pe = [], []
        for k, (f, t) in enumerate(zip(full, out_shape)):
            total = f - t
            if total < 0:           # more than the full output: zeros (and the bias) at the end
                out_pad[k] -= total
                total = 0
            head = total // 2 if auto == "SAME_UPPER" else total - total // 2
            pb.append(head)
            pe.append(total - head)
    else:
        pb, pe = _explicit_pads(node, n) if auto != "VALID" else ([0] * n, [0] * n)
    if any(p < 0 for p in pb + pe):
        raise OnnxUnsupported(f"negative pads {pb}, {pe}")
    ins = [x, w] + ([_x(b, node, 2)] if node.input(2) else [])
    return [b.op(_K.ConvTranspose, ins, {"strides": strides, "dilations": dil, "pads_begin": pb, "pads_end": pe,
                                         "output_padding": out_pad, "groups": int(node.attr("group", 1)),
                                         "data_format": "NCX", "weights_format": "IOX"})]


# ---- normalization, softmax ----------------------------------------------------------------------

@_register("BatchNormalization")
def _batch_norm(b, node):
    if node.attr("training_mode", 0) or len([o for o in node.outputs if o]) > 1 or \
            (node.opset < 7 and not node.attr("is_test", 0)):
        raise OnnxUnsupported("training mode (batch statistics) is not mapped")
    if node.opset < 9 and node.attr("spatial", 1) != 1:
        raise OnnxUnsupported("spatial=0")
    ins = [_x(b, node, i) for i in range(5)]
    return [b.op(_K.BatchNormInference, ins, {"epsilon": float(node.attr("epsilon", 1e-5)), "data_format": "NCX"})]


@_register("LayerNormalization")
def _layer_norm(b, node):
    x = _x(b, node)
    rank = len(x.shape)
    axis = _norm_axis(int(node.attr("axis", -1)), rank, node)
    eps = float(node.attr("epsilon", 1e-5))
    norm_shape = tuple(x.shape[axis:])
    scale = _x(b, node, 1)
    bias = _x(b, node, 2) if node.input(2) else None
    stats = [o for o in node.outputs[1:3]]
    keep = any(stats)
    attrs = {"begin_norm_axis": axis, "epsilon": eps, "keep_stats": keep}
    n_out = 3 if keep else 1
    if scale.shape == norm_shape and (bias is None or bias.shape == norm_shape):
        beta = bias if bias is not None else np.zeros(norm_shape, scale.dtype.numpy)
        outs = b.op(_K.LayerNorm, [x, scale, beta], {**attrs, "use_affine": True}, n_out=n_out)
        outs = outs if keep else [outs]
    else:
        outs = b.op(_K.LayerNorm, [x], {**attrs, "use_affine": False}, n_out=n_out)
        outs = outs if keep else [outs]
        y = b.op(_K.Multiply, [outs[0], scale])
        if bias is not None:
            y = b.op(_K.Add, [y, bias])
        outs = [y] + list(outs[1:])
    if not keep:
        return outs
    y, mean, var = outs
    stat_shape = list(x.shape[:axis]) + [1] * (rank - axis)
    results = [y, None, None]
    if len(node.outputs) > 1 and node.outputs[1]:
        results[1] = b.op(_K.StaticReshape, [mean], {"shape": stat_shape, "special_zero": False})
    if len(node.outputs) > 2 and node.outputs[2]:
        inv = b.op(_K.Pow, [b.op(_K.Add, [var, _scalar(b, eps, var)])], {"beta": -0.5})
        results[2] = b.op(_K.StaticReshape, [inv], {"shape": stat_shape, "special_zero": False})
    return results[:len(node.outputs)]


def _softmax(kind):
    def convert(b, node):
        x = _x(b, node)
        rank = len(x.shape)
        default = -1 if node.opset >= 13 else 1
        axis = _norm_axis(int(node.attr("axis", default)), rank, node)
        if node.opset >= 13 or axis == rank - 1:
            return [b.op(kind, [x], {"axis": axis})]
        rows, cols = math.prod(x.shape[:axis]), math.prod(x.shape[axis:])   # opset < 13: softmax of 2-D rows
        flat = b.op(_K.StaticReshape, [x], {"shape": [rows, cols], "special_zero": False})
        y = b.op(kind, [flat], {"axis": 1})
        return [b.op(_K.StaticReshape, [y], {"shape": list(x.shape), "special_zero": False})]
    return convert


ONNX_OPS["Softmax"] = _softmax(_K.SoftMax)
ONNX_OPS["LogSoftmax"] = _softmax(_K.LogSoftmax)


@_register("LRN")
def _lrn(b, node):
    """x / (bias + alpha / size * (sum of x**2 over a window of channels)) ** beta; the window
    sum is an AvgPool (padding counted) over the channels of x**2, times size."""
    x = _x(b, node)
    if len(x.shape) < 3:
        raise OnnxUnsupported(f"input of rank {len(x.shape)}")
    size = int(node.required("size"))
    alpha, beta, bias = float(node.attr("alpha", 1e-4)), float(node.attr("beta", 0.75)), float(node.attr("bias", 1.0))
    n, c = x.shape[:2]
    rest = math.prod(x.shape[2:])
    sq = _reshape_to(b, b.op(_K.Square, [x]), [n, 1, c, rest])
    mean = b.op(_K.AvgPool, [sq], {"kernel": [size, 1], "strides": [1, 1], "pads_begin": [(size - 1) // 2, 0],
                                   "pads_end": [size // 2, 0], "exclude_pad": False, "data_format": "NCX"})
    scaled = b.op(_K.Multiply, [_reshape_to(b, mean, list(x.shape)), _scalar(b, alpha, x)])
    denom = b.op(_K.Pow, [b.op(_K.Add, [scaled, _scalar(b, bias, x)])], {"beta": beta})
    return [b.op(_K.Divide, [x, denom])]


# ---- reductions, pooling ---------------------------------------------------------------------------

_REDUCE = {"ReduceSum": _K.ReduceSum, "ReduceMean": _K.ReduceMean, "ReduceMax": _K.ReduceMax,
           "ReduceMin": _K.ReduceMin, "ReduceL2": _K.ReduceL2, "ReduceL1": _K.ReduceL1, "ReduceProd": _K.ReduceProd}
# the value of a reduction over no element
_EMPTY = {"ReduceSum": 0.0, "ReduceMean": math.nan, "ReduceMax": -math.inf, "ReduceMin": math.inf,
          "ReduceL2": 0.0, "ReduceL1": 0.0, "ReduceProd": 1.0}


@_register(*_REDUCE)
def _reduce(b, node):
    x = _x(b, node)
    rank = len(x.shape)
    axes_as_input = node.opset >= (13 if node.op_type == "ReduceSum" else 18)
    if axes_as_input:
        axes = _ints(b.value(node.input(1), f"the axes of {node.label}")) if node.input(1) else []
    else:
        axes = _ints(node.attr("axes", []))
    keep = _flag(node, "keepdims", 1)
    if not axes:
        if axes_as_input and node.attr("noop_with_empty_axes", 0):
            return [x]
        axes = list(range(rank))
    axes = sorted({_norm_axis(a, rank, node) for a in axes})
    if not axes:                                   # a scalar input
        return [x]
    out_shape = tuple(1 if k in axes else d for k, d in enumerate(x.shape) if keep or k not in axes)
    if any(x.shape[a] == 0 for a in axes):         # a reduction over no element: known now
        return [np.full(out_shape, _EMPTY[node.op_type], x.dtype.numpy)]
    return [b.op(_REDUCE[node.op_type], [x], {"axes": axes, "keep_dims": keep})]


@_register("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(b, node):
    x = _x(b, node)
    kind = _K.ReduceMean if node.op_type == "GlobalAveragePool" else _K.ReduceMax
    return [b.op(kind, [x], {"axes": list(range(2, len(x.shape))), "keep_dims": True})]


def _ort_same_pool_pads(auto: str, in_sp, kernel, strides):
    """(pads_begin, pads_end) of a pool under SAME_UPPER/SAME_LOWER as onnxruntime computes
    them: the total for ``ceil(in / stride)`` windows of the kernel not dilated, kept when
    negative (a crop: the windows then start after the input's begin, or stop before its end),
    halved with C's division (toward zero), the odd element at the end under SAME_UPPER."""
    begin, end = [], []
    for size, k, s in zip(in_sp, kernel, strides):
        total = (-(-size // s) - 1) * s + k - size
        head = int((total + (auto == "SAME_LOWER")) / 2)
        begin.append(head)
        end.append(total - head)
    return begin, end


def _pool_geometry(node: Node, in_sp, kernel, strides, dilations):
    """(pads_begin, pads_end, extension) as onnxruntime's pools: auto_pad resolved (SAME:
    ``_ort_same_pool_pads``); under ceil_mode, whatever auto_pad, the last window is kept when
    it starts inside the input or its begin padding, which ``extension`` (more padding at the
    end, never counted as elements) makes room for."""
    n = len(in_sp)
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pb, pe = _ort_same_pool_pads(auto, in_sp, kernel, strides)
    elif auto == "VALID":
        pb, pe = [0] * n, [0] * n
    elif auto in ("NOTSET", ""):
        pb, pe = _explicit_pads(node, n)
    else:
        raise OnnxUnsupported(f"auto_pad={auto!r}")
    extension = [0] * n
    if node.attr("ceil_mode", 0):
        for i, (x, k, s, d, b_, e) in enumerate(zip(in_sp, kernel, strides, dilations, pb, pe)):
            window = (k - 1) * d + 1
            out = -(-(x + b_ + e - window) // s) + 1
            if (out - 1) * s >= x + b_:
                out -= 1
            extension[i] = max(0, (out - 1) * s + window - (x + b_ + e))
    return pb, pe, extension


@_register("MaxPool", "AveragePool")
def _pool(b, node):
    x = _x(b, node)
    if len(x.shape) < 3:
        raise OnnxUnsupported(f"input of rank {len(x.shape)}")
    n = len(x.shape) - 2
    kernel = _ints(node.required("kernel_shape"))
    strides, dil = _spatial_attr(node, "strides", n, 1), _spatial_attr(node, "dilations", n, 1)
    pb, pe, ext = _pool_geometry(node, x.shape[2:], kernel, strides, dil)
    if any(p >= k for p, k in zip(pb + pe, kernel + kernel)):
        raise OnnxRefused(f"{node.label}: pads {pb + pe} must be smaller than the kernel {kernel}")
    for axis, (size, k, s, d, b_, e) in enumerate(zip(x.shape[2:], kernel, strides, dil, pb, pe)):
        span = size + b_ + e - ((k - 1) * d + 1)        # ceil_mode keeps one window that runs past the end
        if span < 0 and not (node.attr("ceil_mode", 0) and -(-span // s) >= 0):
            raise OnnxRefused(f"{node.label}: along spatial axis {axis} the window ({k} taps {d} apart) is larger "
                              f"than the padded input ({size} + pads {b_} and {e}); the operator defines no output")
    attrs = {"kernel": kernel, "strides": strides, "pads_begin": pb, "pads_end": [e + x_ for e, x_ in zip(pe, ext)],
             "data_format": "NCX"}
    if node.op_type == "MaxPool":
        y = b.op(_K.MaxPool, [x], {**attrs, "dilations": dil})
        if len(node.outputs) < 2 or not node.outputs[1]:
            return [y]
        order = node.attr("storage_order", 0)
        if order not in (0, 1):
            raise OnnxRefused(f"{node.label}: storage_order={order!r}; it must be 0 or 1")
        attrs.pop("data_format")
        return [y, b.op(_K.MaxPoolIndices, [x, y], {**attrs, "dilations": dil, "storage_order": order},
                        dtypes=[DataType.s64])]
    include_pad = bool(node.attr("count_include_pad", 0))
    if any(p < 0 for p in pb + pe):     # SAME with a negative total: crop first, then pad what is left
        x = b.op(_K.Pad, [x], {"pads_begin": [0, 0] + [min(p, 0) for p in pb],
                               "pads_end": [0, 0] + [min(p, 0) for p in pe]})
        pb, pe = [max(p, 0) for p in pb], [max(p, 0) for p in pe]
        attrs.update(pads_begin=pb, pads_end=[e + x_ for e, x_ in zip(pe, ext)])
    if any(d != 1 for d in dil):
        return [_dilated_avg_pool(b, x, kernel, strides, dil, pb, pe, ext, include_pad)]
    if include_pad and any(ext):
        if any(pb + pe):     # the padding counts as elements, the extension does not: pad explicitly
            x = b.op(_K.Pad, [x], {"pads_begin": [0, 0] + pb, "pads_end": [0, 0] + pe})
            attrs.update(pads_begin=[0] * n, pads_end=ext)
        include_pad = False
    return [b.op(_K.AvgPool, [x], {**attrs, "exclude_pad": not include_pad})]


def _dilated_avg_pool(b, x, kernel, strides, dil, pb, pe, ext, include_pad):
    """AvgPool with dilations (our AvgPool has none): a depthwise Convolution with weights of
    ones over the zero-padded input (extended at the end for ceil_mode), divided by each
    window's element count, known at import."""
    c, in_sp = x.shape[1], x.shape[2:]
    out_sp, counts = [], []
    for size, k, s, d, b_, e, extra in zip(in_sp, kernel, strides, dil, pb, pe, ext):
        out = (size + b_ + e + extra - ((k - 1) * d + 1)) // s + 1
        lo, hi = (-b_, size + e) if include_pad else (0, size)
        pos = np.arange(out)[:, None] * s + np.arange(k)[None, :] * d - b_
        counts.append(((pos >= lo) & (pos < hi)).sum(axis=1))
        out_sp.append(out)
    count = counts[0]
    for more in counts[1:]:
        count = np.multiply.outer(count, more)
    weights = np.ones((c, 1, *kernel), x.dtype.numpy)
    total = b.op(_K.Convolution, [x, weights], {"strides": strides, "dilations": dil, "pads_begin": pb,
                                                "pads_end": [e + extra for e, extra in zip(pe, ext)], "groups": c,
                                                "data_format": "NCX", "weights_format": "OIX"})
    return b.op(_K.Divide, [total, np.maximum(count, 1).astype(x.dtype.numpy).reshape(out_sp)])


# ---- data movement -------------------------------------------------------------------------------

def _reshape_to(b, x, shape):
    return b.op(_K.StaticReshape, [x], {"shape": [int(d) for d in shape], "special_zero": False})


@_register("Transpose")
def _transpose(b, node):
    x = _x(b, node)
    perm = node.attr("perm")
    order = list(range(len(x.shape)))[::-1] if perm is None else _ints(perm)
    if len(order) != len(x.shape):          # the spec: its length must be the input's rank
        raise OnnxRefused(f"{node.label}: perm {order} has {len(order)} values for an input of rank {len(x.shape)}")
    return [b.op(_K.StaticTranspose, [x], {"order": order})]


@_register("Reshape")
def _reshape(b, node):
    x = _x(b, node)
    if node.opset < 5:
        shape = _ints(node.required("shape"))
    else:
        shape = _ints(b.value(node.inputs[1], f"the shape of {node.label}"))
    allow_zero = bool(node.attr("allowzero", 0))
    return [b.op(_K.StaticReshape, [x], {"shape": shape, "special_zero": not allow_zero})]


@_register("Flatten")
def _flatten(b, node):
    x = _x(b, node)
    rank = len(x.shape)
    axis = int(node.attr("axis", 1))
    if not -rank <= axis <= rank:
        raise OnnxRefused(f"{node.label}: axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    return [_reshape_to(b, x, [math.prod(x.shape[:axis]), math.prod(x.shape[axis:])])]


def _axes_operand(b, node, since: int):
    if node.opset >= since:
        return None if not node.input(1) else _ints(b.value(node.inputs[1], f"the axes of {node.label}"))
    axes = node.attr("axes")
    return None if axes is None else _ints(axes)


@_register("Squeeze")
def _squeeze(b, node):
    x = _x(b, node)
    rank = len(x.shape)
    axes = _axes_operand(b, node, 13)
    axes = [k for k, d in enumerate(x.shape) if d == 1] if axes is None else \
        [_norm_axis(a, rank, node) for a in axes]
    for a in axes:
        if x.shape[a] != 1:
            raise OnnxRefused(f"{node.label}: cannot squeeze axis {a} of size {x.shape[a]}")
    return [_reshape_to(b, x, [d for k, d in enumerate(x.shape) if k not in axes])]


@_register("Unsqueeze")
def _unsqueeze(b, node):
    x = _x(b, node)
    axes = _axes_operand(b, node, 13)
    if axes is None:
        raise OnnxRefused(f"{node.label}: no axes")
    out_rank = len(x.shape) + len(axes)
    axes = {_norm_axis(a, out_rank, node) for a in axes}
    dims = iter(x.shape)
    return [_reshape_to(b, x, [1 if k in axes else next(dims) for k in range(out_rank)])]


@_register("Concat")
def _concat(b, node):
    xs = [b.tensor(n) for n in node.inputs if n]
    rank = len(xs[0].shape)
    axis = _norm_axis(int(node.attr("axis", 1) if node.opset < 4 else node.required("axis")), rank, node)
    kept = [t for t in xs if t.shape[axis] > 0] or xs[:1]
    return [b.op(_K.Concat, kept, {"axis": axis})]


def _slice_axis(b, x, axis: int, start: int, end: int, step: int = 1):
    return b.op(_K.Slice, [x], {"starts": [start], "ends": [end], "axes": [axis], "steps": [step]})


@_register("Split")
def _split(b, node):
    x = _x(b, node)
    rank = len(x.shape)
    axis = _norm_axis(int(node.attr("axis", 0)), rank, node)
    n_out = len(node.outputs)
    if node.opset >= 13 and node.input(1):
        sizes = _ints(b.value(node.inputs[1], f"the split sizes of {node.label}"))
    elif node.opset < 13 and node.attr("split") is not None:
        sizes = _ints(node.attr("split"))
    else:
        n = x.shape[axis]
        parts = int(node.attr("num_outputs", n_out))
        chunk = -(-n // parts)
        sizes = [min(chunk, n - k * chunk) for k in range(parts)]
    if sum(sizes) != x.shape[axis] or len(sizes) != n_out or any(size < 0 for size in sizes):
        raise OnnxRefused(f"{node.label}: split sizes {sizes} do not cover dim {axis} of size {x.shape[axis]} in "
                         f"{n_out} outputs")
    outs, start = [], 0
    for size in sizes:
        outs.append(_slice_axis(b, x, axis, start, start + size))
        start += size
    return outs


@_register("Slice")
def _slice(b, node):
    x = _x(b, node)
    if node.opset < 10:
        starts, ends = _ints(node.required("starts")), _ints(node.required("ends"))
        axes = node.attr("axes")
        axes = list(range(len(starts))) if axes is None else _ints(axes)
        steps = [1] * len(starts)
    else:
        operand = lambda i, what: _ints(b.value(node.inputs[i], f"the {what} of {node.label}"))  # noqa: E731
        starts, ends = operand(1, "starts"), operand(2, "ends")
        axes = operand(3, "axes") if node.input(3) else list(range(len(starts)))
        steps = operand(4, "steps") if node.input(4) else [1] * len(starts)
    big = (1 << 62)
    clip = lambda v: max(-big, min(big, v))    # noqa: E731  (INT64_MAX/MIN sentinels)
    return [b.op(_K.Slice, [x], {"starts": [clip(v) for v in starts], "ends": [clip(v) for v in ends],
                                 "axes": axes, "steps": steps})]


@_register("Gather")
def _gather(b, node):
    x = _x(b, node)
    axis = _norm_axis(int(node.attr("axis", 0)), len(x.shape), node)
    name = node.inputs[1]
    if b.has_value(name):
        return [_take(b, x, axis, np.asarray(b.values[name]).astype(np.int64), node)]
    return [b.op(_K.Gather, [x, b.tensor(name)], {"axis": axis})]


def _take(b, x, axis: int, idx: np.ndarray, node):
    """``x`` gathered along ``axis`` at the constant indices ``idx``: a Slice where they step
    evenly, else a Gather."""
    n = x.shape[axis]
    flat = np.where(idx < 0, idx + n, idx).reshape(-1)
    if idx.ndim <= 1 and flat.size and (flat.min() < 0 or flat.max() >= n):
        raise OnnxRefused(f"{node.label}: indices {flat.tolist()} are out of range for a dim of size {n}")
    step = int(flat[1] - flat[0]) if flat.size > 1 else 1
    if idx.ndim <= 1 and flat.size and step != 0 and np.all(np.diff(flat) == step):
        end = int(flat[-1]) + (1 if step > 0 else -1)
        y = _slice_axis(b, x, axis, int(flat[0]), end if end >= 0 else -n - 1, step)
        if idx.ndim == 0:
            y = _reshape_to(b, y, [d for k, d in enumerate(x.shape) if k != axis])
        return y
    return b.op(_K.Gather, [x, idx], {"axis": axis})


@_register("GatherND")
def _gather_nd(b, node):
    """Constant indices (batch_dims 0): the leading dims they index flattened into one, then a
    gather of the flat positions along it."""
    x = _x(b, node)
    name = node.inputs[1]
    if int(node.attr("batch_dims", 0)) or not b.has_value(name):
        raise OnnxUnsupported("GatherND with batch_dims or indices computed at run time")
    idx = np.asarray(b.values[name]).astype(np.int64)
    depth = idx.shape[-1] if idx.ndim else 0
    if idx.ndim == 0 or not 1 <= depth <= len(x.shape):
        raise OnnxRefused(f"{node.label}: indices of shape {list(idx.shape)} do not fit data of shape {list(x.shape)}")
    lead = np.array(x.shape[:depth])
    points = idx.reshape(-1, depth)
    if np.any(points < -lead) or np.any(points >= lead):
        raise OnnxRefused(f"{node.label}: indices out of range for data of shape {list(x.shape)}")
    flat = np.ravel_multi_index(tuple(np.where(points < 0, points + lead, points).T), tuple(int(d) for d in lead))
    rows = _reshape_to(b, x, [int(np.prod(lead))] + list(x.shape[depth:]))
    return [_reshape_to(b, _take(b, rows, 0, flat, node), list(idx.shape[:-1]) + list(x.shape[depth:]))]


@_register("Expand")
def _expand(b, node):
    shape = _ints(b.value(node.inputs[1], f"the shape of {node.label}"))
    return [b.op(_K.Expand, [_x(b, node)], {"shape": shape})]


def _refuse_what_the_fallback_gets_wrong(b, node, x, mode, ctm) -> None:
    """Cubic Resize runs in onnx's reference implementation, which differs from the operator's
    definition (and onnxruntime) for align_corners when a scale does not give a whole output
    length, and for pytorch_half_pixel onto a length of 1 (by scales or sizes): those are
    refused, not run wrong."""
    if mode != "cubic" or ctm not in ("align_corners", "pytorch_half_pixel"):
        return
    axes = [_norm_axis(a, len(x.shape), node) for a in _ints(node.attr("axes", []))] or list(range(len(x.shape)))
    if not node.input(2) and ctm == "pytorch_half_pixel" and node.input(3):       # sizes
        sizes = _ints(np.asarray(b.value(node.inputs[3], f"the sizes of {node.label}")).reshape(-1))
        for a, out in zip(axes, sizes):
            if out == 1 < x.shape[a]:
                raise OnnxRefused(f"{node.label}: cubic mode with {ctm} onto a length of 1 from an axis of "
                                  f"{x.shape[a]} is not supported (onnx's reference implementation, the fallback for "
                                  f"cubic mode, computes it otherwise than the operator's definition)")
    if not node.input(2):
        return
    scales = np.asarray(b.value(node.inputs[2], f"the scales of {node.label}"), np.float64).reshape(-1)
    for a, scale in zip(axes, scales):
        out = math.floor(x.shape[a] * scale)
        if (ctm == "align_corners" and out != x.shape[a] * scale) or (ctm == "pytorch_half_pixel" and out == 1 < x.shape[a]):
            raise OnnxRefused(f"{node.label}: cubic mode with {ctm} and scale {scale:g} on an axis of {x.shape[a]} "
                              f"is not supported (onnx's reference implementation, the fallback for cubic "
                              f"mode, computes it otherwise than the operator's definition)")


@_register("Resize")
def _resize(b, node):
    """Resize (opset 11 and later) to Resize: sizes for every axis, with the scales the
    coordinate transformation uses when they are given; cubic mode, tf_crop_and_resize,
    antialiased downscaling and a kept aspect ratio run as a Wildcard."""
    if node.opset < 11:
        raise OnnxUnsupported("opset 10 Resize (its coordinate rules predate the attributes)")
    x = _x(b, node)
    rank = len(x.shape)
    mode = node.attr("mode", "nearest")
    ctm = node.attr("coordinate_transformation_mode", "half_pixel")
    if mode == "cubic" or ctm == "tf_crop_and_resize":
        _refuse_what_the_fallback_gets_wrong(b, node, x, mode, ctm)
        raise OnnxUnsupported(f"mode {mode!r} with coordinate_transformation_mode {ctm!r}")
    if node.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise OnnxUnsupported(f"keep_aspect_ratio_policy {node.attr('keep_aspect_ratio_policy')!r}")
    axes = [_norm_axis(a, rank, node) for a in _ints(node.attr("axes", []))] or list(range(rank))
    scales = np.asarray(b.value(node.inputs[2], f"the scales of {node.label}") if node.input(2) else [],
                        np.float32).reshape(-1)
    sizes = np.asarray(b.value(node.inputs[3], f"the sizes of {node.label}") if node.input(3) else [],
                       np.int64).reshape(-1)
    if (scales.size > 0) == (sizes.size > 0):
        raise OnnxRefused(f"{node.label}: exactly one of scales and sizes must be given")
    given = scales if scales.size else sizes
    if given.size != len(axes):
        raise OnnxRefused(f"{node.label}: {'scales' if scales.size else 'sizes'} {given.tolist()} need "
                         f"{len(axes)} values, one per axis of {axes}")
    out_shape, out_scales = list(x.shape), [1.0] * rank
    for k, a in enumerate(axes):
        if scales.size:
            if scales[k] <= 0:
                raise OnnxRefused(f"{node.label}: scales {scales.tolist()} must be positive")
            out_shape[a] = int(math.floor(x.shape[a] * float(scales[k])))
            out_scales[a] = float(scales[k])
        else:
            out_shape[a] = int(sizes[k])
    if any(n <= 0 for n in out_shape):
        raise OnnxRefused(f"{node.label}: the output shape {out_shape} is not positive")
    downscaled = any(o < n for o, n in zip(out_shape, x.shape))
    if node.attr("antialias", 0) and mode == "linear" and downscaled:
        raise OnnxUnsupported("antialiased linear downscaling")
    attrs = {"mode": mode, "sizes": out_shape, "coordinate_transformation_mode": ctm,
             "nearest_mode": node.attr("nearest_mode", "round_prefer_floor")}
    if scales.size:
        attrs["scales"] = out_scales
    return [b.op(_K.Resize, [x], attrs)]


@_register("Pad")
def _pad(b, node):
    x = _x(b, node)
    rank = len(x.shape)
    mode = node.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise OnnxUnsupported(f"mode {mode!r}")
    if node.opset < 11:
        pads = _ints(node.attr("pads", node.attr("paddings")))          # "paddings" in opset 1
        value = float(node.attr("value", 0.0))
        axes = list(range(rank))
    else:
        pads = _ints(b.value(node.inputs[1], f"the pads of {node.label}"))
        value = 0.0
        if node.input(2):
            value = float(np.asarray(b.value(node.inputs[2], f"the constant value of {node.label}")).reshape(-1)[0])
        axes = list(range(rank)) if not node.input(3) else \
            [_norm_axis(a, rank, node) for a in _ints(b.value(node.inputs[3], f"the axes of {node.label}"))]
    if len(pads) != 2 * len(axes):
        raise OnnxRefused(f"{node.label}: pads {pads} need {2 * len(axes)} values")
    pb, pe = [0] * rank, [0] * rank
    for k, a in enumerate(axes):
        pb[a], pe[a] = pads[k], pads[k + len(axes)]
    return [b.op(_K.Pad, [x], {"pads_begin": pb, "pads_end": pe, "mode": mode, "value": value})]


def _cast_to(b, x, dtype: DataType):
    return x if x.dtype is dtype else b.op(_K.Cast, [x], {"to": dtype.value}, dtypes=dtype)


_TYPE_NAMES = {"FLOAT": 1, "UINT8": 2, "INT8": 3, "INT32": 6, "INT64": 7, "BOOL": 9, "FLOAT16": 10, "BFLOAT16": 16}


@_register("Cast")
def _cast(b, node):
    to = node.required("to")
    if isinstance(to, str):                         # opset 1 names the type
        to = _TYPE_NAMES.get(to.upper(), -1)
    to = data_type(int(to), f"the target type of {node.label}")
    return [_cast_to(b, _x(b, node), to)]


@_register("CastLike")
def _cast_like(b, node):
    return [_cast_to(b, _x(b, node), b.dtype(node.inputs[1]))]


@_register("Dropout")
def _dropout(b, node):
    x = _x(b, node)
    if node.opset < 7 and not node.attr("is_test", 0):
        raise OnnxUnsupported("is_test=0: training mode (random) is not mapped")
    if node.opset >= 12 and node.input(2):
        training = bool(np.asarray(b.value(node.inputs[2], f"the training_mode of {node.label}")).reshape(-1)[0])
        if training and (not node.input(1) or
                         float(np.asarray(b.value(node.inputs[1], f"the ratio of {node.label}")).reshape(-1)[0])):
            raise OnnxUnsupported("training mode (random) is not mapped")
    return [x, np.ones(x.shape, bool)][:len(node.outputs)]


@_register("Shape")
def _shape(b, node):
    shape = b.shape(node.inputs[0])
    start, end = int(node.attr("start", 0)), node.attr("end")
    return [np.asarray(shape[slice(start, None if end is None else int(end))], np.int64)]


@_register("Size")
def _size(b, node):
    return [np.asarray(math.prod(b.shape(node.inputs[0])), np.int64)]


@_register("ConstantOfShape")
def _constant_of_shape(b, node):
    import onnx
    shape = _ints(b.value(node.inputs[0], f"the shape of {node.label}"))
    value = node.attr("value")
    fill = np.zeros(1, np.float32) if value is None else onnx.numpy_helper.to_array(value).reshape(-1)
    return [np.broadcast_to(fill[:1].reshape(()), shape)]      # a view: bound (copied) once, if used

