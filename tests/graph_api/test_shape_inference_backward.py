"""Shape inference for the backward ops, RMSNorm and ConvTranspose's auto_pad
(oneDNN pads kernel - stride, negative when the stride is the larger)."""
import pytest

from tilefuse.graph_api import GraphError, OpKind
from test_shape_inference import infer, one


@pytest.mark.parametrize("kind, attrs", [
    (OpKind.ReLUBackward, {}), (OpKind.SigmoidBackward, {"use_dst": False}), (OpKind.TanhBackward, {}),
    (OpKind.EluBackward, {"alpha": 1.0}), (OpKind.GELUBackward, {}), (OpKind.HardSigmoidBackward,
                                                                      {"alpha": 0.2, "beta": 0.5}),
    (OpKind.HardSwishBackward, {}), (OpKind.MishBackward, {}), (OpKind.SoftPlusBackward, {}),
    (OpKind.SqrtBackward, {}), (OpKind.AbsBackward, {}), (OpKind.ClampBackward, {"min": 0.0, "max": 1.0}),
    (OpKind.SoftMaxBackward, {"axis": 2}), (OpKind.LogSoftmaxBackward, {})])
def test_backward_ops_keep_the_shape(kind, attrs):
    assert one(kind, [(2, 3, 5), (2, 3, 5)], attrs) == (2, 3, 5)
    with pytest.raises(GraphError, match="must have the same shape"):
        one(kind, [(2, 3, 5), (2, 3, 4)], attrs)


def test_softmax_backward_checks_the_axis():
    with pytest.raises(GraphError, match="axis 3 is out of range"):
        one(OpKind.SoftMaxBackward, [(2, 3, 5), (2, 3, 5)], {"axis": 3})


@pytest.mark.parametrize("kind", [OpKind.BiasAddBackward, OpKind.BiasAddBackprop])
def test_bias_add_backward_gives_the_channels(kind):
    assert one(kind, [(2, 3, 5, 7)], {"data_format": "NCX"}) == (3,)
    assert one(kind, [(2, 3, 5, 7)]) == (7,)
    with pytest.raises(GraphError, match="rank >= 2"):
        one(kind, [(7,)])


def test_batch_norm_training_backward():
    shapes = [(2, 3, 5), (2, 3, 5), (3,), (3,), (3,)]
    assert infer(OpKind.BatchNormTrainingBackward, shapes, {"epsilon": 0.1, "data_format": "NCX"}, n_out=3) == \
        [(2, 3, 5), (3,), (3,)]
    assert infer(OpKind.BatchNormTrainingBackward, [(2, 5, 3), (2, 5, 3), (3,), (3,)], {"epsilon": 0.1}) == [(2, 5, 3)]
    with pytest.raises(GraphError, match=r"input 3 shape \[4\] must be \[3\]"):
        infer(OpKind.BatchNormTrainingBackward, shapes[:3] + [(4,)], {"epsilon": 0.1, "data_format": "NCX"})


def test_rms_norm_keeps_the_shape():
    assert infer(OpKind.RMSNorm, [(2, 3, 5), (5,)], {"begin_norm_axis": -1}, n_out=1) == [(2, 3, 5)]


@pytest.mark.parametrize("kernel, stride", [(3, 2), (2, 3), (4, 4)])
@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_conv_transpose_same_padding_makes_input_times_stride(kernel, stride, auto_pad):
    attrs = {"strides": [stride], "pads_begin": [0], "pads_end": [0], "dilations": [1], "auto_pad": auto_pad,
             "data_format": "NCX", "weights_format": "IOX"}
    assert one(OpKind.ConvTranspose, [(1, 4, 7), (4, 2, kernel)], attrs) == (1, 2, 7 * stride)
    with pytest.raises(GraphError, match="dilations of 1"):
        one(OpKind.ConvTranspose, [(1, 4, 7), (4, 2, kernel)], {**attrs, "dilations": [2]})
