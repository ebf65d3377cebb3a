import numpy as np
import pytest

from tilefuse.graph_api import GraphError, OpKind, compile_graph
from tilefuse.graph_api.passes import DEFAULT, flatten_pointwise_convolutions, plan_layouts
from passes_helpers import assert_same_outputs, feeds_for, graph, lt, op, snapshot

NCHW = tuple(p for p in DEFAULT if p is not plan_layouts)     # as where depthwise convolutions keep NCHW
RNG = np.random.default_rng(7)


def kinds(g):
    return [o.kind.value for o in g.topological_ops()]


def conv(oid, x, w, y, **attrs):
    return op(oid, "Convolution", [x, *w], [y], strides=[1] * (len(x.shape) - 2), pads_begin=[0] * (len(x.shape) - 2),
              pads_end=[0] * (len(x.shape) - 2), dilations=[1] * (len(x.shape) - 2), data_format="NCX",
              weights_format="OIX", **attrs)


def pointwise(n=1, c=20, o=12, size=(17, 19), bias=True, tail="silu", weights_format="OIX"):
    """A 1x1 convolution (sizes that divide no tile) and its epilogue: "silu" (y * sigmoid(y)),
    "residual" (+ an input, then ReLU), "scale" (* one value per channel), or "conv" (read by
    another convolution and by a residual add)."""
    x, y = lt(0, (n, c, *size)), lt(3, (n, o, *size))
    w_shape = (o, c, 1, 1) if weights_format == "OIX" else (1, 1, c, o)
    ws = [lt(1, w_shape, constant=True)] + ([lt(2, (o,), constant=True)] if bias else [])
    values = {1: RNG.standard_normal(w_shape).astype(np.float32)}
    if bias:
        values[2] = RNG.standard_normal(o).astype(np.float32)
    ops = [op(0, "Convolution", [x, *ws], [y], strides=[1, 1], pads_begin=[0, 0], pads_end=[0, 0], dilations=[1, 1],
              data_format="NCX", weights_format=weights_format)]
    shape = (n, o, *size)
    if tail == "silu":
        ops += [op(1, "Sigmoid", [y], [lt(4, shape)]), op(2, "Multiply", [y, lt(4, shape)], [lt(5, shape)])]
    elif tail == "residual":
        ops += [op(1, "Add", [y, lt(6, shape)], [lt(4, shape)]), op(2, "ReLU", [lt(4, shape)], [lt(5, shape)])]
    elif tail == "scale":
        values[6] = RNG.standard_normal((1, o, 1, 1)).astype(np.float32)
        ops += [op(1, "Multiply", [y, lt(6, (1, o, 1, 1), constant=True)], [lt(5, shape)])]
    elif tail == "conv":
        values[7] = RNG.standard_normal((o, o, 1, 1)).astype(np.float32)
        ops += [conv(1, y, [lt(7, (o, o, 1, 1), constant=True)], lt(4, shape)),
                op(2, "Add", [y, lt(4, shape)], [lt(5, shape)])]
    return graph(*ops, values=values)


def test_a_pointwise_convolution_is_a_matmul_over_its_pixels_with_silu_on_the_product():
    g = pointwise()
    before = snapshot(g)
    out = flatten_pointwise_convolutions(g)
    assert snapshot(g) == before
    assert kinds(out) == ["StaticReshape", "MatMul", "Sigmoid", "Multiply", "StaticReshape"]
    matmul = next(o for o in out.ops if o.kind is OpKind.MatMul)
    assert [t.shape for t in matmul.inputs] == [(12, 20), (20, 17 * 19), (12, 1)]
    assert all(o.outputs[0].shape == (12, 17 * 19) for o in out.ops if o.kind in (OpKind.Sigmoid, OpKind.Multiply))
    assert {t.id for t in out.get_output_ports()} == {5}
    assert_same_outputs(g, out)


@pytest.mark.parametrize("n, tail, bias, weights_format", [
    (1, "silu", True, "OIX"), (1, "residual", False, "OIX"), (2, "residual", True, "XIO"), (1, "scale", True, "OIX"),
    (3, "silu", False, "OIX"), (1, "conv", True, "OIX")])
def test_compiled_it_matches_numpy(n, tail, bias, weights_format):
    g = pointwise(n=n, tail=tail, bias=bias, weights_format=weights_format)
    compiled = compile_graph(g, passes=NCHW)
    assert any(o.kind is OpKind.MatMul for s in compiled.steps for o in s.ops)
    feeds = feeds_for(g)
    x, values = feeds[0], g.constant_values
    w = values[1].reshape(12, 20) if weights_format == "OIX" else values[1].reshape(20, 12).T
    y = np.einsum("oc,nchw->nohw", w, x) + (values[2].reshape(1, -1, 1, 1) if bias else 0)
    want = {"silu": lambda: y / (1 + np.exp(-y)), "residual": lambda: np.maximum(y + feeds.get(6, 0), 0),
            "scale": lambda: y * values.get(6), "conv": lambda: y + np.einsum("oc,nchw->nohw", values[7][:, :, 0, 0], y)}
    got = compiled.run({k: v for k, v in feeds.items() if k in (0, 6) and k not in values})[5]
    np.testing.assert_allclose(got, want[tail](), rtol=1e-4, atol=1e-4)


def test_the_gemm_partition_holds_the_epilogue_and_reads_its_inputs_as_views():
    g = pointwise(tail="residual")
    compiled = compile_graph(g, passes=NCHW)
    anchors = [s for s in compiled.steps if s.kind == "complex"]
    assert len(anchors) == 1 and [o.kind.value for o in anchors[0].ops] == ["MatMul", "Add", "ReLU"]
    assert sorted(s.view[3] for s in compiled.steps if s.view is not None) == [(12, 323), (20, 323)]


def test_an_output_read_outside_the_epilogue_ends_it_at_the_product():
    out = flatten_pointwise_convolutions(pointwise(tail="conv"))
    assert kinds(out)[:3] == ["StaticReshape", "MatMul", "StaticReshape"]      # y read by a convolution too
    assert kinds(out).count("MatMul") == 2      # the second convolution, with the residual add on its product
    add = next(o for o in out.ops if o.kind is OpKind.Add)
    assert [t.shape for t in add.inputs] == [(12, 323), (12, 323)]
    g = pointwise(tail="silu")
    assert_same_outputs(g, flatten_pointwise_convolutions(g))


def test_a_sum_of_two_pointwise_convolutions_is_flattened_once():
    x, shape = lt(0, (1, 8, 16, 20)), (1, 6, 16, 20)
    ws = {1: RNG.standard_normal((6, 8, 1, 1)).astype(np.float32), 2: RNG.standard_normal((6, 8, 1, 1)).astype(np.float32)}
    g = graph(conv(0, x, [lt(1, (6, 8, 1, 1), constant=True)], lt(3, shape)),
              conv(1, x, [lt(2, (6, 8, 1, 1), constant=True)], lt(4, shape)),
              op(2, "Add", [lt(3, shape), lt(4, shape)], [lt(5, shape)]), op(3, "ReLU", [lt(5, shape)], [lt(6, shape)]),
              values=ws)
    out = flatten_pointwise_convolutions(g)
    assert [k for k in kinds(out) if k != "StaticReshape"] == ["MatMul", "MatMul", "Add", "ReLU"]
    assert_same_outputs(g, out)
    feeds = feeds_for(g)
    want = np.maximum(sum(np.einsum("oc,nchw->nohw", ws[k][:, :, 0, 0], feeds[0]) for k in (1, 2)), 0)
    np.testing.assert_allclose(compile_graph(g, passes=NCHW).run({0: feeds[0]})[6], want, rtol=1e-4, atol=1e-4)


def test_small_images_strides_padding_groups_and_unbound_weights_stay_convolutions():
    assert "MatMul" not in kinds(flatten_pointwise_convolutions(pointwise(size=(15, 15))))   # 225 pixels
    x, w, y = lt(0, (1, 8, 32, 32)), lt(1, (4, 8, 1, 1), constant=True), lt(2, (1, 4, 16, 16))
    strided = graph(op(0, "Convolution", [x, w], [y], strides=[2, 2], pads_begin=[0, 0], pads_end=[0, 0],
                       dilations=[1, 1], data_format="NCX", weights_format="OIX"), values={1: np.ones((4, 8, 1, 1))})
    assert kinds(flatten_pointwise_convolutions(strided)) == ["Convolution"]
    x, w, y = lt(0, (1, 8, 32, 32)), lt(1, (4, 8, 3, 3), constant=True), lt(2, (1, 4, 32, 32))
    three = graph(op(0, "Convolution", [x, w], [y], strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1],
                     dilations=[1, 1], data_format="NCX", weights_format="OIX"), values={1: np.ones((4, 8, 3, 3))})
    assert kinds(flatten_pointwise_convolutions(three)) == ["Convolution"]
    x, w, y = lt(0, (1, 8, 32, 32)), lt(1, (8, 4, 1, 1), constant=True), lt(2, (1, 8, 32, 32))
    grouped = graph(conv(0, x, [w], y, groups=2), values={1: np.ones((8, 4, 1, 1))})
    assert kinds(flatten_pointwise_convolutions(grouped)) == ["Convolution"]
    x, w, y = lt(0, (1, 8, 32, 32)), lt(1, (4, 8, 1, 1)), lt(2, (1, 4, 32, 32))
    assert kinds(flatten_pointwise_convolutions(graph(conv(0, x, [w], y)))) == ["Convolution"]
    x, w, y = lt(0, (1, 32, 32, 8)), lt(1, (4, 8, 1, 1), constant=True), lt(2, (1, 32, 32, 4))
    nhwc = graph(op(0, "Convolution", [x, w], [y], strides=[1, 1], pads_begin=[0, 0], pads_end=[0, 0],
                    dilations=[1, 1], data_format="NXC", weights_format="OIX"), values={1: np.ones((4, 8, 1, 1))})
    assert kinds(flatten_pointwise_convolutions(nhwc)) == ["Convolution"]


def test_an_unfinalized_graph_is_refused():
    from tilefuse.graph_api import Graph
    with pytest.raises(GraphError, match="flatten_pointwise_convolutions needs a finalized graph"):
        flatten_pointwise_convolutions(Graph())


def test_the_users_partition_of_a_pointwise_convolution_holds_its_ops_and_runs_as_the_gemm():
    from tilefuse.graph_api import Engine, Stream, Tensor
    g = pointwise(tail="silu")
    (p,) = g.get_partitions()                # grouped without the layout plan: NCHW, so flattened
    assert [o.kind.value for o in p.get_ops()] == ["Convolution", "Sigmoid", "Multiply"]
    engine = Engine("cpu")
    cp = p.compile(p.get_input_ports(), p.get_output_ports(), engine)
    feeds = feeds_for(g)                     # the input and the bound weights
    x, got = feeds[0], np.empty((1, 12, 17, 19), np.float32)
    cp.execute(Stream(engine), [Tensor(cp.query_logical_tensor(t.id), engine, feeds[t.id]) for t in p.get_input_ports()],
               [Tensor(cp.query_logical_tensor(5), engine, got)])
    values = g.constant_values
    y = np.einsum("oc,nchw->nohw", values[1][:, :, 0, 0], x) + values[2].reshape(1, -1, 1, 1)
    np.testing.assert_allclose(got, y / (1 + np.exp(-y)), rtol=1e-4, atol=1e-4)
