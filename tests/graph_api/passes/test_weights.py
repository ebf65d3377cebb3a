"""fold_into_weights: per-channel BatchNormInference, Multiply and Add after a Convolution with
bound weights become its weights and bias; what is not per channel, not bound or read
elsewhere stays."""
import numpy as np
import pytest

from tilefuse.graph_api import OpKind, compile_graph, reference
from tilefuse.graph_api.passes import fold_into_weights
from passes_helpers import assert_same_outputs, feeds_for, graph, lt, op, snapshot

RNG = np.random.default_rng(3)
CONV = dict(strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1])


def conv_graph(after, c_in=3, c_out=5, size=7, bias=True, nxc=False, extra_reader=False, values=None):
    """x -> Convolution(w[, b]) -> ``after`` ops (a function of the conv output's logical tensor
    returning (ops, values)); NCX/OIX, or NXC/XIO with ``nxc``."""
    x_shape, y_shape = ((1, size, size, c_in), (1, size, size, c_out)) if nxc else ((1, c_in, size, size),
                                                                                   (1, c_out, size, size))
    w_shape = (3, 3, c_in, c_out) if nxc else (c_out, c_in, 3, 3)
    x, w, b, y = lt(0, x_shape), lt(1, w_shape, constant=True), lt(2, (c_out,), constant=True), lt(3, y_shape)
    conv = op(0, "Convolution", [x, w, b] if bias else [x, w], [y], data_format="NXC" if nxc else "NCX",
              weights_format="XIO" if nxc else "OIX", **CONV)
    more_ops, more_values = after(y)
    ops = [conv, *more_ops]
    if extra_reader:
        ops.append(op(99, "Exp", [y], [lt(99, y_shape)]))
    bound = {1: RNG.standard_normal(w_shape), **({2: RNG.standard_normal(c_out)} if bias else {}), **more_values,
             **(values or {})}
    return graph(*ops, values=bound)


def batchnorm(y, channel=1, next_id=10):
    c = y.shape[channel]
    params = [lt(next_id + k, (c,), constant=True) for k in range(4)]
    out = lt(next_id + 4, y.shape)
    values = {params[0].id: RNG.uniform(0.5, 2, c), params[1].id: RNG.standard_normal(c),
              params[2].id: RNG.standard_normal(c), params[3].id: RNG.uniform(0.1, 2, c)}
    return [op(10, "BatchNormInference", [y, *params], [out], epsilon=1e-3,
               data_format="NCX" if channel == 1 else "NXC")], values, out


def test_conv_then_batchnorm_folds_into_one_convolution():
    def after(y):
        ops, values, _ = batchnorm(y)
        return ops, values
    for bias in (True, False):
        g = conv_graph(after, bias=bias)
        before = snapshot(g)
        out = fold_into_weights(g)
        assert snapshot(g) == before
        assert [o.kind for o in out.ops] == [OpKind.Convolution] and len(out.ops[0].inputs) == 3
        assert out.ops[0].outputs[0].id == 14
        assert_same_outputs(g, out)


def test_a_chain_of_batchnorm_multiply_and_add_folds_whole():
    def after(y):
        ops, values, bn = batchnorm(y)
        scale, shift = lt(20, (5, 1, 1), constant=True), lt(21, (1, 5, 1, 1), constant=True)
        m, a = lt(22, y.shape), lt(23, y.shape)
        ops += [op(11, "Multiply", [scale, bn], [m]), op(12, "Add", [m, shift], [a]), op(13, "ReLU", [a], [lt(24, y.shape)])]
        return ops, {**values, 20: RNG.standard_normal((5, 1, 1)), 21: RNG.standard_normal((1, 5, 1, 1))}
    g = conv_graph(after, c_in=4, c_out=5, size=9)
    out = fold_into_weights(g)
    assert [o.kind for o in out.ops] == [OpKind.Convolution, OpKind.ReLU]
    assert_same_outputs(g, out)
    feeds = feeds_for(g)
    x = {0: feeds[0].astype("float32")}
    np.testing.assert_allclose(compile_graph(g).run(x)[24], reference.run(g, feeds)[24], rtol=1e-4, atol=1e-4)


def test_channels_last_convolutions_fold_along_the_last_axis():
    def after(y):
        ops, values, _ = batchnorm(y, channel=3)
        return ops, values
    g = conv_graph(after, nxc=True)
    out = fold_into_weights(g)
    assert [o.kind for o in out.ops] == [OpKind.Convolution]
    assert_same_outputs(g, out)


@pytest.mark.parametrize("case", ["read elsewhere", "not per channel", "broadcasts the output", "fed not bound",
                                  "another channel axis"])
def test_what_is_not_a_per_channel_affine_of_the_conv_alone_stays(case):
    def after(y):
        if case == "not per channel":
            c = lt(20, (1, 1, 7, 7), constant=True)            # varies along the image
            return [op(11, "Multiply", [y, c], [lt(21, y.shape)])], {20: RNG.standard_normal((1, 1, 7, 7))}
        if case == "broadcasts the output":
            c = lt(20, (2, 5, 1, 1), constant=True)            # the output grows a batch of 2
            return [op(11, "Add", [y, c], [lt(21, (2, 5, 7, 7))])], {20: RNG.standard_normal((2, 5, 1, 1))}
        if case == "fed not bound":
            c = lt(20, (5, 1, 1), constant=True)               # a constant fed at run time
            return [op(11, "Multiply", [y, c], [lt(21, y.shape)])], {}
        if case == "another channel axis":
            ops, values, _ = batchnorm(y, channel=3)           # NXC batch norm after an NCX convolution
            return ops, values
        ops, values, _ = batchnorm(y)
        return ops, values
    g = conv_graph(after, size=7 if case != "another channel axis" else 5, c_out=5,
                   extra_reader=case == "read elsewhere")
    out = fold_into_weights(g)
    assert OpKind.Convolution in [o.kind for o in out.ops] and len(out.ops) == len(g.ops)
    if case != "fed not bound":
        assert_same_outputs(g, out)


def test_a_batch_norm_no_convolution_takes_becomes_one_scale_and_one_shift():
    from tilefuse.graph_api.passes import fold_batch_norms
    x, r = lt(0, (1, 6, 5, 5)), lt(1, (1, 6, 5, 5))
    ops, values, bn = batchnorm(x)
    m, y = lt(30, x.shape), lt(31, x.shape)
    c = lt(32, (6, 1, 1), constant=True)
    g = graph(*ops, op(11, "Multiply", [bn, c], [m]), op(12, "ReLU", [m], [y]), op(13, "Exp", [x], [r]),
              values={**values, 32: RNG.standard_normal((6, 1, 1))})
    out = fold_batch_norms(g)
    assert [o.kind for o in out.ops] == [OpKind.Multiply, OpKind.Add, OpKind.ReLU, OpKind.Exp]
    assert out.constant_values[out.ops[0].inputs[1].id].shape == (6, 1, 1)
    assert out.ops[1].outputs[0].id == m.id                             # the chain's output stays
    assert_same_outputs(g, out)
    ops, values, _ = batchnorm(lt(0, (2, 5, 5, 6)), channel=3)
    channels_last = graph(*ops, values=values)
    folded = fold_batch_norms(channels_last)
    assert [o.kind for o in folded.ops] == [OpKind.Multiply, OpKind.Add]
    assert folded.constant_values[folded.ops[0].inputs[1].id].shape == (6,)
    assert_same_outputs(channels_last, folded)
