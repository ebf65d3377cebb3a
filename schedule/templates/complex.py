"""Complex-out-fusable DAGs: one multiply-accumulate anchor (matmul, batch matmul, dense,
convolution) and the elementwise epilogue after it (bias, relu, gelu, add, ...).

The output's last two axes are tiled (tile_i x tile_j); the anchor is computed at each tile
into a local accumulator of that size (cache_write when the anchor is the output itself), with
its reduce loops outside and the tile unrolled over i and vectorized over j, so the
accumulator lives in vector registers for the whole reduction. The epilogue is inlined into
the output, which is written once per tile, vectorized. A constant operand read along j is
repacked into tile_j-wide panels (pack) so the reduction reads it contiguously. The outer
tile loops (in the order of the "order" knob) and any leading axes are fused and parallel.

With several outputs, one of them is tiled as above (the output every other one reads the
anchor's values through, e.g. relu when the DAG returns relu and relu squared); the others
are computed after it from its result as injective loops (fused, vectorized, parallel), so
the anchor is computed once.
"""
from __future__ import annotations

from tensorir.expr import IterVar, TensorLoad
from tensorir.tensor import ComputeOp, PlaceholderOp
from tensorir.visit import walk

from .base import Template, fuse_all, lanes_for
from .injective import PARALLEL_MIN_ELEMENTS, extent, schedule_elementwise

TILE_I = [1, 2, 4, 6, 8, 12, 16]
TILE_J = [8, 16, 32, 48, 64]


class ComplexTemplate(Template):
    name = "complex"

    def __init__(self, dag):
        self.anchor = dag.of_class("complex")[0]
        self.out = self._tiled_output(dag)
        self.others = [t.op for t in dag.outputs if t.op is not self.out]
        axes = self.out.axis
        self.i_axis = axes[-2] if len(axes) >= 2 else None
        self.j_axis = axes[-1]
        self.packable = self._packable()
        super().__init__(dag)

    def _tiled_output(self, dag):
        """The output whose tiles hold the anchor's accumulator: one that every other output
        reads the anchor's values through (ValueError if there is none)."""
        outputs = [t.op for t in dag.outputs]
        for candidate in outputs:
            if all(other is candidate or not self._reads_anchor_around(other, candidate) for other in outputs):
                return candidate
        raise ValueError("no output of the DAG carries all others' reads of the anchor")

    def _reads_anchor_around(self, op, through) -> bool:
        """Whether ``op`` reads the anchor on a path that does not pass through ``through``."""
        seen, frontier = set(), [op]
        while frontier:
            current = frontier.pop()
            if current is through or id(current) in seen:
                continue
            if current is self.anchor:
                return True
            seen.add(id(current))
            frontier += [t.op for t in current.input_tensors if isinstance(t.op, ComputeOp)]
        return False

    def _packable(self):
        """(tensor, dim) of a constant input the anchor reads with index exactly j in dimension
        dim: repacking it into j-panels makes its reads contiguous."""
        j = self.anchor.axis[-1]
        for n in walk(self.anchor.body):
            if isinstance(n, TensorLoad) and isinstance(n.tensor.op, PlaceholderOp):
                for d, index in enumerate(n.indices):
                    if isinstance(index, IterVar) and index.uid == j.uid and n.tensor.ndim > 1:
                        return n.tensor, d
        return None

    def define(self, space):
        space.define_knob("tile_i", TILE_I if self.i_axis is not None else [1])
        space.define_knob("tile_j", TILE_J)
        space.define_knob("order", ["ij", "ji"])
        space.define_knob("pack", [False, True] if self.packable else [False])

    def default(self):
        # 4 vectors wide and 6 rows: 24 accumulators of 32 registers, as wide as the axis allows
        # j: the widest multiple of the vector width (up to 4 vectors) that divides the axis,
        # else two vectors, so tails stay rare and vectors whole
        lanes = lanes_for(self.out.dtype)
        j_extent = self.j_axis.dom_extent
        dividing = [t for t in TILE_J if t % lanes == 0 and t <= 4 * lanes and j_extent % t == 0]
        tile_j = max(dividing) if dividing else (2 * lanes if j_extent >= 2 * lanes else lanes)
        tile_j = tile_j if tile_j in TILE_J else 16
        # i: up to 6 rows; on short axes (where a tail tile is a large share) a height that
        # divides the axis (4 or more), so no tile is a tail and a reshape after the anchor
        # keeps its bounds exact
        i_extent = self.i_axis.dom_extent if self.i_axis is not None else 1
        fitting = [t for t in self.space.knobs["tile_i"].candidates if t <= max(min(i_extent, 6), 1)]
        dividing_i = [t for t in fitting if i_extent % t == 0 and t >= 4 and i_extent <= 64]
        tile_i = max(dividing_i) if dividing_i else max(fitting)
        return {"tile_i": tile_i, "tile_j": tile_j, "order": "ji", "pack": bool(self.packable)}

    def schedule(self, s, cfg):
        dag = self.dag
        for op in dag.downstream(self.anchor):
            if not dag.is_output(op):
                s[op].compute_inline()
        for op in self.others:   # computed from the tiled output's result, as injective ops are
            size = extent(op.output(0).shape)
            schedule_elementwise(s[op], dag, lanes_for(op.output(0).dtype), 4, size >= PARALLEL_MIN_ELEMENTS)
        out = s[self.out]
        local = s[s.cache_write(self.out.output(0), "local")] if self.anchor is self.out else s[self.anchor]
        tj, ti = cfg["tile_j"], cfg["tile_i"]
        if cfg["pack"]:
            tensor, dim = self.packable
            packed = s.pack(tensor, axis=dim, block=tj, readers=[local])
            s[packed].vectorize(packed.op.axis[-1])
            s[packed].parallel(packed.op.axis[0])
        jo, ji = out.split(self.j_axis, factor=tj)
        lead = list(self.out.axis[:-2]) if self.i_axis is not None else list(self.out.axis[:-1])
        if self.i_axis is not None:
            io, ii = out.split(self.i_axis, factor=ti)
            tiles = [io, jo] if cfg["order"] == "ij" else [jo, io]
            out.reorder(*lead, *tiles, ii, ji)
        else:
            tiles, ii = [jo], None
        outer = fuse_all(out, lead + tiles)
        out.parallel(outer)
        out.vectorize(ji)
        local.compute_at(out, outer)
        # the accumulator: reduce loops outside, tile rows unrolled, tile columns vectorized
        li, lj = (local.axis[-2], local.axis[-1]) if self.i_axis is not None else (None, local.axis[-1])
        reduce_axes = list(local.reduce_axis)
        data_lead = [a for a in local.axis if a is not li and a is not lj]
        local.reorder(*data_lead, *reduce_axes, *([li] if li is not None else []), lj)
        if li is not None:
            local.unroll(li)
        local.vectorize(lj)

