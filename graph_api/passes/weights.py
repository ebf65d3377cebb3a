"""Folding per-channel affine ops at compile time: into the convolution before them, or into
one scale and one shift.

A Convolution whose weights (and bias) are bound constants, followed by an op that scales or
shifts each output channel by bound constants, becomes one Convolution with new weights and
bias: nothing of the affine op is left to run. The ops folded, when the convolution's output
feeds only them:

* ``BatchNormInference(y, gamma, beta, mean, variance)``: ``y * s + (beta - mean * s)`` with
  ``s = gamma / sqrt(variance + epsilon)``;
* ``Multiply(y, c)`` with ``c`` constant along every axis but the channels: weights and bias
  times ``c``;
* ``Add(y, c)`` (or ``BiasAdd``) likewise: bias plus ``c``.

Chains fold one op after another (Convolution, BatchNormInference, Multiply, Add). The values
are computed in float64 and stored in the weights' type. A BatchNormInference no convolution
takes (DenseNet's, before the ReLU and convolution) becomes, with the affine ops after it, one
Multiply and one Add by per-channel constants (``fold_batch_norms``).

Example:
    >>> import numpy as np
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType
    >>> c = PropertyType.constant
    >>> x = LogicalTensor(0, DataType.f32, (1, 2, 3, 3)); w = LogicalTensor(1, DataType.f32, (2, 2, 1, 1), property_type=c)
    >>> y = LogicalTensor(2, DataType.f32, (1, 2, 3, 3)); s = LogicalTensor(3, DataType.f32, (1, 2, 1, 1), property_type=c)
    >>> z = LogicalTensor(4, DataType.f32, (1, 2, 3, 3))
    >>> g = Graph()
    >>> _ = g.add_op(Op(0, OpKind.Convolution, [x, w], [y], {"strides": [1, 1], "pads_begin": [0, 0],
    ...     "pads_end": [0, 0], "dilations": [1, 1], "data_format": "NCX", "weights_format": "OIX"}))
    >>> _ = g.add_op(Op(1, OpKind.Multiply, [y, s], [z]))
    >>> g.bind_constant(1, np.ones((2, 2, 1, 1))); g.bind_constant(3, [[[[2.0]], [[3.0]]]]); g.finalize()
    >>> folded = fold_into_weights(g)
    >>> [op.kind.value for op in folded.ops], folded.ops[0].outputs[0].id
    (['Convolution'], 4)
    >>> folded.constant_values[folded.ops[0].inputs[1].id][:, 0, 0, 0].tolist()
    [2.0, 3.0]
"""
from __future__ import annotations

import numpy as np

from ..ir import GraphIR
from ..logical_tensor import LogicalTensor, PropertyType
from ..op import Op, OpKind
from ._util import FreshIds, as_ir, clone_op, covered_by, frozen, output_ids

_SCALES = frozenset({OpKind.Multiply})
_SHIFTS = frozenset({OpKind.Add, OpKind.BiasAdd})


def fold_into_weights(graph) -> GraphIR:
    """A new IR in which per-channel scales and shifts (BatchNormInference, Multiply, Add, BiasAdd
    by bound constants) after a Convolution with bound weights are folded into its weights and
    bias (see the module docstring); the input graph is not modified.

    Example:
        >>> from tilefuse.graph_api import Graph
        >>> g = Graph(); g.finalize(); fold_into_weights(g).ops
        []
    """
    graph = as_ir(graph, "fold_into_weights")
    values = graph.constant_values
    replaced, dropped, new_values = {}, set(), {}
    fresh = FreshIds(graph)
    for conv in graph.topological_ops():
        if conv.kind is not OpKind.Convolution or not all(t.id in values for t in conv.inputs[1:]):
            continue
        weights = values[conv.inputs[1].id]
        if weights.dtype.kind != "f":
            continue
        channel = 1 if conv.attrs.get("data_format", "NXC") == "NCX" else conv.outputs[0].ndim - 1
        chain = _affine_chain(graph, conv.outputs[0], channel, values)
        if chain is None:
            continue
        scale, shift, y, ops = chain
        out_axis = 0 if conv.attrs.get("weights_format", "XIO") == "OIX" else weights.ndim - 1
        along = [1] * weights.ndim
        along[out_axis] = -1
        bias = values[conv.inputs[2].id].astype(np.float64) if len(conv.inputs) > 2 else 0.0
        w_new, b_new = fresh.constant(conv.inputs[1], weights.shape), fresh.constant(conv.inputs[1], scale.shape)
        new_values[w_new.id] = frozen((weights.astype(np.float64) * scale.reshape(along)).astype(weights.dtype))
        new_values[b_new.id] = frozen((bias * scale + shift).astype(weights.dtype).reshape(-1))
        replaced[conv.id] = clone_op(conv, inputs=[conv.inputs[0], w_new, b_new], outputs=[y], folded=ops)
        dropped.update(op.id for op in ops)
    if not replaced:
        return graph
    return graph.with_ops([replaced.get(op.id, op) for op in graph.ops if op.id not in dropped], new_values)


def fold_batch_norms(graph) -> GraphIR:
    """A new IR in which each BatchNormInference of bound constants (one no convolution could
    take, see ``fold_into_weights``), with the per-channel Multiply and Add by bound constants
    after it, is one Multiply and one Add by per-channel constants computed now: no square
    root, division or mean is left to run. The input graph is not modified.

    Example:
        >>> from tilefuse.graph_api import Graph
        >>> g = Graph(); g.finalize(); fold_batch_norms(g).ops
        []
    """
    graph = as_ir(graph, "fold_batch_norms")
    values = graph.constant_values
    replaced, dropped, new_values = {}, set(), {}
    fresh = FreshIds(graph)
    for bn in graph.topological_ops():
        x = bn.inputs[0] if bn.kind is OpKind.BatchNormInference else None
        if x is None or not x.is_known() or x.dtype.numpy.kind != "f":
            continue
        channel = 1 if bn.attrs.get("data_format", "NXC") == "NCX" else x.ndim - 1
        chain = _affine_chain(graph, x, channel, values, first=bn)
        if chain is None:
            continue
        scale, shift, y, ops = chain
        along = (x.shape[channel],) + (1,) * (x.ndim - 1 - channel)
        s, b, mid = fresh.constant(x, along), fresh.constant(x, along), fresh.variable(x)
        new_values[s.id] = frozen(scale.reshape(along).astype(x.dtype.numpy))
        new_values[b.id] = frozen(shift.reshape(along).astype(x.dtype.numpy))
        covers = covered_by([bn, *ops])
        replaced[bn.id] = [Op(bn.id, OpKind.Multiply, [x, s], [mid], name=bn.name, covers=covers),
                           Op(fresh.op_id(), OpKind.Add, [mid, b], [y], name=bn.name, covers=covers)]
        dropped.update(op.id for op in ops)
    if not replaced:
        return graph
    ops = []
    for op in graph.ops:
        if op.id in replaced:
            ops += replaced[op.id]
        elif op.id not in dropped:
            ops.append(op)
    return graph.with_ops(ops, new_values)


def _affine_chain(graph: GraphIR, y: LogicalTensor, channel: int, values: dict, first=None):
    """(scale, shift, the chain's output, its ops) of the per-channel affine ops of bound
    constants that follow ``y`` one after another (each the only reader of what it reads, no
    graph output read in between), starting with ``first`` when given; None when there is none."""
    outputs = set(output_ids(graph))
    scale = shift = None
    ops = []
    while y.is_known():
        if first is not None and not ops:
            op = first                  # it reads y; y's other readers keep reading y
        else:
            readers = graph.consumers(y.id)
            op = readers[0] if len(readers) == 1 and y.id not in outputs else None
        affine = None if op is None else _channel_affine(graph, op, y, channel, values)
        if affine is None:
            break
        s, b = affine
        scale, shift = (s, b) if scale is None else (scale * s, shift * s + b)
        ops.append(op)
        y = op.outputs[0]
    return None if not ops else (scale, shift, y, ops)


def _channel_affine(graph: GraphIR, op, y: LogicalTensor, channel: int, values: dict):
    """(scale, shift) per channel (float64 vectors of ``y``'s channel count) that ``op`` applies
    to ``y``, or None when it is not a per-channel affine op of bound constants."""
    n = y.shape[channel]
    others = [t for t in op.inputs if t.id != y.id]
    if op.kind is OpKind.BatchNormInference:
        if op.inputs[0].id != y.id or not all(t.id in values for t in op.inputs[1:]):
            return None
        fmt = op.attrs.get("data_format", "NXC")
        if (1 if fmt == "NCX" else y.ndim - 1) != channel:
            return None
        gamma, beta, mean, var = (values[t.id].astype(np.float64).reshape(-1) for t in op.inputs[1:])
        if any(v.shape != (n,) for v in (gamma, beta, mean, var)):
            return None
        scale = gamma / np.sqrt(var + float(op.attrs["epsilon"]))
        return scale, beta - mean * scale
    if op.kind not in _SCALES | _SHIFTS or len(op.inputs) != 2 or len(others) != 1 or others[0].id not in values:
        return None
    if op.kind is OpKind.BiasAdd and op.inputs[0].id != y.id:
        return None
    if op.outputs[0].shape != y.shape:        # the constant broadcasts into y, not y into it
        return None
    per_channel = _per_channel(values[others[0].id], y, channel, op.kind is OpKind.BiasAdd)
    if per_channel is None:
        return None
    if op.kind in _SCALES:
        return per_channel, np.zeros(n)
    return np.ones(n), per_channel


def _per_channel(c: np.ndarray, y: LogicalTensor, channel: int, bias_add: bool):
    """``c`` as one float64 value per channel of ``y`` when it varies along no other axis (a
    BiasAdd's vector is the channels), else None."""
    if c.dtype.kind not in "fiu":
        return None
    if bias_add:
        return c.astype(np.float64).reshape(-1) if c.shape == (y.shape[channel],) else None
    if c.ndim > y.ndim:
        return None
    shape = (1,) * (y.ndim - c.ndim) + c.shape
    if any(d != 1 for k, d in enumerate(shape) if k != channel) or shape[channel] not in (1, y.shape[channel]):
        return None
    return np.broadcast_to(c.astype(np.float64).reshape(-1), (y.shape[channel],)).copy()
