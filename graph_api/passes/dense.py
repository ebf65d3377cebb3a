"""Dense layers as one GEMM over the flattened rows.

A MatMul of an N-D activation ``(..., M, K)`` with 2-D weights ``(K, N)`` computes the same
product for every leading index: as it comes, the complex template tiles only the M rows and
loops over the leading dims, so ViT's ``(197, 1, 768) @ (768, 2304)`` is 197 one-row products
(4.7 ms, 0.48x onnxruntime; flattened: 2.1 ms, 1.06x), and short blocks leave their last row
tile part empty (ConvNeXt's 14-row blocks fill 3 tiles of 6 rows 78%). This pass reshapes the
activation to ``(prod(...) * M, K)`` (a view: the rows are contiguous), multiplies, runs the
elementwise epilogue (bias, activation, layer scale, residual add: ops reading the product
alone, a chain or a diamond such as GELU's, ``epilogue.elementwise_epilogue``; their other
operands broadcast along the last axis, a constant's value viewed as a vector, or of the full
shape, read as rows) on those rows, and reshapes its end back: the template tiles all the rows
at once, with the epilogue still fused into the GEMM's partition (a reshape inside it would
make the template tile the N-D shape again). A tensor the pass already computes as rows is
read as such (the next block's input, a residual), and a LayerNorm over the last axis of such
rows runs on them: blocks chain with no reshape back and forth (``simplify_algebra`` after
this pass merges the reshapes left around other ops). ConvNeXt-T, in the model: 35.0 ->
32.1 ms (its 56x56 MLPs 6.06 -> 4.57 ms); Swin-T 39.8 -> 36.9 ms.

Rules: the weights (input 1) have rank 2 and the activation rank 3 or more, with more than one
block of fewer than ``FEW_ROWS`` rows; transpose_a is off (a transposed activation's rows are
not contiguous); a bias input (Gemm's) has rank 2 at most and broadcasts along the last axis
only; an op in another product's epilogue (an add of two of them) ends this one's.

Example:
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
    >>> x = LogicalTensor(0, DataType.f32, (197, 1, 768)); w = LogicalTensor(1, DataType.f32, (768, 2304))
    >>> y = LogicalTensor(2, DataType.f32, (197, 1, 2304))
    >>> g = Graph(); _ = g.add_op(Op(0, OpKind.MatMul, [x, w], [y])); g.finalize()
    >>> [(op.kind.value, op.outputs[0].shape) for op in flatten_dense_rows(g).topological_ops()]
    [('StaticReshape', (197, 768)), ('MatMul', (197, 2304)), ('StaticReshape', (197, 1, 2304))]
"""
from __future__ import annotations

import math

from ..ir import GraphIR
from ..op import Op, OpKind
from ..ops.schema import get_attr
from ._util import FreshIds, as_ir, clone_op, frozen, reshape, view_before
from .epilogue import flatten_epilogue

FEW_ROWS = 128
"""Blocks of fewer rows are flattened. In the models: ConvNeXt-T's blocks of 14 to 56 rows run
7.6% faster flattened as a whole; BERT-base's blocks of 384 rows (a batch of 8 sequences) ran
5% slower flattened (its 768-wide dense layers with their bias, 36 of them: 366 -> 384 ms)."""


def _flattenable(graph: GraphIR, op: Op) -> bool:
    if op.kind is not OpKind.MatMul or len(op.inputs) < 2 or get_attr(op, "transpose_a"):
        return False
    a, b, out = (graph.tensor(t.id) for t in (op.inputs[0], op.inputs[1], op.outputs[0]))
    if not (a.is_known() and b.is_known() and out.is_known()) or b.ndim != 2 or a.ndim < 3:
        return False
    if math.prod(a.shape[:-2]) == 1 or a.shape[-2] >= FEW_ROWS:
        return False                    # one block of rows already, or blocks tall enough
    if len(op.inputs) > 2:
        bias = graph.tensor(op.inputs[2].id)
        if not bias.is_known() or bias.ndim > 2 or math.prod(bias.shape[:-1]) != 1:
            return False
    return True


def _rides_along(other, tensor) -> bool:
    """Whether ``other`` broadcasts against ``tensor`` along its last axis only, or has its
    whole shape."""
    if not other.is_known():
        return False
    return tuple(other.shape) == tuple(tensor.shape) or math.prod(other.shape[:-1]) == 1


def flatten_dense_rows(graph) -> GraphIR:
    """A new graph in which every MatMul of an N-D activation with 2-D weights multiplies the
    activation's rows flattened into one axis, its elementwise epilogue computed on those rows
    too (see the module docstring); the input graph is not modified and its output tensors
    keep their ids.

    Example:
        >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (1, 128, 768)); w = LogicalTensor(1, DataType.f32, (768, 64))
        >>> y = LogicalTensor(2, DataType.f32, (1, 128, 64))
        >>> g = Graph(); _ = g.add_op(Op(0, OpKind.MatMul, [x, w], [y])); g.finalize()
        >>> [op.kind.value for op in flatten_dense_rows(g).ops]     # one block of rows already
        ['MatMul']
    """
    graph = as_ir(graph, "flatten_dense_rows")
    targets = [op for op in graph.topological_ops() if _flattenable(graph, op)]
    if not targets:
        return graph
    outs = {t.id for t in graph.get_output_ports()}
    fresh = FreshIds(graph)
    replaced, claimed = {}, set()
    rows_of = {}        # an N-D tensor -> the tensor of its rows this pass computes (not a view of it)
    values, new_values, vectors = graph.constant_values, {}, {}

    def rows(t) -> tuple:
        return (math.prod(t.shape[:-1]), t.shape[-1])

    def as_rows(t, into):
        """``t``'s rows: computed as rows already, else a view made before ``into``."""
        return rows_of.get(t.id) or view_before(fresh, replaced, t, rows(t), into)

    def as_vector(t, into):
        """An operand broadcast along the last axis, ``(1, 1, N)``, as ``(N,)``: a constant's
        value viewed so (a reshape op before the epilogue would cut it from the product's
        partition where the operand comes first: ConvNeXt's ``gamma * x``), else a view."""
        if t.id not in values:
            return view_before(fresh, replaced, t, t.shape[-1:], into)
        if t.id not in vectors:
            vectors[t.id] = fresh.constant(t, t.shape[-1:])
            new_values[vectors[t.id].id] = frozen(values[t.id].reshape(t.shape[-1:]))
        return vectors[t.id]
    for op in targets:
        a, out = graph.tensor(op.inputs[0].id), graph.tensor(op.outputs[0].id)
        norm = _row_norm(graph, a)
        if norm is not None and a.id not in rows_of and norm.inputs[0].id in rows_of:
            rows_of[a.id] = fresh.variable(a, rows(a))      # each row's norm on the rows, read as they are
            replaced.setdefault(norm.id, []).extend([
                clone_op(norm, inputs=[rows_of[norm.inputs[0].id], *norm.inputs[1:]], outputs=[rows_of[a.id]],
                         attrs={**norm.attrs, "begin_norm_axis": -1}),
                reshape(fresh, rows_of[a.id], a, norm.name)])          # for its other readers
        flat_a, current = as_rows(a, op), fresh.variable(out, rows(out))
        replaced.setdefault(op.id, []).append(clone_op(op, inputs=[flat_a, *op.inputs[1:]], outputs=[current]))

        def operand(t, nxt, out=out):
            if tuple(t.shape) == tuple(out.shape):      # a residual: its rows too
                return as_rows(t, nxt)
            return as_vector(t, nxt) if len(t.shape) > 1 else t      # (1, 1, N) against rows: (N,)
        final, flat = flatten_epilogue(graph, op, current, lambda t, out=out: _rides_along(t, out), operand, fresh,
                                       replaced, claimed, outs)
        rows_of[final.id] = flat
    ops = [new for op in graph.ops for new in replaced.get(op.id, [op])]
    return graph.with_ops(ops, new_values)


def _row_norm(graph: GraphIR, a):
    """The LayerNorm over the last axis that computes ``a`` (its one output; its gamma and beta
    vectors), else None: it normalizes each row apart, so it can run on the rows."""
    norm = graph.producer(a.id)
    if norm is None or norm.kind is not OpKind.LayerNorm or len(norm.outputs) != 1:
        return None
    if get_attr(norm, "begin_norm_axis") not in (-1, a.ndim - 1):
        return None
    if any(not graph.tensor(t.id).is_known() or graph.tensor(t.id).ndim != 1 for t in norm.inputs[1:]):
        return None
    return norm
