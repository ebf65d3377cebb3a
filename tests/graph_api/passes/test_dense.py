import numpy as np

from tilefuse.graph_api import OpKind, compile_graph
from tilefuse.graph_api.passes import flatten_dense_rows
from tilefuse.graph_api.passes.dense import FEW_ROWS
from tilefuse.graph_api.ops.schema import get_attr
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


def test_one_block_of_rows_and_tall_blocks_are_left_as_they_are_shorter_ones_flattened():
    for rows in [(1, 37), (37,), (2, FEW_ROWS)]:
        g = dense_block(rows=rows)
        assert flatten_dense_rows(g) is g or kinds(flatten_dense_rows(g)) == kinds(g)
    g = dense_block(rows=(4, 14))             # 14-row blocks: their last register tiles part empty
    out = flatten_dense_rows(g)
    matmul = next(o for o in out.ops if o.kind is OpKind.MatMul)
    assert matmul.inputs[0].shape == (56, 50) and matmul.outputs[0].shape == (56, 70)
    assert_same_outputs(g, out)


def test_batched_weights_a_transposed_activation_and_an_epilogue_with_a_reader_outside_stay():
    x, w, y = lt(0, (5, 1, 6)), lt(1, (5, 6, 7)), lt(2, (5, 1, 7))
    g = graph(op(0, "MatMul", [x, w], [y]))                  # 3-D weights: a batched product
    assert kinds(flatten_dense_rows(g)) == ["MatMul"]
    x, w, y = lt(0, (5, 6, 1)), lt(1, (6, 7)), lt(2, (5, 1, 7))
    g = graph(op(0, "MatMul", [x, w], [y], transpose_a=True))
    assert kinds(flatten_dense_rows(g)) == ["MatMul"]
    x, w, y, z, u = lt(0, (5, 1, 6)), lt(1, (6, 7)), lt(2, (5, 1, 7)), lt(3, (5, 1, 7)), lt(4, (5, 1, 7))
    g = graph(op(0, "MatMul", [x, w], [y]), op(1, "ReLU", [y], [z]), op(2, "Add", [y, z], [u]),
              op(3, "StaticTranspose", [y], [lt(5, (1, 5, 7))], order=[1, 0, 2]))
    out = flatten_dense_rows(g)                 # y is read outside: the epilogue ends at the product
    assert kinds(out) == ["StaticReshape", "MatMul", "StaticReshape", "ReLU", "Add", "StaticTranspose"]
    assert_same_outputs(g, out)


def test_a_diamond_epilogue_gelu_is_flattened_with_the_product_and_compiled_in_its_partition():
    x, w, y = lt(0, (3, 14, 6)), lt(1, (6, 7), constant=True), lt(2, (3, 14, 7))
    half, root2, one = (lt(i, (), constant=True) for i in (3, 4, 5))
    s, e, p, m, out = (lt(i, (3, 14, 7)) for i in (6, 7, 8, 9, 10))
    g = graph(op(0, "MatMul", [x, w], [y]), op(1, "Divide", [y, root2], [s]), op(2, "Erf", [s], [e]),
              op(3, "Add", [e, one], [p]), op(4, "Multiply", [y, p], [m]), op(5, "Multiply", [m, half], [out]),
              values={1: RNG_W.standard_normal((6, 7)).astype(np.float32), 3: np.array(0.5, np.float32),
                      4: np.array(np.sqrt(2), np.float32), 5: np.array(1, np.float32)})
    flat = flatten_dense_rows(g)
    assert kinds(flat) == ["StaticReshape", "MatMul", "Divide", "Erf", "Add", "Multiply", "Multiply", "StaticReshape"]
    assert all(o.outputs[0].shape == (42, 7) for o in flat.ops if o.kind is not OpKind.StaticReshape)
    assert_same_outputs(g, flat)
    compiled = compile_graph(g)
    (anchor,) = [s for s in compiled.steps if s.kind == "complex"]
    # compiled, the division by sqrt(2) is a multiply by its reciprocal (multiply_by_reciprocals)
    assert [o.kind.value for o in anchor.ops] == ["MatMul", "Multiply", "Erf", "Add", "Multiply", "Multiply"]
    xs = feeds_for(g)[0]
    yv = xs @ g.constant_values[1]
    from math import erf
    want = yv * (np.vectorize(erf)(yv / np.sqrt(2)) + 1) / 2
    np.testing.assert_allclose(compiled.run({0: xs})[10], want, rtol=1e-5, atol=1e-5)


def test_an_add_of_two_products_belongs_to_one_epilogue():
    x, y = lt(0, (4, 3, 6)), lt(1, (4, 3, 6))
    w, v = lt(2, (6, 5), constant=True), lt(3, (6, 5), constant=True)
    a, b, s = lt(4, (4, 3, 5)), lt(5, (4, 3, 5)), lt(6, (4, 3, 5))
    g = graph(op(0, "MatMul", [x, w], [a]), op(1, "MatMul", [y, v], [b]), op(2, "Add", [a, b], [s]),
              values={2: RNG_W.standard_normal((6, 5)).astype(np.float32),
                      3: RNG_W.standard_normal((6, 5)).astype(np.float32)})
    flat = flatten_dense_rows(g)
    assert kinds(flat).count("Add") == 1 and kinds(flat).count("MatMul") == 2
    assert_same_outputs(g, flat)


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



def two_blocks(gamma_first=True):
    """x (4, 14, 8) @ w1 + b1, then a LayerNorm of it over the channels, @ w2 + b2, scaled by a
    (1, 1, 8) gamma (as ``gamma * y`` when ``gamma_first``), plus the first block's output."""
    r = np.random.default_rng(7)
    x, w1, b1, y1, e1 = lt(0, (4, 14, 8)), lt(1, (8, 8), constant=True), lt(2, (8,), constant=True), \
        lt(3, (4, 14, 8)), lt(4, (4, 14, 8))
    g1, be1, n1 = lt(5, (8,), constant=True), lt(6, (8,), constant=True), lt(7, (4, 14, 8))
    w2, b2, y2, z2 = lt(8, (8, 8), constant=True), lt(9, (8,), constant=True), lt(10, (4, 14, 8)), lt(11, (4, 14, 8))
    gamma, s2, out = lt(12, (1, 1, 8), constant=True), lt(13, (4, 14, 8)), lt(14, (4, 14, 8))
    scale = [gamma, z2] if gamma_first else [z2, gamma]
    return graph(op(0, "MatMul", [x, w1], [y1]), op(1, "Add", [y1, b1], [e1]),
                 op(2, "LayerNorm", [e1, g1, be1], [n1], begin_norm_axis=-1, keep_stats=False),
                 op(3, "MatMul", [n1, w2], [y2]), op(4, "Add", [y2, b2], [z2]), op(5, "Multiply", scale, [s2]),
                 op(6, "Add", [s2, e1], [out]),
                 values={1: r.standard_normal((8, 8)).astype("f4"), 2: r.standard_normal(8).astype("f4"),
                         5: r.standard_normal(8).astype("f4"), 6: r.standard_normal(8).astype("f4"),
                         8: r.standard_normal((8, 8)).astype("f4"), 9: r.standard_normal(8).astype("f4"),
                         12: r.standard_normal((1, 1, 8)).astype("f4")})


def test_a_layer_norm_of_rows_the_pass_computed_runs_on_the_rows_and_blocks_chain_without_reshapes():
    g = two_blocks()
    out = flatten_dense_rows(g)
    norm = next(o for o in out.ops if o.kind is OpKind.LayerNorm)
    assert norm.inputs[0].shape == (56, 8) and norm.outputs[0].shape == (56, 8)
    assert get_attr(norm, "begin_norm_axis") == -1
    second = [o for o in out.ops if o.kind is OpKind.MatMul][1]
    assert second.inputs[0].id == norm.outputs[0].id            # read as the norm wrote it
    residual = next(o for o in out.ops if o.id == 6)
    assert residual.inputs[1].shape == (56, 8) and out.producer(residual.inputs[1].id).kind is OpKind.Add
    assert_same_outputs(g, out)


def test_a_scale_written_first_stays_in_the_products_partition_and_no_reshape_is_copied():
    g = two_blocks(gamma_first=True)
    compiled = compile_graph(g)
    anchors = [[o.kind.value for o in s.ops] for s in compiled.steps if s.kind == "complex"]
    assert anchors == [["MatMul", "Add"], ["MatMul", "Add", "Multiply", "Add"]]
    copies = [s for s in compiled.steps if s.kernel is not None and all(o.kind is OpKind.StaticReshape for o in s.ops)]
    assert copies == [] or all(s.index == compiled.steps[-1].index for s in copies)    # the graph's output alone
    feeds = feeds_for(g)
    v = g.constant_values
    e1 = feeds[0] @ v[1] + v[2]
    mean, var = e1.mean(-1, keepdims=True), e1.var(-1, keepdims=True)
    n1 = (e1 - mean) / np.sqrt(var + 1e-5) * v[5] + v[6]
    want = v[12] * (n1 @ v[8] + v[9]) + e1
    np.testing.assert_allclose(compiled.run({0: feeds[0]})[14], want, rtol=1e-4, atol=1e-4)
