from tilefuse.graph_api import OpKind
from tilefuse.graph_api.passes import simplify_algebra
from passes_helpers import assert_same_outputs, graph, lt, op, snapshot


def kinds(g):
    return [(o.id, o.kind) for o in g.ops]


def test_transpose_pair_composes_into_one():
    x, y, z, w = lt(0, (2, 3, 4)), lt(1, (4, 2, 3)), lt(2, (3, 2, 4)), lt(3, (3, 2, 4))
    g = graph(op(0, "StaticTranspose", [x], [y], order=[2, 0, 1]),
              op(1, "StaticTranspose", [y], [z], order=[2, 1, 0]),
              op(2, "ReLU", [z], [w]))
    before = snapshot(g)
    out = simplify_algebra(g)
    assert snapshot(g) == before
    assert kinds(out) == [(1, OpKind.StaticTranspose), (2, OpKind.ReLU)]
    t = out.ops[0]
    assert [i.id for i in t.inputs] == [0] and [o.id for o in t.outputs] == [2]
    assert t.attrs["order"] == [1, 0, 2]
    assert_same_outputs(g, out)


def test_transpose_negative_and_empty_orders():
    x, y, z = lt(0, (2, 3, 4)), lt(1, (4, 3, 2)), lt(2, (4, 2, 3))
    g = graph(op(0, "StaticTranspose", [x], [y], order=[]),            # reverse
              op(1, "StaticTranspose", [y], [z], order=[0, -1, -2]))
    out = simplify_algebra(g)
    assert kinds(out) == [(1, OpKind.StaticTranspose)]
    assert out.ops[0].attrs["order"] == [2, 0, 1]
    assert_same_outputs(g, out)


def test_transpose_pair_identity_rewires_consumers():
    x, y, z, w = lt(0, (2, 3)), lt(1, (3, 2)), lt(2, (2, 3)), lt(3, (2, 3))
    g = graph(op(0, "StaticTranspose", [x], [y], order=[1, 0]),
              op(1, "StaticTranspose", [y], [z], order=[1, 0]),
              op(2, "Exp", [z], [w]))
    out = simplify_algebra(g)
    assert kinds(out) == [(2, OpKind.Exp)]
    assert [i.id for i in out.ops[0].inputs] == [0]
    assert_same_outputs(g, out)


def test_identity_on_graph_output_keeps_reorder():
    x, y, z = lt(0, (2, 3)), lt(1, (3, 2)), lt(2, (2, 3))
    g = graph(op(0, "StaticTranspose", [x], [y], order=[1, 0]),
              op(1, "StaticTranspose", [y], [z], order=[1, 0]),
              op(2, "End", [z], []))
    out = simplify_algebra(g)
    assert kinds(out) == [(1, OpKind.Reorder), (2, OpKind.End)]
    assert [i.id for i in out.ops[0].inputs] == [0] and [o.id for o in out.ops[0].outputs] == [2]
    assert [t.id for t in out.get_output_ports()] == [2]
    assert_same_outputs(g, out)


def test_first_transpose_kept_when_shared():
    x, y, z, u, v = lt(0, (2, 3)), lt(1, (3, 2)), lt(2, (2, 3)), lt(3, (3, 2)), lt(4, (2, 3))
    g = graph(op(0, "StaticTranspose", [x], [y], order=[1, 0]),
              op(1, "StaticTranspose", [y], [z], order=[1, 0]),
              op(2, "ReLU", [y], [u]), op(3, "Abs", [z], [v]))
    out = simplify_algebra(g)
    assert kinds(out) == [(0, OpKind.StaticTranspose), (2, OpKind.ReLU), (3, OpKind.Abs)]
    assert [i.id for i in out.ops[2].inputs] == [0]
    assert sorted(t.id for t in out.get_output_ports()) == [3, 4]
    assert_same_outputs(g, out)


def test_three_transposes_chain():
    x = lt(0, (2, 3, 4))
    t1, t2, t3 = lt(1, (3, 4, 2)), lt(2, (4, 2, 3)), lt(3, (2, 4, 3))
    g = graph(op(0, "StaticTranspose", [x], [t1], order=[1, 2, 0]),
              op(1, "StaticTranspose", [t1], [t2], order=[1, 2, 0]),
              op(2, "StaticTranspose", [t2], [t3], order=[1, 0, 2]))
    out = simplify_algebra(g)
    assert kinds(out) == [(2, OpKind.StaticTranspose)]
    assert [i.id for i in out.ops[0].inputs] == [0]
    assert_same_outputs(g, out)


def test_lone_identity_transpose_removed():
    x, y, z = lt(0, (2, 3)), lt(1, (2, 3)), lt(2, (2, 3))
    g = graph(op(0, "StaticTranspose", [x], [y], order=[0, 1]), op(1, "Exp", [y], [z]))
    out = simplify_algebra(g)
    assert kinds(out) == [(1, OpKind.Exp)]
    assert_same_outputs(g, out)


def test_reshape_pair_merges():
    x, y, z, w = lt(0, (2, 3, 4)), lt(1, (6, 4)), lt(2, (4, 6)), lt(3, (4, 6))
    g = graph(op(0, "StaticReshape", [x], [y], shape=[6, 4], special_zero=False),
              op(1, "StaticReshape", [y], [z], shape=[4, -1], special_zero=False),
              op(2, "ReLU", [z], [w]))
    out = simplify_algebra(g)
    assert kinds(out) == [(1, OpKind.StaticReshape), (2, OpKind.ReLU)]
    r = out.ops[0]
    assert [i.id for i in r.inputs] == [0] and r.attrs == {"shape": [4, -1], "special_zero": False}
    assert_same_outputs(g, out)


def test_reshape_special_zero_uses_known_output_shape():
    x, y, z = lt(0, (2, 3, 4)), lt(1, (6, 4)), lt(2, (6, 2, 2))
    g = graph(op(0, "StaticReshape", [x], [y], shape=[6, 4], special_zero=False),
              op(1, "StaticReshape", [y], [z], shape=[0, 2, 2], special_zero=True))
    out = simplify_algebra(g)
    assert kinds(out) == [(1, OpKind.StaticReshape)]
    assert out.ops[0].attrs == {"shape": [6, 2, 2], "special_zero": False}
    assert_same_outputs(g, out)


def test_reshape_special_zero_unknown_shape_left_alone():
    x, y, z = lt(0, (2, 3, 4)), lt(1, (6, 4)), lt(2, None)
    g = graph(op(0, "StaticReshape", [x], [y], shape=[6, 4], special_zero=False),
              op(1, "StaticReshape", [y], [z], shape=[0, 2, 2], special_zero=True))
    out = simplify_algebra(g)
    assert kinds(out) == kinds(g)
    assert_same_outputs(g, out)


def test_reshape_roundtrip_is_identity():
    x, y, z, w = lt(0, (2, 3, 4)), lt(1, (24,)), lt(2, (2, 3, 4)), lt(3, (2, 3, 4))
    g = graph(op(0, "StaticReshape", [x], [y], shape=[-1], special_zero=False),
              op(1, "StaticReshape", [y], [z], shape=[2, 3, 4], special_zero=False),
              op(2, "Exp", [z], [w]))
    out = simplify_algebra(g)
    assert kinds(out) == [(2, OpKind.Exp)]
    assert_same_outputs(g, out)


def test_transpose_folds_into_matmul_flags():
    a, at = lt(0, (5, 4, 3)), lt(1, (5, 3, 4))
    b, bt = lt(2, (5, 4, 6)), lt(3, (5, 6, 4))
    c = lt(4, (5, 3, 6))
    g = graph(op(0, "StaticTranspose", [a], [at], order=[0, 2, 1]),
              op(1, "StaticTranspose", [b], [bt], order=[0, -1, -2]),
              op(2, "MatMul", [at, bt], [c], transpose_b=True))
    before = snapshot(g)
    out = simplify_algebra(g)
    assert snapshot(g) == before
    assert kinds(out) == [(2, OpKind.MatMul)]
    mm = out.ops[0]
    assert [i.id for i in mm.inputs] == [0, 2] and [o.id for o in mm.outputs] == [4]
    assert mm.attrs["transpose_a"] is True and mm.attrs["transpose_b"] is False
    assert_same_outputs(g, out)


def test_transpose_with_other_consumer_not_folded():
    a, at, b, c, d = lt(0, (4, 3)), lt(1, (3, 4)), lt(2, (4, 5)), lt(3, (3, 5)), lt(4, (3, 4))
    g = graph(op(0, "StaticTranspose", [a], [at], order=[1, 0]),
              op(1, "MatMul", [at, b], [c]), op(2, "ReLU", [at], [d]))
    out = simplify_algebra(g)
    assert kinds(out) == kinds(g)
    assert "transpose_a" not in out.ops[1].attrs
    assert_same_outputs(g, out)


def test_transpose_that_is_graph_output_not_folded():
    a, at, b, c = lt(0, (4, 3)), lt(1, (3, 4)), lt(2, (4, 5)), lt(3, (3, 5))
    g = graph(op(0, "StaticTranspose", [a], [at], order=[1, 0]),
              op(1, "MatMul", [at, b], [c]), op(2, "End", [at], []), op(3, "End", [c], []))
    out = simplify_algebra(g)
    assert kinds(out) == kinds(g)
    assert_same_outputs(g, out)


def test_non_last_axes_transpose_not_folded():
    a, at, b, c = lt(0, (3, 2, 4)), lt(1, (2, 3, 4)), lt(2, (2, 4, 5)), lt(3, (2, 3, 5))
    g = graph(op(0, "StaticTranspose", [a], [at], order=[1, 0, 2]), op(1, "MatMul", [at, b], [c]))
    out = simplify_algebra(g)
    assert kinds(out) == kinds(g)
    assert_same_outputs(g, out)


def test_same_transposed_tensor_on_both_inputs():
    a, at, c = lt(0, (3, 3)), lt(1, (3, 3)), lt(2, (3, 3))
    g = graph(op(0, "StaticTranspose", [a], [at], order=[1, 0]), op(1, "MatMul", [at, at], [c]))
    out = simplify_algebra(g)
    assert kinds(out) == [(1, OpKind.MatMul)]
    assert out.ops[0].attrs == {"transpose_a": True, "transpose_b": True}
    assert_same_outputs(g, out)


def test_double_transpose_then_matmul():
    # T(T'(a)) composes to a last-two swap, which then folds into the MatMul
    a, t1, t2 = lt(0, (4, 2, 3)), lt(1, (2, 3, 4)), lt(2, (4, 3, 2))
    b, c = lt(3, (4, 2, 5)), lt(4, (4, 3, 5))
    g = graph(op(0, "StaticTranspose", [a], [t1], order=[1, 2, 0]),
              op(1, "StaticTranspose", [t1], [t2], order=[2, 1, 0]),
              op(2, "MatMul", [t2, b], [c]))
    out = simplify_algebra(g)
    assert kinds(out) == [(2, OpKind.MatMul)]
    assert [i.id for i in out.ops[0].inputs] == [0, 3] and out.ops[0].attrs == {"transpose_a": True}
    assert_same_outputs(g, out)


def test_nothing_to_do_returns_equal_new_graph():
    x, y = lt(0, (2,)), lt(1, (2,))
    g = graph(op(0, "ReLU", [x], [y]), engine="any", fpmath="tf32")
    out = simplify_algebra(g)
    assert out is not g and kinds(out) == kinds(g)
    assert (out.engine_kind, out.fpmath_mode) == ("any", "tf32")


import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.mark.parametrize("kind,neutral,position", [("Add", 0.0, 1), ("Add", 0.0, 0), ("Subtract", 0.0, 1),
                                                   ("Multiply", 1.0, 0), ("Multiply", 1.0, 1), ("Divide", 1.0, 1)])
def test_neutral_operands_disappear(kind, neutral, position):
    x, c, a, y = lt(0, (2, 3)), lt(1, (1, 3), constant=True), lt(2, (2, 3)), lt(3, (2, 3))
    ins = [x, c] if position == 1 else [c, x]
    g = graph(op(0, kind, ins, [a]), op(1, "ReLU", [a], [y]), values={1: np.full((1, 3), neutral)})
    out = simplify_algebra(g)
    assert kinds(out) == [(1, OpKind.ReLU)] and out.ops[0].inputs[0].id == 0
    assert_same_outputs(g, out)


@pytest.mark.parametrize("case", ["not neutral", "wrong side", "broadcast grows", "unbound"])
def test_non_neutral_operands_stay(case):
    x, c, a, y = lt(0, (1, 3)), lt(1, (2, 3), constant=True), lt(2, (2, 3)), lt(3, (2, 3))
    value = np.ones((2, 3))
    kind, ins = "Multiply", [x, c]
    if case == "not neutral":
        x, value = lt(0, (2, 3)), np.full((2, 3), 2.0)
        ins = [x, c]
    elif case == "wrong side":
        x, kind, ins = lt(0, (2, 3)), "Divide", [c, lt(0, (2, 3))]
    values = None if case == "unbound" else {1: value}
    g = graph(op(0, kind, ins, [a]), op(1, "ReLU", [a], [y]), values=values)
    assert kinds(simplify_algebra(g)) == [(0, OpKind.parse(kind)), (1, OpKind.ReLU)]


def test_neutral_op_producing_a_graph_output_becomes_a_copy():
    x, c, y = lt(0, (4,)), lt(1, (4,), constant=True), lt(2, (4,))
    g = graph(op(0, "Add", [x, c], [y]), values={1: np.zeros(4)})
    out = simplify_algebra(g)
    assert kinds(out) == [(0, OpKind.Reorder)] and [t.id for t in out.get_output_ports()] == [2]
    assert_same_outputs(g, out)


def test_copies_disappear_unless_they_keep_a_graph_output_alive():
    x, c, y, z = lt(0, (2, 3)), lt(1, (2, 3)), lt(2, (2, 3)), lt(3, (2, 3))
    g = graph(op(0, "Identity", [x], [c]), op(1, "ReLU", [c], [y]), op(2, "Reorder", [y], [z]))
    out = simplify_algebra(g)
    assert [(o.kind.value, [t.id for t in o.inputs]) for o in out.ops] == [("ReLU", [0]), ("Reorder", [2])]
    assert_same_outputs(g, out)
    lone = graph(op(0, "Identity", [x], [c]))                       # the copy is the graph output
    assert [o.kind.value for o in simplify_algebra(lone).ops] == ["Reorder"]
