"""tensorir.ops.scaled_dot_product_attention: its compute against numpy (through the attention
template and the default schedule), the broadcasts of its operands and mask, and bad input."""
import numpy as np
import pytest

from tilefuse.tensorir import placeholder
from tilefuse.tensorir.ops import scaled_dot_product_attention
from ops_testing import check, rand


def reference(q, k, v, mask=None, scale=1.0, key_transposed=False):
    """softmax(q @ K^T * scale + mask) @ v in float64."""
    kt = k if key_transposed else np.swapaxes(k, -1, -2)
    x = np.matmul(q.astype(np.float64), kt) * scale
    if mask is not None:
        x = x + mask
    e = np.exp(x - x.max(-1, keepdims=True))
    return np.matmul(e / e.sum(-1, keepdims=True), v)


@pytest.mark.parametrize("q_shape, k_shape, v_shape, mask_shape, key_transposed", [
    ((2, 3, 37, 16), (2, 3, 16, 29), (2, 3, 29, 13), (2, 1, 1, 29), True),     # BERT's mask, batch 2
    ((3, 37, 16), (3, 29, 16), (3, 29, 16), (37, 29), False),                  # a mask over rows and keys
    ((2, 1, 21, 8), (1, 4, 8, 21), (2, 4, 21, 8), None, True),                 # batch dims broadcast
    ((5, 7), (5, 7), (5, 3), (1,), False),                                     # no batch dims
    ((2, 4, 1, 16), (2, 4, 16, 70), (2, 4, 70, 16), (2, 1, 1, 70), True),      # one query (a decoder's step)
    ((3, 9, 8), (3, 1, 8), (3, 1, 5), None, False),                            # one key
])
def test_attention_matches_numpy(q_shape, k_shape, v_shape, mask_shape, key_transposed):
    q, k, v = placeholder(q_shape, name="q"), placeholder(k_shape, name="k"), placeholder(v_shape, name="v")
    feeds = {q: rand(q_shape), k: rand(k_shape), v: rand(v_shape)}
    mask = None
    if mask_shape is not None:
        mask = placeholder(mask_shape, name="mask")
        feeds[mask] = np.where(rand(mask_shape) > 1.0, -1e4, 0.0).astype("float32")
    out = scaled_dot_product_attention(q, k, v, mask, scale=0.25, key_transposed=key_transposed)
    expected = reference(*feeds.values(), scale=0.25, key_transposed=key_transposed)
    check(out, feeds, expected, template="attention", rtol=1e-4, atol=1e-5)


def test_keys_masked_with_minus_infinity_weigh_nothing():
    q, k, v = placeholder((4, 8), name="q"), placeholder((20, 8), name="k"), placeholder((20, 3), name="v")
    mask = placeholder((20,), name="mask")
    m = np.zeros(20, "float32")
    m[10:] = -np.inf                               # keys 10.. masked out (as a causal mask does)
    values = rand((20, 3))
    values[10:] = 1e30                             # they would dominate if they weighed anything
    feeds = {q: rand((4, 8)), k: rand((20, 8)), v: values, mask: m}
    expected = reference(feeds[q], feeds[k][:10], values[:10])
    check(scaled_dot_product_attention(q, k, v, mask), feeds, expected, template="attention", rtol=1e-4, atol=1e-5)


def test_bad_operands_are_refused_naming_the_op():
    q, k, v = placeholder((2, 5, 8), name="q"), placeholder((2, 7, 8), name="k"), placeholder((2, 7, 4), name="v")
    with pytest.raises(ValueError, match="ScaledDotProductAttention: query .* has depth 8 but key"):
        scaled_dot_product_attention(q, k, v, key_transposed=True)
    with pytest.raises(ValueError, match="has 7 keys but value"):
        scaled_dot_product_attention(q, k, placeholder((2, 6, 4)))
    with pytest.raises(ValueError, match="mask of shape \\(3, 7\\) does not broadcast to the scores"):
        scaled_dot_product_attention(q, k, v, placeholder((3, 7)))
    with pytest.raises(ValueError, match="rank >= 2"):
        scaled_dot_product_attention(placeholder((8,)), k, v)
    with pytest.raises(ValueError, match="do not broadcast"):
        scaled_dot_product_attention(q, placeholder((3, 7, 8)), v)
    with pytest.raises(TypeError, match="key has dtype float64"):
        scaled_dot_product_attention(q, placeholder((2, 7, 8), "float64"), v)
    with pytest.raises(ValueError, match="attribute scale must be a number"):
        scaled_dot_product_attention(q, k, v, scale="x")


@pytest.mark.parametrize("q_shape, k_shape, v_shape, orders, key_transposed", [
    # BERT's heads split from (batch, rows, heads, depth), K^T read from K as it lies, merged back
    ((2, 37, 3, 16), (2, 29, 3, 16), (2, 29, 3, 13),
     dict(query_order=[0, 2, 1, 3], key_order=[0, 2, 3, 1], value_order=[0, 2, 1, 3], dst_order=[0, 2, 1, 3]), True),
    ((37, 16), (16, 29), (29, 5), dict(key_order=[1, 0]), False),             # K^T given, read as K
    ((3, 9, 8), (3, 9, 8), (3, 9, 5), dict(query_order=[0, 1, 2], dst_order=[1, 0, 2]), False),
])
def test_operands_read_and_output_written_through_orders_match_numpy(q_shape, k_shape, v_shape, orders,
                                                                    key_transposed):
    q, k, v = placeholder(q_shape, name="q"), placeholder(k_shape, name="k"), placeholder(v_shape, name="v")
    feeds = {q: rand(q_shape), k: rand(k_shape), v: rand(v_shape)}
    read = [np.transpose(feeds[t], orders[name]) if orders.get(name) else feeds[t]
            for t, name in ((q, "query_order"), (k, "key_order"), (v, "value_order"))]
    expected = reference(*read, scale=0.25, key_transposed=key_transposed)
    if orders.get("dst_order"):
        expected = np.transpose(expected, orders["dst_order"])
    out = scaled_dot_product_attention(q, k, v, scale=0.25, key_transposed=key_transposed, **orders)
    assert out.shape == expected.shape
    check(out, feeds, expected, template="attention", rtol=1e-4, atol=1e-5)


def test_bad_orders_are_refused_naming_the_op():
    q, k, v = placeholder((2, 5, 8), name="q"), placeholder((2, 7, 8), name="k"), placeholder((2, 7, 4), name="v")
    with pytest.raises(ValueError, match=r"ScaledDotProductAttention: attribute query_order=\[0, 1\] is not a "
                                         r"permutation of the 3 axes of query"):
        scaled_dot_product_attention(q, k, v, query_order=[0, 1])
    with pytest.raises(ValueError, match=r"attribute dst_order=\[0, 0, 1\] is not a permutation of the 3 axes of dst"):
        scaled_dot_product_attention(q, k, v, dst_order=[0, 0, 1])
    with pytest.raises(ValueError, match="attribute value_order must be a list of ints"):
        scaled_dot_product_attention(q, k, v, value_order=[0, 1.5, 2])
    with pytest.raises(ValueError, match=r"query \(2, 8, 5\) has depth 5 but key"):
        scaled_dot_product_attention(q, k, v, query_order=[0, 2, 1])
