"""Scaled dot-product attention (``tensorir.ops.scaled_dot_product_attention``, with an
elementwise epilogue, if any): the scores of a block of query rows never leave the cache.

The output's rows (its leading axes and blocks of ``block`` query rows) run in parallel. Each
block computes, in buffers of its own that stay in L2 (every stage computed at the block's
loop shares the block's rows, the last block shifted back inside the rows):

* the scaled and masked scores of its rows by all keys, register-tiled (``tile_i`` rows by
  ``tile_j`` keys, the keys vectorized, the head dim the reduction outside the tile), the key
  tiles outermost so that a panel of K^T stays in L1 while the block's row tiles read it.
  K^T is read as it is (``pack`` off: its rows are contiguous along the keys) or from panels
  ``tile_j`` keys wide (``pack``: the default for a key not transposed, whose keys lie a head
  dim apart, and for fewer keys than a tile that are not whole vectors: the last panel's zero
  padding lets the last tile run past the keys, its accumulators whole vectors in registers;
  Swin's 49 keys by 32, 0.39 -> 0.25 ms for 64 windows of 3 heads);
* the row max and the row sum, each into four registers (four independent chains), and the
  exponentials between them;
* the product of the exponentials by the values, register-tiled (``tile_o`` rows by the
  value's width, the keys outside, ``unroll_k`` of them per trip), then divided by the row
  sum as the output is stored.

The operands may lie with their heads inside their rows (``(batch, rows, heads, width)``, read
through the attention's axis orders, as models split heads from their projections) and the
output be written so (its heads merged back): the blocks then run over the heads and the rows
as the context's axes lie, and the output's rows are stored a head apart. The keys, a head
dim apart, are packed by default; the values' rows, a head apart, are read where they lie, or
packed head by head (``pack_value``: the default past ``VALUE_BYTES`` of a head's values,
which then stream from L2 without the lines of the other heads: Whisper's attention over 1500
keys, 26.4 -> 24.1 ms on one thread, where BERT's over 128 gains nothing from the copy).

Default block: among the multiples of the default ``tile_o`` up to ``MAX_BLOCK`` rows (and
the query rows themselves, when fewer) whose scores fit ``BLOCK_BYTES``, the one that computes
the fewest rows (the blocks' rows padded to whole blocks) counting a row tile more per block:
24 rows of Whisper's 1500 keys (2 x 141 KB with the exponentials), 66 of BERT's 128 rows, 66
of ViT's 197, 49 of Swin's, 54 of 100 (blocks of 6 would pad least but reuse each panel of
K^T once).
"""
from __future__ import annotations

from tilefuse.tensorir.dtype import itemsize
from tilefuse.tensorir.errors import Unsupported
from tilefuse.tensorir.expr import IterVar, TensorLoad
from tilefuse.tensorir.tensor import PlaceholderOp
from tilefuse.tensorir.walk import walk

from .base import Template, fuse_all, vectorize_by_registers
from .injective import extent, schedule_elementwise

MAX_BLOCK = 96                   # query rows a block holds at most
BLOCK_BYTES = 160 * 1024        # a block's scores at most (its exponentials take as much again)
VALUE_BYTES = 32 * 1024         # a head's values a head apart read where they lie at most
TILE_I = [1, 2, 4, 6, 8]
TILE_J = [16, 32, 48, 64]
TILE_O = [1, 2, 4, 6, 8]
UNROLL_K = [1, 2, 4]


class AttentionTemplate(Template):
    name = "attention"

    def __init__(self, dag, target=None):
        self.scores, self.row_max, self.row_sum, self.context = dag.attention()
        self.out = dag.outputs[0].op
        # where the output's axes lie: its rows and columns are the context's, maybe transposed
        written = [op for op in dag.ops if self.context.output(0) in op.input_tensors]
        self.places = _places(written[0], self.context) if len(written) == 1 else None
        if self.places is None or tuple(self.out.output(0).shape) != tuple(written[0].output(0).shape):
            raise Unsupported("the attention's epilogue changes its output's shape")
        if self.places[-1] != len(self.places) - 1:
            raise Unsupported("the attention's output is written with its columns across the grain")
        self.queries, self.keys = self.scores.output(0).shape[-2:]
        self.key, self.key_dim = _key_read(self.scores)
        self.value, self.value_dim = _rows_apart(self.context)
        # the exponentials the context reads, and the logits they read beside the row max
        self.exp = next((t.op for t in self.context.input_tensors if t.op in dag.ops), None)
        self.logits = next((t.op for t in getattr(self.exp, "input_tensors", ())
                            if t.op is not self.row_max and t.op in dag.ops), None)
        if self.logits is None or self.logits is not self.scores and self.scores not in dag.upstream(self.logits):
            raise Unsupported("the context does not read exponentials of the scores")
        super().__init__(dag, target)

    def _tile(self) -> int:
        """The rows of a register tile of four vectors (two with 16 registers), and the block's step."""
        return 6 if self.target.vector_registers >= 32 else 4

    def define(self, space):
        tile = self._tile()
        blocks = set(range(tile, MAX_BLOCK + 1, tile)) | ({self.queries} if self.queries <= MAX_BLOCK else set())
        space.define_knob("block", sorted(blocks))
        space.define_knob("tile_i", TILE_I)
        space.define_knob("tile_j", TILE_J)
        space.define_knob("tile_o", TILE_O)
        space.define_knob("unroll_k", UNROLL_K)
        space.define_knob("pack", [False, True] if self.key is not None else [False])
        space.define_knob("pack_value", [False, True] if self.value is not None else [False], False)

    def default(self):
        lanes = self.target.lanes(self.out.dtype)
        tile, row_bytes = self._tile(), self.keys * itemsize(self.out.dtype)
        fitting = [b for b in self.space.knobs["block"].candidates if b * row_bytes <= BLOCK_BYTES] or [tile]
        # the rows computed (the last block's overlap too), each block costing a row tile more
        # (its first row tile reads each panel of K^T from L2, and its softmax and buffers)
        block = min(fitting, key=lambda b: (-(-self.queries // b) * b * (b + tile) / b, -b))
        widest = 4 * lanes if self.target.vector_registers >= 32 else 2 * lanes
        tile_j = max((t for t in TILE_J if t <= widest and t <= -(-self.keys // lanes) * lanes), default=TILE_J[0])
        # packed: keys a head dim apart, or fewer keys than a tile and not whole vectors (the
        # tile then runs whole over the panel's zeros, its accumulators in registers)
        across = self.key_dim != self.key.ndim - 1 if self.key is not None else False
        short = self.keys < tile_j and self.keys % lanes != 0
        # values a head apart: packed when a head's are more than L1 keeps between row tiles
        width = self.context.output(0).shape[-1]
        return {"block": block, "tile_i": tile, "tile_j": tile_j, "tile_o": tile, "unroll_k": 4,
                "pack": self.key is not None and (across or short),
                "pack_value": self.value is not None and self.keys * width * itemsize(self.out.dtype) > VALUE_BYTES}

    def schedule(self, s, cfg):
        dag, lanes, exp, logits = self.dag, self.target.lanes(self.out.dtype), self.exp, self.logits
        local = s.cache_write(self.scores.output(0), "local")
        if logits is not self.scores:
            s[self.scores].compute_inline()
        for op in dag.ops:
            if dag.classes[id(op)] == "injective" and op not in (exp, logits, self.out):
                s[op].compute_inline()
        ctx_local = s.cache_write(self.context.output(0), "local")
        out = s[self.out]
        *lead, rows, cols = (out.op.axis[p] for p in self.places)
        if list(self.places) != sorted(self.places):
            out.reorder(*lead, rows, cols)
        block, _ = out.split(rows, factor=cfg["block"])
        outer = fuse_all(out, [*lead, block])
        out.parallel(outer)
        _vectorize(out, cols, lanes)
        self._schedule_scores(s, cfg, s[logits], s[local], out, outer)
        for op in (self.row_max, self.row_sum):
            _row_reduction(s, op, out, outer, lanes)
        ex = s[exp]
        ex.compute_at(out, outer)
        _, vector = ex.split(exp.axis[-1], factor=lanes)
        ex.vectorize(vector)
        # the context at the block's loop, its register tiles (rows by the value's width)
        # accumulated with the keys outside
        ctx = s[self.context]
        ctx.compute_at(out, outer)
        *_, ctx_rows, ctx_cols = self.context.axis
        tile, in_tile = ctx.split(ctx_rows, factor=cfg["tile_o"])
        ctx.unroll(in_tile)
        _vectorize(ctx, ctx_cols, lanes)
        acc = s[ctx_local]
        acc.compute_at(ctx, tile)
        _register_tile(acc, cfg["unroll_k"], lanes, ctx_cols.dom_extent)
        if cfg["pack_value"]:         # each head's values in rows one after the other
            packed = s.pack(self.value, axis=self.value_dim, block=1, readers=[ctx_local])
            schedule_elementwise(s[packed], dag, lanes, 1, extent(packed.shape) >= 1 << 15)

    def _schedule_scores(self, s, cfg, lg, local, out, outer):
        """The block's logits: key tiles outermost, the block's row tiles inside, each a
        register tile accumulated over the head dim."""
        lanes = self.target.lanes(self.out.dtype)
        lg.compute_at(out, outer)
        *lg_lead, lg_rows, lg_cols = lg.op.axis
        jo, ji = lg.split(lg_cols, factor=cfg["tile_j"])
        io, ii = lg.split(lg_rows, factor=cfg["tile_i"])
        lg.reorder(*lg_lead, jo, io, ii, ji)
        lg.unroll(ii)
        vectorize_by_registers(lg, ji, cfg["tile_j"], lanes)
        rounded = ()
        if cfg["pack"]:
            packed = s.pack(self.key, axis=self.key_dim, block=cfg["tile_j"], readers=[local])
            schedule_elementwise(s[packed], self.dag, lanes, 1, extent(packed.shape) >= 1 << 15)
            rounded = (local.op.axis[-1],)     # the last panel's zeros: the last tile runs past the keys
        local.compute_at(lg, io, round_up=rounded)
        _register_tile(local, cfg["unroll_k"], lanes, min(cfg["tile_j"], self.keys))


def _register_tile(stage, unroll: int, lanes: int, width: int) -> None:
    """A product's accumulator: its one reduce axis outermost (``unroll`` trips as copies of the
    tile), the rows unrolled, the columns (``width`` of them) vectorized."""
    (reduce_axis,) = stage.op.reduce_axis
    *lead, rows, cols = stage.op.axis
    outer, inner = stage.split(reduce_axis, factor=unroll)
    stage.reorder(*lead, outer, inner, rows, cols)
    stage.unroll(inner)
    stage.unroll(rows)
    _vectorize(stage, cols, lanes, width)


def _row_reduction(s, op, out, outer, lanes: int) -> None:
    """A row max or sum of the block at the block's loop: four vector registers of partial
    results (four independent chains of max or add), then those reduced."""
    stage = s[op]
    _, vector = stage.split(op.reduce_axis[0], factor=4 * lanes)
    rf = s.rfactor(op.output(0), vector)
    rf_stage = s[rf]
    rf_stage.reorder(*[a for a in rf_stage.leaf_iter_vars if a.kind == "reduce"], rf.op.axis[-1])
    rf_stage.vectorize(rf.op.axis[-1])
    rf_stage.compute_at(out, outer)
    stage.compute_at(out, outer)


def _vectorize(stage, axis, lanes: int, width: int | None = None) -> None:
    """Vectorize ``axis``, a loop of ``width`` (default: its extent) at lowering: whole vector
    registers when it holds a whole number of them, else unrolled vectors of ``lanes``, the
    last one masked (a 49-lane vector would be split by LLVM into odd pieces)."""
    width = axis.dom_extent if width is None else width
    if width % lanes == 0:
        vectorize_by_registers(stage, axis, width, lanes)
    elif width > lanes:
        outer, inner = stage.split(axis, factor=lanes)
        stage.unroll(outer)
        stage.vectorize(inner)
    else:
        stage.vectorize(axis)


def _places(op, context):
    """Where the axes of ``context`` lie among the axes of ``op``, which reads each element of
    it once, maybe transposed (``[0, 2, 1, 3]``: rows and heads swapped); else None."""
    axes = {a.uid: p for p, a in enumerate(op.axis)}
    for load in walk(op.body):
        if isinstance(load, TensorLoad) and load.tensor.op is context:
            places = [axes.get(i.uid) if isinstance(i, IterVar) else None for i in load.indices]
            return places if None not in places and sorted(places) == list(range(len(op.axis))) else None
    return None


def _rows_apart(op):
    """(input, dim) when the context ``op`` reads the value's rows (the keys) from an input
    whose dim ``dim`` (a head's, one of more than one) lies between the rows and the last dim:
    its rows then lie a head apart (BERT's value read from (batch, keys, heads, width));
    else (None, None)."""
    keys = op.reduce_axis[0]
    for load in walk(op.body):
        if isinstance(load, TensorLoad) and isinstance(load.tensor.op, PlaceholderOp):
            dims = [d for d, index in enumerate(load.indices) if isinstance(index, IterVar) and index.uid == keys.uid]
            if dims:
                inside = [d for d in range(dims[0] + 1, load.tensor.ndim - 1) if load.tensor.shape[d] > 1]
                return (load.tensor, inside[-1]) if inside else (None, None)
    return None, None


def _key_read(scores):
    """(input, dim) of the scores' second operand (an input of the kernel) where its dim
    ``dim`` is read with the scores' last axis (the keys), or (None, None)."""
    keys = scores.axis[-1]
    for load in walk(scores.body):
        if isinstance(load, TensorLoad) and isinstance(load.tensor.op, PlaceholderOp):
            for d, index in enumerate(load.indices):
                if isinstance(index, IterVar) and index.uid == keys.uid:
                    return load.tensor, d
    return None, None
