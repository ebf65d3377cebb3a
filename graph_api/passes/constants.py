"""Constant folding of constant-property subgraphs.

Two things happen, in one walk over the ops in topological order:

* an op whose every input has a bound value (``Graph.bind_constant``) is evaluated now by the
  reference interpreter and disappears: its outputs become constant graph inputs with those
  values bound (not when an output is a graph output, which must stay produced);
* an op whose every input is constant-property (bound or not: oneDNN's constant weights are
  known only at execution) gets constant-property outputs, so later stages know the whole
  subgraph computes the same values on every execution and may compute it once.

End, Wildcard and Dropout ops are never folded (no outputs, unknown semantics, randomness).

Example:
    >>> import numpy as np
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType
    >>> c = PropertyType.constant
    >>> w = LogicalTensor(0, DataType.f32, (2,), property_type=c)
    >>> w2 = LogicalTensor(1, DataType.f32, (2,))
    >>> x = LogicalTensor(2, DataType.f32, (2,)); y = LogicalTensor(3, DataType.f32, (2,))
    >>> g = Graph()
    >>> _ = g.add_op(Op(0, OpKind.Exp, [w], [w2])); _ = g.add_op(Op(1, OpKind.Add, [x, w2], [y]))
    >>> g.bind_constant(0, [0.0, 1.0]); g.finalize()
    >>> folded = fold_constants(g)
    >>> folded.ops, [round(float(v), 3) for v in folded.constant_values[1]]
    ([Op(1, Add, in=[2, 1], out=[3])], [1.0, 2.718])
"""
from __future__ import annotations

import numpy as np

from .. import reference
from ..ir import GraphIR
from ..logical_tensor import GraphError, LogicalTensor, PropertyType
from ..op import OpKind
from ._util import as_ir, clone_op, output_ids

_NEVER_FOLDED = frozenset({OpKind.End, OpKind.Wildcard, OpKind.Dropout})


def _as_constant(t: LogicalTensor) -> LogicalTensor:
    return LogicalTensor(t.id, t.dtype, t.shape, t.layout_type, PropertyType.constant, t.strides)


def fold_constants(graph: GraphIR) -> GraphIR:
    """A new finalized graph with constant subgraphs folded (bound values) or marked constant
    (unbound constant inputs); the input graph is not modified. An op the reference interpreter
    cannot evaluate is kept (and only marked).

    Example:
        >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType
        >>> w = LogicalTensor(0, DataType.f32, (2, 2), property_type=PropertyType.constant)
        >>> wt = LogicalTensor(1, DataType.f32, (2, 2)); x = LogicalTensor(2, DataType.f32, (2, 2))
        >>> y = LogicalTensor(3, DataType.f32, (2, 2))
        >>> g = Graph(); _ = g.add_op(Op(0, OpKind.StaticTranspose, [w], [wt], {"order": [1, 0]}))
        >>> _ = g.add_op(Op(1, OpKind.MatMul, [x, wt], [y])); g.finalize()
        >>> fold_constants(g).tensor(1).property_type.value
        'constant'
    """
    graph = as_ir(graph, "fold_constants")
    outs = set(output_ids(graph))
    values = graph.constant_values
    constant = {tid for tid, t in graph.tensors.items()
                if t.property_type is PropertyType.constant and graph.producer(tid) is None}
    retyped: dict[int, LogicalTensor] = {}
    folded: set[int] = set()
    folded_outputs: list[int] = []
    for op in graph.topological_ops():
        if op.kind in _NEVER_FOLDED or not op.inputs or not all(t.id in constant for t in op.inputs):
            continue
        for t in op.outputs:
            constant.add(t.id)
            retyped[t.id] = _as_constant(graph.tensor(t.id))
        if all(t.id in values for t in op.inputs) and not any(t.id in outs for t in op.outputs) \
                and all(graph.tensor(t.id).is_known() for t in op.outputs):
            try:
                results = reference.evaluate(op, [values[t.id] for t in op.inputs])
            except GraphError:
                continue
            folded.add(op.id)
            values.update({t.id: v for t, v in zip(op.outputs, results)})
            folded_outputs += [t.id for t in op.outputs]

    def tensor(t):
        return retyped.get(t.id, graph.tensor(t.id))
    ops = [clone_op(op, inputs=[tensor(t) for t in op.inputs], outputs=[tensor(t) for t in op.outputs])
           for op in graph.ops if op.id not in folded]
    folded_values = {}
    for tid in folded_outputs:
        array = np.array(values[tid], dtype=graph.tensor(tid).dtype.numpy, order="C")   # kernels read row-major
        array.setflags(write=False)
        folded_values[tid] = array
    return graph.with_ops(ops, folded_values)     # keeps the bound inputs still read
