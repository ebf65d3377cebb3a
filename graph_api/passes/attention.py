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

``fold_transposes_into_attention`` then lets each attention op read its operands through the
StaticTransposes that feed it and write its output through the one after it: the heads a model
splits from its projections (``(B, S, H*D)`` reshaped, a view, to ``(B, S, H, D)`` and transposed
to ``(B, H, S, D)``, K to ``(B, H, D, S)``) and merges back after (transposed to ``(B, S, H, D)``,
reshaped to ``(B, S, H*D)``) are then read and written where they lie, and no copy is made.

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
from ..ops.attention import OPERAND_ORDERS
from ..ops.schema import get_attr
from ._util import FreshIds, as_ir, clone_op, copy_attrs, covered_by, output_ids, transpose_order

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


def fold_transposes_into_attention(graph) -> GraphIR:
    """A new graph in which each ScaledDotProductAttention op reads its query, key and value
    through the StaticTransposes producing them and writes its output through a StaticTranspose
    reading it (their orders composed into the op's ``query_order``, ``key_order``,
    ``value_order`` and ``dst_order``), each transpose folded when the attention alone reads
    what it writes and that is no graph output. A value's or an output's transpose that would
    move the last axis (the one the kernel reads and writes in vectors) stays as it is, and so
    does an operand's transpose of data movement's output (``COPIES``, through reshapes): the
    copy is made anyway, and transposes as it goes. The input graph is not modified; its
    output tensors keep their ids.

    Example:
        >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
        >>> t = lambda i, s: LogicalTensor(i, DataType.f32, s)
        >>> g = Graph()
        >>> _ = g.add_op(Op(0, OpKind.StaticTranspose, [t(0, (1, 5, 2, 8))], [t(1, (1, 2, 5, 8))], {"order": [0, 2, 1, 3]}))
        >>> _ = g.add_op(Op(1, OpKind.ScaledDotProductAttention, [t(1, (1, 2, 5, 8))] * 3, [t(2, (1, 2, 5, 8))]))
        >>> _ = g.add_op(Op(2, OpKind.StaticTranspose, [t(2, (1, 2, 5, 8))], [t(3, (1, 5, 2, 8))], {"order": [0, 2, 1, 3]}))
        >>> g.finalize()
        >>> (attention,) = fold_transposes_into_attention(g).ops
        >>> [t.id for t in attention.inputs], [t.id for t in attention.outputs], attention.attrs["dst_order"]
        ([0, 0, 0], [3], [0, 2, 1, 3])
    """
    graph = as_ir(graph, "fold_transposes_into_attention")
    chain, replaced = _Chain(graph, set(output_ids(graph))), {}
    for op in graph.topological_ops():
        if op.kind is OpKind.ScaledDotProductAttention:
            folded = _folded(chain, op)
            if folded is not None:
                new, removed = folded
                replaced.update({o.id: None for o in removed})
                replaced[op.id] = new
    if not replaced:
        return graph
    return graph.with_ops([new for new in (replaced.get(op.id, op) for op in graph.ops) if new is not None])


COPIES = (OpKind.Slice, OpKind.StaticTranspose, OpKind.Concat, OpKind.Gather, OpKind.Pad, OpKind.Expand,
          OpKind.Reorder)
"""Data movement that writes a copy (a Slice that is no contiguous block, say)."""


def _copied_anyway(graph: GraphIR, tensor_id: int) -> bool:
    """Whether the tensor a transpose reads is, through reshapes, the output of data movement
    (GPT-2's heads sliced from one projection of Q, K and V): the kernel that copies it then
    transposes it too, at no cost, where the attention would read it across the grain."""
    producer = graph.producer(tensor_id)
    while producer is not None and producer.kind is OpKind.StaticReshape:
        producer = graph.producer(producer.inputs[0].id)
    return producer is not None and producer.kind in COPIES


def _composed(order, transpose: Op, reading: bool) -> list:
    """The order of an operand read through ``order`` (empty: as it is) from a tensor that
    ``transpose`` made (``reading``), or of an output written through ``order`` and then
    transposed by ``transpose``."""
    order = list(order) or list(range(len(transpose.outputs[0].shape)))
    inner = transpose_order(transpose)
    return [inner[a] for a in order] if reading else [order[a] for a in inner]


def _folded(chain: _Chain, op: Op):
    """(the attention op with the transposes around it folded in, the transposes), or None."""
    inputs, attrs, removed = list(op.inputs), copy_attrs(op.attrs), []
    for slot, name in enumerate(OPERAND_ORDERS):
        source, order, transposes = inputs[slot], attrs.get(name, get_attr(op, name)), []
        while (transpose := chain.sole_producer(source.id, (OpKind.StaticTranspose,))) is not None \
                and transpose.inputs[0].is_known():
            composed = _composed(order, transpose, reading=True)
            if name == "value_order" and composed[-1] != len(composed) - 1:
                break                       # the value's rows would be read across the grain
            source, order = chain.graph.tensor(transpose.inputs[0].id), composed
            transposes.append(transpose)
        if transposes and not _copied_anyway(chain.graph, source.id):
            inputs[slot], attrs[name] = source, order
            removed += transposes
    outputs = list(op.outputs)
    while len(readers := chain.graph.consumers(outputs[0].id)) == 1 and outputs[0].id not in chain.outs and \
            readers[0].kind is OpKind.StaticTranspose and len(readers[0].outputs) == 1:
        order = _composed(attrs.get("dst_order", get_attr(op, "dst_order")), readers[0], reading=False)
        if order[-1] != len(order) - 1:
            break                           # the output's rows would be written across the grain
        outputs, attrs["dst_order"] = [chain.graph.tensor(readers[0].outputs[0].id)], order
        removed.append(readers[0])
    if not removed:
        return None
    return clone_op(op, inputs=inputs, outputs=outputs, attrs=attrs, folded=removed), removed
