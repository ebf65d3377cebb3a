"""Graph: add_op checks, finalize, order, producers/consumers and ports."""
import pytest

from tilefuse.graph_api import Graph, GraphError, LayoutType, LogicalTensor, Op, OpKind


def lt(i, shape=(2, 3), dtype="f32", **kw):
    return LogicalTensor(i, dtype, shape, **kw)


def unary(op_id, src, dst, kind=OpKind.ReLU):
    return Op(op_id, kind, [lt(src)], [lt(dst)])


def chain():
    """0 -ReLU-> 1 -Exp-> 2, plus Add(1, 3) -> 4 consumed by End."""
    g = Graph()
    g.add_op(unary(10, 0, 1))
    g.add_op(unary(11, 1, 2, OpKind.Exp))
    g.add_op(Op(12, OpKind.Add, [lt(1), lt(3)], [lt(4)]))
    g.add_op(Op(13, OpKind.End, [lt(4)], []))
    return g


def test_engine_kind_and_fpmath_mode_are_checked():
    assert Graph("any", "tf32").fpmath_mode == "tf32"
    assert Graph("gpu").engine_kind == "gpu"           # what a oneDNN dump made on a GPU records
    with pytest.raises(GraphError, match="unknown fpmath mode 'fast'"):
        Graph("cpu", "fast")
    with pytest.raises(GraphError, match="unknown engine kind 'tpu'"):
        Graph("tpu")


def test_add_op_validates_with_the_schema():
    with pytest.raises(GraphError, match=r"op 4 \(Elu\): missing required attribute 'alpha'"):
        Graph().add_op(Op(4, OpKind.Elu, [lt(0)], [lt(1)]))


def test_duplicate_op_id():
    g = Graph()
    g.add_op(unary(1, 0, 1))
    with pytest.raises(GraphError, match=r"op 1 \(Exp\): duplicate op id 1"):
        g.add_op(unary(1, 1, 2, OpKind.Exp))


def test_same_tensor_id_with_different_dtype():
    g = Graph()
    g.add_op(unary(1, 0, 1))
    with pytest.raises(GraphError, match="logical tensor 1 has data type f16 here but f32 elsewhere"):
        g.add_op(Op(2, OpKind.Exp, [lt(1, dtype="f16")], [lt(2, dtype="f16")]))


def test_same_tensor_id_with_different_shape():
    g = Graph()
    g.add_op(unary(1, 0, 1))
    with pytest.raises(GraphError, match=r"op 2 \(Exp\): logical tensor 1 has shape \[2, 4\] here but \[2, 3\]"):
        g.add_op(Op(2, OpKind.Exp, [lt(1, (2, 4))], [lt(2, (2, 4))]))
    with pytest.raises(GraphError, match="logical tensor 1 has shape"):
        g.add_op(Op(2, OpKind.Exp, [lt(1, (6,))], [lt(2, (6,))]))


def test_same_tensor_id_with_different_property():
    g = Graph()
    g.add_op(Op(1, OpKind.ReLU, [lt(0, property_type="constant")], [lt(1)]))
    with pytest.raises(GraphError, match="logical tensor 0 has property type variable here but constant"):
        g.add_op(Op(2, OpKind.Exp, [lt(0, property_type="variable")], [lt(2)]))


def test_partial_descriptions_merge():
    g = Graph()
    g.add_op(Op(1, OpKind.ReLU, [lt(0)], [lt(1, (2, -1), layout_type="any")]))
    g.add_op(Op(2, OpKind.Exp, [lt(1, None, property_type="undef")], [lt(2)]))
    assert g.tensor(1).shape == (2, -1)
    g.add_op(Op(3, OpKind.Tanh, [lt(1, (-1, 3))], [lt(3)]))
    assert g.tensor(1).shape == (2, 3) and g.tensor(1).layout_type is LayoutType.strided


def test_a_tensor_has_one_producer():
    g = Graph()
    g.add_op(unary(1, 0, 1))
    with pytest.raises(GraphError, match="logical tensor 1 is already produced by op 1"):
        g.add_op(unary(2, 5, 1))


def test_a_failed_add_leaves_the_graph_unchanged():
    g = Graph()
    g.add_op(unary(1, 0, 1))
    g.add_op(unary(2, 7, 8), allow_exception=False)   # succeeds
    assert g.add_op(Op(3, OpKind.Exp, [lt(8)], [lt(1)]), allow_exception=False).startswith("op 3 (Exp)")
    assert [op.id for op in g.ops] == [1, 2] and g.consumers(8) == []


def test_allow_exception_false_returns_a_status():
    g = Graph()
    assert g.add_op(unary(1, 0, 1), allow_exception=False) == "success"
    status = g.add_op(Op(2, OpKind.Add, [lt(1)], [lt(2)]), allow_exception=False)
    assert status == "op 2 (Add): expected 2 inputs, got 1"
    g.finalize()
    assert g.add_op(unary(3, 1, 3), allow_exception=False) == "graph is finalized"


def test_add_after_finalize_raises():
    g = chain()
    g.finalize()
    assert g.is_finalized
    with pytest.raises(GraphError, match="^graph is finalized$"):
        g.add_op(unary(20, 2, 21))


def test_cycle_is_reported_with_an_op_on_it():
    g = Graph()
    g.add_op(unary(1, 9, 0))                         # feeds the cycle, not on it
    g.add_op(Op(2, OpKind.Add, [lt(0), lt(3)], [lt(2)]))
    g.add_op(unary(3, 2, 3, OpKind.Exp))
    with pytest.raises(GraphError, match=r"op [23] \((Add|Exp)\): is on a cycle \(op \d -> op \d -> op \d\)"):
        g.finalize()
    assert not g.is_finalized


def test_self_loop_is_a_cycle():
    g = Graph()
    g.add_op(Op(5, OpKind.Add, [lt(0), lt(1)], [lt(1)]))
    with pytest.raises(GraphError, match=r"op 5 \(Add\): is on a cycle \(op 5 -> op 5\)"):
        g.finalize()


def test_topological_order_puts_producers_first_deterministically():
    g = Graph()
    g.add_op(unary(30, 2, 3, OpKind.Exp))            # consumer added first
    g.add_op(unary(20, 1, 2))
    g.add_op(unary(40, 7, 8, OpKind.Tanh))           # independent
    g.add_op(unary(10, 0, 1, OpKind.Abs))
    assert [op.id for op in g.ops] == [30, 20, 40, 10]
    assert [op.id for op in g.topological_ops()] == [40, 10, 20, 30]


def test_producer_and_consumers():
    g = chain()
    assert g.producer(1).id == 10 and g.producer(0) is None
    assert [op.id for op in g.consumers(1)] == [11, 12]
    assert g.consumers(2) == []


def test_input_ports_in_first_use_order():
    assert [t.id for t in chain().get_input_ports()] == [0, 3]


def test_output_ports_are_unconsumed_outputs_and_end_inputs():
    assert [t.id for t in chain().get_output_ports()] == [2, 4]


def test_empty_graph_finalizes():
    g = Graph()
    g.finalize()
    assert g.ops == [] and g.get_input_ports() == [] and g.topological_ops() == []
