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


# ---- operands read, and the output written, through axis orders ------------------------------------

HEADS = [0, 2, 1, 3]           # (batch, rows, heads, depth) read as (batch, heads, rows, depth)


def test_orders_read_the_operands_transposed_and_write_the_output_transposed():
    split = dict(query_order=HEADS, key_order=[0, 2, 3, 1], value_order=HEADS, key_transposed=True)
    assert shape([(2, 5, 3, 8), (2, 7, 3, 8), (2, 7, 3, 4)], **split) == (2, 3, 5, 4)
    assert shape([(2, 5, 3, 8), (2, 7, 3, 8), (2, 7, 3, 4), (2, 1, 1, 7)], **split, dst_order=HEADS) == (2, 5, 3, 4)
    assert shape([(5, 8), (7, 8), (7, 4)], query_order=[], dst_order=[1, 0]) == (4, 5)


@pytest.mark.parametrize("shapes, attrs, message", [
    ([(2, 5, 3, 8)] * 3, {"query_order": [0, 2, 1]}, r"query_order \[0, 2, 1\] is not a permutation of the axes "
                                                      r"0..3 of query \[2, 5, 3, 8\]"),
    ([(2, 5, 3, 8)] * 3, {"key_order": [0, 2, 1, 1]}, r"key_order \[0, 2, 1, 1\] is not a permutation"),
    ([(2, 5, 3, 8)] * 3, {"value_order": [0, 2, 1, 4]}, r"value_order \[0, 2, 1, 4\] is not a permutation"),
    ([(2, 5, 3, 8)] * 3, {"dst_order": [-1, 0, 1, 2]}, r"dst_order \[-1, 0, 1, 2\] is not a permutation of the "
                                                       r"axes 0..3 of the output \[2, 5, 3, 8\]"),
    ([(2, 5, 3, 8), (2, 7, 3, 8), (2, 7, 3, 4)], {"query_order": HEADS, "value_order": HEADS},
     r"key \[2, 7, 3, 8\] has 3 keys but value \[2, 3, 7, 4\] has 7"),      # the key read as it lies
])
def test_bad_orders_are_refused_naming_the_op(shapes, attrs, message):
    with pytest.raises(GraphError, match=r"op 7 \(ScaledDotProductAttention\): .*" + message):
        shape(shapes, **attrs)


def test_an_order_that_is_no_list_of_ints_is_refused_when_the_op_is_added():
    with pytest.raises(GraphError, match="attribute 'query_order' must be s64\\[\\], got 'bshd'"):
        Graph().add_op(op([(5, 8), (7, 8), (7, 4)], query_order="bshd"))


def test_the_reference_reads_and_writes_through_the_orders():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal(s) for s in ((2, 5, 3, 8), (2, 7, 3, 8), (2, 7, 3, 4)))
    heads = [np.transpose(x, HEADS) for x in (q, k, v)]
    want = evaluate(op([x.shape for x in heads], scale=0.5), heads)[0]
    attrs = dict(scale=0.5, query_order=HEADS, key_order=HEADS, value_order=HEADS, dst_order=HEADS)
    got = evaluate(op([q.shape, k.shape, v.shape], **attrs), [q, k, v])[0]
    np.testing.assert_allclose(got, np.transpose(want, HEADS), rtol=1e-12)
    attrs.update(key_order=[0, 2, 3, 1], key_transposed=True)        # K^T read from K as it lies
    got = evaluate(op([q.shape, k.shape, v.shape], **attrs), [q, k, v])[0]
    np.testing.assert_allclose(got, np.transpose(want, HEADS), rtol=1e-12)


@pytest.mark.parametrize("attrs, message", [
    ({"value_order": [1, 0]}, r"value_order \[1, 0\] is not a permutation of the axes 0..2 of value \(2, 7, 4\)"),
    ({"dst_order": [0, 1]}, r"dst_order \[0, 1\] is not a permutation of the axes 0..2 of the output \(2, 5, 4\)"),
])
def test_the_reference_refuses_bad_orders(attrs, message):
    shapes = [(2, 5, 8), (2, 7, 8), (2, 7, 4)]
    with pytest.raises(GraphError, match=message):
        evaluate(op(shapes, **attrs), [np.zeros(s) for s in shapes])
