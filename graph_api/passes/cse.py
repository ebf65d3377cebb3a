"""Common-subexpression elimination.

Example:
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
    >>> t = [LogicalTensor(i, DataType.f32, (2,)) for i in range(4)]
    >>> g = Graph()
    >>> _ = g.add_op(Op(0, OpKind.Exp, [t[0]], [t[1]])); _ = g.add_op(Op(1, OpKind.Exp, [t[0]], [t[2]]))
    >>> _ = g.add_op(Op(2, OpKind.Add, [t[1], t[2]], [t[3]]))
    >>> g.finalize()
    >>> eliminate_common_subexpressions(g).ops
    [Op(0, Exp, in=[0], out=[1]), Op(2, Add, in=[1, 1], out=[3])]
"""
from __future__ import annotations

from ..ir import GraphIR
from ..op import Op, OpKind
from ..ops.schema import get_attr, get_schema
from ._util import as_ir, output_ids, substitute

# End has no outputs; Wildcard's semantics are unknown; Dropout may be random.
_NEVER_MERGED = frozenset({OpKind.End, OpKind.Wildcard, OpKind.Dropout})


def _freeze(v):
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    return (type(v).__name__, v)


def _key(graph: GraphIR, op: Op, subst: dict):
    """What makes two ops interchangeable: kind, attributes (schema defaults filled in), input
    ids (after earlier merges) and output data types and shapes."""
    names = sorted(set(get_schema(op.kind).attrs) | set(op.attrs))
    attrs = tuple((n, _freeze(get_attr(op, n) if n not in op.attrs else op.attrs[n])) for n in names)
    ins = tuple(subst.get(t.id, t.id) for t in op.inputs)
    outs = tuple((graph.tensor(t.id).dtype, graph.tensor(t.id).shape) for t in op.outputs)
    return op.kind, attrs, ins, outs


def eliminate_common_subexpressions(graph: GraphIR) -> GraphIR:
    """A new finalized graph in which an op with the same kind, attributes (defaults resolved
    through the schema), input tensor ids and output types/shapes as an earlier op (in topological
    order) is dropped and its consumers read the earlier op's outputs. Chains collapse in one
    call. An op is not merged when one of its outputs is a graph output, nor when the earlier
    op has an unconsumed output (it would stop being a graph output). End, Wildcard and Dropout
    ops are never merged. The input graph is not modified.

    Example:
        >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
        >>> t = [LogicalTensor(i, DataType.f32, (2, 3)) for i in range(5)]
        >>> g = Graph()
        >>> _ = g.add_op(Op(0, OpKind.SoftMax, [t[0]], [t[1]], {"axis": 1}))
        >>> _ = g.add_op(Op(1, OpKind.SoftMax, [t[0]], [t[2]]))    # axis defaults to 1
        >>> _ = g.add_op(Op(2, OpKind.Add, [t[1], t[2]], [t[3]]))
        >>> g.finalize()
        >>> [op.id for op in eliminate_common_subexpressions(g).ops]
        [0, 2]
    """
    graph = as_ir(graph, "eliminate_common_subexpressions")
    outs = set(output_ids(graph))
    first: dict = {}
    subst: dict[int, int] = {}
    dropped: set[int] = set()
    for op in graph.topological_ops():
        if op.kind in _NEVER_MERGED or not op.outputs:
            continue
        try:
            key = _key(graph, op, subst)
            hash(key)
        except TypeError:            # unhashable attribute value: leave the op alone
            continue
        earlier = first.get(key)
        if earlier is None:
            first[key] = op
            continue
        if any(t.id in outs for t in op.outputs):
            continue
        if any(not graph.consumers(t.id) for t in earlier.outputs):
            continue
        dropped.add(op.id)
        for dup, keep in zip(op.outputs, earlier.outputs):
            subst[dup.id] = keep.id
    ops = [substitute(graph, op, subst) for op in graph.ops if op.id not in dropped]
    return graph.with_ops(ops)
