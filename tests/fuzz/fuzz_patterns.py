"""Seeded ONNX models of the op patterns modern models are made of, with random small shapes,
checked against onnxruntime: attention with masks (additive, boolean through Where, causal),
GELU (the Gelu op, and written out in its erf and tanh forms), LayerNorm (the op, and written
out as ReduceMean/Sub/Pow/Sqrt/Div, and RMS norms) with residual adds, squeeze-excite blocks
(GlobalAveragePool, 1x1 convolutions, Sigmoid or HardSigmoid, a broadcast Mul) and grouped
convolutions (depthwise and many groups).

Example:
    >>> import numpy as np
    >>> description, model = pattern_model(np.random.default_rng(0))
    >>> description.split(":")[0] in PATTERNS
    True
"""
from __future__ import annotations

import math

import numpy as np

from fuzz_onnx_models import BOOL, floats, initializer, node, onnx_model, pick, value_info


def _dims(rng, *ranges) -> list:
    return [int(rng.integers(lo, hi + 1)) for lo, hi in ranges]


def _scalar(name: str, value: float):
    return initializer(name, np.array(value, np.float32))


def attention_model(rng):
    """Scaled dot-product attention over ``heads`` heads, with no mask, an additive mask input,
    a boolean mask input through Where, or a causal mask (a constant lower triangle through
    Where); projections from one input half the time, and the heads merged back.

    Example:
        >>> attention_model(np.random.default_rng(1))[0].startswith("attention")
        True
    """
    batch, heads, lq, d = _dims(rng, (1, 2), (1, 3), (1, 9), (1, 8))
    lk = lq if rng.random() < 0.6 else int(rng.integers(1, 10))
    mask = pick(rng, ["none", "additive", "boolean", "causal"])
    if mask == "causal":
        lk = lq
    nodes, inputs, inits = [], [], []
    if rng.random() < 0.5:          # q, k, v projected from x (self-attention)
        lk, width = lq, heads * d
        inputs.append(value_info("x", [batch, lq, width]))
        for name in "qkv":
            inits.append(initializer(f"w{name}", floats(rng, [width, width])))
            inits.append(initializer(f"shape_{name}", np.array([batch, lq, heads, d], np.int64)))
            nodes += [node("MatMul", ["x", f"w{name}"], [f"{name}_flat"]),
                      node("Reshape", [f"{name}_flat", f"shape_{name}"], [f"{name}_split"]),
                      node("Transpose", [f"{name}_split"], [name], perm=[0, 2, 1, 3])]
    else:
        inputs += [value_info("q", [batch, heads, lq, d]), value_info("k", [batch, heads, lk, d]),
                   value_info("v", [batch, heads, lk, d])]
    scale = pick(rng, ["Mul", "Div"])
    inits.append(_scalar("scale", 1 / math.sqrt(d) if scale == "Mul" else math.sqrt(d)))
    nodes += [node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]), node("MatMul", ["q", "kt"], ["raw"]),
              node(scale, ["raw", "scale"], ["scores"])]
    fill = float(pick(rng, [-1e4, -1e9, float(np.finfo(np.float32).min)]))
    if mask == "additive":
        inputs.append(value_info("mask", pick(rng, [[batch, 1, 1, lk], [batch, 1, lq, lk], [lq, lk]])))
        nodes.append(node("Add", ["scores", "mask"], ["masked"]))
    elif mask in ("boolean", "causal"):
        if mask == "boolean":
            inputs.append(value_info("keep", pick(rng, [[batch, 1, 1, lk], [batch, 1, lq, lk]]), BOOL))
        else:
            inits.append(initializer("keep", np.tril(np.ones((lq, lk), bool))))
        inits.append(_scalar("fill", fill))
        nodes.append(node("Where", ["keep", "scores", "fill"], ["masked"]))
    last = "masked" if mask != "none" else "scores"
    nodes += [node("Softmax", [last], ["probs"], axis=-1), node("MatMul", ["probs", "v"], ["ctx"])]
    outputs = ["ctx"]
    if rng.random() < 0.5:          # heads merged back: (batch, lq, heads * d)
        inits.append(initializer("merged", np.array([batch, lq, heads * d], np.int64)))
        nodes += [node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
                  node("Reshape", ["ctx_t", "merged"], ["out"])]
        outputs = ["out"]
    model = onnx_model(nodes, inputs, [value_info(o, None) for o in outputs], inits)
    return (f"attention: batch {batch}, {heads} heads, lq {lq}, lk {lk}, d {d}, mask {mask}"
            f"{f' (fill {fill:g})' if mask in ('boolean', 'causal') else ''}, scale by {scale}"), model


def gelu_model(rng):
    """A dense layer (MatMul, Add) then GELU: the Gelu op (opset 20, exact or tanh) or written
    out in its erf form or its tanh form (Pow or Mul for the cube).

    Example:
        >>> gelu_model(np.random.default_rng(2))[0].startswith("gelu")
        True
    """
    rows, k, n = _dims(rng, (1, 9), (1, 12), (1, 12))
    lead = [int(rng.integers(1, 3))] if rng.random() < 0.5 else []
    form = pick(rng, ["op exact", "op tanh", "erf", "tanh pow", "tanh mul"])
    inits = [initializer("w", floats(rng, [k, n])), initializer("b", floats(rng, [n])), _scalar("half", 0.5),
             _scalar("one", 1.0)]
    nodes = [node("MatMul", ["x", "w"], ["h0"]), node("Add", ["h0", "b"], ["h"])]
    if form.startswith("op"):
        nodes.append(node("Gelu", ["h"], ["y"], approximate="tanh" if form == "op tanh" else None))
    elif form == "erf":
        inits.append(_scalar("sqrt2", math.sqrt(2)))
        nodes += [node("Div", ["h", "sqrt2"], ["u"]), node("Erf", ["u"], ["e"]), node("Add", ["e", "one"], ["e1"]),
                  node("Mul", ["h", "e1"], ["he"]), node("Mul", ["he", "half"], ["y"])]
    else:
        inits += [_scalar("c", 0.044715), _scalar("s", math.sqrt(2 / math.pi)), _scalar("three", 3.0)]
        cube = [node("Pow", ["h", "three"], ["h3"])] if form == "tanh pow" else \
            [node("Mul", ["h", "h"], ["h2"]), node("Mul", ["h2", "h"], ["h3"])]
        nodes += cube + [node("Mul", ["h3", "c"], ["ch3"]), node("Add", ["h", "ch3"], ["inner"]),
                         node("Mul", ["inner", "s"], ["arg"]), node("Tanh", ["arg"], ["t"]),
                         node("Add", ["t", "one"], ["t1"]), node("Mul", ["half", "h"], ["hh"]),
                         node("Mul", ["hh", "t1"], ["y"])]
    shape = lead + [rows, k]
    model = onnx_model(nodes, [value_info("x", shape)], [value_info("y", None)], inits,
                       opset=20 if form.startswith("op") else 17)
    return f"gelu: {form}, x{shape} @ [{k}, {n}]", model


def layernorm_model(rng):
    """A residual add then a norm over the last axis: the LayerNormalization op (sometimes over
    the last two axes), written out (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul,
    Add), or an RMS norm written out; then a dense layer half the time.

    Example:
        >>> layernorm_model(np.random.default_rng(3))[0].startswith("layernorm")
        True
    """
    shape = [int(rng.integers(1, 3)), int(rng.integers(1, 10)), int(rng.integers(1, 17))]
    width = shape[-1]
    form = pick(rng, ["op", "op", "decomposed", "decomposed", "rms"])
    eps = float(pick(rng, [1e-5, 1e-6, 1e-12, 0.1]))
    inits = [initializer("r", floats(rng, shape[1:])), initializer("gamma", floats(rng, [width], 0.5, 1.5)),
             initializer("beta", floats(rng, [width]))]
    nodes = [node("Add", ["x", "r"], ["h"])]
    axis = -1
    if form == "op":
        axis = int(pick(rng, [-1, -1, -2]))
        if axis == -2:
            inits[1:] = [initializer("gamma", floats(rng, shape[1:], 0.5, 1.5)),
                         initializer("beta", floats(rng, shape[1:]))]
        nodes.append(node("LayerNormalization", ["h", "gamma", "beta"], ["n"], axis=axis, epsilon=eps))
    else:
        inits += [_scalar("two", 2.0), _scalar("eps", eps)]
        if form == "decomposed":
            nodes += [node("ReduceMean", ["h"], ["mean"], axes=[-1]), node("Sub", ["h", "mean"], ["d"]),
                      node("Pow", ["d", "two"], ["d2"]), node("ReduceMean", ["d2"], ["var"], axes=[-1]),
                      node("Add", ["var", "eps"], ["ve"]), node("Sqrt", ["ve"], ["std"]),
                      node("Div", ["d", "std"], ["z"])]
        else:
            nodes += [node("Pow", ["h", "two"], ["h2"]), node("ReduceMean", ["h2"], ["ms"], axes=[-1]),
                      node("Add", ["ms", "eps"], ["me"]), node("Sqrt", ["me"], ["rms"]),
                      node("Div", ["h", "rms"], ["z"])]
        nodes += [node("Mul", ["z", "gamma"], ["zg"])]
        nodes += [node("Add", ["zg", "beta"], ["n"])] if form == "decomposed" else \
            [node("Identity", ["zg"], ["n"])]
    out = "n"
    if rng.random() < 0.5:
        n_out = int(rng.integers(1, 13))
        inits.append(initializer("w", floats(rng, [width, n_out])))
        nodes.append(node("MatMul", ["n", "w"], ["y"]))
        out = "y"
    model = onnx_model(nodes, [value_info("x", shape)], [value_info(out, None)], inits)
    return f"layernorm: {form}, x{shape}, axis {axis}, epsilon {eps:g}", model


def squeeze_excite_model(rng):
    """A squeeze-excite block: GlobalAveragePool, 1x1 Conv, Relu, 1x1 Conv, Sigmoid or
    HardSigmoid, Mul with the input broadcast over the spatial dims (after a depthwise 3x3
    convolution half the time).

    Example:
        >>> squeeze_excite_model(np.random.default_rng(4))[0].startswith("squeeze-excite")
        True
    """
    batch, channels, height, width = _dims(rng, (1, 2), (1, 12), (1, 9), (1, 9))
    squeezed = max(1, channels // int(pick(rng, [1, 2, 4])))
    gate = pick(rng, ["Sigmoid", "HardSigmoid"])
    inits = [initializer("w1", floats(rng, [squeezed, channels, 1, 1])), initializer("b1", floats(rng, [squeezed])),
             initializer("w2", floats(rng, [channels, squeezed, 1, 1])), initializer("b2", floats(rng, [channels]))]
    nodes, x = [], "x"
    if rng.random() < 0.5:
        inits.append(initializer("wd", floats(rng, [channels, 1, 3, 3])))
        nodes.append(node("Conv", ["x", "wd"], ["xd"], group=channels, pads=[1, 1, 1, 1]))
        x = "xd"
    nodes += [node("GlobalAveragePool", [x], ["s"]), node("Conv", ["s", "w1", "b1"], ["s1"]),
              node("Relu", ["s1"], ["s2"]), node("Conv", ["s2", "w2", "b2"], ["s3"]),
              node(gate, ["s3"], ["g"], **({"alpha": 1 / 6, "beta": 0.5} if gate == "HardSigmoid" else {})),
              node("Mul", [x, "g"], ["y"])]
    model = onnx_model(nodes, [value_info("x", [batch, channels, height, width])], [value_info("y", None)], inits)
    return f"squeeze-excite: x[{batch}, {channels}, {height}, {width}], squeezed to {squeezed}, {gate}", model


def grouped_conv_model(rng):
    """A Conv with many groups (depthwise half the time, a channel multiplier sometimes),
    random kernel, strides, dilations and pads, bias, then Relu, Clip(0, 6) or HardSwish.

    Example:
        >>> grouped_conv_model(np.random.default_rng(5))[0].startswith("grouped conv")
        True
    """
    groups = int(rng.integers(2, 9))
    depthwise = rng.random() < 0.5
    c_in = groups if depthwise else groups * int(rng.integers(1, 3))
    c_out = groups * (int(pick(rng, [1, 1, 2])) if depthwise else int(rng.integers(1, 3)))
    batch, height, width = _dims(rng, (1, 2), (1, 10), (1, 10))
    kernel = [min(k, s) for k, s in zip(_dims(rng, (1, 3), (1, 3)), (height + 2, width + 2))]
    strides, dil = _dims(rng, (1, 2), (1, 2)), _dims(rng, (1, 2), (1, 2))
    pads = [int(rng.integers(0, k)) for k in kernel + kernel]
    for axis, (size, k, d) in enumerate(zip((height, width), kernel, dil)):
        while (k - 1) * d + 1 > size + pads[axis] + pads[axis + 2]:
            d, k = (d - 1, k) if d > 1 else (d, k - 1)
        kernel[axis], dil[axis] = k, d
    act = pick(rng, ["Relu", "Clip", "HardSwish", "none"])
    inits = [initializer("w", floats(rng, [c_out, c_in // groups] + kernel)), initializer("b", floats(rng, [c_out]))]
    nodes = [node("Conv", ["x", "w", "b"], ["c"], group=groups, strides=strides, dilations=dil, pads=pads)]
    if act == "Clip":
        inits += [_scalar("lo", 0.0), _scalar("hi", 6.0)]
        nodes.append(node("Clip", ["c", "lo", "hi"], ["y"]))
    elif act != "none":
        nodes.append(node(act, ["c"], ["y"]))
    out = "c" if act == "none" else "y"
    shape = [batch, c_in, height, width]
    model = onnx_model(nodes, [value_info("x", shape)], [value_info(out, None)], inits)
    return (f"grouped conv: x{shape}, {groups} groups{' (depthwise)' if depthwise else ''}, {c_out} out, kernel "
            f"{kernel}, strides {strides}, dilations {dil}, pads {pads}, {act}"), model


PATTERNS = {"attention": attention_model, "gelu": gelu_model, "layernorm": layernorm_model,
            "squeeze-excite": squeeze_excite_model, "grouped conv": grouped_conv_model}


def pattern_model(rng, which: int | None = None):
    """(description, model) of pattern ``which`` (an index into ``PATTERNS``; default random).

    Example:
        >>> pattern_model(np.random.default_rng(0), 1)[0].startswith("gelu")
        True
    """
    makers = list(PATTERNS.values())
    return makers[int(rng.integers(len(makers))) if which is None else which % len(makers)](rng)


def pattern_case(seed: int):
    """The ``patterns`` case of ``seed``: pattern ``seed % len(PATTERNS)`` with random shapes,
    checked against onnxruntime.

    Example:
        >>> pattern_case(2).description.startswith("layernorm")
        True
    """
    from fuzz_cases import Case, check_onnx_model
    description, model = pattern_model(np.random.default_rng(seed), seed)
    data = model.SerializeToString()
    return Case("patterns", seed, description, lambda: check_onnx_model(data, seed))
