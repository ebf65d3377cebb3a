"""Sliding-window DAGs: a pooling or a depthwise convolution (``Dag.window_anchor``) with its
padding before it and its elementwise epilogue after it (an average's division, bias,
activations). A channels-last convolution in groups of 2 to 4 channels is one too: its
window slides over the channels as well (``ops.window.runs_as_diagonals``), its diagonal
weights a stage of their own that reads only constants, which the build runs once per
weight array (``schedule.hoist``), not inlined as the padding is.

The output's last axis (the image's width in NCHW, the channels in NHWC: the contiguous one)
is split by the vector width and vectorized; the axis before it (the rows) stays a loop of
its own; the leading axes (batch, channels) are fused and run in parallel, but for a small
channels-last depthwise map, whose vectors of channels run in parallel instead
(``_parallel_over_channels``). The window op is
computed at each vector of the output into a one-vector accumulator, its window loops
outside the vector and unrolled, so a 3x3 max pool is nine vector max operations in
registers. The padding is inlined: its select is decided by loop partitioning, so the
interior rows and vectors read the input with no select and only the borders keep one. A
stride of 2 along the width is a wide load and a shuffle (the code generator's strided
access), not a gather.

The ``rows`` knob computes several steps of the axis before the vector at each vector (output
rows in NCHW, columns in NHWC): their accumulators stay in registers across the window loops,
which run outside them, so they share the weights' loads and the input they overlap (a 3x3
stride-1 window over two output rows reads four input rows, not six). A depthwise convolution
in NHWC blocks 4 columns by default (each tap's weights loaded once for 4 vectors: ConvNeXt's
7x7 over 56x56x96 ran 1.9x faster than column by column), its window loops rolled: a block
unrolled built in about twice the time and ran as fast (3x3 over 56x56x144: 87 against 74 us,
over 56x56x72: 30 against 34 us); a pooling, which has no weights, blocks none.
"""
from __future__ import annotations

from tilefuse.tensorir.expr import IterVar, TensorLoad
from tilefuse.tensorir.tensor import PlaceholderOp, post_order
from tilefuse.tensorir.walk import walk

from .base import Template, fuse_all
from .injective import extent

VECTORS = (4, 8, 16, 32)
ROWS = (1, 2, 4)              # steps computed together at each vector (NCHW: 4 is 1.2-1.5x over 1)
UNROLL_MAX_TAPS = 64          # a window of more taps keeps its innermost loop rolled
CHANNEL_VECTORS = 8           # a depthwise convolution's vectors of channels run in parallel from this many
BORDER_SHARE = 5              # ... where one output row in this many or more reads the padding


class WindowTemplate(Template):
    name = "window"

    def __init__(self, dag, target=None):
        self.anchor = dag.window_anchor()
        self.out = dag.outputs[0].op
        super().__init__(dag, target)

    def define(self, space):
        lanes = self.target.lanes(self.out.dtype)
        space.define_knob("vector", sorted({v for v in VECTORS if v <= 2 * lanes} | {lanes}))
        space.define_knob("unroll", [False, True])
        space.define_knob("parallel", [False, True])
        if len(self.out.axis) >= 2 and self.out.output(0).shape[-2] >= 2:
            space.define_knob("rows", list(ROWS), 1)

    def default(self):
        lanes = self.target.lanes(self.out.dtype)
        width = self.out.output(0).shape[-1]
        vectors = self.space.knobs["vector"].candidates
        vector = min((v for v in vectors if v >= min(width, lanes)), default=lanes)
        taps = extent([a.dom_extent for a in self.anchor.reduce_axis])
        rows = extent(self.out.output(0).shape[:-1])
        cfg = {"vector": vector, "unroll": taps <= UNROLL_MAX_TAPS, "parallel": rows >= 2}
        if "rows" in self.space.knobs:        # NCHW, or NHWC with weights: as many as there are, up to 4
            most = max(r for r in ROWS if r <= self.out.output(0).shape[-2])
            if self.anchor.tag == "conv" and _vectors_hold_channels(self.anchor):
                cfg["rows"], cfg["unroll"] = most, False    # a block's FMAs per tap in registers, the taps a loop
            elif _slides_along_last_axis(self.anchor):
                cfg["rows"] = most
            else:
                cfg["rows"] = 1
        return cfg

    def schedule(self, s, cfg):
        dag = self.dag
        for op in dag.ops:
            if op is not self.anchor and not dag.is_output(op) and not _of_constants(op):
                s[op].compute_inline()
        if self.anchor is self.out:
            acc = s[s.cache_write(self.anchor.output(0), "local")]
        else:
            acc = s[self.anchor]
        out = s[self.out]
        axes = list(self.out.axis)
        xo, xi = out.split(axes[-1], factor=cfg["vector"])
        lead, row = axes[:-2], (axes[-2] if len(axes) >= 2 else None)
        lead_loop = fuse_all(out, lead) if lead else None
        block = cfg.values.get("rows", 1)
        if block > 1:                       # rows of a block inside the vector loop
            row, row_in = out.split(row, factor=block)
            out.reorder(row, xo, row_in, xi)
        out.vectorize(xi)
        by_channels = cfg["parallel"] and lead_loop is not None and self._parallel_over_channels(xo.dom_extent)
        if by_channels:     # the vectors of channels in parallel, each over the whole map
            out.reorder(xo, lead_loop, row, *([row_in] if block > 1 else []), xi)
            out.parallel(xo)
            acc.compute_at(out, row)
        elif cfg["parallel"]:
            if lead_loop is not None and extent(self.out.output(0).shape[:-2]) >= 2:
                out.parallel(lead_loop)
            elif row is not None:
                out.parallel(row)
            else:
                out.parallel(xo)
        if not by_channels:
            acc.compute_at(out, xo)
        data = list(acc.op.axis)
        window = list(acc.op.reduce_axis)
        if block > 1:                       # the window loops outside the block's rows
            rows = next(a for a in reversed(data[:-1]) if a.dom_extent > 1)   # past a unit channel axis
            acc.reorder(*[a for a in data[:-1] if a is not rows], *window, rows, data[-1])
            acc.unroll(rows)
        else:
            acc.reorder(*data[:-1], *window, data[-1])
        if cfg["unroll"]:
            for r in window:
                if r.dom_extent > 1:
                    acc.unroll(r)
        acc.vectorize(data[-1])

    def _parallel_over_channels(self, vectors: int) -> bool:
        """Whether a channels-last depthwise convolution (its vectors hold channels, not the
        window's steps) runs its ``vectors`` of channels in parallel rather than its rows: when
        there are ``CHANNEL_VECTORS`` of them or more and at least one output row in
        ``BORDER_SHARE`` reads the padding. Partitioning splits those border rows off the
        interior ones into parallel loops of their own, a few rows each (3, 8 and 3 of a 7x7
        window over 14 rows), which two threads share unevenly, one launch each. ConvNeXt-T's
        7x7 ones in-model: 14x14x384 82 -> 46 us, 28x28x192 130 -> 89 us, 7x7x768 57 -> 42 us
        (the model 1.019x); EfficientNet-B0's 5x5 over 7x7x1152 43 -> 37 us. Over 56x56x96
        (11% border rows) they ran 1.3x slower, each thread reading the rows the other
        core's producer wrote; with fewer vectors than that, the threads share them unevenly."""
        shape = self.out.output(0).shape
        if self.anchor.tag != "conv" or len(shape) != 4 or vectors < CHANNEL_VECTORS or \
                not _vectors_hold_channels(self.anchor):
            return False
        taps = [r.dom_extent for r in self.anchor.reduce_axis]     # (channel, rows, columns)
        source = [t for t in self.dag.placeholders if t.op.tag != "constant" and len(t.shape) == 4
                  and t.shape[-1] == shape[-1] and t.shape[1] >= shape[1]]     # the map, not the weights
        if len(taps) != 3 or not source:
            return False
        stride = max(1, round(source[0].shape[1] / shape[1]))
        border = -(-(taps[1] - 1) // stride)            # output rows whose window reads the padding
        return border * BORDER_SHARE >= shape[1]


def _of_constants(op) -> bool:
    """Whether ``op`` reads constant placeholders alone (a convolution's diagonal weights,
    ``ops.window.runs_as_diagonals``): kept a stage of its own, which the build runs once per
    weight array (``schedule.hoist``), not recomputed at each tap."""
    leaves = [leaf for leaf in post_order([op.output(0)]) if isinstance(leaf, PlaceholderOp)]
    return bool(leaves) and all(leaf.tag == "constant" for leaf in leaves)


def _vectors_hold_channels(anchor) -> bool:
    """Whether the vectors of ``anchor``, a convolution, hold channels (channels-last): a
    load other than the map's (the weights) reads its last axis and no other axis longer than
    1. In NCHW the vectors hold an image row's pixels, which the map alone is read along."""
    last = anchor.axis[-1].uid
    others = {a.uid for a in anchor.axis[:-1] if a.dom_extent > 1}
    for load in walk(anchor.body):
        if isinstance(load, TensorLoad):
            read = {v.uid for index in load.indices for v in walk(index) if isinstance(v, IterVar)}
            if last in read and not read & others:
                return True
    return False


def _slides_along_last_axis(anchor) -> bool:
    """Whether the window of ``anchor`` moves along its input's last axis (the width, in NCHW),
    so that the rows of a block overlap in the vectors they load. In NHWC the vector holds
    channels: on resnet50's 3x3 stride-2 max pool, blocks of 4 columns measured 3x slower
    than single columns, so there the tuner alone chooses blocks."""
    window = {a.uid for a in anchor.reduce_axis if a.dom_extent > 1}
    return any(isinstance(load, TensorLoad) and load.indices and
               any(isinstance(v, IterVar) and v.uid in window for v in walk(load.indices[-1]))
               for load in walk(anchor.body))
