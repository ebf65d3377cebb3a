"""Winograd F(m x m, 3 x 3) compute definitions (tensorir.ops.winograd): the transform
matrices compute a 1-D correlation exactly at stride 1 and 2, with their fractions in G, the
tile grid covers partial tiles, the filter
transform compiled as a plain stage equals its numpy twin (and the ``WinogradFilters`` pack
built on it), and the stages chained unscheduled compute a 3x3 convolution."""
import numpy as np
import pytest

from tilefuse.schedule import build, create_schedule
from tilefuse.schedule.hoist import _plain_pack
from tilefuse.tensorir import compute, placeholder
from tilefuse.tensorir.ops.winograd import (STRIDES, TILE_SIZES, filter_tiles, filter_tiles_numpy, input_tiles, output_pixel,
                                   output_rows, output_size, tile_grid, tile_products, transform_matrices)
from tilefuse.tensorir.runtime.prepacked import NUMPY_PACKS, WinogradFilters

RNG = np.random.default_rng(2024)


def test_tile_sizes_and_strides():
    assert tuple(TILE_SIZES) == (2, 3, 4) and tuple(STRIDES) == (1, 2)


@pytest.mark.parametrize("stride, alpha", [(1, lambda m: m + 2), (2, lambda m: 2 * m + 1)])
@pytest.mark.parametrize("m", [2, 3, 4])
def test_transforms_compute_a_one_dimensional_correlation(m, stride, alpha):
    at, g, bt = transform_matrices(m, stride)
    alpha = patch = alpha(m)
    assert at.shape == (m, alpha) and g.shape == (alpha, 3) and bt.shape == (alpha, patch)
    assert at.dtype == g.dtype == bt.dtype == np.float64
    for _ in range(20):
        d, w = RNG.standard_normal(patch), RNG.standard_normal(3)
        want = np.array([d[stride * i:stride * i + 3] @ w for i in range(m)])   # y[i] = sum_k d[stride i + k] g[k]
        np.testing.assert_allclose(at @ ((g @ w) * (bt @ d)), want, rtol=1e-12, atol=1e-12)
    # and in two dimensions: A^T [(G g G^T) * (B^T d B)] A is the 2-D correlation
    d, w = RNG.standard_normal((patch, patch)), RNG.standard_normal((3, 3))
    want = np.array([[np.sum(d[stride * i:stride * i + 3, stride * j:stride * j + 3] * w) for j in range(m)]
                     for i in range(m)])
    np.testing.assert_allclose(at @ ((g @ w @ g.T) * (bt @ d @ bt.T)) @ at.T, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("m", [2, 3, 4])
def test_the_per_call_transforms_are_small_integers_and_the_fractions_are_in_g(m, stride):
    """The input and output transforms run on every call: integers (no rounding in a
    multiplication by 1, exact ones by small constants); the filter's, once per weights,
    takes the fractions."""
    at, g, bt = transform_matrices(m, stride)
    for matrix in (at, bt):
        np.testing.assert_array_equal(matrix, np.round(matrix))
    assert np.abs(bt).max() <= 5 and np.abs(at).max() <= 8
    assert np.abs(g).max() <= 1


def test_the_stride_two_transform_multiplies_the_odd_inputs_once():
    """The odd tap reads only odd inputs, one product each; the even taps an F(m, 2) of the
    even inputs (m + 1 products): 2m + 1 in all, not the 3m of the direct sum."""
    at, g, bt = transform_matrices(4, 2)
    assert at.shape == (4, 9)
    odd = bt[5:]
    np.testing.assert_array_equal(odd, np.eye(9)[1::2])
    np.testing.assert_array_equal(g[5:], [[0, 1, 0]] * 4)
    assert not bt[:5, 1::2].any() and not g[:5, 1].any()


@pytest.mark.parametrize("m, stride", [(1, 1), (5, 1), (6, 1), ("4", 1), (2, 3), (4, 0), (2, "2")])
def test_other_tile_sizes_and_strides_have_no_transforms(m, stride):
    with pytest.raises(ValueError, match="Winograd"):
        transform_matrices(m, stride)


@pytest.mark.parametrize("padded, stride, want", [(16, 1, 14), (58, 2, 28), (57, 2, 28), (30, 2, 14), (3, 2, 1)])
def test_output_size(padded, stride, want):
    assert output_size(padded, stride) == want


@pytest.mark.parametrize("h, w, m, want", [(8, 8, 2, (4, 4)), (16, 12, 4, (4, 3)), (13, 11, 4, (4, 3)),
                                           (13, 11, 2, (7, 6)), (1, 1, 4, (1, 1)), (4, 5, 4, (1, 2)),
                                           (7, 7, 2, (4, 4))])
def test_tile_grid_covers_the_output_with_whole_and_partial_tiles(h, w, m, want):
    assert tile_grid(h, w, m) == want


def _weights(fmt, c, o):
    return RNG.standard_normal((3, 3, c, o) if fmt == "XIO" else (o, c, 3, 3)).astype("float32")


def test_filter_tiles_numpy_is_the_transform_in_panels():
    c, o, m, block = 3, 13, 4, 8
    w = _weights("XIO", c, o)
    g = transform_matrices(m)[1]
    u = filter_tiles_numpy(w, "XIO", m, block)
    assert u.shape == (6, 6, 2, c, block) and u.dtype == np.float32
    for ch in range(c):
        for out in range(o):
            np.testing.assert_allclose(u[:, :, out // block, ch, out % block], g @ w[:, :, ch, out] @ g.T,
                                       rtol=1e-6, atol=1e-6)
    assert not u[:, :, 1, :, o - block:].any()          # past the last channel: zeros
    np.testing.assert_array_equal(filter_tiles_numpy(w.transpose(3, 2, 0, 1), "OIX", m, block), u)


@pytest.mark.parametrize("m, stride", [(2, 1), (3, 1), (4, 1), (2, 2), (4, 2)])
@pytest.mark.parametrize("fmt", ["XIO", "OIX"])
@pytest.mark.parametrize("c, o, block", [(5, 13, 8), (3, 16, 8)])
def test_compiled_filter_tiles_equal_the_numpy_ones(m, stride, fmt, c, o, block):
    W = placeholder((3, 3, c, o) if fmt == "XIO" else (o, c, 3, 3), name="W", constant=True)
    U = filter_tiles(W, fmt, m, block, stride=stride)
    alpha = m + 2 if stride == 1 else 2 * m + 1
    assert U.shape == (alpha, alpha, -(-o // block), c, block)
    kernel, inputs = _plain_pack(U, "pack", None)
    assert [t.name for t in inputs] == ["W"]
    w = _weights(fmt, c, o)
    got = np.full(U.shape, np.nan, "float32")
    kernel(w, got)
    np.testing.assert_allclose(got, filter_tiles_numpy(w, fmt, m, block, stride), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m, fmt, stride", [(2, "XIO", 1), (4, "OIX", 1), (3, "XIO", 2)])
def test_winograd_filters_pack_equals_the_numpy_transform(m, fmt, stride):
    c, o, block = 5, 13, 8
    shape = (3, 3, c, o) if fmt == "XIO" else (o, c, 3, 3)
    pack = WinogradFilters(shape, "float32", fmt, m, block, stride)
    alpha = m + 2 if stride == 1 else 2 * m + 1
    assert pack.name == "winograd_filters" and NUMPY_PACKS["winograd_filters"] is WinogradFilters
    assert pack.args[0].shape == shape and pack.args[-1].shape == (alpha, alpha, 2, c, block)
    assert pack.args[-1].dtype == "float32"
    w = _weights(fmt, c, o)
    out = np.full(pack.args[-1].shape, np.nan, "float32")
    pack(w, out)
    np.testing.assert_array_equal(out, filter_tiles_numpy(w, fmt, m, block, stride))
    assert pack.recipe()["stride"] == stride
    again = WinogradFilters(**pack.recipe())
    assert again.args == pack.args and again.recipe() == pack.recipe()
    out2 = np.full(pack.args[-1].shape, np.nan, "float32")
    again(w, out2)
    np.testing.assert_array_equal(out2, out)


def test_winograd_filters_refuse_arrays_of_other_shapes():
    pack = WinogradFilters((3, 3, 4, 6), "float32", "XIO", 2, 4)
    good_out = np.zeros(pack.args[-1].shape, "float32")
    with pytest.raises(ValueError, match="Winograd filters"):
        pack(np.zeros((3, 3, 4, 5), "float32"), good_out)
    with pytest.raises(ValueError, match="Winograd filters"):
        pack(np.zeros((6, 4, 3, 3), "float32"), good_out)           # the other format's shape
    with pytest.raises(ValueError, match="Winograd filters"):
        pack(np.zeros((3, 3, 4, 6), "float32"), np.zeros((4, 4, 1, 4, 4), "float32"))


def test_a_recipe_without_a_stride_is_the_stride_one_transform():
    """Artifacts written before strided Winograd name no stride."""
    recipe = WinogradFilters((3, 3, 4, 6), "float32", "XIO", 4, 4).recipe()
    del recipe["stride"]
    assert WinogradFilters(**recipe).stride == 1


@pytest.mark.parametrize("args", [((3, 3, 4, 6), "float32", "XIO", 5, 4),
                                  ((3, 3, 4, 6), "float32", "XYZ", 2, 4),
                                  ((3, 4, 6), "float32", "XIO", 2, 4),
                                  ((3, 3, 4, 6), "float32", "XIO", 2, 0),
                                  ((3, 3, 4, 6), "float32", "XIO", 2, 4, 3)])
def test_winograd_filters_refuse_bad_arguments(args):
    with pytest.raises(ValueError, match="Winograd filters"):
        WinogradFilters(*args)


@pytest.mark.parametrize("m, n, h, w, c, o, fmt, stride", [(2, 2, 5, 7, 3, 4, "XIO", 1), (4, 1, 9, 6, 2, 5, "OIX", 1),
                                                           (3, 1, 7, 8, 3, 4, "XIO", 1), (2, 2, 5, 3, 3, 4, "OIX", 2),
                                                           (4, 1, 6, 7, 2, 5, "XIO", 2), (3, 1, 4, 5, 3, 4, "XIO", 2)])
def test_the_stages_chained_compute_a_convolution(m, n, h, w, c, o, fmt, stride):
    """input_tiles -> tile_products (with filter_tiles) -> output_rows -> output_pixel, built
    with no schedule, on sizes the tiles do not divide (an h x w output; at stride 2 the
    padded input has 2h + 1 or 2h + 2 rows)."""
    hp, wp = stride * (h - 1) + 3 + (h % 2 if stride == 2 else 0), stride * (w - 1) + 3
    P = placeholder((n, hp, wp, c), name="P")
    W = placeholder((3, 3, c, o) if fmt == "XIO" else (o, c, 3, 3), name="W")
    grid = tile_grid(h, w, m)
    alpha = m + 2 if stride == 1 else 2 * m + 1
    V = input_tiles(P, m, stride=stride)
    assert V.shape == (alpha, alpha, n * grid[0] * grid[1], c)
    M = tile_products(V, filter_tiles(W, fmt, m, 4, stride=stride), o)
    R = output_rows(M, m, stride=stride)
    assert R.shape == (m, alpha, n * grid[0] * grid[1], o)
    with pytest.raises(ValueError, match="Winograd output rows"):
        output_rows(M, m, stride=3 - stride)
    Y = compute((n, h, w, o), lambda a, b, d, e: output_pixel(R, m, grid, a, b, d, e, stride), name="Y")
    f = build(create_schedule(Y), [P, W, Y])
    p = RNG.standard_normal(P.shape).astype("float32")
    wv = _weights(fmt, c, o)
    got = np.full(Y.shape, np.nan, "float32")
    f(p, wv, got)
    wx = wv if fmt == "XIO" else wv.transpose(2, 3, 1, 0)
    want = np.zeros(Y.shape)
    for k in range(3):
        for l in range(3):
            want += np.einsum("nhwc,co->nhwo", p[:, k:k + stride * (h - 1) + 1:stride,
                                                 l:l + stride * (w - 1) + 1:stride].astype(np.float64), wx[k, l])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())
