"""Dense layers as one GEMM over the flattened rows.

A MatMul of an N-D activation ``(..., M, K)`` with 2-D weights ``(K, N)`` computes the same
product for every leading index: as it comes, the complex template tiles only the M rows and
loops over the leading dims, so ViT's ``(197, 1, 768) @ (768, 2304)`` is 197 one-row products
(4.7 ms, 0.48x onnxruntime; flattened: 2.1 ms, 1.06x). Where M fills the register tiles
(``FEW_ROWS`` or more) the N-D kernel is as fast or faster (ConvNeXt's ``(1, 56, 56, 96) @
(96, 384)`` with GELU: 1.47 ms as it comes, 1.66 ms flattened), so only shorter blocks are
flattened. This pass reshapes the activation to ``(prod(...) * M, K)`` (a view: the rows are
contiguous), multiplies, runs the elementwise epilogue (bias, activation, residual add: ops
reading the product alone, their other operands broadcast along the last axis or of the full
shape, reshaped to rows too) on those rows, and reshapes its end back: the template tiles all
the rows at once, with the epilogue still fused into the GEMM's partition (a reshape inside it
would make the template tile the N-D shape again).

Rules: the weights (input 1) have rank 2 and the activation rank 3 or more, with more than one
block of fewer than ``FEW_ROWS`` rows; transpose_a is off (a transposed activation's rows are
not contiguous); a bias input (Gemm's) has rank 2 at most and broadcasts along the last axis
only; an epilogue operand broadcast along the last axis with more dims is read as its last
axis, ``(1, 1, N)`` as ``(N,)``.

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
from ._util import FreshIds, as_ir, clone_op, reshape, view_before
from .layout import ELEMENTWISE as _ELEMENTWISE

FEW_ROWS = 8     # row blocks shorter than a register tile's height (up to 8 rows) are flattened


def _flattenable(graph: GraphIR, op: Op) -> bool:
    if op.kind is not OpKind.MatMul or len(op.inputs) < 2 or get_attr(op, "transpose_a"):
        return False
    a, b, out = (graph.tensor(t.id) for t in (op.inputs[0], op.inputs[1], op.outputs[0]))
    if not (a.is_known() and b.is_known() and out.is_known()) or b.ndim != 2 or a.ndim < 3:
        return False
    if math.prod(a.shape[:-2]) == 1 or a.shape[-2] >= FEW_ROWS:
        return False                    # one block of rows, or blocks the register tiles fill
    if len(op.inputs) > 2:
        bias = graph.tensor(op.inputs[2].id)
        if not bias.is_known() or bias.ndim > 2 or math.prod(bias.shape[:-1]) != 1:
            return False
    return True


def _epilogue(graph: GraphIR, op: Op, outs: set) -> list:
    """The elementwise ops after ``op`` that would be cut from its GEMM by the reshape back:
    each the only reader of the one before, none of them graph outputs along the way, each
    unary or binary with its other operand broadcast along the last axis only or of the full
    shape (reshaped to rows as well, a view)."""
    chain, tensor = [], graph.tensor(op.outputs[0].id)
    while tensor.id not in outs:
        readers = graph.consumers(tensor.id)
        if len(readers) != 1 or readers[0].kind not in _ELEMENTWISE or len(readers[0].outputs) != 1:
            break
        nxt = readers[0]
        others = [graph.tensor(t.id) for t in nxt.inputs if t.id != tensor.id]
        if len(others) + 1 != len(nxt.inputs) or not all(_rides_along(o, tensor) for o in others):
            break
        out = graph.tensor(nxt.outputs[0].id)
        if not out.is_known() or out.shape != tensor.shape:
            break
        chain.append(nxt)
        tensor = out
    return chain


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
    targets = [op for op in graph.ops if _flattenable(graph, op)]
    if not targets:
        return graph
    outs = {t.id for t in graph.get_output_ports()}
    fresh = FreshIds(graph)
    replaced = {}

    def reshaped(t, shape, into):
        return view_before(fresh, replaced, t, shape, into)

    def rows(t) -> tuple:
        return (math.prod(t.shape[:-1]), t.shape[-1])
    for op in targets:
        a, out = graph.tensor(op.inputs[0].id), graph.tensor(op.outputs[0].id)
        flat_a = reshaped(a, rows(a), op)
        current = fresh.variable(out, rows(out))
        replaced[op.id].append(clone_op(op, inputs=[flat_a, *op.inputs[1:]], outputs=[current]))
        last = op
        for nxt in _epilogue(graph, op, outs):
            inputs = []
            for t in (graph.tensor(t.id) for t in nxt.inputs):
                if t.id == last.outputs[0].id:
                    inputs.append(current)
                elif tuple(t.shape) == tuple(last.outputs[0].shape):       # a residual: its rows too
                    inputs.append(reshaped(t, rows(t), nxt))
                elif len(t.shape) > 1:                  # (1, 1, N) against rows: (N,)
                    inputs.append(reshaped(t, t.shape[-1:], nxt))
                else:
                    inputs.append(t)
            flat_next = fresh.variable(graph.tensor(nxt.outputs[0].id), rows(nxt.outputs[0]))
            replaced.setdefault(nxt.id, []).append(clone_op(nxt, inputs=inputs, outputs=[flat_next]))
            last, current = nxt, flat_next
        final = graph.tensor(last.outputs[0].id)
        replaced.setdefault(last.id, []).append(reshape(fresh, current, final, last.name))
    ops = [new for op in graph.ops for new in replaced.get(op.id, [op])]
    return graph.with_ops(ops)
