"""Reductions over a channels-last map's two spatial axes split into rows, then the rows.

A global pooling (squeeze-and-excitation's squeeze, a classifier's average pool) over a
channels-last map, ``ReduceMean(x, axes=[1, 2])`` of (N, H, W, C), is a column reduction: its
kernel sums the map a vector of channels at a time down every pixel, and can only share the
channels between threads. The convolution that wrote the map shared its rows: each core holds
the rows it wrote in its own cache, so the pooling read half of the map from the other core's,
at a third of the speed of the same reduction run again (EfficientNet-B0's 14x14x480 squeeze:
10 us after the convolution, 3 us run twice). Here it becomes a reduction of each row
(``axes=[2]``, kept: N, H, 1, C), whose kernel shares the rows between threads as the
convolution did, then of the H row results (the original axes and ``keep_dims``), which keeps
the op's id and output. The mean of the rows' means is the mean (each row has W pixels); sum,
max and min split alike. A profile names the model's op in the rows' reduction, which does the
work, and ``ROWS_POOLED`` in the other.

Example:
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
    >>> x = LogicalTensor(0, DataType.f32, (1, 14, 14, 32)); y = LogicalTensor(1, DataType.f32, (1, 1, 1, 32))
    >>> g = Graph(); _ = g.add_op(Op(0, OpKind.ReduceMean, [x], [y], {"axes": [1, 2], "keep_dims": True}))
    >>> g.finalize()
    >>> [(op.kind.value, op.attrs["axes"], op.outputs[0].shape) for op in split_spatial_reductions(g).topological_ops()]
    [('ReduceMean', [2], (1, 14, 1, 32)), ('ReduceMean', [1, 2], (1, 1, 1, 32))]
"""
from __future__ import annotations

from ..ir import GraphIR
from ..op import Op, OpKind
from ..ops.schema import get_attr
from ._util import FreshIds, as_ir

SPLIT_KINDS = frozenset({OpKind.ReduceMean, OpKind.ReduceSum, OpKind.ReduceMax, OpKind.ReduceMin})
MIN_CHANNELS = 8        # the rows' reduction vectorizes over the channels: at least a short vector of them
MIN_PIXELS = 128        # a smaller map is read as fast whole: the second reduction's launch costs more
ROWS_POOLED = "(rows pooled)"   # the name of the reduction of the rows: the model's op is the rows' own


def split_spatial_reductions(graph) -> GraphIR:
    """A new IR in which each mean, sum, max or min over axes 1 and 2 of a 4-D map (channels
    last) reduces each row first, then the rows (see the module docstring); the input graph is
    not modified.

    Example:
        >>> from tilefuse.graph_api import Graph
        >>> g = Graph(); g.finalize(); split_spatial_reductions(g).ops
        []
    """
    graph = as_ir(graph, "split_spatial_reductions")
    fresh, ops, changed = FreshIds(graph), [], False
    for op in graph.topological_ops():
        if not _splits(graph, op):
            ops.append(op)
            continue
        x = op.inputs[0]
        n, h, _, c = x.shape
        rows = fresh.variable(x, (n, h, 1, c))
        ops += [Op(fresh.op_id(), op.kind, [x], [rows], {"axes": [2], "keep_dims": True}, name=op.name,
                   covers=op.covers),
                Op(op.id, op.kind, [rows], list(op.outputs), {**op.attrs, "axes": [1, 2]}, name=ROWS_POOLED)]
        changed = True
    return graph.with_ops(ops, {}) if changed else graph


def _splits(graph: GraphIR, op: Op) -> bool:
    """Whether ``op`` reduces axes 1 and 2 (and only those) of a 4-D map computed at run time
    of at least ``MIN_PIXELS`` pixels (rows of 2 or more, 2 rows or more) by at least
    ``MIN_CHANNELS`` channels."""
    if op.kind not in SPLIT_KINDS or len(op.inputs) != 1 or not op.inputs[0].is_known():
        return False
    x = op.inputs[0]
    if len(x.shape) != 4 or x.id in graph.constant_values:
        return False
    axes = sorted(a % 4 for a in get_attr(op, "axes"))
    _, h, w, c = x.shape
    return axes == [1, 2] and h >= 2 and w >= 2 and h * w >= MIN_PIXELS and c >= MIN_CHANNELS
