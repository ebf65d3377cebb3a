"""graph_api.ops._window: per-spatial-dim defaults trimmed and auto_pad resolved, in one place;
every consumer (shape inference, the reference, the compiled code) reads the result."""
import numpy as np
import pytest

from tilefuse.graph_api import DataType, GraphError, LogicalTensor, Op, OpKind, infer_shapes, Graph
from tilefuse.graph_api.ops import RuleError, normalize_op
from tilefuse.graph_api.ops._window import normalize_window, same_pads, spatial, windows
from tilefuse.graph_api.reference import evaluate

F32 = DataType.f32


@pytest.mark.parametrize("mode, pads", [("SAME_UPPER", ([1, 1], [1, 1])), ("same_lower", ([1, 1], [1, 1])),
                                        ("VALID", ([0, 0], [0, 0]))])
def test_same_pads_of_a_convolution(mode, pads):
    # src 10x11, kernel 4x4, strides 2x3: out ceil(10/2)=5, ceil(11/3)=4, total padding 2 each
    assert same_pads(mode, [10, 11], [4, 4], [2, 3], [1, 1]) == pads


def test_same_pads_put_the_odd_element_at_the_end_or_the_begin():
    assert same_pads("SAME_UPPER", [10, 11], [3, 3], [2, 2], [1, 1]) == ([0, 1], [1, 1])
    assert same_pads("SAME_LOWER", [10, 11], [3, 3], [2, 2], [1, 1]) == ([1, 1], [0, 1])
    assert same_pads("None", [10], [3], [2], [1]) is None


def test_same_pads_use_the_dilated_kernel():
    # src 7, kernel 3 dilated by 2 (spans 5), stride 1: 4 elements of padding
    assert same_pads("SAME_UPPER", [7], [3], [1], [2]) == ([2], [2])
    assert same_pads("SAME_LOWER", [8], [2], [1], [3]) == ([2], [1])


def test_same_pads_of_a_conv_transpose_are_kernel_minus_stride():
    assert same_pads("SAME_UPPER", [9, 9], [3, 3], [2, 2], [1, 1], deconv=True) == ([0, 0], [1, 1])
    assert same_pads("SAME_LOWER", [9, 9], [3, 3], [2, 2], [1, 1], deconv=True) == ([1, 1], [0, 0])
    assert same_pads("SAME_UPPER", [9], [2], [3], [1], deconv=True) == ([0], [-1])     # a crop
    with pytest.raises(RuleError, match="dilations of 1"):
        same_pads("SAME_UPPER", [9], [3], [2], [2], deconv=True)


def test_an_unknown_auto_pad_is_refused():
    with pytest.raises(RuleError, match="auto_pad 'same'"):
        same_pads("same", [9], [3], [1], [1])


def test_spatial_trims_onednns_twelve_value_defaults_only():
    assert spatial([1] * 12, 2, 1) == [1, 1]
    assert spatial([0] * 12, 3, 0) == [0, 0, 0]
    assert spatial([], 2, 0) == [0, 0]
    assert spatial([2, 1, 1], 2, 1) == [2, 1]
    assert spatial([2, 1, 3], 2, 1) == [2, 1, 3]          # not a default tail: kept, refused later


def test_normalize_window_refuses_lists_of_the_wrong_length():
    attrs = {"strides": [1, 1, 2], "pads_begin": [0, 0], "pads_end": [0, 0], "data_format": "NCX"}
    with pytest.raises(RuleError, match="'strides'.*2 entries"):
        normalize_window(attrs, (1, 3, 5, 5), [3, 3])
    with pytest.raises(RuleError, match="positive"):
        normalize_window({**attrs, "strides": [0, 1]}, (1, 3, 5, 5), [3, 3])


def test_normalize_window_leaves_an_op_it_cannot_resolve_alone():
    attrs = {"strides": [1, 1], "pads_begin": [], "pads_end": [], "auto_pad": "SAME_UPPER", "data_format": "NCX"}
    assert normalize_window(attrs, None, [3, 3]) is attrs
    assert normalize_window(attrs, (1, 3, 5, 5), None) is attrs


def test_windows_reads_normalized_attributes():
    assert windows({"strides": [2, 1], "dilations": [1, 3], "pads_begin": [1, 0], "pads_end": [0, 2]}, 2) == \
        [(2, 1, 1, 0), (1, 3, 0, 2)]
    with pytest.raises(RuleError, match="missing required attribute 'strides'"):
        windows({"pads_begin": [0], "pads_end": [0]}, 1)


def _conv(auto_pad, dilations, strides=(1, 1)):
    x = LogicalTensor(0, F32, (1, 2, 9, 8)); w = LogicalTensor(1, F32, (3, 2, 3, 3))
    y = LogicalTensor(2, F32, None)
    return Op(0, OpKind.Convolution, [x, w], [y], {
        "strides": list(strides), "dilations": list(dilations), "pads_begin": [0, 0], "pads_end": [0, 0],
        "auto_pad": auto_pad, "data_format": "NCX", "weights_format": "OIX"})


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_same_with_dilations_is_one_rule_for_shapes_and_the_reference(auto_pad):
    op = _conv(auto_pad, [2, 3], strides=[2, 1])
    g = Graph(); g.add_op(op); g.finalize()
    shape = infer_shapes(g)[2].shape
    assert shape == (1, 3, 5, 8)                     # ceil(9 / 2), ceil(8 / 1)
    rng = np.random.default_rng(0)
    out = evaluate(op, [rng.standard_normal((1, 2, 9, 8)).astype(np.float32),
                        rng.standard_normal((3, 2, 3, 3)).astype(np.float32)])[0]
    assert out.shape == shape
    n = normalize_op(op, [(1, 2, 9, 8), (3, 2, 3, 3)])
    explicit = Op(0, OpKind.Convolution, op.inputs, op.outputs, {**n.attrs})
    assert n.attrs["auto_pad"] == "None"
    np.testing.assert_allclose(evaluate(explicit, [np.ones((1, 2, 9, 8), np.float32), np.ones((3, 2, 3, 3), np.float32)])[0],
                               evaluate(op, [np.ones((1, 2, 9, 8), np.float32), np.ones((3, 2, 3, 3), np.float32)])[0])


def test_a_bad_auto_pad_names_the_op_everywhere():
    op = _conv("SAME", [1, 1])
    with pytest.raises(GraphError, match=r"op 0 \(Convolution\): auto_pad 'SAME'"):
        normalize_op(op, [(1, 2, 9, 8), (3, 2, 3, 3)])
    with pytest.raises(GraphError, match=r"op 0 \(Convolution\): auto_pad 'SAME'"):
        evaluate(op, [np.ones((1, 2, 9, 8), np.float32), np.ones((3, 2, 3, 3), np.float32)])
