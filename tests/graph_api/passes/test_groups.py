"""split_grouped_convolutions: a grouped pointwise NCX convolution with bound weights becomes a
batched MatMul over its groups; every other grouped convolution stays one op, which compiles
to one kernel over all its groups."""
import numpy as np
import pytest

from tilefuse.graph_api import OpKind, compile_graph, reference
from tilefuse.graph_api.passes import split_grouped_convolutions
from passes_helpers import assert_same_outputs, feeds_for, graph, lt, op, snapshot

RNG = np.random.default_rng(5)


def grouped(groups, c_in, c_out, nxc=False, bias=True, bound=True, size=9):
    x_shape = (1, size, size, c_in) if nxc else (1, c_in, size, size)
    y_shape = (1, size, size, c_out) if nxc else (1, c_out, size, size)
    w_shape = (3, 3, c_in // groups, c_out) if nxc else (c_out, c_in // groups, 3, 3)
    x, w, b, y = lt(0, x_shape), lt(1, w_shape, constant=bound), lt(2, (c_out,), constant=bound), lt(3, y_shape)
    conv = op(0, "Convolution", [x, w, b] if bias else [x, w], [y], strides=[1, 1], pads_begin=[1, 1],
              pads_end=[1, 1], dilations=[1, 1], groups=groups, data_format="NXC" if nxc else "NCX",
              weights_format="XIO" if nxc else "OIX")
    relu = op(1, "ReLU", [y], [lt(4, y_shape)])
    values = {1: RNG.standard_normal(w_shape) / 4, 2: RNG.standard_normal(c_out)} if bound else {}
    return graph(conv, relu, values=values if bias else {k: v for k, v in values.items() if k != 2})


@pytest.mark.parametrize("groups, c_in, c_out, nxc, bias, size", [
    (2, 16, 24, True, True, 9), (4, 32, 32, False, True, 9), (3, 24, 27, False, False, 9),
    (20, 320, 320, False, True, 7), (12, 96, 96, False, True, 11), (4, 96, 96, False, False, 5)])
def test_a_grouped_convolution_stays_one_op_and_compiles_to_one_kernel(groups, c_in, c_out, nxc, bias, size):
    g = grouped(groups, c_in, c_out, nxc, bias, size=size)
    assert split_grouped_convolutions(g) is g.ir()
    feeds = feeds_for(g)
    want = reference.run(g, feeds)
    compiled = compile_graph(g)
    np.testing.assert_allclose(compiled.run({0: feeds[0]})[4], want[4], rtol=1e-4, atol=1e-4)
    # one kernel with its bias and relu (layout transposes around it where it runs channels-last)
    assert [[op.kind.value for op in s.ops] for s in compiled._run_steps if s.kind == "complex"] == \
        [["Convolution", "ReLU"]]


@pytest.mark.parametrize("build", [
    lambda: grouped(16, 16, 16),                       # depthwise: the window template's
    lambda: grouped(2, 16, 16, bound=False),           # weights fed at run: nothing to reshape here
], ids=["depthwise", "unbound"])
def test_convolutions_that_are_not_pointwise_stay(build):
    g = build()
    assert split_grouped_convolutions(g) is g.ir()


def pointwise(groups, c_in, c_out, h=7, w=5, nxc=False, bias=True, stride=1):
    out_h, out_w = -(-h // stride), -(-w // stride)
    x_shape = (1, h, w, c_in) if nxc else (1, c_in, h, w)
    y_shape = (1, out_h, out_w, c_out) if nxc else (1, c_out, out_h, out_w)
    w_shape = (1, 1, c_in // groups, c_out) if nxc else (c_out, c_in // groups, 1, 1)
    x, wt, b, y = lt(0, x_shape), lt(1, w_shape, constant=True), lt(2, (c_out,), constant=True), lt(3, y_shape)
    conv = op(0, "Convolution", [x, wt, b] if bias else [x, wt], [y], strides=[stride, stride], pads_begin=[0, 0],
              pads_end=[0, 0], dilations=[1, 1], groups=groups, data_format="NXC" if nxc else "NCX",
              weights_format="XIO" if nxc else "OIX")
    relu = op(1, "ReLU", [y], [lt(4, y_shape)])
    values = {1: RNG.standard_normal(w_shape) / 4}
    if bias:
        values[2] = RNG.standard_normal(c_out)
    return graph(conv, relu, values=values)


@pytest.mark.parametrize("groups, c_in, c_out, bias, h, w", [
    (4, 12, 20, True, 7, 5), (3, 6, 9, False, 13, 11), (2, 34, 34, True, 14, 14), (8, 16, 40, True, 1, 3)])
def test_a_grouped_pointwise_convolution_becomes_a_batched_matmul(groups, c_in, c_out, bias, h, w):
    g = pointwise(groups, c_in, c_out, h, w, bias=bias)
    before = snapshot(g)
    rewritten = split_grouped_convolutions(g)
    assert snapshot(g) == before
    assert [o.kind for o in rewritten.topological_ops()][:3] == [OpKind.StaticReshape, OpKind.MatMul,
                                                                 OpKind.StaticReshape]
    product = next(o for o in rewritten.ops if o.kind is OpKind.MatMul)
    assert product.inputs[0].shape == (groups, c_out // groups, c_in // groups)
    assert product.inputs[1].shape == (1, groups, c_in // groups, h * w)
    assert len(product.inputs) == (3 if bias else 2)
    assert next(o for o in rewritten.ops if o.outputs[0].id == 3).kind is OpKind.StaticReshape
    assert_same_outputs(g, rewritten)
    feeds = feeds_for(g)
    want = reference.run(g, feeds)
    compiled = compile_graph(g)
    np.testing.assert_allclose(compiled.run({0: feeds[0]})[4], want[4], rtol=1e-4, atol=1e-4)
    # the reshapes are views (or fused): every step that runs computes the product or the relu
    kernels = [s for s in compiled._run_steps if s.view is None]
    assert all({OpKind.MatMul, OpKind.ReLU} & {o.kind for o in s.ops} for s in kernels)
    assert [s.kind for s in kernels].count("complex") == 1


@pytest.mark.parametrize("build", [
    lambda: pointwise(4, 16, 16, nxc=True),            # channels-last: pixels are not rows
    lambda: pointwise(2, 16, 16, stride=2),            # strided: not every pixel is read
    lambda: pointwise(16, 16, 16),                     # one channel a group: a per-channel scale
], ids=["nxc", "strided", "depthwise"])
def test_pointwise_convolutions_that_are_no_batched_matmul_are_not_rewritten_as_one(build):
    rewritten = split_grouped_convolutions(build())
    assert not any(o.kind is OpKind.MatMul for o in rewritten.ops)
