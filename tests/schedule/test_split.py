"""split: factor and nparts, dividing and non-dividing, nested, and on reduce axes.

Every built kernel is compared with numpy.
"""
from __future__ import annotations

import numpy as np
import pytest

from tilefuse.schedule import create_schedule, lower
from tilefuse.tensorir import compute, max as rmax, placeholder, reduce_axis, sum as rsum
from schedule_testing import matmul, rand, run


def scale_1d(n):
    A = placeholder((n,), "float32", name="A")
    B = compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    return A, B


# ---------------------------------------------------------------------- factor / nparts

@pytest.mark.parametrize("extent", [1, 7, 16, 17, 100])
@pytest.mark.parametrize("factor", [1, 3, 4, 16, 64])
def test_split_factor_matches_numpy(extent, factor):
    A, B = scale_1d(extent)
    s = create_schedule(B)
    xo, xi = s[B].split(B.op.axis[0], factor=factor)
    assert xi.dom_extent == factor
    assert xo.dom_extent == -(-extent // factor)
    a = rand(extent)
    np.testing.assert_array_equal(run(s, [A, B], [a], (extent,)), a * np.float32(2) + np.float32(1))


@pytest.mark.parametrize("extent", [1, 7, 16, 17, 100])
@pytest.mark.parametrize("nparts", [1, 3, 4, 16, 64])
def test_split_nparts_matches_numpy(extent, nparts):
    A, B = scale_1d(extent)
    s = create_schedule(B)
    xo, xi = s[B].split(B.op.axis[0], nparts=nparts)
    assert xo.dom_extent <= nparts
    assert xo.dom_extent * xi.dom_extent >= extent
    a = rand(extent)
    np.testing.assert_array_equal(run(s, [A, B], [a], (extent,)), a * np.float32(2) + np.float32(1))


def test_split_nparts_extents():
    A, B = scale_1d(100)
    s = create_schedule(B)
    xo, xi = s[B].split(B.op.axis[0], nparts=3)
    assert (xo.dom_extent, xi.dom_extent) == (3, 34)


def test_split_factor_larger_than_extent_runs_once():
    A, B = scale_1d(7)
    s = create_schedule(B)
    xo, xi = s[B].split(B.op.axis[0], factor=64)
    assert xo.dom_extent == 1
    a = rand(7)
    np.testing.assert_array_equal(run(s, [A, B], [a], (7,)), a * np.float32(2) + np.float32(1))


def test_split_second_axis_of_2d_non_dividing():
    A = placeholder((5, 13), "float32", name="A")
    B = compute((5, 13), lambda i, j: A[i, j] - 3.0, name="B")
    s = create_schedule(B)
    s[B].split(B.op.axis[1], factor=4)
    a = rand((5, 13))
    np.testing.assert_array_equal(run(s, [A, B], [a], (5, 13)), a - np.float32(3))


def test_split_both_axes_of_2d_non_dividing():
    A = placeholder((11, 13), "float32", name="A")
    B = compute((11, 13), lambda i, j: A[i, j] * A[i, j], name="B")
    s = create_schedule(B)
    s[B].split(B.op.axis[0], factor=3)
    s[B].split(B.op.axis[1], nparts=4)
    a = rand((11, 13))
    np.testing.assert_array_equal(run(s, [A, B], [a], (11, 13)), a * a)


# ---------------------------------------------------------------------- nested splits

@pytest.mark.parametrize("extent,f1,f2", [(100, 16, 4), (100, 17, 5), (37, 8, 3), (10, 4, 8)])
def test_nested_split_of_inner(extent, f1, f2):
    A, B = scale_1d(extent)
    s = create_schedule(B)
    xo, xi = s[B].split(B.op.axis[0], factor=f1)
    xio, xii = s[B].split(xi, factor=f2)
    assert [a.name for a in s[B].leaf_iter_vars] == ["i.outer", "i.inner.outer", "i.inner.inner"]
    a = rand(extent)
    np.testing.assert_array_equal(run(s, [A, B], [a], (extent,)), a * np.float32(2) + np.float32(1))


@pytest.mark.parametrize("extent,f1,f2", [(100, 16, 3), (23, 5, 2)])
def test_nested_split_of_outer(extent, f1, f2):
    A, B = scale_1d(extent)
    s = create_schedule(B)
    xo, xi = s[B].split(B.op.axis[0], factor=f1)
    s[B].split(xo, nparts=f2)
    a = rand(extent)
    np.testing.assert_array_equal(run(s, [A, B], [a], (extent,)), a * np.float32(2) + np.float32(1))


def test_triple_nested_split_with_vectorized_innermost():
    A, B = scale_1d(101)
    s = create_schedule(B)
    _, xi = s[B].split(B.op.axis[0], factor=32)
    _, xii = s[B].split(xi, factor=12)
    _, xiii = s[B].split(xii, factor=4)
    s[B].vectorize(xiii)
    a = rand(101)
    np.testing.assert_array_equal(run(s, [A, B], [a], (101,)), a * np.float32(2) + np.float32(1))


# ---------------------------------------------------------------------- reduce axes

def row_reduce(n, k, reducer, lo=0):
    A = placeholder((n, k), "float32", name="A")
    r = reduce_axis((lo, k), name="r")
    C = compute((n,), lambda i: reducer(A[i, r], axis=r), name="C")
    return A, C, r


@pytest.mark.parametrize("factor", [1, 3, 4, 5, 16, 64])
def test_split_reduce_axis_sum_non_dividing(factor):
    A, C, r = row_reduce(6, 17, rsum)
    s = create_schedule(C)
    s[C].split(r, factor=factor)
    a = rand((6, 17))
    np.testing.assert_allclose(run(s, [A, C], [a], (6,)), a.sum(axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("factor", [1, 3, 4, 16, 64])
def test_split_reduce_axis_max_non_dividing(factor):
    A, C, r = row_reduce(6, 17, rmax)
    s = create_schedule(C)
    s[C].split(r, factor=factor)
    a = rand((6, 17)) - 10.0  # all negative: a wrong identity (0) would show
    a = a.astype("float32")
    np.testing.assert_array_equal(run(s, [A, C], [a], (6,)), a.max(axis=1))


def test_split_reduce_axis_nparts():
    A, C, r = row_reduce(5, 23, rsum)
    s = create_schedule(C)
    s[C].split(r, nparts=4)
    a = rand((5, 23))
    np.testing.assert_allclose(run(s, [A, C], [a], (5,)), a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_nested_split_of_reduce_axis():
    A, C, r = row_reduce(4, 50, rsum)
    s = create_schedule(C)
    _, ri = s[C].split(r, factor=16)
    s[C].split(ri, factor=5)
    a = rand((4, 50))
    np.testing.assert_allclose(run(s, [A, C], [a], (4,)), a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_reduce_axis_nonzero_lower_bound_unsplit():
    A, C, r = row_reduce(4, 9, rsum, lo=2)
    s = create_schedule(C)
    a = rand((4, 9))
    np.testing.assert_allclose(run(s, [A, C], [a], (4,)), a[:, 2:9].sum(axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("factor", [1, 2, 3, 4, 7, 10])
def test_split_reduce_axis_nonzero_lower_bound_sum(factor):
    A, C, r = row_reduce(4, 9, rsum, lo=2)  # r in [2, 9)
    s = create_schedule(C)
    s[C].split(r, factor=factor)
    a = rand((4, 9))
    np.testing.assert_allclose(run(s, [A, C], [a], (4,)), a[:, 2:9].sum(axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("nparts", [2, 3])
def test_split_reduce_axis_nonzero_lower_bound_max_nparts(nparts):
    A, C, r = row_reduce(4, 9, rmax, lo=2)
    s = create_schedule(C)
    s[C].split(r, nparts=nparts)
    a = rand((4, 9))
    a[:, :2] = 100.0  # outside the domain: must not be read into the max
    np.testing.assert_array_equal(run(s, [A, C], [a], (4,)), a[:, 2:9].max(axis=1))


def test_split_data_and_reduce_axes_of_matmul():
    n, k, m = 9, 13, 11
    A, B, C, r = matmul(n, k, m)
    s = create_schedule(C)
    i, j = C.op.axis
    s[C].split(i, factor=4)
    s[C].split(j, nparts=3)
    s[C].split(r, factor=5)
    a, b = rand((n, k)), rand((k, m))
    np.testing.assert_allclose(run(s, [A, B, C], [a, b], (n, m)), a @ b, rtol=1e-5, atol=1e-5 * k)


def test_split_lowered_extents_dividing_has_no_guard():
    A, B = scale_1d(64)
    s = create_schedule(B)
    s[B].split(B.op.axis[0], factor=16)
    text = str(lower(s, [A, B]))
    assert "if" not in text
    assert "for (i.outer, 0, 4)" in text and "for (i.inner, 0, 16)" in text
