"""The graph passes run before partitioning: the compiler's partitions compute the rewritten
ops, the user's partitions name the user's ops, and constant subgraphs are folded or computed
once."""
import numpy as np

from tilefuse.graph_api import OpKind, PropertyType, compile_graph, reference
from tilefuse.graph_api.pipeline import partition
from graph_building import Builder


def ids(parts):
    return [[op.id for op in p.get_ops()] for p in parts]


def test_transpose_folded_into_matmul_belongs_to_its_partition():
    b = Builder()
    x, w = b.input((5, 7)), b.input((3, 7))
    wt = b.op("StaticTranspose", [w], order=[1, 0])
    y = b.op("MatMul", [x, wt])
    b.op("ReLU", [y])
    g = b.finalize()
    parts = g.get_partitions()
    assert ids(parts) == [[0, 1, 2]]
    (p,) = parts
    assert [t.id for t in p.get_input_ports()] == [1, 0]     # the user's tensors, by first use
    (q,) = partition(g).partitions
    assert [op.kind for op in q.ops] == [OpKind.MatMul, OpKind.ReLU]
    assert q.ops[0].attrs["transpose_b"] is True
    feeds = b.feeds()
    np.testing.assert_allclose(compile_graph(g).run(feeds)[4], reference.run(g, feeds)[4], rtol=1e-5, atol=1e-5)


def test_duplicates_and_every_user_op_appear_exactly_once():
    b = Builder()
    x = b.input((4, 9))
    e1, e2 = b.op("Exp", [x]), b.op("Exp", [x])
    s = b.op("Add", [e1, e2])
    b.op("ReLU", [s])
    g = b.finalize()
    parts = g.get_partitions()
    seen = [op.id for p in parts for op in p.get_ops()]
    assert sorted(seen) == [op.id for op in g.ops]
    assert sum(len(q.ops) for q in partition(g).partitions) == 3         # the second Exp is computed once
    feeds = b.feeds()
    np.testing.assert_allclose(compile_graph(g).run(feeds)[4], reference.run(g, feeds)[4], rtol=1e-6)


def test_debug_policy_runs_no_pass():
    b = Builder()
    x, w = b.input((5, 7)), b.input((3, 7))
    b.op("MatMul", [x, b.op("StaticTranspose", [w], order=[1, 0])])
    parts = b.finalize().get_partitions("debug")
    assert [[op.kind for op in p.ops] for p in parts] == [[OpKind.StaticTranspose], [OpKind.MatMul]]


def test_constant_subgraph_is_its_own_partition_and_runs_once():
    b = Builder()
    x, w = b.input((6, 5)), b.input((5, 4), constant=True)
    scaled = b.op("Exp", [w])                      # constant: computed once per weight array
    y = b.op("MatMul", [x, scaled])
    b.op("Tanh", [y])
    g = b.finalize()
    parts = g.get_partitions()
    assert ids(parts) == [[0], [1, 2]]
    assert partition(g).partitions[0].output_ports[0].property_type is PropertyType.constant
    cg = compile_graph(g)
    feeds = b.feeds()
    first = cg.run(feeds)[4]
    np.testing.assert_allclose(first, reference.run(g, feeds)[4], rtol=1e-5, atol=1e-6)
    step = cg.steps[0]
    kept = step._kept[1]
    feeds2 = {0: feeds[0] * 2, 1: feeds[1]}        # a new input, the same weight array
    cg.run(feeds2)
    assert step._kept[1] is kept                    # the constant partition did not run again
    feeds3 = {0: feeds[0], 1: feeds[1] + 1}         # a new weight array: recomputed
    np.testing.assert_allclose(cg.run(feeds3)[4], reference.run(g, feeds3)[4], rtol=1e-5, atol=1e-6)
    assert step._kept[1] is not kept


def test_bound_constants_are_folded_and_need_no_feed():
    b = Builder()
    x, w, one = b.input((6, 5)), b.input((5, 4), constant=True), b.input((4,), constant=True)
    y = b.op("MatMul", [x, b.op("Exp", [w])])
    y = b.op("Multiply", [y, one])                  # times one: removed
    b.op("ReLU", [y])
    g = b.graph
    weights = np.linspace(-1, 1, 20, dtype=np.float32).reshape(5, 4)
    g.bind_constant(1, weights)
    g.bind_constant(2, np.ones(4))
    g.finalize()
    parts = g.get_partitions()
    assert ids(parts) == [[0, 1, 2, 3]]
    assert [[op.kind for op in q.ops] for q in partition(g).partitions] == [[OpKind.MatMul, OpKind.ReLU]]
    xs = b.feeds()[0]
    got = compile_graph(g).run({0: xs})[6]
    np.testing.assert_allclose(got, np.maximum(xs @ np.exp(weights), 0), rtol=1e-5, atol=1e-6)


def test_dead_ops_attach_upstream():
    b = Builder()
    x = b.input((3, 3))
    y = b.op("ReLU", [x])
    b.op("Exp", [y])                                # not wanted: the graph ends at y
    b.graph.add_op(__import__("tilefuse.graph_api", fromlist=["Op"]).Op(9, OpKind.End, [y], []))
    g = b.finalize()
    parts = g.get_partitions()
    assert sorted(op.id for p in parts for op in p.get_ops()) == [0, 1, 9]
    assert all(op.kind is not OpKind.Exp for q in partition(g).partitions for op in q.ops)
