"""vectorize / unroll / parallel annotations and output dtypes.

Every built kernel is compared with numpy; integer, bool and padding results exactly.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tilefuse.schedule import build, create_schedule, lower
from tilefuse.tensorir import cast, compute, if_then_else, placeholder, reduce_axis, sqrt, sum as rsum, var
from schedule_testing import assert_close, matmul, rand, run

RNG = np.random.default_rng(7)


def rand_int(shape, dtype):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)


def fma_1d(n, dtype="float32"):
    A = placeholder((n,), dtype, name="A")
    B = placeholder((n,), dtype, name="B")
    C = compute((n,), lambda i: A[i] * B[i] + 1.0, name="C")
    return A, B, C


# ---------------------------------------------------------------------- vectorize

@pytest.mark.parametrize("lanes", [4, 8, 16, 32])
@pytest.mark.parametrize("n", [37, 64, 100])
def test_vectorize_lanes_with_and_without_tail(lanes, n):
    A, B, C = fma_1d(n)
    s = create_schedule(C)
    _, xi = s[C].split(C.op.axis[0], factor=lanes)
    s[C].vectorize(xi)
    a, b = rand(n), rand(n)
    assert_close(run(s, [A, B, C], [a, b], (n,)), a * b + np.float32(1))


@pytest.mark.parametrize("n", [3, 5, 7, 12])
def test_vectorize_whole_axis_of_odd_extent(n):
    A, B, C = fma_1d(n)
    s = create_schedule(C)
    s[C].vectorize(C.op.axis[0])
    a, b = rand(n), rand(n)
    assert_close(run(s, [A, B, C], [a, b], (n,)), a * b + np.float32(1))


def test_vectorize_inner_axis_of_2d_with_tail():
    A = placeholder((5, 21), "float32", name="A")
    B = compute((5, 21), lambda i, j: A[i, j] * 2.0 + A[i, 0], name="B")
    s = create_schedule(B)
    _, ji = s[B].split(B.op.axis[1], factor=8)
    s[B].vectorize(ji)
    a = rand((5, 21))
    assert_close(run(s, [A, B], [a], (5, 21)), a * np.float32(2) + a[:, :1])


def test_vectorized_transpose_gather():
    A = placeholder((11, 13), "float32", name="A")
    B = compute((13, 11), lambda i, j: A[j, i], name="B")
    s = create_schedule(B)
    _, ji = s[B].split(B.op.axis[1], factor=8)  # A read with stride 13 along the lanes
    s[B].vectorize(ji)
    a = rand((11, 13))
    np.testing.assert_array_equal(run(s, [A, B], [a], (13, 11)), a.T)


def test_vectorized_transpose_scatter():
    A = placeholder((11, 13), "float32", name="A")
    B = compute((13, 11), lambda i, j: A[j, i], name="B")
    s = create_schedule(B)
    i, j = B.op.axis
    s[B].reorder(j, i)
    _, ii = s[B].split(i, factor=4)  # B written with stride 11 along the lanes, contiguous reads
    s[B].vectorize(ii)
    a = rand((11, 13))
    np.testing.assert_array_equal(run(s, [A, B], [a], (13, 11)), a.T)


def test_vectorized_strided_read():
    A = placeholder((40,), "float32", name="A")
    B = compute((20,), lambda i: A[i * 2] + A[i * 2 + 1], name="B")
    s = create_schedule(B)
    _, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(xi)
    a = rand(40)
    np.testing.assert_array_equal(run(s, [A, B], [a], (20,)), a[0::2] + a[1::2])


def test_vectorized_body_reads_lane_independent_value_with_tail():
    A = placeholder((6, 19), "float32", name="A")
    R = placeholder((6,), "float32", name="R")
    B = compute((6, 19), lambda i, j: A[i, j] - R[i], name="B")
    s = create_schedule(B)
    _, ji = s[B].split(B.op.axis[1], factor=8)  # R[i] is read under the tail mask too
    s[B].vectorize(ji)
    a, r = rand((6, 19)), rand(6)
    np.testing.assert_array_equal(run(s, [A, R, B], [a, r], (6, 19)), a - r[:, None])


def test_vectorized_body_whose_value_is_lane_independent():
    R = placeholder((5,), "float32", name="R")
    B = compute((5, 12), lambda i, j: R[i] * 3.0, name="B")
    s = create_schedule(B)
    _, ji = s[B].split(B.op.axis[1], factor=8)
    s[B].vectorize(ji)
    r = rand(5)
    np.testing.assert_array_equal(run(s, [R, B], [r], (5, 12)), np.repeat((r * np.float32(3))[:, None], 12, 1))


def test_vectorized_body_with_scalar_param():
    alpha = var("alpha", "float32")
    A = placeholder((30,), "float32", name="A")
    B = compute((30,), lambda i: A[i] * alpha, name="B")
    s = create_schedule(B)
    _, xi = s[B].split(B.op.axis[0], factor=16)
    s[B].vectorize(xi)
    f = build(s, [A, alpha, B])
    a, b = rand(30), np.zeros(30, "float32")
    f(a, 2.5, b)
    np.testing.assert_array_equal(b, a * np.float32(2.5))


def test_vectorized_data_axis_with_reduction_inside():
    A = placeholder((10, 7), "float32", name="A")
    r = reduce_axis((0, 7), name="r")
    C = compute((10,), lambda i: rsum(A[i, r], axis=r), name="C")
    s = create_schedule(C)
    _, ii = s[C].split(C.op.axis[0], factor=4)
    s[C].vectorize(ii)   # r loop runs inside the vector lanes
    a = rand((10, 7))
    np.testing.assert_allclose(run(s, [A, C], [a], (10,)), a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_vectorize_two_nested_axes():
    A = placeholder((4, 8), "float32", name="A")
    B = compute((4, 8), lambda i, j: A[i, j] + 1.0, name="B")
    s = create_schedule(B)
    s[B].vectorize(B.op.axis[0])
    s[B].vectorize(B.op.axis[1])
    a = rand((4, 8))
    np.testing.assert_array_equal(run(s, [A, B], [a], (4, 8)), a + np.float32(1))


# ---------------------------------------------------------------------- vectorized padding

def pad_1d(n, before, after):
    A = placeholder((n,), "float32", name="A")
    B = compute((n + before + after,),
                lambda i: if_then_else((i >= before) & (i < n + before), A[i - before], 0.0), name="B")
    return A, B


@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_vectorized_if_then_else_padding_1d(lanes):
    n = 21
    A, B = pad_1d(n, 2, 3)
    s = create_schedule(B)
    _, xi = s[B].split(B.op.axis[0], factor=lanes)
    s[B].vectorize(xi)
    a = rand(n)
    np.testing.assert_array_equal(run(s, [A, B], [a], (n + 5,)), np.pad(a, (2, 3)))


def test_vectorized_if_then_else_padding_2d():
    h, w = 7, 10
    A = placeholder((h, w), "float32", name="A")
    B = compute((h + 2, w + 2), lambda i, j: if_then_else(
        (i >= 1) & (i < h + 1) & (j >= 1) & (j < w + 1), A[i - 1, j - 1], -1.0), name="B")
    s = create_schedule(B)
    _, ji = s[B].split(B.op.axis[1], factor=8)
    s[B].vectorize(ji)
    a = rand((h, w))
    np.testing.assert_array_equal(run(s, [A, B], [a], (h + 2, w + 2)), np.pad(a, 1, constant_values=-1.0))


def test_unvectorized_if_then_else_padding():
    A, B = pad_1d(13, 3, 3)
    s = create_schedule(B)
    a = rand(13)
    np.testing.assert_array_equal(run(s, [A, B], [a], (19,)), np.pad(a, (3, 3)))


_GUARD_PAGE_SCRIPT = textwrap.dedent("""
    import ctypes, mmap, sys
    import numpy as np
    from tilefuse.tensorir import compute, if_then_else, placeholder
    from tilefuse.schedule import build, create_schedule
    n, before, after = 20, 2, 3
    A = placeholder((n,), "float32", name="A")
    B = compute((n + before + after,),
                lambda i: if_then_else((i >= before) & (i < n + before), A[i - before], 0.0), name="B")
    s = create_schedule(B)
    _, xi = s[B].split(B.op.axis[0], factor=int(sys.argv[1]))
    s[B].vectorize(xi)
    f = build(s, [A, B])
    page = mmap.PAGESIZE
    mm = mmap.mmap(-1, 3 * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    libc = ctypes.CDLL(None)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(base, page, 0) == 0
    assert libc.mprotect(base + 2 * page, page, 0) == 0
    data = np.random.default_rng(0).standard_normal(n).astype("float32")
    for offset in (page, 2 * page - 4 * n):     # A right after / right before a guard page
        a = np.frombuffer(mm, "float32", n, offset)
        a[:] = data
        b = np.full(n + before + after, np.nan, "float32")
        f(a, b)
        assert np.array_equal(b, np.pad(data, (before, after))), b
    print("ok")
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs mprotect")
@pytest.mark.parametrize("lanes", [8, 16])
def test_vectorized_padding_reads_nothing_out_of_bounds(lanes):
    """A sits between PROT_NONE pages: any read of A outside its bounds would crash."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-c", _GUARD_PAGE_SCRIPT, str(lanes)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0 and "ok" in proc.stdout, (proc.returncode, proc.stderr[-2000:])


# ---------------------------------------------------------------------- unroll

@pytest.mark.parametrize("n,factor", [(32, 4), (37, 4), (10, 16)])
def test_unroll_inner_of_split(n, factor):
    A, B, C = fma_1d(n)
    s = create_schedule(C)
    _, xi = s[C].split(C.op.axis[0], factor=factor)
    s[C].unroll(xi)
    assert "unrolled" in str(lower(s, [A, B, C]))
    a, b = rand(n), rand(n)
    assert_close(run(s, [A, B, C], [a, b], (n,)), a * b + np.float32(1))


def test_unroll_whole_axis():
    A, B, C = fma_1d(9)
    s = create_schedule(C)
    s[C].unroll(C.op.axis[0])
    a, b = rand(9), rand(9)
    assert_close(run(s, [A, B, C], [a, b], (9,)), a * b + np.float32(1))


def test_unroll_reduce_axis_with_tail():
    A = placeholder((5, 11), "float32", name="A")
    r = reduce_axis((0, 11), name="r")
    C = compute((5,), lambda i: rsum(A[i, r], axis=r), name="C")
    s = create_schedule(C)
    _, ri = s[C].split(r, factor=4)
    s[C].unroll(ri)
    a = rand((5, 11))
    np.testing.assert_allclose(run(s, [A, C], [a], (5,)), a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_unroll_and_vectorize_tile():
    n, k, m = 10, 6, 13
    A, B, C, r = matmul(n, k, m)
    s = create_schedule(C)
    io, jo, ii, ji = s[C].tile(*C.op.axis, 4, 8)
    s[C].reorder(io, jo, r, ii, ji)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    a, b = rand((n, k)), rand((k, m))
    np.testing.assert_allclose(run(s, [A, B, C], [a, b], (n, m)), a @ b, rtol=1e-5, atol=1e-5 * k)


# ---------------------------------------------------------------------- parallel

def test_parallel_outer_loop_elementwise():
    A = placeholder((64, 33), "float32", name="A")
    B = compute((64, 33), lambda i, j: A[i, j] * A[i, j] + 2.0, name="B")
    s = create_schedule(B)
    s[B].parallel(B.op.axis[0])
    assert "parallel (i, 0, 64)" in str(lower(s, [A, B]))
    a = rand((64, 33))
    assert_close(run(s, [A, B], [a], (64, 33)), a * a + np.float32(2))


def test_parallel_outer_of_split_with_vectorized_inner():
    A, B, C = fma_1d(1000)
    s = create_schedule(C)
    xo, xi = s[C].split(C.op.axis[0], factor=16)
    s[C].parallel(xo)
    s[C].vectorize(xi)
    a, b = rand(1000), rand(1000)
    assert_close(run(s, [A, B, C], [a, b], (1000,)), a * b + np.float32(1))


def test_parallel_row_reduction():
    A = placeholder((37, 50), "float32", name="A")
    r = reduce_axis((0, 50), name="r")
    C = compute((37,), lambda i: rsum(A[i, r] * A[i, r], axis=r), name="C")
    s = create_schedule(C)
    s[C].parallel(C.op.axis[0])
    a = rand((37, 50))
    np.testing.assert_allclose(run(s, [A, C], [a], (37,)), (a * a).sum(axis=1), rtol=1e-5, atol=1e-4)


def test_parallel_matmul_outer_tile():
    n, k, m = 33, 17, 20
    A, B, C, r = matmul(n, k, m)
    s = create_schedule(C)
    io, jo, ii, ji = s[C].tile(*C.op.axis, 8, 8)
    s[C].parallel(io)
    s[C].vectorize(ji)
    a, b = rand((n, k)), rand((k, m))
    np.testing.assert_allclose(run(s, [A, B, C], [a, b], (n, m)), a @ b, rtol=1e-5, atol=1e-5 * k)


def test_parallel_fused_axis():
    A = placeholder((6, 7, 8), "float32", name="A")
    B = compute((6, 7, 8), lambda i, j, k: A[i, j, k] - 1.0, name="B")
    s = create_schedule(B)
    i, j, k = B.op.axis
    f = s[B].fuse(i, j)
    s[B].parallel(f)
    s[B].vectorize(k)
    a = rand((6, 7, 8))
    np.testing.assert_array_equal(run(s, [A, B], [a], (6, 7, 8)), a - np.float32(1))


def test_parallel_fused_axis_of_reduction():
    A = placeholder((5, 6, 9), "float32", name="A")
    r = reduce_axis((0, 9), name="r")
    C = compute((5, 6), lambda i, j: rsum(A[i, j, r], axis=r), name="C")
    s = create_schedule(C)
    f = s[C].fuse(*C.op.axis)
    s[C].parallel(f)
    a = rand((5, 6, 9))
    np.testing.assert_allclose(run(s, [A, C], [a], (5, 6)), a.sum(axis=2), rtol=1e-5, atol=1e-5)


def test_parallel_with_scalar_param_and_intermediate():
    alpha = var("alpha", "float32")
    A = placeholder((40, 9), "float32", name="A")
    T = compute((40, 9), lambda i, j: A[i, j] * alpha, name="T")
    B = compute((40, 9), lambda i, j: T[i, j] + 1.0, name="B")
    s = create_schedule(B)
    s[T].parallel(T.op.axis[0])
    s[B].parallel(B.op.axis[0])
    f = build(s, [A, alpha, B])
    a, b = rand((40, 9)), np.zeros((40, 9), "float32")
    f(a, -1.5, b)
    assert_close(b, a * np.float32(-1.5) + np.float32(1))


# ---------------------------------------------------------------------- dtypes

@pytest.mark.parametrize("vector", [False, True])
def test_int32_output(vector):
    A = placeholder((37,), "int32", name="A")
    B = placeholder((37,), "int32", name="B")
    C = compute((37,), lambda i: A[i] * 3 + B[i] - 7, name="C")
    s = create_schedule(C)
    if vector:
        _, xi = s[C].split(C.op.axis[0], factor=8)
        s[C].vectorize(xi)
    a = RNG.integers(-1000, 1000, 37).astype("int32")
    b = RNG.integers(-1000, 1000, 37).astype("int32")
    np.testing.assert_array_equal(run(s, [A, B, C], [a, b], (37,), "int32"), a * 3 + b - 7)


def test_int32_floordiv_floormod_negative():
    A = placeholder((20,), "int32", name="A")
    C = compute((20,), lambda i: A[i] // 3 + A[i] % 5, name="C")
    s = create_schedule(C)
    a = np.arange(-10, 10, dtype="int32")
    np.testing.assert_array_equal(run(s, [A, C], [a], (20,), "int32"), a // 3 + a % 5)


@pytest.mark.parametrize("vector", [False, True])
def test_int8_add_and_mul_wrap(vector):
    A = placeholder((67,), "int8", name="A")
    B = placeholder((67,), "int8", name="B")
    C = compute((67,), lambda i: A[i] * B[i] + A[i], name="C")
    s = create_schedule(C)
    if vector:
        _, xi = s[C].split(C.op.axis[0], factor=32)
        s[C].vectorize(xi)
    a, b = rand_int(67, "int8"), rand_int(67, "int8")
    np.testing.assert_array_equal(run(s, [A, B, C], [a, b], (67,), "int8"), a * b + a)


def test_int8_sum_reduction_wraps():
    A = placeholder((4, 50), "int8", name="A")
    r = reduce_axis((0, 50), name="r")
    C = compute((4,), lambda i: rsum(A[i, r], axis=r), name="C")
    s = create_schedule(C)
    a = np.full((4, 50), 100, "int8")
    a[1] = -100
    a[2] = RNG.integers(-128, 127, 50)
    expected = a.sum(axis=1, dtype="int8")
    np.testing.assert_array_equal(run(s, [A, C], [a], (4,), "int8"), expected)


@pytest.mark.parametrize("dtype,op,values", [
    ("int64", "floordiv", [2**62, 2**63 - 1, 5, -2**63, 0, 1, -1, 3]),
    ("int8", "floordiv", [127, -128, 100, -100, 0, 1, -1, 64]),
    ("int8", "floormod", [100, 50, 1, -100, 0, 2, -1, 64]),
    ("uint8", "floordiv", [200, 129, 5, 0, 255, 128, 1, 64]),
    ("int32", "floordiv", [2**30, 2**31 - 1, 5, -2**31, 0, 1, -1, 3]),
])
def test_int_mul_then_divmod_wraps(dtype, op, values):
    A = placeholder((8,), dtype, name="A")
    if op == "floordiv":
        C = compute((8,), lambda i: (A[i] * 2) // 2, name="C")
    else:
        C = compute((8,), lambda i: (A[i] * 3) % 3, name="C")
    s = create_schedule(C)
    a = np.array(values, dtype)
    t = a.dtype.type
    expected = (a * t(2)) // t(2) if op == "floordiv" else (a * t(3)) % t(3)
    np.testing.assert_array_equal(run(s, [A, C], [a], (8,), dtype), expected)


def test_int64_data_compare_after_wrapping_add():
    A = placeholder((3,), "int64", name="A")
    C = compute((3,), lambda i: A[i] + 1 > A[i], name="C")
    a = np.array([2**63 - 1, 0, -5], "int64")
    with np.errstate(over="ignore"):
        expected = (a + np.int64(1)) > a
    np.testing.assert_array_equal(run(create_schedule(C), [A, C], [a], (3,), "bool"), expected)


def test_int8_compare_after_wrapping_add():
    A = placeholder((4,), "int8", name="A")
    C = compute((4,), lambda i: A[i] + 1 > A[i], name="C")
    s = create_schedule(C)
    a = np.array([127, 0, -128, 5], "int8")
    np.testing.assert_array_equal(run(s, [A, C], [a], (4,), "bool"), (a + np.int8(1)) > a)


@pytest.mark.parametrize("vector", [False, True])
def test_uint8_wrap_and_compare(vector):
    A = placeholder((45,), "uint8", name="A")
    B = placeholder((45,), "uint8", name="B")
    C = compute((45,), lambda i: A[i] - B[i] + 7, name="C")
    D = compute((45,), lambda i: C[i] > 200, name="D")
    s = create_schedule(D)
    if vector:
        for st in (C, D):
            _, xi = s[st].split(st.op.axis[0], factor=16)
            s[st].vectorize(xi)
    f = build(s, [A, B, C, D])
    a, b = rand_int(45, "uint8"), rand_int(45, "uint8")
    c, d = np.zeros(45, "uint8"), np.zeros(45, "bool")
    f(a, b, c, d)
    expected = a - b + np.uint8(7)
    np.testing.assert_array_equal(c, expected)
    np.testing.assert_array_equal(d, expected > 200)


def test_uint8_to_float_cast():
    A = placeholder((30,), "uint8", name="A")
    C = compute((30,), lambda i: cast("float32", A[i]) * 0.5, name="C")
    s = create_schedule(C)
    _, xi = s[C].split(C.op.axis[0], factor=16)
    s[C].vectorize(xi)
    a = rand_int(30, "uint8")
    np.testing.assert_array_equal(run(s, [A, C], [a], (30,)), a.astype("float32") * np.float32(0.5))


@pytest.mark.parametrize("vector", [False, True])
def test_float64_output(vector):
    A = placeholder((23,), "float64", name="A")
    B = placeholder((23,), "float64", name="B")
    C = compute((23,), lambda i: sqrt(A[i] * A[i] + B[i] * B[i]) - 0.25, name="C")
    s = create_schedule(C)
    if vector:
        _, xi = s[C].split(C.op.axis[0], factor=4)
        s[C].vectorize(xi)
    a, b = rand(23, "float64"), rand(23, "float64")
    np.testing.assert_allclose(run(s, [A, B, C], [a, b], (23,), "float64"), np.sqrt(a * a + b * b) - 0.25,
                               rtol=1e-14, atol=1e-14)


def test_float64_reduction_parallel():
    A = placeholder((9, 31), "float64", name="A")
    r = reduce_axis((0, 31), name="r")
    C = compute((9,), lambda i: rsum(A[i, r], axis=r), name="C")
    s = create_schedule(C)
    s[C].parallel(C.op.axis[0])
    a = rand((9, 31), "float64")
    np.testing.assert_allclose(run(s, [A, C], [a], (9,), "float64"), a.sum(axis=1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("vector", [False, True])
def test_bool_output_from_comparison(vector):
    A = placeholder((4, 19), "float32", name="A")
    B = placeholder((4, 19), "float32", name="B")
    C = compute((4, 19), lambda i, j: (A[i, j] > B[i, j]) | (A[i, j] < -1.0), name="C")
    s = create_schedule(C)
    if vector:
        _, ji = s[C].split(C.op.axis[1], factor=8)
        s[C].vectorize(ji)
    a, b = rand((4, 19)), rand((4, 19))
    out = run(s, [A, B, C], [a, b], (4, 19), "bool")
    np.testing.assert_array_equal(out, (a > b) | (a < -1.0))
    assert set(np.unique(out.view("uint8"))) <= {0, 1}


@pytest.mark.parametrize("vector", [False, True])
def test_bool_input_and_output(vector):
    A = placeholder((40,), "bool", name="A")
    B = placeholder((40,), "bool", name="B")
    C = compute((40,), lambda i: ~A[i] | (B[i] & A[i]), name="C")
    s = create_schedule(C)
    if vector:
        _, xi = s[C].split(C.op.axis[0], factor=16)
        s[C].vectorize(xi)
    a, b = RNG.random(40) < 0.5, RNG.random(40) < 0.5
    np.testing.assert_array_equal(run(s, [A, B, C], [a, b], (40,), "bool"), ~a | (b & a))


def test_bool_to_int_cast_sum():
    A = placeholder((6, 13), "float32", name="A")
    r = reduce_axis((0, 13), name="r")
    C = compute((6,), lambda i: rsum(cast("int32", A[i, r] > 0.0), axis=r), name="C")
    s = create_schedule(C)
    a = rand((6, 13))
    np.testing.assert_array_equal(run(s, [A, C], [a], (6,), "int32"), (a > 0).sum(axis=1).astype("int32"))
