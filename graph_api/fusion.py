"""Grouping ops into partitions by operator class, in the manner of TVM's FuseOps.

Walking the ops producers first, an op joins the group of the producer of its first fusable
input when the rule for (that group, this op) allows it, else an injective op the group of a
complex op whose result it reads as a later input (a residual added to a product, written
first: T5's ``hidden + dense(x)``) when that rule allows it:

* injective after injective: an injective chain;
* reduction after an injective-only group: injective producers fuse into a reduction, but
  not a StaticTranspose that moves the last axis (a window or row reduction would read it
  across the grain), nor a group with a Slice, nor a group whose results other ops read too
  (the reduction would become one output of many);
* elementwise (injective) after a group with a complex op or a reduction: the epilogue
  (bias, activation, residual add; softmax's and layer norm's elementwise tail), but not a
  Concat: it stands alone, and nothing joins it, so its producers can write into its slices
  (``CompiledGraph``); and not a StaticTranspose that moves the last axis (the anchor's tiles
  and a reduction's rows are written along it: they would be tiled across the grain), nor,
  after a complex op, one that moves the rows (the axis before the last: attention's heads
  merged back would be tiled as products of as many rows as there are heads), nor one
  whose output is larger than the complex op's (squeeze-excite's scale times the feature
  map: the anchor would be computed once per broadcast element), nor, after an attention,
  one of another shape (its template stores its blocks through elementwise ops only); and
  not a Slice after a complex op or a reduction (its tiles or rows would be cut to the slice);
  nor a StaticReshape that changes the last axis after a complex op (its tiles would be cut
  across rows: alone, a reshape is a view, ``CompiledGraph``), nor one that splits the rows
  into shorter blocks (the template would tile the blocks: a GEMM's rows put back in their
  N-D shape by ``passes.flatten_dense_rows`` would be tiled as one-row products again);
* a StaticReshape of a tensor other ops read too joins no group (it would be a copy, as one
  more output of the group); one that changes the last axis and does not join its
  producer's group stays alone, and only a transpose or reshape joins it: alone, it is a
  view, and the elementwise ops and reductions after it read the view with plain indices,
  not through the reshape's divisions of their rows;
* reduction after a group of reductions and their epilogue over the same rows (softmax's
  max then sum), never after a complex op; a StaticReshape that keeps the last dim does not
  join a reduction's group: alone it is a view, where joined the reduction's rows would be
  written through it;
* a Slice whose output is a contiguous, aligned block of its input (``slice_view``: channels
  of a batch-1 NCHW tensor) stands alone and nothing joins it: it costs no copy, its output is
  a view (``CompiledGraph``);
* at most one complex op per group; opaque ops (and unsupported ones) stand alone;
* never a cycle: an op does not join a group it also reaches through an op outside it;
* at most MAX_GROUP ops in a group;
* constant ops (every output constant-property: the same values on every execution) and
  variable ops never share a group, so the constant ones can run once.

``policy="debug"`` puts every op alone.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from .op import OpKind
from .ops.movement import slice_view

MAX_GROUP = 32


class _Group:
    __slots__ = ("ops", "classes", "rows", "constant", "closed")

    def __init__(self, op, cls: str, rows, constant: bool, closed: bool = False):
        self.ops = [op]
        self.classes = {cls}
        self.rows = rows if cls == "reduction" else None
        self.constant = constant
        self.closed = closed      # no op joins it (a concat its producers write in place)

    def kind(self) -> str:
        return dominant_class(self.classes)


def dominant_class(classes) -> str:
    """The class of ops (or stages) of the given classes taken together: opaque over complex
    over reduction over injective.

    Example:
        >>> dominant_class({"injective", "reduction"})
        'reduction'
    """
    return next((c for c in ("opaque", "complex", "reduction") if c in classes), "injective")


def group_ops(ops: list, class_of: Callable, producer_of: Callable, policy: str = "fusion",
              rows_of: Callable | None = None, constant_of: Callable | None = None) -> list[list]:
    """Partition ``ops`` (in topological order) into groups of ops, in topological order.

    ``class_of(op)`` is "injective", "reduction", "complex" or "opaque"; ``producer_of(tid)``
    is the op producing logical tensor ``tid`` (None for a graph input); ``rows_of(op)`` the
    shape a reduction reduces its input to (reductions fuse only over the same rows);
    ``constant_of(op)`` whether the op computes constants.

    Example:
        >>> from tilefuse.graph_api.logical_tensor import LogicalTensor as T
        >>> from tilefuse.graph_api.op import Op
        >>> a, b, c = T(0, "f32", (4,)), T(1, "f32", (4,)), T(2, "f32", (4,))
        >>> ops = [Op(0, "Exp", [a], [b]), Op(1, "ReLU", [b], [c])]
        >>> prod = {1: ops[0], 2: ops[1]}
        >>> [[o.id for o in g] for g in group_ops(ops, lambda o: "injective", prod.get)]
        [[0, 1]]
    """
    if policy not in ("fusion", "debug"):
        raise ValueError(f"unknown partition policy {policy!r}; expected 'fusion' or 'debug'")
    rows_of = rows_of or (lambda op: None)
    constant_of = constant_of or (lambda op: False)
    readers: dict = {}
    for op in ops:
        for t in {t.id: t for t in op.inputs}.values():
            readers.setdefault(t.id, []).append(op)
    group_of: dict[int, _Group] = {}
    groups: list[_Group] = []
    for op in ops:
        cls, constant = class_of(op), bool(constant_of(op))
        target, closed = None, False
        if policy == "fusion" and cls != "opaque":
            for t in op.inputs:
                producer = producer_of(t.id)
                if producer is None or id(producer) not in group_of:
                    continue
                group = group_of[id(producer)]
                if group.constant != constant:
                    continue   # constants reach variable ops as inputs, never as group members
                if _joins(group, op, cls, rows_of, readers, producer_of, group_of):
                    target = group
                closed = _concat_after_anchor(group, op)
                break   # the first produced input decides (its producer is the anchor side), but:
            if target is None and not closed and cls == "injective":
                target = _anchor_read_later(op, cls, constant, rows_of, readers, producer_of, group_of)
        if target is None:
            target = _Group(op, cls, rows_of(op), constant,
                            closed or _is_view(op))
            groups.append(target)
        else:
            target.ops.append(op)
            target.classes.add(cls)
            if cls == "reduction" and target.rows is None:
                target.rows = rows_of(op)
        group_of[id(op)] = target
    return [g.ops for g in _topological(groups, group_of, producer_of)]


def _anchor_read_later(op, cls: str, constant: bool, rows_of, readers: dict, producer_of, group_of: dict):
    """The group of a complex op whose result ``op`` reads as a later input, when ``op`` may
    join it: a residual added to the product (T5's ``hidden + dense(x)``), a scale written
    first (``gamma * dense(x)``); else None."""
    for t in op.inputs[1:]:
        producer = producer_of(t.id)
        group = group_of.get(id(producer)) if producer is not None else None
        if group is not None and group.kind() == "complex" and group.constant == constant \
                and _joins(group, op, cls, rows_of, readers, producer_of, group_of):
            return group
    return None


def _joins(group: _Group, op, cls: str, rows_of, readers: dict, producer_of, group_of: dict) -> bool:
    """Whether ``op`` may join ``group``: the rules allow it and it makes no cycle."""
    return _allowed(group, op, cls, rows_of, readers) and not _makes_cycle(group, op, producer_of, group_of)


def _topological(groups: list, group_of: dict, producer_of) -> list:
    """Groups ordered so each comes after the groups it reads from (an op that joined an early
    group can make it read a later one); ties keep creation order."""
    deps = {id(g): {id(group_of[id(p)]) for op in g.ops for t in op.inputs
                    for p in [producer_of(t.id)] if p is not None and group_of[id(p)] is not g}
            for g in groups}
    done, order = set(), []
    while len(order) < len(groups):
        for g in groups:
            if id(g) not in done and deps[id(g)] <= done:
                done.add(id(g))
                order.append(g)
                break
    return order


def _concat_after_anchor(group: _Group, op) -> bool:
    """A concat of a complex op's or a reduction's result: it stands alone, so that its
    producers can write into its slices."""
    return getattr(op, "kind", None) is OpKind.Concat and group.kind() in ("complex", "reduction")


def _is_view(op) -> bool:
    """A Slice whose output is a view of its input: it stays alone."""
    return getattr(op, "kind", None) is OpKind.Slice and slice_view(op) is not None


def _allowed(group: _Group, op, cls: str, rows_of, readers: dict) -> bool:
    """Whether ``op`` (of class ``cls``) may join ``group`` (see the module docstring);
    ``readers``: tensor id -> the ops that read it."""
    if len(group.ops) >= MAX_GROUP or "opaque" in group.classes or group.closed or _is_view(op):
        return False
    kind = group.kind()
    if getattr(op, "kind", None) is OpKind.StaticReshape and len(readers.get(op.inputs[0].id, ())) > 1:
        return False            # one more output of the group: a copy, where alone it is a view
    if cls == "injective":
        # chains, and the epilogue of a complex op or a reduction (not a concat, not a
        # transpose: see above)
        if kind != "injective" and _moves_last_axis(op):
            return False
        if len(group.ops) == 1 and _reshapes_last_axis(group.ops[0]) and \
                getattr(op, "kind", None) not in (OpKind.StaticTranspose, OpKind.StaticReshape):
            return False        # elementwise ops read the reshape's view instead
        if kind != "injective" and getattr(op, "kind", None) is OpKind.Slice:
            return False        # a part of the anchor's output: its tiles or rows would be cut to it
        if kind == "reduction" and _reshape_after_rows(op):
            return False        # alone, a view; joined, the norm's rows would be written through it
        if kind == "complex" and (_reshapes_last_axis(op) or _splits_rows(op) or _moves_rows(op)
                                  or _broadcasts_anchor(group, op) or _reshapes_attention(group, op)):
            return False
        return not _concat_after_anchor(group, op)
    if cls == "reduction":
        if len(group.ops) == 1 and _reshapes_last_axis(group.ops[0]):
            return False        # the reduction reads the reshape's view
        if kind == "injective":
            return not any(_moves_last_axis(o) or getattr(o, "kind", None) is OpKind.Slice for o in group.ops) \
                and not _read_outside(group, op, readers)
        return kind == "reduction" and group.rows is not None and rows_of(op) == group.rows
    return False          # a complex op starts its own group (one per group)


def _broadcasts_anchor(group: _Group, op) -> bool:
    """Whether ``op``'s output has more elements than the group's complex op's: the epilogue
    broadcasts the anchor's result (squeeze-excite's channel scale times the feature map), and
    fused, the anchor would be computed once per broadcast element. A complex op starts its
    group, so it is the group's first op."""
    anchor, out = group.ops[0].outputs[0], op.outputs[0]
    return anchor.is_known() and out.is_known() and math.prod(out.shape) > math.prod(anchor.shape)


def _reshapes_attention(group: _Group, op) -> bool:
    """Whether ``op`` gives an attention's result (the group's first op) another shape: its
    template computes blocks of the attention's own rows and stores them through an
    elementwise epilogue only."""
    anchor = group.ops[0]
    return getattr(anchor, "kind", None) is OpKind.ScaledDotProductAttention and \
        tuple(op.outputs[0].shape or ()) != tuple(anchor.outputs[0].shape or ())


def _reshapes_last_axis(op) -> bool:
    """A StaticReshape whose output's last dim is not its input's (it splits or merges rows)."""
    if getattr(op, "kind", None) is not OpKind.StaticReshape:
        return False
    src, dst = op.inputs[0].shape, op.outputs[0].shape
    return src is None or dst is None or not src or not dst or src[-1] != dst[-1]


def _reshape_after_rows(op) -> bool:
    """A StaticReshape of a reduction group's rows that keeps the last dim (ConvNeXt's layer
    norm of each pixel reshaped to the rows of the GEMM after it): its own group, a view."""
    return getattr(op, "kind", None) is OpKind.StaticReshape and not _reshapes_last_axis(op)


def _splits_rows(op) -> bool:
    """A StaticReshape that keeps the last dim but splits the rows into shorter blocks (a
    GEMM's flattened rows put back in their N-D shape)."""
    if getattr(op, "kind", None) is not OpKind.StaticReshape:
        return False
    src, dst = op.inputs[0].shape, op.outputs[0].shape
    return src is not None and dst is not None and len(src) >= 2 and len(dst) >= 2 and src[-1] == dst[-1] \
        and dst[-2] < src[-2]


def _moves_rows(op) -> bool:
    """A StaticTranspose that keeps the last axis but puts another axis before it (attention's
    heads merged back: (1, 12, 128, 64) to (1, 128, 12, 64), tiled as 12-row products)."""
    if getattr(op, "kind", None) is not OpKind.StaticTranspose or not op.inputs or op.inputs[0].shape is None:
        return False
    ndim = len(op.inputs[0].shape)
    order = [a % ndim for a in (op.attrs.get("order") or range(ndim - 1, -1, -1))]
    return ndim > 2 and order[-1] == ndim - 1 and order[-2] != ndim - 2


def _moves_last_axis(op) -> bool:
    """A StaticTranspose whose output's last axis is not its input's last (a layout change:
    NCHW to NHWC and back), as opposed to one that permutes outer axes only."""
    if getattr(op, "kind", None) is not OpKind.StaticTranspose or not op.inputs or op.inputs[0].shape is None:
        return False
    ndim = len(op.inputs[0].shape)
    order = list(op.attrs.get("order") or range(ndim - 1, -1, -1))
    return ndim > 1 and order[-1] % ndim != ndim - 1


def _read_outside(group: _Group, op, readers: dict) -> bool:
    """Whether an op other than ``op`` and the group's own reads a result of the group."""
    members = {id(o) for o in group.ops} | {id(op)}
    return any(id(r) not in members for o in group.ops for t in o.outputs for r in readers.get(t.id, ()))


def _makes_cycle(group: _Group, op, producer_of, group_of) -> bool:
    """Would adding ``op`` to ``group`` make a cycle between groups? It would if one of its
    inputs comes from outside the group but depends on the group."""
    members = {id(o) for o in group.ops}
    stack = [producer_of(t.id) for t in op.inputs]
    seen = set()
    while stack:
        p = stack.pop()
        if p is None or id(p) in seen or id(p) in members:
            continue
        seen.add(id(p))
        for t in p.inputs:
            q = producer_of(t.id)
            if q is not None and id(q) in members:
                return True
            stack.append(q)
    return False
