"""Injective DAGs (elementwise, broadcast, index maps): inline every intermediate, then per
output fuse the inner axes, split by the vector width, vectorize, unroll a few vectors, and
run the leading axes (or the vectors, when there are few rows) in parallel.

The inner axes are the shortest suffix of at least ``INNER_MIN_ELEMENTS`` elements: a vector's
elements are then neighbours in memory and their index folds back to one affine offset (a
contiguous load, not a gather), however many dimensions the tensor has. The suffix stops
short at an axis across which some input is not read in order (a channel shuffle's channels
over a 14x14 plane, or a per-channel scale broadcast over a 7x7 plane: each plane is then a
row of its own, read contiguously or as one broadcast value, where vectors spanning two
planes would gather).

An output that is a concat (or elementwise after one) keeps the concat axis as a loop of its
own, outside the fused inner axes and parallel: loop partitioning then cuts it at the inputs'
boundaries, so each piece copies from one input without a select per element.

A resampling (Resize, Interpolate) vectorizes its last axis alone, one vector at a time, with
the rows a loop of their own: its source indices are then a fixed pattern per vector (a read
of the span and a shuffle), and loop partitioning confines its border clamps to the first and
last rows and vectors.
"""
from __future__ import annotations

import numpy as np

from tilefuse.tensorir import expr as E
from tilefuse.tensorir.expr import IterVar, TensorLoad
from tilefuse.tensorir.node import children
from tilefuse.tensorir.tensor import ComputeOp
from tilefuse.tensorir.walk import walk

from .base import Template, fuse_all

PARALLEL_MIN_ELEMENTS = 1 << 15   # below this a parallel launch costs more than it saves
INNER_MIN_ELEMENTS = 256          # the vectorized inner loop runs over at least this many
PARALLEL_MIN_ROWS = 8             # leading iterations enough to share among the threads
UNROLL_MAX_EXTENT = 16            # an unvectorized last axis this short is unrolled


class InjectiveTemplate(Template):
    name = "injective"

    def define(self, space):
        space.define_knob("vector", sorted({1, 8, 16, 32, 64, self.target.lanes(self.outputs[0].dtype)}))
        space.define_knob("unroll", [1, 2, 4, 8])
        space.define_knob("parallel", [False, True])

    def default(self):
        out = self.outputs[0]
        resampling = any(_resamples(op, self.dag) for op in self.dag.ops if self.dag.is_output(op))
        transposing = any(_moves_last_axis(op) for op in self.dag.ops)
        # a transpose runs at a quarter of a copy's speed: worth sharing from fewer elements on
        threshold = PARALLEL_MIN_ELEMENTS // 4 if transposing else PARALLEL_MIN_ELEMENTS
        return {"vector": 1 if transposing else self.target.lanes(out.dtype), "unroll": 1 if resampling else 4,
                "parallel": extent(out.shape) >= threshold}

    def schedule(self, s, cfg):
        for op in self.dag.ops:
            if not self.dag.is_output(op):
                s[op].compute_inline()
        for out in self.outputs:
            schedule_elementwise(s[out], self.dag, cfg["vector"], cfg["unroll"], cfg["parallel"])


def schedule_elementwise(stage, dag, vector: int, unroll: int, parallel: bool) -> None:
    """Schedule one injective output stage of ``dag``: inner axes fused and vectorized by
    ``vector`` lanes (``unroll`` vectors unrolled), leading axes fused, ``parallel`` over the
    rows, the concat axis or the vectors.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import create_schedule
        >>> from tilefuse.schedule.templates import Dag
        >>> A = placeholder((3, 40, 50), name="A"); B = compute(A.shape, lambda *i: A[i] + 1.0, name="B")
        >>> s = create_schedule(B); schedule_elementwise(s[B], Dag.of([B]), 16, 2, True)
        >>> [iv.name for iv in s[B].leaf_iter_vars]
        ['ax0', 'ax1.ax2.fused.outer.outer', 'ax1.ax2.fused.outer.inner', 'ax1.ax2.fused.inner']
    """
    op = stage.op
    if not op.axis:
        return
    if vector == 1:
        _schedule_loops(stage, parallel)
        return
    lead, split_axis, inner = _loop_nest(op, dag)
    outer, lanes = stage.split(fuse_all(stage, inner), factor=vector)
    stage.vectorize(lanes)
    if unroll > 1:
        outer, unrolled = stage.split(outer, factor=unroll)
        stage.unroll(unrolled)
    rows = fuse_all(stage, lead) if lead else None
    if parallel:
        many_rows = rows is not None and extent(op.output(0).shape[:len(lead)]) >= PARALLEL_MIN_ROWS
        if many_rows:
            stage.parallel(rows)
        elif split_axis is not None:
            stage.parallel(split_axis)
        else:
            stage.parallel(outer)


def _schedule_loops(stage, parallel: bool) -> None:
    """``vector`` 1: the loops in the order of the input a transpose reads (its last axis
    last), a short last axis unrolled and the axes before the last two fused and parallel;
    LLVM's own vectorizer is left to combine the accesses (a transpose that moves the last
    axis: unrolled channels become interleaved loads and stores, where lanes of our own would
    gather or scatter one element at a time)."""
    axes = _in_source_order(stage.op)
    stage.reorder(*axes)
    shape = stage.op.output(0).shape
    if shape[-1] <= UNROLL_MAX_EXTENT and len(axes) > 1:
        stage.unroll(axes[-1])
    lead = axes[:-2] if len(axes) > 2 else axes[:-1]
    if parallel and lead:
        stage.parallel(fuse_all(stage, lead))


def _in_source_order(op) -> list:
    """The output's axes, the last one kept last and the others in the order of the input
    dims a transpose reads them from (a thread's reads are then one contiguous slab, its writes
    whole rows); for any other op, its axes as they are."""
    axes = list(op.axis)
    loads = [n for n in walk(op.body) if isinstance(n, TensorLoad)]
    if op.tag != "transpose" or len(loads) != 1:
        return axes
    position = {index.uid: d for d, index in enumerate(loads[0].indices) if isinstance(index, IterVar)}
    if any(a.uid not in position for a in axes):
        return axes
    return sorted(axes[:-1], key=lambda a: position[a.uid]) + axes[-1:]


def _moves_last_axis(op) -> bool:
    """Whether ``op`` is a transpose that reads its input's last axis (of more than one
    element) with an axis other than its own last."""
    if op.tag != "transpose" or not op.axis:
        return False
    last = op.axis[-1]
    for load in (n for n in walk(op.body) if isinstance(n, TensorLoad)):
        if load.tensor.shape[-1] > 1 and not (isinstance(load.indices[-1], IterVar) and load.indices[-1].uid == last.uid):
            return True
    return False


def _loop_nest(op, dag):
    """(leading axes, the concat axis, a resampling's rows or None, inner axes)."""
    axes, shape = list(op.axis), op.output(0).shape
    at = _concat_axis(op, dag)
    if at is not None:
        return axes[:at], axes[at], axes[at + 1:]
    if len(axes) >= 2 and _resamples(op, dag):
        return axes[:-2], axes[-2], axes[-1:]
    k = len(axes) - 1
    in_order = _reads_in_order(op, dag, axes, k)     # else fusing cannot make it worse
    while k > 0 and extent(shape[k:]) < INNER_MIN_ELEMENTS and (not in_order or _reads_in_order(op, dag, axes, k - 1)):
        k -= 1
    return axes[:k], None, axes[k:]


class _Opaque(Exception):
    """An index the offset probe cannot evaluate (a gather: an index read from a tensor)."""


_INDEX_OPS = {E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.FloorDiv: np.floor_divide,
              E.FloorMod: np.mod, E.Min: np.minimum, E.Max: np.maximum, E.LT: np.less, E.LE: np.less_equal,
              E.GT: np.greater, E.GE: np.greater_equal, E.EQ: np.equal, E.NE: np.not_equal,
              E.And: np.logical_and, E.Or: np.logical_or}


def _reads_in_order(op, dag, axes, k: int) -> bool:
    """Whether every input ``op`` reads (through the ops inlined into it) is read in order
    across the suffix ``axes[k:]`` fused into one loop: probed on the first few values of
    ``axes[k]`` (the rows after it whole, the axes before it at 0), each step of the fused
    loop moves each read by 1 element, or by none (a broadcast read). A read that moves by 0
    then by 1 repeats each element (squeeze-excite's channel scale over a 7x7 plane): a
    vector straddling two of its runs would gather, so that is not in order. False when an
    index cannot be probed."""
    grids = np.meshgrid(*[np.arange(min(a.dom_extent, 3) if d == k else a.dom_extent)
                          for d, a in enumerate(axes[k:], k)], indexing="ij")
    points = grids[0].size
    env = {a.uid: grids[d - k].ravel() if d >= k else np.zeros(points, np.int64) for d, a in enumerate(axes)}
    offsets = []
    try:
        with np.errstate(all="ignore"):     # a branch a select does not take may divide by zero
            _collect_offsets(op.body, env, dag, offsets)
    except _Opaque:
        return False
    steps = [np.unique(np.diff(o)) for o in offsets if o.size > 1]
    return all(len(step) == 1 and step[0] in (0, 1) for step in steps)


def _collect_offsets(node, env: dict, dag, offsets: list) -> None:
    """Append to ``offsets`` the flat element offsets (arrays over ``env``'s points) of each
    read of an input below ``node``, looking through the ops ``dag`` inlines."""
    if isinstance(node, TensorLoad):
        points = len(next(iter(env.values())))
        index = [np.broadcast_to(_evaluate(i, env), (points,)) for i in node.indices]
        producer = node.tensor.op
        if isinstance(producer, ComputeOp) and any(o is producer for o in dag.ops) and not dag.is_output(producer):
            _collect_offsets(producer.body, {a.uid: i for a, i in zip(producer.axis, index)}, dag, offsets)
            return
        flat = np.zeros(points, np.int64)
        for i, n in zip(index, node.tensor.shape):
            flat = flat * n + i
        offsets.append(flat)
        return
    for child in children(node):
        _collect_offsets(child, env, dag, offsets)


def _evaluate(index, env: dict):
    """The integer index expression ``index`` at ``env``'s points (uid -> array)."""
    if isinstance(index, E.Const):
        return np.int64(index.value)
    if isinstance(index, E.Var):
        if index.uid not in env:
            raise _Opaque(index)
        return env[index.uid]
    if isinstance(index, E.Cast):
        return _evaluate(index.value, env)
    if isinstance(index, E.Select):
        return np.where(_evaluate(index.cond, env), _evaluate(index.true_value, env), _evaluate(index.false_value, env))
    if isinstance(index, E.Not):
        return np.logical_not(_evaluate(index.a, env))
    fn = _INDEX_OPS.get(type(index))
    if fn is None:
        raise _Opaque(index)
    return fn(_evaluate(index.a, env), _evaluate(index.b, env))


RESAMPLING_TAGS = ("resize", "interpolate")


def _resamples(op, dag) -> bool:
    """Whether ``op`` is, or reads elementwise, a resampling of its own shape."""
    shape = tuple(op.output(0).shape)
    return any(p.tag in RESAMPLING_TAGS and tuple(p.output(0).shape) == shape for p in dag.upstream(op) + [op])


def _concat_axis(op, dag):
    """The axis along which a concat under ``op`` joins its inputs, when that is not the last
    axis (which the vector lanes run along) and ``op`` has the concat's shape."""
    shape = tuple(op.output(0).shape)
    for producer in dag.upstream(op) + [op]:
        if producer.tag != "concat" or tuple(producer.output(0).shape) != shape:
            continue
        for t in producer.input_tensors:
            axis = next((d for d, (a, b) in enumerate(zip(t.shape, shape)) if a != b), None)
            if axis is not None and axis < len(shape) - 1:
                return axis
    return None


def extent(shape) -> int:
    """The number of elements of ``shape``.

    Example:
        >>> extent((2, 3, 4))
        24
    """
    size = 1
    for n in shape:
        size *= n
    return size
