"""Graph-to-graph passes over the graph IR (``graph_api.ir.GraphIR``; a finalized ``Graph`` is
taken as its IR). Each pass is a function ``pass(graph) -> GraphIR`` that returns a new IR (the
input is never modified) whose output ports keep their tensor ids and values. ``run_passes``
traces them on request as the loop passes are traced (``tensorir.trace``: a line per pass on
stderr with its milliseconds and the ops before and after; at level 2 the graph after each
pass, as ``str(GraphIR)`` prints it), by its ``trace`` argument or ``TILEFUSE_TRACE``.

Example:
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
    >>> t = [LogicalTensor(i, DataType.f32, (2,)) for i in range(4)]
    >>> g = Graph()
    >>> _ = g.add_op(Op(0, OpKind.Exp, [t[0]], [t[1]])); _ = g.add_op(Op(1, OpKind.Exp, [t[0]], [t[2]]))
    >>> _ = g.add_op(Op(2, OpKind.Add, [t[1], t[2]], [t[3]]))
    >>> g.finalize()
    >>> [op.id for op in run_passes(g).ops]
    [0, 2]
"""
from __future__ import annotations

from tilefuse.tensorir import trace as _trace

from .algebraic import simplify_algebra
from .attention import fold_transposes_into_attention, fuse_attention
from .channel_scale import scale_weights_by_channel_gates
from .constants import fold_constants
from .cse import eliminate_common_subexpressions
from .dead_code import default_outputs, eliminate_dead_ops
from .dense import flatten_dense_rows
from .groups import split_grouped_convolutions
from .half_floats import compute_half_floats_in_f32
from .layout import plan_layouts
from .norms import recognize_norms
from .pointwise import flatten_pointwise_convolutions
from .reciprocals import multiply_by_reciprocals
from .spatial_reductions import split_spatial_reductions
from .weights import fold_batch_norms, fold_into_weights

DEFAULT = (compute_half_floats_in_f32, fold_constants, multiply_by_reciprocals, recognize_norms, fold_into_weights,
           fold_batch_norms, simplify_algebra, fuse_attention, fold_transposes_into_attention,
           split_grouped_convolutions, plan_layouts, split_spatial_reductions, scale_weights_by_channel_gates,
           flatten_pointwise_convolutions, flatten_dense_rows, simplify_algebra, eliminate_common_subexpressions,
           eliminate_dead_ops)


def run_passes(graph, passes=DEFAULT, *, trace=None):
    """Apply ``passes`` (functions ``graph -> GraphIR``) in order and return the last result (the
    input graph itself when ``passes`` is empty). ``trace``: False, True (times), 2 or "ir"
    (times and the graph after each pass), None (``TILEFUSE_TRACE`` decides).

    Example:
        >>> from tilefuse.graph_api import Graph
        >>> g = Graph(); g.finalize()
        >>> run_passes(g).ops, run_passes(g, passes=()) is g
        ([], True)
    """
    return _trace.run(passes, graph, pipeline="graph", size=len, unit="ops", trace=trace)


__all__ = ["DEFAULT", "compute_half_floats_in_f32", "default_outputs", "eliminate_common_subexpressions", "eliminate_dead_ops",
           "flatten_dense_rows", "fold_transposes_into_attention", "fuse_attention", "flatten_pointwise_convolutions",
           "fold_batch_norms", "fold_constants", "fold_into_weights", "multiply_by_reciprocals", "plan_layouts",
           "recognize_norms", "run_passes",
           "scale_weights_by_channel_gates",
           "simplify_algebra", "split_grouped_convolutions", "split_spatial_reductions"]
