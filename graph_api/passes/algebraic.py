"""Algebraic simplification of data-movement ops.

Rules (applied in rounds until none applies, each op at most once a round and never next to
an op rewritten in the same round; dead ops are dropped after each round, keeping every output
port of the input graph with the same tensor id):

* StaticTranspose of StaticTranspose -> one StaticTranspose with the composed order; when the
  composed order (or a lone transpose's order) is the identity the transpose disappears and its
  consumers read the original tensor, except when its output is a graph output: then an identity
  Reorder keeps that tensor id alive.
* StaticReshape of StaticReshape -> one StaticReshape (an identity reshape with known shapes
  disappears like an identity transpose).
* A StaticTranspose swapping the last two axes whose only consumer is a MatMul (reading it as
  src or weights) is folded into the MatMul's ``transpose_a`` / ``transpose_b`` flag (toggled).
* Identity, and a Reorder that keeps no graph output alive, disappear like an identity
  transpose (a copy computes nothing).
* Adding or subtracting a bound constant of zeros, multiplying or dividing by one of ones
  (``Graph.bind_constant``) disappears like an identity transpose when broadcasting leaves
  the other operand's shape and type as they are.

Example:
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
    >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (3, 2))
    >>> z = LogicalTensor(2, DataType.f32, (2, 3)); w = LogicalTensor(3, DataType.f32, (2, 3))
    >>> g = Graph()
    >>> _ = g.add_op(Op(0, OpKind.StaticTranspose, [x], [y], {"order": [1, 0]}))
    >>> _ = g.add_op(Op(1, OpKind.StaticTranspose, [y], [z], {"order": [1, 0]}))
    >>> _ = g.add_op(Op(2, OpKind.ReLU, [z], [w]))
    >>> g.finalize()
    >>> simplify_algebra(g).ops
    [Op(2, ReLU, in=[0], out=[3])]
"""
from __future__ import annotations

from ..ir import GraphIR
from ..logical_tensor import GraphError
from ..op import Op, OpKind
from ..ops.schema import get_attr
from ._util import as_ir, clone_op, output_ids, substitute
from .dead_code import eliminate_dead_ops


def _perm(graph: GraphIR, op: Op) -> list[int] | None:
    """The transpose's order as a permutation of non-negative axes, or None when unknown/invalid."""
    order = list(get_attr(op, "order") or [])
    rank = len(order) if order else graph.tensor(op.inputs[0].id).ndim
    if rank is None:
        return None
    if not order:
        order = list(range(rank))[::-1]
    norm = [a + rank if a < 0 else a for a in order]
    return norm if sorted(norm) == list(range(rank)) else None


def _identity(graph: GraphIR, op: Op, src, outs: set):
    """Rewrite making ``op`` (whose output equals ``src``) disappear: (replacements, subst)."""
    out = op.outputs[0]
    if out.id in outs:
        return {op.id: Op(op.id, OpKind.Reorder, [graph.tensor(src.id)], [out], name=op.name, covers=op.covers)}, {}
    return {op.id: None}, {out.id: src.id}


def _transpose_rule(graph: GraphIR, op: Op, outs: set):
    p2 = _perm(graph, op)
    if p2 is None:
        return None
    prod = graph.producer(op.inputs[0].id)
    p1 = _perm(graph, prod) if prod is not None and prod.kind is OpKind.StaticTranspose else None
    if p1 is not None and len(p1) == len(p2):
        src, composed = prod.inputs[0], [p1[i] for i in p2]
    elif p2 == list(range(len(p2))):
        src, composed = op.inputs[0], p2
    else:
        return None
    if composed == list(range(len(composed))):
        return _identity(graph, op, src, outs)
    new = clone_op(op, inputs=[graph.tensor(src.id)], attrs={**op.attrs, "order": composed})
    return {op.id: new}, {}


def _same_known_shape(graph: GraphIR, a: int, b: int) -> bool:
    ta, tb = graph.tensor(a), graph.tensor(b)
    return ta.is_known() and tb.is_known() and ta.shape == tb.shape


def _reshape_rule(graph: GraphIR, op: Op, outs: set):
    out = graph.tensor(op.outputs[0].id)
    prod = graph.producer(op.inputs[0].id)
    if prod is None or prod.kind is not OpKind.StaticReshape:
        if _same_known_shape(graph, op.inputs[0].id, out.id):
            return _identity(graph, op, op.inputs[0], outs)
        return None
    src = prod.inputs[0]
    if _same_known_shape(graph, src.id, out.id):
        return _identity(graph, op, src, outs)
    shape, special_zero = list(get_attr(op, "shape")), bool(get_attr(op, "special_zero"))
    if special_zero and 0 in shape:           # zeros copy dims of the intermediate tensor
        if not out.is_known():
            return None
        shape, special_zero = list(out.shape), False
    new = clone_op(op, inputs=[graph.tensor(src.id)],
                   attrs={**op.attrs, "shape": shape, "special_zero": special_zero})
    return {op.id: new}, {}


def _matmul_rule(graph: GraphIR, op: Op, outs: set):
    for idx in (0, 1):
        t = op.inputs[idx]
        prod = graph.producer(t.id)
        if prod is None or prod.kind is not OpKind.StaticTranspose:
            continue
        p = _perm(graph, prod)
        if p is None or len(p) < 2 or p != list(range(len(p) - 2)) + [len(p) - 1, len(p) - 2]:
            continue
        if t.id in outs or graph.consumers(t.id) != [op] or any(b.id == t.id for b in op.inputs[2:]):
            continue
        src = graph.tensor(prod.inputs[0].id)
        attrs = dict(op.attrs)
        inputs = list(op.inputs)
        for i, flag in ((0, "transpose_a"), (1, "transpose_b")):
            if op.inputs[i].id == t.id:
                inputs[i] = src
                attrs[flag] = not bool(get_attr(op, flag))
        return {op.id: clone_op(op, inputs=inputs, attrs=attrs)}, {}
    return None


# (kind, the neutral value, which input positions may hold it)
_NEUTRAL = {OpKind.Add: (0, (0, 1)), OpKind.Subtract: (0, (1,)),
            OpKind.Multiply: (1, (0, 1)), OpKind.Divide: (1, (1,))}


def _neutral_rule(graph: GraphIR, op: Op, outs: set):
    """x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1 -> x, when the neutral operand is a bound
    constant and broadcasting does not change x's shape or type."""
    neutral, positions = _NEUTRAL[op.kind]
    values = graph.constant_values
    out = graph.tensor(op.outputs[0].id)
    for k in positions:
        value = values.get(op.inputs[k].id)
        other = graph.tensor(op.inputs[1 - k].id)
        if value is None or not (value == neutral).all():
            continue
        if other.dtype is out.dtype and other.is_known() and other.shape == out.shape:
            return _identity(graph, op, other, outs)
    return None


def _copy_rule(graph: GraphIR, op: Op, outs: set):
    """Identity, or a Reorder that keeps no graph output alive, -> its input (a copy computes
    nothing in an inference graph)."""
    src, out = graph.tensor(op.inputs[0].id), graph.tensor(op.outputs[0].id)
    if (op.kind is OpKind.Reorder and out.id in outs) or src.dtype is not out.dtype or not src.is_known() \
            or src.shape != out.shape:
        return None
    return _identity(graph, op, src, outs)


_RULES = {OpKind.StaticTranspose: _transpose_rule, OpKind.StaticReshape: _reshape_rule,
          OpKind.MatMul: _matmul_rule, OpKind.Identity: _copy_rule, OpKind.Reorder: _copy_rule,
          **{kind: _neutral_rule for kind in _NEUTRAL}}


def _rewrite_round(graph: GraphIR, outs: set) -> GraphIR | None:
    """One scan of ``graph`` applying every rule that finds a rewrite, None when none does. A
    rule reads its op, the producers of its inputs and the readers of its inputs, so a rewrite
    marks its op's tensors and those of the producers it reads as touched, and an op with a
    touched tensor waits for the next round, when the graph shows the rewrites before it."""
    repl, subst, touched = {}, {}, set()
    for op in graph.topological_ops():
        rule = _RULES.get(op.kind)
        if rule is None or any(t.id in touched for t in (*op.inputs, *op.outputs)):
            continue
        found = rule(graph, op, outs)
        if found is None:
            continue
        repl.update(found[0])
        subst.update(found[1])
        for read in [op] + [graph.producer(t.id) for t in op.inputs]:
            if read is not None:
                touched.update(t.id for t in (*read.inputs, *read.outputs))
    if not repl:
        return None
    ops = []
    for old in graph.ops:
        new = repl.get(old.id, old)
        if new is not None:
            ops.append(substitute(graph, new, subst))
    return eliminate_dead_ops(graph.with_ops(ops), outputs=outs)


def simplify_algebra(graph: GraphIR, max_steps: int = 10_000) -> GraphIR:
    """A new finalized graph with the rules of this module applied until none applies. Every
    output port of ``graph`` is still an output port with the same tensor id and the same
    values; ops that no longer reach an output are dropped. The input graph is not modified.

    Example:
        >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
        >>> a = LogicalTensor(0, DataType.f32, (4, 3)); at = LogicalTensor(1, DataType.f32, (3, 4))
        >>> b = LogicalTensor(2, DataType.f32, (4, 5)); c = LogicalTensor(3, DataType.f32, (3, 5))
        >>> g = Graph()
        >>> _ = g.add_op(Op(0, OpKind.StaticTranspose, [a], [at], {"order": [1, 0]}))
        >>> _ = g.add_op(Op(1, OpKind.MatMul, [at, b], [c]))
        >>> g.finalize()
        >>> [(op, op.attrs) for op in simplify_algebra(g).ops]
        [(Op(1, MatMul, in=[0, 2], out=[3]), {'transpose_a': True})]
    """
    graph = as_ir(graph, "simplify_algebra")
    outs = set(output_ids(graph))
    current = eliminate_dead_ops(graph, outputs=outs)
    for _ in range(max_steps):
        nxt = _rewrite_round(current, outs)
        if nxt is None:
            return current
        current = nxt
    raise GraphError(f"simplify_algebra did not converge in {max_steps} steps")
