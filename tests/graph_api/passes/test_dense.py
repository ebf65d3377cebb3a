import numpy as np

from tilefuse.graph_api import OpKind, compile_graph
from tilefuse.graph_api.passes import flatten_dense_rows
from passes_helpers import assert_same_outputs, feeds_for, graph, lt, op, snapshot

RNG_W = np.random.default_rng(4)


def kinds(g):
    return [o.kind.value for o in g.topological_ops()]


def dense_block(rows=(37, 1), k=50, n=70, residual=True, consumer=True):
    """x (rows..., k) @ w (k, n) + bias, ReLU, [+ residual of the full shape], [then a
    transpose of the last two axes]."""
    w = np.random.default_rng(1).standard_normal((k, n)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    x, wt, bt = lt(0, (*rows, k)), lt(1, (k, n), constant=True), lt(2, (n,), constant=True)
    y, z, r = lt(3, (*rows, n)), lt(4, (*rows, n)), lt(5, (*rows, n))
    ops = [op(0, "MatMul", [x, wt], [y]), op(1, "Add", [y, bt], [z]), op(2, "ReLU", [z], [lt(6, (*rows, n))])]
    last = lt(6, (*rows, n))
    if residual:
        ops.append(op(3, "Add", [last, r], [lt(7, (*rows, n))]))
        last = lt(7, (*rows, n))
    if consumer:
        ops.append(op(4, "StaticTranspose", [last], [lt(8, (*rows[:-1], n, rows[-1]))], order=[0, 2, 1][-len(rows) - 1:]
                      if len(rows) == 2 else [1, 0]))
    return graph(*ops, values={1: w, 2: b})


def test_one_row_blocks_multiply_as_one_gemm_with_the_epilogue_on_its_rows():
    g = dense_block()
    before = snapshot(g)
    out = flatten_dense_rows(g)
    assert snapshot(g) == before
    assert [k for k in kinds(out) if k != "StaticReshape"] == ["MatMul", "Add", "ReLU", "Add", "StaticTranspose"]
    assert kinds(out).count("StaticReshape") == 3          # x and the residual to rows, the sum back
    matmul = next(o for o in out.ops if o.kind is OpKind.MatMul)
    assert matmul.inputs[0].shape == (37, 50) and matmul.outputs[0].shape == (37, 70)
    residual = next(o for o in out.ops if o.kind is OpKind.Add and o.id == 3)
    assert [t.shape for t in residual.inputs] == [(37, 70), (37, 70)]
    assert {t.id for t in out.get_output_ports()} == {8}
    assert_same_outputs(g, out)


def test_compiled_the_gemm_partition_holds_the_epilogue_and_reads_its_inputs_as_views():
    g = dense_block()
    compiled = compile_graph(g)
    anchors = [s for s in compiled.steps if s.kind == "complex"]
    assert len(anchors) == 1
    assert [o.kind.value for o in anchors[0].ops] == ["MatMul", "Add", "ReLU", "Add"]
    assert anchors[0].ops[0].outputs[0].shape == (37, 70)
    to_rows = [s for s in compiled.steps if s.ops[0].kind is OpKind.StaticReshape and len(s.ops) == 1]
    assert [s.view[3] for s in to_rows] == [(37, 50), (37, 70)]       # x and the residual: no copies
    feeds = feeds_for(g)
    x, r = feeds[0], feeds[5]
    want = np.swapaxes(np.maximum(x @ g.constant_values[1] + g.constant_values[2], 0) + r, 1, 2)
    got = compiled.run({k: v for k, v in feeds.items() if k in (0, 5)})[8]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_graph_output_inside_the_epilogue_ends_it():
    g = dense_block(residual=False, consumer=False)          # ReLU's output is the graph output
    out = flatten_dense_rows(g)
    assert kinds(out) == ["StaticReshape", "MatMul", "Add", "ReLU", "StaticReshape"]
    assert {t.id for t in out.get_output_ports()} == {6}
    assert_same_outputs(g, out)


def test_row_blocks_that_fill_a_register_tile_are_left_as_they_are():
    for rows in [(4, 8), (1, 37), (37,)]:
        g = dense_block(rows=rows)
        assert flatten_dense_rows(g) is g or kinds(flatten_dense_rows(g)) == kinds(g)


def test_batched_weights_a_transposed_activation_and_an_epilogue_with_a_reader_outside_stay():
    x, w, y = lt(0, (5, 1, 6)), lt(1, (5, 6, 7)), lt(2, (5, 1, 7))
    g = graph(op(0, "MatMul", [x, w], [y]))                  # 3-D weights: a batched product
    assert kinds(flatten_dense_rows(g)) == ["MatMul"]
    x, w, y = lt(0, (5, 6, 1)), lt(1, (6, 7)), lt(2, (5, 1, 7))
    g = graph(op(0, "MatMul", [x, w], [y], transpose_a=True))
    assert kinds(flatten_dense_rows(g)) == ["MatMul"]
    x, w, y, z, u = lt(0, (5, 1, 6)), lt(1, (6, 7)), lt(2, (5, 1, 7)), lt(3, (5, 1, 7)), lt(4, (5, 1, 7))
    g = graph(op(0, "MatMul", [x, w], [y]), op(1, "ReLU", [y], [z]), op(2, "Add", [y, z], [u]))
    out = flatten_dense_rows(g)                 # y has two readers: the epilogue ends at the product
    assert kinds(out) == ["StaticReshape", "MatMul", "StaticReshape", "ReLU", "Add"]
    assert_same_outputs(g, out)


def test_an_epilogue_operand_with_leading_unit_dims_is_read_as_its_last_axis():
    x, w, y = lt(0, (9, 1, 6)), lt(1, (6, 5), constant=True), lt(2, (9, 1, 5))
    scale, z = lt(3, (1, 1, 5), constant=True), lt(4, (9, 1, 5))
    g = graph(op(0, "MatMul", [x, w], [y]), op(1, "Multiply", [y, scale], [z]),
              op(2, "StaticTranspose", [z], [lt(5, (1, 9, 5))], order=[1, 0, 2]),
              values={1: RNG_W.standard_normal((6, 5)).astype(np.float32),
                      3: RNG_W.standard_normal((1, 1, 5)).astype(np.float32)})
    out = flatten_dense_rows(g)
    multiply = next(o for o in out.ops if o.kind is OpKind.Multiply)
    assert [t.shape for t in multiply.inputs] == [(9, 5), (5,)] and multiply.outputs[0].shape == (9, 5)
    assert_same_outputs(g, out)
    compiled = compile_graph(g)
    feeds = feeds_for(g)
    want = np.swapaxes(feeds[0] @ g.constant_values[1] * g.constant_values[3], 0, 1)
    np.testing.assert_allclose(compiled.run({0: feeds[0]})[5], want, rtol=1e-5, atol=1e-5)

