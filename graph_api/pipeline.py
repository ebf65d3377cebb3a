"""The graph pipeline: what happens to a finalized graph before its partitions compile, in order.

``STEPS`` names the steps, each a plain function from graph IR to graph IR:

1. ``infer shapes``: every tensor gets its shape (``shape_inference.with_inferred_shapes``);
   each op's shape rule reads its normalized attributes;
2. ``check sizes``: no tensor over the size limit (``limits.check_tensor_bytes``);
3. ``normalize``: every op's attributes in canonical form (``ops.normalize_op``: defaults
   filled in, ``auto_pad`` resolved to explicit pads, oneDNN's 12-value defaults trimmed);
   it follows shape inference because resolving ``auto_pad`` needs the input shapes;
4. ``passes``: constant folding, folds into weights, algebraic simplification, grouped
   convolutions split, layout planning, common subexpressions, dead ops (``passes.DEFAULT``;
   the "debug" policy runs none).

Then the graph is cut two ways:

* ``partition``: the optimized IR into the compiler's partitions (``ir_partition``), a
  ``PartitionedGraph`` that ``compiler.compile_graph`` builds and the autotuner tunes;
* ``partition.user_partitions``: the user's ops into the oneDNN-style ``Partition`` objects
  of ``Graph.get_partitions()``. They are grouped as the compiler's partitions are, but over the
  graph optimized without layout planning (whose transposes are no op of the user's), and
  each stands for user ops only: an op a pass removed belongs to the partition of the nearest
  surviving op downstream of it (the MatMul a transpose was folded into), else upstream. Their
  ports are the user's logical tensors; each compiles its ops as a graph of their own, with
  every step above (layout conversions live inside the compiled partition).

Example:
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
    >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, None)
    >>> z = LogicalTensor(2, DataType.f32, None)
    >>> g = Graph(); _ = g.add_op(Op(0, OpKind.Exp, [x], [y])); _ = g.add_op(Op(1, OpKind.ReLU, [y], [z]))
    >>> g.finalize()
    >>> [name for name, _ in STEPS]
    ['infer shapes', 'check sizes', 'normalize', 'passes']
    >>> [(p.kind, [t.shape for t in p.output_ports]) for p in partition(g).partitions]
    [('injective', [(2, 3)])]
"""
from __future__ import annotations

from .ir import GraphIR
from .ir_partition import PartitionedGraph, partition_ir
from .logical_tensor import GraphError
from .limits import check_tensor_bytes
from .ops import normalize_op
from .passes import DEFAULT, run_passes
from .shape_inference import with_inferred_shapes


def _passes(ir: GraphIR, policy: str, passes=DEFAULT) -> GraphIR:
    return run_passes(ir, passes) if policy == "fusion" else ir


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


def prepare(graph, policy: str = "fusion", passes=DEFAULT) -> GraphIR:
    """The IR of a finalized graph after every step of ``STEPS`` (``passes``: the graph passes
    the "passes" step runs).

    Example:
        >>> from tilefuse.graph_api import Graph
        >>> g = Graph(); g.finalize(); prepare(g).ops
        []
    """
    if not graph.is_finalized:
        raise GraphError("partitioning needs a finalized graph; call finalize() first")
    if policy not in ("fusion", "debug"):
        raise ValueError(f"unknown partition policy {policy!r}; expected 'fusion' or 'debug'")
    ir = graph if isinstance(graph, GraphIR) else graph.ir()
    for name, step in STEPS:
        ir = step(ir, policy, passes) if name == "passes" else step(ir, policy)
    return ir


def partition(graph, policy: str = "fusion", passes=DEFAULT) -> PartitionedGraph:
    """A finalized graph optimized by every step of ``STEPS`` (``passes``: the graph passes
    the "passes" step runs) and cut into the compiler's partitions: what ``compile_graph``
    builds.

    Example:
        >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (4, 8)); w = LogicalTensor(1, DataType.f32, (8, 2))
        >>> y = LogicalTensor(2, DataType.f32, (4, 2)); z = LogicalTensor(3, DataType.f32, (4, 2))
        >>> g = Graph(); _ = g.add_op(Op(0, OpKind.MatMul, [x, w], [y])); _ = g.add_op(Op(1, OpKind.ReLU, [y], [z]))
        >>> g.finalize(); [(p.kind, len(p.ops)) for p in partition(g).partitions]
        [('complex', 2)]
    """
    return partition_ir(prepare(graph, policy, passes), policy)
