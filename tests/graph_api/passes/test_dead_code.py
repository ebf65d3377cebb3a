import numpy as np
import pytest

from tilefuse.graph_api import GraphError, OpKind, reference
from tilefuse.graph_api.passes import eliminate_dead_ops
from tilefuse.graph_api.passes.dead_code import default_outputs
from passes_helpers import assert_same_outputs, feeds_for, graph, lt, op, snapshot


def _branchy(with_end=True):
    # 0 -relu-> 1 -exp-> 2 -End ; 0 -abs-> 3 -sqrt-> 4 (dead when End ops are present)
    x, a, b, c, d = lt(0, (2, 3)), lt(1, (2, 3)), lt(2, (2, 3)), lt(3, (2, 3)), lt(4, (2, 3))
    ops = [op(0, "ReLU", [x], [a]), op(1, "Abs", [x], [c]), op(2, "Exp", [a], [b]),
           op(3, "Sqrt", [c], [d])]
    if with_end:
        ops.append(op(4, "End", [b], []))
    return graph(*ops)


def test_end_ops_select_outputs():
    g = _branchy()
    before = snapshot(g)
    out = eliminate_dead_ops(g)
    assert out is not g and out.is_finalized
    assert [(o.id, o.kind) for o in out.ops] == [(0, OpKind.ReLU), (2, OpKind.Exp), (4, OpKind.End)]
    assert [t.id for t in out.get_output_ports()] == [2]
    assert [t.id for t in out.get_input_ports()] == [0]
    assert snapshot(g) == before and len(g) == 5          # input untouched
    assert all(a is not b for a, b in zip(out.ops, g.ops))  # new Op objects
    assert_same_outputs(g, out, ids=[2])


def test_without_end_keeps_every_output_port():
    g = _branchy(with_end=False)
    out = eliminate_dead_ops(g)
    assert [o.id for o in out.ops] == [0, 1, 2, 3]
    assert default_outputs(g) == [2, 4]
    assert_same_outputs(g, out)


def test_explicit_outputs():
    g = _branchy(with_end=False)
    out = eliminate_dead_ops(g, outputs=[4])
    assert [o.id for o in out.ops] == [1, 3]
    assert [t.id for t in out.get_output_ports()] == [4]
    assert_same_outputs(g, out, ids=[4])
    # an intermediate tensor as output: its producer chain only
    out = eliminate_dead_ops(g, outputs=[1])
    assert [o.id for o in out.ops] == [0]
    feeds = feeds_for(g)
    np.testing.assert_allclose(reference.run(out, {0: feeds[0]})[1], np.maximum(feeds[0], 0))


def test_explicit_outputs_drop_end_of_unwanted_tensor():
    g = _branchy()
    out = eliminate_dead_ops(g, outputs=[4])
    assert [o.id for o in out.ops] == [1, 3]


def test_shared_producer_kept_once_and_settings_copied():
    x, a, b, c = lt(0, (4,)), lt(1, (4,)), lt(2, (4,)), lt(3, (4,))
    g = graph(op(0, "Exp", [x], [a]), op(1, "ReLU", [a], [b]), op(2, "Abs", [a], [c]),
              op(3, "End", [c], []), engine="any", fpmath="bf16")
    out = eliminate_dead_ops(g)
    assert [o.id for o in out.ops] == [0, 2, 3]
    assert (out.engine_kind, out.fpmath_mode) == ("any", "bf16")
    assert_same_outputs(g, out, ids=[3])


def test_multi_output_op_kept_when_one_output_needed():
    x, g_, b_ = lt(0, (2, 4)), lt(1, (4,)), lt(2, (4,))
    y, m, v, r = lt(3, (2, 4)), lt(4, (2,)), lt(5, (2,)), lt(6, (2,))
    g = graph(op(0, "LayerNorm", [x, g_, b_], [y, m, v], keep_stats=True),
              op(1, "Exp", [m], [r]), op(2, "End", [y], []))
    out = eliminate_dead_ops(g)
    assert [o.id for o in out.ops] == [0, 2]
    assert_same_outputs(g, out, ids=[3])


def test_unknown_output_id_and_unfinalized_graph():
    g = _branchy()
    with pytest.raises(GraphError, match="no logical tensor 99"):
        eliminate_dead_ops(g, outputs=[99])
    from tilefuse.graph_api import Graph
    with pytest.raises(GraphError, match="finalized"):
        eliminate_dead_ops(Graph())


def test_empty_graph():
    g = graph()
    assert eliminate_dead_ops(g).ops == []
