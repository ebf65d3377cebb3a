"""Squeeze-and-excitation's scale moved from the feature map into the next convolution's weights.

Squeeze-and-excitation (MobileNetV3, EfficientNet, RegNetY) ends with a ``Multiply`` of the
feature map ``x`` (batch 1, channels-last: 1, H, W, C) by a gate ``s`` of one value per
channel (1, 1, 1, C), computed at run time, and the product feeds the block's projection, a
convolution with bound weights. Since ``conv(x * s, W)[o] = sum_{c,k} x[k, c] * (s[c] *
W[k, c, o])`` (padding adds zeros either way), the gate can scale the weights instead: ``kh *
kw * C * O`` products (EfficientNet's 144 -> 24 projection at 56x56: 3.5k) instead of one per
element of the feature map (451k) and a pass over it through memory. This pass, run after
``plan_layouts``, rewrites each such channels-last convolution (no groups, bound weights)
whose weights are smaller than its input to read ``x`` directly, with weights ``W_hwio *
reshape(s, (C, 1))`` computed per run from its weights in HWIO (``XIO``, permuted here: a
vector of output channels is one contiguous row); the Multiply goes when nothing else reads
it. Where the weights are the larger (7x7 maps of 1152 channels projected to 320), the
feature map's multiply is the cheaper one and stays. A batch of several images has one gate
per image, which no shared weights can hold: only batch 1 is rewritten.

Example:
    >>> import numpy as np
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType
    >>> f, c = DataType.f32, PropertyType.constant
    >>> x = LogicalTensor(0, f, (1, 5, 5, 4)); s = LogicalTensor(1, f, (1, 1, 1, 4))
    >>> y = LogicalTensor(2, f, (1, 5, 5, 4)); w = LogicalTensor(3, f, (2, 4, 1, 1), property_type=c)
    >>> z = LogicalTensor(4, f, (1, 5, 5, 2))
    >>> g = Graph(); _ = g.add_op(Op(0, OpKind.Multiply, [x, s], [y]))
    >>> _ = g.add_op(Op(1, OpKind.Convolution, [y, w], [z], {"strides": [1, 1], "pads_begin": [0, 0],
    ...     "pads_end": [0, 0], "dilations": [1, 1], "data_format": "NXC", "weights_format": "OIX"}))
    >>> g.bind_constant(3, np.ones((2, 4, 1, 1))); g.finalize()
    >>> [(op.kind.value, op.outputs[0].shape) for op in scale_weights_by_channel_gates(g).topological_ops()]
    [('StaticReshape', (4, 1)), ('Multiply', (1, 1, 4, 2)), ('Convolution', (1, 5, 5, 2))]
"""
from __future__ import annotations

import math

from ..ir import GraphIR
from ..op import Op, OpKind
from ..ops.schema import get_attr
from ._util import OIX_TO_XIO, FreshIds, as_ir, clone_op, output_ids, permuted_constant, reshape

def scale_weights_by_channel_gates(graph) -> GraphIR:
    """A new IR in which each convolution reading a feature map times a per-channel gate reads
    the feature map, with its weights scaled by the gate (see the module docstring); the input
    graph is not modified.

    Example:
        >>> from tilefuse.graph_api import Graph
        >>> g = Graph(); g.finalize(); scale_weights_by_channel_gates(g).ops
        []
    """
    graph = as_ir(graph, "scale_weights_by_channel_gates")
    values, fresh, outputs = graph.constant_values, FreshIds(graph), set(output_ids(graph))
    ops, dropped, new_values = [], set(), {}
    for op in graph.topological_ops():
        gated = _gated_input(graph, op, values)
        if gated is None:
            ops.append(op)
            continue
        product, x, gate = gated
        weights = op.inputs[1]
        hwio = permuted_constant(fresh, weights, values[weights.id], OIX_TO_XIO, new_values)
        gate_view = fresh.variable(gate, (weights.shape[1], 1))
        scaled = fresh.variable(weights, hwio.shape)
        ops += [reshape(fresh, gate, gate_view, op.name),
                Op(fresh.op_id(), OpKind.Multiply, [hwio, gate_view], [scaled], {}, name=op.name),
                clone_op(op, inputs=[x, scaled, *op.inputs[2:]], attrs={**op.attrs, "weights_format": "XIO"},
                         folded=[product])]
        if product.outputs[0].id not in outputs and \
                all(_gated_input(graph, reader, values) for reader in graph.consumers(product.outputs[0].id)):
            dropped.add(product.id)
    if not new_values:
        return graph
    kept = [op for op in ops if op.id not in dropped]
    return graph.with_ops(kept, new_values)


def _gated_input(graph: GraphIR, conv: Op, values: dict):
    """(the Multiply, the feature map, the gate) when ``conv`` is a batch-1, ungrouped 2-D
    channels-last convolution with bound OIX weights smaller than its input, which is a feature
    map times a per-channel gate computed at run time; else None."""
    if conv.kind is not OpKind.Convolution or get_attr(conv, "data_format") != "NXC" or \
            get_attr(conv, "weights_format") != "OIX" or get_attr(conv, "groups") != 1 or \
            conv.inputs[1].id not in values or len(conv.inputs[1].shape or ()) != 4:
        return None
    product = graph.producer(conv.inputs[0].id)
    if product is None or product.kind is not OpKind.Multiply or len(product.inputs) != 2:
        return None
    shape = conv.inputs[0].shape
    if math.prod(conv.inputs[1].shape) >= math.prod(shape):
        return None             # the feature map's multiply costs less than the weights'
    for x, gate in (product.inputs, product.inputs[::-1]):
        if x.shape == shape and gate.id not in values and gate.is_known() and \
                len(shape) == 4 and shape[0] == 1 and tuple(gate.shape) == (1, 1, 1, shape[-1]):
            return product, x, gate
    return None
