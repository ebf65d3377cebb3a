"""Complex-out-fusable DAGs: one multiply-accumulate anchor (matmul, batch matmul, dense,
convolution) and the elementwise epilogue after it (bias, relu, gelu, add, ...).

The output's last two axes are tiled (tile_i x tile_j); the anchor is computed at each tile
into a local accumulator of that size (cache_write when the anchor is the output itself), with
its reduce loops outside and the tile unrolled over i and vectorized over j, so the
accumulator lives in vector registers for the whole reduction. The epilogue is inlined into
the output, which is written once per tile, vectorized. A constant operand read along j (a
data one too, by default when its matrix is large: see ``default_for``) is repacked into
tile_j-wide panels (pack) so the reduction reads it contiguously. The outer
tile loops and any leading axes (batch, an image's rows) are fused and parallel, in the order
of the "order" knob: "ij" runs the leading axes, the row tiles, then the column tiles (a row
tile meets every weight panel in turn); "ji" runs the column tiles outermost, so each weight
panel is read from memory once and serves every row of the output before the next one (on
resnet50's 7x7 layers, whose 4-8 MiB of weights the old order swept once per image row, the
1x1 convolutions ran 1.8-2.2x faster, the whole model 1.3x).

A convolution in NCHW has a second layout ("layout" knob): its tile rows run along the
image's width and its vectors along the output channels, the axis only the weights are read
along. The accumulator is kept channels-last (``cache_write(..., order=...)``), the weights are
packed into channel panels, the input is broadcast one pixel at a time, and the output is
written once per tile with a strided store. The GEMM micro-kernel, with C's rows being pixels.

A grouped NCHW convolution (RegNet's and ResNeXt's 3x3 ones: 8 to 64 groups of 8 to 32
channels) accumulates in ``(N, G, O/G, *X)`` under an output in ``(N, O, *X)``: the template
tiles the output as if its channel axis were split there (``dims``), so the channels layout's
register tile spans pixels by a group's channels (only tiles that divide the group are
searched: the weights' panels never cross groups), the group a parallel leading axis. A
channels-last one (``(N, *X, G, O/G)`` under ``(N, *X, O)``, in groups of whole vectors)
gets the same tile from its rows layout, which then tiles the width by a group's channels
and stores each pixel's channels contiguously (320 channels of 14x14 in 20 groups: 1730 ->
100 us on one core, where a tile of 64 channels across groups gathered its weights). In
the rows layout the tile holds all the channels of a group up to ``WHOLE_GROUP_CHANNELS``
wide (``whole_groups``): rows of pixels by the group's channels, so each input vector
serves them all; the default for groups narrower than a vector at stride 1 (ResNeXt's 4
and 8). Each row of tiles copies the padded input rows it reads (a group's few input
channels) into a buffer of its own, in L1, instead of a padded copy of the whole input
before the convolution. On one AVX-512 core, against the rows of pixels of one channel a
tile before: 320 channels of 14x14 in 20 groups 270 -> 110 us, 144 channels of 56x56 at
stride 2 in 9 groups 1000 -> 265 us, 128 channels of 56x56 in 32 groups (4 a group) 490 ->
265 us, 256 of 28x28 in 32 groups 340 -> 215 us.

When j does not divide into tiles, the last tile's accumulator runs past the end of j into the
packed panels' zero padding (a round-up tail, ``compute_at(..., round_up=...)``), so its
reads stay aligned to the panels; only the output's store is guarded.

Two levels of tiles: ``block_i`` x ``block_j`` register tiles form a cache block, one per
parallel iteration, whose tiles run in turn in the "order" knob's order (a row tile of the
data stays in L1 across the block's weight panels, a panel across its row tiles); only blocks
that divide the tiles are searched. ``unroll_k`` copies the register tile that many times per
trip of the innermost reduce loop that loops (a 1x1 convolution's input channels, a 3x3 one's
filter columns). The default is one tile per block and up to 4 copies.

Packed weights can be fetched ahead ("prefetch" knob, bytes): each step of the outermost reduce
loop fetches the panel's lines that the reduction will read that many bytes of panel later.
Weights too large for L2 that serve few output rows (resnet50's 7x7 layers, a classifier) stream
from memory at each call, at 1.25-1.4x the time the same kernel takes with them in cache;
fetched 2 KiB ahead they ran 5-12% faster. Only the first row of the register tile fetches.
Weights are fetched into L2 only (``base.fetch_panel_ahead``, ``base.fetch_next_panel``): in
L1 the lines fetched ahead evicted those the tile reads now.
Winograd's products fetch their transformed filters the same way (8-23% faster there).
Weights too large for L2 that serve many rows, swept panel by panel ("ji"), fetch the next
panel instead ("fetch_next_panel" knob, ``base.fetch_next_panel``): each trip of the reduction
fetches a line of it, each row tile its own share, so that the first row tile of every panel
no longer reads it from memory at the pace of its multiply-adds. In a model, whose layers'
weights come from memory at each run, BERT's 128x768x3072 layer took 3.66 ms against 3.10
with its weights in cache; 3.29 with the fetch (197 rows: 5.36 -> 4.92 ms).

A 3x3, stride-1 or 2, channels-last convolution with constant weights has a "winograd" knob: 0
computes it as above; m = 2, 3 or 4 redefines the anchor as Winograd's F(m x m, 3 x 3)
(``schedule/templates/winograd.py``), whose matrix products take the tile knobs, and
"winograd_fused" computes its stages per row of tiles (register tiles that divide the row).
The default takes Winograd at stride 1 where its tiles serve enough products
(``winograd.default_winograd``).

With several outputs, one of them is tiled as above (the output every other one reads the
anchor's values through, e.g. relu when the DAG returns relu and relu squared); the others
are computed after it from its result as injective loops (fused, vectorized, parallel), so
the anchor is computed once.

When the tile's rows read an input computed in the kernel (a convolution's padded copy) whose
rows are a multiple of ``SET_ALIASING_BYTES`` apart (512 channels at stride 2 are 4 KiB), the
copy's rows get a cache line of padding (``storage_align``): each reduce step reads one line
from every row, and rows 4 KiB apart would all fall in the same L1 set and evict one another
(resnet50's 3x3 stride-2 convolution into 7x7x512 ran 2.2x slower).
"""
from __future__ import annotations

from tilefuse.tensorir.dtype import itemsize
from tilefuse.tensorir.errors import Unsupported
from tilefuse.tensorir.expr import Const, IterVar, TensorLoad, as_expr
from tilefuse.tensorir.simplify import Linear, linear_coefficient, simplify
from tilefuse.tensorir.tensor import ComputeOp, PlaceholderOp
from tilefuse.tensorir.walk import reads_var, substitute, walk

from .base import CACHE_LINE_BYTES, Template, fetch_next_panel, fetch_panel_ahead, fuse_all, vectorize_by_registers
from .injective import PARALLEL_MIN_ELEMENTS, extent, schedule_elementwise
from .winograd import TILE_SIZES, default_winograd, schedule_winograd, tile_grid, winograd_operands

TILE_I = [1, 2, 4, 6, 7, 8, 12, 14, 16]
TILE_J = [8, 16, 32, 48, 64]
BLOCKS = [1, 2, 4, 8, 16]      # register tiles per cache block along an axis (1: no block)
UNROLL_K = [1, 2, 4, 8]        # copies of the register tile per trip of the innermost reduce loop
PREFETCH_BYTES = [0, 2048, 4096]   # how far ahead in its panel the reduction fetches the packed weights
STREAMED_ROWS = 64           # weights that serve at most this many output rows stream from memory
STREAMED_ACCUMULATORS = 24   # a pointwise convolution's register tile over pixels with streamed weights, at most
EIGHT_ROWS_MAX = 256         # a product's rows in tiles of 8 by 48 where 8 divides them and 6 does not, up to this many
SEVEN_ROWS = 7               # a product's rows in tiles of 7 where 7 divides them and neither 4 nor 6 does, up to STREAMED_ROWS
PANEL_SWEEPS = 4             # row tiles that share the fetch of the next panel, at least (see default_for)
DEFAULT_UNROLL_K = 4           # the default's copies of the register tile, at most (see default_for)
CONVOLUTION_TAGS = ("conv", "conv_transpose")   # anchors whose channels layout is the default one
WEIGHTS_IN_L2 = 256 * 1024   # packed weights up to this size stay in L2 (half of the smallest L2 we run on)
PACKED_DATA_ROWS = 16        # data is packed (a pass per call) only for at least this many output rows
PACKED_DATA_DEPTH = 192      # nor for a reduction this short: its panel stays in L1 unpacked (48 KiB with AVX-512),
PANEL_PAGE_ROWS = 256        # unless this many output rows read it (each row tile reads a page per panel row)
SET_ALIASING_BYTES = 2048    # a tile's input rows this far apart (or a multiple) share few L1 sets
WHOLE_GROUP_CHANNELS = 16   # a grouped convolution's rows layout keeps groups up to this wide in its tile
GROUP_TILE_J = TILE_J[0]     # a grouped convolution's channels layout tiles within groups: a multiple of this wide


class ComplexTemplate(Template):
    name = "complex"

    def __init__(self, dag, target=None):
        self.anchor = dag.of_class("complex")[0]
        self.out = self._tiled_output(dag)
        self.others = [t.op for t in dag.outputs if t.op is not self.out]
        self.groups = self._group_split()
        self.dims = list(self.anchor.output(0).shape) if self.groups else list(self.out.output(0).shape)
        nd = len(self.dims)
        # layout -> (i dim, j dim) of the tiled output, counted in ``dims``: "rows" tiles its last
        # two axes (a channels-last grouped convolution's pixels by a group's channels);
        # "channels" (an NCHW convolution) vectorizes the axis the weights are read along, with
        # the last axis as rows, and keeps the accumulator channels-last
        self.layouts = {"rows": (nd - 2 if nd >= 2 else None, nd - 1)}
        if self.groups is not None and self.groups[0] == nd - 2:
            self.layouts["rows"] = (nd - 3, nd - 1)
        channel = self._channel_dim()
        if channel is not None and (self.groups is None or self.groups[1] % GROUP_TILE_J == 0):
            self.layouts["channels"] = (nd - 1, channel)
        self.i_extent, self.j_extent = self._extents("rows")
        self.winograd = winograd_operands(self.anchor)
        super().__init__(dag, target)

    def _extents(self, layout):
        """(extent of the i axis, or None when there is none; extent of the j axis) of ``layout``."""
        i, j = self.layouts[layout]
        return (self.dims[i] if i is not None else None), self.dims[j]

    def _group_split(self):
        """(dim, channels per group) when the anchor is a grouped convolution laid out with a
        group axis and a channel-in-group axis (``(N, G, O/G, *X)`` or ``(N, *X, G, O/G)``)
        where the tiled output has their product (``(N, O, *X)``, ``(N, *X, O)``) at ``dim``,
        before the two axes the rows layout tiles or last; else None. The template then tiles
        the output as if split there (``dims``), so that a register tile spans one group's
        channels."""
        outer, inner = tuple(self.out.output(0).shape), tuple(self.anchor.output(0).shape)
        if self.anchor.tag != "conv" or len(inner) != len(outer) + 1 or len(outer) < 3:
            return None
        for d in [*range(len(outer) - 2), len(outer) - 1]:
            if inner[:d] == outer[:d] and inner[d + 2:] == outer[d + 1:] and inner[d] * inner[d + 1] == outer[d] \
                    and min(inner[d], inner[d + 1]) > 1 and (d < len(outer) - 1 or inner[d + 1] % GROUP_TILE_J == 0):
                return d, inner[d + 1]
        return None

    def _tiled_axes(self, stage):
        """The tiled output's loops, one per dim of ``dims`` (its grouped dim split in two)."""
        axes = list(stage.op.axis)
        if self.groups is None:
            return axes
        d, per_group = self.groups
        return axes[:d] + list(stage.split(axes[d], factor=per_group)) + axes[d + 1:]

    def _within_group(self, layout: str) -> bool:
        """Whether ``layout`` vectorizes a group's channels (its j axis the channel in a group)."""
        return self.groups is not None and self.layouts[layout][1] == self.groups[0] + 1

    def whole_groups(self, layout: str) -> bool:
        """Whether the register tile of ``layout`` holds all the channels of a group: the rows
        layout of a grouped convolution in groups of at most ``WHOLE_GROUP_CHANNELS`` (its
        rows of pixels share each input vector among the group's channels, where one channel
        a tile loads as many vectors as it multiplies)."""
        return layout == "rows" and self.groups is not None and self.groups[1] <= WHOLE_GROUP_CHANNELS \
            and not self._within_group(layout)

    def _pixel_stride(self):
        """How far apart the input pixels are that neighbouring outputs along the last axis
        read (a convolution's stride), or None when no data input is read along it."""
        last = self.anchor.axis[-1]
        for load in walk(self.anchor.body):
            if isinstance(load, TensorLoad) and not _is_constant(load.tensor) and load.indices:
                step = Linear.of(simplify(load.indices[-1])).terms.get(last)
                if step:
                    return step
        return None

    def _channel_index(self, index, axis) -> bool:
        """Whether ``index`` reads exactly ``axis``, or, in a grouped convolution, the channel
        ``g * (channels per group) + axis`` of group ``g`` (the weights' output channel)."""
        if isinstance(index, IterVar):
            return index.uid == axis.uid
        if self.groups is None:
            return False
        d, per_group = self.groups
        group, channel = self.anchor.axis[d], self.anchor.axis[d + 1]
        if axis is not channel:
            return False
        linear = Linear.of(index)
        return linear.const == 0 and linear.terms == {group: per_group, channel: 1}

    def _channel_dim(self):
        """The dim (not the last) of the anchor that only constant inputs (or stages computed
        from them) of rank > 1 read, one with exactly its index, as a convolution's weights read
        the output channels (in a grouped convolution, as a group's channel: ``_channel_index``);
        None when there is none or the tiled output's shape is neither the anchor's nor a grouped
        convolution's channels in one axis."""
        if self.dims != list(self.anchor.output(0).shape) or len(self.anchor.axis) < 3:
            return None
        loads = [n for n in walk(self.anchor.body) if isinstance(n, TensorLoad)]
        for d, axis in enumerate(self.anchor.axis[:-1]):
            readers = [n for n in loads if any(isinstance(v, IterVar) and v.uid == axis.uid
                                               for index in n.indices for v in walk(index))]
            if readers and all(_is_constant(n.tensor) and n.tensor.ndim > 1 for n in readers) and \
                    any(self._channel_index(index, axis) for n in readers for index in n.indices):
                return d
        return None

    def _tiled_output(self, dag):
        """The output whose tiles hold the anchor's accumulator: one that every other output
        reads the anchor's values through (Unsupported if there is none)."""
        outputs = [t.op for t in dag.outputs]
        for candidate in outputs:
            if all(other is candidate or not self._reads_anchor_around(other, candidate) for other in outputs):
                return candidate
        raise Unsupported("no output of the DAG carries all others' reads of the anchor")

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

    def _pixels_by_channels(self, layout: str) -> bool:
        """Whether ``layout`` tiles a convolution's pixels by its output channels: the channels
        layout of an NCHW one, or the rows of a channels-last one (its last axis the channels)."""
        return layout == "channels" or (self.anchor.tag == "conv" and len(self.anchor.axis) >= 3
                                        and self.packable(layout) is not None)

    def _constant_read_along(self, axes):
        """(tensor, its dim, the anchor's dim) of the first input of rank > 1 (the constant
        weights first) that the anchor reads with index exactly one of ``axes`` (or a group's
        channel: ``_channel_index``), or None."""
        wanted = [(d, a) for d, a in enumerate(self.anchor.axis) if any(a is b for b in axes)]
        loads = [n for n in walk(self.anchor.body) if isinstance(n, TensorLoad)
                 and isinstance(n.tensor.op, PlaceholderOp) and n.tensor.ndim > 1]
        for n in sorted(loads, key=lambda n: n.tensor.op.tag != "constant"):
            for d, index in enumerate(n.indices):
                for anchor_dim, axis in wanted:
                    if self._channel_index(index, axis):
                        return n.tensor, d, anchor_dim
        return None

    def _aliasing_rows(self, layout: str):
        """(stage's op, dim, elements per entry of dim) of an input computed in the DAG from
        data (not a placeholder, nor weights regrouped) that the tile's rows read
        ``SET_ALIASING_BYTES`` or a multiple apart along its second-to-last dim ``dim`` alone
        (a channels-last image's pixels); or None."""
        i_dim = self.layouts[layout][0]
        if i_dim is None or len(self.anchor.axis) != len(self.out.axis):
            return None
        i = self.anchor.axis[i_dim]
        for load in walk(self.anchor.body):
            if not isinstance(load, TensorLoad) or not isinstance(load.tensor.op, ComputeOp) or \
                    _is_constant(load.tensor):      # computed from weights: a prepacked kernel's output
                continue
            zero = {v.uid: as_expr(0) for index in load.indices for v in walk(index) if isinstance(v, IterVar)}
            steps = [getattr(simplify(substitute(index, {**zero, i.uid: as_expr(1)})), "value", None)
                     for index in load.indices]
            moving = [d for d, step in enumerate(steps) if step != 0]
            d = len(steps) - 2              # rows along the axis before the contiguous one: a pixel's channels
            if moving != [d] or steps[d] is None:
                continue
            pitch = extent(load.tensor.shape[d + 1:])
            if steps[d] * pitch * itemsize(load.tensor.dtype) % SET_ALIASING_BYTES == 0:
                return load.tensor.op, d, pitch
        return None

    def _panel_rows_alias(self, tensor) -> bool:
        """Whether the anchor reads ``tensor``'s rows along its innermost looping reduce axis
        ``SET_ALIASING_BYTES`` or a multiple apart: an unpacked panel's rows then share a few
        L1 sets and evict one another (a 2048-wide matrix: 8 KiB apart)."""
        inner = self._unrolled_reduce_axis()
        for load in walk(self.anchor.body):
            if inner is None or not isinstance(load, TensorLoad) or load.tensor.op is not tensor.op:
                continue
            for d, index in enumerate(load.indices):
                if isinstance(index, IterVar) and index.uid == inner.uid:
                    return extent(tensor.shape[d + 1:]) * itemsize(tensor.dtype) % SET_ALIASING_BYTES == 0
        return False

    def packable(self, layout: str = "rows"):
        """(tensor, dim) of an input the anchor reads with index exactly the layout's j axis
        in dimension dim: repacking it into j-panels makes its reads contiguous; or None."""
        # "channels" needs the output's shape to be the anchor's: its dims are the anchor's too
        j = self.anchor.axis[self.layouts[layout][1] if layout == "channels" else -1]
        found = self._constant_read_along([j])
        return None if found is None else found[:2]

    def _slice_and_rows(self, layout: str) -> tuple[int, int]:
        """(bytes, output rows) of the packable input's matrix that one index of the anchor's
        other axes reads (a batch's own matrix in a batch of products, else the whole input),
        and how many output rows read each such matrix."""
        tensor, _ = self.packable(layout)
        j = self.anchor.axis[self.layouts[layout][1] if layout == "channels" else -1]
        others = {a.uid: a.dom_extent for a in self.anchor.axis if a is not j}
        batch = {index.uid for n in walk(self.anchor.body) if isinstance(n, TensorLoad) and n.tensor.op is tensor.op
                 for index in n.indices if isinstance(index, IterVar) and index.uid in others}
        matrices = extent([others[uid] for uid in batch])
        rows = extent([e for uid, e in others.items() if uid not in batch])
        return extent(tensor.shape) * itemsize(tensor.dtype) // matrices, rows

    def rounds_up(self, layout: str) -> bool:
        """Whether the accumulator may run past the end of the j axis (a round-up tail, so a
        last tile stays aligned to the packed panels): the packable input is the only one the
        anchor reads along j, and its packed panels are padded; never in a grouped convolution
        (past the end of a group are the next group's weights, past the last one's none)."""
        packable = self.packable(layout)
        if packable is None or self.groups is not None:
            return False
        j = self.anchor.axis[self.layouts[layout][1] if layout == "channels" else -1]
        along_j = [n for n in walk(self.anchor.body) if isinstance(n, TensorLoad)
                   and any(isinstance(v, IterVar) and v.uid == j.uid for index in n.indices for v in walk(index))]
        return all(n.tensor.op is packable[0].op for n in along_j)

    def define(self, space):
        if len(self.layouts) > 1:
            space.define_knob("layout", list(self.layouts))
        space.define_knob("tile_i", TILE_I if self.i_extent is not None else [1])
        space.define_knob("tile_j", TILE_J)
        space.define_knob("order", ["ij", "ji"])
        space.define_knob("pack", [False, True] if any(self.packable(lay) for lay in self.layouts) else [False])
        # configs stored before these knobs: no blocks, no unrolling (what the schedule was then)
        space.define_knob("block_i", BLOCKS if self.i_extent is not None else [1], 1)
        space.define_knob("block_j", BLOCKS, 1)
        inner = self._unrolled_reduce_axis()
        extent = inner.dom_extent if inner is not None else 1
        space.define_knob("unroll_k", sorted({u for u in UNROLL_K if extent % u == 0} | (
            {extent} if extent <= UNROLL_K[-1] else set())), 1)
        space.define_rule(self._blocks_divide)
        if any(map(self._within_group, self.layouts)):     # a tile spans one group's channels only
            space.define_rule(lambda values: not self._within_group(values.get("layout", "rows"))
                              or self.groups[1] % values["tile_j"] == 0)
        # constant weights only: a panel packed from data in the kernel was just written, so is in cache
        if any(p is not None and _is_constant(p[0]) for p in map(self.packable, self.layouts)):
            space.define_knob("prefetch", PREFETCH_BYTES, 0)    # configs stored before it: no prefetch
            # of the weights' panels: packed ones, or Winograd's transformed filters
            space.define_rule(lambda values: not values["prefetch"] or values["pack"] or values.get("winograd"))
        if self._sweeps_panels():       # configs stored before it: no fetch of the next panel
            space.define_knob("fetch_next_panel", [False, True], False)
            space.define_rule(lambda values: not values["fetch_next_panel"] or (
                values["pack"] and values["order"] == "ji" and not values["prefetch"]
                and values.get("layout", "rows") == "rows" and not values.get("winograd")))
        if self.winograd is not None:
            space.define_knob("winograd", [0, *TILE_SIZES], 0)     # configs stored before it: direct
            space.define_knob("winograd_fused", [False, True], False)   # and before this one: unfused
            space.define_rule(self._fused_rows_divide)
            if len(space.knobs["pack"]) > 1:    # Winograd's filters are always in panels: pack does nothing
                space.define_rule(lambda values: not (values["winograd"] and values["pack"]))
            # its products keep one register tile per parallel iteration and their own reduce loop
            space.define_rule(lambda values: not values["winograd"] or
                              values["block_i"] == values["block_j"] == values["unroll_k"] == 1)

    def _sweeps_panels(self) -> bool:
        """Whether the rows layout can sweep constant weights panel by panel with a next panel
        to fetch (``fetch_next_panel``): an ungrouped product or convolution, the weights
        packed into more than one panel, its output the tiled one's shape but for leading
        ones (GPT-2's dense layers are (128, N) products reshaped to (1, 128, N))."""
        packable = self.packable("rows")
        return (packable is not None and _is_constant(packable[0]) and self.groups is None
                and self.j_extent > TILE_J[-1] and self.i_extent is not None
                and _without_leading_ones(self.dims) == _without_leading_ones(self.anchor.output(0).shape))

    def _fused_rows_divide(self, values) -> bool:
        """Whether a fused Winograd (one row of tiles per parallel iteration) has whole register
        tiles of ``tile_i`` tiles in a row; unfused configs pass, direct ones only unfused."""
        if not values["winograd_fused"]:
            return True
        return bool(values["winograd"]) and self._tiles_per_row(values["winograd"]) % values["tile_i"] == 0

    def _tiles_per_row(self, m: int) -> int:
        """How many of Winograd's m x m tiles cover a row of the output."""
        return tile_grid(*self.anchor.output(0).shape[1:3], m)[1]

    def _unrolled_reduce_axis(self):
        """The innermost reduce axis of the anchor that loops (extent > 1; a 1x1 convolution's
        input channels, a 3x3 one's filter columns), or None: what ``unroll_k`` unrolls."""
        return next((r for r in reversed(self.anchor.reduce_axis) if r.dom_extent > 1), None)

    def _blocks_divide(self, values) -> bool:
        """Whether each block (``block_i``, ``block_j``) divides its axis's number of tiles
        (every parallel iteration then has whole blocks and no guard: a block that does not
        divide them leaves a last block short, whose loop's guard doubles the code for no
        gain, and a block past the last tile computes the kernel of the one that ends there),
        and whether the order knob orders two loops: more than one block of column tiles and
        more than one of row tiles or of the leading axes, or blocks of both (else "ji"
        computes the kernel of "ij")."""
        if values.get("winograd"):      # its products tile other axes: the order knob orders them
            return True
        layout = values.get("layout", "rows")
        blocks = (values["block_i"], values["block_j"])
        tiles = [-(-n // tile) if n is not None else 1
                 for n, tile in zip(self._extents(layout), (values["tile_i"], values["tile_j"]))]
        if any(t % b for t, b in zip(tiles, blocks)):
            return False
        lead = extent([n for d, n in enumerate(self.dims) if d not in self.layouts[layout]])
        outer_i, outer_j = (t // b for t, b in zip(tiles, blocks))
        ordered = (outer_j > 1 and outer_i * lead > 1) or all(b > 1 for b in blocks)
        return ordered or values["order"] == "ij"

    def default(self):
        direct = self._direct_default()
        m, fused = default_winograd(self.winograd, self.anchor.output(0).shape) if self.winograd else (0, False)
        return {**direct, **self._winograd_values(m, fused, direct)} if m else direct

    def _direct_default(self) -> dict:
        """``default_for`` the layout a direct kernel takes by default."""
        lanes = self.target.lanes(self.out.dtype)
        channels = self._extents("channels")[1] if "channels" in self.layouts else 0
        # a convolution's whole vectors of channels, or enough of them that a partial one is rare
        # (a grouped one's whatever the group's width, but for groups narrower than a vector at
        # stride 1, whose rows of pixels hold a whole group); a product with constant rows
        # (weights @ data) keeps its rows: the data's contiguous rows make the vectors, the
        # weights are broadcast, and the output is stored whole
        wide = channels >= lanes and (channels % lanes == 0 or channels >= 4 * lanes)
        grouped = self.groups is not None and channels and not (
            self.whole_groups("rows") and channels < lanes and self._pixel_stride() == 1)
        layout = "channels" if self.anchor.tag in CONVOLUTION_TAGS and (wide or grouped) else "rows"
        return self.default_for(layout)

    def default_for(self, layout: str) -> dict:
        """The default knob values with ``layout``: a register tile sized for the target's
        vector registers, as wide as the j axis allows, and the tile order that keeps the
        packed weights in L2.

        * j: the widest multiple of the vector width (up to 4 vectors with 32 registers, 2
          with 16) that divides the axis, else two vectors (one on a short axis), so tails
          stay rare and vectors whole;
        * i: up to 6 rows (4 with 16 registers: 8 accumulators, and fewer rows of A whose
          4 KiB-apart addresses share L1 sets; 6 when the tile is one vector wide, so that
          enough independent accumulators hide the FMA latency); on short row axes (64 or
          fewer) a height of
          4 or more that divides the axis, so no tile is a tail and a reshape after the anchor
          keeps its bounds exact; on rows that 8 divides and 6 does not, up to
          ``EIGHT_ROWS_MAX`` (``_eight_rows_fit``: a transformer's 128 tokens), 8 by 48 where
          48 divides the columns, as many accumulators as 6 by 64 and no last tile shifted
          back over its neighbour (old against new in one process: BERT-base 1.02-1.06x,
          GPT-2 1.05x, MiniLM 1.03x, T5-small's encoder 1.01-1.06x; BERT's 128x768 outputs
          7% faster in their kernels, its 128x3072 ones as fast); on rows that 7 divides and
          neither 4 nor 6 does, up to ``STREAMED_ROWS`` (``_seven_rows_fit``: a 7x7
          map's 49 pixels, ConvNeXt's and Swin's last stage), 7 by the widest dividing columns
          that keep ``STREAMED_ACCUMULATORS`` (7x48 where 6x64 shifted its last tile: in-model,
          ConvNeXt-T's 49x768x3072 GELU layers 2.30 -> 2.16 ms, its 49x3072x768 ones 2.88 ->
          2.59 ms, three each; Swin-T's last stage's dense layers 6-11% faster); with pixels by channels
          (the channels layout, or a channels-last convolution), one tile for a row of up to 8
          pixels where the registers hold it, else (with 32 registers) the height from 4 to 8
          that pads the row least, the larger on a tie (7 for 14- and 28-pixel rows, 8 for 56
          and 112, 7 for 13 and 27, 8 for 55; a one-vector tile keeps 6 rows where 6 divides the row: a
          13-pixel row in tiles of 6 wastes a third of its last tile); with 32 registers, no
          more channel vectors than leave the 16
          accumulators half the registers (the rest hold the weights' vectors and the pixel),
          or ``STREAMED_ACCUMULATORS`` for a pointwise convolution whose weights stream from
          memory (``_sums_one_axis``: the wider tile reads each weight vector for more
          FMAs; resnext50's 7x7 layers of 1024 to 2048 channels ran 7-13% faster in tiles of
          7x48 than 7x32, regnety-800mf's 7x7x784 4-7%; resnet18's 3x3 ones over 7x7x512,
          18% slower, keep 16);
          a grouped convolution's rows as tall as those 16 accumulators allow (14 for a 14- or
          28-pixel row of one 16-channel vector: with only a group's few input channels to sum,
          the tile's fixed costs weigh more; 7x7 pixels x 16 channels, 1.2-1.4x slower) and
          its channel tiles the widest that divide a group (8: a half vector); with a whole
          group in a rows tile (``whole_groups``), as many rows of one vector of pixels (two
          for groups of 4) as keep the group's accumulators to 16 (8 with 16 registers);
        * order: "ij" (each row tile meets every weight panel while its inputs are in L1) when
          the packed weights fit in ``WEIGHTS_IN_L2`` bytes, else "ji" (each panel read from
          memory once, for every row of the output); for data, the matrix of one product in a
          batch counts (attention's K^T of one head: 12 heads of 128x64x128 104 -> 83 us,
          384x64x384 775 -> 670 us, Swin's 49x32x49 68 -> 55 us; its P.V products the same);
        * unroll_k: 4 copies of the register tile per trip of the innermost looping reduce
          loop, or as many as divide it up to 4 (3 for a 3x3 convolution's filter columns),
          or the whole loop when nothing up to 4 divides it and it is at most 8 long (7 for
          resnet50's 7x7 stem, 1.4-1.6 ms against 1.7-1.9 ms with 1 copy):
          one trip of 14 FMAs and 9 loads plus the loop's own 3 instructions nearly fills the
          4-wide issue of a core with two FMA ports (Skylake-AVX512: resnet50's 1x1 and 3x3
          layers ran 10-40% faster unrolled; the kernel compiles in up to twice the time);
        * fetch_next_panel: where the weights are swept panel by panel ("ji") by at least
          ``PANEL_SWEEPS`` row tiles, which share the fetch: BERT-base 1.02-1.08x -> 1.18x
          onnxruntime's speed, ViT-B/16 1.10x -> 1.22x, T5-small's encoder 1.09x -> 1.29x;
          on 7x7 maps (7 row tiles) it beat fetching 2 KiB ahead in the panel: resnet18's
          7x7x512 3x3 layers 1.20 -> 0.93 ms, resnext50's 7x7x2048 1x1 ones 1.12 -> 0.94;
        * prefetch: 2 KiB ahead when the packed weights do not fit ``WEIGHTS_IN_L2``, serve
          at most ``STREAMED_ROWS`` output rows (they stream from memory: 5-12% on resnet50's
          7x7 layers and its classifier) and are not fetched a panel ahead (a row tile or
          three: fetching the next panel one row tile alone, AlexNet's 9216 -> 4096 layer took
          8.2 ms against 5.3), else none (3-9% slower on resnet50's 14x14 and 56x56 layers);
        * pack: constant weights, packed once at compile time; data, packed on every call, only
          when its matrix (a batch's own, in a batch of products) outgrows ``WEIGHTS_IN_L2``
          and at least ``PACKED_DATA_ROWS`` output rows read it: unpacked, a panel's rows lie
          a whole row of the matrix apart, so each row tile reads it from all over the matrix,
          which no longer stays in L2 (nor its pages in the TLB). Data x data on 2 AVX-512
          cores: 1024^3 18.9 -> 6.2 ms (26% -> 77% of the FMA peak, 0.37x -> 1.12x numpy),
          128x768x3072 8.0 -> 2.4 ms (0.30x -> 1.01x), 512^3 1.00 -> 0.86 ms, 1000^3 9.5 ->
          6.0 ms; smaller matrices lose to the pass (attention's 12 heads of 128x64x128 and
          128x128x64 10-40%, 4 groups of 34x34x784 5%), and so do few rows (12 rows of a
          1024x1024 matrix 1.45x; 16 rows, 0.91-1.16x over runs), and so do reductions of at most
          ``PACKED_DATA_DEPTH`` steps, whose panel (the reduction's rows by 4 vectors: 48 KiB
          with AVX-512) stays in L1 unpacked while the row tiles read it in turn (a pointwise
          convolution's weights by its pixels: 24x144 by 144x3136 191 -> 253 us on one core
          packed, 16x32 by 32x12544 54 -> 77 us on two; 64x256 by 256x3136, a 64 KiB panel,
          1056 -> 840 us), unless its rows lie a multiple of ``SET_ALIASING_BYTES`` apart and
          share L1 sets (2048x64 by 64x2048: 4.9 -> 4.0 ms packed) or ``PANEL_PAGE_ROWS`` rows
          read it, each row tile reading a page per row of the panel unpacked (1500x64 by
          64x1500 0.94 -> 0.84 ms, 256x96 by 96x3000 0.48 -> 0.44 ms packed). A partial last
          tile rounds up into the panels' padding only when packed.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute, reduce_axis, sum
            >>> from tilefuse.tensorir.runtime.target import Target
            >>> from tilefuse.schedule.templates import template_for
            >>> A = placeholder((64, 32), name="A"); W = placeholder((32, 48), name="W", constant=True)
            >>> r = reduce_axis((0, 32), name="r")
            >>> C = compute((64, 48), lambda i, j: sum(A[i, r] * W[r, j], axis=r), name="C")
            >>> template_for(C, Target.of("skylake-avx512", "+avx512f,+fma")).default_for("rows")   # 16 lanes
            {'tile_i': 4, 'tile_j': 48, 'order': 'ij', 'pack': True, 'block_i': 1, 'block_j': 1, 'unroll_k': 4, 'prefetch': 0}
            >>> template_for(C, Target.of("haswell", "+avx2,+fma")).default_for("rows")["tile_j"]     # 8 lanes
            16
        """
        lanes = self.target.lanes(self.out.dtype)
        wide = self.target.vector_registers >= 32
        vectors, rows = (4, 6) if wide else (2, 4)
        i_extent, j_extent = self._extents(layout)
        whole = [t for t in TILE_J if t % lanes == 0 and t <= vectors * lanes]
        if self._within_group(layout):      # a tile within a group: the tiles that divide it
            whole = [t for t in TILE_J if j_extent % t == 0 and t <= vectors * lanes]
        packable = self.packable(layout)
        pack = packable is not None and _is_constant(packable[0])
        swept = None        # bytes of the packable matrix a row tile sweeps: constant weights whole,
        if pack:            # for data one product's of a batch
            swept = extent(packable[0].shape) * itemsize(packable[0].dtype)
        elif packable is not None:      # data: packed on every call, where the pass pays
            swept, readers = self._slice_and_rows(layout)
            depth = extent([r.dom_extent for r in self.anchor.reduce_axis])
            pack = swept > WEIGHTS_IN_L2 and readers >= PACKED_DATA_ROWS and (
                depth > PACKED_DATA_DEPTH or readers >= PANEL_PAGE_ROWS or self._panel_rows_alias(packable[0]))
        order = "ij" if swept is not None and swept <= WEIGHTS_IN_L2 else "ji"
        # weights too large for L2 that serve few output rows stream from memory: fetched ahead
        out_rows = extent(self.out.output(0).shape) // j_extent
        streamed = pack and order == "ji" and out_rows <= STREAMED_ROWS
        if pack and self.rounds_up(layout):     # a last partial tile costs its padding: at most 1/8 more work,
            padded = {t: -(-j_extent // t) * t for t in whole}          # else the least padding
            dividing = [t for t in whole if padded[t] <= j_extent * 9 // 8] or \
                [min(whole, key=lambda t: (padded[t], -t))]
        else:                           # a last partial tile is shifted (unaligned): only dividing tiles
            dividing = [t for t in whole if j_extent % t == 0]
        tile_j = max(dividing) if dividing else (2 * lanes if j_extent >= 2 * lanes else lanes)
        tile_j = tile_j if tile_j in TILE_J else 16
        if tile_j <= lanes:
            rows = 6
        i_extent = i_extent if i_extent is not None else 1
        candidates = self.space.knobs["tile_i"].candidates
        fitting = [t for t in candidates if t <= max(min(i_extent, rows), 1)]
        dividing_i = [t for t in fitting if i_extent % t == 0 and t >= 4 and i_extent <= 64]
        tile_i = max(dividing_i) if dividing_i else max(fitting)
        sevens = [t for t in dividing if SEVEN_ROWS * -(-t // lanes) <= STREAMED_ACCUMULATORS]
        if wide and sevens and _seven_rows_fit(i_extent) and not self._pixels_by_channels(layout):
            tile_i, tile_j = SEVEN_ROWS, max(sevens)    # no row tile shifted back over another
        if wide and tile_i == 6 and tile_j > 48 and j_extent % 48 == 0 and _eight_rows_fit(i_extent) \
                and not self._pixels_by_channels(layout):
            tile_i, tile_j = 8, 48      # as many accumulators, no row tile shifted back over another
        if self._pixels_by_channels(layout):     # rows of pixels: one tile for a short row, else snug tiles
            one_tile = min(t for t in candidates if t >= i_extent) if i_extent <= 8 else None
            budget = self.target.vector_registers - 1 - 2 * -(-tile_j // lanes)   # registers left for rows
            tallest = 16 // -(-tile_j // lanes) if self.groups is not None else 8    # a group's few input
            heights = [t for t in candidates if 4 <= t <= tallest]    # channels: as many rows as registers allow
            snug = min(heights, key=lambda t: (-(-i_extent // t) * t, -t))
            if one_tile is not None and (wide or one_tile * -(-tile_j // lanes) <= budget):
                tile_i = one_tile
            elif wide and (tile_j > lanes or i_extent % rows):
                tile_i = snug
            else:
                tile_i = rows
            if wide:                 # the accumulators in half the registers: the rest hold weights
                most = STREAMED_ACCUMULATORS if streamed and self._sums_one_axis() else 16
                tile_j = max((t for t in whole if t <= tile_j and tile_i * (t // lanes) <= most), default=lanes)
        if self.whole_groups(layout):       # the group's channels by rows of pixels: 16 accumulators
            per_group, budget = self.groups[1], 16 if wide else 8
            vectors = 2 if 4 * per_group <= budget and j_extent > lanes else 1
            tile_j = vectors * lanes if vectors * lanes in TILE_J else 16
            tile_i = max([t for t in candidates if t * per_group * vectors <= budget] or [1])
        unrolls = self.space.knobs["unroll_k"].candidates
        unroll_k = max(u for u in unrolls if u <= DEFAULT_UNROLL_K)
        if unroll_k == 1:       # a short loop that no copy count divides (a 5- or 7-wide filter row): whole
            unroll_k = max(unrolls)
        config = {"tile_i": tile_i, "tile_j": tile_j, "order": order, "pack": pack, "block_i": 1, "block_j": 1,
                  "unroll_k": unroll_k}
        sweeps = "fetch_next_panel" in self.space.knobs and pack and order == "ji" and layout == "rows" and \
            -(-out_rows // tile_i) >= PANEL_SWEEPS
        if "prefetch" in self.space.knobs:
            config["prefetch"] = PREFETCH_BYTES[1] if streamed and not sweeps else 0
        if "fetch_next_panel" in self.space.knobs:
            config["fetch_next_panel"] = sweeps
        if self.winograd is not None:
            config["winograd"], config["winograd_fused"] = 0, False
        return {"layout": layout, **config} if len(self.layouts) > 1 else config

    def _sums_one_axis(self) -> bool:
        """Whether the anchor sums over one axis only (a product, a pointwise convolution)."""
        return sum(r.dom_extent > 1 for r in self.anchor.reduce_axis) == 1

    def _winograd_values(self, m: int, fused: bool, direct: dict) -> dict:
        """The knob values, over ``direct`` (a direct config's), of Winograd F(m x m, 3 x 3):
        the direct register tile, the filters fetched 2 KiB ahead; fused, as many tiles per
        register tile (up to 8) as divide a row of tiles."""
        values = {"winograd": m, "winograd_fused": fused, "pack": False, "unroll_k": 1}
        if "prefetch" in self.space.knobs:
            values["prefetch"] = PREFETCH_BYTES[1]
        if "fetch_next_panel" in self.space.knobs:
            values["fetch_next_panel"] = False
        row = self._tiles_per_row(m)
        values["tile_i"] = max(t for t in TILE_I if row % t == 0 and t <= 8) if fused else direct["tile_i"]
        return values

    def alternatives(self):
        """Winograd at each tile size, with the default's register tile (in which its
        products do well: 1.6-2.6x over the direct default on resnet50's 3x3 layers) and its
        filters fetched 2 KiB ahead, and fused, with as many tiles per register tile (up to
        8) as divide a row of tiles."""
        if self.winograd is None:
            return []
        direct = self._direct_default()
        return [self._winograd_values(m, fused, direct) for m in TILE_SIZES for fused in (False, True)]

    def schedule(self, s, cfg):
        dag = self.dag
        for op in dag.downstream(self.anchor):
            if not dag.is_output(op):
                s[op].compute_inline()
        for op in self.others:   # computed from the tiled output's result, as injective ops are
            size = extent(op.output(0).shape)
            schedule_elementwise(s[op], dag, self.target.lanes(op.output(0).dtype), 4, size >= PARALLEL_MIN_ELEMENTS)
        layout = cfg["layout"] if len(self.layouts) > 1 else "rows"
        at_tile = self.groups is not None and not cfg.values.get("winograd")
        copies = [op for op in dag.upstream(self.anchor) if dag.classes[id(op)] == "injective"
                  and not _is_constant(op.output(0)) and not dag.is_output(op)]
        for op in copies if not at_tile else ():     # a padded copy of the input: rows in parallel, vectors
            _schedule_rows(s[op], self.target.lanes(op.output(0).dtype))
        if self.winograd is not None and cfg["winograd"]:
            schedule_winograd(s, self.anchor, self.winograd, self.out, cfg, self.target.lanes(self.out.dtype))
            return
        out = s[self.out]
        aliasing = self._aliasing_rows(layout)
        if aliasing is not None and s[aliasing[0].output(0)].attach_type == "root":
            op, d, pitch = aliasing        # a line of padding per row moves each row to other L1 sets
            s[op.output(0)].storage_align(op.axis[d], pitch, CACHE_LINE_BYTES // itemsize(op.output(0).dtype))
        i_dim, j_dim = self.layouts[layout]
        axes = self._tiled_axes(out)
        i_axis, j_axis = (axes[i_dim] if i_dim is not None else None), axes[j_dim]
        nd = len(axes)
        if layout == "rows":
            local = s[s.cache_write(self.out.output(0), "local")] if self.anchor is self.out else s[self.anchor]
        else:   # the accumulator channels-last: its vectors (along j) contiguous
            order = [d for d in range(nd) if d not in (i_dim, j_dim)] + [i_dim, j_dim]
            local = s[s.cache_write(self.anchor.output(0), "local", order=order)]
            if self.anchor is not self.out:
                s[self.anchor].compute_inline()
        tj, ti = cfg["tile_j"], cfg["tile_i"]
        packable = self.packable(layout)
        lanes = self.target.lanes(self.out.output(0).dtype)
        if cfg["pack"] and packable is not None:
            tensor, dim = packable
            packed = s.pack(tensor, axis=dim, block=tj, readers=[local])
            vectorize_by_registers(s[packed], packed.op.axis[-1], tj, lanes)
            s[packed].parallel(packed.op.axis[0])
        jo, ji = out.split(j_axis, factor=tj)
        lead = [a for d, a in enumerate(axes) if d not in (i_dim, j_dim)]
        group = [axes[self.groups[0] + 1]] if self.whole_groups(layout) else []    # in the tile, not a loop
        lead = [a for a in lead if not any(a is c for c in group)]
        if i_axis is not None:
            io, ii = out.split(i_axis, factor=ti)
            tiles = [("i", io), ("j", jo)] if cfg["order"] == "ij" else [("j", jo), ("i", io)]
        else:
            tiles, ii = [("j", jo)], None
        blocks, in_block = [], []       # a block's tiles run in turn inside one parallel iteration
        for name, loop in tiles:
            if cfg["block_" + name] > 1:
                loop, inside = out.split(loop, factor=cfg["block_" + name])
                in_block.append(inside)
            blocks.append(loop)
        # "ji": the weight panels outermost, so each is read from memory once and reused by
        # every row (the leading axes' too: an image's rows); "ij": a row tile meets every panel
        outers = blocks[:1] + lead + blocks[1:] if cfg["order"] == "ji" else lead + blocks
        # a grouped convolution copies the padded input rows a row of tiles reads at each such
        # row, whose tiles along the image's width then run in turn
        along = "i" if self._pixels_by_channels(layout) else "j"
        row_tiles = [loop for (name, _), loop in zip(tiles, blocks) if at_tile and name == along]
        outers = [loop for loop in outers if not any(loop is r for r in row_tiles)]
        out.reorder(*outers, *row_tiles, *in_block, *group, *([ii] if ii is not None else []), ji)
        outer = fuse_all(out, outers)
        out.parallel(outer)
        vectorize_by_registers(out, ji, tj, lanes)
        rounded = cfg["pack"] and self.rounds_up(layout)
        tile = in_block[-1] if in_block else (row_tiles or [outer])[-1]
        local.compute_at(out, tile, round_up=[local.axis[-1]] if rounded else ())
        for op in copies if at_tile else ():
            s[op].compute_at(out, outer)
            _, inner = s[op].split(op.axis[-1], factor=lanes)
            s[op].vectorize(inner)
        # the accumulator: reduce loops outside, tile rows unrolled, tile columns vectorized
        li, lj = (local.axis[-2], local.axis[-1]) if i_axis is not None else (None, local.axis[-1])
        if self.groups is not None and layout == "rows":     # the anchor's axes are the tiled ones
            li = local.axis[i_dim]
        reduce_axes = list(local.reduce_axis)
        unrolled = None
        if cfg["unroll_k"] > 1:         # the innermost looping reduce axis's trips as copies of the tile
            at = [r.dom_extent > 1 for r in reduce_axes]
            at = len(at) - 1 - at[::-1].index(True)
            reduce_axes[at:at + 1] = local.split(reduce_axes[at], factor=cfg["unroll_k"])
            unrolled = reduce_axes[at + 1]
        channel = [local.axis[self.groups[0] + 1]] if group else []
        data_lead = [a for a in local.axis if a is not li and a is not lj and not any(a is c for c in channel)]
        local.reorder(*data_lead, *reduce_axes, *channel, *([li] if li is not None else []), lj)
        for c in channel:
            local.unroll(c)
        if "prefetch" in self.space.knobs and cfg["prefetch"] and cfg["pack"] and packable is not None:
            fetch_panel_ahead(local, packed, tj, cfg["prefetch"])
        if cfg.values.get("fetch_next_panel"):
            rows = list(zip(local.op.axis[:-1], local.op.output(0).shape[:-1]))
            fetch_next_panel(local, packed, rows, ti, tj, cfg["unroll_k"])
        if unrolled is not None:
            local.unroll(unrolled)
        if li is not None:
            local.unroll(li)
        vectorize_by_registers(local, lj, tj, lanes)


def _seven_rows_fit(rows: int) -> bool:
    """Whether a product's ``rows`` (at most ``STREAMED_ROWS``) split into tiles of 7 and
    into neither 4 nor 6 (a 7x7 map's 49 pixels: 7 tiles of 7, or 9 of 6 whose last one is
    shifted back over 5 rows of the one before).

    Example:
        >>> [_seven_rows_fit(n) for n in (49, 14, 35, 42, 56, 98)]
        [True, True, True, False, False, False]
    """
    return rows <= STREAMED_ROWS and rows % SEVEN_ROWS == 0 and rows % 4 != 0 and rows % 6 != 0


def _eight_rows_fit(rows: int) -> bool:
    """Whether a product's ``rows`` (more than 64, at most ``EIGHT_ROWS_MAX``) split into tiles
    of 8 and not of 6 (a transformer's 128 tokens: 16 tiles of 8, or 22 of 6 whose last one
    is shifted back over 4 rows of the one before).

    Example:
        >>> [_eight_rows_fit(n) for n in (128, 96, 197, 48, 512)]
        [True, False, False, False, False]
    """
    return 64 < rows <= EIGHT_ROWS_MAX and rows % 8 == 0 and rows % 6 != 0


def _schedule_rows(stage, lanes: int) -> None:
    """A stage computed whole before the anchor (a padded input): its last axis in vectors,
    the axes before it fused and parallel when there are enough of them to share; the loop
    partitioning then leaves the padding's selects at the borders. A last axis that whole
    vectors do not fill (an image's 3 channels a pixel) is fused with the one before it where
    the copy runs contiguous along both (``_copies_rows``), so that the vectors run along the
    row: a stem's 224x224x3 input padded 47 -> 11 us, where each pixel was a vector of 3 lanes."""
    axes = list(stage.op.axis)
    if not axes:
        return
    if len(axes) > 2 and stage.op.output(0).shape[-1] % lanes and _copies_rows(stage.op):
        axes = axes[:-2] + [stage.fuse(axes[-2], axes[-1])]
    _, inner = stage.split(axes[-1], factor=lanes)
    stage.vectorize(inner)
    if extent(stage.op.output(0).shape) >= PARALLEL_MIN_ELEMENTS and len(axes) > 1:
        stage.parallel(fuse_all(stage, axes[:-1]))


def _copies_rows(op) -> bool:
    """Whether ``op`` reads each tensor at its own last index and at its row's index shifted,
    in a tensor whose last axis is as long as its own (a channels-last pad: each row of pixels
    a contiguous run in both): its last two axes fused then read and write contiguous vectors.
    Not a transposed convolution's input spread out with zeros between its pixels, whose rows
    are not shifted but divided (fused, each lane's address computed apart: 0.39 -> 0.46 ms)."""
    *_, row, last = op.axis
    for load in (n for n in walk(op.body) if isinstance(n, TensorLoad)):
        if len(load.indices) < 2 or load.tensor.shape[-1] != op.output(0).shape[-1]:
            return False
        along, across = linear_coefficient(load.indices[-1], last), linear_coefficient(load.indices[-2], row)
        if along is None or across is None or along[0] != 1 or across[0] != 1 or \
                not (isinstance(along[1], Const) and along[1].value == 0) or reads_var(load.indices[-2], last):
            return False
    return True


def _without_leading_ones(shape) -> list:
    shape = list(shape)
    while len(shape) > 1 and shape[0] == 1:
        shape.pop(0)
    return shape


def _is_constant(tensor) -> bool:
    """A constant input (weights), or a stage computed from constant inputs only (weights
    regrouped, which a prepacked kernel computes once)."""
    if isinstance(tensor.op, PlaceholderOp):
        return tensor.op.tag == "constant"
    return bool(tensor.op.input_tensors) and all(_is_constant(t) for t in tensor.op.input_tensors)
