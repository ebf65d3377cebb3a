"""fuse_attention: MatMul -> [scale] -> [mask] -> SoftMax -> MatMul as one ScaledDotProductAttention
op (before/after on the graph, numbers through the reference and the compiled kernel), and the
chains it must leave as they are."""
import numpy as np
import pytest

from tilefuse.graph_api import OpKind, compile_graph, reference
from tilefuse.graph_api.passes import DEFAULT, fold_transposes_into_attention, fuse_attention
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


# ---- the heads' split and merge folded into the attention op ----------------------------------------

S2, H2, D2, E2 = 13, 3, 8, 24              # rows (and keys), heads, head dim, model width (= H2 * D2)
SPLIT, HEADS = (1, S2, H2, D2), (1, H2, S2, D2)


def heads_graph(key_twice=False, value=(SPLIT, (0, 2, 1, 3)), merge=(0, 2, 1, 3), extra=None, returned=None,
                sliced=False):
    """BERT's self-attention from its projections (fed, (1, S2, E2)) to the merged context
    (1, S2, E2) -> ReLU: each projection reshaped to (1, S2, H2, D2) (``value``: the value's
    shape and order), a view, and transposed to heads (K to K^T, in two transposes when
    ``key_twice``), the context transposed by ``merge`` and reshaped back. ``extra``: a tensor
    id an Exp reads too; ``returned``: a tensor id that is a graph output too; ``sliced``: the
    query projection sliced from a wider one (GPT-2's Q, K and V projected at once)."""
    ops, values = [], {20: np.array(0.125, np.float32), 21: np.zeros((1, 1, 1, S2), np.float32)}
    if sliced:
        ops.append(op(9, "Slice", [lt(39, (1, S2, 3 * E2))], [lt(0, (1, S2, E2))], starts=[E2], ends=[2 * E2],
                      axes=[2], steps=[1]))
    split = [(SPLIT, (0, 2, 1, 3)), (SPLIT, (0, 2, 1, 3) if key_twice else (0, 2, 3, 1)), value]
    for k, (shape, order) in enumerate(split):
        ops.append(op(10 + k, "StaticReshape", [lt(k, (1, S2, E2))], [lt(3 + k, shape)], shape=list(shape),
                      special_zero=False))
        ops.append(op(13 + k, "StaticTranspose", [lt(3 + k, shape)], [lt(6 + k, tuple(shape[a] for a in order))],
                      order=list(order)))
    kt = 7
    if key_twice:
        ops.append(op(16, "StaticTranspose", [lt(7, HEADS)], [lt(9, (1, H2, D2, S2))], order=[0, 1, 3, 2]))
        kt = 9
    scores = (1, H2, S2, S2)
    ops += [op(20, "MatMul", [lt(6, HEADS), lt(kt, (1, H2, D2, S2))], [lt(30, scores)]),
            op(21, "Multiply", [lt(30, scores), lt(20, (), constant=True)], [lt(31, scores)]),
            op(22, "Add", [lt(31, scores), lt(21, (1, 1, 1, S2), constant=True)], [lt(32, scores)]),
            op(23, "SoftMax", [lt(32, scores)], [lt(33, scores)], axis=-1),
            op(24, "MatMul", [lt(33, scores), lt(8, HEADS)], [lt(34, HEADS)])]
    merged = tuple(HEADS[a] for a in merge)
    ops += [op(25, "StaticTranspose", [lt(34, HEADS)], [lt(35, merged)], order=list(merge)),
            op(26, "StaticReshape", [lt(35, merged)], [lt(36, (1, S2, E2))], shape=[1, S2, E2], special_zero=False),
            op(27, "ReLU", [lt(36, (1, S2, E2))], [lt(37, (1, S2, E2))])]
    if extra is not None:
        ops.append(op(28, "Exp", [lt(extra, HEADS)], [lt(38, HEADS)]))
    if returned is not None:
        ops.append(op(29, "End", [lt(returned, HEADS)], []))
    return graph(*ops, values=values)


def test_the_heads_split_and_merge_are_read_and_written_where_they_lie():
    g = fuse_attention(heads_graph())
    before = snapshot(g)
    out = fold_transposes_into_attention(g)
    assert snapshot(g) == before
    assert kinds(out) == [OpKind.StaticReshape] * 3 + [OpKind.ScaledDotProductAttention, OpKind.StaticReshape,
                                                       OpKind.ReLU]
    attention = out.topological_ops()[3]
    assert attention.attrs == {"scale": 0.125, "key_transposed": True, "query_order": [0, 2, 1, 3],
                               "key_order": [0, 2, 3, 1], "value_order": [0, 2, 1, 3], "dst_order": [0, 2, 1, 3]}
    assert [t.id for t in attention.inputs] == [3, 4, 5, 21] and [t.id for t in attention.outputs] == [35]
    assert len(attention.covers) == 5 + 4           # the chain's five ops and the four transposes
    assert_same_outputs(g, out, ids=[37])


def test_transposes_in_a_row_compose():
    g = fuse_attention(heads_graph(key_twice=True))
    attention = next(o for o in fold_transposes_into_attention(g).ops if o.kind is OpKind.ScaledDotProductAttention)
    assert attention.attrs["key_order"] == [0, 2, 3, 1] and attention.inputs[1].id == 4
    assert_same_outputs(g, fold_transposes_into_attention(g), ids=[37])


@pytest.mark.parametrize("case, kept", [
    (dict(extra=6), [13]),                           # the query's heads are read elsewhere too
    (dict(returned=8), [15]),                        # the value's heads are a graph output
    (dict(extra=34), [25]),                          # the context is read elsewhere too
    (dict(returned=34), [25]),                       # the context is a graph output
    (dict(value=((1, D2, H2, S2), (0, 2, 3, 1))), [15]),   # the value's rows would be read across the grain
    (dict(merge=(0, 1, 3, 2)), [25]),                # the output's rows would be written across the grain
    (dict(sliced=True), [13]),                       # the query's heads are copied from a slice anyway
], ids=["query-read", "value-returned", "context-read", "context-returned", "value-across", "output-across",
        "query-sliced"])
def test_transposes_the_op_cannot_take_stay_as_they_are(case, kept):
    g = heads_graph(**case)
    out = fold_transposes_into_attention(fuse_attention(g))
    assert kinds(out).count(OpKind.ScaledDotProductAttention) == 1
    assert sorted(o.id for o in out.ops if o.kind is OpKind.StaticTranspose) == kept
    assert_same_outputs(g, out)


def test_the_fold_runs_in_the_default_pipeline_right_after_the_fusion():
    assert DEFAULT.index(fold_transposes_into_attention) == DEFAULT.index(fuse_attention) + 1


def test_compiled_no_copy_is_made_between_the_projections_and_the_merged_context():
    g = heads_graph()
    compiled = compile_graph(g)
    steps = [(s.kind, [o.kind for o in s.ops], s.view is not None) for s in compiled.steps]
    assert [kinds for _, kinds, view in steps if not view] == [[OpKind.ScaledDotProductAttention], [OpKind.ReLU]]
    assert all(kinds == [OpKind.StaticReshape] for _, kinds, view in steps if view)
    feeds = feeds_for(g)
    want = reference.run(g, feeds)[37]
    np.testing.assert_allclose(compiled.run({k: feeds[k] for k in (0, 1, 2)})[37], want, rtol=1e-4, atol=1e-5)


# ---- scalars multiplying Q or K folded into the scale -----------------------------------------------

def scaled_heads_graph(where, factor=(), kind="Multiply", fed=False, read_too=False):
    """``heads_graph`` (its scores times 0.125) with the query's, key's or value's head split
    scaled on the way (``where``: "query-before-split" on its projection, "query-split" between its
    reshape and transpose, "query-heads" after its transpose, "key-heads" on K^T, "value-heads") by a Multiply or Divide (``kind``, the data
    first) of tensor 40, a bound constant of shape ``factor`` (or fed, ``fed``) holding 0.5s;
    ``read_too``: the scaled tensor is returned too."""
    g = heads_graph()
    ops, values = [o for o in g.ops], {**g.constant_values}
    at = {"query-before-split": (10, 0), "query-split": (13, 3), "query-heads": (20, 6), "key-heads": (20, 7),
          "value-heads": (24, 8)}
    reader_id, scaled = at[where]
    reader = next(o for o in ops if o.id == reader_id)
    shape = next(t.shape for t in reader.inputs if t.id == scaled)
    if not fed:
        values[40] = np.full(factor, 0.5, np.float32)
    ops.append(op(30, kind, [lt(scaled, shape), lt(40, factor, constant=not fed)], [lt(41, shape)]))
    ops[ops.index(reader)] = op(reader.id, reader.kind.value,
                                [lt(41, shape) if t.id == scaled else t for t in reader.inputs], reader.outputs,
                                **reader.attrs)
    if read_too:
        ops.append(op(31, "End", [lt(41, shape)], []))
    return graph(*ops, values=values)


def attention_of(g):
    return next(o for o in g.ops if o.kind is OpKind.ScaledDotProductAttention)


@pytest.mark.parametrize("where, kind, factor", [
    ("query-before-split", "Multiply", ()),          # q_proj(x) * scaling (Whisper), then split into heads
    ("query-split", "Multiply", ()),                 # on the heads split, before their transpose
    ("query-heads", "Multiply", (1,)),               # q * scale on the heads, after their transpose (ViT)
    ("key-heads", "Multiply", (1, 1, 1, 1)),         # k^T * scale (ViT scales both)
    ("query-heads", "Divide", ()),                   # q / sqrt(d)
])
def test_a_scalar_on_the_query_or_key_is_folded_into_the_scale(where, kind, factor):
    g = scaled_heads_graph(where, factor, kind)
    before = snapshot(g)
    fused = fuse_attention(g)
    assert snapshot(g) == before
    assert OpKind.Multiply not in kinds(fused) and OpKind.Divide not in kinds(fused)
    assert attention_of(fused).attrs["scale"] == 0.125 * (0.5 if kind == "Multiply" else 2.0)
    assert len(attention_of(fused).covers) == 5 + 1
    out = fold_transposes_into_attention(fused)
    assert kinds(out) == [OpKind.StaticReshape] * 3 + [OpKind.ScaledDotProductAttention, OpKind.StaticReshape,
                                                       OpKind.ReLU]
    assert_same_outputs(g, out, ids=[37])


@pytest.mark.parametrize("case", [
    dict(where="query-heads", factor=(D2,)),          # per channel: no scalar
    dict(where="query-before-split", factor=(E2,)),
    dict(where="query-heads", fed=True),              # a scalar fed at run time
    dict(where="value-heads"),                        # the value's scale is no factor of the scores
    dict(where="query-heads", read_too=True),         # the scaled query is returned too
    dict(where="query-before-split", kind="Divide", factor=(1,)),   # see below: 1 / 0.5 times the data
], ids=["per-channel", "per-channel-before-split", "fed", "value", "returned", "divides-by-data"])
def test_a_scale_the_attention_cannot_take_stays_as_it_is(case):
    g = scaled_heads_graph(**case)
    if case.get("kind") == "Divide":           # the constant first: 0.5 / data
        scaling = next(o for o in g.ops if o.id == 30)
        g = graph(*[op(30, "Divide", scaling.inputs[::-1], scaling.outputs) if o is scaling else o for o in g.ops],
                  values=g.constant_values)
    out = fold_transposes_into_attention(fuse_attention(g))
    assert attention_of(out).attrs["scale"] == 0.125
    assert [o.id for o in out.ops if o.kind in (OpKind.Multiply, OpKind.Divide)] == [30]
    assert_same_outputs(g, out)


def test_a_scale_that_broadcasts_the_scores_up_stays_as_it_is():      # as one that broadcasts Q or K up
    up = (1,) + SCORES
    g = graph(op(0, "MatMul", [lt(0, Q), lt(1, KT)], [lt(10, SCORES)]),
              op(1, "Multiply", [lt(10, SCORES), lt(3, (1,) * 5, constant=True)], [lt(11, up)]),
              op(3, "SoftMax", [lt(11, up)], [lt(13, up)], axis=-1),
              op(4, "MatMul", [lt(13, up), lt(2, V)], [lt(15, (1,) + OUT)]),
              values={3: np.full((1,) * 5, 0.125, np.float32)})
    assert kinds(fuse_attention(g)) == kinds(g)


def test_a_query_that_is_the_key_too_keeps_its_scale():
    t = (1, H2, S2, D2)
    g = graph(op(0, "Multiply", [lt(0, t), lt(40, (), constant=True)], [lt(1, t)]),
              op(1, "MatMul", [lt(1, t), lt(1, t)], [lt(2, (1, H2, S2, S2))], transpose_b=True),
              op(2, "SoftMax", [lt(2, (1, H2, S2, S2))], [lt(3, (1, H2, S2, S2))], axis=-1),
              op(3, "MatMul", [lt(3, (1, H2, S2, S2)), lt(4, t)], [lt(5, t)]),
              values={40: np.array(0.5, np.float32)})
    out = fuse_attention(g)
    assert kinds(out) == [OpKind.Multiply, OpKind.ScaledDotProductAttention]
    assert attention_of(out).attrs["scale"] == 1.0
    assert_same_outputs(g, out)


# ---- heads split from one projection of Q, K and V (ViT, Swin) --------------------------------------

def vit_graph(scale_query=True, scale_key=True, window_heads=False):
    """ViT-B/16's self-attention, small: the projection of Q, K and V at once (fed, (S2, 3 E2))
    reshaped to (S2, 3, E2) and transposed (a copy) to (3, S2, E2), Q, K and V sliced from it
    (views), each reshaped to (S2, H2, D2), transposed to (H2, S2, D2) and reshaped to (1, H2, S2,
    D2), K then transposed to K^T, Q and K multiplied by sqrt(1 / sqrt(D2)) when asked (tensor
    40); the context transposed to (S2, 1, H2, D2) -> ReLU. ``window_heads``: Swin's instead, the
    copy transposing to (3, 1, H2, S2, D2), each slice reshaped to (1, H2, S2, D2) alone (and
    the key not transposed)."""
    E3, heads = 3 * E2, (1, H2, S2, D2)
    ops = [op(0, "StaticReshape", [lt(0, (S2, E3))], [lt(1, (S2, 3, H2, D2))], shape=[S2, 3, H2, D2],
              special_zero=False)]
    whole = (3, 1, H2, S2, D2) if window_heads else (3, S2, H2, D2)
    ops.append(op(1, "StaticTranspose", [lt(1, (S2, 3, H2, D2))], [lt(2, whole)],
                  order=[1, 0, 2, 3] if not window_heads else [1, 3, 2, 0, 4]))
    if window_heads:
        ops[0] = op(0, "StaticReshape", [lt(0, (S2, E3))], [lt(1, (S2, 3, H2, 1, D2))], shape=[S2, 3, H2, 1, D2],
                    special_zero=False)
        ops[1] = op(1, "StaticTranspose", [lt(1, (S2, 3, H2, 1, D2))], [lt(2, whole)], order=[1, 3, 2, 0, 4])
    operands = []
    for k in range(3):
        piece = (1,) + whole[1:]
        ops.append(op(2 + k, "Slice", [lt(2, whole)], [lt(3 + k, piece)], starts=[k], ends=[k + 1], axes=[0],
                      steps=[1]))
        if window_heads:
            ops.append(op(5 + k, "StaticReshape", [lt(3 + k, piece)], [lt(20 + k, heads)], shape=list(heads),
                          special_zero=False))
        else:
            ops += [op(5 + k, "StaticReshape", [lt(3 + k, piece)], [lt(6 + k, (S2, H2, D2))], shape=[S2, H2, D2],
                       special_zero=False),
                    op(8 + k, "StaticTranspose", [lt(6 + k, (S2, H2, D2))], [lt(9 + k, (H2, S2, D2))],
                       order=[1, 0, 2]),
                    op(11 + k, "StaticReshape", [lt(9 + k, (H2, S2, D2))], [lt(20 + k, heads)], shape=list(heads),
                       special_zero=False)]
        operands.append(20 + k)
    key = (1, H2, S2, D2) if window_heads else (1, H2, D2, S2)
    if not window_heads:
        ops.append(op(14, "StaticTranspose", [lt(21, heads)], [lt(23, key)], order=[0, 1, 3, 2]))
        operands[1] = 23
    for k, (wanted, t) in enumerate([(scale_query, operands[0]), (scale_key, operands[1])]):
        if wanted:
            shape = heads if k == 0 else key
            ops.append(op(15 + k, "Multiply", [lt(t, shape), lt(40, (1,), constant=True)], [lt(24 + k, shape)]))
            operands[k] = 24 + k
    scores = (1, H2, S2, S2)
    ops += [op(20, "MatMul", [lt(operands[0], heads), lt(operands[1], key)], [lt(30, scores)],
               transpose_b=window_heads),
            op(21, "SoftMax", [lt(30, scores)], [lt(31, scores)], axis=-1),
            op(22, "MatMul", [lt(31, scores), lt(22, heads)], [lt(32, heads)]),
            op(23, "StaticTranspose", [lt(32, heads)], [lt(33, (S2, 1, H2, D2))], order=[2, 0, 1, 3]),
            op(24, "ReLU", [lt(33, (S2, 1, H2, D2))], [lt(34, (S2, 1, H2, D2))])]
    return graph(*ops, values={40: np.array([D2 ** -0.25], np.float32)})


def test_vit_heads_sliced_as_views_are_read_where_they_lie():
    g = vit_graph()
    out = fold_transposes_into_attention(fuse_attention(g))
    attention = attention_of(out)
    assert attention.attrs == {"scale": pytest.approx(D2 ** -0.5), "key_transposed": True,
                               "query_order": [0, 2, 1, 3], "key_order": [0, 2, 3, 1], "value_order": [0, 2, 1, 3],
                               "dst_order": [2, 0, 1, 3]}
    sources = [out.producer(t.id) for t in attention.inputs]
    assert [o.kind for o in sources] == [OpKind.StaticReshape] * 3
    assert [(o.inputs[0].id, o.outputs[0].shape) for o in sources] == [(k, (1, S2, H2, D2)) for k in (3, 4, 5)]
    assert [o.kind for o in out.ops if o.kind in (OpKind.StaticTranspose, OpKind.Multiply)] == [OpKind.StaticTranspose]
    assert not out.consumers(6) and 6 not in [t.id for t in out.get_output_ports()]    # no reshape left unread
    assert_same_outputs(g, out, ids=[34])


@pytest.mark.parametrize("g, scale", [(vit_graph(), D2 ** -0.5), (vit_graph(window_heads=True, scale_key=False), D2 ** -0.25)],
                         ids=["vit", "swin"])
def test_compiled_heads_sliced_as_views_need_no_copy_but_the_split(g, scale):
    compiled = compile_graph(g)
    kernels = [[o.kind for o in s.ops] for s in compiled.steps if s.view is None]
    assert kernels == [[OpKind.StaticReshape, OpKind.StaticTranspose], [OpKind.ScaledDotProductAttention, OpKind.ReLU]]
    feeds = feeds_for(g)
    x = feeds[0].astype(np.float64).reshape(S2, 3, H2, D2)
    q, k, v = (x[:, j].transpose(1, 0, 2)[None] for j in range(3))
    scores = q @ k.swapaxes(-1, -2) * scale
    p = np.exp(scores - scores.max(-1, keepdims=True))
    context = (p / p.sum(-1, keepdims=True)) @ v
    want = np.maximum(context.transpose(2, 0, 1, 3), 0)
    np.testing.assert_allclose(compiled.run({0: feeds[0]})[34], want, rtol=1e-4, atol=1e-5)


def test_an_operand_read_twice_keeps_its_transposes():
    t, x = (1, H2, S2, D2), (1, H2, D2, S2)
    g = graph(op(0, "StaticTranspose", [lt(0, x)], [lt(1, t)], order=[0, 1, 3, 2]),
              op(1, "ScaledDotProductAttention", [lt(1, t)] * 3, [lt(2, t)], key_transposed=False),
              op(2, "ReLU", [lt(2, t)], [lt(3, t)]))
    out = fold_transposes_into_attention(g)
    assert kinds(out) == kinds(g)           # as the value, its transpose would move the last axis
    assert_same_outputs(g, out)
