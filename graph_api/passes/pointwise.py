"""Pointwise NCX convolutions as one GEMM over the pixels.

A 1x1, stride-1, unpadded convolution in NCX is the matrix product ``out[o, p] = sum_c
w[o, c] x[c, p]`` over its pixels ``p``, which are contiguous in NCX. As a Convolution, the
complex template tiles it by the image's rows (a tile of a few rows of one output channel,
reading every input channel: MobileNetV3's 144 -> 24 projection over 56x56 pixels at 26-48
GFLOPS on 2 AVX-512 cores) or by channels with a strided store per tile (EfficientNet's
16 -> 96 expansion over 112x112 at 26-60 GFLOPS). As a MatMul of the weights ``(O, C)`` by
the pixels ``(C, H*W)`` (a view of the input), its register tiles run over several output
channels by four vectors of pixels, and its output is stored contiguously: 1.5-4x faster on
those layers (see ``benchmarks/bench_ops.py``'s pw_ cases).

Where plan_layouts keeps convolutions in NCHW (narrow grouped convolutions between them, or
depthwise ones whose weights are fed at run time), this pass rewrites each such convolution with bound weights (and
bias), no groups and at least ``MIN_PIXELS`` pixels per image: the input reshaped to
``(C, pixels)`` (``(N, C, pixels)`` for a batch), times the weights as an ``(O, C)`` matrix
(bias ``(O, 1)``), then the elementwise epilogue (activation, residual add: each the only
reader of the op before, its other operand of the full shape, one per channel, or one value,
reshaped to the product's shape too) on the product, and a reshape back to the original
output. Smaller images stay convolutions: tiled by channels, their 7x7 and 14x14 layers with
long reductions ran 5-25% faster than the product, whose pixel tiles then end in a partial
tile.

Example (SiLU after the convolution):
    >>> import numpy as np
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType
    >>> def t(i, c=4): return LogicalTensor(i, DataType.f32, (1, c, 16, 16))
    >>> w = LogicalTensor(1, DataType.f32, (4, 8, 1, 1), property_type=PropertyType.constant)
    >>> pointwise = {"strides": [1, 1], "pads_begin": [0, 0], "pads_end": [0, 0], "dilations": [1, 1],
    ...              "data_format": "NCX", "weights_format": "OIX"}
    >>> g = Graph(); _ = g.add_op(Op(0, OpKind.Convolution, [t(0, c=8), w], [t(2)], pointwise))
    >>> _ = g.add_op(Op(1, OpKind.Sigmoid, [t(2)], [t(3)])); _ = g.add_op(Op(2, OpKind.Multiply, [t(2), t(3)], [t(4)]))
    >>> g.bind_constant(1, np.ones((4, 8, 1, 1))); g.finalize()
    >>> [(op.kind.value, op.outputs[0].shape) for op in flatten_pointwise_convolutions(g).topological_ops()][1:]
    [('MatMul', (4, 256)), ('Sigmoid', (4, 256)), ('Multiply', (4, 256)), ('StaticReshape', (1, 4, 16, 16))]
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import GraphIR
from ..op import Op, OpKind
from ..ops.schema import get_attr
from ._util import FreshIds, as_ir, clone_op, frozen, view_before
from .epilogue import flatten_epilogue

MIN_PIXELS = 256     # smaller images (7x7, 14x14) stay convolutions, tiled by channels


def flatten_pointwise_convolutions(graph) -> GraphIR:
    """A new IR in which every pointwise NCX convolution with bound weights over at least
    ``MIN_PIXELS`` pixels is a MatMul of its weights by its pixels, its elementwise epilogue
    computed on the product (see the module docstring); the input graph is not modified and
    its output tensors keep their ids.

    Example:
        >>> from tilefuse.graph_api import Graph
        >>> g = Graph(); g.finalize(); flatten_pointwise_convolutions(g).ops
        []
    """
    graph = as_ir(graph, "flatten_pointwise_convolutions")
    values = graph.constant_values
    targets = [op for op in graph.ops if _flattenable(op, values)]
    if not targets:
        return graph
    outs = {t.id for t in graph.get_output_ports()}
    fresh = FreshIds(graph)
    replaced, new_values, claimed = {}, {}, set()

    def reshaped(t, shape, into):
        return view_before(fresh, replaced, t, shape, into)

    for op in targets:
        x, w, out = op.inputs[0], op.inputs[1], op.outputs[0]
        flat = _flat_shape(out)
        a = fresh.constant(w, (out.shape[1], x.shape[1]))
        weights = values[w.id]          # OIX (O, C, 1, 1) or XIO (1, 1, C, O) as the (O, C) matrix
        matrix = weights.reshape(a.shape) if get_attr(op, "weights_format") == "OIX" else \
            weights.reshape(-1, a.shape[0]).T
        new_values[a.id] = frozen(np.array(matrix, order="C"))
        ins = [a, reshaped(x, _flat_shape(x), op)]
        if len(op.inputs) > 2:
            bias = fresh.constant(op.inputs[2], (out.shape[1], 1))
            new_values[bias.id] = frozen(np.array(values[op.inputs[2].id], order="C").reshape(bias.shape))
            ins.append(bias)
        current = fresh.variable(out, flat)
        replaced[op.id].append(clone_op(op, kind=OpKind.MatMul, inputs=ins, outputs=[current], attrs={}))

        def operand(t, nxt, out=out, flat=flat):
            if math.prod(t.shape) == 1:         # one value: of no more dims than the product
                return t if t.ndim <= len(flat) else reshaped(t, (1,) * len(flat), nxt)
            return reshaped(t, flat if tuple(t.shape) == tuple(out.shape)    # a residual, or one value per channel
                            else _flat_shape(t, channels_only=True), nxt)
        flatten_epilogue(graph, op, current, lambda t, out=out: _per_pixel_or_channel(t, out), operand, fresh,
                         replaced, claimed, outs)
    ops = [new for op in graph.ops for new in replaced.get(op.id, [op])]
    return graph.with_ops(ops, new_values)


def _flattenable(op: Op, values: dict) -> bool:
    """A 1x1, stride-1, unpadded NCX convolution without groups, its weights and bias bound,
    over at least ``MIN_PIXELS`` pixels per image."""
    if op.kind is not OpKind.Convolution or get_attr(op, "data_format") != "NCX" or get_attr(op, "groups") != 1:
        return False
    x, out = op.inputs[0], op.outputs[0]
    if not all(t.id in values for t in op.inputs[1:]) or not (x.is_known() and out.is_known()) or x.ndim < 3:
        return False
    weights = values[op.inputs[1].id]
    kernel = weights.shape[2:] if get_attr(op, "weights_format") == "OIX" else weights.shape[:-2]
    return (all(k == 1 for k in kernel) and all(s == 1 for s in get_attr(op, "strides"))
            and tuple(out.shape[2:]) == tuple(x.shape[2:]) and math.prod(x.shape[2:]) >= MIN_PIXELS)


def _flat_shape(t, channels_only: bool = False) -> tuple:
    """An NCX tensor's shape with its pixels as one axis: ``(C, pixels)``, ``(N, C, pixels)`` for
    a batch; ``channels_only``: a per-channel operand's, its pixels one (``(C, 1)``)."""
    pixels = 1 if channels_only else math.prod(t.shape[2:])
    return (t.shape[1], pixels) if t.shape[0] == 1 else (t.shape[0], t.shape[1], pixels)


def _per_pixel_or_channel(other, tensor) -> bool:
    """Whether an epilogue operand ``other`` has the product's whole shape, one value per
    channel (``(1, C, 1, 1)``: batch and pixels broadcast) or one value."""
    if not other.is_known():
        return False
    if tuple(other.shape) == tuple(tensor.shape) or math.prod(other.shape) == 1:
        return True
    return (other.ndim == tensor.ndim and other.shape[0] == 1 and other.shape[1] == tensor.shape[1]
            and math.prod(other.shape[2:]) == 1)
