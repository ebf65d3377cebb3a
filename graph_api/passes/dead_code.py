"""Dead-code elimination: drop the ops whose results never reach the wanted outputs.

Example:
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
    >>> t = [LogicalTensor(i, DataType.f32, (2,)) for i in range(3)]
    >>> g = Graph()
    >>> _ = g.add_op(Op(0, OpKind.ReLU, [t[0]], [t[1]])); _ = g.add_op(Op(1, OpKind.Exp, [t[0]], [t[2]]))
    >>> _ = g.add_op(Op(2, OpKind.End, [t[1]], []))
    >>> g.finalize()
    >>> [op.id for op in eliminate_dead_ops(g).ops]
    [0, 2]
"""
from __future__ import annotations

from ..ir import GraphIR
from ..logical_tensor import GraphError
from ..op import OpKind
from ._util import as_ir, clone_op


def default_outputs(graph: GraphIR) -> list[int]:
    """The tensor ids a graph is asked for: the inputs of its End ops when it has any, else all
    its output ports.

    Example:
        >>> from tilefuse.graph_api import Graph
        >>> default_outputs(Graph())
        []
    """
    ends = [op for op in graph.ops if op.kind is OpKind.End]
    if ends:
        return list(dict.fromkeys(t.id for op in ends for t in op.inputs))
    return [t.id for t in graph.get_output_ports()]


def eliminate_dead_ops(graph: GraphIR, outputs=None) -> GraphIR:
    """A new finalized graph holding only the ops of ``graph`` that (transitively) produce one of
    the tensor ids ``outputs`` (default: ``default_outputs(graph)``). An End op is kept when its
    input is wanted; every other op is kept when one of its outputs is needed. Ops keep their ids,
    names and insertion order; the input graph is not modified. Note that a kept multi-output op
    whose other outputs lose all their consumers makes those outputs extra output ports.

    GraphError when ``outputs`` names a tensor the graph does not have.

    Example:
        >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
        >>> t = [LogicalTensor(i, DataType.f32, (2,)) for i in range(4)]
        >>> g = Graph()
        >>> _ = g.add_op(Op(0, OpKind.ReLU, [t[0]], [t[1]])); _ = g.add_op(Op(1, OpKind.Exp, [t[1]], [t[2]]))
        >>> _ = g.add_op(Op(2, OpKind.Abs, [t[0]], [t[3]]))
        >>> g.finalize()
        >>> [op.id for op in eliminate_dead_ops(g, outputs=[3]).ops]
        [2]
        >>> [op.id for op in eliminate_dead_ops(g).ops]
        [0, 1, 2]
    """
    graph = as_ir(graph, "eliminate_dead_ops")
    wanted = set(default_outputs(graph) if outputs is None else outputs)
    for tid in wanted:
        graph.tensor(tid)                     # GraphError for an unknown id
    live = set(wanted)
    keep: set[int] = set()
    for op in reversed(graph.topological_ops()):
        if op.kind is OpKind.End:
            alive = bool(op.inputs) and all(t.id in wanted for t in op.inputs)
        else:
            alive = any(t.id in live for t in op.outputs)
        if alive:
            keep.add(op.id)
            live.update(t.id for t in op.inputs)
    return graph.with_ops([clone_op(op) for op in graph.ops if op.id in keep])
