"""Seeded ONNX models of one sliding-window node with random attributes, checked against
onnxruntime: ConvTranspose (auto_pad, output_shape, output_padding, dilations, asymmetric pads,
groups, bias) and MaxPool / AveragePool (auto_pad, ceil_mode, dilations, asymmetric pads,
count_include_pad, MaxPool's Indices output with storage_order), over 1, 2 or 3 spatial dims
of sizes that divide no tile. A model onnxruntime runs must never be refused at run time.

Example:
    >>> import numpy as np
    >>> description, model = window_model(np.random.default_rng(0))
    >>> description.split(":")[0] in ("ConvTranspose", "MaxPool", "AveragePool")
    True
"""
from __future__ import annotations

import numpy as np

from fuzz_onnx_models import INT64, floats, initializer, node, onnx_model, pick, value_info
from fuzz_outcomes import CLEAN, WRONG, Outcome


def _spatial(rng, n: int, low: int, high: int) -> list:
    return [int(v) for v in rng.integers(low, high + 1, size=n)]


def conv_transpose_model(rng):
    """(description, model) of one ConvTranspose with random geometry and attributes.

    Example:
        >>> conv_transpose_model(np.random.default_rng(1))[0].startswith("ConvTranspose")
        True
    """
    n = int(pick(rng, [1, 2, 2, 2, 3]))
    group = int(pick(rng, [1, 1, 1, 2, 3]))
    c_in, c_out = group * int(rng.integers(1, 3)), group * int(rng.integers(1, 3))
    size = _spatial(rng, n, 1, 9 if n < 3 else 4)
    kernel = _spatial(rng, n, 1, 4 if n < 3 else 3)
    strides = _spatial(rng, n, 1, 3)
    dil = _spatial(rng, n, 1, 3) if rng.random() < 0.5 else [1] * n
    attrs = {"strides": strides, "group": group if group > 1 or rng.random() < 0.3 else None,
             "dilations": dil if any(d > 1 for d in dil) or rng.random() < 0.3 else None,
             "kernel_shape": kernel if rng.random() < 0.3 else None}
    full = [s * (i - 1) + (k - 1) * d + 1 for i, s, k, d in zip(size, strides, kernel, dil)]
    mode = pick(rng, ["pads", "pads", "VALID", "SAME_UPPER", "SAME_LOWER", "output_shape", "output_padding"])
    if mode == "pads":
        pads = [int(rng.integers(0, max(1, (k - 1) * d + 1))) for k, d in zip(kernel + kernel, dil + dil)]
        attrs["pads"] = pads if any(pads) or rng.random() < 0.5 else None
    elif mode in ("VALID", "SAME_UPPER", "SAME_LOWER"):
        attrs["auto_pad"] = mode
    elif mode == "output_shape":
        attrs["output_shape"] = [max(1, f - int(rng.integers(0, (k - 1) * d + 1)) + int(rng.integers(0, s)))
                                 for f, k, d, s in zip(full, kernel, dil, strides)]
        attrs["auto_pad"] = pick(rng, [None, None, "SAME_UPPER", "SAME_LOWER"])
    if mode == "output_padding" or rng.random() < 0.2:
        attrs["output_padding"] = [int(rng.integers(0, max(s, d))) for s, d in zip(strides, dil)]
    shape = [int(rng.integers(1, 3)), c_in] + size
    w = floats(rng, [c_in, c_out // group] + kernel)
    inputs, inits = ["x", "w"], [initializer("w", w)]
    if rng.random() < 0.5:
        inputs.append("b")
        inits.append(initializer("b", floats(rng, [c_out])))
    shown = {k: v for k, v in attrs.items() if v is not None}
    model = onnx_model([node("ConvTranspose", inputs, ["y"], **attrs)], [value_info("x", shape)],
                       [value_info("y", None)], inits)
    return f"ConvTranspose: x{shape} w{list(w.shape)} {shown}", model


def pool_model(rng):
    """(description, model) of one MaxPool (sometimes with its Indices output) or AveragePool
    with random geometry and attributes.

    Example:
        >>> pool_model(np.random.default_rng(2))[0].split(":")[0] in ("MaxPool", "AveragePool")
        True
    """
    op = pick(rng, ["MaxPool", "MaxPool", "AveragePool"])
    n = int(pick(rng, [1, 2, 2, 2, 3]))
    size = _spatial(rng, n, 1, 11 if n < 3 else 5)
    kernel = [min(k, s + 2) for k, s in zip(_spatial(rng, n, 1, 4), size)]
    strides = _spatial(rng, n, 1, 3) if rng.random() < 0.8 else None
    dil = _spatial(rng, n, 1, 3) if rng.random() < 0.35 else None
    attrs = {"kernel_shape": kernel, "strides": strides, "dilations": dil,
             "ceil_mode": int(rng.integers(0, 2)) if rng.random() < 0.7 else None}
    mode = pick(rng, ["pads", "pads", "none", "VALID", "SAME_UPPER", "SAME_LOWER"])
    if mode == "pads":
        attrs["pads"] = [int(rng.integers(0, k)) for k in kernel + kernel]
    elif mode != "none":
        attrs["auto_pad"] = mode
    outputs = [value_info("y", None)]
    if op == "AveragePool":
        attrs["count_include_pad"] = int(rng.integers(0, 2)) if rng.random() < 0.7 else None
    elif rng.random() < 0.5:
        outputs.append(value_info("indices", None, INT64))
        attrs["storage_order"] = int(rng.integers(0, 2)) if rng.random() < 0.7 else None
    shape = [int(rng.integers(1, 3)), int(rng.integers(1, 4))] + size
    shown = {k: v for k, v in attrs.items() if v is not None}
    model = onnx_model([node(op, ["x"], [o.name for o in outputs], **attrs)], [value_info("x", shape)], outputs,
                       opset=19 if dil and op == "AveragePool" else 17)
    what = " with Indices" if len(outputs) > 1 else ""
    return f"{op}{what}: x{shape} {shown}", model


def window_model(rng):
    """A ConvTranspose or a pool model (half each).

    Example:
        >>> op = window_model(np.random.default_rng(3))[1].graph.node[0].op_type
        >>> op in ("ConvTranspose", "MaxPool", "AveragePool")
        True
    """
    return conv_transpose_model(rng) if rng.random() < 0.5 else pool_model(rng)


def check_window_model(model_bytes: bytes, seed: int) -> Outcome:
    """``fuzz_cases.check_onnx_model``, with one rule more: a model onnxruntime runs that
    tilefuse refuses at run time (not at import or compile) is WRONG.

    Example:
        >>> from fuzz_cases import CLEAN
        >>> check_window_model(b"garbage", 0).kind == CLEAN
        True
    """
    from fuzz_cases import check_onnx_model, model_feeds, onnxruntime_outputs
    outcome = check_onnx_model(model_bytes, seed)
    if outcome.kind == CLEAN and outcome.message.startswith("run:"):
        feeds = model_feeds(model_bytes, seed)
        if feeds is not None and onnxruntime_outputs(model_bytes, feeds)[0] is not None:
            return Outcome(WRONG, f"onnxruntime runs it, tilefuse refused it at run time: {outcome.message}")
    return outcome


def window_case(seed: int):
    """The ``windows`` case of ``seed``.

    Example:
        >>> window_case(4).cls
        'windows'
    """
    from fuzz_cases import Case
    description, model = window_model(np.random.default_rng(seed))
    data = model.SerializeToString()
    return Case("windows", seed, description, lambda: check_window_model(data, seed))
