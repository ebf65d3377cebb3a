"""fuse and reorder: fused data axes (then split / vectorized), permuted loops, reduce axes
moved outside data axes, fused reduce axes. Every built kernel is compared with numpy."""
from __future__ import annotations

import numpy as np
import pytest

from tilefuse.schedule import build, create_schedule, lower
from tilefuse.tensorir import compute, max as rmax, placeholder, reduce_axis, sum as rsum
from schedule_testing import assert_close, matmul, rand, run


# ---------------------------------------------------------------------- fuse

def test_fuse_two_axes_extent_and_name():
    A = placeholder((7, 9), "float32", name="A")
    B = compute((7, 9), lambda i, j: A[i, j] + 1.0, name="B")
    s = create_schedule(B)
    f = s[B].fuse(*B.op.axis)
    assert f.dom_extent == 63
    assert [a.name for a in s[B].leaf_iter_vars] == [f.name]


def test_fuse_two_axes_alone():
    A = placeholder((7, 9), "float32", name="A")
    B = compute((7, 9), lambda i, j: A[i, j] + 1.0, name="B")
    s = create_schedule(B)
    s[B].fuse(*B.op.axis)
    a = rand((7, 9))
    np.testing.assert_array_equal(run(s, [A, B], [a], (7, 9)), a + np.float32(1))


@pytest.mark.parametrize("factor", [4, 8, 16])
def test_fuse_two_axes_then_split_and_vectorize(factor):
    A = placeholder((7, 9), "float32", name="A")
    B = compute((7, 9), lambda i, j: A[i, j] * 3.0 - 1.0, name="B")
    s = create_schedule(B)
    f = s[B].fuse(*B.op.axis)
    _, fi = s[B].split(f, factor=factor)   # 63 elements: a tail in every case
    s[B].vectorize(fi)
    a = rand((7, 9))
    assert_close(run(s, [A, B], [a], (7, 9)), a * np.float32(3) - np.float32(1))


@pytest.mark.parametrize("factor", [4, 16, 32])
def test_fuse_three_axes_then_split_and_vectorize(factor):
    A = placeholder((3, 5, 7), "float32", name="A")
    B = compute((3, 5, 7), lambda i, j, k: A[i, j, k] * 2.0, name="B")
    s = create_schedule(B)
    f = s[B].fuse(*B.op.axis)
    assert f.dom_extent == 105
    _, fi = s[B].split(f, factor=factor)
    s[B].vectorize(fi)
    a = rand((3, 5, 7))
    np.testing.assert_array_equal(run(s, [A, B], [a], (3, 5, 7)), a * np.float32(2))


def test_fuse_inner_two_of_three_axes():
    A = placeholder((4, 5, 6), "float32", name="A")
    B = compute((4, 5, 6), lambda i, j, k: A[i, j, k] + A[i, 0, k], name="B")
    s = create_schedule(B)
    i, j, k = B.op.axis
    f = s[B].fuse(j, k)
    _, fi = s[B].split(f, factor=8)
    s[B].vectorize(fi)
    a = rand((4, 5, 6))
    np.testing.assert_array_equal(run(s, [A, B], [a], (4, 5, 6)), a + a[:, 0:1, :])


def test_fuse_split_axes_back_together():
    A = placeholder((50,), "float32", name="A")
    B = compute((50,), lambda i: A[i] * A[i], name="B")
    s = create_schedule(B)
    xo, xi = s[B].split(B.op.axis[0], factor=8)  # 7 * 8 = 56 > 50: the fused axis carries a guard
    s[B].fuse(xo, xi)
    a = rand(50)
    np.testing.assert_array_equal(run(s, [A, B], [a], (50,)), a * a)


def test_fuse_of_tiled_outer_axes():
    A = placeholder((10, 12), "float32", name="A")
    B = compute((10, 12), lambda i, j: A[i, j] - A[i, j] * 0.5, name="B")
    s = create_schedule(B)
    io, jo, ii, ji = s[B].tile(*B.op.axis, 4, 5)
    s[B].fuse(io, jo)
    a = rand((10, 12))
    assert_close(run(s, [A, B], [a], (10, 12)), a - a * np.float32(0.5))


# ---------------------------------------------------------------------- reorder of data axes

def test_reorder_two_data_axes():
    A = placeholder((6, 9), "float32", name="A")
    B = compute((6, 9), lambda i, j: A[i, j] + 2.0, name="B")
    s = create_schedule(B)
    i, j = B.op.axis
    s[B].reorder(j, i)
    text = str(lower(s, [A, B]))
    assert text.index("for (j,") < text.index("for (i,")
    a = rand((6, 9))
    np.testing.assert_array_equal(run(s, [A, B], [a], (6, 9)), a + np.float32(2))


@pytest.mark.parametrize("order", [(2, 0, 1), (1, 2, 0), (2, 1, 0)])
def test_reorder_three_data_axes(order):
    A = placeholder((3, 4, 5), "float32", name="A")
    B = compute((3, 4, 5), lambda i, j, k: A[i, j, k] * 2.0 + 1.0, name="B")
    s = create_schedule(B)
    axes = B.op.axis
    s[B].reorder(*[axes[o] for o in order])
    assert [a.name for a in s[B].leaf_iter_vars] == [axes[o].name for o in order]
    a = rand((3, 4, 5))
    assert_close(run(s, [A, B], [a], (3, 4, 5)), a * np.float32(2) + np.float32(1))


def test_reorder_subset_keeps_other_positions():
    A = placeholder((3, 4, 5), "float32", name="A")
    B = compute((3, 4, 5), lambda i, j, k: A[i, j, k], name="B")
    s = create_schedule(B)
    i, j, k = B.op.axis
    s[B].reorder(k, i)
    assert [a.name for a in s[B].leaf_iter_vars] == ["k", "j", "i"]
    a = rand((3, 4, 5))
    np.testing.assert_array_equal(run(s, [A, B], [a], (3, 4, 5)), a)


def test_reorder_after_tile_inner_first():
    A = placeholder((10, 13), "float32", name="A")
    B = compute((10, 13), lambda i, j: A[i, j] * 4.0, name="B")
    s = create_schedule(B)
    io, jo, ii, ji = s[B].tile(*B.op.axis, 3, 4)
    s[B].reorder(ji, ii, jo, io)
    a = rand((10, 13))
    np.testing.assert_array_equal(run(s, [A, B], [a], (10, 13)), a * np.float32(4))


def test_transposed_order_vectorized_outer_data_axis():
    A = placeholder((16, 7), "float32", name="A")
    B = compute((16, 7), lambda i, j: A[i, j] + 1.0, name="B")
    s = create_schedule(B)
    i, j = B.op.axis
    s[B].reorder(j, i)
    s[B].vectorize(i)   # strided stores: scatter
    a = rand((16, 7))
    np.testing.assert_array_equal(run(s, [A, B], [a], (16, 7)), a + np.float32(1))


# ---------------------------------------------------------------------- reduce axis moved outside

@pytest.mark.parametrize("n,k,m", [(4, 5, 16), (3, 7, 8), (5, 1, 16)])
def test_matmul_ikj_order_vectorized_j(n, k, m):
    A, B, C, r = matmul(n, k, m)
    s = create_schedule(C)
    i, j = C.op.axis
    s[C].reorder(i, r, j)
    s[C].vectorize(j)
    text = str(lower(s, [A, B, C]))
    if k > 1:  # (a loop of extent 1 is replaced by its body)
        # the init of C is a loop over j of its own, before the r loop
        assert text.index("= 0f") < text.index("for (r,")
    a, b = rand((n, k)), rand((k, m))
    np.testing.assert_allclose(run(s, [A, B, C], [a, b], (n, m)), a @ b, rtol=1e-5, atol=1e-5 * k)


def test_matmul_ikj_order_split_vectorized_j_with_tail():
    n, k, m = 6, 9, 19
    A, B, C, r = matmul(n, k, m)
    s = create_schedule(C)
    i, j = C.op.axis
    jo, ji = s[C].split(j, factor=8)
    s[C].reorder(i, jo, r, ji)
    s[C].vectorize(ji)
    a, b = rand((n, k)), rand((k, m))
    np.testing.assert_allclose(run(s, [A, B, C], [a, b], (n, m)), a @ b, rtol=1e-5, atol=1e-5 * k)


def test_matmul_ikj_order_init_is_not_stale_on_second_call():
    n, k, m = 4, 6, 8
    A, B, C, r = matmul(n, k, m)
    s = create_schedule(C)
    i, j = C.op.axis
    s[C].reorder(i, r, j)
    s[C].vectorize(j)
    f = build(s, [A, B, C])
    a, b = rand((n, k)), rand((k, m))
    c = np.full((n, m), 1e6, "float32")
    f(a, b, c)
    f(a, b, c)  # accumulating into the previous result would double it
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5 * k)


def test_reduce_axis_outermost_kij():
    n, k, m = 5, 7, 6
    A, B, C, r = matmul(n, k, m)
    s = create_schedule(C)
    i, j = C.op.axis
    s[C].reorder(r, i, j)
    a, b = rand((n, k)), rand((k, m))
    np.testing.assert_allclose(run(s, [A, B, C], [a, b], (n, m)), a @ b, rtol=1e-5, atol=1e-5 * k)


def test_split_reduce_axis_outer_part_outside_data_axes():
    n, k, m = 5, 11, 7
    A, B, C, r = matmul(n, k, m)
    s = create_schedule(C)
    i, j = C.op.axis
    ro, ri = s[C].split(r, factor=4)
    s[C].reorder(ro, i, j, ri)
    a, b = rand((n, k)), rand((k, m))
    np.testing.assert_allclose(run(s, [A, B, C], [a, b], (n, m)), a @ b, rtol=1e-5, atol=1e-5 * k)


def test_reduce_between_split_data_axes_with_tails():
    n, k, m = 7, 5, 10
    A, B, C, r = matmul(n, k, m)
    s = create_schedule(C)
    io, jo, ii, ji = s[C].tile(*C.op.axis, 3, 4)
    s[C].reorder(io, jo, r, ii, ji)
    s[C].vectorize(ji)
    a, b = rand((n, k)), rand((k, m))
    np.testing.assert_allclose(run(s, [A, B, C], [a, b], (n, m)), a @ b, rtol=1e-5, atol=1e-5 * k)


def test_max_reduce_axis_outside_data_axis():
    A = placeholder((9, 12), "float32", name="A")
    r = reduce_axis((0, 9), name="r")
    C = compute((12,), lambda j: rmax(A[r, j], axis=r), name="C")
    s = create_schedule(C)
    s[C].reorder(r, C.op.axis[0])
    s[C].vectorize(C.op.axis[0])
    a = (rand((9, 12)) - 10).astype("float32")
    np.testing.assert_array_equal(run(s, [A, C], [a], (12,)), a.max(axis=0))


# ---------------------------------------------------------------------- fuse of reduce axes

def test_fuse_two_reduce_axes():
    A = placeholder((4, 5, 6), "float32", name="A")
    r1 = reduce_axis((0, 5), name="r1")
    r2 = reduce_axis((0, 6), name="r2")
    C = compute((4,), lambda i: rsum(A[i, r1, r2], axis=[r1, r2]), name="C")
    s = create_schedule(C)
    f = s[C].fuse(r1, r2)
    assert f.dom_extent == 30 and f.kind == "reduce"
    a = rand((4, 5, 6))
    np.testing.assert_allclose(run(s, [A, C], [a], (4,)), a.sum(axis=(1, 2)), rtol=1e-5, atol=1e-5)


def test_fuse_two_reduce_axes_then_split_non_dividing():
    A = placeholder((4, 5, 6), "float32", name="A")
    r1 = reduce_axis((0, 5), name="r1")
    r2 = reduce_axis((0, 6), name="r2")
    C = compute((4,), lambda i: rmax(A[i, r1, r2], axis=[r1, r2]), name="C")
    s = create_schedule(C)
    f = s[C].fuse(r1, r2)
    s[C].split(f, factor=7)
    a = rand((4, 5, 6))
    np.testing.assert_array_equal(run(s, [A, C], [a], (4,)), a.max(axis=(1, 2)))


def test_fuse_reduce_axes_with_nonzero_lower_bounds():
    A = placeholder((3, 8, 9), "float32", name="A")
    r1 = reduce_axis((2, 7), name="r1")
    r2 = reduce_axis((1, 9), name="r2")
    C = compute((3,), lambda i: rsum(A[i, r1, r2], axis=[r1, r2]), name="C")
    s = create_schedule(C)
    s[C].fuse(r1, r2)
    a = rand((3, 8, 9))
    np.testing.assert_allclose(run(s, [A, C], [a], (3,)), a[:, 2:7, 1:9].sum(axis=(1, 2)),
                               rtol=1e-5, atol=1e-5)


def test_fuse_three_reduce_axes_with_parallel_data_axis():
    A = placeholder((6, 2, 3, 4), "float32", name="A")
    rs = [reduce_axis((0, e), name=f"r{d}") for d, e in enumerate((2, 3, 4))]
    C = compute((6,), lambda i: rsum(A[i, rs[0], rs[1], rs[2]], axis=rs), name="C")
    s = create_schedule(C)
    s[C].fuse(*rs)
    s[C].parallel(C.op.axis[0])
    a = rand((6, 2, 3, 4))
    np.testing.assert_allclose(run(s, [A, C], [a], (6,)), a.sum(axis=(1, 2, 3)), rtol=1e-5, atol=1e-5)
