"""Shape inference, kind by kind, against shapes numpy computes on real arrays."""
import math

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from tilefuse.graph_api import Graph, GraphError, LayoutType, LogicalTensor, Op, OpKind, infer_shapes, with_inferred_shapes

UNKNOWN = None


def lt(i, shape, dtype="f32", **kw):
    return LogicalTensor(i, dtype, shape, **kw)


def infer(kind, in_shapes, attrs=None, n_out=1, dtypes=None, out_dtypes=None, out_shapes=None):
    """Output shapes of one op whose inputs have ``in_shapes`` (outputs start unknown)."""
    dtypes = dtypes or ["f32"] * len(in_shapes)
    out_dtypes = out_dtypes or ["f32"] * n_out
    out_shapes = out_shapes or [UNKNOWN] * n_out
    ins = [lt(i, s, d) for i, (s, d) in enumerate(zip(in_shapes, dtypes))]
    outs = [lt(100 + i, s, d, layout_type="any") for i, (s, d) in enumerate(zip(out_shapes, out_dtypes))]
    g = Graph()
    g.add_op(Op(7, kind, ins, outs, attrs or {}))
    tensors = infer_shapes(g)
    return [tensors[t.id].shape for t in outs]


def one(*args, **kw):
    return infer(*args, **kw)[0]


@pytest.mark.parametrize("kind, attrs", [
    (OpKind.ReLU, {}), (OpKind.Tanh, {}), (OpKind.Clamp, {"min": 0.0, "max": 1.0}), (OpKind.GELU, {}),
    (OpKind.Elu, {"alpha": 1.0}), (OpKind.Reorder, {}), (OpKind.LogSoftmax, {"axis": -1}),
    (OpKind.SoftPlus, {}), (OpKind.Pow, {"beta": 2.0}), (OpKind.HardSwish, {})])
def test_unary_elementwise_keeps_the_shape(kind, attrs):
    x = np.zeros((2, 3, 5))
    assert one(kind, [x.shape], attrs) == np.tanh(x).shape


@pytest.mark.parametrize("a, b", [((8, 1, 3), (5, 1)), ((2, 3), ()), ((4,), (3, 1)), ((1, 16, 32, 33), (1, 1, 32, 33))])
def test_binary_numpy_broadcasting(a, b):
    assert one(OpKind.Add, [a, b]) == (np.zeros(a) + np.zeros(b)).shape


def test_binary_without_broadcasting_needs_equal_shapes():
    assert one(OpKind.Multiply, [(2, 3), (2, 3)], {"auto_broadcast": "none"}) == (2, 3)
    with pytest.raises(GraphError, match=r"op 7 \(Multiply\): auto_broadcast=none needs equal shapes"):
        one(OpKind.Multiply, [(2, 3), (1, 3)], {"auto_broadcast": "none"})


def test_binary_shapes_that_do_not_broadcast():
    with pytest.raises(GraphError, match=r"op 7 \(Subtract\): shapes \[2, 3\] and \[1, 4\] do not broadcast"):
        one(OpKind.Subtract, [(2, 3), (4,)])


def test_comparison_output_shape():
    shape = one(OpKind.GreaterEqual, [(3, 1), (1, 4)], out_dtypes=["boolean"])
    assert shape == (np.zeros((3, 1)) >= np.zeros((1, 4))).shape


@pytest.mark.parametrize("a, b, ta, tb", [
    ((2, 3), (3, 4), False, False), ((3, 2), (3, 4), True, False), ((2, 3), (4, 3), False, True),
    ((5, 1, 2, 3), (4, 3, 6), False, False), ((7, 2, 3), (3, 4), False, False), ((3,), (2, 3, 4), False, False),
    ((2, 3, 4), (4,), False, False), ((4,), (4,), False, False), ((2, 1, 4, 3), (5, 6, 4), True, True)])
def test_matmul_with_transposes_and_batch_broadcasting(a, b, ta, tb):
    x, y = np.zeros(a), np.zeros(b)
    x = np.swapaxes(x, -1, -2) if ta else x
    y = np.swapaxes(y, -1, -2) if tb else y
    assert one(OpKind.MatMul, [a, b], {"transpose_a": ta, "transpose_b": tb}) == np.matmul(x, y).shape


def test_matmul_bias_and_bad_inner_dims():
    assert one(OpKind.MatMul, [(2, 3), (3, 4), (1, 4)]) == (2, 4)
    with pytest.raises(GraphError, match=r"op 7 \(MatMul\): inner dims differ"):
        one(OpKind.MatMul, [(2, 3), (4, 5)])
    with pytest.raises(GraphError, match=r"bias shape \[3\] does not broadcast to \[2, 4\]"):
        one(OpKind.MatMul, [(2, 3), (3, 4), (3,)])


def numpy_window_shape(x, kernel, strides, dilations, pads_begin, pads_end):
    """Spatial output dims of sliding a dilated window over a padded NCX array, by numpy."""
    pad = [(0, 0), (0, 0)] + list(zip(pads_begin, pads_end))
    x = np.pad(x, pad)
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    windows = sliding_window_view(x, spans, axis=tuple(range(2, x.ndim)))
    index = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)
    return windows[index].shape[2:x.ndim]


def conv_attrs(strides, dil, pb, pe, **kw):
    return {"strides": strides, "dilations": dil, "pads_begin": pb, "pads_end": pe, **kw}


@pytest.mark.parametrize("src, k, strides, dil, pb, pe, groups", [
    ((1, 3, 10, 12), (3, 3), [1, 1], [1, 1], [0, 0], [0, 0], 1),
    ((2, 4, 11, 9), (3, 2), [2, 3], [1, 1], [1, 0], [2, 1], 2),
    ((1, 6, 15, 15), (3, 3), [2, 2], [2, 3], [1, 1], [1, 1], 3),
    ((1, 2, 9, 8, 7), (2, 3, 1), [1, 2, 3], [1, 1, 2], [0, 1, 0], [1, 1, 0], 1)])
def test_convolution_ncx_oix(src, k, strides, dil, pb, pe, groups):
    oc = 4 * groups
    weights = (oc, src[1] // groups, *k)
    spatial = numpy_window_shape(np.zeros(src), k, strides, dil, pb, pe)
    attrs = conv_attrs(strides, dil, pb, pe, groups=groups, data_format="NCX", weights_format="OIX")
    assert one(OpKind.Convolution, [src, weights], attrs) == (src[0], oc, *spatial)


def test_convolution_nxc_xio_with_bias():
    attrs = conv_attrs([2, 1], [1, 1], [1, 1], [1, 1], data_format="NXC", weights_format="XIO")
    spatial = numpy_window_shape(np.zeros((1, 3, 10, 7)), (3, 3), [2, 1], [1, 1], [1, 1], [1, 1])
    assert one(OpKind.Convolution, [(1, 10, 7, 3), (3, 3, 3, 8), (8,)], attrs) == (1, *spatial, 8)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "same_upper"])
def test_convolution_auto_pad_same_keeps_ceil_of_input_over_stride(auto_pad):
    attrs = conv_attrs([2, 3], [1, 1], [0, 0], [0, 0], auto_pad=auto_pad, data_format="NCX", weights_format="OIX")
    expected = (1, 4, math.ceil(11 / 2), math.ceil(10 / 3))
    assert one(OpKind.Convolution, [(1, 2, 11, 10), (4, 2, 3, 3)], attrs) == expected


def test_convolution_auto_pad_valid_ignores_pads():
    attrs = conv_attrs([1, 1], [1, 1], [5, 5], [5, 5], auto_pad="VALID", data_format="NCX", weights_format="OIX")
    assert one(OpKind.Convolution, [(1, 2, 8, 8), (4, 2, 3, 3)], attrs) == (1, 4, 6, 6)


def test_convolution_channel_mismatch():
    attrs = conv_attrs([1, 1], [1, 1], [0, 0], [0, 0], groups=2, data_format="NCX", weights_format="OIX")
    with pytest.raises(GraphError, match=r"op 7 \(Convolution\): src channels 4 / groups 2 must equal"):
        one(OpKind.Convolution, [(1, 4, 8, 8), (4, 4, 3, 3)], attrs)


def test_conv_transpose_output_size():
    attrs = conv_attrs([2, 2], [1, 1], [1, 0], [1, 0], output_padding=[1, 0], data_format="NCX",
                       weights_format="IOX", groups=2)
    # (in - 1) * stride - pads + dilated kernel + output_padding, channels = O per group * groups
    assert one(OpKind.ConvTranspose, [(1, 4, 5, 6), (4, 3, 3, 3)], attrs) == (1, 6, 4 * 2 - 2 + 3 + 1, 5 * 2 + 3)


@pytest.mark.parametrize("kind, extra", [(OpKind.MaxPool, {"dilations": [1, 2]}),
                                         (OpKind.AvgPool, {"exclude_pad": True})])
def test_pooling_floor(kind, extra):
    attrs = {"kernel": [3, 2], "strides": [2, 2], "pads_begin": [1, 0], "pads_end": [1, 1], "data_format": "NCX",
             **extra}
    dil = extra.get("dilations", [1, 1])
    spatial = numpy_window_shape(np.zeros((2, 3, 11, 10)), [3, 2], [2, 2], dil, [1, 0], [1, 1])
    assert one(kind, [(2, 3, 11, 10)], attrs) == (2, 3, *spatial)


def test_pooling_ceil_and_nxc():
    attrs = {"kernel": [3, 3], "strides": [2, 2], "pads_begin": [0, 0], "pads_end": [0, 0], "rounding_type": "ceil"}
    ceil = math.ceil((10 - 3) / 2) + 1
    assert one(OpKind.MaxPool, [(1, 10, 10, 5)], attrs) == (1, ceil, ceil, 5)


def test_pooling_auto_pad_same():
    attrs = {"kernel": [3], "strides": [2], "pads_begin": [0], "pads_end": [0], "auto_pad": "SAME_UPPER",
             "exclude_pad": False, "data_format": "NCX"}
    assert one(OpKind.AvgPool, [(1, 2, 9)], attrs) == (1, 2, 5)


def test_batchnorm_inference_and_bias_add():
    stats = [(3,)] * 4
    attrs = {"epsilon": 1e-5, "data_format": "NCX"}
    assert one(OpKind.BatchNormInference, [(2, 3, 4, 4)] + stats, attrs) == (2, 3, 4, 4)
    assert one(OpKind.BiasAdd, [(2, 4, 4, 3), (3,)]) == (2, 4, 4, 3)
    with pytest.raises(GraphError, match=r"op 7 \(BiasAdd\): bias shape \[3\] must be \[4\]"):
        one(OpKind.BiasAdd, [(2, 3, 4, 4), (3,)], {"data_format": "NXC"})


@pytest.mark.parametrize("begin_norm_axis", [-1, -2, 1, 2])
def test_layernorm_statistics_shapes(begin_norm_axis):
    x = np.zeros((2, 3, 5))
    axes = tuple(range(begin_norm_axis % x.ndim, x.ndim))
    shapes = infer(OpKind.LayerNorm, [x.shape], {"begin_norm_axis": begin_norm_axis}, n_out=3)
    assert shapes == [x.shape, x.mean(axis=axes).shape, x.var(axis=axes).shape]


def test_layernorm_without_stats():
    attrs = {"keep_stats": False, "use_affine": True}
    assert infer(OpKind.LayerNorm, [(4, 8), (8,), (8,)], attrs) == [(4, 8)]


@pytest.mark.parametrize("axis", [1, -1, 0])
def test_softmax_with_stats(axis):
    x = np.zeros((2, 3, 4))
    shapes = infer(OpKind.SoftMax, [x.shape], {"axis": axis}, n_out=2)
    assert shapes == [x.shape, x.max(axis=axis, keepdims=True).shape]


@pytest.mark.parametrize("kind", [OpKind.ReduceSum, OpKind.ReduceMean, OpKind.ReduceMax, OpKind.ReduceL2])
@pytest.mark.parametrize("axes, keep_dims", [([1], True), ([0, -1], False), ([-2], False), ([0, 1, 2], True)])
def test_reductions(kind, axes, keep_dims):
    x = np.zeros((2, 3, 4))
    expected = np.sum(x, axis=tuple(axes), keepdims=keep_dims).shape
    assert one(kind, [x.shape], {"axes": axes, "keep_dims": keep_dims}) == expected


def test_reduction_axes_out_of_range():
    with pytest.raises(GraphError, match=r"op 7 \(ReduceSum\): axis 3 is out of range for rank 3"):
        one(OpKind.ReduceSum, [(2, 3, 4)], {"axes": [3]})


@pytest.mark.parametrize("src, shape, special_zero, numpy_shape", [
    ((2, 3, 4), [6, 4], False, [6, 4]), ((2, 3, 4), [-1, 4], False, [-1, 4]), ((2, 3, 4), [0, -1], True, [2, -1]),
    ((2, 3, 4), [0, 3, 2, 2], True, [2, 3, 2, 2]), ((6,), [1, -1, 1], False, [1, -1, 1]),
    ((2, 0), [0, 5], False, [0, 5])])
def test_static_reshape(src, shape, special_zero, numpy_shape):
    expected = np.zeros(src).reshape(numpy_shape).shape
    assert one(OpKind.StaticReshape, [src], {"shape": shape, "special_zero": special_zero}) == expected


def test_static_reshape_size_mismatch():
    with pytest.raises(GraphError, match=r"op 7 \(StaticReshape\): cannot reshape \[2, 3\] to \[4, 2\]"):
        one(OpKind.StaticReshape, [(2, 3)], {"shape": [4, 2], "special_zero": False})


@pytest.mark.parametrize("order", [[0, 2, 1, 3], [-1, 0, -2, 1], [3, 2, 1, 0], []])
def test_static_transpose(order):
    x = np.zeros((2, 3, 4, 5))
    assert one(OpKind.StaticTranspose, [x.shape], {"order": order}) == np.transpose(x, order or None).shape


def test_static_transpose_needs_a_permutation():
    with pytest.raises(GraphError, match=r"order \[0, 0, 1\] is not a permutation"):
        one(OpKind.StaticTranspose, [(2, 3, 4)], {"order": [0, 0, 1]})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis):
    shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    arrays = [np.zeros(s) for s in shapes]
    assert one(OpKind.Concat, shapes, {"axis": axis}) == np.concatenate(arrays, axis=axis).shape
    assert one(OpKind.Concat, [(2, 1), (2, 5)], {"axis": 1}) == (2, 6)


def test_concat_mismatch_outside_axis():
    with pytest.raises(GraphError, match=r"op 7 \(Concat\): input 1 shape \[3, 2\] differs from input 0"):
        one(OpKind.Concat, [(2, 2), (3, 2)], {"axis": 1})


def test_typecast_and_reorder_keep_the_shape():
    assert one(OpKind.TypeCast, [(3, 4)], out_dtypes=["bf16"]) == (3, 4)
    assert one(OpKind.Reorder, [(3, 4)]) == (3, 4)


def test_select_broadcasts_like_numpy_where():
    cond, a, b = (1, 1, 4), (3, 4), (2, 1, 1)
    expected = np.where(np.zeros(cond, bool), np.zeros(a), np.zeros(b)).shape
    assert one(OpKind.Select, [cond, a, b], dtypes=["boolean", "f32", "f32"]) == expected


def test_select_condition_broadcasts_one_way():
    with pytest.raises(GraphError, match=r"op 7 \(Select\): cond shape \[1, 1, 4\] does not broadcast to \[2, 3, 1\]"):
        one(OpKind.Select, [(1, 1, 4), (3, 1), (2, 1, 1)], dtypes=["boolean", "f32", "f32"])


def test_interpolate_sizes_and_scales():
    attrs = {"mode": "nearest", "sizes": [10, 3], "data_format": "NCX"}
    assert one(OpKind.Interpolate, [(1, 3, 5, 7)], attrs) == (1, 3, 10, 3)
    scaled = one(OpKind.Interpolate, [(1, 5, 7, 3)], {"mode": "linear", "scales": [2.0, 0.5]})
    assert scaled == (1, math.floor(5 * 2.0), math.floor(7 * 0.5), 3)


def test_interpolate_with_a_sizes_input_stays_unknown():
    shapes = infer(OpKind.Interpolate, [(1, 3, 5, 7), (2,)], {"mode": "nearest"}, dtypes=["f32", "s32"])
    assert shapes == [None]


def test_end_has_no_outputs():
    g = Graph()
    g.add_op(Op(1, OpKind.ReLU, [lt(0, (2, 2))], [lt(1, None)]))
    g.add_op(Op(2, OpKind.End, [lt(1, None)], []))
    assert infer_shapes(g)[1].shape == (2, 2)


def test_shapes_flow_through_a_chain_and_inputs_are_returned():
    g = Graph()
    g.add_op(Op(1, OpKind.MatMul, [lt(0, (4, 8)), lt(1, (8, 16), property_type="constant")], [lt(2, (-1, -1))]))
    g.add_op(Op(2, OpKind.ReLU, [lt(2, None)], [lt(3, None, layout_type="any")]))
    tensors = infer_shapes(g)
    assert tensors[0].shape == (4, 8) and tensors[1].property_type.value == "constant"
    assert tensors[2].shape == (4, 16) and tensors[3].shape == (4, 16)
    assert tensors[3].layout_type is LayoutType.strided and tensors[3].strides == (16, 1)
    assert g.tensor(3).shape is None                  # the graph itself is not changed


def test_unknown_inputs_leave_outputs_unknown():
    g = Graph()
    g.add_op(Op(1, OpKind.ReLU, [lt(0, (-1, 3))], [lt(1, None)]))
    assert infer_shapes(g)[1].shape is None


def test_a_conflicting_given_shape_names_the_op():
    g = Graph()
    attrs = {"axes": [1], "keep_dims": True}
    g.add_op(Op(42, OpKind.ReduceSum, [lt(0, (2, 3))], [lt(1, (2, 3))], attrs))
    with pytest.raises(GraphError, match=r"op 42 \(ReduceSum\): output 0 \(tensor 1\) is given shape \[2, 3\] "
                                         r"but the inputs make it \[2, 1\]"):
        infer_shapes(g)


def test_a_partially_given_shape_is_checked_and_completed():
    assert one(OpKind.Add, [(2, 3), (2, 3)], out_shapes=[(2, -1)]) == (2, 3)
    with pytest.raises(GraphError, match="is given shape"):
        one(OpKind.Add, [(2, 3), (2, 3)], out_shapes=[(-1, 4)])


def test_with_inferred_shapes_returns_a_new_graph():
    g = Graph()
    g.add_op(Op(1, OpKind.Sigmoid, [lt(0, (3,))], [lt(1, None)]))
    g.finalize()
    g2 = with_inferred_shapes(g)
    assert g2.is_finalized and g2.ops[0].outputs[0].shape == (3,) and g.ops[0].outputs[0].shape is None
