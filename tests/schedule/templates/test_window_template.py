"""The window template (pooling, depthwise convolution and their epilogues): every config
against numpy on widths that do not divide the vector, with padding, strides and dilations;
which DAGs it takes; and the loop nest it makes (no select in the interior, strided reads as
shuffles, not gathers)."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from host_vectors import LANES

from schedule import lower, template_for
from tensorir import compute, placeholder
from tensorir.expr import Select
from tensorir.ops import window
from tensorir.stmt import For
from tensorir.visit import walk

RNG = np.random.default_rng(7)


def windows(x, kernel, strides, pads_begin, pads_end, dilations, fill):
    """(n, c, *out, *kernel) windows of an NCHW array, padded with ``fill``."""
    pad = [(0, 0), (0, 0)] + list(zip(pads_begin, pads_end))
    xp = np.pad(x.astype(np.float64), pad, constant_values=fill)
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    view = sliding_window_view(xp, spans, axis=(2, 3))
    view = view[:, :, ::strides[0], ::strides[1], ::dilations[0], ::dilations[1]]
    return view


def check_every_config(out, arrays, want, template="window", rtol=1e-5, atol=1e-5):
    t = template_for(out)
    assert t.name == template
    for cfg in t.space:
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
def test_pooling_every_config(kind, shape, kernel, strides, pb, pe, dil, exclude):
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
    check_every_config(Y, [x], want)


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
def test_depthwise_convolution_with_an_epilogue_every_config(shape, kernel, strides, pads, dil):
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
    check_every_config(Y, [x, w, b], want, rtol=1e-4, atol=1e-4)


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
    func = lower(t.apply(t.default_config()), t.args)
    rows = [n for n in walk(func.body) if isinstance(n, For) and n.var.name == "ax2"]
    assert [(r.min.value, r.extent.value) for r in rows] == [(1, 14)]    # row 0 (the top pad) cut off
    vectors = [n for n in walk(rows[0]) if isinstance(n, For) and n.var.name == "ax3.outer"]
    assert [(v.min.value, v.extent.value) for v in vectors] == [(1, 3)]  # vector 0 (the left pad) too
    assert any(isinstance(n, Select) for n in walk(rows[0]))            # which keeps its select
    assert not any(isinstance(n, Select) for n in walk(vectors[0]))     # the interior has none
    text = t.build(t.default_config()).source("llvm")
    assert "masked.gather" in text or "shufflevector" in text
    assert text.count("shufflevector") > text.count("masked.gather")
