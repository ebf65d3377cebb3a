"""A grouped pointwise convolution becomes a batched MatMul over its groups.

A pointwise (1x1, stride 1, unpadded) NCX convolution in ``G >= 2`` groups of at least two
input channels each, with bound weights (ShuffleNet's), is a batched matrix product over
the groups: the input reshaped to ``(N, G, C/G, pixels)`` (a view: no copy), times the
weights as ``(G, O/G, C/G)`` matrices (bias ``(G, O/G, 1)``), reshaped back to
``(N, O, *X)``. One GEMM kernel runs the groups, with the pixels, contiguous in NCX, along
its vectors.

Every other grouped convolution stays one op: the complex template runs all its groups in
one kernel whose register tile spans pixels by a group's output channels
(``schedule/templates/complex.py``), which beat one convolution per group (a Slice, a
convolution and a Concat each) on every shape measured, 2 to 8 groups of 16 to 128
channels included (64 channels of 112x112 in 4 groups at stride 2: 1.65 -> 0.88 ms;
AlexNet's 2 groups of 128 and 192: 1.03-1.4x). Depthwise convolutions (one channel per
group) are the window template's.

Example:
    >>> import numpy as np
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType
    >>> f = DataType.f32
    >>> x = LogicalTensor(0, f, (1, 16, 5, 5)); w = LogicalTensor(1, f, (16, 8, 1, 1), property_type=PropertyType.constant)
    >>> y = LogicalTensor(2, f, (1, 16, 5, 5))
    >>> g = Graph()
    >>> _ = g.add_op(Op(0, OpKind.Convolution, [x, w], [y], {"strides": [1, 1], "pads_begin": [0, 0],
    ...     "pads_end": [0, 0], "dilations": [1, 1], "groups": 2, "data_format": "NCX", "weights_format": "OIX"}))
    >>> g.bind_constant(1, np.ones((16, 8, 1, 1))); g.finalize()
    >>> [op.kind.value for op in split_grouped_convolutions(g).topological_ops()]
    ['StaticReshape', 'MatMul', 'StaticReshape']
"""
from __future__ import annotations

import numpy as np

from ..ir import GraphIR
from ..op import Op, OpKind
from ..ops.schema import get_attr
from ._util import FreshIds, as_ir, frozen


def split_grouped_convolutions(graph) -> GraphIR:
    """A new IR in which each grouped pointwise NCX convolution with bound weights is a batched
    MatMul over its groups (see the module docstring); the input graph is not modified.

    Example:
        >>> from tilefuse.graph_api import Graph
        >>> g = Graph(); g.finalize(); split_grouped_convolutions(g).ops
        []
    """
    graph = as_ir(graph, "split_grouped_convolutions")
    values = graph.constant_values
    fresh = FreshIds(graph)
    ops, new_values, changed = [], {}, False
    for op in graph.ops:
        split = _split(op, values, fresh, new_values)
        changed |= split is not None
        ops.extend(split if split is not None else [op])
    return graph.with_ops(ops, new_values) if changed else graph


def _split(op: Op, values: dict, fresh: FreshIds, new_values: dict):
    """The ops replacing ``op``, or None when it stays."""
    if op.kind is not OpKind.Convolution or not all(t.id in values for t in op.inputs[1:]):
        return None
    x, w, out = op.inputs[0], op.inputs[1], op.outputs[0]
    if get_attr(op, "groups") < 2 or not (x.is_known() and out.is_known()) or not _pointwise(op, values[w.id]):
        return None
    return _as_matmul(op, values, fresh, new_values)


def _pointwise(op: Op, weights: np.ndarray) -> bool:
    """A 1x1, stride 1, unpadded NCX convolution (its output's pixels are its input's) with
    at least two input channels per group."""
    x, out = op.inputs[0], op.outputs[0]
    spatial = weights.shape[2:] if get_attr(op, "weights_format") == "OIX" else weights.shape[:-2]
    icg = weights.shape[1] if get_attr(op, "weights_format") == "OIX" else weights.shape[-2]
    return (get_attr(op, "data_format") == "NCX" and all(k == 1 for k in spatial) and icg >= 2
            and all(s == 1 for s in get_attr(op, "strides")) and tuple(out.shape[2:]) == tuple(x.shape[2:]))


def _as_matmul(op: Op, values: dict, fresh: FreshIds, new_values: dict) -> list:
    """A pointwise grouped NCX convolution as reshape, batched MatMul over the groups, reshape."""
    x, w, out = op.inputs[0], op.inputs[1], op.outputs[0]
    groups, weights = get_attr(op, "groups"), values[w.id]
    n, c, pixels = x.shape[0], x.shape[1], int(np.prod(x.shape[2:], dtype=np.int64))
    oc = out.shape[1]
    matrices = weights.reshape(oc, -1) if get_attr(op, "weights_format") == "OIX" else weights.reshape(-1, oc).T
    a = fresh.constant(w, (groups, oc // groups, c // groups))
    new_values[a.id] = frozen(np.array(matrices, order="C").reshape(a.shape))
    rows = fresh.variable(x, (n, groups, c // groups, pixels))
    ins = [a, rows]
    if len(op.inputs) > 2:
        bias = fresh.constant(op.inputs[2], (groups, oc // groups, 1))
        new_values[bias.id] = frozen(np.array(values[op.inputs[2].id], order="C").reshape(bias.shape))
        ins.append(bias)
    product = fresh.variable(out, (n, groups, oc // groups, pixels))
    return [Op(fresh.op_id(), OpKind.StaticReshape, [x], [rows], {"shape": list(rows.shape), "special_zero": False}),
            Op(fresh.op_id(), OpKind.MatMul, ins, [product], {}, name=op.name),
            Op(op.id, OpKind.StaticReshape, [product], [out], {"shape": list(out.shape), "special_zero": False},
               name=op.name)]
