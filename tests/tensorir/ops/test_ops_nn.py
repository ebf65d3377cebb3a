"""tensorir.ops.nn against numpy (loop-based references for conv and pool), built with the
template for the DAG and with the default schedule, plus the template each op gets."""
import numpy as np
import pytest

from ops_testing import check, rand, ref_conv, ref_pool
from tilefuse.schedule import template_for
from tilefuse.tensorir import placeholder
from tilefuse.tensorir import ops

# ---------------------------------------------------------------------------- MatMul


@pytest.mark.parametrize("a_shape, b_shape, ta, tb", [
    ((7, 13), (13, 37), False, False),
    ((13, 7), (37, 13), True, True),
    ((2, 1, 7, 13), (3, 13, 37), False, False),     # batch broadcast, ranks differ
    ((3, 7, 13), (37, 13), False, True),
])
def test_matmul(a_shape, b_shape, ta, tb):
    a, b = placeholder(a_shape, name="a"), placeholder(b_shape, name="b")
    av, bv = rand(a_shape), rand(b_shape)
    t = lambda v, on: np.swapaxes(v, -1, -2) if on else v  # noqa: E731
    y = ops.matmul(a, b, transpose_a=ta, transpose_b=tb)
    assert y.op.tag == "matmul"
    check(y, {a: av, b: bv}, np.matmul(t(av, ta), t(bv, tb)), template="complex", rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("a_shape, b_shape, ta, tb", [((13,), (2, 7, 13), True, True), ((13, 7), (13,), True, True),
                                                 ((13,), (13,), True, False)])
def test_matmul_with_1d_operands_drops_the_unit_axis(a_shape, b_shape, ta, tb):
    a, b = placeholder(a_shape, name="a"), placeholder(b_shape, name="b")
    av, bv = rand(a_shape), rand(b_shape)
    y = ops.matmul(a, b, transpose_a=ta, transpose_b=tb)     # transposes do nothing to a 1-D operand
    t = lambda v, on: np.swapaxes(v, -1, -2) if on and v.ndim > 1 else v  # noqa: E731
    expected = np.matmul(t(av, ta), t(bv, tb))
    assert y.shape == expected.shape
    check(y, {a: av, b: bv}, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bias_shape", [(37,), (7, 1)])
def test_matmul_bias_and_epilogue_stay_complex(bias_shape):
    a, b, c = placeholder((7, 13), "float64", name="a"), placeholder((13, 37), "float64", name="b"), \
        placeholder(bias_shape, "float64", name="bias")
    av, bv, cv = rand((7, 13), "float64"), rand((13, 37), "float64"), rand(bias_shape, "float64")
    y = ops.relu(ops.matmul(a, b, bias=c))
    check(y, {a: av, b: bv, c: cv}, np.maximum(av @ bv + cv, 0), template="complex", rtol=1e-10, atol=1e-10)


def test_matmul_rejects_mismatched_k_and_bias():
    with pytest.raises(ValueError, match="MatMul.*K=13.*K=12"):
        ops.matmul(placeholder((7, 13)), placeholder((12, 5)))
    with pytest.raises(ValueError, match="MatMul.*bias"):
        ops.matmul(placeholder((7, 13)), placeholder((13, 5)), bias=placeholder((7,)))
    with pytest.raises(ValueError, match="MatMul.*broadcast"):
        ops.matmul(placeholder((2, 7, 13)), placeholder((3, 13, 5)))

# ---------------------------------------------------------------------------- Convolution


def _conv_case(x_shape, w_shape, strides, pads_begin, pads_end, dilations, groups, data_format, weights_format,
               bias=False, dtype="float32"):
    x, w = placeholder(x_shape, dtype, name="x"), placeholder(w_shape, dtype, name="w")
    feeds = {x: rand(x_shape, dtype), w: rand(w_shape, dtype)}
    oc = w_shape[0] if weights_format == "OIX" else w_shape[-1]
    b = placeholder((oc,), dtype, name="bias") if bias else None
    if bias:
        feeds[b] = rand(oc, dtype)
    y = ops.conv(x, w, strides, pads_begin, pads_end, dilations, groups, data_format, weights_format, bias=b)
    return x, w, b, y, feeds


CONVS = [
    # x, w, strides, pads_begin, pads_end, dilations, groups, data_format, weights_format, bias
    ((2, 5, 11, 13), (7, 5, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1], 1, "NCX", "OIX", False),
    ((2, 11, 13, 5), (3, 3, 5, 7), [2, 1], [1, 0], [0, 2], [1, 2], 1, "NXC", "XIO", True),   # asymmetric
    ((2, 11, 13, 6), (3, 3, 2, 9), [1, 2], [2, 1], [1, 1], [2, 1], 3, "NXC", "XIO", True),   # groups
    ((2, 6, 13), (9, 2, 3), [2], [1], [2], [1], 3, "NCX", "OIX", True),                       # 1-D, groups
    ((1, 4, 5, 6, 7), (3, 4, 2, 2, 3), [1, 2, 1], [0, 1, 1], [1, 0, 0], [1, 1, 2], 1, "NCX", "OIX", False),  # 3-D
    ((2, 9, 9, 4), (3, 3, 1, 4), [1, 1], [1, 1], [1, 1], [1, 1], 4, "NXC", "XIO", False),     # depthwise
    ((1, 11, 9, 20), (5, 5, 1, 20), [2, 2], [2, 2], [2, 1], [1, 1], 20, "NXC", "XIO", True),  # depthwise, stride 2
    ((1, 7, 8, 5), (3, 3, 1, 10), [1, 1], [1, 1], [1, 1], [1, 1], 5, "NXC", "XIO", True),    # channel multiplier 2
    ((2, 9, 10, 3), (5, 3, 3, 3), [2, 3], [0, 0], [0, 0], [1, 1], 1, "NXC", "OIX", False),    # no pad stage
]


@pytest.mark.parametrize("case", CONVS, ids=[f"conv{i}" for i in range(len(CONVS))])
def test_conv_against_loops(case):
    *args, bias = case
    x, w, b, y, feeds = _conv_case(*args, bias=bias)
    strides, pads_begin, pads_end, dilations, groups, data_format, weights_format = args[2:]
    expected = ref_conv(feeds[x], feeds[w], strides, pads_begin, pads_end, dilations, groups, data_format,
                        weights_format, feeds[b] if bias else None)
    assert y.op.tag == "conv"
    oc = w.shape[0] if weights_format == "OIX" else w.shape[-1]
    depthwise_last = data_format == "NXC" and groups == oc > 1     # a window, its channels vectorized
    template = "window" if depthwise_last else "complex"
    assert template_for(y).name == template
    check(y, feeds, expected, template=template, rtol=1e-4, atol=1e-4)


def test_conv_pad_is_its_own_stage_and_the_mac_is_an_outer_product():
    from tilefuse.tensorir.expr import Mul, Reduce
    x, w, _, y, _ = _conv_case((1, 3, 7, 7), (4, 3, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1], 1, "NCX", "OIX")
    pad, weights = y.op.input_tensors
    assert pad.name == "conv_pad" and weights is w and pad.op.input_tensors == [x]
    assert isinstance(y.op.body, Reduce) and y.op.body.combiner == "sum" and isinstance(y.op.body.source, Mul)
    assert [a.name for a in y.op.reduce_axis] == ["ci", "k0", "k1"]
    _, _, _, no_pad, _ = _conv_case((1, 3, 7, 7), (4, 3, 3, 3), [1, 1], [0, 0], [0, 0], [1, 1], 1, "NCX", "OIX")
    assert no_pad.op.input_tensors[0].name == "x"


def test_conv_float64_with_epilogue():
    x, w, b, y, feeds = _conv_case((1, 7, 7, 3), (3, 3, 3, 13), [1, 1], [1, 1], [1, 1], [1, 1], 1, "NXC", "XIO",
                                   bias=True, dtype="float64")
    z = ops.relu(y)
    expected = np.maximum(ref_conv(feeds[x], feeds[w], [1, 1], [1, 1], [1, 1], [1, 1], 1, "NXC", "XIO", feeds[b]), 0)
    check(z, feeds, expected, template="complex", rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kwargs, match", [
    ({"strides": [-1, 1]}, "Convolution.*strides"),
    ({"strides": [1]}, "Convolution.*strides"),
    ({"dilations": [0, 1]}, "Convolution.*dilations"),
    ({"pads_begin": [-1, 0]}, "Convolution.*pads_begin"),
    ({"groups": 2}, "Convolution.*groups"),
    ({"groups": 0}, "Convolution.*groups"),
    ({"data_format": "NHWC"}, "Convolution.*data_format"),
    ({"weights_format": "OIHW"}, "Convolution.*weights_format"),
])
def test_conv_bad_attributes(kwargs, match):
    attrs = dict(strides=[1, 1], pads_begin=[0, 0], pads_end=[0, 0], dilations=[1, 1], groups=1,
                 data_format="NCX", weights_format="OIX")
    attrs.update(kwargs)
    with pytest.raises(ValueError, match=match):
        ops.conv(placeholder((1, 3, 7, 7)), placeholder((4, 3, 3, 3)), **attrs)


def test_conv_bad_shapes():
    attrs = dict(strides=[1, 1], pads_begin=[0, 0], pads_end=[0, 0], dilations=[1, 1], data_format="NCX",
                 weights_format="OIX")
    with pytest.raises(ValueError, match="Convolution.*input channels"):
        ops.conv(placeholder((1, 3, 7, 7)), placeholder((4, 2, 3, 3)), **attrs)
    with pytest.raises(ValueError, match="Convolution.*rank"):
        ops.conv(placeholder((1, 3, 7, 7)), placeholder((4, 3, 3)), **attrs)
    with pytest.raises(ValueError, match="Convolution.*spatial"):
        ops.conv(placeholder((3, 7)), placeholder((4, 3)), **attrs)
    with pytest.raises(ValueError, match="Convolution.*larger than the padded input"):
        ops.conv(placeholder((1, 3, 2, 2)), placeholder((4, 3, 3, 3)), **attrs)
    with pytest.raises(ValueError, match="Convolution.*bias"):
        ops.conv(placeholder((1, 3, 7, 7)), placeholder((4, 3, 3, 3)), bias=placeholder((3,)), **attrs)

# ---------------------------------------------------------------------------- pooling


POOLS = [
    # kind, x, kernel, strides, pads_begin, pads_end, dilations, exclude_pad, rounding_type, data_format
    ("max", (2, 3, 11, 13), [3, 3], [2, 2], [1, 1], [1, 1], None, False, "floor", "NCX"),
    ("max", (2, 11, 13, 3), [3, 2], [2, 3], [1, 0], [0, 1], [2, 1], False, "ceil", "NXC"),
    ("avg", (2, 3, 11, 13), [3, 3], [2, 2], [1, 1], [1, 1], None, True, "ceil", "NCX"),
    ("avg", (2, 3, 11, 13), [3, 3], [2, 2], [1, 1], [1, 1], None, False, "ceil", "NCX"),   # ceil: excludes pads
    ("avg", (2, 3, 11, 13), [3, 3], [2, 2], [2, 1], [1, 2], None, False, "floor", "NCX"),
    ("avg", (2, 11, 13, 3), [2, 3], [3, 2], [0, 1], [1, 2], [2, 1], False, "floor", "NXC"),
    ("avg", (2, 5, 13), [1], [3], [0], [0], None, True, "ceil", "NCX"),   # a window past the end: count 0
    ("avg", (1, 5, 6, 7, 2), [2, 3, 2], [2, 2, 3], [1, 0, 1], [0, 1, 0], None, True, "floor", "NXC"),  # 3-D
    ("max", (1, 2, 5, 6, 7), [2, 2, 2], [1, 2, 3], [0, 0, 0], [0, 0, 0], None, False, "ceil", "NCX"),
]


@pytest.mark.parametrize("case", POOLS, ids=[f"{p[0]}pool{i}" for i, p in enumerate(POOLS)])
def test_pool_against_loops(case):
    kind, shape, kernel, strides, pads_begin, pads_end, dilations, exclude_pad, rounding_type, data_format = case
    x = placeholder(shape, name="x")
    xv = rand(shape)
    y = ops.pool(kind, x, kernel, strides, pads_begin, pads_end, dilations, exclude_pad, rounding_type,
                 data_format)
    expected = ref_pool(kind, xv, kernel, strides, pads_begin, pads_end, dilations or [1] * len(kernel),
                        exclude_pad, rounding_type, data_format)
    assert y.op.tag == f"{kind}_pool"
    sliding = any(k > 1 for k in kernel)       # a window of one tap slides nothing: a plain reduction
    check(y, {x: xv}, expected, template="window" if sliding else "reduction", rtol=1e-5, atol=1e-5)


def test_pool_windows_of_padding_only():
    x = placeholder((1, 2, 5), name="x")
    xv = rand((1, 2, 5))
    y = ops.pool("max", x, [1], [3], [2], [0], data_format="NCX")      # windows at -2 (pad), 1, 4
    expected = np.stack([np.full((1, 2), np.finfo(np.float32).min), xv[:, :, 1], xv[:, :, 4]], axis=-1)
    check(y, {x: xv}, expected, template="reduction", rtol=0, atol=0)
    z = ops.pool("avg", x, [1], [3], [2], [0], exclude_pad=True, data_format="NCX")
    check(z, {x: xv}, np.stack([np.zeros((1, 2)), xv[:, :, 1], xv[:, :, 4]], axis=-1), rtol=0, atol=0)


def test_max_pool_and_avg_pool_wrappers():
    x = placeholder((1, 10, 11, 2), name="x")
    xv = rand((1, 10, 11, 2))
    y = ops.max_pool(x, [3, 3], [2, 2], [0, 1], [1, 1])
    assert y.shape == (1, 5, 6, 2)            # ceil(10 / 2), ceil(11 / 2)
    check(y, {x: xv}, ref_pool("max", xv, [3, 3], [2, 2], [0, 1], [1, 1], [1, 1], False, "floor", "NXC"))
    z = ops.avg_pool(x, [3, 3], [2, 2], [1, 1], [0, 1], exclude_pad=True)
    check(z, {x: xv}, ref_pool("avg", xv, [3, 3], [2, 2], [1, 1], [0, 1], [1, 1], True, "floor", "NXC"))


def test_pool_bad_attributes():
    x = placeholder((1, 3, 7, 7))
    with pytest.raises(ValueError, match="MaxPool.*strides"):
        ops.pool("max", x, [2, 2], [0, 2], [0, 0], [0, 0], data_format="NCX")
    with pytest.raises(ValueError, match="AvgPool.*kernel"):
        ops.pool("avg", x, [2], [1, 1], [0, 0], [0, 0], data_format="NCX")
    with pytest.raises(ValueError, match="AvgPool.*rounding_type"):
        ops.pool("avg", x, [2, 2], [1, 1], [0, 0], [0, 0], rounding_type="round", data_format="NCX")
    with pytest.raises(ValueError, match="AvgPool.*exclude_pad"):
        ops.pool("avg", x, [2, 2], [1, 1], [0, 0], [0, 0], exclude_pad="yes", data_format="NCX")
    with pytest.raises(ValueError, match="Pool.*kind"):
        ops.pool("min", x, [2, 2], [1, 1], [0, 0], [0, 0])

# ---------------------------------------------------------------------------- normalization


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_batch_norm_inference(data_format):
    shape = (2, 5, 7, 13) if data_format == "NCX" else (2, 7, 13, 5)
    x = placeholder(shape, name="x")
    params = [placeholder((5,), name=n) for n in ("gamma", "beta", "mean", "variance")]
    xv = rand(shape)
    gv, bv, mv, vv = rand(5), rand(5), rand(5), rand(5, low=0.5, high=2.0)
    view = (1, 5, 1, 1) if data_format == "NCX" else (5,)
    r = lambda v: v.reshape(view)  # noqa: E731
    expected = r(gv) * (xv - r(mv)) / np.sqrt(r(vv) + 1e-3) + r(bv)
    y = ops.batch_norm_inference(x, *params, epsilon=1e-3, data_format=data_format)
    feeds = dict(zip([x, *params], [xv, gv, bv, mv, vv]))
    check(y, feeds, expected, template="injective", rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="BatchNormInference.*gamma"):
        ops.batch_norm_inference(x, placeholder((4,)), *params[1:], epsilon=1e-3, data_format=data_format)


@pytest.mark.parametrize("shape, begin_norm_axis, use_affine", [((7, 37), -1, True), ((3, 5, 13), 1, True),
                                                                 ((3, 5, 13), -3, False)])
def test_layer_norm(shape, begin_norm_axis, use_affine):
    x = placeholder(shape, name="x")
    axis = begin_norm_axis % len(shape)
    norm = shape[axis:]
    g, b = placeholder(norm, name="gamma"), placeholder(norm, name="beta")
    xv, gv, bv = rand(shape), rand(norm), rand(norm)
    dst, mean, var = ops.layer_norm(x, g, b, begin_norm_axis=begin_norm_axis, epsilon=1e-5, use_affine=use_affine)
    a = xv.astype(np.float64)
    axes = tuple(range(axis, len(shape)))
    m, v = a.mean(axes, keepdims=True), a.var(axes, keepdims=True)
    expected = (a - m) / np.sqrt(v + 1e-5)
    feeds = {x: xv}
    if use_affine:
        expected = expected * gv + bv
        feeds.update({g: gv, b: bv})
    assert dst.op.tag == "layer_norm" and mean.shape == shape[:axis]
    check(dst, feeds, expected, template="reduction", rtol=1e-4, atol=1e-4)
    check(mean, {x: xv}, m.reshape(mean.shape), template="reduction")
    check(var, {x: xv}, v.reshape(var.shape), template="reduction", rtol=1e-4, atol=1e-5)
    only = ops.layer_norm(x, g, b, begin_norm_axis=begin_norm_axis, keep_stats=False)
    assert only.shape == shape


def test_layer_norm_takes_gamma_and_beta_of_any_shape_with_the_right_size():
    x, g, b = placeholder((3, 5, 7), name="x"), placeholder((35,), name="gamma"), placeholder((35,), name="beta")
    xv, gv, bv = rand((3, 5, 7)), rand(35), rand(35)
    a = xv.astype(np.float64)
    m, v = a.mean((1, 2), keepdims=True), a.var((1, 2), keepdims=True)
    expected = (a - m) / np.sqrt(v + 1e-5) * gv.reshape(5, 7) + bv.reshape(5, 7)
    dst = ops.layer_norm(x, g, b, begin_norm_axis=1, keep_stats=False)
    check(dst, {x: xv, g: gv, b: bv}, expected, template="reduction", rtol=1e-4, atol=1e-4)


def test_layer_norm_bad_attributes():
    x = placeholder((7, 37))
    with pytest.raises(ValueError, match="LayerNorm.*begin_norm_axis"):
        ops.layer_norm(x, placeholder((37,)), placeholder((37,)), begin_norm_axis=2)
    with pytest.raises(ValueError, match="LayerNorm.*gamma"):
        ops.layer_norm(x, placeholder((36,)), placeholder((37,)))
    with pytest.raises(ValueError, match="LayerNorm.*gamma"):
        ops.layer_norm(placeholder((3, 5, 7)), placeholder((7,)), placeholder((35,)), begin_norm_axis=1)
    with pytest.raises(ValueError, match="LayerNorm.*beta"):
        ops.layer_norm(x, placeholder((37,)))

@pytest.mark.parametrize("data_format, use_affine", [("NCX", True), ("NXC", True), ("NXC", False)])
def test_group_norm(data_format, use_affine):
    shape = (2, 6, 7, 5) if data_format == "NCX" else (2, 7, 5, 6)
    x, g, b = placeholder(shape, name="x"), placeholder((6,), name="gamma"), placeholder((6,), name="beta")
    xv, gv, bv = rand(shape), rand(6), rand(6)
    dst, mean, var = ops.group_norm(x, g, b, groups=3, epsilon=1e-4, use_affine=use_affine,
                                    data_format=data_format)
    a = xv.astype(np.float64) if data_format == "NCX" else np.moveaxis(xv, -1, 1).astype(np.float64)
    grouped = a.reshape(2, 3, -1)
    m, v = grouped.mean(-1), grouped.var(-1)
    y = ((grouped - m[..., None]) / np.sqrt(v[..., None] + 1e-4)).reshape(a.shape)
    feeds = {x: xv}
    if use_affine:
        y = y * gv.reshape(1, 6, 1, 1) + bv.reshape(1, 6, 1, 1)
        feeds.update({g: gv, b: bv})
    expected = y if data_format == "NCX" else np.moveaxis(y, 1, -1)
    check(dst, feeds, expected, rtol=1e-4, atol=1e-4)
    check(mean, {x: xv}, m, template="reduction")
    check(var, {x: xv}, v, template="reduction", rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="GroupNorm.*groups"):
        ops.group_norm(x, g, b, groups=4, data_format=data_format)


def test_rms_norm():
    x, g = placeholder((3, 5, 13), name="x"), placeholder((13,), name="gamma")
    xv, gv = rand((3, 5, 13)), rand(13)
    a = xv.astype(np.float64)
    rrms_ref = 1 / np.sqrt((a * a).mean(axis=(1, 2)) + 1e-5)
    dst, rrms = ops.rms_norm(x, g, begin_norm_axis=1)
    check(dst, {x: xv, g: gv}, a * rrms_ref[:, None, None] * gv, template="reduction", rtol=1e-4, atol=1e-5)
    check(rrms, {x: xv}, rrms_ref, template="reduction", rtol=1e-4, atol=1e-5)
    plain, _ = ops.rms_norm(x)
    r = 1 / np.sqrt((a * a).mean(axis=-1, keepdims=True) + 1e-5)
    check(plain, {x: xv}, a * r, template="reduction", rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="RMSNorm.*gamma"):
        ops.rms_norm(x, placeholder((5,)))

# ---------------------------------------------------------------------------- softmax


def _softmax_ref(a, axis):
    a = a.astype(np.float64)
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape, axis, template", [((7, 37), -1, "reduction"), ((3, 5, 13), 2, "reduction"),
                                                   ((3, 7, 13), 1, "reduction"), ((37,), 0, "reduction")])
def test_softmax(shape, axis, template):
    x = placeholder(shape, name="x")
    xv = rand(shape) * 5
    y = ops.softmax(x, axis=axis)
    stages = [t.name for t in y.op.input_tensors]
    assert stages == ["softmax_exp", "softmax_sum"]
    check(y, {x: xv}, _softmax_ref(xv, axis), template=template, rtol=1e-5, atol=1e-6)


def test_softmax_flushes_what_would_be_denormal_to_zero():
    # an attention mask's -100: exp(-100) is denormal in float32, and a product reading
    # denormals runs 100x slower; they are 0 instead, the rest as exact as before
    x = placeholder((5, 37), name="x")
    xv = rand((5, 37)) * 3
    xv[:, 20:] -= 100.0
    xv[4, 30] = -np.inf
    y = ops.softmax(x, axis=-1)
    expected = _softmax_ref(xv, -1)
    expected[expected < np.finfo(np.float32).tiny] = 0.0
    assert (expected[:, 20:] == 0).all() and (expected[:, :20] > 0).all()
    check(y, {x: xv}, expected, template="reduction", rtol=1e-5, atol=0)     # the zeros exactly


def test_softmax_and_log_softmax_of_a_row_with_a_nan_are_nan_in_that_row_only():
    x = placeholder((4, 21), name="x")
    xv = rand((4, 21)) * 3
    xv[1, 5] = np.nan
    xv[2, 0] = np.nan                                  # the first element: the max must not lose it
    with np.errstate(invalid="ignore"):
        expected = _softmax_ref(xv, -1)
        logs = np.log(expected)
    assert np.isnan(expected[1]).all() and np.isnan(expected[2]).all()
    check(ops.softmax(x, axis=-1), {x: xv}, expected, template="reduction", rtol=1e-5, atol=1e-6)
    check(ops.log_softmax(x), {x: xv}, logs, template="reduction", rtol=1e-5, atol=1e-5)


def test_max_skip_nan_skips_nan_and_gives_the_lowest_value_for_a_row_of_nan():
    from tilefuse.tensorir import compute, reduce_axis
    from tilefuse.tensorir.reduce import max_skip_nan
    x = placeholder((3, 9), name="x")
    r = reduce_axis((0, 9), name="r")
    m = compute((3,), lambda i: max_skip_nan(x[i, r], axis=r), name="m")
    xv = rand((3, 9))
    xv[0, 4] = np.nan
    xv[1, :] = np.nan
    expected = np.array([np.nanmax(xv[0]), -np.inf, xv[2].max()], np.float32)
    check(m, {x: xv}, expected, rtol=0, atol=0)


def test_softmax_inf_as_zero_and_log_softmax():
    x = placeholder((3, 13), name="x")
    xv = rand((3, 13))
    xv[1] = -np.inf
    with np.errstate(invalid="ignore"):
        expected = _softmax_ref(xv, -1)
    assert np.isnan(expected[1]).all()
    expected[1] = 0
    check(ops.softmax(x, axis=-1, mode="inf_as_zero"), {x: xv}, expected, template="reduction", rtol=1e-5,
          atol=1e-6)
    y = placeholder((7, 37), name="y")
    yv = rand((7, 37)) * 5
    check(ops.log_softmax(y), {y: yv}, np.log(_softmax_ref(yv, -1)), template="reduction", rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="SoftMax.*axis"):
        ops.softmax(y, axis=2)
    with pytest.raises(ValueError, match="SoftMax.*mode"):
        ops.softmax(y, axis=1, mode="zero")

# ---------------------------------------------------------------------------- Reduce*


REFS = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
        "l1": lambda a, axis, keepdims: np.abs(a).sum(axis=axis, keepdims=keepdims),
        "l2": lambda a, axis, keepdims: np.sqrt((a * a).sum(axis=axis, keepdims=keepdims))}


@pytest.mark.parametrize("kind, axes, keep_dims", [
    ("sum", [1], False), ("mean", [0, 2], True), ("max", [-1], False), ("min", [0], True),
    ("prod", [2], False), ("l1", [1, 2], False), ("l2", [-2], True), ("mean", [0, 1, 2], False),
])
def test_reduce(kind, axes, keep_dims):
    shape = (7, 13, 5)
    x = placeholder(shape, name="x")
    xv = rand(shape, low=0.5, high=1.5) if kind == "prod" else rand(shape)
    y = ops.reduce(kind, x, axes, keep_dims)
    expected = REFS[kind](xv.astype(np.float64), axis=tuple(axes), keepdims=keep_dims)
    assert y.op.tag == f"reduce_{kind}" and y.shape == np.shape(expected)
    check(y, {x: xv}, expected, template="reduction", rtol=1e-5, atol=1e-5)


def test_reduce_empty_axes_is_elementwise_and_bad_axes_raise():
    x = placeholder((7, 13), name="x")
    xv = rand((7, 13))
    check(ops.reduce("l2", x, []), {x: xv}, xv, template="injective")     # oneDNN: an identity
    with pytest.raises(ValueError, match="ReduceSum.*axes"):
        ops.reduce("sum", x, [2])
    with pytest.raises(ValueError, match="ReduceMax.*axes"):
        ops.reduce("max", x, [1, -1])
    with pytest.raises(ValueError, match="Reduce.*kind"):
        ops.reduce("median", x, [1])
