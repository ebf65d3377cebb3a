"""Scaled dot-product attention written out op by op, as one ScaledDotProductAttention op.

Exporters spell attention as ``MatMul(Q, K^T) [-> Multiply or Divide by a scale] [-> Add a
mask] -> SoftMax over the last axis -> MatMul(., V)``. As they come, those are three
partitions (the scores' product with its epilogue, the softmax, the second product), and the
scores (``heads x Sq x Sk``: 54 MB per layer for Whisper's 1500 frames) are written to memory
and read back twice. As one op they are one kernel whose scores stay in cache
(``schedule/templates/attention.py``).

Rules: every intermediate tensor is read by the chain alone and is no graph output; every
shape is known and the data type one the compiler builds (f32, f64); the first MatMul has no
bias and does not transpose its first operand (its second, K^T or, transposed, K, is read as
it is: ``key_transposed``); the second has no bias and transposes neither operand, and the
probabilities are its first; the scale is a bound constant of one element (a Divide has the
scores first), which keeps the scores' shape; the mask is any tensor of the scores' data type
that broadcasts one way to the scores (BERT's ``(1, 1, 1, S)``, T5's position bias, GPT-2's
causal mask folded to a constant); the SoftMax is over the last axis, with no stats output.
Anything else stays as it is.

Example:
    >>> import numpy as np
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType
    >>> t = lambda i, s, c=False: LogicalTensor(i, DataType.f32, s, property_type=PropertyType.constant if c else PropertyType.variable)
    >>> q, k, v, scale = t(0, (2, 5, 8)), t(1, (2, 8, 5)), t(2, (2, 5, 8)), t(3, (), True)
    >>> g = Graph()
    >>> _ = g.add_op(Op(0, OpKind.MatMul, [q, k], [t(4, (2, 5, 5))]))
    >>> _ = g.add_op(Op(1, OpKind.Multiply, [t(4, (2, 5, 5)), scale], [t(5, (2, 5, 5))]))
    >>> _ = g.add_op(Op(2, OpKind.SoftMax, [t(5, (2, 5, 5))], [t(6, (2, 5, 5))], {"axis": -1}))
    >>> _ = g.add_op(Op(3, OpKind.MatMul, [t(6, (2, 5, 5)), v], [t(7, (2, 5, 8))]))
    >>> g.bind_constant(3, np.array(0.125, np.float32)); g.finalize()
    >>> [(op.kind.value, op.attrs) for op in fuse_attention(g).ops]
    [('ScaledDotProductAttention', {'scale': 0.125, 'key_transposed': True})]
"""
from __future__ import annotations

import numpy as np

from ..ir import GraphIR
from ..logical_tensor import DataType
from ..op import Op, OpKind
from ..ops.schema import get_attr
from ._util import FreshIds, as_ir, covered_by, output_ids

COMPUTED = (DataType.f32, DataType.f64)


class _Chain:
    """Walks back from a SoftMax through the ops it may absorb."""

    def __init__(self, graph: GraphIR, outs: set):
        self.graph, self.outs = graph, outs

    def sole_producer(self, tensor_id: int, kinds) -> Op | None:
        """The op of one of ``kinds`` producing ``tensor_id``, when the tensor has no other
        reader and is no graph output."""
        producer = self.graph.producer(tensor_id)
        if producer is None or producer.kind not in kinds or tensor_id in self.outs or \
                len(self.graph.consumers(tensor_id)) != 1 or len(producer.outputs) != 1:
            return None
        return producer

    def scale(self, op: Op, scores_id: int) -> float | None:
        """The factor a Multiply or Divide applies to tensor ``scores_id``: a bound constant of
        one element that leaves the shape as it is; else None."""
        ids = [t.id for t in op.inputs]
        if len(ids) != 2 or ids.count(scores_id) != 1 or (op.kind is OpKind.Divide and ids[0] != scores_id):
            return None
        other = self.graph.tensor(ids[1 - ids.index(scores_id)])
        value = self.graph.constant_values.get(other.id)
        if value is None or value.size != 1 or not other.is_known() or \
                len(other.shape) > len(op.outputs[0].shape):
            return None
        factor = float(np.asarray(value, np.float64).reshape(-1)[0])
        if op.kind is OpKind.Divide:
            return 1.0 / factor if factor != 0 else None
        return factor

    def mask(self, op: Op, scores_id: int):
        """The tensor an Add adds to tensor ``scores_id``, when it broadcasts one way to it."""
        ids = [t.id for t in op.inputs]
        if len(ids) != 2 or ids.count(scores_id) != 1:
            return None
        other = self.graph.tensor(ids[1 - ids.index(scores_id)])
        scores = self.graph.tensor(scores_id)
        if not other.is_known() or other.dtype is not scores.dtype or len(other.shape) > len(scores.shape) or \
                any(n not in (1, m) for n, m in zip(other.shape[::-1], scores.shape[::-1])):
            return None
        return other


def _softmax_over_last(graph: GraphIR, op: Op) -> bool:
    x = graph.tensor(op.inputs[0].id)
    return op.kind is OpKind.SoftMax and len(op.outputs) == 1 and x.is_known() and x.ndim >= 2 and \
        get_attr(op, "axis") % x.ndim == x.ndim - 1 and get_attr(op, "mode") == "none"


def _plain_matmul(op: Op) -> bool:
    """A MatMul of two operands of rank >= 2, no bias, the first not transposed."""
    return op.kind is OpKind.MatMul and len(op.inputs) == 2 and not get_attr(op, "transpose_a") and \
        all(t.is_known() and t.ndim >= 2 and t.dtype in COMPUTED for t in (*op.inputs, *op.outputs))


def _scores(chain: _Chain, tensor_id: int):
    """(ops, scale, the MatMul) of the scaled scores ``tensor_id``: a plain MatMul, or a
    Multiply or Divide of one by a scale; else None."""
    op = chain.sole_producer(tensor_id, (OpKind.Multiply, OpKind.Divide, OpKind.MatMul))
    if op is None or op.kind is OpKind.MatMul:
        return ([op], 1.0, op) if op is not None and _plain_matmul(op) else None
    for t in op.inputs:
        product = chain.sole_producer(t.id, (OpKind.MatMul,))
        factor = chain.scale(op, t.id) if product is not None and _plain_matmul(product) else None
        if factor is not None:
            return [op, product], factor, product
    return None


def _attention(graph: GraphIR, softmax: Op, outs: set, fresh: FreshIds):
    """The ops of the chain around ``softmax`` and the attention op that replaces them, or None."""
    chain = _Chain(graph, outs)
    probabilities = softmax.outputs[0].id
    readers = graph.consumers(probabilities)
    if probabilities in outs or len(readers) != 1 or not _plain_matmul(readers[0]) or \
            [t.id for t in readers[0].inputs].count(probabilities) != 1 or readers[0].inputs[0].id != probabilities \
            or get_attr(readers[0], "transpose_b"):
        return None
    context, logits, mask, ops = readers[0], softmax.inputs[0].id, None, []
    found = _scores(chain, logits)
    add = chain.sole_producer(logits, (OpKind.Add,)) if found is None else None
    if add is not None:
        scored = [(t, _scores(chain, t.id)) for t in add.inputs]
        scored = [(t, s) for t, s in scored if s is not None]
        if len(scored) == 1 and len(add.inputs) == 2:
            mask, found = chain.mask(add, scored[0][0].id), scored[0][1]
            ops.append(add)
    if found is None or (add is not None and mask is None):
        return None
    scale_ops, scale, product = found
    query, key = (graph.tensor(t.id) for t in product.inputs)
    inputs = [query, key, graph.tensor(context.inputs[1].id)] + ([mask] if mask is not None else [])
    if len({t.dtype for t in inputs + [context.outputs[0]]}) != 1:
        return None
    ops = scale_ops[::-1] + ops + [softmax, context]
    attention = Op(fresh.op_id(), OpKind.ScaledDotProductAttention, inputs, [graph.tensor(context.outputs[0].id)],
                   {"scale": scale, "key_transposed": not get_attr(product, "transpose_b")},
                   name=context.name, covers=covered_by(ops))
    return ops, attention


def fuse_attention(graph) -> GraphIR:
    """A new graph in which attention written out op by op is one ScaledDotProductAttention op
    (see the module docstring); the input graph is not modified, its output tensors keep their
    ids.

    Example:
        >>> from tilefuse.graph_api import Graph
        >>> g = Graph(); g.finalize()
        >>> fuse_attention(g).ops
        []
    """
    graph = as_ir(graph, "fuse_attention")
    outs, fresh, replaced = set(output_ids(graph)), FreshIds(graph), {}
    for softmax in filter(lambda op: _softmax_over_last(graph, op), graph.topological_ops()):
        found = _attention(graph, softmax, outs, fresh)
        if found is None:
            continue
        ops, attention = found
        replaced.update({o.id: None for o in ops})
        replaced[ops[-1].id] = attention        # where the chain ended: every input is made before
    if not replaced:
        return graph
    return graph.with_ops([new for new in (replaced.get(op.id, op) for op in graph.ops) if new is not None])
