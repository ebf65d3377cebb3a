"""Partitioning by operator class: counts, classes, cycle avoidance, debug policy; the
user's partitions hold only the user's ops and tensors and run one by one."""
import numpy as np
import pytest

from tilefuse.graph_api import Engine, GraphError, Stream, Tensor, compile_graph, reference
from tilefuse.graph_api.lowering import op_class
from tilefuse.graph_api.pipeline import partition
from graph_building import Builder, attention, conv_bn_relu, mlp, residual_block


def summary(graph, policy="fusion"):
    """(kind, the user's ops) per partition."""
    return [(p.get_kind(), [op.kind.value for op in p.get_ops()]) for p in graph.get_partitions(policy)]


def test_partitions_hold_the_users_ops_once_and_the_users_tensors():
    g = residual_block().finalize()
    parts = g.get_partitions()
    assert all(p.get_ops() for p in parts)
    assert sorted(op.id for p in parts for op in p.get_ops()) == sorted(op.id for op in g.ops)
    assert all(op is g.producer(op.outputs[0].id) for p in parts for op in p.get_ops())
    users = g.tensors
    for p in parts:
        assert all(t.id in users for t in p.get_input_ports() + p.get_output_ports())
    # the compiler's own partitions do hold the layout plan's conversions
    compiled = [[op.kind.value for op in q.ops] for q in partition(g).partitions]
    assert ["StaticTranspose"] in compiled


def _bound(builder, graph, seed=0):
    """Bind every constant input of ``builder``'s graph to its feed; the other feeds."""
    feeds = builder.feeds(seed)
    for tid, t in builder.inputs.items():
        if t.property_type.value == "constant":
            graph.bind_constant(tid, feeds[tid])
    return feeds


def _execute_one_by_one(graph, feeds):
    """Every partition compiled and executed alone with the user's tensors, in order."""
    engine = Engine("cpu")
    values = dict(feeds)
    for p in graph.get_partitions():
        cp = p.compile(p.get_input_ports(), p.get_output_ports(), engine)
        ins = [Tensor(cp.query_logical_tensor(t.id), engine, values[t.id]) for t in p.get_input_ports()]
        outs = {t.id: np.empty(cp.query_logical_tensor(t.id).shape, "float32") for t in p.get_output_ports()}
        cp.execute(Stream(engine), ins, [Tensor(cp.query_logical_tensor(tid), engine, a) for tid, a in outs.items()])
        values.update(outs)
    return values


def test_conv_bn_relu_with_constant_weights_is_one_partition_run_with_the_users_tensors():
    b = conv_bn_relu(c_in=8, c_out=8, size=20)
    g = b.finalize()
    feeds = _bound(b, g)
    (p,) = g.get_partitions()
    assert [op.kind.value for op in p.get_ops()] == ["Convolution", "BatchNormInference", "ReLU"]
    assert {t.id for t in p.get_input_ports()} == set(b.inputs)
    values = _execute_one_by_one(g, feeds)
    (out,) = g.get_output_ports()
    want = reference.run(g, feeds)[out.id]
    np.testing.assert_allclose(values[out.id], want, rtol=1e-4, atol=1e-4)


def test_a_residual_block_runs_partition_by_partition_as_compiled_whole():
    b = residual_block()
    g = b.finalize()
    feeds = _bound(b, g, seed=1)
    assert len(g.get_partitions()) == 2
    values = _execute_one_by_one(g, feeds)
    (out,) = g.get_output_ports()
    np.testing.assert_allclose(values[out.id], reference.run(g, feeds)[out.id], rtol=1e-4, atol=1e-4)


def test_a_partition_refuses_tensors_it_does_not_have():
    b = mlp()
    g = b.finalize()
    first = g.get_partitions()[0]
    cp = first.compile(first.get_input_ports(), first.get_output_ports())
    engine = Engine("cpu")
    stranger = next(t for op in g.get_partitions()[1].get_ops() for t in op.outputs)
    with pytest.raises(GraphError, match="no input logical tensor"):
        cp.execute(Stream(engine), [Tensor(stranger.with_shape((8, 19)), engine, np.zeros((8, 19), "float32"))], [])
    with pytest.raises(GraphError, match="missing input"):
        cp.execute(Stream(engine), [], [])


def test_mlp_layers_fuse_their_epilogues():
    assert summary(mlp().finalize()) == [
        ("complex", ["MatMul", "Add", "ReLU"]),
        ("complex", ["MatMul", "Add"]),
    ]


def test_conv_bn_relu_is_one_partition():
    assert summary(conv_bn_relu().finalize()) == [("complex", ["Convolution", "BatchNormInference", "ReLU"])]


def test_residual_block_takes_the_add_into_the_second_conv():
    assert summary(residual_block().finalize()) == [
        ("complex", ["Convolution", "ReLU"]),
        ("complex", ["Convolution", "Add", "ReLU"]),
    ]


def test_attention_splits_at_each_matmul():
    assert summary(attention().finalize()) == [
        ("complex", ["MatMul", "Multiply"]),
        ("reduction", ["SoftMax"]),
        ("complex", ["MatMul"]),
    ]


def test_debug_policy_gives_one_op_per_partition_and_ids_are_unique():
    g = mlp().finalize()
    parts = g.get_partitions("debug")
    assert [p.get_ops_num() for p in parts] == [1] * len(g.ops)
    assert len({p.id for p in parts + g.get_partitions()}) == len(parts) + len(g.get_partitions())
    with pytest.raises(ValueError, match="unknown partition policy"):
        g.get_partitions("greedy")


def test_no_cycle_through_an_outside_op():
    # a -> exp -> b; b -> matmul(complex, its own group) -> c; add(b, c): joining exp's group
    # would make exp-group -> matmul -> exp-group
    b = Builder()
    a, w = b.input((4, 4)), b.input((4, 4), constant=True)
    e = b.op("Exp", [a])
    m = b.op("MatMul", [e, w])
    b.op("Add", [e, m])
    parts = b.finalize().get_partitions()
    order = {op.id: k for k, p in enumerate(parts) for op in p.get_ops()}
    assert order[0] < order[1] <= order[2]
    assert [op.kind.value for op in parts[0].get_ops()] == ["Exp"]


def test_every_op_in_exactly_one_partition_in_topological_order():
    for build in (mlp, conv_bn_relu, residual_block, attention):
        g = build().finalize()
        parts = g.get_partitions()
        seen = [op.id for p in parts for op in p.get_ops()]
        assert sorted(seen) == sorted(op.id for op in g.ops)
        produced_before = set()
        for p in parts:
            for t in p.get_input_ports():
                assert g.producer(t.id) is None or t.id in produced_before
            produced_before |= {t.id for op in p.get_ops() for t in op.outputs}


def test_op_classes_come_from_the_compute_definitions():
    g = attention().finalize()
    classes = [op_class(op) for op in partition(g).ir.topological_ops()]
    assert classes == ["complex", "injective", "reduction", "complex"]


def test_unsupported_ops_stand_alone_and_are_not_supported():
    b = Builder()
    x = b.input((4, 4))
    y = b.op("ReLU", [x])
    z = b.op("Wildcard", [y], out_shape=(4, 4))
    b.op("Exp", [z])
    parts = b.finalize().get_partitions()
    assert [(p.get_kind(), p.is_supported()) for p in parts] == [("injective", True), ("opaque", False),
                                                                  ("injective", True)]
    with pytest.raises(GraphError, match="is not supported"):
        parts[1].compile(parts[1].get_input_ports(), parts[1].get_output_ports())


def test_partitions_need_a_finalized_graph():
    b = Builder()
    b.op("ReLU", [b.input((2,))])
    with pytest.raises(GraphError, match="finalized"):
        b.graph.get_partitions()


def test_a_transpose_joins_neither_a_complex_op_nor_a_reduction():
    # tiles of a matmul and rows of a reduction are written in their own order: a transposed
    # output (or input, for the reduction) would be read or written across the grain
    b = Builder()
    a, w = b.input((6, 8)), b.input((8, 10), constant=True)
    m = b.op("MatMul", [a, w])
    t = b.op("StaticTranspose", [m], order=[1, 0])
    r = b.op("ReLU", [t])
    b.op("ReduceSum", [b.op("StaticTranspose", [r], order=[1, 0])], axes=[1], keep_dims=False)
    assert summary(b.finalize()) == [
        ("complex", ["MatMul"]),
        ("injective", ["StaticTranspose", "ReLU", "StaticTranspose"]),
        ("reduction", ["ReduceSum"]),
    ]


def test_a_slice_joins_neither_a_complex_op_nor_a_reduction():
    # a grouped convolution split per group slices its input: the slices stand apart from the
    # convolution before them and from the pooling after them
    b = Builder()
    a, w = b.input((6, 8)), b.input((8, 10), constant=True)
    m = b.op("MatMul", [a, w])
    s = b.op("Slice", [m], starts=[0], ends=[4], axes=[1])
    r = b.op("ReLU", [s])
    b.op("ReduceSum", [r], axes=[1], keep_dims=False)
    assert summary(b.finalize()) == [
        ("complex", ["MatMul"]),
        ("injective", ["Slice", "ReLU"]),
        ("reduction", ["ReduceSum"]),
    ]


def test_a_slice_that_is_a_view_stands_alone_and_nothing_joins_it():
    # a channel group of a batch-1 tensor, 16-byte aligned: no copy, a view
    b = Builder()
    x = b.input((1, 8, 4, 4))
    y = b.op("Exp", [x])
    s = b.op("Slice", [y], starts=[4], ends=[8], axes=[1])
    b.op("ReLU", [s])
    b.op("Tanh", [y])
    assert summary(b.finalize()) == [
        ("injective", ["Exp", "Tanh"]), ("injective", ["Slice"]), ("injective", ["ReLU"])]


def test_a_reshape_of_rows_after_a_product_is_a_view_elementwise_ops_do_not_join():
    # the product's tiles would be cut across its rows; alone the reshape costs nothing, and
    # the relu after it reads the view with plain indices
    b = Builder()
    a, w = b.input((4, 9, 8)), b.input((8, 12), constant=True)
    m = b.op("MatMul", [a, w])
    r = b.op("StaticReshape", [m], shape=[4, 9, 3, 4], special_zero=False)
    b.op("ReLU", [r])
    # a reshape merging outer dims into the rows joins as before
    k = b.op("StaticReshape", [b.op("MatMul", [a, b.input((8, 12), constant=True)])], shape=[36, 12],
             special_zero=False)
    b.op("Tanh", [k])
    # one splitting the rows into shorter blocks does not: the template would tile the blocks
    s = b.op("StaticReshape", [b.op("MatMul", [a, b.input((8, 12), constant=True)])], shape=[4, 9, 1, 12],
             special_zero=False)
    b.op("Exp", [s])
    parts = summary(b.finalize())
    assert parts == [("complex", ["MatMul"]), ("injective", ["StaticReshape"]), ("injective", ["ReLU"]),
                     ("complex", ["MatMul", "StaticReshape", "Tanh"]), ("complex", ["MatMul"]),
                     ("injective", ["StaticReshape", "Exp"])]


def test_a_reduction_does_not_join_elementwise_ops_other_ops_read_too():
    # the pooling would become one output of many; the elementwise result is written once
    b = Builder()
    x = b.input((1, 8, 6, 6))
    y = b.op("ReLU", [b.op("Exp", [x])])
    b.op("MaxPool", [y], kernel=[2, 2], strides=[2, 2], pads_begin=[0, 0], pads_end=[0, 0], data_format="NCX")
    b.op("Tanh", [y])
    kinds = summary(b.finalize())
    assert ("reduction", ["MaxPool"]) in kinds and ("injective", ["Exp", "ReLU", "Tanh"]) in kinds


def test_heads_merged_back_after_a_batched_product_are_a_copy_of_their_own():
    # (1, 4, 9, 5) to (1, 9, 4, 5): in the product's group the template would tile 4-row products
    b = Builder()
    p = b.op("MatMul", [b.input((1, 4, 9, 8)), b.input((1, 4, 8, 5))])
    b.op("StaticReshape", [b.op("StaticTranspose", [p], order=[0, 2, 1, 3])], shape=[1, 9, 20], special_zero=False)
    # a transpose of outer axes that leaves the rows in place still joins
    q = b.op("MatMul", [b.input((2, 4, 9, 8)), b.input((2, 4, 8, 5))])
    b.op("StaticTranspose", [q], order=[1, 0, 2, 3])
    assert summary(b.finalize()) == [("complex", ["MatMul"]), ("injective", ["StaticTranspose", "StaticReshape"]),
                                     ("complex", ["MatMul", "StaticTranspose"])]


def test_a_reduction_reads_a_reshape_of_rows_as_a_view():
    b = Builder()
    a, w = b.input((4, 9, 8)), b.input((8, 12), constant=True)
    r = b.op("StaticReshape", [b.op("MatMul", [a, w])], shape=[4, 9, 3, 4], special_zero=False)
    b.op("SoftMax", [r], axis=-1)
    assert summary(b.finalize()) == [("complex", ["MatMul"]), ("injective", ["StaticReshape"]),
                                     ("reduction", ["SoftMax"])]


def test_an_output_asked_in_any_layout_is_reported_strided_with_its_shape():
    from tilefuse.graph_api import LayoutType, LogicalTensor
    b = conv_bn_relu(c_in=4, c_out=8, size=10)
    g = b.finalize()
    _bound(b, g)
    (p,) = g.get_partitions()
    (out,) = p.get_output_ports()
    wanted = LogicalTensor(out.id, out.dtype, None, LayoutType.any)
    cp = p.compile(p.get_input_ports(), [wanted])
    got = cp.query_logical_tensor(out.id)
    assert got.layout_type is LayoutType.strided and got.shape == (1, 8, 10, 10)      # the conversion stays inside


def test_groups_that_would_reach_each_other_through_the_users_ops_are_merged_in_topological_order():
    from tilefuse.graph_api.partition import _merge_cycles
    b = Builder()
    x = b.input((4,))
    a = b.op("Exp", [x])              # op 0
    m = b.op("ReLU", [a])             # op 1
    c = b.op("Add", [a, m])           # op 2
    b.op("Tanh", [c])                 # op 3
    g = b.finalize()
    # op 0 owned by the group of op 2 (as a pass's removed op can be), op 1 alone: 0 -> 1 -> 0
    merged = _merge_cycles(g, {0: 5, 1: 7, 2: 5, 3: 9})
    assert merged[0] == merged[1] == merged[2] != merged[3]
    assert merged[3] > merged[0]                                  # the merged group comes first
    assert _merge_cycles(g, {0: 2, 1: 1, 2: 0, 3: 0}) == {0: 0, 1: 1, 2: 2, 3: 2}   # renumbered in order


def _squeeze_excite(channels=12, size=7, scale_first=True):
    """x, pooled, squeezed by a 1x1 convolution with ReLU, expanded by another with Sigmoid, and
    the channel scale times x (MobileNetV3's and EfficientNet's block)."""
    b = Builder()
    x = b.input((1, channels, size, size))
    conv = dict(strides=[1, 1], pads_begin=[0, 0], pads_end=[0, 0], dilations=[1, 1], data_format="NCX",
                weights_format="OIX")
    s = b.op("ReduceMean", [x], axes=[2, 3], keep_dims=True)
    s = b.op("ReLU", [b.op("Convolution", [s, b.input((4, channels, 1, 1), constant=True)], **conv)])
    s = b.op("Sigmoid", [b.op("Convolution", [s, b.input((channels, 4, 1, 1), constant=True)], **conv)])
    b.op("Multiply", [s, x] if scale_first else [x, s])
    return b


@pytest.mark.parametrize("scale_first", [True, False])
def test_a_squeeze_excite_scale_is_not_fused_into_the_convolution_it_broadcasts(scale_first):
    # fused, the expanding convolution would be computed once per pixel of the feature map
    b = _squeeze_excite(channels=12, size=7, scale_first=scale_first)
    g = b.finalize()
    feeds = _bound(b, g, seed=2)
    kinds = summary(g)
    assert ("complex", ["Convolution", "Sigmoid"]) in kinds and ("injective", ["Multiply"]) in kinds
    values = _execute_one_by_one(g, feeds)
    (out,) = g.get_output_ports()
    np.testing.assert_allclose(values[out.id], reference.run(g, feeds)[out.id], rtol=1e-4, atol=1e-5)


def test_an_epilogue_of_the_anchors_size_still_fuses_with_a_broadcast_operand():
    # a per-channel scale broadcast into the convolution's output keeps its size: fused
    b = Builder()
    y = b.op("Convolution", [b.input((1, 5, 9, 9)), b.input((8, 5, 3, 3), constant=True)], strides=[1, 1],
             pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1], data_format="NCX", weights_format="OIX")
    b.op("Multiply", [b.input((1, 8, 1, 1), constant=True), b.op("ReLU", [y])])
    assert summary(b.finalize()) == [("complex", ["Convolution", "ReLU", "Multiply"])]


def test_a_residual_added_before_the_product_joins_the_products_partition():
    # T5 writes hidden + dense(hidden): the first input's producer (an earlier add) does not
    # take it, the product's partition does
    b = Builder()
    x = b.input((16, 24))
    h = b.op("Add", [x, b.input((16, 24))])
    y = b.op("MatMul", [h, b.input((24, 24), constant=True)])
    out = b.op("Add", [h, y])
    b.op("ReLU", [out])
    g = b.finalize()
    assert summary(g) == [("injective", ["Add"]), ("complex", ["MatMul", "Add", "ReLU"])]
    feeds = b.feeds()
    compiled = compile_graph(g)
    want = reference.run(g, feeds)
    got = compiled.run(feeds)
    for tid, value in got.items():
        np.testing.assert_allclose(value, want[tid], rtol=1e-4, atol=1e-4)


def test_a_later_input_s_product_is_not_joined_when_the_op_broadcasts_it():
    b = Builder()
    x = b.input((1, 8, 1, 1))
    gate = b.op("Sigmoid", [b.op("MatMul", [b.input((1, 8, 1, 4)), b.input((4, 1), constant=True)])])
    b.op("Multiply", [b.op("ReLU", [b.input((1, 8, 6, 6))]), gate])      # the product broadcast over 6x6
    assert ("injective", ["ReLU", "Multiply"]) in summary(b.finalize())


def test_a_reshape_of_a_norms_rows_stays_a_view_of_its_own():
    b = Builder()
    x = b.input((1, 6, 6, 16))
    n = b.op("LayerNorm", [x, b.input((16,), constant=True), b.input((16,), constant=True)], begin_norm_axis=-1,
             keep_stats=False)
    rows = b.op("StaticReshape", [n], (36, 16), shape=[36, 16], special_zero=False)
    b.op("MatMul", [rows, b.input((16, 8), constant=True)])
    g = b.finalize()
    assert summary(g) == [("reduction", ["LayerNorm"]), ("injective", ["StaticReshape"]), ("complex", ["MatMul"])]
    compiled = compile_graph(g)
    assert [s.view is not None for s in compiled.steps] == [False, True, False]
    feeds = b.feeds()
    want = reference.run(g, feeds)
    for tid, value in compiled.run(feeds).items():
        np.testing.assert_allclose(value, want[tid], rtol=1e-4, atol=1e-4)
