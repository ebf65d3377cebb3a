from tilefuse.graph_api import OpKind
from tilefuse.graph_api import passes
from tilefuse.graph_api.passes import DEFAULT, run_passes
from passes_helpers import assert_same_outputs, graph, lt, op, snapshot


def test_default_pipeline_end_to_end():
    # q @ T(k) where T(k) is computed twice; an unused branch hangs off x; End marks the result
    q, k = lt(0, (2, 4, 3)), lt(1, (2, 5, 3))
    kt1, kt2 = lt(2, (2, 3, 5)), lt(3, (2, 3, 5))
    s1, s2, s = lt(4, (2, 4, 5)), lt(5, (2, 4, 5)), lt(6, (2, 4, 5))
    dead = lt(7, (2, 4, 3))
    g = graph(op(0, "StaticTranspose", [k], [kt1], order=[0, 2, 1]),
              op(1, "StaticTranspose", [k], [kt2], order=[0, 2, 1]),
              op(2, "MatMul", [q, kt1], [s1]), op(3, "MatMul", [q, kt2], [s2]),
              op(4, "Add", [s1, s2], [s]), op(5, "End", [s], []),
              op(6, "Exp", [q], [dead]))
    before = snapshot(g)
    out = run_passes(g)
    assert snapshot(g) == before
    assert [(o.id, o.kind) for o in out.ops] == [(2, OpKind.MatMul), (4, OpKind.Add), (5, OpKind.End)]
    assert out.ops[0].attrs == {"transpose_b": True}
    assert [t.id for t in out.ops[1].inputs] == [4, 4]
    assert [t.id for t in out.get_output_ports()] == [6]
    assert_same_outputs(g, out, ids=[6])


def test_custom_and_empty_pass_lists():
    x, a = lt(0, (2,)), lt(1, (2,))
    g = graph(op(0, "ReLU", [x], [a]))
    assert run_passes(g, passes=()) is g
    assert [o.id for o in run_passes(g, passes=[passes.eliminate_dead_ops]).ops] == [0]
    assert DEFAULT[:3] == (passes.fold_constants, passes.fold_into_weights, passes.fold_batch_norms)
    assert len(DEFAULT) == 8 and passes.plan_layouts in DEFAULT and passes.split_grouped_convolutions in DEFAULT
