import re

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
    # divisions by constants become multiplies before the weights fold them (a Divide after a
    # convolution by a per-channel constant folds as a Multiply does)
    assert DEFAULT[:6] == (passes.compute_half_floats_in_f32, passes.fold_constants, passes.multiply_by_reciprocals,
                           passes.recognize_norms, passes.fold_into_weights, passes.fold_batch_norms)
    assert len(DEFAULT) == 18 and passes.plan_layouts in DEFAULT and passes.split_grouped_convolutions in DEFAULT
    # the reshapes flattened dense rows leave back to back are merged after them
    dense = DEFAULT.index(passes.flatten_dense_rows)
    assert DEFAULT[dense + 1] is passes.simplify_algebra
    # poolings of the maps the layout plan made channels-last are split into rows, channel gates
    # move into the weights of convolutions it made channels-last, and pointwise convolutions
    # are flattened where it left them in NCHW
    layout = DEFAULT.index(passes.plan_layouts)
    assert DEFAULT[layout + 1:layout + 4] == (passes.split_spatial_reductions, passes.scale_weights_by_channel_gates,
                                              passes.flatten_pointwise_convolutions)


def _trace_lines(err):
    return [line for line in err.splitlines() if line.startswith("[tilefuse] graph")]


def test_a_traced_run_prints_a_line_per_pass(capsys):
    q, k = lt(0, (2, 4, 3)), lt(1, (2, 5, 3))
    kt1, kt2, s = lt(2, (2, 3, 5)), lt(3, (2, 3, 5)), lt(4, (2, 4, 5))
    g = graph(op(0, "StaticTranspose", [k], [kt1], order=[0, 2, 1]),
              op(1, "StaticTranspose", [k], [kt2], order=[0, 2, 1]),
              op(2, "MatMul", [q, kt1], [s]), op(3, "Exp", [kt2], [lt(5, (2, 3, 5))]))
    run_passes(g, trace=True)
    lines = _trace_lines(capsys.readouterr().err)
    assert [line.split()[2] for line in lines] == [p.__name__ for p in DEFAULT]
    assert all(re.search(r" \d+\.\d\d ms  ops \d+ -> \d+$", line) for line in lines)
    assert lines[0].endswith("ops 4 -> 4")
    run_passes(g, trace="ir")
    err = capsys.readouterr().err
    assert len(_trace_lines(err)) == len(DEFAULT)
    assert "%4: f32[2, 4, 5] = MatMul(%0, %1) {transpose_b: True}" in err     # the graph after a pass
    assert err.count("graph(%1: f32[2, 5, 3], %0: f32[2, 4, 3]) {") == len(DEFAULT)        # inputs in order of use


def test_trace_reads_the_environment(capsys, monkeypatch):
    g = graph(op(0, "ReLU", [lt(0, (2,))], [lt(1, (2,))]))
    monkeypatch.setenv("TILEFUSE_TRACE", "1")
    run_passes(g)
    assert len(_trace_lines(capsys.readouterr().err)) == len(DEFAULT)
    monkeypatch.setenv("TILEFUSE_TRACE", "0")
    run_passes(g)
    assert capsys.readouterr().err == ""
