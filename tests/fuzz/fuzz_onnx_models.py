"""Seeded generators of small ONNX models built with ``onnx.helper``: valid ones of many op
types with random shapes and attributes (their outputs must equal onnxruntime's), and wrong ones
on purpose (bad input/output counts, attributes out of range, contradicting shapes, bad
initializers, unknown ops and domains, huge shapes, ...), which must be refused cleanly.

Every generator takes a ``numpy.random.Generator`` and returns ``(description, ModelProto)``;
``MODEL_GENERATORS`` lists them, valid and wrong ones interleaved.

Example:
    >>> import numpy as np
    >>> description, model = softmax_model(np.random.default_rng(0))
    >>> description.startswith("valid: Softmax") or description.startswith("valid: LogSoftmax")
    True
"""
from __future__ import annotations

import math

import numpy as np
from onnx import AttributeProto, TensorProto, helper, numpy_helper

FLOAT, INT64, INT32, BOOL, DOUBLE = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL, \
    TensorProto.DOUBLE
HUGE = 10 ** 6          # a dim; two of them make 10^12 elements


# ---------------------------------------------------------------------------- building blocks

def value_info(name: str, shape, elem: int = FLOAT):
    """A tensor ValueInfoProto (``shape`` None: rank unknown).

    Example:
        >>> value_info("x", [2, 3]).type.tensor_type.elem_type
        1
    """
    return helper.make_tensor_value_info(name, elem, None if shape is None else list(shape))


def initializer(name: str, array):
    """A TensorProto initializer holding ``array``.

    Example:
        >>> initializer("w", np.ones((2,), np.float32)).dims
        [2]
    """
    return numpy_helper.from_array(np.asarray(array), name)


def onnx_model(nodes, inputs, outputs, initializers=(), opset: int = 17, domains=(), value_infos=(),
               sparse=()):
    """A ModelProto of graph ``fuzz`` importing the default opset ``opset`` and ``domains``
    ((domain, version) pairs).

    Example:
        >>> m = onnx_model([helper.make_node("Relu", ["x"], ["y"])], [value_info("x", [2])], [value_info("y", [2])])
        >>> m.graph.name, m.opset_import[0].version
        ('fuzz', 17)
    """
    graph = helper.make_graph(list(nodes), "fuzz", list(inputs), list(outputs), list(initializers),
                              value_info=list(value_infos), sparse_initializer=list(sparse))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in domains]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = min(model.ir_version, 8)     # onnxruntime of this venv reads IR 8 and 9
    return model


def node(op_type: str, inputs, outputs, **attrs):
    """``helper.make_node`` (None attributes are left out).

    Example:
        >>> node("Softmax", ["x"], ["y"], axis=None).attribute
        []
    """
    return helper.make_node(op_type, list(inputs), list(outputs), **{k: v for k, v in attrs.items() if v is not None})


def rand_shape(rng, rank: int, low: int = 1, high: int = 5) -> list:
    """``rank`` dims in [low, high].

    Example:
        >>> len(rand_shape(np.random.default_rng(0), 3))
        3
    """
    return [int(d) for d in rng.integers(low, high + 1, size=rank)]


def floats(rng, shape, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    """Uniform float32 values of ``shape``.

    Example:
        >>> floats(np.random.default_rng(0), (2, 3)).dtype
        dtype('float32')
    """
    return rng.uniform(low, high, size=tuple(shape)).astype(np.float32)


def pick(rng, options):
    """One of ``options`` (any objects, not only numbers).

    Example:
        >>> pick(np.random.default_rng(0), ["a"])
        'a'
    """
    return options[int(rng.integers(len(options)))]


def _one_op(op_type, shape, attrs=None, opset=17, extra_inputs=(), out_elem=FLOAT, out_shape=None):
    """A model of one node on input ``x`` of ``shape`` and initializers ``extra_inputs``
    ((name, array) pairs; array None: an absent optional input), output ``y``."""
    names = ["x"] + [name if array is not None else "" for name, array in extra_inputs]
    while names[-1] == "":
        names.pop()
    inits = [initializer(name, array) for name, array in extra_inputs if array is not None]
    return onnx_model([node(op_type, names, ["y"], **(attrs or {}))], [value_info("x", shape)],
                      [value_info("y", out_shape, out_elem)], inits, opset)


# ---------------------------------------------------------------------------- valid models

UNARY_OPS = {"Relu": {}, "Sigmoid": {}, "Tanh": {}, "Exp": {}, "Abs": {}, "Neg": {}, "Erf": {}, "Softplus": {},
             "HardSwish": {}, "Sqrt": {}, "Log": {}, "Reciprocal": {}, "Round": {}, "Identity": {},
             "Elu": {"alpha": 0.7}, "LeakyRelu": {"alpha": 0.2}, "HardSigmoid": {"alpha": 0.3, "beta": 0.4},
             "Softsign": {}, "Celu": {"alpha": 1.5}, "ThresholdedRelu": {"alpha": 0.25}, "Sign": {}, "Floor": {},
             "Ceil": {}, "Shrink": {"lambd": 0.3, "bias": 0.1}}


def unary_model(rng):
    """A valid elementwise op (Relu, Sigmoid, ... and some ops tilefuse runs as Wildcards)
    on a random shape.

    Example:
        >>> unary_model(np.random.default_rng(1))[0].startswith("valid: ")
        True
    """
    op = pick(rng, sorted(UNARY_OPS))
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    return f"valid: {op} on {shape}", _one_op(op, shape, UNARY_OPS[op], opset=13)


def binary_model(rng):
    """A valid broadcasting binary op (Add, Sub, Mul, Div, Max, Min, Pow, PRelu), the second
    operand an initializer or an input.

    Example:
        >>> binary_model(np.random.default_rng(2))[0].startswith("valid: ")
        True
    """
    op = pick(rng, ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "PRelu"])
    a = rand_shape(rng, int(rng.integers(1, 5)))
    b = [d if rng.random() < 0.6 else 1 for d in a[len(a) - int(rng.integers(1, len(a) + 1)):]]
    if op != "PRelu" and rng.random() < 0.3:
        a, b = b, a
    as_input = rng.random() < 0.5
    out = value_info("y", None)
    if as_input:
        model = onnx_model([node(op, ["a", "b"], ["y"])], [value_info("a", a), value_info("b", b)], [out], opset=13)
    else:
        model = onnx_model([node(op, ["a", "b"], ["y"])], [value_info("a", a)], [out],
                           [initializer("b", floats(rng, b, 0.1, 2.0))], opset=13)
    return f"valid: {op} of {a} and {b} ({'input' if as_input else 'initializer'})", model


def conv_model(rng):
    """A valid Conv (1-D or 2-D, groups, strides, dilations, pads or auto_pad, optional bias).

    Example:
        >>> conv_model(np.random.default_rng(3))[0].startswith("valid: Conv")
        True
    """
    spatial = 2 if rng.random() < 0.8 else 1
    group = pick(rng, [1, 1, 2])
    cin, cout = group * int(rng.integers(1, 3)), group * int(rng.integers(1, 3))
    kernel = rand_shape(rng, spatial, 1, 3)
    dilations = rand_shape(rng, spatial, 1, 2)
    strides = rand_shape(rng, spatial, 1, 2)
    sizes = [int(rng.integers((k - 1) * d + 1, 9)) for k, d in zip(kernel, dilations)]
    auto_pad = pick(rng, ["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
    pads = None
    if auto_pad == "NOTSET":
        pads = [int(rng.integers(0, k)) for k in kernel] + [int(rng.integers(0, k)) for k in kernel]
    inits = [initializer("w", floats(rng, [cout, cin // group] + kernel))]
    names = ["x", "w"]
    if rng.random() < 0.5:
        inits.append(initializer("b", floats(rng, [cout])))
        names.append("b")
    attrs = dict(kernel_shape=kernel, strides=strides, dilations=dilations, group=group,
                 pads=pads, auto_pad=None if auto_pad == "NOTSET" else auto_pad)
    model = onnx_model([node("Conv", names, ["y"], **attrs)], [value_info("x", [1, cin] + sizes)],
                       [value_info("y", None)], inits, opset=13)
    return f"valid: Conv of [1, {cin}, {sizes}] {attrs}", model


def pool_model(rng):
    """A valid MaxPool or AveragePool (kernel, strides, pads, ceil_mode, count_include_pad,
    dilations).

    Example:
        >>> pool_model(np.random.default_rng(4))[0].startswith("valid: ")
        True
    """
    op = pick(rng, ["MaxPool", "AveragePool"])
    kernel = rand_shape(rng, 2, 1, 3)
    dilations = rand_shape(rng, 2, 1, 2) if op == "MaxPool" and rng.random() < 0.3 else None
    eff = [(k - 1) * (dilations[i] if dilations else 1) + 1 for i, k in enumerate(kernel)]
    sizes = [int(rng.integers(e, 9)) for e in eff]
    pads = [int(rng.integers(0, k)) for k in kernel] * 2
    attrs = dict(kernel_shape=kernel, strides=rand_shape(rng, 2, 1, 2), pads=pads,
                 ceil_mode=int(rng.integers(0, 2)), dilations=dilations,
                 count_include_pad=int(rng.integers(0, 2)) if op == "AveragePool" else None)
    return f"valid: {op} of [1, 2, {sizes}] {attrs}", _one_op(op, [1, 2] + sizes, attrs, opset=13)


def softmax_model(rng):
    """A valid Softmax or LogSoftmax along a random axis.

    Example:
        >>> softmax_model(np.random.default_rng(5))[0].startswith("valid: ")
        True
    """
    op = pick(rng, ["Softmax", "LogSoftmax"])
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    axis = int(rng.integers(-len(shape), len(shape)))
    return f"valid: {op} axis={axis} of {shape}", _one_op(op, shape, {"axis": axis}, opset=13)


def matmul_model(rng):
    """A valid MatMul (1-D, 2-D or batched; B an initializer or an input).

    Example:
        >>> matmul_model(np.random.default_rng(6))[0].startswith("valid: MatMul")
        True
    """
    m, k, n = rand_shape(rng, 3, 1, 6)
    batch = rand_shape(rng, int(rng.integers(0, 3)), 1, 3)
    a = pick(rng, [[k], batch + [m, k]])
    b = pick(rng, [[k], [k, n], batch[-1:] + [k, n]])
    if len(a) == 1 and len(b) == 1:
        b = [k, n]
    inputs = [value_info("a", a)]
    if rng.random() < 0.5:
        inputs.append(value_info("b", b))
        inits = []
    else:
        inits = [initializer("b", floats(rng, b))]
    return f"valid: MatMul of {a} and {b}", onnx_model([node("MatMul", ["a", "b"], ["y"])], inputs,
                                                          [value_info("y", None)], inits, opset=13)


def gemm_model(rng):
    """A valid Gemm with transA/transB, alpha, beta and a broadcast C.

    Example:
        >>> gemm_model(np.random.default_rng(7))[0].startswith("valid: Gemm")
        True
    """
    m, k, n = rand_shape(rng, 3, 1, 6)
    trans_a, trans_b = int(rng.integers(0, 2)), int(rng.integers(0, 2))
    a = [k, m] if trans_a else [m, k]
    b = [n, k] if trans_b else [k, n]
    c = pick(rng, [None, [n], [1, n], [m, 1], [m, n], []])
    inits = [initializer("b", floats(rng, b))]
    names = ["a", "b"]
    if c is not None:
        inits.append(initializer("c", floats(rng, c)))
        names.append("c")
    attrs = dict(transA=trans_a, transB=trans_b, alpha=float(rng.uniform(0.5, 2)), beta=float(rng.uniform(0.5, 2)))
    model = onnx_model([node("Gemm", names, ["y"], **attrs)], [value_info("a", a)], [value_info("y", None)], inits,
                       opset=13)
    return f"valid: Gemm a={a} b={b} c={c} {attrs}", model


def concat_model(rng):
    """A valid Concat of 2 or 3 inputs along a random (maybe negative) axis.

    Example:
        >>> concat_model(np.random.default_rng(8))[0].startswith("valid: Concat")
        True
    """
    rank = int(rng.integers(1, 5))
    base = rand_shape(rng, rank)
    axis = int(rng.integers(-rank, rank))
    shapes = []
    for _ in range(int(rng.integers(2, 4))):
        shape = list(base)
        shape[axis] = int(rng.integers(1, 4))
        shapes.append(shape)
    names = [f"x{i}" for i in range(len(shapes))]
    model = onnx_model([node("Concat", names, ["y"], axis=axis)], [value_info(n, s) for n, s in zip(names, shapes)],
                       [value_info("y", None)], opset=13)
    return f"valid: Concat axis={axis} of {shapes}", model


def _divisors(n: int) -> list:
    return [d for d in range(1, n + 1) if n % d == 0]


def reshape_model(rng):
    """A valid Reshape to a random factorization (with 0 and -1 entries).

    Example:
        >>> reshape_model(np.random.default_rng(9))[0].startswith("valid: Reshape")
        True
    """
    shape = rand_shape(rng, int(rng.integers(1, 4)))
    total = math.prod(shape)
    first = pick(rng, _divisors(total))
    target = pick(rng, [[-1], [first, -1], [-1, first], [first, total // first]])
    if rng.random() < 0.3 and shape[0] in (first,):
        target = [0] + target[1:]
    model = _one_op("Reshape", shape, opset=13, extra_inputs=[("shape", np.array(target, np.int64))])
    return f"valid: Reshape {shape} to {target}", model


def transpose_model(rng):
    """A valid Transpose (random perm, or the default reversal).

    Example:
        >>> transpose_model(np.random.default_rng(10))[0].startswith("valid: Transpose")
        True
    """
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    perm = None if rng.random() < 0.2 else [int(p) for p in rng.permutation(len(shape))]
    return f"valid: Transpose {shape} perm={perm}", _one_op("Transpose", shape, {"perm": perm}, opset=13)


def reduce_model(rng):
    """A valid reduction (Mean, Sum, Max, Min, L1, L2, Prod, SumSquare, LogSumExp) over random
    axes, keepdims 0 or 1, axes as attribute (opset 13) or input (opset 18).

    Example:
        >>> reduce_model(np.random.default_rng(11))[0].startswith("valid: Reduce")
        True
    """
    op = pick(rng, ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceL2", "ReduceProd",
                    "ReduceSumSquare", "ReduceLogSumExp"])
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    count = int(rng.integers(0, len(shape) + 1))
    axes = sorted(int(a) for a in rng.choice(len(shape), size=count, replace=False))
    axes = [a - len(shape) if rng.random() < 0.3 else a for a in axes]
    keepdims = int(rng.integers(0, 2))
    opset = pick(rng, [13, 18])
    if opset == 18 or op == "ReduceSum":
        extra = [("axes", np.array(axes, np.int64) if axes else None)]
        model = _one_op(op, shape, {"keepdims": keepdims}, opset=opset, extra_inputs=extra)
    else:
        model = _one_op(op, shape, {"keepdims": keepdims, "axes": axes or None}, opset=opset)
    return f"valid: {op} axes={axes} keepdims={keepdims} of {shape} (opset {opset})", model


def layernorm_model(rng):
    """A valid LayerNormalization along a random axis, with or without bias.

    Example:
        >>> layernorm_model(np.random.default_rng(12))[0].startswith("valid: LayerNormalization")
        True
    """
    shape = rand_shape(rng, int(rng.integers(1, 5)), 1, 6)
    axis = int(rng.integers(-len(shape), len(shape)))
    normalized = shape[axis:]
    extra = [("scale", floats(rng, normalized, 0.5, 1.5))]
    if rng.random() < 0.5:
        extra.append(("bias", floats(rng, normalized)))
    model = _one_op("LayerNormalization", shape, {"axis": axis, "epsilon": 1e-5}, opset=17, extra_inputs=extra)
    return f"valid: LayerNormalization axis={axis} of {shape}", model


def batchnorm_model(rng):
    """A valid BatchNormalization (inference) on [N, C] or [N, C, H, W].

    Example:
        >>> batchnorm_model(np.random.default_rng(13))[0].startswith("valid: BatchNormalization")
        True
    """
    c = int(rng.integers(1, 5))
    shape = pick(rng, [[2, c], [1, c, 3, 4], [2, c, 2]])
    extra = [("scale", floats(rng, [c])), ("bias", floats(rng, [c])), ("mean", floats(rng, [c])),
             ("var", floats(rng, [c], 0.5, 2.0))]
    model = _one_op("BatchNormalization", shape, {"epsilon": float(rng.uniform(1e-5, 1e-2))}, opset=15,
                    extra_inputs=extra)
    return f"valid: BatchNormalization of {shape}", model


def resize_model(rng):
    """A valid Resize (nearest, linear or cubic; by scales or sizes; a random coordinate
    transformation and nearest mode).

    Example:
        >>> resize_model(np.random.default_rng(14))[0].startswith("valid: Resize")
        True
    """
    shape = [1, int(rng.integers(1, 3))] + rand_shape(rng, 2, 2, 5)
    mode = pick(rng, ["nearest", "nearest", "linear", "cubic"])
    attrs = {"mode": mode,
             "coordinate_transformation_mode": pick(rng, ["half_pixel", "asymmetric", "align_corners",
                                                          "pytorch_half_pixel"]),
             "nearest_mode": pick(rng, ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
             if mode == "nearest" else None}
    if rng.random() < 0.5:
        scales = [1.0, 1.0] + [float(pick(rng, [0.5, 1.5, 2.0, 3.0])) for _ in range(2)]
        extra = [("roi", None), ("scales", np.array(scales, np.float32))]
        what = f"scales={scales}"
    else:
        sizes = shape[:2] + rand_shape(rng, 2, 1, 8)
        extra = [("roi", None), ("scales", None), ("sizes", np.array(sizes, np.int64))]
        what = f"sizes={sizes}"
    return f"valid: Resize {shape} {what} {attrs}", _one_op("Resize", shape, attrs, opset=13, extra_inputs=extra)


def slice_model(rng):
    """A valid Slice with random starts, ends, axes and steps (negative and clamped ones too).

    Example:
        >>> slice_model(np.random.default_rng(15))[0].startswith("valid: Slice")
        True
    """
    shape = rand_shape(rng, int(rng.integers(1, 4)), 2, 6)
    axes = sorted(int(a) for a in rng.choice(len(shape), size=int(rng.integers(1, len(shape) + 1)), replace=False))
    steps = [int(pick(rng, [1, 1, 2, -1, -2])) for _ in axes]
    starts, ends = [], []
    for a, step in zip(axes, steps):
        d = shape[a]
        if step > 0:
            starts.append(int(rng.integers(-d, d)))
            ends.append(int(pick(rng, [d, d + 5, int(rng.integers(-d, d + 1)), 2 ** 62])))
        else:
            starts.append(int(pick(rng, [d - 1, -1, d + 3])))
            ends.append(int(pick(rng, [-d - 1, 0, -(2 ** 62)])))
    extra = [("starts", np.array(starts, np.int64)), ("ends", np.array(ends, np.int64)),
             ("axes", np.array(axes, np.int64)), ("steps", np.array(steps, np.int64))]
    return f"valid: Slice {shape} starts={starts} ends={ends} axes={axes} steps={steps}", \
        _one_op("Slice", shape, opset=13, extra_inputs=extra)


def pad_model(rng):
    """A valid Pad (constant, reflect or edge; small pads, negative ones for constant).

    Example:
        >>> pad_model(np.random.default_rng(16))[0].startswith("valid: Pad")
        True
    """
    shape = rand_shape(rng, int(rng.integers(1, 4)), 2, 5)
    mode = pick(rng, ["constant", "reflect", "edge"])
    low = -1 if mode == "constant" else 0
    pads = [int(rng.integers(low, min(d - 1, 2) + 1)) for d in shape] * 2
    extra = [("pads", np.array(pads, np.int64))]
    if mode == "constant":
        extra.append(("value", np.array(float(rng.uniform(-1, 1)), np.float32)))
    return f"valid: Pad {shape} {mode} pads={pads}", _one_op("Pad", shape, {"mode": mode}, opset=13,
                                                             extra_inputs=extra)


def gather_model(rng):
    """A valid Gather of constant indices (negative ones too) along a random axis.

    Example:
        >>> gather_model(np.random.default_rng(17))[0].startswith("valid: Gather")
        True
    """
    shape = rand_shape(rng, int(rng.integers(1, 4)))
    axis = int(rng.integers(-len(shape), len(shape)))
    d = shape[axis]
    indices = rng.integers(-d, d, size=rand_shape(rng, int(rng.integers(0, 3)), 1, 3)).astype(np.int64)
    return f"valid: Gather axis={axis} of {shape} indices {indices.tolist()}", \
        _one_op("Gather", shape, {"axis": axis}, opset=13, extra_inputs=[("indices", indices)])


def split_model(rng):
    """A valid Split into 1 to 3 parts of random sizes.

    Example:
        >>> split_model(np.random.default_rng(18))[0].startswith("valid: Split")
        True
    """
    shape = rand_shape(rng, int(rng.integers(1, 4)), 1, 6)
    axis = int(rng.integers(-len(shape), len(shape)))
    d = shape[axis]
    parts = int(rng.integers(1, min(d, 3) + 1))
    cuts = sorted(int(c) for c in rng.choice(np.arange(1, d), size=parts - 1, replace=False)) if parts > 1 else []
    sizes = [b - a for a, b in zip([0] + cuts, cuts + [d])]
    outs = [f"y{i}" for i in range(parts)]
    model = onnx_model([node("Split", ["x", "split"], outs, axis=axis)], [value_info("x", shape)],
                       [value_info(o, None) for o in outs], [initializer("split", np.array(sizes, np.int64))],
                       opset=13)
    return f"valid: Split {shape} axis={axis} sizes={sizes}", model


def clip_where_cast_model(rng):
    """A valid Clip (constant bounds), Where (a bool input) or Cast (to int32, int64, float16,
    bool).

    Example:
        >>> clip_where_cast_model(np.random.default_rng(19))[0].startswith("valid: ")
        True
    """
    shape = rand_shape(rng, int(rng.integers(1, 4)))
    which = pick(rng, ["Clip", "Where", "Cast"])
    if which == "Clip":
        lo, hi = sorted(float(v) for v in rng.uniform(-1, 1, 2))
        extra = [("lo", np.array(lo, np.float32) if rng.random() < 0.8 else None), ("hi", np.array(hi, np.float32))]
        return f"valid: Clip {shape} [{lo}, {hi}]", _one_op("Clip", shape, opset=13, extra_inputs=extra)
    if which == "Where":
        cond = shape[-1:]
        model = onnx_model([node("Where", ["c", "x", "z"], ["y"])],
                           [value_info("c", cond, BOOL), value_info("x", shape)], [value_info("y", None)],
                           [initializer("z", floats(rng, [1]))], opset=13)
        return f"valid: Where cond {cond} of {shape}", model
    to = pick(rng, [INT32, INT64, TensorProto.FLOAT16, BOOL])
    return f"valid: Cast {shape} to {TensorProto.DataType.Name(to)}", _one_op("Cast", shape, {"to": to}, opset=13,
                                                                              out_elem=to)


def shape_ops_model(rng):
    """A valid Flatten, Squeeze, Unsqueeze, Expand or Tile.

    Example:
        >>> shape_ops_model(np.random.default_rng(20))[0].startswith("valid: ")
        True
    """
    which = pick(rng, ["Flatten", "Squeeze", "Unsqueeze", "Expand", "Tile"])
    shape = rand_shape(rng, int(rng.integers(1, 4)))
    if which == "Flatten":
        axis = int(rng.integers(-len(shape), len(shape) + 1))
        return f"valid: Flatten axis={axis} of {shape}", _one_op("Flatten", shape, {"axis": axis}, opset=13)
    if which == "Squeeze":
        shape = shape + [1]
        return f"valid: Squeeze {shape} axes=[-1]", _one_op("Squeeze", shape, opset=13,
                                                            extra_inputs=[("axes", np.array([-1], np.int64))])
    if which == "Unsqueeze":
        axes = sorted({int(rng.integers(0, len(shape) + 1)), 0})
        return f"valid: Unsqueeze {shape} axes={axes}", _one_op("Unsqueeze", shape, opset=13,
                                                                extra_inputs=[("axes", np.array(axes, np.int64))])
    if which == "Expand":
        shape = [1 if rng.random() < 0.5 else d for d in shape]
        target = [int(rng.integers(1, 4))] + [int(rng.integers(1, 4)) if d == 1 else d for d in shape]
        return f"valid: Expand {shape} to {target}", _one_op("Expand", shape, opset=13,
                                                             extra_inputs=[("shape", np.array(target, np.int64))])
    repeats = rand_shape(rng, len(shape), 1, 3)
    return f"valid: Tile {shape} repeats={repeats}", _one_op("Tile", shape, opset=13,
                                                             extra_inputs=[("repeats", np.array(repeats, np.int64))])


def misc_ops_model(rng):
    """A valid GlobalAveragePool, GlobalMaxPool, LRN, InstanceNormalization, ConvTranspose,
    Hardmax, ArgMax, CumSum, Gelu or Mish (some of them Wildcards in tilefuse).

    Example:
        >>> misc_ops_model(np.random.default_rng(21))[0].startswith("valid: ")
        True
    """
    which = pick(rng, ["GlobalAveragePool", "GlobalMaxPool", "LRN", "InstanceNormalization", "ConvTranspose",
                       "Hardmax", "ArgMax", "CumSum", "Gelu", "Mish"])
    c = int(rng.integers(1, 4))
    image = [1, c] + rand_shape(rng, 2, 2, 5)
    if which in ("GlobalAveragePool", "GlobalMaxPool"):
        return f"valid: {which} of {image}", _one_op(which, image, opset=13)
    if which == "LRN":
        size = int(pick(rng, [1, 3, 5]))
        return f"valid: LRN size={size} of {image}", _one_op("LRN", image, {"size": size, "alpha": 0.01,
                                                                             "beta": 0.7, "bias": 1.2}, opset=13)
    if which == "InstanceNormalization":
        extra = [("scale", floats(rng, [c])), ("bias", floats(rng, [c]))]
        return f"valid: InstanceNormalization of {image}", _one_op(which, image, opset=13, extra_inputs=extra)
    if which == "ConvTranspose":
        kernel = rand_shape(rng, 2, 1, 3)
        strides = rand_shape(rng, 2, 1, 2)
        extra = [("w", floats(rng, [c, 2] + kernel))]
        attrs = {"kernel_shape": kernel, "strides": strides}
        return f"valid: ConvTranspose of {image} {attrs}", _one_op(which, image, attrs, opset=13, extra_inputs=extra)
    shape = rand_shape(rng, int(rng.integers(1, 4)))
    axis = int(rng.integers(-len(shape), len(shape)))
    if which == "Hardmax":
        return f"valid: Hardmax axis={axis} of {shape}", _one_op("Hardmax", shape, {"axis": axis}, opset=13)
    if which == "ArgMax":
        attrs = {"axis": axis, "keepdims": int(rng.integers(0, 2))}
        return f"valid: ArgMax {attrs} of {shape}", _one_op("ArgMax", shape, attrs, opset=13, out_elem=INT64)
    if which == "CumSum":
        extra = [("axis", np.array(axis, np.int64))]
        attrs = {"exclusive": int(rng.integers(0, 2)), "reverse": int(rng.integers(0, 2))}
        return f"valid: CumSum axis={axis} {attrs} of {shape}", _one_op("CumSum", shape, attrs, opset=13,
                                                                       extra_inputs=extra)
    if which == "Gelu":
        attrs = {"approximate": pick(rng, ["none", "tanh"])}
        return f"valid: Gelu {attrs} of {shape}", _one_op("Gelu", shape, attrs, opset=20)
    return f"valid: Mish of {shape}", _one_op("Mish", shape, opset=18)


CHAIN_UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Sqrt", "Erf"]
CHAIN_BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min"]


def chain_model(rng):
    """A valid chain of 2 to 5 ops (elementwise ops with constants, MatMul, Softmax, a
    reduction, a Transpose) that tilefuse fuses into partitions.

    Example:
        >>> chain_model(np.random.default_rng(22))[0].startswith("valid: chain")
        True
    """
    shape = rand_shape(rng, 2, 1, 6)
    first_shape = list(shape)
    nodes, inits, ops, current = [], [], [], "x"
    for k in range(int(rng.integers(2, 6))):
        kind = pick(rng, ["unary", "binary", "binary", "matmul", "softmax", "reduce", "transpose"])
        out = f"t{k}"
        if kind == "unary":
            op = pick(rng, CHAIN_UNARY)
            nodes.append(node(op, [current], [out]))
        elif kind == "binary":
            op = pick(rng, CHAIN_BINARY)
            const = floats(rng, [d if rng.random() < 0.5 else 1 for d in shape], 0.5, 1.5)
            inits.append(initializer(f"c{k}", const))
            nodes.append(node(op, [current, f"c{k}"], [out]))
            op = f"{op}{list(const.shape)}"
        elif kind == "matmul":
            n = int(rng.integers(1, 6))
            inits.append(initializer(f"w{k}", floats(rng, [shape[-1], n])))
            nodes.append(node("MatMul", [current, f"w{k}"], [out]))
            shape, op = shape[:-1] + [n], f"MatMul[{n}]"
        elif kind == "softmax":
            nodes.append(node("Softmax", [current], [out], axis=-1))
            op = "Softmax"
        elif kind == "reduce":
            nodes.append(node("ReduceMean", [current], [out], axes=[-1], keepdims=1))
            shape, op = shape[:-1] + [1], "ReduceMean"
        else:
            nodes.append(node("Transpose", [current], [out], perm=[1, 0]))
            shape, op = shape[::-1], "Transpose"
        ops.append(op)
        current = out
    nodes[-1].output[0] = "y"
    model = onnx_model(nodes, [value_info("x", first_shape)], [value_info("y", None)], inits, opset=13)
    return f"valid: chain {' -> '.join(ops)} from {first_shape}", model


class _DagBuilder:
    """The random DAG ``dag_model`` grows: tensors by name with their shapes, nodes and
    initializers."""

    def __init__(self, rng):
        self.rng, self.nodes, self.inits, self.shapes, self.ops = rng, [], [], {}, []

    def fresh(self, shape) -> str:
        name = f"t{len(self.shapes)}"
        self.shapes[name] = list(shape)
        return name

    def const(self, array) -> str:
        name = f"c{len(self.inits)}"
        self.inits.append(initializer(name, array))
        return name

    def emit(self, op, inputs, shape, label=None, **attrs) -> str:
        out = self.fresh(shape)
        self.nodes.append(node(op, inputs, [out], **attrs))
        self.ops.append(label or op)
        return out


def _dag_step(b: _DagBuilder, pool: list) -> str:
    """One random op on tensors of ``pool``; returns its output."""
    rng = b.rng
    x = pool[int(rng.integers(len(pool)))]
    shape = b.shapes[x]
    rank = len(shape)
    kinds = ["unary", "unary", "binary", "binary", "matmul", "transpose", "reduce", "softmax", "concat", "slice",
             "reshape", "layernorm", "gather", "pad", "clip", "where"]
    if rank == 4:
        kinds += ["conv", "conv", "pool", "batchnorm"]
    kind = pick(rng, kinds)
    if kind == "unary":
        op = pick(rng, ["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Erf", "Softplus", "LeakyRelu", "HardSigmoid",
                        "Elu", "Exp", "HardSwish", "Softsign"])
        return b.emit(op, [x], shape)
    if kind == "binary":
        op = pick(rng, ["Add", "Sub", "Mul", "Max", "Min", "Div"])
        same = [t for t in pool if b.shapes[t] == shape and t != x]
        if same and rng.random() < 0.5:
            other = pick(rng, same)
        else:
            cshape = [d if rng.random() < 0.5 else 1 for d in shape][int(rng.integers(0, rank)):]
            other = b.const(floats(rng, cshape, 0.5, 1.5))
        return b.emit(op, [x, other], shape, f"{op}")
    if kind == "matmul":
        n = int(rng.integers(1, 6))
        return b.emit("MatMul", [x, b.const(floats(rng, [shape[-1], n], -0.5, 0.5))], shape[:-1] + [n], f"MatMul{n}")
    if kind == "transpose":
        perm = [int(p) for p in rng.permutation(rank)]
        return b.emit("Transpose", [x], [shape[p] for p in perm], f"Transpose{perm}", perm=perm)
    if kind == "reduce":
        op = pick(rng, ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"])
        axis, keep = int(rng.integers(-rank, rank)), int(rng.integers(0, 2))
        if rank == 1:
            keep = 1
        out = [d for k, d in enumerate(shape) if k != axis % rank] if not keep else \
            [1 if k == axis % rank else d for k, d in enumerate(shape)]
        if op == "ReduceSum":          # axes became an input in opset 13
            return b.emit(op, [x, b.const(np.array([axis], np.int64))], out, f"{op}[{axis},{keep}]", keepdims=keep)
        return b.emit(op, [x], out, f"{op}[{axis},{keep}]", axes=[axis], keepdims=keep)
    if kind == "softmax":
        axis = int(rng.integers(-rank, rank))
        return b.emit(pick(rng, ["Softmax", "LogSoftmax"]), [x], shape, f"Softmax[{axis}]", axis=axis)
    if kind == "concat":
        axis = int(rng.integers(-rank, rank))
        same = [t for t in pool if len(b.shapes[t]) == rank and all(
            d == e for k, (d, e) in enumerate(zip(b.shapes[t], shape)) if k != axis % rank)]
        other = pick(rng, same)
        out = list(shape)
        out[axis] += b.shapes[other][axis]
        return b.emit("Concat", [x, other], out, f"Concat[{axis}]", axis=axis)
    if kind == "slice":
        axis = int(rng.integers(rank))
        d = shape[axis]
        start = int(rng.integers(0, d))
        end = int(rng.integers(start + 1, d + 1))
        out = list(shape)
        out[axis] = end - start
        names = [x, b.const(np.array([start], np.int64)), b.const(np.array([end], np.int64)),
                 b.const(np.array([axis], np.int64))]
        return b.emit("Slice", names, out, f"Slice[{axis}:{start}:{end}]")
    if kind == "reshape":
        total = math.prod(shape)
        target = pick(rng, [[total], [shape[0], -1], [-1, shape[-1]]])
        out = [total // (math.prod(d for d in target if d != -1) or 1) if d == -1 else d for d in target]
        return b.emit("Reshape", [x, b.const(np.array(target, np.int64))], out, f"Reshape{target}")
    if kind == "layernorm":
        return b.emit("LayerNormalization", [x, b.const(floats(rng, shape[-1:], 0.5, 1.5)),
                                             b.const(floats(rng, shape[-1:]))], shape, axis=-1)
    if kind == "gather":
        axis = int(rng.integers(rank))
        idx = rng.integers(-shape[axis], shape[axis], size=int(rng.integers(1, 4))).astype(np.int64)
        out = shape[:axis] + [len(idx)] + shape[axis + 1:]
        return b.emit("Gather", [x, b.const(idx)], out, f"Gather[{axis}]", axis=axis)
    if kind == "pad":
        pads = [int(rng.integers(0, 2)) for _ in range(2 * rank)]
        out = [d + pads[k] + pads[k + rank] for k, d in enumerate(shape)]
        mode = pick(rng, ["constant", "edge"])
        return b.emit("Pad", [x, b.const(np.array(pads, np.int64))], out, f"Pad[{mode}]", mode=mode)
    if kind == "clip":
        return b.emit("Clip", [x, b.const(np.array(-0.5, np.float32)), b.const(np.array(0.7, np.float32))], shape)
    if kind == "where":
        cond = b.emit("Greater", [x, b.const(np.array(0.1, np.float32))], shape)
        b.shapes[cond] = shape
        return b.emit("Where", [cond, x, b.const(floats(rng, shape[-1:]))], shape)
    if kind == "conv":
        cout, k = int(rng.integers(1, 5)), int(pick(rng, [1, 3]))
        w = b.const(floats(rng, [cout, shape[1], k, k], -0.5, 0.5))
        return b.emit("Conv", [x, w, b.const(floats(rng, [cout]))], [shape[0], cout] + shape[2:], f"Conv{k}x{k}",
                      kernel_shape=[k, k], pads=[k // 2] * 4)
    if kind == "pool":
        op = pick(rng, ["MaxPool", "AveragePool"])
        return b.emit(op, [x], shape, op, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    c = shape[1]
    return b.emit("BatchNormalization", [x, b.const(floats(rng, [c])), b.const(floats(rng, [c])),
                                         b.const(floats(rng, [c])), b.const(floats(rng, [c], 0.5, 2.0))], shape)


def dag_model(rng):
    """A valid random graph of 3 to 9 ops on one or two inputs of rank 2 to 4, tensors used
    more than once (residuals, concats), one or two outputs: what tilefuse fuses, partitions and
    compiles together, mixed with Wildcards (Greater).

    Example:
        >>> dag_model(np.random.default_rng(3))[0].startswith("valid DAG: ")
        True
    """
    b = _DagBuilder(rng)
    rank = int(rng.integers(2, 5))
    shape = rand_shape(rng, rank, 1, 5)
    inputs = [b.fresh(shape)]
    if rng.random() < 0.4:
        inputs.append(b.fresh(shape))
    pool = list(inputs)
    for _ in range(int(rng.integers(3, 10))):
        pool.append(_dag_step(b, pool))
    outputs = [pool[-1]] + ([pool[int(rng.integers(len(inputs), len(pool) - 1))]] if rng.random() < 0.4 and
                            len(pool) > len(inputs) + 1 else [])
    folded = rng.random() < 0.3           # input 0 an initializer: what depends on it alone folds at import
    if folded:
        b.inits.append(initializer(inputs[0], floats(rng, shape)))
    model = onnx_model(b.nodes, [value_info(n, shape) for n in inputs[folded:]],
                       [value_info(n, None) for n in outputs], b.inits, opset=17)
    what = "folded at import from an initializer" if folded else f"on {len(inputs)} input(s)"
    return f"valid DAG: {' -> '.join(b.ops)} {what} {shape}", model


def zero_size_model(rng):
    """A valid model whose input has a zero-size dim (Relu, MatMul, reductions, Softmax,
    Concat, Conv, Transpose over empty tensors).

    Example:
        >>> zero_size_model(np.random.default_rng(23))[0].startswith("valid (zero-size): ")
        True
    """
    which = pick(rng, ["Relu", "MatMul", "ReduceSum", "ReduceProd", "ReduceMax", "Softmax", "Concat", "Conv",
                       "Transpose", "Add"])        # no ReduceMean: ONNX leaves the mean of nothing undefined
    n = int(rng.integers(1, 4))
    if which == "MatMul":
        model = _one_op("MatMul", [n, 0], opset=13, extra_inputs=[("w", np.zeros((0, 3), np.float32))])
        return f"valid (zero-size): MatMul [{n}, 0] x [0, 3]", model
    if which in ("ReduceSum", "ReduceProd", "ReduceMax"):
        attrs = {"keepdims": int(rng.integers(0, 2))}
        extra = [("axes", np.array([1], np.int64))]
        return f"valid (zero-size): {which} axis 1 of [{n}, 0] {attrs}", _one_op(which, [n, 0], attrs, opset=18,
                                                                              extra_inputs=extra)
    if which == "Concat":
        model = onnx_model([node("Concat", ["a", "b"], ["y"], axis=0)], [value_info("a", [0, n]),
                                                                         value_info("b", [2, n])],
                           [value_info("y", None)], opset=13)
        return f"valid (zero-size): Concat [0, {n}] and [2, {n}]", model
    if which == "Conv":
        model = _one_op("Conv", [0, 2, 4, 4], {"kernel_shape": [3, 3]}, opset=13,
                        extra_inputs=[("w", floats(rng, [3, 2, 3, 3]))])
        return "valid (zero-size): Conv of batch 0", model
    shape = pick(rng, [[0, n], [n, 0, 2], [0]])
    if which == "Add":
        return f"valid (zero-size): Add {shape} + [1]", _one_op("Add", shape, opset=13,
                                                                 extra_inputs=[("b", floats(rng, [1]))])
    attrs = {"axis": -1} if which == "Softmax" else {}
    return f"valid (zero-size): {which} of {shape}", _one_op(which, shape, attrs, opset=13)


TYPED_OPS = {"Add": "num", "Sub": "num", "Mul": "num", "Max": "num", "Min": "num", "Abs": "signed",
             "Neg": "signed", "Div": "num", "Equal": "cmp", "Greater": "cmp", "Less": "cmp", "Where": "where",
             "Not": "bool", "And": "bool", "Or": "bool", "Xor": "bool", "Cast": "cast", "Relu": "float",
             "Sigmoid": "float", "Softmax": "float", "Sum": "num", "ReduceSum": "num", "ArgMin": "num",
             "Transpose": "any", "Concat": "any", "Gather": "any", "Identity": "any"}
TYPED_ELEMS = {"float16": TensorProto.FLOAT16, "int32": INT32, "int64": INT64, "int8": TensorProto.INT8,
               "uint8": TensorProto.UINT8, "bool": BOOL}


def typed_model(rng):
    """A valid op on inputs of another element type than float32: int32, int64, int8, uint8,
    float16 or bool (arithmetic, comparisons, logic, Cast, Where, reductions, data movement).

    Example:
        >>> typed_model(np.random.default_rng(1))[0].startswith("valid typed: ")
        True
    """
    op = pick(rng, sorted(TYPED_OPS))
    kind = TYPED_OPS[op]
    names = {"num": ["float16", "int32", "int64", "int8"], "signed": ["float16", "int32", "int64", "int8"],
             "cmp": ["float16", "int32", "int64"], "bool": ["bool"], "float": ["float16"],
             "cast": ["float16", "int32", "int64", "int8", "uint8", "bool"], "where": ["int32", "int64", "float16"],
             "any": ["float16", "int32", "int64", "int8", "uint8", "bool"]}[kind]
    name = pick(rng, names)
    elem = TYPED_ELEMS[name]
    shape = rand_shape(rng, int(rng.integers(1, 4)))
    out_elem = BOOL if kind == "cmp" else INT64 if op == "ArgMin" else elem
    attrs, inputs, inits, ins = {}, [value_info("a", shape, elem)], [], ["a"]
    if kind in ("num", "cmp", "bool") and op not in ("ReduceSum", "ArgMin", "Not"):
        inputs.append(value_info("b", shape[-1:], elem))
        ins.append("b")
        if op == "Div":        # a positive constant divisor: integer division by zero is undefined
            inputs.pop()
            inits.append(initializer("b", np.arange(1, shape[-1] + 1).astype(_numpy(name))))
    if op == "Where":
        inputs = [value_info("c", shape, BOOL), value_info("a", shape, elem), value_info("b", [1], elem)]
        ins = ["c", "a", "b"]
    elif op == "Cast":
        to = pick(rng, sorted(TYPED_ELEMS))
        attrs["to"] = TYPED_ELEMS[to]
        out_elem = TYPED_ELEMS[to]
        name = f"{name} to {to}"
    elif op in ("Softmax", "ArgMin", "Concat", "Gather"):
        attrs["axis"] = int(rng.integers(-len(shape), len(shape)))
        if op == "ArgMin":
            attrs["keepdims"] = int(rng.integers(0, 2))
        if op == "Concat":
            ins = ["a", "a"]
        if op == "Gather":
            inits.append(initializer("i", np.array([0, -1], np.int64)))
            ins = ["a", "i"]
    elif op == "ReduceSum":
        inits.append(initializer("axes", np.array([-1], np.int64)))
        ins = ["a", "axes"]
        attrs["keepdims"] = int(rng.integers(0, 2))
    elif op == "Transpose":
        attrs["perm"] = [int(p) for p in rng.permutation(len(shape))]
    model = onnx_model([node(op, ins, ["y"], **attrs)], inputs, [value_info("y", None, out_elem)], inits, opset=13)
    return f"valid typed: {op} of {name} {shape} {attrs}", model


def _numpy(name: str):
    return np.dtype(name)


LIMIT_BYTES = 32 << 20
"""The tensor limit ``limit_model``'s models are imported under (their outputs need 4 to 8
times as much)."""


def limit_model(rng):
    """A model whose one output needs 4 to 8 times ``LIMIT_BYTES`` from small inputs, tagged
    with metadata ``tilefuse_fuzz_tensor_limit``: imported under that limit, it must be refused
    before the output is allocated (Tile, Range, ConstantOfShape, Expand, Resize, Pad, OneHot;
    of a graph input, run as a Wildcard and tried on sample inputs at import, or of constants,
    folded at import).

    Example:
        >>> model = limit_model(np.random.default_rng(0))[1]
        >>> model.metadata_props[0].key
        'tilefuse_fuzz_tensor_limit'
    """
    side = int(np.sqrt(LIMIT_BYTES * int(pick(rng, [4, 8])) // 4))
    which = pick(rng, ["Tile of input", "Tile of constant", "Range", "ConstantOfShape", "Expand of constant",
                       "Resize of constant", "Pad of constant", "OneHot"])
    constant = np.ones((2, 2), np.float32)
    if which == "Tile of input":
        model = _one_op("Tile", [2, 2], opset=13, extra_inputs=[("r", np.array([side // 2, side // 2], np.int64))])
    elif which == "Range":
        model = onnx_model([node("Range", ["a", "b", "d"], ["r"]), node("Add", ["r", "x"], ["y"])],
                           [value_info("x", [1])], [value_info("y", None)],
                           [initializer("a", np.array(0, np.float32)), initializer("b", np.array(side * side, np.float32)),
                            initializer("d", np.array(1, np.float32))], opset=13)
    elif which == "OneHot":
        model = onnx_model([node("OneHot", ["i", "d", "v"], ["h"]), node("Add", ["h", "x"], ["y"])],
                           [value_info("x", [1])], [value_info("y", None)],
                           [initializer("i", np.arange(side, dtype=np.int64)), initializer("d", np.array(side, np.int64)),
                            initializer("v", np.array([0, 1], np.float32))], opset=13)
    else:
        op, extra = {"Tile of constant": ("Tile", [("r", np.array([side // 2, side // 2], np.int64))]),
                     "ConstantOfShape": ("ConstantOfShape", []),
                     "Expand of constant": ("Expand", [("s", np.array([side, side], np.int64))]),
                     "Resize of constant": ("Resize", [("roi", None), ("scales", np.array([side / 2, side / 2], np.float32))]),
                     "Pad of constant": ("Pad", [("p", np.array([side, side, 0, 0], np.int64))])}[which]
        data = np.array([side, side], np.int64) if op == "ConstantOfShape" else \
            np.ones((1, 1), np.float32) if op == "Expand" else constant
        names = ["c"] + [n if a is not None else "" for n, a in extra]
        inits = [initializer("c", data)] + [initializer(n, a) for n, a in extra if a is not None]
        model = onnx_model([node(op, names, ["t"]), node("Add", ["t", "x"], ["y"])], [value_info("x", [1])],
                           [value_info("y", None)], inits, opset=13)
    helper.set_model_props(model, {"tilefuse_fuzz_tensor_limit": str(LIMIT_BYTES)})
    return f"over the tensor limit: {which} to about {side}x{side} floats (limit {LIMIT_BYTES >> 20} MiB)", model


# ---------------------------------------------------------------------------- wrong models

def wrong_input_count_model(rng):
    """An op with too many or too few inputs (Relu of 2, Add of 1, MatMul of 3, Softmax of 0,
    Conv of 4, Gemm of 1).

    Example:
        >>> wrong_input_count_model(np.random.default_rng(0))[0].startswith("wrong input count")
        True
    """
    op, count = pick(rng, [("Relu", 2), ("Add", 1), ("MatMul", 3), ("Softmax", 0), ("Conv", 4), ("Gemm", 1),
                           ("Sigmoid", 3)])
    names = ["x", "a", "b", "c"][:count]
    inits = [initializer(n, floats(rng, [3, 3])) for n in names[1:]]
    inputs = [value_info("x", [3, 3])] if count else []
    if not count:
        inits = []
    model = onnx_model([node(op, names, ["y"])], inputs or [value_info("x", [3, 3])], [value_info("y", None)], inits)
    return f"wrong input count: {op} with {count} input(s)", model


def wrong_output_count_model(rng):
    """An op with more outputs than it has (Relu, Add, Softmax with 2; MaxPool with 3).

    Example:
        >>> wrong_output_count_model(np.random.default_rng(0))[0].startswith("wrong output count")
        True
    """
    op, outs = pick(rng, [("Relu", 2), ("Softmax", 2), ("MaxPool", 3), ("Add", 2), ("Transpose", 2)])
    names = ["x", "x"] if op == "Add" else ["x"]
    attrs = {"kernel_shape": [2, 2]} if op == "MaxPool" else {}
    outputs = [f"y{i}" for i in range(outs)]
    model = onnx_model([node(op, names, outputs, **attrs)], [value_info("x", [1, 1, 4, 4])],
                       [value_info(o, None) for o in outputs])
    return f"wrong output count: {op} with {outs} outputs", model


def axis_out_of_range_model(rng):
    """An axis (or axes) out of range on a rank-2 input: Softmax, LogSoftmax, Concat, Flatten,
    Gather, Split, ArgMax, LayerNormalization, Hardmax, ReduceSum, Unsqueeze, Squeeze, CumSum.

    Example:
        >>> axis_out_of_range_model(np.random.default_rng(0))[0].startswith("axis out of range")
        True
    """
    axis = int(pick(rng, [9, -9, 2, -3]))
    op = pick(rng, ["Softmax", "LogSoftmax", "Concat", "Flatten", "Gather", "Split", "ArgMax", "LayerNormalization",
                    "Hardmax", "ReduceSum", "Unsqueeze", "Squeeze", "CumSum"])
    shape = [2, 3]
    if op in ("Flatten", "Unsqueeze") and axis in (2, -3):
        axis = 3 if axis > 0 else -4       # rank 2 allows these up to 2 (Flatten) or 2 (Unsqueeze)
    extra, attrs, out_elem = [], {"axis": axis}, FLOAT
    if op == "Gather":
        extra = [("indices", np.array([0], np.int64))]
    elif op == "LayerNormalization":
        extra = [("scale", np.ones(3, np.float32))]
    elif op == "ArgMax":
        out_elem = INT64
    elif op in ("ReduceSum", "Unsqueeze", "Squeeze"):
        extra, attrs = [("axes", np.array([axis], np.int64))], {}
    elif op == "CumSum":
        extra, attrs = [("axis", np.array(axis, np.int64))], {}
    if op == "Concat":
        model = onnx_model([node("Concat", ["x", "x"], ["y"], axis=axis)], [value_info("x", shape)],
                           [value_info("y", None)])
    else:
        model = _one_op(op, shape, attrs, opset=18 if op == "Split" else 17, extra_inputs=extra, out_elem=out_elem)
    return f"axis out of range: {op} axis={axis} on {shape}", model


def window_attrs_model(rng):
    """Conv, MaxPool or AveragePool with a zero or negative kernel, stride, pad or dilation.

    Example:
        >>> window_attrs_model(np.random.default_rng(0))[0].startswith("bad window")
        True
    """
    op = pick(rng, ["Conv", "MaxPool", "AveragePool"])
    attrs = {"kernel_shape": [2, 2], "strides": [1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1]}
    key = pick(rng, ["kernel_shape", "strides", "pads", "dilations"])
    if op == "AveragePool" and key == "dilations":
        key = "strides"
    value = int(pick(rng, [0, -1, -3]))
    if key == "pads":
        value = int(pick(rng, [-1, -3, 5]))
    attrs[key] = [value] * len(attrs[key])
    if op == "AveragePool":
        attrs.pop("dilations")
    extra = [("w", floats(rng, [2, 2, 2, 2]))] if op == "Conv" else []
    model = _one_op(op, [1, 2, 5, 5], attrs, opset=19 if op == "AveragePool" else 17, extra_inputs=extra)
    return f"bad window: {op} {key}={attrs[key]}", model


def reduce_keepdims_model(rng):
    """A reduction or ArgMax with keepdims 5 or -1, or noop_with_empty_axes 7.

    Example:
        >>> reduce_keepdims_model(np.random.default_rng(0))[0].startswith("bad keepdims")
        True
    """
    op = pick(rng, ["ReduceMean", "ReduceSum", "ReduceMax", "ArgMax"])
    attr = pick(rng, [("keepdims", 5), ("keepdims", -1), ("noop_with_empty_axes", 7)])
    if op == "ArgMax" and attr[0] != "keepdims":
        attr = ("keepdims", 5)
    attrs = {attr[0]: attr[1]}
    extra = [("axes", np.array([1], np.int64))] if op == "ReduceSum" else []
    if op in ("ReduceMean", "ReduceMax"):
        attrs["axes"] = [1]
    return f"bad keepdims: {op} {attrs}", _one_op(op, [2, 3], attrs, opset=13, extra_inputs=extra,
                                                  out_elem=INT64 if op == "ArgMax" else FLOAT)


def conv_group_model(rng):
    """A Conv whose group does not divide the channels, or whose weights do not match the
    group, or whose kernel_shape contradicts the weights.

    Example:
        >>> conv_group_model(np.random.default_rng(0))[0].startswith("bad Conv")
        True
    """
    which = pick(rng, ["group", "weights", "kernel_shape", "bias", "rank"])
    attrs, x, w, b = {}, [1, 3, 5, 5], [4, 3, 3, 3], None
    if which == "group":
        attrs["group"] = int(pick(rng, [2, 4, 0, -1]))
        w = [4, 1, 3, 3]
    elif which == "weights":
        attrs["group"] = 3
        w = [4, 1, 3, 3]          # 4 output channels do not split into 3 groups
    elif which == "kernel_shape":
        attrs["kernel_shape"] = pick(rng, [[2, 2], [5, 5], [3]])
    elif which == "bias":
        b = [int(pick(rng, [3, 5]))]
    else:
        w = [4, 3, 3]
    extra = [("w", floats(rng, w))] + ([("b", floats(rng, b))] if b else [])
    return f"bad Conv ({which}): x={x} w={w} b={b} {attrs}", _one_op("Conv", x, attrs, opset=13, extra_inputs=extra)


def split_sizes_model(rng):
    """A Split whose sizes do not sum to the dim, are negative, or do not match the outputs.

    Example:
        >>> split_sizes_model(np.random.default_rng(0))[0].startswith("bad Split")
        True
    """
    sizes, outs = pick(rng, [([1, 1], 2), ([3, 4], 2), ([-1, 6], 2), ([2, 3], 3), ([5], 2), ([0, 5], 2)])
    names = [f"y{i}" for i in range(outs)]
    model = onnx_model([node("Split", ["x", "split"], names, axis=1)], [value_info("x", [2, 5])],
                       [value_info(n, None) for n in names], [initializer("split", np.array(sizes, np.int64))],
                       opset=13)
    return f"bad Split: sizes {sizes} of dim 5 into {outs} outputs", model


def two_producers_model(rng):
    """Two nodes writing one tensor, or a node writing a graph input or an initializer.

    Example:
        >>> two_producers_model(np.random.default_rng(0))[0].startswith("two producers")
        True
    """
    which = pick(rng, ["two nodes", "graph input", "initializer"])
    inits = [initializer("w", floats(rng, [3]))]
    if which == "two nodes":
        nodes = [node("Relu", ["x"], ["t"]), node("Sigmoid", ["x"], ["t"]), node("Add", ["t", "w"], ["y"])]
    elif which == "graph input":
        nodes = [node("Relu", ["w"], ["x"]), node("Add", ["x", "w"], ["y"])]
    else:
        nodes = [node("Relu", ["x"], ["w"]), node("Add", ["x", "w"], ["y"])]
    return f"two producers ({which})", onnx_model(nodes, [value_info("x", [3])], [value_info("y", None)], inits)


def unknown_op_model(rng):
    """An unknown op type in the default domain, an op of an unknown domain, or a known op
    under a domain the model does not import.

    Example:
        >>> unknown_op_model(np.random.default_rng(0))[0].startswith("unknown op")
        True
    """
    which = pick(rng, ["default domain", "unknown domain", "undeclared domain", "ml op in default domain"])
    domains = []
    if which == "default domain":
        n = node("FooBar", ["x"], ["y"], alpha=1.0)
    elif which == "unknown domain":
        n = helper.make_node("Foo", ["x"], ["y"], domain="com.example")
        domains = [("com.example", 1)]
    elif which == "undeclared domain":
        n = helper.make_node("Relu", ["x"], ["y"], domain="com.undeclared")
    else:
        n = node("LinearRegressor", ["x"], ["y"], coefficients=[1.0, 2.0, 3.0])
    return f"unknown op ({which})", onnx_model([n], [value_info("x", [2, 3])], [value_info("y", None)],
                                               domains=domains)


def missing_attr_model(rng):
    """A node without an attribute it needs: Cast without ``to``, Concat without ``axis``,
    LRN without ``size``, MaxPool without ``kernel_shape``, Constant without a value,
    Transpose with an empty perm.

    Example:
        >>> missing_attr_model(np.random.default_rng(0))[0].startswith("missing attribute")
        True
    """
    which = pick(rng, ["Cast", "Concat", "LRN", "MaxPool", "Constant", "Transpose", "AveragePool"])
    if which == "Constant":
        nodes = [node("Constant", [], ["c"]), node("Add", ["x", "c"], ["y"])]
        model = onnx_model(nodes, [value_info("x", [1, 2, 3, 3])], [value_info("y", None)])
    elif which == "Concat":
        model = onnx_model([node("Concat", ["x", "x"], ["y"])], [value_info("x", [1, 2, 3, 3])],
                           [value_info("y", None)])
    elif which == "Transpose":
        model = _one_op("Transpose", [1, 2, 3, 3])
        model.graph.node[0].attribute.append(helper.make_attribute("perm", [], attr_type=AttributeProto.INTS))
    else:
        model = _one_op(which, [1, 2, 3, 3])
    return f"missing attribute: {which}", model


def raw_data_model(rng):
    """An initializer whose raw_data holds too few or too many bytes for its dims (or a
    float_data list of the wrong length).

    Example:
        >>> raw_data_model(np.random.default_rng(0))[0].startswith("bad initializer data")
        True
    """
    count = int(pick(rng, [0, 5, 7, 100]))
    use_raw = rng.random() < 0.7
    tensor = TensorProto()
    tensor.name, tensor.data_type = "w", FLOAT
    tensor.dims.extend([2, 3])
    if use_raw:
        tensor.raw_data = np.arange(count, dtype=np.float32).tobytes()[: count * 4 - int(rng.integers(0, 2))]
    else:
        tensor.float_data.extend([1.0] * count)
    model = onnx_model([node("Add", ["x", "w"], ["y"])], [value_info("x", [2, 3])], [value_info("y", None)], [tensor])
    what = f"raw_data of {len(tensor.raw_data)} bytes" if use_raw else f"float_data of {count} values"
    return f"bad initializer data: [2, 3] float with {what}", model


def sparse_model(rng):
    """A sparse initializer with indices out of range, negative, or of the wrong count or shape.

    Example:
        >>> sparse_model(np.random.default_rng(0))[0].startswith("bad sparse initializer")
        True
    """
    indices = pick(rng, [[0, 99], [-7, 1], [0, 1, 2], [[0, 0], [5, 5]], [3, 3]])
    values = np.array([1.0, 2.0], np.float32)
    sparse = helper.make_sparse_tensor(initializer("w", values), initializer("w_idx", np.array(indices, np.int64)),
                                       [2, 3])
    model = onnx_model([node("Add", ["x", "w"], ["y"])], [value_info("x", [2, 3])], [value_info("y", None)],
                       sparse=[sparse])
    return f"bad sparse initializer: [2, 3] with indices {indices}", model


def dtype_mismatch_model(rng):
    """An op on operands of different types: Add of float and int64, MatMul of float and int32,
    Concat of float and int64, Where with a float condition, Sum of float and double.

    Example:
        >>> dtype_mismatch_model(np.random.default_rng(0))[0].startswith("dtype mismatch")
        True
    """
    op, elem = pick(rng, [("Add", INT64), ("MatMul", INT32), ("Concat", INT64), ("Where", FLOAT), ("Mul", BOOL)])
    if op == "Where":
        nodes = [node("Where", ["x", "x", "b"], ["y"])]
    else:
        nodes = [node(op, ["x", "b"], ["y"], axis=0 if op == "Concat" else None)]
    model = onnx_model(nodes, [value_info("x", [3, 3]), value_info("b", [3, 3], elem)], [value_info("y", None)])
    return f"dtype mismatch: {op} of FLOAT and {TensorProto.DataType.Name(elem)}", model


def value_info_model(rng):
    """value_info or a graph output that contradicts what the model computes (shape, rank or
    element type).

    Example:
        >>> value_info_model(np.random.default_rng(0))[0].startswith("contradicting")
        True
    """
    which = pick(rng, ["intermediate shape", "intermediate rank", "output shape", "output type", "input vs init",
                       "shapeless output type"])
    nodes = [node("Relu", ["x"], ["t"]), node("Add", ["t", "x"], ["y"])]
    infos, out, inits, inputs = [], value_info("y", [2, 3]), [], [value_info("x", [2, 3])]
    if which == "intermediate shape":
        infos = [value_info("t", [3, 2])]
    elif which == "intermediate rank":
        infos = [value_info("t", [6])]
    elif which == "output shape":
        out = value_info("y", [4, 5])
    elif which == "output type":
        out = value_info("y", [2, 3], INT64)
    elif which == "shapeless output type":         # onnx's checker is not shown outputs without a shape
        elem = pick(rng, [INT64, DOUBLE, TensorProto.INT16])
        out = value_info("y", None, elem)
        which = f"{which} {TensorProto.DataType.Name(elem)}"
    else:
        inits = [initializer("x", floats(rng, [5]))]       # an initializer overriding an input of another shape
    return f"contradicting {which}", onnx_model(nodes, inputs, [out], inits, value_infos=infos, opset=13)


def huge_model(rng):
    """A model that asks for about 10^12 elements: ConstantOfShape, Expand, Tile, Range,
    Resize by a huge scale, Pad by huge pads, or a huge graph input.

    Example:
        >>> huge_model(np.random.default_rng(0))[0].startswith("huge")
        True
    """
    which = pick(rng, ["ConstantOfShape", "Expand", "Tile", "Range", "Resize", "Pad", "input", "ConstantOfShape-add"])
    if which in ("ConstantOfShape", "ConstantOfShape-add"):
        nodes = [node("ConstantOfShape", ["s"], ["c"]), node("Add", ["c", "x"], ["y"])] if which.endswith("add") \
            else [node("ConstantOfShape", ["s"], ["y"])]
        inits = [initializer("s", np.array([HUGE, HUGE], np.int64))]
        return f"huge {which} [{HUGE}, {HUGE}]", onnx_model(nodes, [value_info("x", [1])], [value_info("y", None)],
                                                             inits, opset=13)
    if which == "Expand":
        return f"huge Expand to [{HUGE}, {HUGE}]", _one_op("Expand", [1, 1], opset=13, extra_inputs=[
            ("shape", np.array([HUGE, HUGE], np.int64))])
    if which == "Tile":
        return f"huge Tile repeats [{HUGE}, {HUGE}]", _one_op("Tile", [2, 2], opset=13, extra_inputs=[
            ("repeats", np.array([HUGE, HUGE], np.int64))])
    if which == "Range":
        model = onnx_model([node("Range", ["a", "b", "d"], ["r"]), node("Add", ["r", "x"], ["y"])],
                           [value_info("x", [1])], [value_info("y", None)],
                           [initializer("a", np.array(0, np.float32)), initializer("b", np.array(1e12, np.float32)),
                            initializer("d", np.array(1, np.float32))], opset=13)
        return "huge Range(0, 1e12, 1)", model
    if which == "Resize":
        return "huge Resize scales 1e6", _one_op("Resize", [1, 1, 2, 2], {"mode": "nearest"}, opset=13, extra_inputs=[
            ("roi", None), ("scales", np.array([1, 1, 1e6, 1e6], np.float32))])
    if which == "Pad":
        return "huge Pad pads 1e6", _one_op("Pad", [2, 2], opset=13, extra_inputs=[
            ("pads", np.array([HUGE, HUGE, HUGE, HUGE], np.int64))])
    return f"huge graph input [{HUGE}, {HUGE}]", _one_op("Relu", [HUGE, HUGE], opset=13)


def wildcard_failure_model(rng):
    """Ops the importer maps to a Wildcard (onnx's reference implementation) with arguments that
    implementation cannot run: Hardmax axis 9, LinearRegressor without coefficients, Tile with
    repeats of the wrong length, TopK with k over the dim, Einsum with a bad equation, OneHot of
    a negative depth, CumSum of a 2-element axis.

    Example:
        >>> wildcard_failure_model(np.random.default_rng(0))[0].startswith("Wildcard")
        True
    """
    which = pick(rng, ["Hardmax", "LinearRegressor", "Tile", "TopK", "Einsum", "OneHot", "CumSum"])
    shape = [2, 3]
    if which == "Hardmax":
        return "Wildcard Hardmax axis=9", _one_op("Hardmax", shape, {"axis": 9}, opset=13)
    if which == "LinearRegressor":
        model = onnx_model([helper.make_node("LinearRegressor", ["x"], ["y"], domain="ai.onnx.ml")],
                           [value_info("x", shape)], [value_info("y", None)], domains=[("ai.onnx.ml", 1)])
        return "Wildcard LinearRegressor (ai.onnx.ml) without coefficients", model
    if which == "Tile":
        return "Wildcard Tile repeats [2, 2, 2] of rank 2", _one_op("Tile", shape, opset=13, extra_inputs=[
            ("repeats", np.array([2, 2, 2], np.int64))])
    if which == "TopK":
        model = onnx_model([node("TopK", ["x", "k"], ["y", "i"], axis=1)], [value_info("x", shape)],
                           [value_info("y", None), value_info("i", None, INT64)],
                           [initializer("k", np.array([5], np.int64))], opset=13)
        return "Wildcard TopK k=5 of dim 3", model
    if which == "Einsum":
        return "Wildcard Einsum 'ij,jk->ik' of one operand", _one_op("Einsum", shape, {"equation": "ij,jk->ik"},
                                                                     opset=13)
    if which == "OneHot":
        model = onnx_model([node("OneHot", ["x", "d", "v"], ["y"])], [value_info("x", shape, INT64)],
                           [value_info("y", None)], [initializer("d", np.array(-3, np.int64)),
                                                     initializer("v", np.array([0, 1], np.float32))], opset=13)
        return "Wildcard OneHot depth -3", model
    return "Wildcard CumSum axis [0, 1]", _one_op("CumSum", shape, opset=13, extra_inputs=[
        ("axis", np.array([0, 1], np.int64))])


def reshape_transpose_model(rng):
    """A Reshape to two -1s or an incompatible size, or a Transpose whose perm repeats an axis,
    is out of range or of the wrong length.

    Example:
        >>> reshape_transpose_model(np.random.default_rng(0))[0].startswith("bad ")
        True
    """
    if rng.random() < 0.5:
        target = pick(rng, [[-1, -1], [4, 4], [0, 0, 0, 7], [-2, 3], [7, -1]])
        return f"bad Reshape [2, 3] to {target}", _one_op("Reshape", [2, 3], opset=13, extra_inputs=[
            ("shape", np.array(target, np.int64))])
    perm = pick(rng, [[0, 0], [0, 2], [1], [2, 1, 0], [-1, 0]])
    return f"bad Transpose [2, 3] perm={perm}", _one_op("Transpose", [2, 3], {"perm": perm}, opset=13)


def indices_model(rng):
    """Constant indices out of range: Gather by 10 or -10, Slice with a zero step, GatherElements
    out of range, Pad with pads that cut more than the dim or an unknown mode.

    Example:
        >>> indices_model(np.random.default_rng(0))[0].startswith("bad ")
        True
    """
    which = pick(rng, ["Gather", "Slice", "GatherElements", "Pad-cut", "Pad-mode"])
    if which == "Gather":
        index = int(pick(rng, [10, -10, 3]))
        return f"bad Gather index {index} of dim 3", _one_op("Gather", [2, 3], {"axis": 1}, opset=13, extra_inputs=[
            ("indices", np.array([index], np.int64))])
    if which == "Slice":
        extra = [("starts", np.array([0], np.int64)), ("ends", np.array([3], np.int64)),
                 ("axes", np.array([1], np.int64)), ("steps", np.array([0], np.int64))]
        return "bad Slice step 0", _one_op("Slice", [2, 3], opset=13, extra_inputs=extra)
    if which == "GatherElements":
        return "bad GatherElements index 7", _one_op("GatherElements", [2, 3], {"axis": 1}, opset=13, extra_inputs=[
            ("indices", np.full((2, 3), 7, np.int64))])
    if which == "Pad-cut":
        return "bad Pad pads [-3, -3, 0, 0] of [2, 3]", _one_op("Pad", [2, 3], opset=13, extra_inputs=[
            ("pads", np.array([-3, -3, 0, 0], np.int64))])
    return "bad Pad mode 'mirror'", _one_op("Pad", [2, 3], {"mode": "mirror"}, opset=13, extra_inputs=[
        ("pads", np.array([1, 1, 1, 1], np.int64))])


def types_model(rng):
    """Types tilefuse lacks or that make no sense: Cast to STRING, DOUBLE or UINT16, a DOUBLE
    graph input, an attribute of the wrong type (a float axis, a string kernel).

    Example:
        >>> types_model(np.random.default_rng(0))[0].startswith("types: ")
        True
    """
    which = pick(rng, ["Cast STRING", "Cast DOUBLE", "Cast UINT16", "double input", "float axis", "string axis",
                       "ints axis"])
    if which.startswith("Cast"):
        to = getattr(TensorProto, which.split()[1])
        return f"types: {which}", _one_op("Cast", [2, 3], {"to": to}, opset=13, out_elem=to)
    if which == "double input":
        model = onnx_model([node("Relu", ["x"], ["y"])], [value_info("x", [2, 3], DOUBLE)],
                           [value_info("y", None, DOUBLE)], opset=13)
        return "types: DOUBLE graph input", model
    bad = {"float axis": 1.0, "string axis": "one", "ints axis": [1, 0]}[which]
    return f"types: Softmax with a {which} ({bad!r})", _one_op("Softmax", [2, 3], {"axis": bad}, opset=13)


def structure_model(rng):
    """A broken graph structure: an output no node produces, a node reading an undefined
    tensor, nodes out of topological order, a cycle, an empty graph, an output that is an
    initializer, an empty-named output.

    Example:
        >>> structure_model(np.random.default_rng(0))[0].startswith("structure: ")
        True
    """
    which = pick(rng, ["dangling output", "undefined input", "out of order", "cycle", "empty graph",
                       "initializer output", "input as output"])
    inits = [initializer("w", floats(rng, [3]))]
    outputs = [value_info("y", None)]
    nodes = [node("Relu", ["x"], ["t"]), node("Add", ["t", "w"], ["y"])]
    if which == "dangling output":
        outputs.append(value_info("nowhere", [3]))
    elif which == "undefined input":
        nodes[1] = node("Add", ["t", "ghost"], ["y"])
    elif which == "out of order":
        nodes = nodes[::-1]
    elif which == "cycle":
        nodes = [node("Add", ["x", "y"], ["t"]), node("Relu", ["t"], ["y"])]
    elif which == "empty graph":
        nodes, outputs = [], [value_info("x", [3])]
    elif which == "initializer output":
        outputs = [value_info("w", [3])]
    else:
        outputs = [value_info("x", [3]), value_info("y", None)]
    return f"structure: {which}", onnx_model(nodes, [value_info("x", [3])], outputs, inits, opset=13)


def opset_model(rng):
    """An opset the op does not exist in or that does not exist: no default opset import,
    opset 99, opset 1 for Gelu, ir_version 99, a negative opset.

    Example:
        >>> opset_model(np.random.default_rng(0))[0].startswith("opset: ")
        True
    """
    which = pick(rng, ["no default opset", "opset 99", "Gelu at opset 1", "ir_version 99", "opset -1"])
    model = onnx_model([node("Gelu" if which.startswith("Gelu") else "Relu", ["x"], ["y"])],
                       [value_info("x", [2, 3])], [value_info("y", None)],
                       opset={"opset 99": 99, "Gelu at opset 1": 1, "opset -1": -1}.get(which, 17))
    if which == "no default opset":
        del model.opset_import[:]
        model.opset_import.append(helper.make_opsetid("com.example", 1))
    elif which == "ir_version 99":
        model.ir_version = 99
    return f"opset: {which}", model


def shape_mismatch_model(rng):
    """Operands whose shapes do not fit: MatMul inner dims, Gemm of rank 3, Concat of different
    dims, BatchNormalization parameters of another size, LayerNormalization scale of another
    shape, Add of non-broadcastable shapes, Squeeze of a dim that is not 1, Conv of a rank-2 input.

    Example:
        >>> shape_mismatch_model(np.random.default_rng(0))[0].startswith("shape mismatch: ")
        True
    """
    which = pick(rng, ["MatMul", "Gemm", "Concat", "BatchNormalization", "LayerNormalization", "Add", "Squeeze",
                       "Conv rank 2", "Where", "Expand"])
    x = [2, 3]
    if which == "MatMul":
        extra = [("w", floats(rng, [4, 5]))]
    elif which == "Gemm":
        x, extra = [2, 3, 4], [("w", floats(rng, [4, 5]))]
    elif which == "Concat":
        model = onnx_model([node("Concat", ["x", "z"], ["y"], axis=0)], [value_info("x", x), value_info("z", [2, 4])],
                           [value_info("y", None)], opset=13)
        return "shape mismatch: Concat [2, 3] and [2, 4] on axis 0", model
    elif which == "BatchNormalization":
        x = [1, 3, 2, 2]
        extra = [("s", floats(rng, [3])), ("b", floats(rng, [4])), ("m", floats(rng, [3])), ("v", floats(rng, [2]))]
    elif which == "LayerNormalization":
        extra = [("s", floats(rng, [4]))]
    elif which == "Add":
        extra = [("w", floats(rng, [4]))]
    elif which == "Squeeze":
        extra = [("axes", np.array([1], np.int64))]
    elif which == "Where":
        model = onnx_model([node("Where", ["c", "x", "z"], ["y"])],
                           [value_info("c", [4], BOOL), value_info("x", x)], [value_info("y", None)],
                           [initializer("z", floats(rng, [3]))], opset=13)
        return "shape mismatch: Where cond [4] with [2, 3]", model
    elif which == "Expand":
        extra = [("shape", np.array([4, 4], np.int64))]
    else:
        extra = [("w", floats(rng, [2, 2, 1, 1]))]
    op = which.split()[0]
    return f"shape mismatch: {which} on {x}", _one_op(op, x, opset=13, extra_inputs=extra)


def resize_bad_model(rng):
    """A Resize with scales of the wrong length, an unknown mode or coordinate transformation,
    both scales and sizes, zero or negative scales, negative sizes.

    Example:
        >>> resize_bad_model(np.random.default_rng(0))[0].startswith("bad Resize")
        True
    """
    which = pick(rng, ["scales length", "mode", "coordinates", "scales and sizes", "zero scale", "negative scale",
                       "negative size"])
    attrs = {"mode": "nearest"}
    scales, sizes = np.array([1, 1, 2, 2], np.float32), None
    if which == "scales length":
        scales = np.array([2, 2], np.float32)
    elif which == "mode":
        attrs["mode"] = "bicubic"
    elif which == "coordinates":
        attrs["coordinate_transformation_mode"] = "sideways"
    elif which == "scales and sizes":
        sizes = np.array([1, 1, 4, 4], np.int64)
    elif which == "zero scale":
        scales = np.array([1, 1, 0, 2], np.float32)
    elif which == "negative scale":
        scales = np.array([1, 1, -2, 2], np.float32)
    else:
        scales, sizes = None, np.array([1, 1, -4, 4], np.int64)
    extra = [("roi", None), ("scales", scales)] + ([("sizes", sizes)] if sizes is not None else [])
    return f"bad Resize ({which})", _one_op("Resize", [1, 1, 2, 2], attrs, opset=13, extra_inputs=extra)


# valid and wrong generators interleaved, so that any run of consecutive seeds covers both
VALID_MODELS = [unary_model, binary_model, conv_model, pool_model, softmax_model, matmul_model, gemm_model,
                concat_model, reshape_model, transpose_model, reduce_model, layernorm_model, batchnorm_model,
                resize_model, slice_model, pad_model, gather_model, split_model, clip_where_cast_model,
                shape_ops_model, misc_ops_model, chain_model, zero_size_model, typed_model, dag_model]
WRONG_MODELS = [wrong_input_count_model, wrong_output_count_model, axis_out_of_range_model, window_attrs_model,
                reduce_keepdims_model, conv_group_model, split_sizes_model, two_producers_model, unknown_op_model,
                missing_attr_model, raw_data_model, sparse_model, dtype_mismatch_model, value_info_model,
                huge_model, wildcard_failure_model, reshape_transpose_model, indices_model, types_model,
                structure_model, opset_model, shape_mismatch_model, resize_bad_model, limit_model, dag_model]
MODEL_GENERATORS = [g for pair in zip(VALID_MODELS, WRONG_MODELS) for g in pair]


def generate_model(seed: int):
    """(description, ModelProto) of ``seed``: generator ``seed % len(MODEL_GENERATORS)`` with a
    generator seeded by ``seed``.

    Example:
        >>> generate_model(0)[0] == generate_model(0)[0]
        True
    """
    generator = MODEL_GENERATORS[seed % len(MODEL_GENERATORS)]
    return generator(np.random.default_rng(seed))
