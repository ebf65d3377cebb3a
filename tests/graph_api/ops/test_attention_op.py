"""ScaledDotProductAttention's record: its shape rule and numpy reference, bad operands included."""
import numpy as np
import pytest

from tilefuse.graph_api import Graph, GraphError, LogicalTensor, Op, OpKind, infer_shapes
from tilefuse.graph_api.reference import evaluate

SDPA = OpKind.ScaledDotProductAttention


def op(shapes, **attrs):
    ins = [LogicalTensor(i, "f32", s) for i, s in enumerate(shapes)]
    return Op(7, SDPA, ins, [LogicalTensor(100, "f32", None, layout_type="any")], attrs)


def shape(shapes, **attrs):
    g = Graph()
    g.add_op(op(shapes, **attrs))
    return infer_shapes(g)[100].shape


def test_the_output_has_the_broadcast_batch_the_query_rows_and_the_value_width():
    assert shape([(2, 1, 5, 8), (1, 3, 7, 8), (2, 3, 7, 4)]) == (2, 3, 5, 4)
    assert shape([(5, 8), (8, 7), (7, 4), (1, 7)], key_transposed=True) == (5, 4)


@pytest.mark.parametrize("shapes, attrs, message", [
    ([(5, 8), (7, 8), (7, 4)], {"key_transposed": True}, r"query \[5, 8\] has depth 8 but key \[7, 8\] has 7"),
    ([(5, 8), (7, 8), (6, 4)], {}, r"key \[7, 8\] has 7 keys but value \[6, 4\] has 6"),
    ([(5, 8), (7, 8), (7, 4), (5, 1, 7)], {}, r"mask shape \[5, 1, 7\] does not broadcast to \[5, 7\]"),
    ([(8,), (7, 8), (7, 4)], {}, r"need rank >= 2"),
    ([(2, 5, 8), (3, 7, 8), (7, 4)], {}, r"do not broadcast"),
])
def test_bad_operands_are_refused_naming_the_op(shapes, attrs, message):
    with pytest.raises(GraphError, match=r"op 7 \(ScaledDotProductAttention\): .*" + message):
        shape(shapes, **attrs)


def test_the_reference_is_the_softmax_of_the_scaled_masked_scores_times_the_values():
    rng = np.random.default_rng(0)
    q, k, v, m = (rng.standard_normal(s) for s in ((2, 5, 8), (2, 7, 8), (2, 7, 4), (1, 7)))
    got = evaluate(op([q.shape, k.shape, v.shape, m.shape], scale=0.5), [q, k, v, m])[0]
    x = np.einsum("bid,bjd->bij", q, k) * 0.5 + m
    p = np.exp(x) / np.exp(x).sum(-1, keepdims=True)
    np.testing.assert_allclose(got, p @ v, rtol=1e-6)
    transposed = evaluate(op([q.shape, (2, 8, 7), v.shape], key_transposed=True), [q, np.swapaxes(k, 1, 2), v])[0]
    np.testing.assert_allclose(transposed, evaluate(op([q.shape, k.shape, v.shape]), [q, k, v])[0], rtol=1e-6)


@pytest.mark.parametrize("arrays, message", [
    ([(5, 8), (7, 8), (6, 4)], "do not multiply"),
    ([(2, 5, 8), (3, 7, 8), (7, 4)], "do not broadcast"),
    ([(5, 8), (7, 8), (7, 4), (3, 7)], "mask shape .* does not broadcast to scores shape"),
    ([(8,), (7, 8), (7, 4)], "need rank >= 2"),
])
def test_the_reference_refuses_operands_that_do_not_fit(arrays, message):
    values = [np.zeros(s) for s in arrays]
    with pytest.raises(GraphError, match=message):
        evaluate(op(arrays), values)
