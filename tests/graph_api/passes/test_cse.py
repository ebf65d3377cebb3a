from tilefuse.graph_api import DataType, OpKind
from tilefuse.graph_api.passes import eliminate_common_subexpressions as cse
from passes_helpers import assert_same_outputs, graph, lt, op, snapshot


def ids(g):
    return [o.id for o in g.ops]


def wiring(g):
    return {o.id: [t.id for t in o.inputs] for o in g.ops}


def test_duplicate_merged_and_consumers_rewired():
    x, a, b, c = lt(0, (2, 3)), lt(1, (2, 3)), lt(2, (2, 3)), lt(3, (2, 3))
    g = graph(op(0, "Exp", [x], [a]), op(1, "Exp", [x], [b]), op(2, "Add", [a, b], [c]))
    before = snapshot(g)
    out = cse(g)
    assert snapshot(g) == before and out is not g
    assert ids(out) == [0, 2] and wiring(out) == {0: [0], 2: [1, 1]}
    assert [t.id for t in out.get_output_ports()] == [3]
    assert_same_outputs(g, out)


def test_chain_collapses_in_one_call():
    x, y = lt(0, (4,)), lt(1, (4,))
    a1, a2, b1, b2, s = lt(2, (4,)), lt(3, (4,)), lt(4, (4,)), lt(5, (4,)), lt(6, (4,))
    g = graph(op(0, "Add", [x, y], [a1]), op(1, "Add", [x, y], [a2]),
              op(2, "ReLU", [a1], [b1]), op(3, "ReLU", [a2], [b2]),
              op(4, "Multiply", [b1, b2], [s]))
    out = cse(g)
    assert ids(out) == [0, 2, 4] and wiring(out)[4] == [4, 4]
    assert_same_outputs(g, out)


def test_defaults_count_as_equal_attributes():
    x, a, b, c = lt(0, (2, 3)), lt(1, (2, 3)), lt(2, (2, 3)), lt(3, (2, 3))
    g = graph(op(0, "SoftMax", [x], [a], axis=1), op(1, "SoftMax", [x], [b]),
              op(2, "Add", [a, b], [c]))
    assert ids(cse(g)) == [0, 2]
    assert_same_outputs(g, cse(g))


def test_different_attributes_or_inputs_not_merged():
    x, y = lt(0, (2, 3)), lt(1, (2, 3))
    a, b, c, d, e = lt(2, (2, 3)), lt(3, (2, 3)), lt(4, (2, 3)), lt(5, (2, 3)), lt(6, (2, 3))
    g = graph(op(0, "SoftMax", [x], [a], axis=1), op(1, "SoftMax", [x], [b], axis=0),
              op(2, "Subtract", [x, y], [c]), op(3, "Subtract", [y, x], [d]),
              op(4, "Add", [a, b], [e]), op(5, "Add", [c, d], [lt(7, (2, 3))]))
    out = cse(g)
    assert ids(out) == ids(g)
    assert_same_outputs(g, out)


def test_different_output_types_not_merged():
    x = lt(0, (3,))
    h, b = lt(1, (3,), DataType.f16), lt(2, (3,), DataType.bf16)
    g = graph(op(0, "TypeCast", [x], [h]), op(1, "TypeCast", [x], [b]),
              op(2, "TypeCast", [h], [lt(3, (3,))]), op(3, "TypeCast", [b], [lt(4, (3,))]))
    assert ids(cse(g)) == [0, 1, 2, 3]   # same kind, attrs and input; output dtype differs
    g2 = graph(op(0, "Exp", [x], [lt(1, (3,))]), op(1, "Exp", [x], [lt(2, None)]),
               op(2, "Add", [lt(1, (3,)), lt(2, None)], [lt(3, (3,))]))
    assert ids(cse(g2)) == [0, 1, 2]  # output shapes differ (known vs unknown): kept apart
    assert_same_outputs(g2, cse(g2))


def test_graph_output_duplicate_not_merged():
    x, a, b = lt(0, (2,)), lt(1, (2,)), lt(2, (2,))
    g = graph(op(0, "Exp", [x], [a]), op(1, "Exp", [x], [b]), op(2, "End", [a], []), op(3, "End", [b], []))
    out = cse(g)
    assert ids(out) == [0, 1, 2, 3]
    assert_same_outputs(g, out)


def test_first_op_with_unconsumed_output_not_merged_into():
    # op 0's output is a graph output only because nothing reads it; merging op 1 into it would
    # make it consumed and so no longer an output
    x, a, b, c = lt(0, (2,)), lt(1, (2,)), lt(2, (2,)), lt(3, (2,))
    g = graph(op(0, "Exp", [x], [a]), op(1, "Exp", [x], [b]), op(2, "ReLU", [b], [c]))
    out = cse(g)
    assert ids(out) == [0, 1, 2]
    assert sorted(t.id for t in out.get_output_ports()) == [1, 3]
    assert_same_outputs(g, out)


def test_end_input_first_op_can_absorb_duplicate():
    x, a, b, c = lt(0, (2,)), lt(1, (2,)), lt(2, (2,)), lt(3, (2,))
    g = graph(op(0, "Exp", [x], [a]), op(1, "End", [a], []),
              op(2, "Exp", [x], [b]), op(3, "ReLU", [b], [c]), op(4, "End", [c], []))
    out = cse(g)
    assert ids(out) == [0, 1, 3, 4] and wiring(out)[3] == [1]
    assert sorted(t.id for t in out.get_output_ports()) == [1, 3]
    assert_same_outputs(g, out)


def test_multi_output_ops_merged_output_by_output():
    x, gm, bt = lt(0, (2, 4)), lt(1, (4,)), lt(2, (4,))
    outs1 = [lt(3, (2, 4)), lt(4, (2,)), lt(5, (2,))]
    outs2 = [lt(6, (2, 4)), lt(7, (2,)), lt(8, (2,))]
    g = graph(op(0, "LayerNorm", [x, gm, bt], outs1), op(1, "LayerNorm", [x, gm, bt], outs2),
              op(2, "Add", [outs1[0], outs2[0]], [lt(9, (2, 4))]),
              op(3, "Add", [outs1[1], outs2[1]], [lt(10, (2,))]),
              op(4, "Add", [outs1[2], outs2[2]], [lt(11, (2,))]))
    out = cse(g)
    assert ids(out) == [0, 2, 3, 4]
    assert wiring(out) == {0: [0, 1, 2], 2: [3, 3], 3: [4, 4], 4: [5, 5]}
    assert_same_outputs(g, out)


def test_end_and_wildcard_never_merged():
    x, a = lt(0, (2,)), lt(1, (2,))
    g = graph(op(0, "ReLU", [x], [a]), op(1, "End", [a], []), op(2, "End", [a], []))
    assert [o.kind for o in cse(g).ops] == [OpKind.ReLU, OpKind.End, OpKind.End]


def test_graph_settings_preserved():
    x, a = lt(0, (2,)), lt(1, (2,))
    g = graph(op(0, "ReLU", [x], [a]), engine="any", fpmath="f16")
    out = cse(g)
    assert (out.engine_kind, out.fpmath_mode, ids(out)) == ("any", "f16", [0])
