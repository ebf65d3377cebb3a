"""The complex template's default config: a register tile sized for the target's vector
registers, and a tile order chosen by where the packed weights fit."""
import numpy as np
import pytest

from tilefuse.schedule import lower, template_for
from tilefuse.schedule.space import Config
from tilefuse.tensorir import compute, placeholder, reduce_axis, sum as rsum
from tilefuse.tensorir.ops import window
from tilefuse.tensorir.runtime.target import Target
from tilefuse.tensorir.stmt import Allocate, BufferStore, For
from tilefuse.tensorir.walk import walk
from conv_reference import grouped_reference

AVX2 = Target.of("znver3", "+avx,+avx2,+fma")
AVX512 = Target.of("znver4", "+avx,+avx2,+avx512f,+fma")


def matmul(n, k, m, constant=True):
    A, B = placeholder((n, k), name="A"), placeholder((k, m), name="B", constant=constant)
    r = reduce_axis((0, k), name="r")
    return compute((n, m), lambda i, j: rsum(A[i, r] * B[r, j], axis=r), name="C")


def assert_tile_matches_numpy(n, k, m, tile_i, tile_j):
    """An n x k by k x m product built for this host (an AVX2 machine cannot run kernels built
    for the AVX-512 target whose defaults the tests read) in a register tile of tile_i by
    tile_j, against numpy."""
    t = template_for(matmul(n, k, m))
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal((n, k)).astype(np.float32), rng.standard_normal((k, m)).astype(np.float32)
    out = np.full((n, m), np.nan, np.float32)
    t.build(Config({**t.default_config().values, "tile_i": tile_i, "tile_j": tile_j}))(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target, tile_i, tile_j", [(AVX2, 4, 16), (AVX512, 6, 64)])
def test_register_tile_fits_the_vector_registers(target, tile_i, tile_j):
    cfg = template_for(matmul(512, 512, 512), target).default_config()
    assert (cfg["tile_i"], cfg["tile_j"]) == (tile_i, tile_j)
    lanes = target.lanes("float32")
    accumulators = tile_i * tile_j // lanes
    assert accumulators + tile_j // lanes + 1 <= target.vector_registers   # + one row of B, one broadcast


def test_a_transformers_128_tokens_run_in_tiles_of_8_rows_by_48():
    tokens = template_for(matmul(128, 768, 768), AVX512).default_config()
    assert (tokens["tile_i"], tokens["tile_j"]) == (8, 48)                    # 16 row tiles, none shifted
    assert (template_for(matmul(128, 768, 3072), AVX512).default_config()["tile_i"]) == 8
    for rows, cols, target, tile in ((96, 768, AVX512, (6, 64)),      # 6 divides 96
                                     (197, 768, AVX512, (6, 64)),     # neither divides: as before
                                     (512, 768, AVX512, (6, 64)),     # many row tiles: a shifted one is rare
                                     (128, 128, AVX512, (6, 64)),     # 48 does not divide 128 columns
                                     (128, 768, AVX2, (4, 16))):      # 16 registers
        cfg = template_for(matmul(rows, 768, cols), target).default_config()
        assert (cfg["tile_i"], cfg["tile_j"]) == tile, (rows, cols)
    cfg = template_for(matmul(136, 40, 192), AVX512).default_config()     # 17 tiles of 8 rows by 4 panels
    assert (cfg["tile_i"], cfg["tile_j"]) == (8, 48)
    assert_tile_matches_numpy(136, 40, 192, 8, 48)


def test_a_7x7_maps_49_rows_run_in_tiles_of_7_rows():
    # ConvNeXt's and Swin's last stage: 7 row tiles, where tiles of 6 shifted the ninth back over the eighth
    for rows, cols, target, tile in ((49, 3072, AVX512, (7, 48)),     # 21 accumulators
                                     (49, 768, AVX512, (7, 48)),
                                     (49, 32, AVX512, (7, 32)),       # Swin's P.V per head
                                     (14, 96, AVX512, (7, 48)),
                                     (42, 768, AVX512, (6, 64)),      # 6 divides 42
                                     (56, 768, AVX512, (4, 64)),      # 4 divides 56
                                     (49, 80, AVX512, (7, 16)),       # 48 and 32 do not divide 80 columns
                                     (49, 768, AVX2, (4, 16))):       # 16 registers
        cfg = template_for(matmul(rows, 768, cols), target).default_config()
        assert (cfg["tile_i"], cfg["tile_j"]) == tile, (rows, cols)
    assert_tile_matches_numpy(35, 24, 96, 7, 48)        # 5 tiles of 7 rows


def test_order_keeps_small_packed_weights_in_l2():
    small = template_for(matmul(512, 256, 128), AVX2).default_config()      # B: 128 KiB
    large = template_for(matmul(512, 1024, 1024), AVX2).default_config()    # B: 4 MiB
    assert small["order"] == "ij" and large["order"] == "ji"


def test_order_for_data_counts_one_product_of_a_batch():
    from tilefuse.tensorir.ops import matmul as batched
    heads = batched(placeholder((1, 12, 128, 64), name="Q"), placeholder((1, 12, 64, 128), name="Kt"))
    assert template_for(heads, AVX512).default_config()["order"] == "ij"       # 32 KiB a head, 384 KiB in all
    long = batched(placeholder((1, 6, 1500, 64), name="Q"), placeholder((1, 6, 64, 1500), name="Kt"))
    assert template_for(long, AVX512).default_config()["order"] == "ji"        # 375 KiB a head
    grouped = batched(placeholder((4, 100, 64), name="X"), placeholder((4, 64, 512), name="W", constant=True))
    assert template_for(grouped, AVX512).default_config()["order"] == "ji"     # constant: all 4 groups, 512 KiB


def test_channels_layout_takes_a_short_row_in_one_tile_only_where_registers_hold_it():
    X, W = placeholder((1, 64, 7, 7), name="X"), placeholder((64, 64, 3, 3), name="W", constant=True)
    Y = window.conv(X, W, [1, 1], [1, 1], [1, 1], [1, 1], data_format="NCX", weights_format="OIX")
    wide, narrow = template_for(Y, AVX512).default_config(), template_for(Y, AVX2).default_config()
    assert wide["layout"] == narrow["layout"] == "channels"
    assert wide["tile_i"] == 7                          # 7 pixels in one tile, 32 registers
    assert wide["tile_i"] * wide["tile_j"] // AVX512.lanes("float32") <= 16   # accumulators in half of them
    lanes = AVX2.lanes("float32")
    assert narrow["tile_i"] * narrow["tile_j"] // lanes <= AVX2.vector_registers - 3


def test_a_pointwise_convolution_with_streamed_weights_takes_a_wider_tile_of_pixels():
    def conv(c_in, c_out, size, k=1):
        X = placeholder((1, size, size, c_in), name="X")
        W = placeholder((k, k, c_in, c_out), name="W", constant=True)
        return window.conv(X, W, [1, 1], [k // 2] * 2, [k // 2] * 2, [1, 1], data_format="NXC", weights_format="XIO")
    lanes = AVX512.lanes("float32")
    streamed = template_for(conv(1024, 2048, 7), AVX512).default_config()        # 8 MiB for 49 pixels
    assert (streamed["tile_i"], streamed["tile_j"]) == (7, 48)                    # 21 accumulators
    for cfg in (template_for(conv(64, 128, 7), AVX512).default_config(),         # 32 KiB: in L2
                template_for(conv(1024, 2048, 14), AVX512).default_config(),     # 196 pixels share them
                template_for(conv(512, 512, 7, k=3), AVX512).default_config()):  # 3x3: not pointwise
        assert cfg["tile_i"] * cfg["tile_j"] // lanes <= 16
    # 7 pixels by 3 vectors, the last panel padded, against numpy
    assert template_for(conv(96, 200, 7), AVX512)._sums_one_axis()
    assert not template_for(conv(512, 512, 7, k=3), AVX512)._sums_one_axis()
    t = template_for(conv(96, 200, 7))                  # built for this host
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((1, 7, 7, 96)).astype(np.float32), rng.standard_normal((1, 1, 96, 200)).astype(np.float32)
    out = np.full((1, 7, 7, 200), np.nan, np.float32)
    t.build(Config({**t.default_config().values, "tile_i": 7, "tile_j": 48}))(x, w, out)
    np.testing.assert_allclose(out, np.einsum("nhwc,cf->nhwf", x, w[0, 0]), rtol=1e-4, atol=1e-4)


def test_a_one_vector_tile_gets_more_rows_and_partial_channel_vectors_keep_the_rows_layout():
    def conv(c_out):
        X = placeholder((1, 16, 20, 20), name="X")
        W = placeholder((c_out, 16, 3, 3), name="W", constant=True)
        return window.conv(X, W, [1, 1], [1, 1], [1, 1], [1, 1], data_format="NCX", weights_format="OIX")
    one_vector = template_for(conv(24), AVX2).default_config()      # 24 channels: 8 divides, 16 does not
    assert one_vector["layout"] == "channels" and one_vector["tile_j"] == 8 and one_vector["tile_i"] == 6
    assert template_for(conv(12), AVX2).default_config()["layout"] == "rows"    # 8 + a partial vector of 4
    assert template_for(conv(40), AVX2).default_config()["layout"] == "channels"  # 5 whole vectors


def test_channels_that_leave_a_partial_tile_round_it_up_into_the_packed_padding():
    X, W = placeholder((1, 64, 13, 13), name="X"), placeholder((1000, 64, 1, 1), name="W", constant=True)
    Y = window.conv(X, W, [1, 1], [0, 0], [0, 0], [1, 1], data_format="NCX", weights_format="OIX")
    t = template_for(Y, AVX2)
    cfg = t.default_config()
    assert cfg["layout"] == "channels" and cfg["tile_j"] == 16 and cfg["pack"]     # 63 tiles: 8 padded channels
    assert t.rounds_up("channels")
    text = str(lower(t.apply(cfg), t.args))
    packed_reads = [line for line in text.splitlines() if "W.packed[" in line and "conv" in line.split("=")[0]]
    assert packed_reads and not any("min(" in line.split("W.packed[")[1] for line in packed_reads)
    assert "< 1000" in text                              # only the store is guarded
    x = np.random.default_rng(0).standard_normal((1, 64, 13, 13)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((1000, 64, 1, 1)).astype(np.float32)
    out = np.full((1, 1000, 13, 13), np.nan, np.float32)
    t.build(cfg)(x, w, out)
    np.testing.assert_allclose(out, np.einsum("nchw,fc->nfhw", x, w[:, :, 0, 0]), rtol=1e-4, atol=1e-4)


def test_channels_last_convolutions_tile_pixels_by_channels_with_the_least_padding():
    # a 13-pixel row: 7 + 6 pixels (one padded pixel), not 6 + 6 + 1 (a third tile for one)
    def conv(size, c_out, fmt):
        shape = (1, size, size, 64) if fmt == "NXC" else (1, 64, size, size)
        X, W = placeholder(shape, name="X"), placeholder((c_out, 64, 3, 3), name="W", constant=True)
        return window.conv(X, W, [1, 1], [1, 1], [1, 1], [1, 1], data_format=fmt, weights_format="OIX")
    for fmt in ("NXC", "NCX"):
        cfg = template_for(conv(13, 256, fmt), AVX512).default_config()
        assert cfg["tile_i"] == 7 and cfg["tile_i"] * cfg["tile_j"] // AVX512.lanes("float32") <= 16
    # the direct kernel's tiles (these two take Winograd by default)
    assert template_for(conv(55, 64, "NXC"), AVX512).default_for("rows")["tile_i"] == 8     # 7 x 8: one pixel over
    assert template_for(conv(56, 64, "NXC"), AVX512).default_for("rows")["tile_i"] == 8     # divides
    assert template_for(matmul(13 * 13, 64, 256), AVX512).default_config()["tile_i"] == 6   # not a convolution


def test_a_padded_input_is_copied_in_vectors_and_in_parallel_before_the_convolution():
    X, W = placeholder((1, 64, 40, 40), name="X"), placeholder((64, 64, 3, 3), name="W", constant=True)
    Y = window.conv(X, W, [1, 1], [1, 1], [1, 1], [1, 1], data_format="NCX", weights_format="OIX")
    t = template_for(Y, AVX512)
    text = str(lower(t.apply(t.default_config()), t.args))
    pad_nest = text.split("conv_pad[0, ")[0]
    assert "parallel" in text.split("allocate")[-1] or "parallel" in pad_nest
    assert any("vectorized" in line and "ax3" in line for line in text.splitlines())
    x = np.random.default_rng(0).standard_normal((1, 64, 40, 40)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((64, 64, 3, 3)).astype(np.float32)
    out = np.full((1, 64, 40, 40), np.nan, np.float32)
    if Target.host().lanes("float32") == AVX512.lanes("float32"):
        t.build(t.default_config())(x, w, out)
        ref = np.zeros_like(out)
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        for kh in range(3):
            for kw in range(3):
                ref += np.einsum("nchw,fc->nfhw", xp[:, :, kh:kh + 40, kw:kw + 40], w[:, :, kh, kw])
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-3)


def test_blocks_run_their_tiles_in_turn_inside_one_parallel_iteration_and_unroll_k_copies_the_tile():
    from tilefuse.schedule.space import Config
    C = matmul(96, 64, 160)
    t = template_for(C)
    cfg = Config(dict(tile_i=4, tile_j=16, order="ij", pack=True, block_i=4, block_j=2, unroll_k=4))
    assert t.space.searchable(t.space.index_of(cfg))
    text = str(lower(t.apply(cfg), t.args))
    assert "parallel (i.outer.outer.j.outer.outer.fused, 0, 30)" in text      # (24 / 4) x (10 / 2) blocks
    assert "for (i.outer.inner, 0, 4)" in text and "for (j.outer.inner, 0, 2)" in text
    assert "for (r.outer, 0, 16)" in text and "unrolled (r.inner, 0, 4)" in text
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((96, 64)).astype(np.float32), rng.standard_normal((64, 160)).astype(np.float32)
    out = np.full((96, 160), np.nan, np.float32)
    t.build(cfg)(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def test_ji_reads_each_weight_panel_once_for_every_row_of_the_image():
    from tilefuse.schedule.space import Config
    from tilefuse.tensorir import ops
    # a 7x7 image: one row tile per image row, 3 panels of 16 channels (the last one partial)
    x, w = placeholder((1, 7, 7, 24), name="x"), placeholder((1, 1, 24, 40), name="w", constant=True)
    t = template_for(ops.conv(x, w, [1, 1], [0, 0], [0, 0], [1, 1]))
    base = dict(t.default_config().values, tile_i=7, tile_j=16, pack=True, block_i=1, block_j=1, unroll_k=1)
    ij, ji = Config(dict(base, order="ij")), Config(dict(base, order="ji"))
    assert t.space.searchable(t.space.index_of(ji))      # one tile per row, yet the rows order it
    texts = {c["order"]: str(lower(t.apply(c), t.args)) for c in (ij, ji)}
    # the fused parallel loop's outermost part: the image's rows, or the panels
    assert "parallel (ax0.ax1.ax2.outer.ax3.outer.fused, 0, 21)" in texts["ij"]
    assert "parallel (ax3.outer.ax0.ax1.ax2.outer.fused, 0, 21)" in texts["ji"]
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((1, 7, 7, 24)).astype(np.float32), rng.standard_normal((1, 1, 24, 40)).astype(np.float32)
    for cfg in (ij, ji):
        out = np.full((1, 7, 7, 40), np.nan, np.float32)
        t.build(cfg)(a, b, out)
        np.testing.assert_allclose(out, np.einsum("nhwc,cf->nhwf", a, b[0, 0]), rtol=1e-4, atol=1e-4)
    # with a single row, "ji" would compute the kernel of "ij": not searched
    one_row = template_for(ops.conv(placeholder((1, 1, 7, 24), name="x1"), w, [1, 1], [0, 0], [0, 0], [1, 1]))
    row_base = dict(one_row.default_config().values, tile_i=7, tile_j=16, block_i=1, block_j=1)
    assert not one_row.space.searchable(one_row.space.index_of(Config(dict(row_base, order="ji"))))
    assert one_row.space.searchable(one_row.space.index_of(Config(dict(row_base, order="ij"))))


def test_only_blocks_that_divide_the_tiles_are_searched():
    t = template_for(matmul(29, 45, 83))               # tile_i 4: 8 row tiles; tile_j 16: 6 column tiles
    space = t.space
    base = dict(t.default_config().values, tile_i=4, tile_j=16, unroll_k=1)

    def searched(**blocks):
        return space.searchable(space.index_of(type(t.default_config())(dict(base, **blocks))))
    assert searched(block_i=8, block_j=2) and searched(block_i=2, block_j=1)
    assert not searched(block_i=16, block_j=1) and not searched(block_i=1, block_j=4)
    assert space.knobs["unroll_k"].candidates == (1,)           # 45 has no divisor in 2, 4, 8 and is over 8


def test_unroll_k_unrolls_the_innermost_reduce_axis_that_loops():
    from tilefuse.tensorir import ops
    x = placeholder((1, 14, 14, 64), name="x")
    one = template_for(ops.conv(x, placeholder((1, 1, 64, 32), name="w", constant=True), [1, 1], [0, 0], [0, 0],
                                [1, 1]))
    three = template_for(ops.conv(placeholder((1, 7, 7, 64), name="x7"),      # too few tiles for Winograd
                                  placeholder((3, 3, 64, 32), name="w", constant=True), [1, 1], [1, 1], [1, 1], [1, 1]))
    assert one.space.knobs["unroll_k"].candidates == (1, 2, 4, 8)       # the input channels
    assert three.space.knobs["unroll_k"].candidates == (1, 3)           # the filter's columns, whole
    assert len(one.space) >= 10_000 and len(three.space) >= 10_000
    # the default copies the tile up to 4 times: 4 input-channel steps, or the 3 filter columns
    assert one.default_config()["unroll_k"] == 4 and three.default_config()["unroll_k"] == 3
    six_channels = template_for(ops.conv(placeholder((1, 14, 14, 6), name="x6"),
                                         placeholder((1, 1, 6, 32), name="w6", constant=True), [1, 1], [0, 0], [0, 0],
                                         [1, 1]))
    assert six_channels.space.knobs["unroll_k"].candidates == (1, 2, 6)       # 6: whole, but over 4
    assert six_channels.default_config()["unroll_k"] == 2
    # a 7-wide filter row (resnet50's stem, 3 input channels: the columns loop innermost), whole
    seven = template_for(ops.conv(placeholder((1, 30, 30, 3), name="x3"),
                                  placeholder((64, 3, 7, 7), name="w7", constant=True), [2, 2], [3, 3], [3, 3],
                                  [1, 1], weights_format="OIX"))
    assert seven.space.knobs["unroll_k"].candidates == (1, 7)
    assert seven.default_config()["unroll_k"] == 7


def test_a_padded_image_of_few_channels_is_copied_in_vectors_along_its_rows():
    # a stem's input: 3 channels a pixel fill no vector; the copy runs along each padded row
    # (its pixels' channels fused), not one 3-lane vector a pixel
    X = placeholder((1, 33, 35, 3), name="X")
    W = placeholder((8, 3, 3, 3), name="W", constant=True)
    Y = window.conv(X, W, [2, 2], [1, 1], [1, 1], [1, 1], data_format="NXC", weights_format="OIX")
    t = template_for(Y)
    assert _padded_copy_vectors(t) == {"ax2.ax3.fused.inner"}
    check_3x3_stride_2(t, (1, 33, 35, 3), 8, seed=2)
    # an NCHW image's padded rows are longer than its own: fused, no lane's address would follow
    # the one before; the copy keeps to its rows
    X2, W2 = placeholder((1, 8, 20, 21), name="X2"), placeholder((8, 8, 3, 3), name="W2", constant=True)
    nchw = template_for(window.conv(X2, W2, [1, 1], [1, 1], [1, 1], [1, 1], data_format="NCX", weights_format="OIX"))
    assert _padded_copy_vectors(nchw) == {"ax3.inner"}


def _padded_copy_vectors(t) -> set:
    """The names of the vectorized loops that write ``t``'s default padded copy of its input."""
    func = lower(t.apply(t.default_config()), t.args)
    return {n.var.name for n in walk(func.body) if isinstance(n, For) and n.kind == "vectorized" and
            any(isinstance(m, BufferStore) and m.buffer.name == "conv_pad" for m in walk(n.body))}


def check_3x3_stride_2(t, shape, out_channels, seed, atol=1e-4):
    """``t``'s default kernel, a channels-last 3x3 convolution at stride 2 padded by 1 (OIX
    weights), against numpy on random values."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((out_channels, shape[3], 3, 3)).astype(np.float32)
    out = np.full((1, (shape[1] + 1) // 2, (shape[2] + 1) // 2, out_channels), np.nan, np.float32)
    t.build(t.default_config())(x, w, out)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = sum(np.einsum("nhwc,fc->nhwf", xp[:, kh:kh + shape[1]:2, kw:kw + shape[2]:2], w[:, :, kh, kw])
              for kh in range(3) for kw in range(3))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=atol)


def test_a_padded_input_whose_pixels_share_l1_sets_gets_a_line_of_padding_per_pixel():
    # 256 channels at stride 2: a tile's pixels are 2 KiB apart in the padded copy
    def conv(channels, stride):
        X = placeholder((1, 7, 7, channels), name="X")
        W = placeholder((20, channels, 3, 3), name="W", constant=True)
        return X, W, window.conv(X, W, [stride, stride], [1, 1], [1, 1], [1, 1], data_format="NXC",
                                 weights_format="OIX")
    X, W, Y = conv(256, 2)
    t = template_for(Y, AVX512)
    assert "allocate conv_pad[1, 9, 9, 272]" in str(lower(t.apply(t.default_config()), t.args))
    for channels, stride in ((64, 2), (256, 1)):           # 512 B and 1 KiB apart: left as they are
        t_other = template_for(conv(channels, stride)[2], AVX512)
        assert f"allocate conv_pad[1, 9, 9, {channels}]" in str(lower(t_other.apply(t_other.default_config()),
                                                                      t_other.args))
    # rows computed from weights alone are packed once by a kernel of their own: left as they are
    W2 = placeholder((512, 24), name="W2", constant=True)
    T = compute((24, 512), lambda i, k: W2[k, i] * 2.0, name="T")
    r = reduce_axis((0, 512), name="r")
    t_weights = template_for(compute((24, 40), lambda i, j: rsum(T[i, r] * placeholder((512, 40), name="X2")[r, j],
                                                                  axis=r), name="C"), AVX512)
    assert "allocate T[24, 512]" in str(lower(t_weights.apply(t_weights.default_config()), t_weights.args))
    check_3x3_stride_2(template_for(Y), (1, 7, 7, 256), 20, seed=0, atol=1e-3)


def test_weights_streamed_from_memory_are_fetched_ahead_in_their_panels_by_the_first_row_only():
    from tilefuse.schedule.space import Config
    from tilefuse.tensorir import ops
    from tilefuse.tensorir.stmt import IfThenElse, Prefetch
    from tilefuse.tensorir.walk import walk
    # a 7x7 image of 3x3 x 80 -> 40 channels: 115 KiB of weights serve 49 pixels each
    x, w = placeholder((1, 7, 7, 80), name="x"), placeholder((3, 3, 80, 40), name="w", constant=True)
    t = template_for(ops.conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1]))
    assert t.default_config()["prefetch"] == 0          # in L2: nothing to fetch
    cfg = Config(dict(t.default_config().values, tile_i=7, tile_j=16, pack=True, prefetch=4096, unroll_k=3))
    func = lower(t.apply(cfg), t.args)
    fetches = [n for n in walk(func.body) if isinstance(n, Prefetch)]
    # each input channel reads 9 taps of a 16-channel panel, 576 bytes: 4096 bytes are 7 channels ahead
    assert len(fetches) == 1 and fetches[0].buffer.name == "w.packed" and fetches[0].level == 2     # into L2
    assert [str(i) for i in fetches[0].indices[1:]] == ["k0", "k1.inner", "ci + 7", "ax3"]
    # the tile's 7 unrolled rows read one weight vector: only the first fetches it
    guard = next(n for n in walk(func.body) if isinstance(n, IfThenElse) and n.then_body is fetches[0])
    assert str(guard.cond) == "ax2 == 0"
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((1, 7, 7, 80)).astype(np.float32), rng.standard_normal((3, 3, 80, 40)).astype(np.float32)
    want = t.build(t.default_config())
    for c in (cfg, Config(dict(cfg.values, prefetch=2048, unroll_k=1, order="ij"))):
        out, ref = np.full((1, 7, 7, 40), np.nan, np.float32), np.zeros((1, 7, 7, 40), np.float32)
        t.build(c)(a, b, out)
        want(a, b, ref)
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    # only panels are fetched: packed weights, or Winograd's transformed filters
    searchable = lambda **v: t.space.searchable(t.space.index_of(Config(dict(cfg.values, **v))))
    assert searchable() and not searchable(pack=False) and searchable(winograd=2, pack=False, unroll_k=1)


def test_large_weights_that_serve_few_rows_are_fetched_ahead_by_default():
    streamed = template_for(matmul(1, 2048, 1000)).default_config()          # a classifier: 8 MiB, one row
    reused = template_for(matmul(512, 1024, 1024)).default_config()          # 4 MiB, 512 rows
    data = template_for(matmul(1, 2048, 1000, constant=False))      # packed in the kernel: just written
    assert streamed["prefetch"] == 2048 and reused["prefetch"] == 0
    assert "prefetch" not in data.space.knobs and len(data.space.knobs["pack"]) == 2


def batch_matmul(batch, n, k, m, shared_b=False):
    """``batch`` products of data: A[z] @ B[z], or A[z] @ B with one B for every batch."""
    A = placeholder((batch, n, k), name="A")
    B = placeholder((k, m) if shared_b else (batch, k, m), name="B")
    r = reduce_axis((0, k), name="r")
    return compute((batch, n, m), lambda z, i, j: rsum(A[z, i, r] * (B[r, j] if shared_b else B[z, r, j]), axis=r),
                   name="C")


def test_data_is_packed_where_its_matrix_outgrows_l2_and_enough_rows_share_the_pass():
    def packs(C):
        return template_for(C, AVX512).default_config()["pack"]
    assert packs(matmul(1024, 1024, 1024, constant=False))          # 4 MiB: 3x faster packed
    assert packs(matmul(128, 768, 3072, constant=False))            # 9 MiB of data weights
    assert packs(matmul(200, 300, 260, constant=False))             # 305 KiB, just over
    assert not packs(matmul(256, 256, 256, constant=False))         # 256 KiB: stays in L2
    assert not packs(matmul(12, 1024, 1024, constant=False))        # 12 rows do not repay the pass
    # attention's heads: each head's own matrix (32 KiB) is what a row reads, not all 12 (384 KiB)
    assert not packs(batch_matmul(12, 128, 64, 128)) and not packs(batch_matmul(12, 128, 128, 64))
    # one matrix of 512 KiB for 4 x 8 rows, against 4 of their own for 8 rows each
    assert packs(batch_matmul(4, 8, 512, 256, shared_b=True)) and not packs(batch_matmul(4, 8, 512, 256))
    assert packs(matmul(12, 1024, 1024))                            # constant weights: always packed
    # a pointwise convolution's pixels (data B): 144 rows of a 64-wide panel stay in L1 unpacked
    assert not packs(weights_by_data(24, 144, 3136)) and not packs(weights_by_data(96, 16, 12544))
    assert packs(weights_by_data(64, 256, 3136))                    # a 64 KiB panel: packed
    assert packs(matmul(2048, 64, 2048, constant=False))            # rows 8 KiB apart share L1 sets: packed
    assert packs(matmul(1500, 64, 1500, constant=False))            # 1500 rows repay the pass
    assert not packs(matmul(255, 64, 1500, constant=False))


def weights_by_data(n, k, m):
    """Constant weights A times data B (a 1x1 NCHW convolution's pixels)."""
    A, B = placeholder((n, k), name="A", constant=True), placeholder((k, m), name="B")
    r = reduce_axis((0, k), name="r")
    return compute((n, m), lambda i, j: rsum(A[i, r] * B[r, j], axis=r), name="C")


@pytest.mark.parametrize("shape", [(200, 300, 260), (2, 50, 300, 260)])
def test_packed_data_on_shapes_the_tiles_do_not_divide_matches_numpy(shape):
    *batch, n, k, m = shape
    C = batch_matmul(batch[0], n, k, m) if batch else matmul(n, k, m, constant=False)
    t = template_for(C)
    cfg = t.default_config()
    assert cfg["pack"] and m % cfg["tile_j"] and n % cfg["tile_i"]     # a padded last panel, a shifted last row tile
    rng = np.random.default_rng(0)
    a = rng.standard_normal((*batch, n, k)).astype(np.float32)
    b = rng.standard_normal((*batch, k, m)).astype(np.float32)
    out = np.full((*batch, n, m), np.nan, np.float32)
    t.build(cfg)(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def grouped_conv(channels, size, groups, stride=1, pads=(1, 1), epilogue=None, width=None):
    """A grouped NCHW 3x3 convolution with bias, and ``epilogue`` after it (numpy's answer too)."""
    from tilefuse.tensorir.ops import elementwise
    width = width or size
    X = placeholder((1, channels, size, width), name="X")
    W = placeholder((channels, channels // groups, 3, 3), name="W", constant=True)
    B = placeholder((channels,), name="B", constant=True)
    Y = window.conv(X, W, [stride, stride], list(pads), list(pads[::-1]), [1, 1], groups=groups,
                    data_format="NCX", weights_format="OIX", bias=B)
    if epilogue == "relu":
        return elementwise.relu(Y)
    if epilogue == "silu":
        return elementwise.multiply(Y, elementwise.sigmoid(Y))
    return Y


@pytest.mark.parametrize("channels, size, groups, stride, pads, epilogue, width", [
    (320, 14, 20, 1, (1, 1), "relu", None),       # RegNetY-800MF: 16 channels a group
    (144, 13, 9, 2, (1, 1), None, 11),            # odd sizes at stride 2
    (96, 9, 12, 1, (0, 1), "silu", 7),            # 8 a group, uneven pads
    (96, 9, 12, 2, (1, 1), "relu", 13),           # 8 a group at stride 2 (a half vector of channels)
    (96, 7, 4, 2, (1, 0), "relu", None),          # 24 a group: tiles of 8
    (128, 5, 4, 1, (1, 1), "silu", 9),            # 32 a group: two vectors
    (48, 11, 4, 1, (1, 1), "relu", None),         # 12 a group: no tile divides it, rows of pixels
    (64, 13, 16, 1, (1, 1), "relu", 17),          # 4 a group (ResNeXt's first stage)
])
def test_grouped_convolutions_tile_pixels_by_a_groups_channels_and_match_numpy(channels, size, groups, stride,
                                                                              pads, epilogue, width):
    Y = grouped_conv(channels, size, groups, stride, pads, epilogue, width)
    t = template_for(Y)
    per_group, lanes = channels // groups, t.target.lanes("float32")
    cfg = t.default_config()
    assert ("channels" in t.layouts) == (per_group % 8 == 0)
    if per_group % 8 == 0 and not (per_group < lanes and stride == 1):
        assert cfg["layout"] == "channels" and per_group % cfg["tile_j"] == 0 and cfg["pack"]
    else:                       # rows of pixels by all of a group's channels
        assert cfg.values.get("layout", "rows") == "rows" and t.whole_groups("rows")
    rng = np.random.default_rng(per_group)
    x, w, b = (rng.standard_normal(p.shape).astype(np.float32) for p in t.args[:-1])
    want = grouped_reference(x, w, b, groups, stride, pads, epilogue)
    for config in [cfg] + ([Config(t.default_for("rows"))] if "channels" in t.layouts else []):
        out = np.full(Y.shape, np.nan, np.float32)
        t.build(config)(x, w, b, out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=str(config))


def test_a_grouped_convolution_copies_the_padded_rows_of_each_output_row_and_tiles_within_a_group():
    t = template_for(grouped_conv(320, 14, 20, epilogue="relu"), AVX512)
    cfg = t.default_config()
    assert (cfg["layout"], cfg["tile_i"], cfg["tile_j"]) == ("channels", 14, 16)   # one row: 14 pixels x 16 channels
    shapes = {n.buffer.name: n.buffer.shape for n in walk(lower(t.apply(cfg), t.args).body) if isinstance(n, Allocate)}
    assert shapes["conv_pad"] == (1, 16, 3, 16)          # a group's 16 channels, 3 rows of the padded width
    assert shapes["conv_acc.local"] == (1, 1, 1, 14, 16)
    assert shapes["W.packed"] == (20, 16, 3, 3, 16)      # one panel a group
    assert t.space.searchable(t.space.index_of(cfg))
    wider = Config({**cfg.values, "tile_j": 32, "tile_i": 7})    # a tile over two groups: kept from the search
    assert not t.space.searchable(t.space.index_of(wider))


def test_narrow_groups_at_stride_1_keep_a_whole_group_in_a_tile_of_rows_of_pixels():
    t = template_for(grouped_conv(128, 56, 32, epilogue="relu"), AVX512)      # ResNeXt-50: 4 channels a group
    cfg = t.default_config()
    assert "layout" not in cfg.values and (cfg["tile_i"], cfg["tile_j"]) == (2, 32)   # 4 x 2 x 2 vectors
    shapes = {n.buffer.name: n.buffer.shape for n in walk(lower(t.apply(cfg), t.args).body) if isinstance(n, Allocate)}
    assert shapes["conv_acc"] == (1, 1, 4, 2, 32)        # the group's 4 channels, 2 rows, 32 pixels
    assert shapes["conv_pad"] == (1, 4, 4, 58)           # the rows those read, copied at each row of tiles
    narrow = template_for(grouped_conv(256, 28, 32), AVX512).default_config()     # 8 a group
    assert (narrow["layout"], narrow["tile_i"], narrow["tile_j"]) == ("rows", 2, 16)
    assert template_for(grouped_conv(256, 28, 32, stride=2), AVX512).default_config()["layout"] == "channels"
    assert template_for(grouped_conv(256, 28, 32), AVX2).default_config()["layout"] == "channels"   # 8 lanes


@pytest.mark.parametrize("size, groups, stride", [(14, 20, 1), (13, 40, 2)])
def test_a_channels_last_grouped_convolution_tiles_pixels_by_a_groups_contiguous_channels(size, groups, stride):
    X, W = placeholder((1, size, size, 320), name="X"), placeholder((3, 3, 320 // groups, 320), name="W", constant=True)
    Y = window.conv(X, W, [stride, stride], [1, 1], [1, 1], [1, 1], groups=groups)
    t = template_for(Y)
    per_group = 320 // groups
    cfg = t.default_config()
    assert t.groups == (3, per_group) and "channels" not in t.layouts and per_group % cfg["tile_j"] == 0
    text = lower(t.apply(cfg), t.args)
    shapes = {n.buffer.name: n.buffer.shape for n in walk(text.body) if isinstance(n, Allocate)}
    assert shapes["conv_acc"] == (1, 1, cfg["tile_i"], 1, cfg["tile_j"])      # pixels by a group's channels
    rng = np.random.default_rng(groups)
    x, w = rng.standard_normal(X.shape).astype(np.float32), rng.standard_normal(W.shape).astype(np.float32)
    out = np.full(Y.shape, np.nan, np.float32)
    t.build(cfg)(x, w, out)
    want = grouped_reference(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), np.zeros(320), groups, stride,
                             (1, 1), None)
    np.testing.assert_allclose(out, want.transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-4)
    narrow = template_for(window.conv(X, placeholder((3, 3, 5, 320), name="W5", constant=True), [1, 1], [1, 1],
                                      [1, 1], [1, 1], groups=64))
    assert narrow.groups is None           # 5 a group: no tile of whole vectors within it
    diagonals = template_for(window.conv(X, placeholder((3, 3, 4, 320), name="W4", constant=True), [1, 1], [1, 1],
                                         [1, 1], [1, 1], groups=80))
    assert diagonals.name == "window"      # 4 a group: a window over the channels too


def test_weights_swept_panel_by_panel_fetch_the_next_panel_a_line_per_trip():
    from tilefuse.tensorir.stmt import Prefetch
    # 130 rows (not a multiple of the 6-row tile) of 768 x 1000 weights: 3 MiB, past L2
    t = template_for(matmul(130, 768, 1000), AVX512)
    cfg = t.default_config()
    assert cfg["order"] == "ji" and cfg["fetch_next_panel"] and cfg["prefetch"] == 0
    func = lower(t.apply(cfg), t.args)
    fetches = [n for n in walk(func.body) if isinstance(n, Prefetch)]
    assert fetches and all(f.buffer.name == "B.packed" for f in fetches)
    # the next panel (one past this tile's), at the row tile's share of its lines plus this trip's
    assert all(str(f.indices[0]).endswith(" + 1") and str(f.indices[1]) == "0" for f in fetches)
    # fewer than 4 row tiles (one row, 12 in two tiles of 6), or weights in L2, or data: no next
    # panel to fetch; the few rows fetch ahead in their panel instead
    for rows in (1, 12):
        few = template_for(matmul(rows, 768, 1000), AVX512).default_config()
        assert not few["fetch_next_panel"] and few["prefetch"] == 2048
    streamed = template_for(matmul(48, 768, 1000), AVX512).default_config()     # 8 row tiles of 6
    assert streamed["fetch_next_panel"] and streamed["prefetch"] == 0
    assert not template_for(matmul(130, 128, 256), AVX512).default_config()["fetch_next_panel"]
    assert "fetch_next_panel" not in template_for(matmul(130, 768, 1000, constant=False), AVX512).space.knobs
    # results never change: against the default without the fetch, and with it in "ij" refused
    host = template_for(matmul(130, 768, 1000))
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((130, 768)).astype(np.float32), rng.standard_normal((768, 1000)).astype(np.float32)
    out = np.full((130, 1000), np.nan, np.float32)
    host.build(host.default_config())(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-3)
    searchable = lambda **v: host.space.searchable(host.space.index_of(Config(dict(host.default_config().values, **v))))
    assert searchable() and not searchable(order="ij") and not searchable(pack=False)


def test_a_product_reshaped_with_a_leading_one_fetches_the_next_panel_too():
    from tilefuse.tensorir.stmt import Prefetch
    # GPT-2's dense layers: a (rows, N) product, scaled and reshaped to (1, rows, N) in its epilogue
    product = matmul(130, 768, 1000)
    out = compute((1, 130, 1000), lambda b, i, j: product[i, j] * 2.0, name="R")
    t = template_for(out)
    cfg = t.default_config()
    assert cfg["fetch_next_panel"]
    assert [n for n in walk(lower(t.apply(cfg), t.args).body) if isinstance(n, Prefetch)]
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((130, 768)).astype(np.float32), rng.standard_normal((768, 1000)).astype(np.float32)
    got = np.full((1, 130, 1000), np.nan, np.float32)
    t.build(cfg)(a, b, got)
    np.testing.assert_allclose(got[0], 2 * (a @ b), rtol=1e-4, atol=2e-3)


def test_a_convolution_swept_panel_by_panel_fetches_the_next_panel_along_its_three_reduce_axes():
    from tilefuse.tensorir import ops
    from tilefuse.tensorir.stmt import Prefetch
    # 9x9 (rows of tiles that do not divide it; too few tiles for Winograd) of 3x3 x 200 -> 300
    # channels: 2.1 MiB of weights
    x, w = placeholder((1, 9, 9, 200), name="x"), placeholder((3, 3, 200, 300), name="w", constant=True)
    t = template_for(ops.conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1]), AVX512)
    cfg = t.default_config()
    assert cfg["order"] == "ji" and cfg["fetch_next_panel"] and cfg["winograd"] == 0
    fetches = [n for n in walk(lower(t.apply(cfg), t.args).body) if isinstance(n, Prefetch)]
    assert fetches and all(f.buffer.name == "w.packed" and len(f.indices) == 5 and f.level == 2 for f in fetches)
    # Winograd's products fetch their own panels: never both
    searchable = lambda **v: t.space.searchable(t.space.index_of(Config(dict(cfg.values, **v))))
    assert not searchable(winograd=2, pack=False, unroll_k=1)
    host = template_for(ops.conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1]))
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((1, 9, 9, 200)).astype(np.float32), rng.standard_normal((3, 3, 200, 300)).astype(np.float32)
    got, want = np.full((1, 9, 9, 300), np.nan, np.float32), np.zeros((1, 9, 9, 300), np.float32)
    host.build(host.default_config())(a, b, got)
    host.build(Config(dict(host.default_config().values, fetch_next_panel=False)))(a, b, want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
