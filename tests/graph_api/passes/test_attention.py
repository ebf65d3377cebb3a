"""fuse_attention: MatMul -> [scale] -> [mask] -> SoftMax -> MatMul as one ScaledDotProductAttention
op (before/after on the graph, numbers through the reference and the compiled kernel), and the
chains it must leave as they are."""
import numpy as np
import pytest

from tilefuse.graph_api import OpKind, compile_graph
from tilefuse.graph_api.passes import DEFAULT, fuse_attention
from passes_helpers import assert_same_outputs, feeds_for, graph, lt, op, snapshot

B, H, S, K, D = 2, 3, 13, 11, 8
SCORES, Q, KT, V, OUT = (B, H, S, K), (B, H, S, D), (B, H, D, K), (B, H, K, D), (B, H, S, D)
RNG = np.random.default_rng(40)


def chain(scale="multiply", mask=(B, 1, 1, K), transpose_b=False, axis=-1, extra_reader=None, mask_first=False,
          softmax_outputs=1, value_transposed=False, returned=None):
    """Q @ K^T [* or / scale] [+ mask] -> SoftMax -> @ V -> ReLU; ``extra_reader`` (a tensor id)
    gets an Exp too, ``returned`` (a tensor id) is a graph output too (an End op)."""
    kt = lt(1, (B, H, K, D) if transpose_b else KT)
    v = lt(2, (B, H, D, K) if value_transposed else V)
    values, ops, last = {}, [op(0, "MatMul", [lt(0, Q), kt], [lt(10, SCORES)], transpose_b=transpose_b)], 10
    if scale is not None:
        values[3] = np.array(0.125 if scale == "multiply" else 8.0, np.float32)
        kind = "Multiply" if scale == "multiply" else "Divide"
        ins = [lt(3, (), constant=True), lt(10, SCORES)]
        ins = ins if scale == "multiply" else ins[::-1]
        ops.append(op(1, kind, ins, [lt(11, SCORES)]))
        last = 11
    if mask is not None:
        m = lt(4, mask)
        ops.append(op(2, "Add", [m, lt(last, SCORES)] if mask_first else [lt(last, SCORES), m], [lt(12, SCORES)]))
        last = 12
    outs = [lt(13, SCORES)] + ([lt(14, SCORES[:-1] + (1,))] if softmax_outputs == 2 else [])
    ops.append(op(3, "SoftMax", [lt(last, SCORES)], outs, axis=axis))
    ops.append(op(4, "MatMul", [lt(13, SCORES), v], [lt(15, OUT)], transpose_b=value_transposed))
    ops.append(op(5, "ReLU", [lt(15, OUT)], [lt(16, OUT)]))
    if extra_reader is not None:
        ops.append(op(6, "Exp", [lt(extra_reader, SCORES)], [lt(17, SCORES)]))
    if returned is not None:
        ops.append(op(7, "End", [lt(returned, SCORES)], []))
    return graph(*ops, values=values)


def kinds(g):
    return [o.kind for o in g.topological_ops()]


@pytest.mark.parametrize("scale, mask, transpose_b, mask_first", [
    ("multiply", (B, 1, 1, K), False, False),        # BERT: scale, then a mask over the keys
    ("divide", (S, K), True, True),                  # a mask over rows and keys, the key not transposed
    (None, (1, H, S, K), False, False),              # T5: a position bias broadcast over the batch
    ("multiply", None, False, False),                # no mask
    (None, None, True, False),                       # neither
])
def test_attention_written_out_becomes_one_op(scale, mask, transpose_b, mask_first):
    g = chain(scale, mask, transpose_b, mask_first=mask_first)
    before = snapshot(g)
    out = fuse_attention(g)
    assert snapshot(g) == before
    assert kinds(out) == [OpKind.ScaledDotProductAttention, OpKind.ReLU]
    attention = out.topological_ops()[0]
    assert attention.attrs == {"scale": {"multiply": 0.125, "divide": 0.125, None: 1.0}[scale],
                               "key_transposed": not transpose_b}
    assert [t.id for t in attention.inputs] == [0, 1, 2] + ([4] if mask else [])
    assert [t.id for t in attention.outputs] == [15]
    assert len(attention.covers) == 3 + (scale is not None) + (mask is not None)
    assert_same_outputs(g, out, ids=[16])


@pytest.mark.parametrize("g", [
    chain(extra_reader=10),                      # the raw scores are read elsewhere too
    chain(extra_reader=12),                      # so are the masked ones
    chain(extra_reader=13),                      # so are the probabilities
    chain(returned=13),                          # the probabilities are returned (attention weights)
    chain(axis=2),                               # a softmax over the rows
    chain(softmax_outputs=2),                    # its stats are wanted
    chain(mask=(B, H, S, 1, K)),                 # a mask that broadcasts the scores to more dims
    chain(mask=(S, 1, K)),                       # one that does not broadcast one way to them
    chain(value_transposed=True),                # V transposed by the second product
], ids=["scores-read", "masked-read", "probabilities-read", "probabilities-returned", "rows-axis", "stats",
        "mask-broadcasts-up",
        "mask-does-not-broadcast", "value-transposed"])
def test_chains_the_op_cannot_stand_for_stay_as_they_are(g):
    assert kinds(fuse_attention(g)) == kinds(g)


def test_a_scale_that_is_not_one_bound_value_stays_as_it_is():
    ops = [op(0, "MatMul", [lt(0, Q), lt(1, KT)], [lt(10, SCORES)]),
           op(1, "Multiply", [lt(10, SCORES), lt(3, (K,))], [lt(11, SCORES)]),       # a fed vector
           op(3, "SoftMax", [lt(11, SCORES)], [lt(13, SCORES)], axis=-1),
           op(4, "MatMul", [lt(13, SCORES), lt(2, V)], [lt(15, OUT)])]
    g = graph(*ops)
    assert kinds(fuse_attention(g)) == kinds(g)
    divided = graph(op(0, "MatMul", [lt(0, Q), lt(1, KT)], [lt(10, SCORES)]),
                    op(1, "Divide", [lt(3, (), constant=True), lt(10, SCORES)], [lt(11, SCORES)]),   # c / scores
                    op(3, "SoftMax", [lt(11, SCORES)], [lt(13, SCORES)], axis=-1),
                    op(4, "MatMul", [lt(13, SCORES), lt(2, V)], [lt(15, OUT)]),
                    values={3: np.array(8.0, np.float32)})
    assert kinds(fuse_attention(divided)) == kinds(divided)


def test_the_pass_runs_in_the_default_pipeline_before_partitioning():
    assert DEFAULT.index(fuse_attention) < [p.__name__ for p in DEFAULT].index("eliminate_dead_ops")


def test_compiled_the_attention_is_one_partition_and_matches_numpy():
    g = chain("divide", (B, 1, 1, K))
    compiled = compile_graph(g)
    assert [s.kind for s in compiled.steps] == ["complex"]
    feeds = feeds_for(g)
    feeds[4] = np.where(RNG.random((B, 1, 1, K)) < 0.3, -1e4, 0).astype(np.float32)
    q, kt, v = (feeds[i].astype(np.float64) for i in (0, 1, 2))
    x = q @ kt / 8.0 + feeds[4]
    p = np.exp(x - x.max(-1, keepdims=True))
    want = np.maximum((p / p.sum(-1, keepdims=True)) @ v, 0)
    got = compiled.run({k: feeds[k] for k in (0, 1, 2, 4)})[16]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
