"""The window template (pooling, depthwise convolution and their epilogues): every pair of
knob values against numpy on widths that do not divide the vector, with padding, strides and
dilations; which DAGs it takes; and the loop nest it makes (no select in the interior, strided
reads as shuffles, not gathers; a block of rows inside the window loops)."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from host_vectors import LANES

from tilefuse.schedule import lower, template_for
from tilefuse.schedule.space import Config
from tilefuse.tensorir import compute, placeholder
from tilefuse.tensorir.expr import Select
from tilefuse.tensorir.ops import window
from tilefuse.tensorir.stmt import For
from tilefuse.tensorir.walk import walk
from tilefuse.tensorir.visitor import Visitor

RNG = np.random.default_rng(7)


def windows(x, kernel, strides, pads_begin, pads_end, dilations, fill):
    """(n, c, *out, *kernel) windows of an NCHW array, padded with ``fill``."""
    pad = [(0, 0), (0, 0)] + list(zip(pads_begin, pads_end))
    xp = np.pad(x.astype(np.float64), pad, constant_values=fill)
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    view = sliding_window_view(xp, spans, axis=(2, 3))
    view = view[:, :, ::strides[0], ::strides[1], ::dilations[0], ::dilations[1]]
    return view


def pairwise_configs(t) -> list:
    """Configs of template ``t`` in which every value pair of any two knobs occurs (a greedy
    covering array, a few times smaller than the whole space), the default first."""
    knobs = list(t.space.knobs)
    needed = {(a, va, b, vb) for i, a in enumerate(knobs) for b in knobs[i + 1:]
              for va in t.space.knobs[a].candidates for vb in t.space.knobs[b].candidates}

    def covers(cfg):
        return {(a, cfg[a], b, cfg[b]) for i, a in enumerate(knobs) for b in knobs[i + 1:]} & needed
    chosen = [t.default_config()]
    needed -= covers(chosen[0])
    while needed:
        best = max(t.space, key=lambda cfg: len(covers(cfg)))
        chosen.append(best)
        needed -= covers(best)
    return chosen


def test_pairwise_configs_cover_every_pair_of_knob_values():
    t = template_for(window.pool("max", placeholder((1, 3, 13, 19), name="X"), [3, 3], [1, 1], [1, 1], [1, 1],
                                 data_format="NCX"))
    chosen = pairwise_configs(t)
    assert len(chosen) < len(t.space) / 2
    for a in t.space.knobs:
        for b in t.space.knobs:
            if a != b:
                pairs = {(cfg[a], cfg[b]) for cfg in chosen}
                assert len(pairs) == len(t.space.knobs[a].candidates) * len(t.space.knobs[b].candidates)


def check_configs(out, arrays, want, template="window", rtol=1e-5, atol=1e-5):
    """``out`` built with every pair of knob values (``pairwise_configs``) against ``want``."""
    t = template_for(out)
    assert t.name == template
    for cfg in pairwise_configs(t):
        got = np.full(out.shape, np.nan, "float32")
        t.build(cfg)(*arrays, got)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"config {cfg}")
    return t


POOLS = [   # kind, shape, kernel, strides, pads_begin, pads_end, dilations, exclude_pad
    ("max", (1, 3, 13, 19), [3, 3], [2, 2], [1, 1], [1, 1], [1, 1], False),
    ("max", (2, 2, 9, 21), [2, 3], [1, 1], [0, 1], [1, 1], [1, 2], False),
    ("avg", (1, 4, 11, 17), [3, 3], [1, 1], [1, 1], [1, 1], [1, 1], True),
    ("avg", (1, 3, 12, 23), [3, 2], [2, 1], [1, 0], [1, 1], [1, 1], False),
    ("avg", (1, 2, 8, 35), [1, 5], [1, 2], [0, 2], [0, 2], [1, 1], True),
]


@pytest.mark.parametrize("kind, shape, kernel, strides, pb, pe, dil, exclude", POOLS)
def test_pooling_every_pair_of_knob_values(kind, shape, kernel, strides, pb, pe, dil, exclude):
    X = placeholder(shape, name="X")
    Y = window.pool(kind, X, kernel, strides, pb, pe, dil, exclude_pad=exclude, data_format="NCX")
    x = RNG.standard_normal(shape).astype("float32")
    if kind == "max":
        want = windows(x, kernel, strides, pb, pe, dil, -np.inf).max(axis=(-2, -1))
    else:
        total = windows(x, kernel, strides, pb, pe, dil, 0).sum(axis=(-2, -1))
        ones = np.ones((1, 1) + shape[2:])
        count = windows(ones, kernel, strides, pb, pe, dil, 0).sum(axis=(-2, -1)) if exclude else \
            np.prod(kernel)
        want = total / count
    check_configs(Y, [x], want)


DEPTHWISE = [   # shape, kernel, strides, pads, dilations
    ((1, 5, 14, 19), [3, 3], [1, 1], [1, 1], [1, 1]),
    ((1, 4, 17, 13), [5, 5], [2, 2], [2, 2], [1, 1]),
    ((1, 3, 16, 21), [3, 3], [2, 1], [1, 1], [1, 1]),
    ((1, 3, 11, 26), [3, 3], [1, 2], [1, 1], [1, 1]),
    ((1, 2, 15, 15), [7, 7], [1, 1], [3, 3], [1, 1]),
    ((1, 3, 12, 18), [3, 3], [1, 1], [2, 2], [2, 2]),
]


def hardswish(v):
    return v * np.clip(v + 3, 0, 6) / 6


@pytest.mark.parametrize("shape, kernel, strides, pads, dil", DEPTHWISE)
def test_depthwise_convolution_with_an_epilogue_every_pair_of_knob_values(shape, kernel, strides, pads, dil):
    c = shape[1]
    X, W = placeholder(shape, name="X"), placeholder((c, 1, *kernel), name="W", constant=True)
    B = placeholder((c,), name="B")
    conv = window.conv(X, W, strides, pads, pads, dil, groups=c, data_format="NCX", weights_format="OIX", bias=B)

    def epilogue(*i):
        v = conv[i]
        return v * window.emin(window.emax(v + 3.0, 0.0), 6.0) / 6.0
    Y = compute(conv.shape, epilogue, name="Y")
    x, w, b = (RNG.standard_normal(t.shape).astype("float32") for t in (X, W, B))
    taps = windows(x, kernel, strides, pads, pads, dil, 0)
    want = hardswish(np.einsum("ncyxij,cij->ncyx", taps, w[:, 0]) + b[None, :, None, None])
    check_configs(Y, [x, w, b], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape, kernel, strides, pads, dil", DEPTHWISE[:3])
def test_channels_last_depthwise_convolution_every_pair_of_knob_values(shape, kernel, strides, pads, dil):
    # MobileNet's and EfficientNet's depthwise convolutions once plan_layouts runs them
    # channels-last: the vector holds channels (2 vectors and 3 more), weights in XIO
    c = 2 * LANES + 3
    n, _, h, w_ = shape
    X, W = placeholder((n, h, w_, c), name="X"), placeholder((*kernel, 1, c), name="W", constant=True)
    B = placeholder((c,), name="B")
    conv = window.conv(X, W, strides, pads, pads, dil, groups=c, data_format="NXC", weights_format="XIO", bias=B)
    Y = compute(conv.shape, lambda *i: conv[i] * window.emin(window.emax(conv[i] + 3.0, 0.0), 6.0) / 6.0, name="Y")
    x, w, b = (RNG.standard_normal(t.shape).astype("float32") for t in (X, W, B))
    taps = windows(x.transpose(0, 3, 1, 2), kernel, strides, pads, pads, dil, 0)
    want = hardswish(np.einsum("ncyxij,ijc->ncyx", taps, w[:, :, 0]) + b[None, :, None, None])
    t = template_for(Y)
    assert t.name == "window" and t.default_config()["rows"] == 4      # 4 columns share each tap's weights
    func = lower(t.apply(t.default_config()), t.args)
    window_loops = [n for n in walk(func.body) if isinstance(n, For) and n.var.name.startswith("k")]
    assert all(any(isinstance(m, For) and m.var.name.startswith("ax2") for m in walk(loop)) for loop in window_loops)
    check_configs(Y, [x, w, b], want.transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_channels_last_pooling_every_pair_of_knob_values(kind):
    # the vector runs over the channels and the rows knob blocks the output's columns
    shape, kernel, strides, pads = (1, 11, 13, 2 * LANES + 3), [3, 3], [1, 2], [1, 1]
    X = placeholder(shape, name="X")
    Y = window.pool(kind, X, kernel, strides, pads, pads, data_format="NXC")
    x = RNG.standard_normal(shape).astype("float32")
    taps = windows(x.transpose(0, 3, 1, 2), kernel, strides, pads, pads, [1, 1], -np.inf if kind == "max" else 0)
    want = taps.max(axis=(-2, -1)) if kind == "max" else taps.sum(axis=(-2, -1)) / np.prod(kernel)
    t = template_for(Y)
    assert "rows" in t.space.knobs and t.default_config()["rows"] == 1      # blocks are the tuner's choice
    check_configs(Y, [x], want.transpose(0, 2, 3, 1))


def test_only_windows_over_every_output_axis_take_the_template():
    X = placeholder((1, 8, 10, 10), name="X")
    W = placeholder((16, 8, 3, 3), name="W", constant=True)
    conv = window.conv(X, W, [1, 1], [1, 1], [1, 1], [1, 1], data_format="NCX", weights_format="OIX")
    assert template_for(conv).name == "complex"              # sums over input channels: a GEMM
    pooled = window.pool("max", X, [1, 1], [1, 1], [0, 0], [0, 0], data_format="NCX")
    assert template_for(pooled).name == "reduction"          # a 1x1 window slides nothing
    assert template_for(window.pool("max", X, [2, 2], [2, 2], [0, 0], [0, 0], data_format="NCX")).name == "window"


def test_interior_rows_read_without_select_and_stride_two_without_gather():
    X = placeholder((1, 4, 30, 8 * LANES), name="X")                    # 4 vectors of outputs per row
    Y = window.pool("max", X, [3, 3], [2, 2], [1, 1], [1, 1], data_format="NCX")
    t = template_for(Y)
    one_row = Config({**t.default_config().values, "rows": 1})
    func = lower(t.apply(one_row), t.args)
    rows = [n for n in walk(func.body) if isinstance(n, For) and n.var.name == "ax2"]
    assert [(r.min.value, r.extent.value) for r in rows] == [(1, 14)]    # row 0 (the top pad) cut off
    vectors = [n for n in walk(rows[0]) if isinstance(n, For) and n.var.name == "ax3.outer"]
    assert [(v.min.value, v.extent.value) for v in vectors] == [(1, 3)]  # vector 0 (the left pad) too
    assert any(isinstance(n, Select) for n in walk(rows[0]))            # which keeps its select
    assert not any(isinstance(n, Select) for n in walk(vectors[0]))     # the interior has none
    text = t.build(one_row).source("llvm")
    assert "masked.gather" in text or "shufflevector" in text
    assert text.count("shufflevector") > text.count("masked.gather")


class RowCopies(Visitor):
    """The names of the loops around each unrolled loop of 4 copies (a block's rows)."""

    def __init__(self):
        super().__init__()
        self.around = []

    def visit_For(self, loop):
        if loop.kind == "unrolled" and loop.extent.value == 4:
            self.around.append({f.var.name for f in self.loops})
        super().visit_For(loop)


DIAGONALS = [   # group width, channels, shape (N, H, W), kernel, strides, pads, dilations, weights format, bound
    (4, LANES + 4, (1, 9, 11), [1, 3], [1, 1], [0, 1], [1, 1], "OIX", True),    # ResNeXt's first stage's width
    (2, 2 * LANES + 6, (1, 8, 7), [3, 3], [2, 2], [1, 1], [1, 1], "XIO", True),
    (3, 15, (2, 7, 10), [3, 2], [1, 2], [2, 1], [2, 1], "OIX", False),         # weights fed at each call
]


@pytest.mark.parametrize("width, c, shape, kernel, strides, pads, dil, wfmt, bound", DIAGONALS)
def test_narrow_channels_last_groups_run_as_diagonals_every_pair_of_knob_values(width, c, shape, kernel, strides,
                                                                                 pads, dil, wfmt, bound):
    n, h, w_ = shape
    X, B = placeholder((n, h, w_, c), name="X"), placeholder((c,), name="B")
    W = placeholder((c, width, *kernel) if wfmt == "OIX" else (*kernel, width, c), name="W", constant=bound)
    conv = window.conv(X, W, strides, pads, pads, dil, groups=c // width, data_format="NXC", weights_format=wfmt,
                       bias=B)
    assert [t.name for t in conv.op.input_tensors[0].op.input_tensors] == ["conv_channel_pad", "conv_diagonals"]
    Y = compute(conv.shape, lambda *i: window.emax(conv[i], 0.0), name="Y")
    x, w, b = (RNG.standard_normal(t.shape).astype("float32") for t in (X, W, B))
    oix = w if wfmt == "OIX" else w.transpose(3, 2, 0, 1)
    taps = windows(x.transpose(0, 3, 1, 2), kernel, strides, pads, pads, dil, 0)       # (n, c, y, x, i, j)
    taps = taps.reshape(n, c // width, width, *taps.shape[2:])
    want = np.einsum("ngcyxij,gocij->ngoyx", taps, oix.reshape(c // width, width, width, *kernel))
    want = np.maximum(want.reshape(n, c, *want.shape[3:]) + b[None, :, None, None], 0).transpose(0, 2, 3, 1)
    t = check_configs(Y, [x, w, b], want, rtol=1e-4, atol=1e-4)
    assert t.default_config()["unroll"] is False        # the taps rolled (ResNeXt's 3 x 3 x 7: 16% faster)


@pytest.mark.parametrize("size, kernel, strides, pads, by_channels", [
    ((14, 14), (7, 7), (1, 1), (3, 3), True),     # ConvNeXt's: 6 of 14 rows read the padding
    ((9, 11), (5, 5), (2, 2), (2, 2), True),      # 5 rows, 1 + 1 of them at the borders
    ((28, 28), (5, 5), (1, 1), (2, 2), False),    # 4 border rows of 28: the rows in parallel
])
def test_a_small_channels_last_depthwise_map_runs_its_channel_vectors_in_parallel(size, kernel, strides, pads,
                                                                                    by_channels):
    c = 8 * LANES + 5                              # 9 vectors, the last one partial
    X, W = placeholder((1, *size, c), name="X"), placeholder((*kernel, 1, c), name="W", constant=True)
    Y = window.conv(X, W, strides, pads, pads, [1, 1], groups=c, data_format="NXC", weights_format="XIO")
    t = template_for(Y)
    cfg = t.default_config()
    text = str(lower(t.apply(cfg), t.args))
    parallel = [line.split("(")[1].split(",")[0] for line in text.splitlines() if line.strip().startswith("parallel")]
    assert parallel == ["ax3.outer"] if by_channels else parallel and "ax3.outer" not in parallel
    x, w = RNG.standard_normal(X.shape).astype("float32"), RNG.standard_normal(W.shape).astype("float32")
    taps = windows(x.transpose(0, 3, 1, 2), kernel, strides, pads, pads, [1, 1], 0)
    want = np.einsum("ncyxij,ijc->nyxc", taps, w[:, :, 0])
    out = np.full(Y.shape, np.nan, np.float32)
    t.build(cfg)(x, w, out)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_a_block_of_rows_runs_inside_the_window_loops_with_its_interior_unguarded():
    X = placeholder((1, 4, 30, 4 * LANES), name="X")
    Y = window.pool("max", X, [3, 3], [1, 1], [1, 1], [1, 1], data_format="NCX")
    t = template_for(Y)
    assert t.default_config()["rows"] == 4
    func = lower(t.apply(Config({**t.default_config().values, "unroll": False})), t.args)
    blocks = [n for n in walk(func.body) if isinstance(n, For) and n.var.name == "ax2.outer"]
    assert [(b.min.value, b.extent.value) for b in blocks] == [(1, 6)]    # blocks 0 and 7 hold the pads
    copies = RowCopies()
    copies.visit(blocks[0].body)
    assert any({"k0", "k1"} <= around for around in copies.around)   # the 4 rows' accumulators inside both window loops
    interior = [n for n in walk(blocks[0]) if isinstance(n, For) and n.var.name == "ax3.outer"]
    assert interior and not any(isinstance(n, Select) for n in walk(interior[0]))
