"""scale_weights_by_channel_gates: a squeeze-and-excitation gate scales the next convolution's
weights instead of the feature map, where the weights are the smaller; results unchanged."""
import numpy as np
import pytest

from tilefuse.graph_api import OpKind, compile_graph, reference
from tilefuse.graph_api.passes import plan_layouts, run_passes, scale_weights_by_channel_gates
from passes_helpers import assert_same_outputs, feeds_for, graph, lt, op

RNG = np.random.default_rng(5)
NCHW = dict(strides=[1, 1], pads_begin=[0, 0], pads_end=[0, 0], dilations=[1, 1], data_format="NCX",
            weights_format="OIX")


def se_block(c=6, size=9, out=5, batch=1, kernel=1, extra_reader=False):
    """x -> conv 3x3 (c) -> ReLU -> mean over the pixels -> conv 1x1 -> sigmoid -> x * gate ->
    conv ``kernel`` x ``kernel`` (c -> out) [-> and the product as an output too]."""
    values = {}
    x = lt(0, (batch, c, size, size))
    w1, y1, r1 = lt(1, (c, c, 3, 3), constant=True), lt(2, (batch, c, size, size)), lt(3, (batch, c, size, size))
    values[1] = RNG.standard_normal(w1.shape) / 3
    pooled, w2, z, gate = lt(4, (batch, c, 1, 1)), lt(5, (c, c, 1, 1), constant=True), lt(6, (batch, c, 1, 1)), \
        lt(7, (batch, c, 1, 1))
    values[5] = RNG.standard_normal(w2.shape)
    scaled, w3 = lt(8, (batch, c, size, size)), lt(9, (out, c, kernel, kernel), constant=True)
    values[9] = RNG.standard_normal(w3.shape)
    pad = kernel // 2
    y = lt(10, (batch, out, size, size))
    ops = [op(0, "Convolution", [x, w1], [y1], **{**NCHW, "pads_begin": [1, 1], "pads_end": [1, 1]}),
           op(1, "ReLU", [y1], [r1]), op(2, "ReduceMean", [r1], [pooled], axes=[2, 3], keep_dims=True),
           op(3, "Convolution", [pooled, w2], [z], **NCHW), op(4, "Sigmoid", [z], [gate]),
           op(5, "Multiply", [r1, gate], [scaled]),
           op(6, "Convolution", [scaled, w3], [y], **{**NCHW, "pads_begin": [pad, pad], "pads_end": [pad, pad]})]
    if extra_reader:
        ops.append(op(7, "Exp", [scaled], [lt(11, scaled.shape)]))
    return graph(*ops, values=values)


def gated_convolutions(g):
    """The convolutions whose weights are computed at run time."""
    return [o for o in g.ops if o.kind is OpKind.Convolution and o.inputs[1].id not in g.constant_values]


def check_compiled(g, seed=0):
    feeds = feeds_for(g, seed)
    want = reference.run(g, feeds)
    got = compile_graph(g).run({k: v for k, v in feeds.items() if k not in g.constant_values})
    for tid, value in want.items():
        np.testing.assert_allclose(got[tid], value, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kernel", [1, 3])
def test_the_projection_reads_the_feature_map_with_gated_weights_in_hwio(kernel):
    g = se_block(kernel=kernel)
    laid = plan_layouts(g)
    gated = scale_weights_by_channel_gates(laid)
    [conv] = gated_convolutions(gated)
    assert conv.attrs["weights_format"] == "XIO" and conv.inputs[1].shape == (kernel, kernel, 6, 5)
    assert conv.inputs[0].shape == (1, 9, 9, 6)                         # the ReLU's output itself
    multiplies = [o for o in gated.ops if o.kind is OpKind.Multiply]
    assert [o.outputs[0].shape for o in multiplies] == [(kernel, kernel, 6, 5)]   # the feature map's is gone
    assert_same_outputs(laid, gated)
    check_compiled(g)
    assert gated_convolutions(run_passes(g))                            # in the default passes


def test_weights_larger_than_the_feature_map_keep_its_multiply():
    g = plan_layouts(se_block(c=8, size=2, out=40))                    # 8x40 weights, 2x2x8 pixels
    assert scale_weights_by_channel_gates(g) is g


def test_a_batch_of_images_has_a_gate_per_image_and_is_left_alone():
    g = plan_layouts(se_block(batch=2))
    assert scale_weights_by_channel_gates(g) is g
    check_compiled(se_block(batch=2))


def test_a_product_read_by_another_op_too_stays_for_it():
    g = plan_layouts(se_block(extra_reader=True))
    gated = scale_weights_by_channel_gates(g)
    assert len(gated_convolutions(gated)) == 1
    assert sum(o.kind is OpKind.Multiply for o in gated.ops) == 2     # the weights' and the feature map's
    assert_same_outputs(g, gated)
    check_compiled(se_block(extra_reader=True))


def test_an_unfinalized_graph_is_refused():
    from tilefuse.graph_api import Graph, GraphError
    with pytest.raises(GraphError, match="finalized"):
        scale_weights_by_channel_gates(Graph())
