"""Injective DAGs (elementwise, broadcast, index maps): inline every intermediate, then per
output fuse all axes, split by the vector width, vectorize, unroll a few vectors, parallel."""
from __future__ import annotations

from .base import Template, fuse_all, lanes_for

PARALLEL_MIN_ELEMENTS = 1 << 15   # below this a parallel launch costs more than it saves


class InjectiveTemplate(Template):
    name = "injective"

    def define(self, space):
        space.define_knob("vector", [8, 16, 32, 64])
        space.define_knob("unroll", [1, 2, 4, 8])
        space.define_knob("parallel", [False, True])

    def default(self):
        out = self.outputs[0]
        size = 1
        for n in out.shape:
            size *= n
        return {"vector": lanes_for(out.dtype), "unroll": 4, "parallel": size >= PARALLEL_MIN_ELEMENTS}

    def schedule(self, s, cfg):
        for op in self.dag.ops:
            if not self.dag.is_output(op):
                s[op].compute_inline()
        for out in self.outputs:
            stage = s[out]
            if not out.shape:
                continue
            fused = fuse_all(stage, out.op.axis)
            outer, lanes = stage.split(fused, factor=cfg["vector"])
            stage.vectorize(lanes)
            if cfg["unroll"] > 1:
                outer, unrolled = stage.split(outer, factor=cfg["unroll"])
                stage.unroll(unrolled)
            if cfg["parallel"]:
                stage.parallel(outer)
