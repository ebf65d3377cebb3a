"""The graph pipeline: what happens to a finalized graph before its partitions compile, in order.

``STEPS`` names the steps, each a plain function from graph IR to graph IR:

1. ``infer shapes``: every tensor gets its shape (``shape_inference.with_inferred_shapes``);
   each op's shape rule reads its normalized attributes;
2. ``check sizes``: no tensor over the size limit (``limits.check_tensor_bytes``);
3. ``normalize``: every op's attributes in canonical form (``ops.normalize_op``: defaults
   filled in, ``auto_pad`` resolved to explicit pads, oneDNN's 12-value defaults trimmed);
   it follows shape inference because resolving ``auto_pad`` needs the input shapes;
4. ``passes``: constant folding, algebraic simplification, common subexpressions, dead ops
   (``passes.DEFAULT``; the "debug" policy runs none).

Then ``partition``: every op is classified from its compute definition (``lowering.op_class``),
ops are grouped by the fusion rules (``fusion.group_ops``) into ``Partition`` objects; each
partition lowers to a compute DAG and compiles when ``Partition.compile`` is called
(``graph_api.build``). Layout planning is not a step yet: every partition reads and writes
the layouts its graph gives.

Example:
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
    >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, None)
    >>> z = LogicalTensor(2, DataType.f32, None)
    >>> g = Graph(); _ = g.add_op(Op(0, OpKind.Exp, [x], [y])); _ = g.add_op(Op(1, OpKind.ReLU, [y], [z]))
    >>> g.finalize()
    >>> [name for name, _ in STEPS]
    ['infer shapes', 'check sizes', 'normalize', 'passes']
    >>> [(p.get_kind(), [op.id for op in p.get_ops()]) for p in partition_graph(g)]
    [('injective', [0, 1])]
"""
from __future__ import annotations

from .fusion import dominant_class, group_ops
from .ir import GraphIR
from .logical_tensor import GraphError, PropertyType
from .limits import check_tensor_bytes
from .lowering import op_class
from .ops import normalize_op
from .partition import Partition
from .passes import run_passes
from .shape_inference import with_inferred_shapes


def _passes(ir: GraphIR, policy: str) -> GraphIR:
    return run_passes(ir) if policy == "fusion" else ir


def _check_sizes(ir: GraphIR, policy: str) -> GraphIR:
    for t in ir.tensors.values():
        if t.is_known():
            check_tensor_bytes(f"logical tensor {t.id}", t.shape, t.dtype.itemsize)
    return ir


def _normalize(ir: GraphIR, policy: str) -> GraphIR:
    return ir.with_ops([normalize_op(op, [t.shape for t in op.inputs]) for op in ir.ops])


STEPS = (("infer shapes", lambda ir, policy: with_inferred_shapes(ir)), ("check sizes", _check_sizes),
         ("normalize", _normalize), ("passes", _passes))
"""The steps before partitioning, in order: (name, function(ir, policy) -> ir)."""


def prepare(graph, policy: str = "fusion") -> GraphIR:
    """The IR of a finalized graph after every step of ``STEPS``.

    Example:
        >>> from tilefuse.graph_api import Graph
        >>> g = Graph(); g.finalize(); prepare(g).ops
        []
    """
    if not graph.is_finalized:
        raise GraphError("get_partitions needs a finalized graph; call finalize() first")
    ir = graph if isinstance(graph, GraphIR) else graph.ir()
    for _, step in STEPS:
        ir = step(ir, policy)
    return ir


def partition_graph(graph, policy: str = "fusion") -> list[Partition]:
    """The partitions of a finalized graph, in topological order.

    With ``policy="fusion"`` the graph first goes through the passes (``passes.DEFAULT``:
    constant folding, algebraic simplification, CSE, dead-op elimination); the partitions hold
    the rewritten ops and compile those, while ``get_ops()`` still names the user's ops: an op a
    pass removed belongs to the partition of the nearest surviving op downstream of it (the
    MatMul a transpose was folded into), else upstream. ``policy="debug"`` runs no pass and puts
    each op alone.

    Example:
        >>> # graph.get_partitions("fusion")
    """
    optimized = prepare(graph, policy)
    ops = optimized.topological_ops()
    classes = {id(op): op_class(op) for op in ops}

    def rows_of(op):
        return op.outputs[0].shape if op.outputs else None

    def constant_of(op):
        return bool(op.outputs) and all(t.property_type is PropertyType.constant for t in op.outputs)
    groups = group_ops(ops, lambda op: classes[id(op)], optimized.producer, policy, rows_of, constant_of)
    owners = _owners(graph, {op.id: k for k, group in enumerate(groups) for op in group})
    user_ops = [[] for _ in groups]
    for op in graph.topological_ops():
        user_ops[owners[op.id]].append(op)
    graph_outputs = {t.id for t in optimized.get_output_ports()}
    return [Partition(optimized, group, dominant_class({classes[id(op)] for op in group}), graph_outputs,
                      graph.engine_kind, user_ops=mine)
            for group, mine in zip(groups, user_ops)]


def _owners(graph, group_of: dict) -> dict:
    """The group index of every op of the user's ``graph``: its own when a pass kept it (by op
    id), else that of the nearest kept op downstream (breadth first), else upstream."""
    owners = {}
    for op in graph.topological_ops():
        if op.id in group_of:
            owners[op.id] = group_of[op.id]
            continue
        for step in (lambda o: [c for t in o.outputs for c in graph.consumers(t.id)],
                     lambda o: [p for t in o.inputs if (p := graph.producer(t.id)) is not None]):
            frontier, seen = [op], {op.id}
            while frontier and op.id not in owners:
                nxt = []
                for o in frontier:
                    for n in step(o):
                        if n.id in group_of:
                            owners[op.id] = group_of[n.id]
                            break
                        if n.id not in seen:
                            seen.add(n.id)
                            nxt.append(n)
                    if op.id in owners:
                        break
                frontier = nxt
            if op.id in owners:
                break
        owners.setdefault(op.id, 0)       # an island every pass removed: the first partition
    return owners
