"""plan_layouts: 2-D NCHW convolutions run channels-last, and so do the ops between them that
allow it; the graph's outputs keep their ids, shapes and values; what cannot be carried reads
NCHW from a transpose back."""
import numpy as np
import pytest

from tilefuse.graph_api import OpKind, compile_graph, reference
from tilefuse.graph_api.passes import plan_layouts
from passes_helpers import assert_same_outputs, feeds_for, graph, lt, op, snapshot

RNG = np.random.default_rng(11)
PADDED = dict(strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1], data_format="NCX",
              weights_format="OIX")


def conv(oid, x, w_id, c_in, c_out, out_id, size, values, groups=1, **attrs):
    """A padded 3x3 convolution of ``x`` into a new (1, c_out, size, size) tensor, its weights bound."""
    w = lt(w_id, (c_out, c_in // groups, 3, 3), constant=True)
    values[w_id] = RNG.standard_normal(w.shape) / 3
    y = lt(out_id, (1, c_out, size, size))
    return op(oid, "Convolution", [x, w], [y], groups=groups, **{**PADDED, **attrs}), y


def kinds(g):
    return [o.kind for o in g.topological_ops()]


def transposes(g):
    return [o for o in g.ops if o.kind is OpKind.StaticTranspose]


def check_compiled(before, after, seed=0):
    """Both graphs compiled and the reference agree on every output of ``before``."""
    feeds = feeds_for(before, seed)
    want = reference.run(before, feeds)
    run_feeds = {k: v for k, v in feeds.items() if k not in before.constant_values}
    got = compile_graph(before).run(run_feeds)
    for tid, value in want.items():
        np.testing.assert_allclose(got[tid], value, rtol=1e-4, atol=1e-4)
    assert_same_outputs(before, after, seed=seed)


def residual_block(size=13, c=5):
    """x -> conv -> relu -> conv -> add x -> relu -> global mean (keep dims) -> reshape."""
    values = {}
    x = lt(0, (1, c, size, size))
    c1, y1 = conv(0, x, 1, c, c, 2, size, values)
    r1 = lt(3, y1.shape)
    c2, y2 = conv(2, r1, 4, c, c, 5, size, values)
    s, r2, m, f = lt(6, y2.shape), lt(7, y2.shape), lt(8, (1, c, 1, 1)), lt(9, (1, c))
    ops = [c1, op(1, "ReLU", [y1], [r1]), c2, op(3, "Add", [y2, x], [s]), op(4, "ReLU", [s], [r2]),
           op(5, "ReduceMean", [r2], [m], axes=[2, 3], keep_dims=True),
           op(6, "StaticReshape", [m], [f], shape=[1, c], special_zero=False)]
    return graph(*ops, values=values)


def test_a_residual_block_converts_its_input_once_and_its_pooled_result_back():
    g = residual_block()
    before = snapshot(g)
    planned = plan_layouts(g)
    assert snapshot(g) == before                      # the input graph is not touched
    convs = [o for o in planned.ops if o.kind is OpKind.Convolution]
    assert [o.attrs["data_format"] for o in convs] == ["NXC", "NXC"]
    orders = [o.attrs["order"] for o in transposes(planned)]
    assert orders == [[0, 2, 3, 1], [0, 3, 1, 2]]     # the input in; the (1, 1, 1, C) mean out
    back = transposes(planned)[1]
    assert back.outputs[0].id == 8 and back.inputs[0].shape == (1, 1, 1, 5)
    add = next(o for o in planned.ops if o.kind is OpKind.Add)
    assert all(t.shape == (1, 13, 13, 5) for t in add.inputs)   # the residual is the converted input
    check_compiled(g, planned)


def test_graph_outputs_keep_their_ids_and_nchw_shapes():
    values = {}
    x = lt(0, (1, 3, 9, 11))
    c1, y1 = conv(0, x, 1, 3, 6, 2, 9, values)
    y1 = lt(2, (1, 6, 9, 11))
    c1 = op(0, "Convolution", [x, c1.inputs[1]], [y1], groups=1, **PADDED)
    r = lt(3, (1, 6, 9, 11))
    g = graph(c1, op(1, "ReLU", [y1], [r]), op(2, "Exp", [y1], [lt(4, (1, 6, 9, 11))]), values=values)
    planned = plan_layouts(g)
    outputs = {t.id: t.shape for t in planned.get_output_ports()}
    assert outputs == {3: (1, 6, 9, 11), 4: (1, 6, 9, 11)}
    check_compiled(g, planned)


def test_concat_pooling_and_per_channel_constants_stay_channels_last():
    values = {}
    x = lt(0, (1, 4, 11, 11))
    ca, ya = conv(0, x, 1, 4, 3, 2, 11, values)
    cb, yb = conv(1, x, 3, 4, 5, 4, 11, values)
    cat, pooled = lt(5, (1, 8, 11, 11)), lt(6, (1, 8, 5, 5))
    scale, scaled = lt(7, (8, 1, 1), constant=True), lt(8, (1, 8, 5, 5))
    values[7] = RNG.uniform(0.5, 2, (8, 1, 1))
    ops = [ca, cb, op(2, "Concat", [ya, yb], [cat], axis=1),
           op(3, "MaxPool", [cat], [pooled], kernel=[3, 3], strides=[2, 2], pads_begin=[0, 0], pads_end=[0, 0],
              data_format="NCX"),
           op(4, "Multiply", [pooled, scale], [scaled])]
    g = graph(*ops, values=values)
    planned = plan_layouts(g)
    by_kind = {o.kind: o for o in planned.ops}
    assert by_kind[OpKind.Concat].attrs["axis"] == 3
    assert by_kind[OpKind.MaxPool].attrs["data_format"] == "NXC"
    mul = by_kind[OpKind.Multiply]
    assert mul.inputs[1].shape == (1, 1, 1, 8)        # the constant, permuted at compile time
    assert len(transposes(planned)) == 2               # x in, the result out
    check_compiled(g, planned)


def test_an_operand_of_lower_rank_that_is_not_constant_keeps_its_op_in_nchw():
    values = {}
    x, v = lt(0, (1, 3, 7, 7)), lt(9, (7,))
    c, y = conv(0, x, 1, 3, 4, 2, 7, values)
    out = lt(3, (1, 4, 7, 7))
    g = graph(c, op(1, "Add", [y, v], [out]), values=values)
    planned = plan_layouts(g)
    add = next(o for o in planned.ops if o.kind is OpKind.Add)
    assert add.inputs[0].id == 2 and add.inputs[0].shape == (1, 4, 7, 7)     # read back in NCHW
    check_compiled(g, planned)


def test_a_graph_of_mostly_grouped_convolutions_is_left_alone():
    # groups of 6 channels: too wide to run as diagonals, too narrow for a vector's tile
    values = {}
    x = lt(0, (1, 12, 7, 7))
    c1, y1 = conv(0, x, 1, 12, 12, 2, 7, values, groups=2)
    c2, y2 = conv(1, y1, 3, 12, 12, 4, 7, values, groups=2)
    c3, _ = conv(2, y2, 5, 12, 12, 6, 7, values)
    g = graph(c1, c2, c3, values=values)
    assert kinds(plan_layouts(g)) == kinds(g)
    assert not transposes(plan_layouts(g))


def mobilenet_block(c=6, size=11, bound=True):
    """conv c -> 2c -> depthwise 3x3 (weights bound or fed) -> ReLU -> conv 2c -> c."""
    values = {}
    x = lt(0, (1, c, size, size))
    c1, y1 = conv(0, x, 1, c, 2 * c, 2, size, values)
    if bound:
        dw, y2 = conv(1, y1, 3, 2 * c, 2 * c, 4, size, values, groups=2 * c)
    else:
        y2 = lt(4, y1.shape)
        dw = op(1, "Convolution", [y1, lt(3, (2 * c, 1, 3, 3))], [y2], groups=2 * c, **PADDED)
    r = lt(5, y2.shape)
    c3, _ = conv(3, r, 6, 2 * c, c, 7, size, values)
    return graph(c1, dw, op(2, "ReLU", [y2], [r]), c3, values=values)


def test_a_mobilenet_block_runs_channels_last_with_its_depthwise_weights_in_hwio():
    g = mobilenet_block()
    planned = plan_layouts(g)
    convs = [o for o in planned.ops if o.kind is OpKind.Convolution]
    assert [o.attrs["data_format"] for o in convs] == ["NXC"] * 3
    depthwise = convs[1]
    assert depthwise.attrs["weights_format"] == "XIO" and depthwise.inputs[1].shape == (3, 3, 1, 12)
    np.testing.assert_array_equal(planned.constant_values[depthwise.inputs[1].id],
                                  g.constant_values[3].transpose(2, 3, 1, 0))
    assert len(transposes(planned)) == 2                  # in once, out once
    check_compiled(g, planned)


def test_a_depthwise_convolution_with_weights_fed_at_run_time_stays_nchw():
    # its weights cannot be put in HWIO before the run; the block's small tensors may flip
    g = mobilenet_block(bound=False)
    planned = plan_layouts(g)
    convs = [o for o in planned.ops if o.kind is OpKind.Convolution]
    assert [o.attrs["data_format"] for o in convs] == ["NXC", "NCX", "NXC"]
    assert convs[1].inputs[1].id == 3 and convs[1].attrs["weights_format"] == "OIX"
    check_compiled(g, planned)


def convnext_block(c=6, size=9, permute_is_output=False):
    """conv 3x3 -> depthwise 3x3 -> permute to NHWC -> LayerNorm -> MatMul c -> 2c -> GELU ->
    MatMul 2c -> c -> permute back -> layer scale -> add the block's input."""
    values = {}
    x = lt(0, (1, c, size, size))
    c1, y1 = conv(0, x, 1, c, c, 2, size, values)
    dw, y2 = conv(1, y1, 3, c, c, 4, size, values, groups=c)
    nhwc = (1, size, size, c)
    p1, n = lt(5, nhwc), lt(6, nhwc)
    gamma, beta = lt(7, (c,), constant=True), lt(8, (c,), constant=True)
    w1, h, a = lt(9, (c, 2 * c), constant=True), lt(10, (1, size, size, 2 * c)), lt(11, (1, size, size, 2 * c))
    w2, d, p2 = lt(12, (2 * c, c), constant=True), lt(13, nhwc), lt(14, (1, c, size, size))
    scale, scaled, out = lt(15, (c, 1, 1), constant=True), lt(16, (1, c, size, size)), lt(17, (1, c, size, size))
    for tid, shape in ((7, (c,)), (8, (c,)), (9, (c, 2 * c)), (12, (2 * c, c)), (15, (c, 1, 1))):
        values[tid] = RNG.standard_normal(shape)
    ops = [c1, dw, op(2, "StaticTranspose", [y2], [p1], order=[0, 2, 3, 1]),
           op(3, "LayerNorm", [p1, gamma, beta], [n], keep_stats=False, begin_norm_axis=-1),
           op(4, "MatMul", [n, w1], [h]), op(5, "GELU", [h], [a]), op(6, "MatMul", [a, w2], [d]),
           op(7, "StaticTranspose", [d], [p2], order=[0, 3, 1, 2]), op(8, "Multiply", [p2, scale], [scaled]),
           op(9, "Add", [scaled, y1], [out])]
    if permute_is_output:
        ops.append(op(10, "End", [p1], []))
    return graph(*ops, values=values)


def test_a_convnext_block_runs_channels_last_without_its_own_permutes():
    g = convnext_block()
    planned = plan_layouts(g)
    assert [o.attrs["data_format"] for o in planned.ops if o.kind is OpKind.Convolution] == ["NXC"] * 2
    assert [o.attrs["order"] for o in transposes(planned)] == [[0, 2, 3, 1], [0, 3, 1, 2]]   # in once, out once
    norm = next(o for o in planned.ops if o.kind is OpKind.LayerNorm)
    depthwise = [o for o in planned.ops if o.kind is OpKind.Convolution][1]
    assert norm.inputs[0].id == depthwise.outputs[0].id          # the permute to NHWC is the conv's own output
    check_compiled(g, planned)


def test_a_permute_that_is_a_graph_output_is_kept():
    g = convnext_block(permute_is_output=True)
    planned = plan_layouts(g)
    assert 5 in {t.id for o in planned.ops for t in o.outputs}   # produced under its own id
    assert 5 in {t.id for t in planned.get_output_ports()}
    assert_same_outputs(g, planned)


@pytest.mark.parametrize("width", [2, 4, 8, 12])
def test_convolutions_in_groups_of_eight_channels_or_more_or_of_four_or_fewer_run_channels_last(width):
    # RegNet's and ResNeXt's grouped 3x3 convolutions: the complex template tiles a group's
    # channels; groups of 2 to 4 (ResNeXt's first stage) run as diagonals in the window template
    values = {}
    x = lt(0, (1, 3 * width, 9, 9))
    c1, y1 = conv(0, x, 1, 3 * width, 3 * width, 2, 9, values)
    c2, y2 = conv(1, y1, 3, 3 * width, 3 * width, 4, 9, values, groups=3)
    c3, _ = conv(2, y2, 5, 3 * width, 2 * width, 6, 9, values)
    g = graph(c1, c2, c3, values=values)
    planned = plan_layouts(g)
    assert [o.attrs["data_format"] for o in planned.ops if o.kind is OpKind.Convolution] == ["NXC"] * 3
    assert len(transposes(planned)) == 2                  # in once, out once
    check_compiled(g, planned)


def test_a_convolution_in_groups_of_four_builds_its_diagonal_weights_once():
    values = {}
    x = lt(0, (1, 20, 9, 9))
    c1, y1 = conv(0, x, 1, 20, 20, 2, 9, values)
    c2, _ = conv(1, y1, 3, 20, 20, 4, 9, values, groups=5)
    g = graph(c1, c2, values=values)
    compiled = compile_graph(g)
    packed = [v.shape for k, v in compiled.bound.items() if isinstance(k, tuple) and k[0] == "packed"]
    assert (3, 3, 7, 1, 20) in packed        # 7 diagonals of 3x3 taps by 20 channels, computed at load
    check_compiled(g, plan_layouts(g))


def test_graphs_without_nchw_convolutions_are_returned_as_they_are():
    g = graph(op(0, "ReLU", [lt(0, (1, 2, 3, 3))], [lt(1, (1, 2, 3, 3))]))
    assert plan_layouts(g) is g.ir() or kinds(plan_layouts(g)) == [OpKind.ReLU]
    values = {}
    c, _ = conv(0, lt(0, (1, 2, 5, 5)), 1, 2, 2, 2, 5, values, data_format="NXC")
    c = op(0, "Convolution", [lt(0, (1, 5, 5, 2)), lt(1, (3, 3, 2, 2), constant=True)], [lt(2, (1, 5, 5, 2))],
           **{**PADDED, "data_format": "NXC", "weights_format": "XIO"})
    g = graph(c, values={1: RNG.standard_normal((3, 3, 2, 2))})
    assert not transposes(plan_layouts(g))


def test_an_unfinalized_graph_is_refused():
    from tilefuse.graph_api import Graph, GraphError
    with pytest.raises(GraphError, match="finalized"):
        plan_layouts(Graph())


def test_a_squeeze_and_excitation_scale_stays_channels_last_through_the_pooled_branch():
    values = {}
    x = lt(0, (1, 6, 9, 9))
    c, y = conv(0, x, 1, 6, 6, 2, 9, values)
    pooled, gate, out = lt(3, (1, 6, 1, 1)), lt(4, (1, 6, 1, 1)), lt(5, (1, 6, 9, 9))
    half, scaled = lt(6, (), constant=True), lt(7, (1, 6, 9, 9))
    values[6] = np.float32(0.5)
    g = graph(c, op(1, "ReduceMean", [y], [pooled], axes=[-2, -1], keep_dims=True),
              op(2, "Sigmoid", [pooled], [gate]), op(3, "Multiply", [y, gate], [out]),
              op(4, "Multiply", [out, half], [scaled]), values=values)
    planned = plan_layouts(g)
    assert len(transposes(planned)) == 2                           # x in, the result out: nothing between
    assert all(o.outputs[0].shape[-1] == 6 for o in planned.ops if o.kind is not OpKind.StaticTranspose)
    check_compiled(g, planned)


def test_a_plan_that_flips_big_tensors_between_its_convolutions_is_dropped():
    # conv -> softmax over the channels (not carried) -> conv: NCHW back and forth for each
    # softmax, two transposes of 5x64x64 for two convolutions
    values = {}
    x = lt(0, (1, 5, 64, 64))
    c1, y1 = conv(0, x, 1, 5, 5, 2, 64, values)
    s1 = lt(3, y1.shape)
    c2, _ = conv(2, s1, 4, 5, 5, 5, 64, values)
    g = graph(c1, op(1, "SoftMax", [y1], [s1], axis=1), c2, values=values)
    planned = plan_layouts(g)
    assert not transposes(planned)
    assert all(o.attrs.get("data_format", "NCX") == "NCX" for o in planned.ops if o.kind is OpKind.Convolution)


def test_the_transposes_at_the_graph_inputs_and_outputs_do_not_count_as_flips():
    # one convolution with a big input and a big output: converted in and out once, kept
    values = {}
    c, _ = conv(0, lt(0, (1, 5, 64, 64)), 1, 5, 8, 2, 64, values)
    g = graph(c, values=values)
    planned = plan_layouts(g)
    assert [o.attrs["order"] for o in transposes(planned)] == [[0, 2, 3, 1], [0, 3, 1, 2]]
    check_compiled(g, planned)
