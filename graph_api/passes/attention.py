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
Anything else stays as it is. A scalar the query or the key is multiplied (or divided) by on
their way from the projections, through transposes and reshapes, is such a scale too and goes
into the op's (``(c Q) K^T = c (Q K^T)``, the mask added after): ViT multiplies both its Q
and K heads by ``D^-1/4``, Swin its Q windows by ``D^-1/2``, Whisper its Q projection; the
movement between is then left to read the tensor unscaled, and the copy the multiply made is
gone. A scale of the value or of more than one element stays as it is.

``fold_transposes_into_attention`` then lets each attention op read its operands through the
StaticTransposes that feed it and write its output through the one after it: the heads a model
splits from its projections (``(B, S, H*D)`` reshaped, a view, to ``(B, S, H, D)`` and transposed
to ``(B, H, S, D)``, K to ``(B, H, D, S)``) and merges back after (transposed to ``(B, S, H, D)``,
reshaped to ``(B, S, H*D)``) are then read and written where they lie, and no copy is made.
Reshapes that only add or drop unit axes between the transposes (ViT's ``(H, S, D)`` heads
made ``(1, H, S, D)``) are read through too: the attention reads the tensor before them
reshaped to its rank, a view.

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
from ..ops.movement import slice_view
from ..ops.schema import get_attr
from ._util import FreshIds, as_ir, clone_op, copy_attrs, covered_by, output_ids, transpose_order, view_before

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
        if value is None or value.size != 1 or not other.is_known() or not op.outputs[0].is_known() or \
                self.graph.tensor(scores_id).shape != op.outputs[0].shape:
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
    ops, moved = scale_ops[::-1] + ops + [softmax, context], {}
    for slot in (0, 1):
        if [t.id for t in inputs].count(inputs[slot].id) == 1:
            inputs[slot], factor, scalings = _unscaled(chain, inputs[slot], moved)
            scale, ops = scale * factor, scalings + ops
    attention = Op(fresh.op_id(), OpKind.ScaledDotProductAttention, inputs, [graph.tensor(context.outputs[0].id)],
                   {"scale": scale, "key_transposed": not get_attr(product, "transpose_b")},
                   name=context.name, covers=covered_by(ops))
    return ops, attention, moved


MOVEMENT = (OpKind.StaticTranspose, OpKind.StaticReshape)


def _unscaled(chain: _Chain, operand, moved: dict):
    """(the tensor the query or key ``operand`` is before the scalars it is multiplied by
    through transposes and reshapes, the product of those scalars, their Multiply and Divide
    ops): ``moved`` (op id -> op) takes the movement op reading each scaled tensor, made to
    read the tensor unscaled; the attention reads the returned tensor."""
    factor, scalings, reader, tensor = 1.0, [], None, operand
    while (producer := chain.sole_producer(tensor.id, MOVEMENT + (OpKind.Multiply, OpKind.Divide))) is not None:
        if producer.kind in MOVEMENT:
            reader, tensor = producer, chain.graph.tensor(producer.inputs[0].id)
            continue
        found = [(t, f) for t in producer.inputs if (f := chain.scale(producer, t.id)) is not None]
        if not found:
            break
        tensor, factor = chain.graph.tensor(found[0][0].id), factor * found[0][1]
        scalings.append(producer)
        if reader is None:
            operand = tensor
        else:
            moved[reader.id] = clone_op(reader, inputs=[tensor, *reader.inputs[1:]])
    return operand, factor, scalings


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
        ops, attention, moved = found
        replaced.update({o.id: None for o in ops})
        replaced.update(moved)
        replaced[ops[-1].id] = attention        # where the chain ended: every input is made before
    if not replaced:
        return graph
    return graph.with_ops([new for new in (replaced.get(op.id, op) for op in graph.ops) if new is not None])


def fold_transposes_into_attention(graph) -> GraphIR:
    """A new graph in which each ScaledDotProductAttention op reads its query, key and value
    through the StaticTransposes producing them, and the reshapes adding or dropping unit axes
    between them, and writes its output through a StaticTranspose reading it (their orders
    composed into the op's ``query_order``, ``key_order``, ``value_order`` and ``dst_order``;
    an operand whose transposes change its rank read through a new reshape, a view, of the
    tensor before them), each op folded when the attention alone reads what it writes and that
    is no graph output. A value's or an output's transpose that would move the last axis (the
    one the kernel reads and writes in vectors) stays as it is, and so does an operand's
    transpose of data movement's output (``COPIES``, through reshapes; not a Slice that is a
    view): the copy is made anyway, and transposes as it goes. The input graph is not
    modified; its output tensors keep their ids.

    Example:
        >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
        >>> t = lambda i, s: LogicalTensor(i, DataType.f32, s)
        >>> g = Graph()
        >>> for k in range(3):       # heads (1, 5, 2, 8) -> (1, 2, 5, 8) of Q, K and V
        ...     _ = g.add_op(Op(k, OpKind.StaticTranspose, [t(k, (1, 5, 2, 8))], [t(10 + k, (1, 2, 5, 8))],
        ...                     {"order": [0, 2, 1, 3]}))
        >>> _ = g.add_op(Op(3, OpKind.ScaledDotProductAttention, [t(10 + k, (1, 2, 5, 8)) for k in range(3)],
        ...                 [t(20, (1, 2, 5, 8))]))
        >>> _ = g.add_op(Op(4, OpKind.StaticTranspose, [t(20, (1, 2, 5, 8))], [t(21, (1, 5, 2, 8))], {"order": [0, 2, 1, 3]}))
        >>> g.finalize()
        >>> (attention,) = fold_transposes_into_attention(g).ops
        >>> [t.id for t in attention.inputs], [t.id for t in attention.outputs], attention.attrs["dst_order"]
        ([0, 1, 2], [21], [0, 2, 1, 3])
    """
    graph = as_ir(graph, "fold_transposes_into_attention")
    chain, fresh, replaced = _Chain(graph, set(output_ids(graph))), FreshIds(graph), {}
    for op in graph.topological_ops():
        if op.kind is OpKind.ScaledDotProductAttention:
            folded = _folded(chain, op, fresh, replaced)
            if folded is not None:
                new, removed = folded
                replaced.update({o.id: [] for o in removed})
                replaced.setdefault(op.id, []).append(new)
    if not replaced:
        return graph
    return graph.with_ops([new for op in graph.ops for new in replaced.get(op.id, [op])])


COPIES = (OpKind.Slice, OpKind.StaticTranspose, OpKind.Concat, OpKind.Gather, OpKind.Pad, OpKind.Expand,
          OpKind.Reorder)
"""Data movement that writes a copy (a Slice that is no contiguous block, say)."""


def _copied_anyway(graph: GraphIR, tensor_id: int) -> bool:
    """Whether the tensor a transpose reads is, through reshapes, the output of data movement
    (GPT-2's heads sliced from one projection of Q, K and V): the kernel that copies it then
    transposes it too, at no cost, where the attention would read it across the grain. A
    Slice that is a view (``slice_view``: ViT's Q, K and V, blocks of one tensor) copies
    nothing."""
    producer = graph.producer(tensor_id)
    while producer is not None and producer.kind is OpKind.StaticReshape:
        producer = graph.producer(producer.inputs[0].id)
    return producer is not None and producer.kind in COPIES and slice_view(producer) is None


def _unit_axes(reshape: Op) -> list | None:
    """For each axis of a StaticReshape's output, the axis of its input it is (None: a unit
    axis), when the reshape only adds or drops unit axes; else None.

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor
        >>> x, y = LogicalTensor(0, DataType.f32, (12, 1, 5)), LogicalTensor(1, DataType.f32, (1, 12, 5))
        >>> _unit_axes(Op(0, OpKind.StaticReshape, [x], [y], {"shape": [1, 12, 5]}))
        [None, 0, 2]
    """
    source, shape = reshape.inputs[0].shape, reshape.outputs[0].shape
    ins, outs = ([k for k, n in enumerate(s) if n != 1] for s in (source, shape))
    if [source[k] for k in ins] != [shape[k] for k in outs]:
        return None
    axes = [None] * len(shape)
    for i, o in zip(ins, outs):
        axes[o] = i
    return axes


def _read_through(chain: _Chain, operand, order, along_grain: bool):
    """(the tensor, the axis of it each axis of ``operand`` read through ``order`` is (None: a
    unit axis), the ops between) for the farthest StaticTranspose producing ``operand`` through
    transposes and reshapes that add or drop unit axes, each tensor between read by the next op
    alone; ``along_grain``: the last axis read stays the last of each tensor but unit axes (a
    value's rows); None when no transpose is found."""
    axes = list(order) or list(range(len(operand.shape)))
    tensor, ops, farthest = operand, [], None
    while (mover := chain.sole_producer(tensor.id, MOVEMENT)) is not None and mover.inputs[0].is_known() and \
            mover.outputs[0].is_known():
        inner = transpose_order(mover) if mover.kind is OpKind.StaticTranspose else _unit_axes(mover)
        if inner is None:
            break
        read = [None if a is None else inner[a] for a in axes]
        source = chain.graph.tensor(mover.inputs[0].id)
        if along_grain and (read[-1] is None or any(n != 1 for n in source.shape[read[-1] + 1:])):
            break                           # the value's rows would be read across the grain
        tensor, axes, ops = source, read, ops + [mover]
        if mover.kind is OpKind.StaticTranspose:
            farthest = tensor, axes, ops
    return farthest


def _viewed(chain: _Chain, fresh: FreshIds, replaced: dict, tensor, axes, into: Op, along_grain: bool):
    """(a tensor holding ``tensor``'s data, the order in which an attention op ``into`` reads
    it, the reshapes it replaces) for an operand whose axes are ``tensor``'s ``axes`` (None:
    unit axes); when they are no permutation of ``tensor``'s axes, or move its last
    ``along_grain``, the tensor is ``tensor`` reshaped (a view) to its dims of more than one
    element after as many unit dims as needed, in place of the reshapes in a row read by the
    next alone that make ``tensor`` (a partition of reshapes in a row is a copy)."""
    rank = len(axes)
    if None not in axes and len(tensor.shape) == rank and (not along_grain or axes[-1] == rank - 1):
        return tensor, axes, []
    kept = [k for k, n in enumerate(tensor.shape) if n != 1]
    units = iter(range(rank - len(kept)))
    order = [rank - len(kept) + kept.index(a) if a in kept else next(units) for a in axes]
    shape = (1,) * (rank - len(kept)) + tuple(tensor.shape[k] for k in kept)
    reshapes = []
    while (producer := chain.sole_producer(tensor.id, (OpKind.StaticReshape,))) is not None:
        tensor = chain.graph.tensor(producer.inputs[0].id)
        reshapes.append(producer)
    return view_before(fresh, replaced, tensor, shape, into), order, reshapes


def _written(order, transpose: Op) -> list:
    """The order of an output written through ``order`` (empty: as it is) and then transposed
    by ``transpose``."""
    order = list(order) or list(range(len(transpose.outputs[0].shape)))
    return [order[a] for a in transpose_order(transpose)]


def _folded(chain: _Chain, op: Op, fresh: FreshIds, replaced: dict):
    """(the attention op with the transposes around it folded in, the ops folded), or None; the
    reshapes it reads through instead go into ``replaced`` (op id -> the ops in its place)."""
    inputs, attrs, removed = list(op.inputs), copy_attrs(op.attrs), []
    for slot, name in enumerate(OPERAND_ORDERS):
        if [t.id for t in op.inputs].count(inputs[slot].id) != 1:
            continue                        # what it reads twice may be read in two ways
        along_grain = name == "value_order"
        found = _read_through(chain, inputs[slot], attrs.get(name, get_attr(op, name)), along_grain)
        if found is not None and not _copied_anyway(chain.graph, found[0].id):
            inputs[slot], attrs[name], reshapes = _viewed(chain, fresh, replaced, *found[:2], op, along_grain)
            removed += found[2] + reshapes
    outputs = list(op.outputs)
    while len(readers := chain.graph.consumers(outputs[0].id)) == 1 and outputs[0].id not in chain.outs and \
            readers[0].kind is OpKind.StaticTranspose and len(readers[0].outputs) == 1:
        order = _written(attrs.get("dst_order", get_attr(op, "dst_order")), readers[0])
        if order[-1] != len(order) - 1:
            break                           # the output's rows would be written across the grain
        outputs, attrs["dst_order"] = [chain.graph.tensor(readers[0].outputs[0].id)], order
        removed.append(readers[0])
    if not removed:
        return None
    return clone_op(op, inputs=inputs, outputs=outputs, attrs=attrs, folded=removed), removed
