"""Lowering: a schedule and its arguments -> a loop-IR PrimFunc.

Each stage becomes a loop nest over its leaf axes. The original axes are rebuilt from the
leaves through the split/fuse relations; where a split does not divide its axis, the store is
guarded. A reduction writes its identity at the depth of the first reduce loop (repeating any
data loops that sit inside it) and accumulates inside. Intermediate tensors not among the
arguments are allocated around the whole body. The result is simplified and its loops are
partitioned so that guards only remain in tails.
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir import stmt as S
from tensorir.passes import partition_loops, simplify_stmt
from tensorir.tensor import ComputeOp, PlaceholderOp, Tensor
from tensorir.visit import free_vars, rewrite, substitute

from .schedule import Fuse, Schedule, Split, Stage

_COMBINE = {"sum": E.Add, "prod": E.Mul, "max": E.Max, "min": E.Min}


def lower(sch: Schedule, args: list, name: str = "main") -> S.PrimFunc:
    """Lower ``sch`` to a PrimFunc whose parameters are ``args`` (tensors and scalar vars).

    Example:
        >>> from tensorir import placeholder, compute
        >>> from schedule import create_schedule
        >>> A = placeholder((4,), name="A"); B = compute((4,), lambda i: A[i] * 2.0, name="B")
        >>> print(lower(create_schedule(B), [A, B]))
        func main(A: float32[4], B: float32[4]) {
          for (i, 0, 4) {
            B[i] = A[i] * 2f
          }
        }
    """
    if not isinstance(sch, Schedule):
        raise TypeError(f"lower takes a Schedule, got {type(sch).__name__}")
    params, buffers = _bind_args(sch, args)
    body = S.seq(*[_lower_stage(stage, buffers) for stage in sch.stages])
    for stage in reversed(sch.stages):
        t = stage.op.output(0)
        if not _is_arg(t, args):
            body = S.Allocate(buffers[id(t.op)], body)
    body = simplify_stmt(body)
    body = partition_loops(body)
    body = simplify_stmt(body)
    return S.PrimFunc(name, tuple(params), body)


def _is_arg(t: Tensor, args) -> bool:
    return any(a is t for a in args)


def _bind_args(sch: Schedule, args):
    if isinstance(args, (Tensor, E.Var)):
        args = [args]
    params, buffers, names = [], {}, set()
    for a in args:
        if isinstance(a, Tensor):
            if id(a.op) in buffers:
                raise ValueError(f"tensor {a.name} appears twice among the arguments")
            name = _unique(a.name, names)
            buf = E.Buffer(name, a.shape, a.dtype)
            buffers[id(a.op)] = buf
            params.append(buf)
        elif isinstance(a, E.Var) and not isinstance(a, E.IterVar):
            if any(isinstance(p, E.Var) and p.uid == a.uid for p in params):
                raise ValueError(f"scalar {a.name} appears twice among the arguments")
            names.add(a.name)
            params.append(a)
        else:
            raise TypeError(f"arguments must be tensors or scalar vars, got {a!r}")
    scalars = {p.uid for p in params if isinstance(p, E.Var)}
    for out in sch.outputs:
        if not _is_arg(out, args):
            raise ValueError(f"output {out.name} is not among the arguments; pass it so the result can be read")
    for stage in sch.stages:
        op = stage.op
        for inp in op.input_tensors:
            if isinstance(inp.op, PlaceholderOp) and id(inp.op) not in buffers:
                raise ValueError(f"input {inp.name} (read by {op.name}) is not among the arguments")
        for v in free_vars(op.body):
            if not isinstance(v, E.IterVar) and v.uid not in scalars:
                raise ValueError(f"scalar {v.name} (used by {op.name}) is not among the arguments")
        if id(op) not in buffers:
            buffers[id(op)] = E.Buffer(_unique(op.name, names), op.shape, op.dtype)
    return params, buffers


def _unique(name: str, names: set) -> str:
    candidate, k = name, 1
    while candidate in names:
        candidate, k = f"{name}_{k}", k + 1
    names.add(candidate)
    return candidate


def _to_buffers(e: E.Expr, buffers: dict) -> E.Expr:
    def replace(n):
        if isinstance(n, E.TensorLoad):
            return E.BufferLoad(buffers[id(n.tensor.op)], n.indices, n.dtype)
        return n
    return rewrite(e, replace)


def _axis_values(stage: Stage):
    """Expression of every axis of the stage in terms of the leaf loop variables, and the guards
    that keep split tails inside their parent's domain."""
    values = {iv.uid: iv for iv in stage.leaf_iter_vars}
    guards = []
    for rel in reversed(stage.relations):
        if isinstance(rel, Split):
            value = values[rel.outer.uid] * rel.factor + values[rel.inner.uid]
            if rel.parent.dom_min:
                value = value + rel.parent.dom_min
            values[rel.parent.uid] = value
            if rel.outer.dom_extent * rel.factor != rel.parent.dom_extent:
                guards.append((rel.parent, value < rel.parent.dom_min + rel.parent.dom_extent))
        elif isinstance(rel, Fuse):
            fused = values[rel.fused.uid]
            n = rel.inner.dom_extent
            outer = fused // n if n != 1 else fused
            inner = fused % n if n != 1 else E.Const(0, "int64")
            values[rel.outer.uid] = outer + rel.outer.dom_min if rel.outer.dom_min else outer
            values[rel.inner.uid] = inner + rel.inner.dom_min if rel.inner.dom_min else inner
    return values, guards


def _guarded(stmt: S.Stmt, conds) -> S.Stmt:
    for c in conds:
        stmt = S.IfThenElse(c, stmt)
    return stmt


def _nest(leaves, stage: Stage, body: S.Stmt) -> S.Stmt:
    for iv in reversed(leaves):
        kind = stage.iter_var_kinds.get(iv.uid, "serial")
        body = S.For(iv, E.Const(iv.dom_min, "int64"), E.Const(iv.dom_extent, "int64"), kind, body)
    return body


def _lower_stage(stage: Stage, buffers: dict) -> S.Stmt:
    op: ComputeOp = stage.op
    buf = buffers[id(op)]
    values, guards = _axis_values(stage)
    mapping = {iv.uid: values[iv.uid] for iv in list(op.axis) + list(op.reduce_axis)}
    indices = tuple(values[iv.uid] for iv in op.axis)
    data_guards = [c for parent, c in guards if parent.kind == "data"]
    reduce_guards = [c for parent, c in guards if parent.kind == "reduce"]
    leaves = stage.leaf_iter_vars
    body = op.body
    if not isinstance(body, E.Reduce):
        value = substitute(_to_buffers(body, buffers), mapping)
        return _nest(leaves, stage, _guarded(S.BufferStore(buf, value, indices), data_guards))
    source = substitute(_to_buffers(body.source, buffers), mapping)
    current = E.BufferLoad(buf, indices, body.dtype)
    update = S.BufferStore(buf, _COMBINE[body.combiner](current, source, body.dtype), indices)
    init = S.BufferStore(buf, body.identity, indices)
    first = next((k for k, iv in enumerate(leaves) if iv.kind == "reduce"), len(leaves))
    outer, inner = leaves[:first], leaves[first:]
    init_nest = _nest([iv for iv in inner if iv.kind == "data"], stage, _guarded(init, data_guards))
    update_nest = _nest(inner, stage, _guarded(update, data_guards + reduce_guards))
    return _nest(outer, stage, S.seq(init_nest, update_nest))
