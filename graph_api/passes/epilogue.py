"""The elementwise epilogue of a product that a pass reshapes (``flatten_pointwise_convolutions``,
``flatten_dense_rows``): the ops after it that compute on its output alone, which must be
reshaped with it to stay fused in its partition (``elementwise_epilogue``), and that rewrite
(``flatten_epilogue``).

Example:
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
    >>> t = [LogicalTensor(i, DataType.f32, (4, 1, 8)) for i in range(5)]
    >>> w = LogicalTensor(9, DataType.f32, (8, 8))
    >>> g = Graph()
    >>> for op in [Op(0, OpKind.MatMul, [t[0], w], [t[1]]), Op(1, OpKind.Sigmoid, [t[1]], [t[2]]),
    ...            Op(2, OpKind.Multiply, [t[1], t[2]], [t[3]]), Op(3, OpKind.Tanh, [t[3]], [t[4]])]:
    ...     _ = g.add_op(op)
    >>> g.finalize(); ir = g.ir()
    >>> [op.kind.value for op in elementwise_epilogue(ir, ir.ops[0], set(), lambda other: False)]
    ['Sigmoid', 'Multiply', 'Tanh']
"""
from __future__ import annotations

from ..ir import GraphIR
from ..op import Op
from ._util import clone_op, reshape
from .layout import ELEMENTWISE


def elementwise_epilogue(graph: GraphIR, op: Op, outs: set, operand_fits, claimed: frozenset = frozenset()) -> list:
    """The elementwise ops after ``op``, in order, that compute on its output alone (their other
    operands accepted by ``operand_fits(tensor)``), up to the one tensor that ops outside them
    or the graph's outputs (``outs``, ids) read: a chain (bias, activation, residual add) or a
    diamond (SiLU's ``y * sigmoid(y)``, GELU's ``y * (erf(y / sqrt 2) + 1) / 2``, HardSwish
    written out). An op ``claimed`` (ids) by another product's epilogue (an add of two of
    them) ends it."""
    out = op.outputs[0]
    chain, members = [], {out.id}
    for nxt in graph.topological_ops():
        ins = [graph.tensor(t.id) for t in nxt.inputs]
        if not any(t.id in members for t in ins):
            continue
        if nxt.id in claimed or nxt.kind not in ELEMENTWISE or len(nxt.outputs) != 1 \
                or tuple(nxt.outputs[0].shape) != tuple(out.shape) \
                or not all(t.id in members or operand_fits(t) for t in ins):
            break                       # read outside the epilogue: it ends here
        chain.append(nxt)
        members.add(nxt.outputs[0].id)
    while chain:                        # only the last op's output may be read from outside
        inside = {t.id for c in chain for t in c.inputs}
        read_outside = {t for t in [out.id, *(c.outputs[0].id for c in chain)] if t in outs or any(
            r not in chain for r in graph.consumers(t)) or t not in inside}
        if read_outside == {chain[-1].outputs[0].id}:
            break
        chain.pop()
    return chain


def flatten_epilogue(graph: GraphIR, op: Op, flat, fits, operand, fresh, replaced: dict, claimed: set, outs: set):
    """Rewrite the epilogue of ``op`` (``elementwise_epilogue``, its operands accepted by
    ``fits``) to compute on ``flat``, the product's result in the pass's flat shape: each op
    cloned onto flat tensors of that shape, the chain's own tensors as they are, its other
    operands as ``operand(tensor, the op)`` gives them, each op added to ``claimed``; the last
    result reshaped back to its own tensor. The new ops go to ``replaced`` (op id -> the ops
    in its place); returns (that last tensor, its flat one)."""
    last, current, flattened = op, flat, {op.outputs[0].id: flat}
    for nxt in elementwise_epilogue(graph, op, outs, fits, claimed):
        claimed.add(nxt.id)
        inputs = [flattened[t.id] if t.id in flattened else operand(graph.tensor(t.id), nxt) for t in nxt.inputs]
        current = flattened[nxt.outputs[0].id] = fresh.variable(graph.tensor(nxt.outputs[0].id), flat.shape)
        replaced.setdefault(nxt.id, []).append(clone_op(nxt, inputs=inputs, outputs=[current]))
        last = nxt
    final = graph.tensor(last.outputs[0].id)
    replaced.setdefault(last.id, []).append(reshape(fresh, current, final, last.name))
    return final, current
