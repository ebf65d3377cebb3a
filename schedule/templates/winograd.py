"""Winograd's algorithm as a schedule of the complex template: a 3x3, stride-1 or 2, channels-last
convolution with constant weights is redefined (``Schedule.redefine``) as the stages of
``tensorir.ops.winograd`` and each stage is scheduled:

* the input tiles' two transforms: one tile's vector of channels per parallel iteration, the
  row transform computed there into a small buffer, each transform's row unrolled (so its
  coefficients are constants);
* the filters' transform: numpy, once per weight array (``WinogradFilters``), in panels as
  wide as the products' register tile;
* the alpha^2 products: the GEMM micro-kernel of the direct convolution (``tile_i`` tiles by
  ``tile_j`` channels, accumulated in registers across the input channels), fetching the
  transformed filters ``prefetch`` bytes of their panel ahead (they are 16/9 to 4 times the
  weights and stream from memory: 8-23% faster on resnet50's 56, 28 and 14-pixel layers);
* the output transform: its first half a stage, its second half inlined into the output with
  the epilogue (bias, residual, activation), one pixel's channels in vectors.

Unfused, each stage runs over all tiles in parallel, and the transformed tiles, the products
and the rows go through memory between stages (on resnet50's 56x56x64 layer, 4.8 MB: cold in
the model, where every layer's weights stream through the caches, they made its Winograd run
at 0.55-0.67 ms against 0.35-0.40 ms warm). Fused (``winograd_fused``), one row of tiles is a
parallel iteration of the output: its input tiles, products and rows are computed there, into
buffers of a row's size, and read back from L1 and L2.

Example:
    >>> from tilefuse.tensorir import placeholder, ops
    >>> from tilefuse.schedule import create_schedule
    >>> x = placeholder((1, 8, 8, 16), name="x"); w = placeholder((3, 3, 16, 16), name="w", constant=True)
    >>> y = ops.conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1]); s = create_schedule(y)
    >>> cfg = {"winograd": 2, "tile_i": 4, "tile_j": 16, "order": "ij", "prefetch": 0, "winograd_fused": False}
    >>> schedule_winograd(s, y.op, winograd_operands(y.op), y.op, cfg, 16)
    >>> print(*[stage.op.name for stage in s.stages])     # conv: the output transform, with the epilogue
    conv_pad conv_wino_in_rows conv_wino_in conv_wino_filter conv_wino_product.local conv_wino_product conv_wino_rows conv
"""
from __future__ import annotations

from tilefuse.tensorir.expr import IterVar, Mul, Reduce, TensorLoad
from tilefuse.tensorir.ops.winograd import (STRIDES, TILE_SIZES, filter_tiles, input_tiles, output_pixel, output_rows,
                                   tile_grid, tile_products)
from tilefuse.tensorir.runtime.prepacked import WinogradFilters
from tilefuse.tensorir.simplify import simplify
from tilefuse.tensorir.tensor import PlaceholderOp, compute

from .base import fetch_panel_ahead, fuse_all, vectorize_by_registers

__all__ = ["TILE_SIZES", "tile_grid", "winograd_operands", "default_winograd", "schedule_winograd"]

MIN_TILES = 49              # products of fewer tiles than this (a batch's, all images) stay direct
MIN_CHANNELS = 16           # nor with fewer input or output channels: the transforms outweigh the products
FUSED_FILTER_BYTES = 1 << 20    # fused stages read the filters once per row of tiles: from L2 up to this size
FUSED_MIN_TRAFFIC = 1.25    # and fuse when the unfused stages' tiles outweigh the filters by this much


def winograd_operands(anchor):
    """(padded input, weights, weights format, stride) when ``anchor`` is the multiply-
    accumulate of a one-group, 3x3, undilated 2-D float32 convolution over channels-last data
    (``tensorir.ops.conv``) at the same stride (1 or 2) along both axes, with constant
    weights; else None.

    Example:
        >>> from tilefuse.tensorir import placeholder, ops
        >>> x = placeholder((1, 8, 8, 4), name="x"); w = placeholder((3, 3, 4, 8), name="w", constant=True)
        >>> y = ops.conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1])
        >>> [t.name for t in winograd_operands(y.op)[:2]], winograd_operands(y.op)[2:]
        (['conv_pad', 'w'], ('XIO', 1))
        >>> winograd_operands(ops.conv(x, w, [2, 2], [1, 1], [1, 1], [1, 1]).op)[3]
        2
    """
    body = anchor.body
    if anchor.tag != "conv" or anchor.dtype != "float32" or len(anchor.axis) != 4 or \
            not isinstance(body, Reduce) or body.combiner != "sum" or len(body.axis) != 3 or \
            not isinstance(body.source, Mul):
        return None
    loads = (body.source.a, body.source.b)
    if not all(isinstance(load, TensorLoad) and len(load.indices) == 4 for load in loads):
        return None
    data, weights = loads
    if not (isinstance(weights.tensor.op, PlaceholderOp) and weights.tensor.op.tag == "constant"):
        return None
    ci, k0, k1 = body.axis
    n, h, w, o = anchor.axis
    if (k0.dom_extent, k1.dom_extent) != (3, 3) or ci.dom_extent != data.tensor.shape[3]:
        return None
    stride = next((s for s in STRIDES if all(_same(index, want) for index, want in
                                              zip(data.indices, (n, h * s + k0, w * s + k1, ci)))), None)
    if stride is None:
        return None
    for fmt, want in (("XIO", (k0, k1, ci, o)), ("OIX", (o, ci, k0, k1))):
        if all(isinstance(i, IterVar) and i.uid == v.uid for i, v in zip(weights.indices, want)):
            return data.tensor, weights.tensor, fmt, stride
    return None


def default_winograd(operands, output_shape) -> tuple[int, bool]:
    """(m, fused): the Winograd F(m x m, 3 x 3) a convolution with ``winograd_operands``
    ``operands`` and channels-last output ``output_shape`` computes by default, (0, False)
    for the direct algorithm. Measured in models on 2 AVX-512 cores (ResNet-18/50,
    DenseNet-121, Inception v1/v2, SqueezeNet, PP-OCRv4's detector):

    * stride 1 only: at stride 2 the direct kernel won or tied (resnet18 on a loaded machine:
      28x28x128 0.86 ms against 0.82 fused F(2) and 1.08-1.35 otherwise, 14x14x256 0.85
      against 1.07-3.09, 7x7x512 1.10 against 2.0-6.2);
    * the largest m (4, else 2) whose tiles, over the batch, number at least ``MIN_TILES``:
      fewer, and each transformed filter (16/9 to 4 times the weights, read from memory at
      every run) serves too few products (7x7x512: direct 0.95 ms, F(2) 1.14, F(4) 1.54;
      14x14x256: direct 0.72, F(2) 0.50; 28x28x128: direct 0.73, F(4) 0.36);
    * at least ``MIN_CHANNELS`` input and output channels (a 3-channel stem: F(2) 6.5x
      slower than direct);
    * fused where the filters fit ``FUSED_FILTER_BYTES`` and the unfused stages' tiles
      (``tiles * alpha^2 * (C + K)`` floats, written and read back) outweigh the filters'
      ``alpha^2 * C * K`` by ``FUSED_MIN_TRAFFIC``, i.e. ``tiles * (1/C + 1/K) >= 1.25``:
      56x56x64 F(4) 0.33 ms fused against 0.40, 28x28x128 F(4) 0.50 against 0.36.

    Example:
        >>> from tilefuse.tensorir import placeholder, ops
        >>> x = placeholder((1, 56, 56, 64), name="x"); w = placeholder((3, 3, 64, 64), name="w", constant=True)
        >>> y = ops.conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1])
        >>> default_winograd(winograd_operands(y.op), y.shape)      # 196 tiles of 4x4: fused
        (4, True)
        >>> default_winograd(winograd_operands(y.op), (1, 7, 7, 512))   # 16 tiles of 2x2 at most
        (0, False)
    """
    padded, _, _, stride = operands
    batch, height, width, out_channels = output_shape
    in_channels = padded.shape[3]
    if stride != 1 or min(in_channels, out_channels) < MIN_CHANNELS:
        return 0, False
    for m in (4, 2):
        rows, cols = tile_grid(height, width, m)
        tiles = batch * rows * cols
        if tiles >= MIN_TILES:
            alpha = m + 2
            filter_bytes = alpha * alpha * in_channels * out_channels * 4
            traffic = tiles * (1 / in_channels + 1 / out_channels)
            return m, filter_bytes <= FUSED_FILTER_BYTES and traffic >= FUSED_MIN_TRAFFIC
    return 0, False


def _same(index, expected) -> bool:
    """Whether two integer index expressions are equal (their difference simplifies to 0)."""
    difference = simplify(index - expected)
    return getattr(difference, "value", None) == 0


def schedule_winograd(s, anchor, operands, out, cfg, lanes: int) -> None:
    """Redefine ``anchor`` in ``s`` as Winograd's F(m x m, 3 x 3) over ``operands`` (from
    ``winograd_operands``) and schedule its stages; ``out`` is the stage the epilogue is
    inlined into (the anchor itself when there is none), ``cfg`` gives m (``winograd``), the
    products' tile (``tile_i`` tiles by ``tile_j`` channels), the tile order, how far ahead
    the products fetch the filters (``prefetch``, bytes; 0: not at all), and whether the
    stages are computed per row of tiles of the output (``winograd_fused``).

    Example:
        >>> import numpy as np
        >>> from tilefuse.tensorir import placeholder, ops
        >>> from tilefuse.tensorir.runtime.target import Target
        >>> from tilefuse.schedule import create_schedule
        >>> from tilefuse.schedule.hoist import build_prepacked
        >>> x = placeholder((1, 8, 8, 16), name="x"); w = placeholder((3, 3, 16, 16), name="w", constant=True)
        >>> y = ops.conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1]); s = create_schedule(y)
        >>> cfg = {"winograd": 2, "tile_i": 4, "tile_j": 16, "order": "ij", "prefetch": 0, "winograd_fused": True}
        >>> schedule_winograd(s, y.op, winograd_operands(y.op), y.op, cfg, Target.host().lanes("float32"))
        >>> f = build_prepacked(s, [x, w, y], constants=[w])
        >>> a, b = np.random.rand(1, 8, 8, 16).astype("float32"), np.random.rand(3, 3, 16, 16).astype("float32")
        >>> out = np.empty((1, 8, 8, 16), "float32"); f(a, b, out)
        >>> padded = np.pad(a, [(0, 0), (1, 1), (1, 1), (0, 0)])
        >>> direct = sum(padded[:, i:i + 8, j:j + 8] @ b[i, j] for i in range(3) for j in range(3))
        >>> np.allclose(out, direct, rtol=1e-4)
        True
    """
    padded, weights, weights_format, stride = operands
    m = cfg["winograd"]
    _, height, width, channels = anchor.output(0).shape
    grid = tile_grid(height, width, m)
    tj, ti = cfg["tile_j"], cfg["tile_i"]
    tiles = input_tiles(padded, m, name=anchor.name + "_wino_in", stride=stride)
    filters = filter_tiles(weights, weights_format, m, tj, name=anchor.name + "_wino_filter", stride=stride)
    products = tile_products(tiles, filters, channels, name=anchor.name + "_wino_product")
    rows = output_rows(products, m, name=anchor.name + "_wino_rows", stride=stride)
    result = compute(anchor.output(0).shape, lambda n, h, w, o: output_pixel(rows, m, grid, n, h, w, o, stride),
                     name=anchor.name + "_wino")
    s.redefine(anchor.output(0), result)
    s.numpy_packs[id(filters.op)] = (weights, WinogradFilters(weights.shape, weights.dtype, weights_format, m, tj,
                                                              stride))

    if anchor is not out:
        s[anchor].compute_inline()
    stage = s[out]
    n, h, w, channel = stage.op.axis
    outer, inner = stage.split(channel, factor=lanes)
    stage.vectorize(inner)
    # each stage's outer loop: in parallel over the whole image, or run per row of tiles (fused)
    outer_loops = {tiles: _input_transform(s, tiles, lanes),
                   products: _products(s, products, filters, ti, tj, cfg["order"], lanes,
                                       rounds_up=channels % tj != 0, prefetch=cfg["prefetch"]),
                   rows: _output_rows(s[rows], lanes)}
    if not cfg["winograd_fused"]:
        for producer, loop in outer_loops.items():
            s[producer].parallel(loop)
        stage.parallel(fuse_all(stage, [n, h, w]))
        return
    row_of_tiles, _ = stage.split(h, factor=m)
    block = stage.fuse(n, row_of_tiles)
    stage.parallel(block)
    for producer in outer_loops:
        s[producer].compute_at(stage, block)


def _input_transform(s, tiles, lanes: int):
    """The input tiles: a tile's vector of channels per iteration of the loop returned, its
    first (row) transform computed there into a small buffer, both with their transform row
    unrolled (so each copy has its own constant coefficients)."""
    stage = s[tiles]
    half = s[tiles.op.input_tensors[0]]
    xi, nu, t, ch = stage.op.axis
    outer, inner = stage.split(ch, factor=lanes)
    stage.reorder(t, outer, xi, nu, inner)
    tile = stage.fuse(t, outer)
    stage.unroll(nu)
    stage.vectorize(inner)
    half.compute_at(stage, tile)
    hxi, ht, hj, hch = half.op.axis
    half.reorder(ht, hxi, hj, hch)
    half.unroll(hxi)
    half.vectorize(hch)
    return tile


def _output_rows(stage, lanes: int):
    """The first half of the output transform: a tile per iteration of the loop returned, the
    output row unrolled (its selects fold to one coefficient row), the channels in vectors."""
    row, nu, tile, channel = stage.op.axis
    outer, inner = stage.split(channel, factor=lanes)
    stage.reorder(tile, row, nu, outer, inner)
    stage.unroll(row)
    stage.vectorize(inner)
    return tile


def _products(s, products, filters, ti: int, tj: int, order: str, lanes: int, rounds_up: bool, prefetch: int):
    """The alpha^2 matrix products: ``ti`` tiles by ``tj`` output channels per register tile
    (one per iteration of the loop returned), accumulated across the input channels in a
    local buffer; with ``prefetch``, each channel step fetches the ``filters`` panel that many
    bytes ahead."""
    stage = s[products]
    local = s[s.cache_write(products, "local")]
    xi, nu, t, o = stage.op.axis
    to, tin = stage.split(t, factor=ti)
    oo, oin = stage.split(o, factor=tj)
    tiles = [to, oo] if order == "ij" else [oo, to]
    stage.reorder(xi, nu, *tiles, tin, oin)
    outer = fuse_all(stage, [xi, nu, *tiles])
    vectorize_by_registers(stage, oin, tj, lanes)
    local.compute_at(stage, outer, round_up=[local.axis[-1]] if rounds_up else ())
    lxi, lnu, lt, lo = local.axis
    local.reorder(lxi, lnu, *local.reduce_axis, lt, lo)
    if prefetch:
        fetch_panel_ahead(local, filters, tj, prefetch)
    local.unroll(lt)
    vectorize_by_registers(local, lo, tj, lanes)
    return outer
