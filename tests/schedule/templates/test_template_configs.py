"""Every template config in a sample of 200 of the points tuners search (here: each whole space
that is smaller) gives numpy's answer on shapes that do not divide the tile sizes. The large
samples are checked in ``PARTS`` tests of their own (every ``PARTS``-th config from a different
start), so the suite's workers share them."""
import numpy as np
import pytest

from tilefuse.schedule import lower, template_for
from tilefuse.schedule.space import Config
from tilefuse.tensorir.ops import softmax as softmax_op
from tilefuse.tensorir.expr import Select
from tilefuse.tensorir.ops import transform
from tilefuse.tensorir.stmt import Allocate, BufferStore, For, Prefetch
from tilefuse.tensorir.walk import walk
from tilefuse.tensorir import compute, exp, if_then_else, placeholder, reduce_axis, rsqrt, sum as rsum, tanh
from tilefuse.tensorir.expr import Const, Max
from tilefuse.tensorir import max as rmax
from host_vectors import HOST, LANES
from conv_reference import grouped_reference

RNG = np.random.default_rng(3)
SAMPLE = 200
PARTS = 4
in_parts = pytest.mark.parametrize("part", range(PARTS))


def check_all_configs(outputs, reference, expected_template, rtol=1e-5, atol=1e-5, part=0, parts=1):
    """The template of ``outputs`` (asserted to be ``expected_template``), after checking its
    default config and a sample of its searchable ones against ``reference`` on random inputs:
    the ``part``-th of ``parts`` equal shares of them (every ``parts``-th, from ``part``)."""
    t = template_for(outputs)
    assert t.name == expected_template
    inputs = [RNG.standard_normal(p.shape).astype(p.dtype) for p in t.dag.placeholders]
    expected = reference(*inputs)
    # the points a tuner proposes (the others compute the kernel of one of them, or a slower one)
    searchable = [i for i in range(len(t.space)) if t.space.searchable(i)]
    picked = np.random.default_rng(0).choice(searchable, min(SAMPLE, len(searchable)), replace=False)
    configs = [t.default_config()] + [t.space.get(int(i)) for i in picked if t.space.get(int(i)) != t.default_config()]
    expected = expected if isinstance(expected, tuple) else (expected,)
    for cfg in configs[part::parts]:
        outs = [np.full(o.shape, np.nan, o.dtype) for o in t.outputs]
        t.build(cfg)(*inputs, *outs)
        for out, want in zip(outs, expected):
            np.testing.assert_allclose(out, want, rtol=rtol, atol=atol, err_msg=f"config {cfg}")
    return t


def test_injective_elementwise_with_broadcast():
    A, b = placeholder((37, 19), name="A"), placeholder((19,), name="b")
    T = compute((37, 19), lambda i, j: exp(A[i, j]) * b[j], name="T")
    Y = compute((37, 19), lambda i, j: tanh(T[i, j]) + 1.0, name="Y")
    check_all_configs(Y, lambda a, bv: np.tanh(np.exp(a) * bv) + 1, "injective")


def test_injective_transpose_and_reshape():
    A = placeholder((6, 35), name="A")
    T = compute((35, 6), lambda i, j: A[j, i], name="T")
    R = compute((5, 42), lambda i, j: T[(i * 42 + j) // 6, (i * 42 + j) % 6] * 2.0, name="R")
    check_all_configs(R, lambda a: (a.T.reshape(5, 42) * 2), "injective")


@pytest.mark.parametrize("shape, order", [((1, 5, 9, 13), [0, 2, 3, 1]), ((1, 9, 13, 37), [0, 3, 1, 2]),
                                          ((3, 70, 11), [1, 2, 0])])
def test_injective_transposes_that_move_the_last_axis_run_in_the_order_they_read(shape, order):
    # no lanes of our own (they would gather one element at a time): loops in the input's order,
    # the output's last axis innermost, and every config still correct on odd shapes
    X = placeholder(shape, name="X")
    Y = transform.transpose(X, order)
    t = check_all_configs(Y, lambda x: np.ascontiguousarray(x.transpose(order)), "injective")
    assert t.default_config()["vector"] == 1
    loops = [n for n in walk(lower(t.apply(t.default_config()), t.args).body) if isinstance(n, For)]
    nest = [int(part[2:]) for n in loops for part in n.var.name.split(".") if part.startswith("ax")]
    expected = sorted(range(len(order) - 1), key=lambda k: order[k]) + [len(order) - 1]
    assert nest == [k for k in expected if k in nest]        # output axes by the input dim they read


def test_injective_transposes_that_keep_the_last_axis_keep_their_vectors():
    X = placeholder((4, 6, 40), name="X")
    t = check_all_configs(transform.transpose(X, [1, 0, 2]), lambda x: np.ascontiguousarray(x.transpose(1, 0, 2)),
                          "injective")
    assert t.default_config()["vector"] > 1


def test_reduction_row_sum():
    X = placeholder((13, 101), name="X")
    r = reduce_axis((0, 101), name="r")
    S = compute((13,), lambda i: rsum(X[i, r], axis=r), name="S")
    check_all_configs(S, lambda x: x.sum(1), "reduction", rtol=1e-4, atol=1e-4)


def test_reduction_then_reshape_global_pooling():
    X = placeholder((3, 7, 9, 13), name="X")
    r, q = reduce_axis((0, 9), name="r"), reduce_axis((0, 13), name="q")
    S = compute((3, 7, 1, 1), lambda n, c, h, w: rsum(X[n, c, r, q], axis=[r, q]), name="S")
    F = compute((3, 7), lambda n, c: S[n, c, 0, 0] / 117.0, name="F")
    check_all_configs(F, lambda x: x.mean(axis=(2, 3)), "reduction", rtol=1e-4, atol=1e-5)


def test_reduction_channels_last_global_pooling_reduces_columns():
    # NHWC's global average pool (squeeze-excite): each channel's sum runs down a column of
    # pixels, the channels a vector wide, never a gather across them
    X = placeholder((2, 9, 11, 21), name="X")
    r, q = reduce_axis((0, 9), name="r"), reduce_axis((0, 11), name="q")
    S = compute((2, 1, 1, 21), lambda n, h, w, c: rsum(X[n, r, q, c], axis=[r, q]), name="S")
    F = compute((2, 1, 1, 21), lambda n, h, w, c: S[n, h, w, c] / 99.0, name="F")
    t = check_all_configs(F, lambda x: x.mean(axis=(1, 2), keepdims=True), "reduction", rtol=1e-4, atol=1e-5)
    assert t.rows == 0
    assert "gather" not in t.build(t.default_config()).source("llvm")


def test_reduction_channels_last_rows_of_a_large_map_run_in_parallel():
    # a pooling's first half (passes.split_spatial_reductions): each row of a channels-last map
    # reduced, few outputs and much to read: the rows are shared among threads, the small
    # output is not
    X = placeholder((1, 30, 40, 48), name="X")
    q = reduce_axis((0, 40), name="q")
    S = compute((1, 30, 1, 48), lambda n, h, w, c: rsum(X[n, h, q, c], axis=q), name="S")
    F = compute((1, 30, 1, 48), lambda n, h, w, c: S[n, h, w, c] / 40.0, name="F")
    t = check_all_configs(F, lambda x: x.mean(axis=2, keepdims=True), "reduction", rtol=1e-4, atol=1e-5)
    func = lower(t.apply(t.default_config()), t.args)
    parallel = [n for n in walk(func.body) if isinstance(n, For) and n.kind == "parallel"]
    assert [int(n.extent.value) for n in parallel] == [30]


@in_parts
def test_reduction_softmax(part):
    X = placeholder((9, 77), name="X")
    rm, rs = reduce_axis((0, 77), name="rm"), reduce_axis((0, 77), name="rs")
    M = compute((9,), lambda i: rmax(X[i, rm], axis=rm), name="M")
    E = compute((9, 77), lambda i, j: exp(X[i, j] - M[i]), name="E")
    S = compute((9,), lambda i: rsum(E[i, rs], axis=rs), name="S")
    Y = compute((9, 77), lambda i, j: E[i, j] / S[i], name="Y")

    def softmax(x):
        e = np.exp(x - x.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)
    check_all_configs(Y, softmax, "reduction", part=part, parts=PARTS)


def test_reduction_softmax_over_a_middle_axis_reduces_columns():
    X = placeholder((3, 29, 21), name="X")
    Y = softmax_op(X, axis=1)

    def softmax(x):
        e = np.exp(x - x.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)
    t = check_all_configs(Y, softmax, "reduction")
    func = lower(t.apply(t.default_config()), t.args)
    assert "gather" not in t.build(t.default_config()).source("llvm")     # columns: contiguous vectors
    reduce_loops = [n for n in walk(func.body) if isinstance(n, For) and n.var.name == "r"]
    assert len(reduce_loops) == 2 and all(any(isinstance(m, For) and m.kind == "vectorized" for m in walk(loop))
                                          for loop in reduce_loops)      # the reduce loop outside the vectors


def test_reduction_softmax_computes_its_exp_once_per_row():
    X = placeholder((5, 300), name="X")
    Y = softmax_op(X, axis=-1)
    t = template_for(Y)
    assert t.default_config()["cache"]
    text = str(lower(t.apply(t.default_config()), t.args))
    assert "allocate softmax_exp[1, 300]" in text
    assert all(line.strip().startswith("softmax_exp[") for line in text.splitlines() if "exp(" in line)


def test_reduction_softmax_over_long_rows_in_large_data_prefetches_the_next_row_while_computing():
    softmax = softmax_op
    big, small = template_for(softmax(placeholder((4096, 1024), name="X"), axis=-1)), \
        template_for(softmax(placeholder((64, 1024), name="X"), axis=-1))
    assert big.default_config()["prefetch"] and not small.default_config()["prefetch"]
    func = lower(big.apply(big.default_config()), big.args)
    text = str(func)
    assert "prefetch X[ax0 + 1, " in text and "prefetch_write softmax[ax0 + 1, " in text
    exp_stores = [n for n in walk(func.body) if isinstance(n, For) and any(
        isinstance(m, BufferStore) and m.buffer.name == "softmax_exp" for m in walk(n.body))]
    innermost = min(exp_stores, key=lambda loop: sum(1 for _ in walk(loop)))
    assert any(isinstance(m, Prefetch) for m in walk(innermost))        # fetched by the exp loop


def test_reduction_layernorm():
    n, d = 7, 45
    X = placeholder((n, d), name="X")
    r1, r2 = reduce_axis((0, d), name="r1"), reduce_axis((0, d), name="r2")
    total = compute((n,), lambda i: rsum(X[i, r1], axis=r1), name="total")
    mean = compute((n,), lambda i: total[i] / float(d), name="mean")
    sq = compute((n,), lambda i: rsum((X[i, r2] - mean[i]) * (X[i, r2] - mean[i]), axis=r2), name="sq")
    Y = compute((n, d), lambda i, j: (X[i, j] - mean[i]) * rsqrt(sq[i] / float(d) + 1e-5), name="Y")
    check_all_configs(Y, lambda x: (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5),
                      "reduction", rtol=1e-4, atol=1e-4)


@in_parts
def test_complex_matmul(part):
    n, k, m = 29, 45, 83
    A, B = placeholder((n, k), name="A"), placeholder((k, m), name="B")
    r = reduce_axis((0, k), name="r")
    C = compute((n, m), lambda i, j: rsum(A[i, r] * B[r, j], axis=r), name="C")
    check_all_configs(C, lambda a, b: a @ b, "complex", rtol=1e-4, atol=1e-4, part=part, parts=PARTS)


@in_parts
def test_complex_dense_bias_relu_epilogue(part):
    n, k, m = 13, 30, 70
    X, W, bias = placeholder((n, k), name="X"), placeholder((m, k), name="W"), placeholder((m,), name="bias")
    r = reduce_axis((0, k), name="r")
    D = compute((n, m), lambda i, j: rsum(X[i, r] * W[j, r], axis=r), name="D")
    B = compute((n, m), lambda i, j: D[i, j] + bias[j], name="B")
    Y = compute((n, m), lambda i, j: if_then_else(B[i, j] > 0.0, B[i, j], 0.0), name="Y")
    check_all_configs(Y, lambda x, w, b: np.maximum(x @ w.T + b, 0), "complex", rtol=1e-4, atol=1e-4,
                      part=part, parts=PARTS)


@in_parts
def test_complex_batch_matmul(part):
    b, n, k, m = 3, 10, 7, 19
    A, B = placeholder((b, n, k), name="A"), placeholder((b, k, m), name="B")
    r = reduce_axis((0, k), name="r")
    C = compute((b, n, m), lambda z, i, j: rsum(A[z, i, r] * B[z, r, j], axis=r), name="C")
    check_all_configs(C, lambda a, bb: a @ bb, "complex", rtol=1e-4, atol=1e-4, part=part, parts=PARTS)


@in_parts
def test_complex_conv2d_with_padding(part):
    ci, h, w, co = 3, 9, 11, 5
    I, W = placeholder((1, ci, h, w), name="I"), placeholder((co, ci, 3, 3), name="W")
    P = compute((1, ci, h + 2, w + 2), lambda n, c, y, x: if_then_else(
        (y >= 1) & (y <= h) & (x >= 1) & (x <= w), I[n, c, y - 1, x - 1], 0.0), name="P")
    rc, ry, rx = reduce_axis((0, ci), name="rc"), reduce_axis((0, 3), name="ry"), reduce_axis((0, 3), name="rx")
    O = compute((1, co, h, w), lambda n, f, y, x: rsum(P[n, rc, y + ry, x + rx] * W[f, rc, ry, rx],
                                                         axis=[rc, ry, rx]), name="O")

    def conv(i, wt):
        p = np.pad(i, ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((1, co, h, w), "float32")
        for dy in range(3):
            for dx in range(3):
                out += np.einsum("nchw,fc->nfhw", p[:, :, dy:dy + h, dx:dx + w], wt[:, :, dy, dx])
        return out
    check_all_configs(O, conv, "complex", rtol=1e-4, atol=1e-4, part=part, parts=PARTS)


@in_parts
@pytest.mark.parametrize("groups, c, stride, fmt", [(3, 48, 2, "NCX"), (5, 20, 1, "NCX"), (2, 32, 1, "NXC")])
def test_complex_grouped_conv_with_bias_and_silu(part, groups, c, stride, fmt):
    # 3 groups of 16 channels (a group is a whole vector of 16 lanes, two of 8) over an odd
    # image at stride 2: every layout, tile and block of the grouped channels' space; 5 groups
    # of 4 at stride 1: rows of pixels by a whole group; channels-last, 2 groups of 16
    from tilefuse.tensorir.ops import elementwise, window
    h, w = 9, 7
    nxc = fmt == "NXC"
    X = placeholder((1, h, w, c) if nxc else (1, c, h, w), name="X")
    W = placeholder((c, c // groups, 3, 3), name="W", constant=True)
    B = placeholder((c,), name="B", constant=True)
    Y = window.conv(X, W, [stride, stride], [1, 0], [0, 1], [1, 1], groups=groups, data_format=fmt,
                    weights_format="OIX", bias=B)
    S = elementwise.multiply(Y, elementwise.sigmoid(Y))

    def silu(x, wt, b):
        x = x.transpose(0, 3, 1, 2) if nxc else x
        out = grouped_reference(x, wt, b, groups, stride, (1, 0), "silu").astype("float32")
        return out.transpose(0, 2, 3, 1) if nxc else out
    t = check_all_configs(S, silu, "complex", rtol=1e-4, atol=1e-4, part=part, parts=PARTS)
    assert t.groups is not None
    assert t.default_config().values.get("layout", "rows") == ("channels" if c // groups == 16 and not nxc else "rows")


def test_opaque_default_is_correct():
    A = placeholder((8, 9), name="A")
    r = reduce_axis((0, 9), name="r")
    B = compute((8,), lambda i: rsum(A[i, r], axis=r), name="B")
    C = compute((8, 9), lambda i, j: A[i, j] - B[i], name="C", tag="opaque")
    check_all_configs(C, lambda a: a - a.sum(1, keepdims=True), "opaque")


def _conv1x1(ci, co, h, w):
    X, W = placeholder((1, ci, h, w), name="X"), placeholder((co, ci), name="W")
    r = reduce_axis((0, ci), name="r")
    return X, W, compute((1, co, h, w), lambda n, c, y, x: rsum(X[n, r, y, x] * W[c, r], axis=r), name="conv")


def _conv1x1_ref(x, wt):
    return np.einsum("nrhw,cr->nchw", x, wt)


@in_parts
def test_complex_conv_with_a_channel_shuffle_epilogue(part):
    # ShuffleNet's block: 1x1 conv, relu, then reshape/transpose/reshape across channel groups
    c, g, h, w = 12, 3, 5, 19
    X, W, C = _conv1x1(7, c, h, w)
    R = compute(C.shape, lambda *i: tanh(C[i]), name="R")
    S = transform.reshape(transform.transpose(transform.reshape(R, (1, g, c // g, h, w)), (0, 2, 1, 3, 4)),
                          (1, c, h, w))

    def shuffled(x, wt):
        return np.tanh(_conv1x1_ref(x, wt)).reshape(1, g, c // g, h, w).transpose(0, 2, 1, 3, 4).reshape(1, c, h, w)
    t = check_all_configs(S, shuffled, "complex", rtol=1e-4, atol=1e-4, part=part, parts=PARTS)
    # the shuffle's index arithmetic folds back to the channel: the accumulator is one tile
    # (cut to the row's width when the tile is wider)
    cfg = t.default_config()
    local = [n.buffer for n in walk(lower(t.apply(cfg), t.args).body) if isinstance(n, Allocate)
             and n.buffer.name.startswith("conv")]
    assert [b.shape for b in local] == [(1, 1, cfg["tile_i"], min(cfg["tile_j"], w))]


@in_parts
def test_complex_with_two_outputs_computes_the_anchor_once(part):
    # zfnet's conv + relu feeding local response normalization: relu, and relu squared reshaped
    X, W, C = _conv1x1(6, 10, 7, 13)
    R = compute(C.shape, lambda *i: tmaximum(C[i], 0.0), name="R")
    Q = transform.reshape(compute(C.shape, lambda *i: R[i] * R[i], name="Q"), (1, 1, 10, 7 * 13))

    def both(x, wt):
        r = np.maximum(_conv1x1_ref(x, wt), 0)
        return r, (r * r).reshape(1, 1, 10, 91)
    t = check_all_configs([R, Q], both, "complex", rtol=1e-4, atol=1e-4, part=part, parts=PARTS)
    assert t.out is R.op
    body = lower(t.apply(t.default_config()), t.args).body
    assert sum(1 for n in walk(body) if isinstance(n, BufferStore) and n.buffer.name.startswith("conv")) == 2  # init, update


def test_complex_with_an_output_that_reads_the_anchor_itself_falls_back_to_opaque():
    X, W, C = _conv1x1(6, 10, 7, 13)
    R = compute(C.shape, lambda *i: tmaximum(C[i], 0.0), name="R")
    S = compute(C.shape, lambda *i: C[i] * 2.0, name="S")      # reads conv, not through R
    assert template_for([R, S]).name == "opaque"


def test_injective_concat_on_channels():
    xs = [placeholder((2, n, 3, 7), name=f"x{k}") for k, n in enumerate([5, 1, 4])]
    cat = transform.concat(xs, axis=1)
    Y = compute(cat.shape, lambda *i: cat[i] * 2.0 + 1.0, name="Y")
    t = check_all_configs(Y, lambda *a: np.concatenate(a, axis=1) * 2 + 1, "injective")
    # each input is copied by a loop of its own: no select is left
    assert not any(isinstance(n, Select) for n in walk(lower(t.apply(t.default_config()), t.args).body))


def test_injective_vectors_are_contiguous_on_4d_tensors():
    X = placeholder((2, 9, 28, 28), name="X")
    Y = compute(X.shape, lambda *i: X[i] * 2.0, name="Y")
    t = check_all_configs(Y, lambda x: x * 2, "injective")
    text = t.build(t.default_config()).source("llvm")
    assert f"<{LANES} x float>" in text and "masked.gather" not in text and "masked.scatter" not in text


@pytest.mark.parametrize("c, h, w", [(12, 7, 7), (20, 5, 3), (8, 14, 14)])
def test_injective_channel_shuffle_reads_each_plane_in_order(c, h, w):
    # the channels are permuted: each plane a row of its own, read by contiguous vectors,
    # never vectors spanning two planes (which gather)
    X = placeholder((1, c, h, w), name="X")
    g = 4
    S = transform.reshape(transform.transpose(transform.reshape(X, (1, g, c // g, h, w)), (0, 2, 1, 3, 4)),
                          (1, c, h, w))
    t = check_all_configs(S, lambda x: x.reshape(1, g, c // g, h, w).transpose(0, 2, 1, 3, 4).reshape(1, c, h, w),
                          "injective")
    text = t.build(t.default_config()).source("llvm")
    assert "masked.gather" not in text


@pytest.mark.parametrize("c, h, w", [(24, 7, 7), (13, 5, 3), (960, 7, 7)])
def test_injective_broadcast_over_small_planes_reads_one_value_per_plane(c, h, w):
    # a per-channel operand repeats each value over a plane: vectors spanning two planes
    # would gather it (960x7x7 took 109 us that way, 4.6 us a plane at a time)
    X, b = placeholder((1, c, h, w), name="X"), placeholder((c, 1, 1), name="b")
    Y = compute(X.shape, lambda n, c, y, x: X[n, c, y, x] + b[c, 0, 0], name="Y")
    t = check_all_configs(Y, lambda x, bv: x + bv, "injective")
    loops = [n for n in walk(lower(t.apply(t.default_config()), t.args).body) if isinstance(n, For)]
    assert not any(n.var.name.startswith("c.") for n in loops)
    assert "masked.gather" not in t.build(t.default_config()).source("llvm")


def tmaximum(v, c: float):
    """max(v, c) of a compute body's value (relu for c = 0)."""
    return Max(v, Const(c, v.dtype), v.dtype)


def test_complex_nchw_conv_vectorizes_over_output_channels_by_default():
    ci, co, h, w = 5, 4 * LANES + 1, 4, 11
    X, W = placeholder((1, ci, h, w), name="X"), placeholder((co, ci, 3, 3), name="W", constant=True)
    Y = transform_conv(X, W)
    t = template_for(Y)
    cfg = t.default_config()
    assert list(t.space.knobs["layout"].candidates) == ["rows", "channels"]
    # four vectors of channels and one more: one-vector tiles (the least padding, lanes - 1
    # channels) and 6 rows, enough accumulators for a one-vector tile
    assert cfg["layout"] == "channels" and cfg["pack"] and cfg["tile_i"] == 6
    assert cfg["tile_j"] == HOST.lanes("float32")
    x, wt = RNG.standard_normal(X.shape).astype("float32"), RNG.standard_normal(W.shape).astype("float32")
    want = _conv3x3_ref(x, wt)
    for layout in ("rows", "channels"):
        out = np.full(Y.shape, np.nan, "float32")
        t.build(Config(t.default_for(layout)))(x, wt, out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=layout)


def test_complex_matmul_space_has_no_layout_knob():
    A, B = placeholder((8, 4), name="A"), placeholder((4, 6), name="B", constant=True)
    r = reduce_axis((0, 4), name="r")
    C = compute((8, 6), lambda i, j: rsum(A[i, r] * B[r, j], axis=r), name="C")
    assert "layout" not in template_for(C).space.knobs
    Z = placeholder((3, 8, 4), name="Z")
    r2 = reduce_axis((0, 4), name="r2")
    D = compute((3, 8, 6), lambda b, i, j: rsum(Z[b, i, r2] * B[r2, j], axis=r2), name="D")
    assert "layout" not in template_for(D).space.knobs     # the batch axis is read by the data too


def transform_conv(X, W):
    from tilefuse.tensorir.ops import window
    return window.conv(X, W, [1, 1], [1, 1], [1, 1], [1, 1], data_format="NCX", weights_format="OIX")


def _conv3x3_ref(x, wt):
    h, w = x.shape[2:]
    p = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, wt.shape[0], h, w), "float32")
    for dy in range(3):
        for dx in range(3):
            out += np.einsum("nchw,fc->nfhw", p[:, :, dy:dy + h, dx:dx + w], wt[:, :, dy, dx])
    return out
