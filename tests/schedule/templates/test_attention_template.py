"""The attention template: which DAGs it takes, its defaults, and every knob's kernels against
numpy on shapes no tile divides (with masks, epilogues, keys transposed or not, packed or not)."""
import numpy as np
import pytest

from tilefuse.schedule.space import Config
from tilefuse.schedule.templates import Dag, template_for
from tilefuse.schedule.templates.attention import AttentionTemplate
from tilefuse.tensorir import compute, ops, placeholder
from tilefuse.tensorir.ops import scaled_dot_product_attention
from tilefuse.tensorir.runtime.target import Target

RNG = np.random.default_rng(40)
AVX512 = Target.of("skylake-avx512", "+avx512f,+fma")


def numpy_attention(q, k, v, mask, scale, key_transposed):
    kt = k if key_transposed else np.swapaxes(k, -1, -2)
    x = np.matmul(q.astype(np.float64), kt) * scale + (0 if mask is None else mask)
    e = np.exp(x - x.max(-1, keepdims=True))
    return np.matmul(e / e.sum(-1, keepdims=True), v)


def attention(batch, heads, rows, keys, depth, width, mask_shape=None, key_transposed=True):
    q = placeholder((batch, heads, rows, depth), name="q")
    k = placeholder((batch, heads, depth, keys) if key_transposed else (batch, heads, keys, depth), name="k")
    v = placeholder((batch, heads, keys, width), name="v")
    args = [q, k, v] + ([placeholder(mask_shape, name="mask")] if mask_shape else [])
    values = [RNG.standard_normal(a.shape).astype("float32") for a in args]
    if mask_shape:
        values[3] = np.where(values[3] > 1.0, -1e4, 0.0).astype("float32")
    out = scaled_dot_product_attention(*args[:3], args[3] if mask_shape else None, scale=0.125,
                                       key_transposed=key_transposed)
    expected = numpy_attention(*values[:3], values[3] if mask_shape else None, 0.125, key_transposed)
    return out, dict(zip(args, values)), expected


def run(out, feeds: dict, config=None):
    """``out`` built by its template with ``config``, run on ``feeds`` (placeholder -> array)."""
    t = template_for(out)
    assert t.name == "attention"
    by_tensor = {id(k): v for k, v in feeds.items()}
    got = np.full(t.outputs[0].shape, np.nan, "float32")
    t.build(config)(*[by_tensor[id(a)] for a in t.args[:-1]], got)
    return got


def test_an_attention_dag_takes_the_attention_template_and_others_do_not():
    out, _, _ = attention(1, 2, 9, 11, 8, 8)
    assert template_for(out).name == "attention"
    epilogue = compute(out.shape, lambda *i: out[i] * 2.0, name="twice")
    assert template_for(epilogue).name == "attention"
    x = placeholder((4, 9), name="x")
    assert Dag.of([ops.softmax(ops.matmul(x, placeholder((9, 5))), axis=-1)]).attention() is None
    two_products = ops.matmul(ops.matmul(x, placeholder((9, 5))), placeholder((5, 3)))
    assert Dag.of([two_products]).attention() is None and template_for(two_products).name == "opaque"


def test_an_epilogue_that_changes_the_shape_gives_way_to_the_opaque_template():
    out, _, _ = attention(1, 2, 9, 11, 8, 8)
    flat = compute((2, 9, 8), lambda h, i, j: out[0, h, i, j], name="flat")
    assert Dag.of([flat]).attention() is not None and template_for(flat).name == "opaque"


@pytest.mark.parametrize("rows, keys, expected_block", [(1500, 1500, 24), (128, 128, 66), (197, 197, 66),
                                                        (49, 49, 49), (4096, 64, 96), (100, 100, 54),
                                                        (384, 384, 96)])
def test_default_blocks_keep_the_scores_in_l2_and_pad_the_rows_little(rows, keys, expected_block):
    q, k = placeholder((1, 2, rows, 64)), placeholder((1, 2, 64, keys))
    t = template_for(scaled_dot_product_attention(q, k, placeholder((1, 2, keys, 64)), key_transposed=True), AVX512)
    config = t.default_config()
    assert config["block"] == expected_block
    assert (config["tile_i"], config["tile_o"], config["unroll_k"]) == (6, 6, 4)
    assert config["pack"] == (keys == 49)        # fewer keys than a tile, not whole vectors: packed
    assert config["tile_j"] == (64 if keys >= 64 else 64 if keys > 48 else 48)


def test_keys_read_across_the_head_dim_are_packed_by_default():
    out, _, _ = attention(1, 2, 9, 11, 8, 8, key_transposed=False)
    assert template_for(out).default_config()["pack"] is True


@pytest.mark.parametrize("case", [
    dict(batch=2, heads=3, rows=50, keys=37, depth=16, width=24, mask_shape=(2, 1, 1, 37)),
    dict(batch=1, heads=2, rows=37, keys=150, depth=24, width=16, mask_shape=(37, 150), key_transposed=False),
    dict(batch=1, heads=1, rows=7, keys=5, depth=3, width=5),
], ids=["bert-mask", "rows-by-keys-mask-untransposed", "tiny"])
@pytest.mark.parametrize("overrides", [{}, {"block": 12, "tile_i": 4, "tile_j": 32, "tile_o": 4, "unroll_k": 2},
                                       {"pack": True, "tile_j": 48, "tile_i": 8, "tile_o": 1, "unroll_k": 1}],
                         ids=["default", "smaller", "packed"])
def test_kernels_match_numpy(case, overrides):
    out, feeds, expected = attention(**case)
    t = template_for(out)
    config = Config({**t.default_config().values, **overrides})
    if "pack" in overrides and t.space.knobs["pack"].candidates == [False]:
        config = Config({**config.values, "pack": False})
    np.testing.assert_allclose(run(out, feeds, config), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("heads_apart", [False, True], ids=["heads-outside", "heads-split-and-merged"])
def test_an_elementwise_epilogue_is_applied_as_the_output_is_stored(heads_apart):
    out, feeds, expected = (split_heads if heads_apart else attention)(1, 2, 30, 40, 8, 16)
    bias = placeholder((16,), name="bias")
    y = compute(out.shape, lambda *i: out[i] + bias[i[-1]], name="biased")
    b = RNG.standard_normal(16).astype("float32")
    np.testing.assert_allclose(run(y, {**feeds, bias: b}), expected + b, rtol=1e-4, atol=1e-5)


def test_every_knob_is_in_the_space_and_the_template_is_registered():
    out, _, _ = attention(1, 2, 9, 11, 8, 8)
    t = template_for(out)
    assert isinstance(t, AttentionTemplate)
    assert set(t.space.knobs) == {"block", "tile_i", "tile_j", "tile_o", "unroll_k", "pack", "pack_value"}
    assert t.space.knobs["pack_value"].candidates == (False,)      # its values' rows lie one after the other
    stored = {k: v for k, v in t.default_config().values.items() if k != "pack_value"}      # tuned before the knob
    assert t.space.get(t.space.index_of(Config(stored)))["pack_value"] is False


def test_float64_attention_takes_tiles_of_its_own_lanes():
    q, k = placeholder((2, 37, 16), "float64", name="q"), placeholder((2, 29, 16), "float64", name="k")
    v = placeholder((2, 29, 13), "float64", name="v")
    out = scaled_dot_product_attention(q, k, v, scale=0.3)
    t = template_for(out, AVX512)
    assert t.default_config()["tile_j"] == 32              # four vectors of 8 doubles
    values = [RNG.standard_normal(a.shape) for a in (q, k, v)]
    got = np.full(out.shape, np.nan)
    template_for(out).build()(*values, got)
    np.testing.assert_allclose(got, numpy_attention(*values, None, 0.3, False), rtol=1e-12, atol=1e-12)


def test_a_context_that_reads_no_exponentials_of_the_scores_gives_way_to_the_opaque_template():
    from tilefuse.tensorir import reduce_axis
    from tilefuse.tensorir.reduce import max as rmax, sum as rsum
    q, kt, w, v = (placeholder(s, name=n) for s, n in (((5, 4), "q"), ((4, 6), "kt"), ((6,), "w"), ((6, 3), "v")))
    scores = ops.matmul(q, kt)

    def row(combiner):
        return compute((5,), lambda i: combiner(scores[i, (j := reduce_axis((0, 6), name="j"))], axis=j))
    mx, total = row(rmax), row(rsum)
    weights = compute((5, 6), lambda i, j: mx[i] * w[j], name="weights")      # the row max alone, no logits
    context = ops.matmul(weights, v)
    out = compute((5, 3), lambda i, e: context[i, e] / total[i], name="out")
    assert Dag.of([out]).attention() is not None and template_for(out).name == "opaque"


HEADS = [0, 2, 1, 3]         # (batch, rows, heads, depth) read as (batch, heads, rows, depth)


def split_heads(batch, heads, rows, keys, depth, width, mask_shape=None):
    """BERT's attention with its heads split from and merged back into (batch, rows, heads,
    depth) by orders: K^T read from K as it lies (order [0, 2, 3, 1])."""
    q, k = placeholder((batch, rows, heads, depth), name="q"), placeholder((batch, keys, heads, depth), name="k")
    v = placeholder((batch, keys, heads, width), name="v")
    args = [q, k, v] + ([placeholder(mask_shape, name="mask")] if mask_shape else [])
    values = [RNG.standard_normal(a.shape).astype("float32") for a in args]
    out = scaled_dot_product_attention(*args[:3], args[3] if mask_shape else None, scale=0.125, key_transposed=True,
                                       query_order=HEADS, key_order=[0, 2, 3, 1], value_order=HEADS, dst_order=HEADS)
    read = [np.transpose(values[0], HEADS), np.transpose(values[1], [0, 2, 3, 1]), np.transpose(values[2], HEADS)]
    expected = numpy_attention(*read, values[3] if mask_shape else None, 0.125, True)
    return out, dict(zip(args, values)), np.transpose(expected, HEADS)


@pytest.mark.parametrize("overrides", [{}, {"pack": False}, {"pack_value": True},
                                       {"block": 12, "tile_i": 4, "tile_j": 32, "tile_o": 4, "unroll_k": 2},
                                       {"pack": True, "pack_value": True, "tile_j": 48, "tile_i": 8, "tile_o": 1,
                                        "unroll_k": 1}],
                         ids=["default", "unpacked", "values-packed", "smaller", "packed"])
def test_heads_split_and_merged_by_orders_match_numpy(overrides):
    out, feeds, expected = split_heads(2, 3, 50, 37, 16, 24, mask_shape=(2, 1, 1, 37))
    assert out.shape == (2, 50, 3, 24)
    t = template_for(out)
    np.testing.assert_allclose(run(out, feeds, Config({**t.default_config().values, **overrides})), expected,
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("keys, pack_value", [(128, False), (384, True), (1500, True)])
def test_keys_read_across_the_heads_are_packed_and_values_a_head_apart_past_32_kib(keys, pack_value):
    out, _, _ = split_heads(1, 6, 24, keys, 64, 64)
    config = template_for(out, AVX512).default_config()
    assert config["pack"] is True and config["pack_value"] is pack_value


def test_an_output_written_with_its_columns_across_the_grain_gives_way_to_the_opaque_template():
    q, k, v = (placeholder((1, 2, 9, 8), name=n) for n in "qkv")
    out = scaled_dot_product_attention(q, k, v, dst_order=[0, 1, 3, 2])
    assert out.shape == (1, 2, 8, 9) and template_for(out).name == "opaque"
