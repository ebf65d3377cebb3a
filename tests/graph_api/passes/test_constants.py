import numpy as np
import pytest

from tilefuse.graph_api import DataType, GraphError, OpKind, PropertyType
from tilefuse.graph_api.passes import fold_constants
from passes_helpers import assert_same_outputs, graph, lt, op, snapshot


def test_bound_constant_chain_is_evaluated_and_removed():
    w, w1, w2 = lt(0, (3, 4), constant=True), lt(1, (3, 4)), lt(2, (4, 3))
    x, y = lt(3, (5, 4)), lt(4, (5, 3))
    g = graph(op(0, "Exp", [w], [w1]), op(1, "StaticTranspose", [w1], [w2], order=[1, 0]),
              op(2, "MatMul", [x, w2], [lt(5, (5, 3))]), op(3, "ReLU", [lt(5, (5, 3))], [y]),
              values={0: np.linspace(-1, 1, 12).reshape(3, 4)})
    before = snapshot(g)
    out = fold_constants(g)
    assert snapshot(g) == before
    assert [o.id for o in out.ops] == [2, 3]
    np.testing.assert_allclose(out.constant_values[2], np.exp(np.linspace(-1, 1, 12).reshape(3, 4)).T, rtol=1e-6)
    assert out.tensor(2).property_type is PropertyType.constant
    assert_same_outputs(g, out)


def test_unbound_constants_are_marked_not_folded():
    w, wt, x, y = lt(0, (3, 3), constant=True), lt(1, (3, 3)), lt(2, (2, 3)), lt(3, (2, 3))
    g = graph(op(0, "StaticTranspose", [w], [wt], order=[1, 0]), op(1, "MatMul", [x, wt], [y]))
    out = fold_constants(g)
    assert [o.id for o in out.ops] == [0, 1]
    assert out.tensor(1).property_type is PropertyType.constant
    assert out.tensor(3).property_type is PropertyType.variable     # mixes in a variable input
    assert out.constant_values == {}


def test_graph_outputs_stay_produced():
    w, y = lt(0, (2,), constant=True), lt(1, (2,))
    g = graph(op(0, "Exp", [w], [y]), values={0: [0.0, 1.0]})
    out = fold_constants(g)
    assert [o.id for o in out.ops] == [0] and out.tensor(1).property_type is PropertyType.constant
    assert_same_outputs(g, out)


@pytest.mark.parametrize("kind", ["Wildcard"])
def test_opaque_ops_are_never_folded(kind):
    w, a, y = lt(0, (2,), constant=True), lt(1, (2,)), lt(2, (2,))
    g = graph(op(0, kind, [w], [a]), op(1, "ReLU", [a], [y]), values={0: [1.0, 2.0]})
    out = fold_constants(g)
    assert [o.kind for o in out.ops] == [OpKind.parse(kind), OpKind.ReLU]
    assert out.tensor(1).property_type is PropertyType.variable


def test_needs_a_finalized_graph():
    from tilefuse.graph_api import Graph
    with pytest.raises(GraphError, match="finalized"):
        fold_constants(Graph())


def test_bind_constant_checks():
    from tilefuse.graph_api import Graph
    w, v, y = lt(0, (2,), constant=True), lt(1, (2,)), lt(2, (2,))
    g = graph(op(0, "Add", [w, v], [y]))
    with pytest.raises(GraphError, match="only constant tensors"):
        g.bind_constant(1, [1.0, 2.0])
    with pytest.raises(GraphError, match="shape"):
        g.bind_constant(0, [1.0, 2.0, 3.0])
    with pytest.raises(GraphError, match="no logical tensor 9"):
        g.bind_constant(9, [1.0])
    g2 = Graph()
    g2.add_op(op(0, "Exp", [lt(0, (2,), constant=True)], [lt(1, (2,), constant=True)]))
    with pytest.raises(GraphError, match="produced by op 0"):
        g2.bind_constant(1, [1.0, 2.0])
    g.bind_constant(0, np.array([1, 2]))          # converted to the tensor's data type
    assert g.constant_values[0].dtype == np.float32 and not g.constant_values[0].flags.writeable
    assert DataType.f32 is g.tensor(0).dtype


def test_bound_values_are_row_major_copies():
    w, v, y = lt(0, (2, 3), constant=True), lt(1, (2, 3)), lt(2, (2, 3))
    g = graph(op(0, "Add", [w, v], [y]))
    fortran = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    g.bind_constant(0, fortran)
    assert g.constant_values[0].flags.c_contiguous
    np.testing.assert_array_equal(g.constant_values[0], fortran)
