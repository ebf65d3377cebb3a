"""Row reductions (sum, max, mean, softmax- and layernorm-like DAGs).

The output's leading axes that the reductions share are the "rows": they are fused and run in
parallel, and every reduction is computed at that row loop (one row at a time, in cache).
Each reduction's innermost reduce loop is split by the ``vector`` knob and rfactored, so the
partial results are an explicit vector accumulated across the row; a vector of several
registers (four by default on long rows) gives as many independent chains of adds. The
output's remaining axes are fused and vectorized. Injective intermediates are inlined, except
an expensive one (a call such as exp) read by more than one stage, which is computed once per
row into a row-sized buffer (``cache`` knob): softmax's exp feeds its sum and its output.
On long rows in large data (``prefetch`` knob) the next row's input and output lines are
prefetched while this row computes: a row then streams from memory while the previous one
computes its exps, instead of stalling at the start of every row (whose 4 KiB page the
hardware prefetcher does not enter on its own).

When the output's axes are not the reductions' (a reshape after them, as a global pooling
has, or a reduction over a middle axis, as a softmax over the channels has), the reductions
are computed whole first. One whose last data axis reads its input's innermost dimension (a
column reduction: ``sum over r of x[n, r, j]``) runs its reduce loop outside that axis, which
is vectorized, with the leading data axes in parallel where the data it reads is large (a
channels-last map's rows pooled, ``passes.split_spatial_reductions``: few outputs, much to
read); the output is then fused, vectorized and, when it is large itself, run in parallel.
"""
from __future__ import annotations

from tilefuse.tensorir.dtype import itemsize
from tilefuse.tensorir.expr import Call, IterVar, TensorLoad
from tilefuse.tensorir.walk import walk

from .base import Template, fuse_all
from .injective import PARALLEL_MIN_ELEMENTS, extent

LONG_ROW = 256                 # a reduction this long gets a vector of four registers
PREFETCH_MIN_ROW_BYTES = 1024  # rows this long, in data this large, fetch the next row ahead
PREFETCH_MIN_BYTES = 4 << 20
ROW_CACHE_BYTES = 32 * 1024    # a cached intermediate's row must fit this (a stack buffer, in L1)


class ReductionTemplate(Template):
    name = "reduction"

    def __init__(self, dag, target=None):
        self.out = dag.outputs[0].op
        self.reductions = dag.of_class("reduction")
        if any(_column_axis(op) is not None for op in self.reductions):
            self.rows = 0        # a column reduction (NHWC's global pooling): whole, at root
        elif self.out in self.reductions:
            self.rows = len(self.out.axis)
        else:
            self.rows = len(self.reductions[0].axis)
            shape = self.out.shape[:self.rows]
            if any(op.shape != shape for op in self.reductions):
                self.rows = 0    # a reshape after the reductions, or a middle axis reduced: at root
        self.cacheable = self._cacheable(dag)
        super().__init__(dag, target)

    def define(self, space):
        lanes = self.target.lanes(self.out.dtype)
        space.define_knob("vector", sorted({0, 8, 16, 32, lanes, 4 * lanes}))
        space.define_knob("parallel", [False, True])
        if self.out not in self.reductions:
            space.define_knob("out_vector", sorted({8, 16, 32, lanes}))
        if self.cacheable:
            space.define_knob("cache", [False, True])
        if self.rows:
            space.define_knob("prefetch", [False, True])

    def default(self):
        lanes = self.target.lanes(self.out.dtype)
        inner = min(op.reduce_axis[-1].dom_extent for op in self.reductions)
        rows = extent(self.out.shape[:self.rows])
        vector = 4 * lanes if inner >= LONG_ROW else (lanes if inner >= 16 else 0)
        parallel = rows >= 2 if self.rows else max(extent(self.out.shape), self._column_work()) >= PARALLEL_MIN_ELEMENTS
        cfg = {"vector": vector, "parallel": parallel}
        if self.out not in self.reductions:
            cfg["out_vector"] = lanes
        if self.cacheable:
            cfg["cache"] = True
        if self.rows:
            row_bytes = extent(self.out.shape[self.rows:]) * itemsize(self.out.dtype)
            cfg["prefetch"] = row_bytes >= PREFETCH_MIN_ROW_BYTES and rows * row_bytes >= PREFETCH_MIN_BYTES
        return cfg

    def _column_work(self) -> int:
        """The elements the column reductions read, the most of any: a pooling of a large map
        into few values is worth sharing among threads (by its leading data axes) even though
        its output is small."""
        return max((extent(op.shape) * extent([r.dom_extent for r in op.reduce_axis]) for op in self.reductions
                    if _column_axis(op) is not None), default=0)

    def _cacheable(self, dag) -> list:
        """Injective intermediates worth computing once per row: a call (exp, log, ...) in the
        body, more than one reader, the output's rows, and a row that fits ``ROW_CACHE_BYTES``."""
        if not self.rows or self.out in self.reductions:
            return []
        rows = self.out.shape[:self.rows]
        found = []
        for op in dag.ops:
            if dag.classes[id(op)] != "injective" or dag.is_output(op) or len(dag.readers.get(id(op), [])) < 2:
                continue
            row_bytes = extent(op.shape[self.rows:]) * 4
            if op.shape[:self.rows] == rows and row_bytes <= ROW_CACHE_BYTES and \
                    any(isinstance(n, Call) for n in walk(op.body)):
                found.append(op)
        return found

    def schedule(self, s, cfg):
        cached = self.cacheable if self.cacheable and cfg["cache"] else []
        for op in self.dag.ops:
            if self.dag.classes[id(op)] == "injective" and not self.dag.is_output(op) and op not in cached:
                s[op].compute_inline()
        out = s[self.out]
        columns = [op for op in self.reductions if not self.rows and _column_axis(op) is not None]
        factored = [None if op in columns else self._factor(s, s[op], cfg["vector"]) for op in self.reductions]
        for op in columns:
            self._schedule_column(s[op], cfg)
        row = fuse_all(out, self.out.axis[:self.rows]) if self.rows else None
        if row is not None and cfg["parallel"]:
            out.parallel(row)
        if self.out not in self.reductions:
            rest = self.out.axis[self.rows:]
            if row is None and len(rest) >= 2 and extent(self.out.shape[:-1]) >= 2:
                # the last axis vectorized alone: a column reduction's results are read along it
                lead = fuse_all(out, rest[:-1])
                _, lanes = out.split(rest[-1], factor=cfg["out_vector"])
                out.vectorize(lanes)
                if cfg["parallel"] and extent(self.out.shape) >= PARALLEL_MIN_ELEMENTS:
                    out.parallel(lead)
            elif rest:
                outer, lanes = out.split(fuse_all(out, rest), factor=cfg["out_vector"])
                out.vectorize(lanes)
                if row is None and cfg["parallel"] and extent(self.out.shape) >= PARALLEL_MIN_ELEMENTS:
                    out.parallel(outer)
        if row is None:
            return
        for op in cached:
            stage = s[op]
            stage.compute_at(out, row)
            _, lanes = stage.split(fuse_all(stage, op.axis[self.rows:]), factor=cfg["out_vector"])
            stage.vectorize(lanes)
        for op, rf in zip(self.reductions, factored):
            if op is not self.out:
                s[op].compute_at(out, row)
            if rf is not None:
                s[rf].compute_at(out, row)
        if cfg["prefetch"]:
            self._prefetch_next_row(s, cached, factored)

    def _prefetch_next_row(self, s, cached, factored):
        """From the stage that computes most per element (the cached intermediate, else the
        output, or the vector partial sums of an output that is itself a reduction), the next
        row's input lines and, for a stage of the output's shape, the next row's output lines:
        fetched while this row computes."""
        partials = factored[self.reductions.index(self.out)] if self.out in self.reductions else None
        stage = s[cached[0]] if cached else s[partials] if partials is not None else s[self.out]
        axis = stage.op.axis[self.rows - 1]
        inlined = {id(op) for op in self.dag.ops if self.dag.classes[id(op)] == "injective"
                   and not self.dag.is_output(op) and op not in cached}
        inputs = {id(t.op) for t in self.dag.placeholders}
        for tensor in _reads_through(stage.op.body, inlined):
            if id(tensor.op) in inputs:
                stage.prefetch(tensor, axis, 1)
        if tuple(stage.op.shape) == tuple(self.out.shape):
            stage.prefetch(self.out.output(0), axis, 1, write=True)

    @staticmethod
    def _schedule_column(stage, cfg):
        """Reduce loops outside the last data axis, which is vectorized; leading data axes
        fused and parallel (when there are two or more of them)."""
        data, reduce_axes = list(stage.op.axis), list(stage.op.reduce_axis)
        lanes = cfg.values.get("out_vector", 8)
        outer, inner = stage.split(data[-1], factor=lanes)
        stage.reorder(*data[:-1], *reduce_axes, outer, inner)
        stage.vectorize(inner)
        if cfg["parallel"] and extent([a.dom_extent for a in data[:-1]]) >= 2:
            stage.parallel(fuse_all(stage, data[:-1]))

    @staticmethod
    def _factor(s, stage, vector):
        """Split the innermost reduce loop by ``vector`` and rfactor it into a vectorized stage."""
        if not vector or stage.reduce_axis[-1].dom_extent < 2:
            return None
        _, lanes = stage.split(stage.reduce_axis[-1], factor=vector)
        rf = s.rfactor(stage.tensor, lanes)
        rf_stage = s[rf]
        lane = rf.op.axis[-1]
        rf_stage.reorder(*[a for a in rf_stage.leaf_iter_vars if a.kind == "reduce"], lane)
        rf_stage.vectorize(lane)
        return rf


def _reads_through(body, inlined: set) -> list:
    """The tensors ``body`` reads, looking through the ops in ``inlined`` (ids) to what they
    read, in order of first read."""
    found, pending = [], [body]
    while pending:
        for load in walk(pending.pop(0)):
            if not isinstance(load, TensorLoad) or any(load.tensor.op is t.op for t in found):
                continue
            if id(load.tensor.op) in inlined:
                pending.append(load.tensor.op.body)
            else:
                found.append(load.tensor)
    return found


def _column_axis(op):
    """The last data axis of reduction ``op`` when it is a column reduction: an input it
    reduces is read with exactly that axis as its innermost index; else None."""
    if not op.axis:
        return None
    last = op.axis[-1]
    reduce_uids = {a.uid for a in op.reduce_axis}
    for load in (n for n in walk(op.body) if isinstance(n, TensorLoad)):
        if not load.indices or not (isinstance(load.indices[-1], IterVar) and load.indices[-1].uid == last.uid):
            continue
        if any(isinstance(v, IterVar) and v.uid in reduce_uids for i in load.indices[:-1] for v in walk(i)):
            return last
    return None
