"""Row reductions (sum, max, mean, softmax- and layernorm-like DAGs).

The output's leading axes that the reductions share are the "rows": they are fused and run in
parallel, and every reduction is computed at that row loop (one row at a time, in cache).
When the output's axes are not the reductions' (a reshape after them, as a global pooling
has), the reductions are computed whole first.
Each reduction's innermost reduce loop is split by the vector width and rfactored, so the
partial results are an explicit vector accumulated across the row; the output's remaining
axes are fused and vectorized. Injective intermediates are inlined.
"""
from __future__ import annotations

from .base import Template, fuse_all


class ReductionTemplate(Template):
    name = "reduction"

    def __init__(self, dag, target=None):
        self.out = dag.outputs[0].op
        self.reductions = dag.of_class("reduction")
        if self.out in self.reductions:
            self.rows = len(self.out.axis)
        else:
            self.rows = len(self.reductions[0].axis)
            shape = self.out.shape[:self.rows]
            if any(op.shape != shape for op in self.reductions):
                self.rows = 0    # e.g. a reshape after the reduction: reductions stay whole, at root
        super().__init__(dag, target)

    def define(self, space):
        lanes = self.target.lanes(self.out.dtype)
        space.define_knob("vector", sorted({0, 8, 16, 32, lanes}))
        space.define_knob("parallel", [False, True])
        if self.out not in self.reductions:
            space.define_knob("out_vector", sorted({8, 16, 32, lanes}))

    def default(self):
        inner = min(op.reduce_axis[-1].dom_extent for op in self.reductions)
        rows = 1
        for n in self.out.shape[:self.rows]:
            rows *= n
        cfg = {"vector": self.target.lanes(self.out.dtype) if inner >= 16 else 0, "parallel": rows >= 2}
        if self.out not in self.reductions:
            cfg["out_vector"] = self.target.lanes(self.out.dtype)
        return cfg

    def schedule(self, s, cfg):
        for op in self.dag.ops:
            if self.dag.classes[id(op)] == "injective" and not self.dag.is_output(op):
                s[op].compute_inline()
        out = s[self.out]
        factored = [self._factor(s, s[op], cfg["vector"]) for op in self.reductions]
        row = fuse_all(out, self.out.axis[:self.rows]) if self.rows else None
        if row is not None and cfg["parallel"]:
            out.parallel(row)
        if self.out not in self.reductions:
            rest = self.out.axis[self.rows:]
            if rest:
                _, lanes = out.split(fuse_all(out, rest), factor=cfg["out_vector"])
                out.vectorize(lanes)
        if row is None:
            return
        for op, rf in zip(self.reductions, factored):
            if op is not self.out:
                s[op].compute_at(out, row)
            if rf is not None:
                s[rf].compute_at(out, row)

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
