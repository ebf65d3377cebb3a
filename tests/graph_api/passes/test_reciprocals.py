"""multiply_by_reciprocals: a float32 Divide by a bound constant becomes a Multiply by its
reciprocal; divisions whose exact meaning a reciprocal would change stay."""
import numpy as np
import pytest

from tilefuse.graph_api import DataType, OpKind, compile_graph, reference
from tilefuse.graph_api.passes import multiply_by_reciprocals, run_passes
from passes_helpers import assert_same_outputs, feeds_for, graph, lt, op, snapshot


def divide(value, x_shape=(3, 8), c_shape=(), dtype=DataType.f32, then_relu=True):
    x, c, y = lt(0, x_shape, dtype), lt(1, c_shape, dtype, constant=True), lt(2, x_shape, dtype)
    ops = [op(0, "Divide", [x, c], [y])]
    if then_relu:
        ops.append(op(1, "ReLU", [y], [lt(3, x_shape, dtype)]))
    return graph(*ops, values={1: np.broadcast_to(np.asarray(value, dtype=dtype.numpy), c_shape).copy()})


@pytest.mark.parametrize("value, c_shape", [(1.4142135, ()), (8.0, ()), (-3.0, (1, 8)),
                                            (np.linspace(0.5, 7.0, 8), (8,)), (1e-30, ())])
def test_a_division_by_a_constant_multiplies_by_its_reciprocal(value, c_shape):
    g = divide(value, c_shape=c_shape)
    before = snapshot(g)
    ir = multiply_by_reciprocals(g)
    assert snapshot(g) == before                     # the input graph is not modified
    mul = ir.ops[0]
    assert mul.kind is OpKind.Multiply and mul.id == 0 and mul.inputs[0].id == 0 and mul.inputs[1].id not in (0, 1)
    inverse = ir.constant_values[mul.inputs[1].id]
    assert inverse.dtype == np.float32 and inverse.shape == c_shape
    divisor = np.broadcast_to(np.asarray(value, np.float32), c_shape)      # rounded to float32 first, as bound
    np.testing.assert_array_equal(inverse, (1 / divisor.astype(np.float64)).astype(np.float32))
    assert_same_outputs(g, ir)
    # compiled with the default passes, the kernel multiplies and agrees with the reference
    feeds = feeds_for(g)
    np.testing.assert_allclose(compile_graph(g).run({0: feeds[0]})[3], reference.run(g, feeds)[3], rtol=3e-7, atol=0)


def test_gelu_as_exporters_write_it_divides_no_more():
    x, s2, one, half = lt(0, (4, 16)), lt(1, (), constant=True), lt(2, (), constant=True), lt(3, (), constant=True)
    t = [lt(i, (4, 16)) for i in range(4, 8)]
    g = graph(op(0, "Divide", [x, s2], [t[0]]), op(1, "Erf", [t[0]], [t[1]]), op(2, "Add", [t[1], one], [t[2]]),
              op(3, "Multiply", [x, t[2]], [t[3]]), op(4, "Multiply", [t[3], half], [lt(8, (4, 16))]),
              values={1: np.float32(np.sqrt(2)), 2: np.float32(1), 3: np.float32(0.5)})
    assert OpKind.Divide not in {o.kind for o in run_passes(g).ops}
    feeds = feeds_for(g)
    np.testing.assert_allclose(compile_graph(g).run({0: feeds[0]})[8], reference.run(g, feeds)[8], rtol=1e-6, atol=1e-7)


def test_one_reciprocal_for_a_divisor_many_ops_divide_by():
    x, c = lt(0, (2, 4)), lt(1, (), constant=True)
    g = graph(op(0, "Divide", [x, c], [lt(2, (2, 4))]), op(1, "Divide", [lt(2, (2, 4)), c], [lt(3, (2, 4))]),
              values={1: np.float32(5)})
    ir = multiply_by_reciprocals(g)
    assert [o.kind for o in ir.ops] == [OpKind.Multiply] * 2
    assert ir.ops[0].inputs[1].id == ir.ops[1].inputs[1].id
    assert_same_outputs(g, ir)


@pytest.mark.parametrize("build", [
    lambda: divide(0.0),                                         # x / 0 is inf or nan, not x * inf
    lambda: divide(np.array([1.0, 2.0, 0.0, 4.0, 1, 1, 1, 1]), c_shape=(8,)),
    lambda: divide(1e-40),                                       # subnormal: no finite reciprocal
    lambda: divide(3e38),                                        # its reciprocal would be subnormal
    lambda: divide(np.inf),
    lambda: divide(np.nan),
    lambda: divide(2.0, dtype=DataType.f16),                     # float32 only
    lambda: graph(op(0, "Divide", [lt(0, (2, 3)), lt(1, (2, 3))], [lt(2, (2, 3))])),       # data divisor
    lambda: graph(op(0, "Divide", [lt(0, (), constant=True), lt(1, (2, 3))], [lt(2, (2, 3))]),
                  values={0: np.float32(1)}),                    # a constant divided by data
], ids=["zero", "a-zero-among-others", "subnormal", "huge", "inf", "nan", "f16", "data", "reciprocal-of-data"])
def test_divisions_a_reciprocal_would_change_stay(build):
    g = build()
    assert multiply_by_reciprocals(g) is g.ir()


def test_an_unfinalized_graph_is_refused():
    from tilefuse.graph_api import Graph, GraphError
    with pytest.raises(GraphError, match="multiply_by_reciprocals needs a finalized graph"):
        multiply_by_reciprocals(Graph())
