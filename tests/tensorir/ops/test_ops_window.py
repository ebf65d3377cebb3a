"""tensorir.ops.window additions: ConvTranspose against a scatter loop reference, and pooling
with negative (cropping) pads, built with the template for the DAG and the default schedule."""
import numpy as np
import pytest

from ops_testing import check, rand, ref_conv_transpose, ref_pool
from tilefuse.tensorir import placeholder
from tilefuse.tensorir import ops

CONVT = [
    # x, w, strides, pads_begin, pads_end, dilations, groups, data_format, weights_format, output_padding, bias
    ((2, 5, 7, 6), (5, 3, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1], 1, "NCX", "IOX", [0, 0], False),
    ((2, 7, 6, 4), (3, 2, 3, 4), [2, 3], [1, 0], [0, 2], [1, 1], 1, "NXC", "XOI", [1, 2], True),   # strides
    ((1, 6, 7, 5), (6, 2, 2, 3), [2, 1], [0, 1], [1, 0], [2, 1], 3, "NCX", "IOX", [1, 0], True),   # groups, dil.
    ((2, 4, 13), (4, 5, 3), [3], [2], [1], [1], 1, "NCX", "IOX", [2], False),                      # 1-D
    ((1, 3, 4, 5, 4), (2, 2, 3, 4, 2), [1, 2, 1], [0, 1, 0], [1, 0, 0], [1, 1, 2], 1, "NXC", "XIO", [0, 1, 0], False),
    ((2, 4, 5, 5), (3, 4, 2, 2), [2, 2], [0, 0], [0, 0], [1, 1], 2, "NCX", "OIX", [0, 0], False),   # OIX, groups
]


@pytest.mark.parametrize("case", CONVT)
def test_conv_transpose(case):
    xs, ws, strides, pb, pe, dil, groups, fmt, wfmt, opad, with_bias = case
    x, w = placeholder(xs, name="x"), placeholder(ws, name="w")
    xv, wv = rand(xs), rand(ws)
    feeds = {x: xv, w: wv}
    b = None
    y = ops.conv_transpose(x, w, strides, pb, pe, dil, groups, fmt, wfmt, opad)
    oc = y.shape[1] if fmt == "NCX" else y.shape[-1]
    if with_bias:
        b = placeholder((oc,), name="b")
        feeds[b] = rand(oc)
        y = ops.conv_transpose(x, w, strides, pb, pe, dil, groups, fmt, wfmt, opad, bias=b)
    want = ref_conv_transpose(xv, wv, strides, pb, pe, dil, groups, fmt, wfmt, opad, feeds[b] if b else None)
    assert y.op.tag == "conv_transpose" and y.shape == want.shape
    check(y, feeds, want, template="complex", rtol=1e-4, atol=1e-4)


def test_conv_transpose_with_same_pads_keeps_input_times_stride():
    x, w = placeholder((1, 9, 9, 2), name="x"), placeholder((3, 3, 4, 2), name="w")
    for pads in (([0, 0], [1, 1]), ([1, 1], [0, 0])):        # SAME_UPPER's and SAME_LOWER's
        y = ops.conv_transpose(x, w, [2, 2], *pads, [1, 1])
        assert y.shape == (1, 18, 18, 4)
    xv, wv = rand((1, 9, 9, 2)), rand((3, 3, 4, 2))
    y = ops.conv_transpose(x, w, [2, 2], [1, 1], [0, 0], [1, 1])
    want = ref_conv_transpose(xv, wv, [2, 2], [1, 1], [0, 0], [1, 1], 1, "NXC", "XOI", [0, 0])
    check(y, {x: xv, w: wv}, want, rtol=1e-4, atol=1e-4)


def test_conv_transpose_rejects_bad_attributes():
    x, w = placeholder((1, 4, 5, 5)), placeholder((4, 3, 3, 3))
    args = ([1, 1], [0, 0], [0, 0], [1, 1])
    with pytest.raises(ValueError, match="ConvTranspose.*weights_format"):
        ops.conv_transpose(x, w, *args, data_format="NCX", weights_format="OXI")
    with pytest.raises(ValueError, match="ConvTranspose.*input channels"):
        ops.conv_transpose(x, placeholder((3, 3, 3, 3)), *args, data_format="NCX", weights_format="IOX")
    with pytest.raises(ValueError, match="ConvTranspose.*groups=3"):
        ops.conv_transpose(x, w, *args, groups=3, data_format="NCX", weights_format="IOX")
    with pytest.raises(ValueError, match="ConvTranspose.*not positive"):
        ops.conv_transpose(x, w, [1, 1], [4, 4], [4, 4], [1, 1], data_format="NCX", weights_format="IOX")
    with pytest.raises(ValueError, match="ConvTranspose.*output_padding"):
        ops.conv_transpose(x, w, *args, data_format="NCX", weights_format="IOX", output_padding=[1])
    with pytest.raises(ValueError, match="ConvTranspose.*bias"):
        ops.conv_transpose(x, w, *args, data_format="NCX", weights_format="IOX", bias=placeholder((4,)))


@pytest.mark.parametrize("kind, exclude_pad", [("avg", True), ("avg", False), ("max", False)])
def test_pool_with_negative_pads_crops(kind, exclude_pad):
    x = placeholder((2, 3, 13, 11), name="x")
    xv = rand((2, 3, 13, 11))
    y = ops.pool(kind, x, kernel=[2, 3], strides=[2, 2], pads_begin=[1, -1], pads_end=[-1, 1],
                 exclude_pad=exclude_pad, data_format="NCX")
    cropped = xv[:, :, :-1, 1:]                    # pads_end -1 on H, pads_begin -1 on W
    want = ref_pool(kind, cropped, [2, 3], [2, 2], [1, 0], [0, 1], [1, 1], exclude_pad, "floor", "NCX")
    assert y.shape == want.shape
    check(y, {x: xv}, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="crop away all"):
        ops.pool(kind, x, kernel=[1, 1], strides=[1, 1], pads_begin=[-7, 0], pads_end=[-6, 0], data_format="NCX")


def test_conv_still_rejects_negative_pads():
    with pytest.raises(ValueError, match="Convolution.*pads_end"):
        ops.conv(placeholder((1, 3, 5, 5)), placeholder((2, 3, 3, 3)), [1, 1], [0, 0], [0, -1], [1, 1],
                 data_format="NCX", weights_format="OIX")


def test_softmax_stats_is_the_log_sum_exp():
    x = placeholder((7, 5, 13), name="x")
    xv = rand((7, 5, 13))
    dst, stats = ops.softmax(x, axis=1, stats=True)
    assert stats.shape == (7, 1, 13)
    m = xv.astype(np.float64).max(axis=1, keepdims=True)
    want = m + np.log(np.exp(xv - m).sum(axis=1, keepdims=True))
    check(stats, {x: xv}, want, rtol=1e-5, atol=1e-5)


def test_strided_conv_transpose_multiplies_no_spread_zeros():
    x, w = placeholder((1, 6, 9, 7), name="x"), placeholder((6, 16, 4, 3), name="w", constant=True)
    y = ops.conv_transpose(x, w, [2, 3], [1, 0], [1, 2], [1, 1], 1, "NCX", "IOX", [1, 0])
    names = {t.op.name for t in y.op.input_tensors}
    assert "conv_transpose_weights" in names and "conv_transpose_spread" not in names
    regrouped = next(t for t in y.op.input_tensors if t.op.name == "conv_transpose_weights")
    assert regrouped.shape == (2, 3, 2, 1, 6, 16)           # phases, taps per phase, C, O
    from tilefuse.schedule import template_for
    t = template_for(y)
    assert t.name == "complex" and t.default_config()["layout"] == "channels"   # regrouped weights are constant
    xv, wv = rand((1, 6, 9, 7)), rand((6, 16, 4, 3))
    want = ref_conv_transpose(xv, wv, [2, 3], [1, 0], [1, 2], [1, 1], 1, "NCX", "IOX", [1, 0])
    check(y, {x: xv, w: wv}, want, rtol=1e-4, atol=1e-4)
