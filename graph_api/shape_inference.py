"""Shape inference: output shapes of ops from their input shapes and (normalized) attributes, by
each kind's shape rule in the op registry (``graph_api.ops``), with oneDNN's rules. Given
output shapes are checked.

Example:
    >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind, Graph
    >>> a = LogicalTensor(0, DataType.f32, (8, 1, 3)); b = LogicalTensor(1, DataType.f32, (5, 1))
    >>> g = Graph(); _ = g.add_op(Op(0, OpKind.Add, [a, b], [LogicalTensor(2, DataType.f32, None)]))
    >>> infer_shapes(g)[2].shape
    (8, 5, 3)
"""
from __future__ import annotations


from .ir import GraphIR
from .logical_tensor import GraphError, LayoutType, LogicalTensor
from .op import Op
from .ops import REGISTRY, RuleError, normalize_op, op_def
from .ops._shapes import broadcast_shapes

__all__ = ["INFERABLE_KINDS", "broadcast_shapes", "infer_op_shapes", "infer_shapes", "with_inferred_shapes"]


def infer_shapes(graph) -> dict[int, LogicalTensor]:
    """Every logical tensor of the graph (inputs included) by id, with output shapes filled in
    where an op's input shapes are known and its kind is in INFERABLE_KINDS. A given output
    shape that disagrees with the inferred one, or inputs the op cannot take, raise GraphError
    naming the op. The graph is not changed.

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind, Graph
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 4))
        >>> g = Graph(); _ = g.add_op(Op(5, OpKind.ReLU, [x], [y]))
        >>> infer_shapes(g)
        Traceback (most recent call last):
        ...
        tilefuse.graph_api.logical_tensor.GraphError: op 5 (ReLU): output 0 (tensor 1) is given shape [2, 4] but ...
    """
    tensors = graph.tensors
    for op in graph.topological_ops():
        rule = op_def(op.kind).shape
        ins = [tensors[t.id] for t in op.inputs]
        if rule is None or not all(t.is_known() for t in ins):
            continue
        in_shapes = [t.shape for t in ins]
        try:
            shapes = rule(normalize_op(op, in_shapes), in_shapes)
        except RuleError as e:
            raise GraphError(f"op {op.id} ({op.kind.value}): {e}") from None
        for i, (out, shape) in enumerate(zip(op.outputs, shapes)):
            if shape is None:
                continue
            given, shape = tensors[out.id], tuple(int(d) for d in shape)
            if given.shape is not None and (len(given.shape) != len(shape) or any(
                    g >= 0 and g != d for g, d in zip(given.shape, shape))):
                raise GraphError(f"op {op.id} ({op.kind.value}): output {i} (tensor {out.id}) is given shape "
                                 f"{list(given.shape)} but the inputs make it {list(shape)}")
            if not given.is_known() or given.layout_type in (LayoutType.any, LayoutType.undef):
                tensors[out.id] = given.with_shape(shape)
    return tensors


def infer_op_shapes(op: Op, input_shapes) -> list:
    """The output shapes of ``op`` (a tuple per output, None where unknown) for the given input
    shapes (all known); GraphError naming the op when its inputs do not fit, or when its kind
    has no shape rule.

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (3, 1)); y = LogicalTensor(1, DataType.f32, None)
        >>> infer_op_shapes(Op(0, OpKind.Expand, [x], [y], {"shape": [2, 1, 4]}), [(3, 1)])
        [(2, 3, 4)]
    """
    rule = op_def(op.kind).shape
    if rule is None:
        raise GraphError(f"op {op.id} ({op.kind.value}): no shape rule for this op kind")
    input_shapes = [tuple(s) for s in input_shapes]
    try:
        shapes = rule(normalize_op(op, input_shapes), input_shapes)
    except RuleError as e:
        raise GraphError(f"op {op.id} ({op.kind.value}): {e}") from None
    return [None if sh is None else tuple(int(d) for d in sh) for sh in shapes]


def with_inferred_shapes(graph) -> GraphIR:
    """The graph (a ``Graph`` or its IR) as an IR whose ops carry the tensors ``infer_shapes``
    completes.

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind, Graph
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, None)
        >>> g = Graph(); _ = g.add_op(Op(0, OpKind.Tanh, [x], [y]))
        >>> with_inferred_shapes(g).ops[0].outputs[0].shape
        (2, 3)
    """
    tensors = infer_shapes(graph)
    ir = graph if isinstance(graph, GraphIR) else graph.ir()
    return ir.with_ops([Op(op.id, op.kind, [tensors[t.id] for t in op.inputs], [tensors[t.id] for t in op.outputs],
                           op.attrs, op.name, op.covers) for op in ir.ops])





INFERABLE_KINDS = frozenset(k for k, d in REGISTRY.items() if d.shape is not None)
"""The op kinds with a shape rule."""
