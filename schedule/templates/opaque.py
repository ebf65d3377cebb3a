"""Anything no other template fits: every stage computed in full, in order; the outermost data
loop of each stage runs in parallel and the innermost data loop, when it is the last loop,
is vectorized over its whole extent if that is small."""
from __future__ import annotations

from .base import Template

MAX_LANES = 64


class OpaqueTemplate(Template):
    name = "opaque"

    def define(self, space):
        space.define_knob("parallel", [False, True])

    def default(self):
        return {"parallel": True}

    def schedule(self, s, cfg):
        for stage in s.stages:
            axes = list(stage.op.axis)
            if not axes:
                continue
            if cfg["parallel"] and axes[0].dom_extent > 1 and len(axes) > 1:
                stage.parallel(axes[0])
            last = stage.leaf_iter_vars[-1]
            if last is axes[-1] and 1 < last.dom_extent <= MAX_LANES and len(axes) > 1:
                stage.vectorize(last)
