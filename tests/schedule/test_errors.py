"""Errors: illegal schedule requests (ScheduleError naming stage and axis), bad lower/build
arguments, and bad kernel calls (each message names the argument)."""
from __future__ import annotations

import numpy as np
import pytest

from tilefuse.schedule import ScheduleError, build, create_schedule, lower
from tilefuse.tensorir import cast, compute, placeholder, reduce_axis, sum as rsum, var


def elementwise(shape=(8, 6)):
    A = placeholder(shape, "float32", name="A")
    B = compute(shape, lambda i, j: A[i, j] + 1.0, name="B")
    return A, B


def row_sum():
    A = placeholder((8, 6), "float32", name="A")
    r = reduce_axis((0, 6), name="r")
    C = compute((8,), lambda i: rsum(A[i, r], axis=r), name="C")
    return A, C, r


def schedule_error(fn, *names):
    with pytest.raises(ScheduleError) as info:
        fn()
    msg = str(info.value)
    for name in names:
        assert name in msg, f"{name!r} not in {msg!r}"
    return msg


def test_schedule_error_is_a_value_error():
    assert issubclass(ScheduleError, ValueError)


# ---------------------------------------------------------------------- split

def test_split_axis_of_another_stage():
    A, B = elementwise()
    C = compute((8, 6), lambda x, y: B[x, y] * 2.0, name="C")
    s = create_schedule(C)
    msg = schedule_error(lambda: s[C].split(B.op.axis[0], factor=2), "stage C", "axis i")
    assert "does not belong" in msg


def test_split_axis_already_split():
    A, B = elementwise()
    s = create_schedule(B)
    i = B.op.axis[0]
    s[B].split(i, factor=2)
    msg = schedule_error(lambda: s[B].split(i, factor=2), "stage B", "axis i")
    assert "already split" in msg


def test_split_axis_already_fused():
    A, B = elementwise()
    s = create_schedule(B)
    i, j = B.op.axis
    s[B].fuse(i, j)
    schedule_error(lambda: s[B].split(j, factor=2), "stage B", "axis j")


@pytest.mark.parametrize("factor", [0, -1, -16])
def test_split_factor_not_positive(factor):
    A, B = elementwise()
    s = create_schedule(B)
    msg = schedule_error(lambda: s[B].split(B.op.axis[1], factor=factor), "stage B", "axis j")
    assert str(factor) in msg


@pytest.mark.parametrize("nparts", [0, -3])
def test_split_nparts_not_positive(nparts):
    A, B = elementwise()
    s = create_schedule(B)
    schedule_error(lambda: s[B].split(B.op.axis[1], nparts=nparts), "stage B", "axis j", "nparts")


@pytest.mark.parametrize("factor", [2.0, 2.5, "4", [4], True])
def test_split_factor_not_int(factor):
    A, B = elementwise()
    s = create_schedule(B)
    schedule_error(lambda: s[B].split(B.op.axis[0], factor=factor), "stage B", "axis i", "int")


def test_split_factor_numpy_int_is_accepted():
    A, B = elementwise()
    s = create_schedule(B)
    xo, xi = s[B].split(B.op.axis[0], factor=np.int64(3))
    assert xi.dom_extent == 3
    f = build(s, [A, B])
    a, b = np.arange(48, dtype="float32").reshape(8, 6), np.zeros((8, 6), "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a + 1)


def test_split_with_both_factor_and_nparts():
    A, B = elementwise()
    s = create_schedule(B)
    schedule_error(lambda: s[B].split(B.op.axis[0], factor=2, nparts=2), "stage B", "axis i",
                   "exactly one")


def test_split_with_neither_factor_nor_nparts():
    A, B = elementwise()
    s = create_schedule(B)
    schedule_error(lambda: s[B].split(B.op.axis[0]), "stage B", "axis i")


def test_split_a_non_axis():
    A, B = elementwise()
    s = create_schedule(B)
    schedule_error(lambda: s[B].split(3, factor=2), "stage B")


def test_failed_split_leaves_stage_unchanged():
    A, B = elementwise()
    s = create_schedule(B)
    before = list(s[B].leaf_iter_vars)
    with pytest.raises(ScheduleError):
        s[B].split(B.op.axis[0], factor=0)
    assert s[B].leaf_iter_vars == before
    s[B].split(B.op.axis[0], factor=3)  # still splittable


def test_tile_with_bad_factor():
    A, B = elementwise()
    s = create_schedule(B)
    schedule_error(lambda: s[B].tile(*B.op.axis, 4, 0), "stage B", "axis j")


# ---------------------------------------------------------------------- annotations

def test_vectorize_reduce_axis():
    A, C, r = row_sum()
    s = create_schedule(C)
    schedule_error(lambda: s[C].vectorize(r), "stage C", "axis r", "reduce")


def test_parallel_reduce_axis():
    A, C, r = row_sum()
    s = create_schedule(C)
    schedule_error(lambda: s[C].parallel(r), "stage C", "axis r", "reduce")


def test_vectorize_inner_of_split_reduce_axis():
    A, C, r = row_sum()
    s = create_schedule(C)
    _, ri = s[C].split(r, factor=2)
    schedule_error(lambda: s[C].vectorize(ri), "stage C", "axis r.inner")


def test_parallel_fused_reduce_axes():
    A = placeholder((3, 4, 5), "float32", name="A")
    r1, r2 = reduce_axis((0, 4), name="r1"), reduce_axis((0, 5), name="r2")
    C = compute((3,), lambda i: rsum(A[i, r1, r2], axis=[r1, r2]), name="C")
    s = create_schedule(C)
    f = s[C].fuse(r1, r2)
    schedule_error(lambda: s[C].parallel(f), "stage C", "r1.r2.fused")


def test_unroll_reduce_axis_is_allowed():
    A, C, r = row_sum()
    s = create_schedule(C)
    s[C].unroll(r)
    f = build(s, [A, C])
    a, c = np.ones((8, 6), "float32"), np.zeros(8, "float32")
    f(a, c)
    np.testing.assert_array_equal(c, np.full(8, 6.0, "float32"))


def test_vectorize_extent_too_large():
    A, B = elementwise((2, 1000))
    s = create_schedule(B)
    schedule_error(lambda: s[B].vectorize(B.op.axis[1]), "stage B", "axis j", "split it first")


def test_unroll_extent_too_large():
    A, B = elementwise((2, 5000))
    s = create_schedule(B)
    schedule_error(lambda: s[B].unroll(B.op.axis[1]), "stage B", "axis j")


def test_annotate_axis_of_another_stage():
    A, B = elementwise()
    C = compute((8, 6), lambda x, y: B[x, y] * 2.0, name="C")
    s = create_schedule(C)
    schedule_error(lambda: s[C].parallel(B.op.axis[0]), "stage C", "axis i")


def test_vectorize_split_away_axis():
    A, B = elementwise()
    s = create_schedule(B)
    j = B.op.axis[1]
    s[B].split(j, factor=2)
    schedule_error(lambda: s[B].vectorize(j), "stage B", "axis j")


# ---------------------------------------------------------------------- fuse / reorder

def test_fuse_non_consecutive_axes():
    A = placeholder((2, 3, 4), "float32", name="A")
    B = compute((2, 3, 4), lambda i, j, k: A[i, j, k], name="B")
    s = create_schedule(B)
    i, j, k = B.op.axis
    schedule_error(lambda: s[B].fuse(i, k), "stage B", "axis i", "consecutive")


def test_fuse_in_inner_to_outer_order():
    A, B = elementwise()
    s = create_schedule(B)
    i, j = B.op.axis
    schedule_error(lambda: s[B].fuse(j, i), "stage B", "axis j")


def test_fuse_data_and_reduce_axis():
    A, C, r = row_sum()
    s = create_schedule(C)
    msg = schedule_error(lambda: s[C].fuse(C.op.axis[0], r), "stage C", "axis i")
    assert "reduce" in msg


def test_fuse_no_axes():
    A, B = elementwise()
    s = create_schedule(B)
    schedule_error(lambda: s[B].fuse(), "stage B")


def test_fuse_axis_of_another_stage():
    A, B = elementwise()
    C = compute((8, 6), lambda x, y: B[x, y] * 2.0, name="C")
    s = create_schedule(C)
    x, y = C.op.axis
    schedule_error(lambda: s[C].fuse(x, B.op.axis[1]), "stage C", "axis j")


def test_reorder_with_duplicate_axis():
    A, B = elementwise()
    s = create_schedule(B)
    i, j = B.op.axis
    schedule_error(lambda: s[B].reorder(i, i), "stage B", "axis i", "twice")
    assert [a.name for a in s[B].leaf_iter_vars] == ["i", "j"]


def test_reorder_axis_of_another_stage():
    A, B = elementwise()
    C = compute((8, 6), lambda x, y: B[x, y] * 2.0, name="C")
    s = create_schedule(C)
    schedule_error(lambda: s[C].reorder(C.op.axis[1], B.op.axis[0]), "stage C", "axis i")


def test_reorder_split_away_axis():
    A, B = elementwise()
    s = create_schedule(B)
    i, j = B.op.axis
    s[B].split(i, factor=2)
    schedule_error(lambda: s[B].reorder(j, i), "stage B", "axis i")


# ---------------------------------------------------------------------- stages

def test_stage_of_placeholder():
    A, B = elementwise()
    s = create_schedule(B)
    schedule_error(lambda: s[A], "A", "placeholder")


def test_stage_of_tensor_outside_schedule():
    A, B = elementwise()
    other = compute((3,), lambda i: placeholder((3,), name="Z")[i], name="Other")
    s = create_schedule(B)
    schedule_error(lambda: s[other], "Other")


def test_create_schedule_of_placeholder():
    A, B = elementwise()
    schedule_error(lambda: create_schedule(A), "A")


def test_create_schedule_of_nothing():
    with pytest.raises(ScheduleError):
        create_schedule([])


# ---------------------------------------------------------------------- lower / build arguments

@pytest.mark.parametrize("entry", [lower, build])
def test_missing_input_tensor(entry):
    A, B = elementwise()
    with pytest.raises(ValueError, match=r"input A .*not among the arguments"):
        entry(create_schedule(B), [B])


@pytest.mark.parametrize("entry", [lower, build])
def test_missing_output_tensor(entry):
    A, B = elementwise()
    with pytest.raises(ValueError, match=r"output B .*not among the arguments"):
        entry(create_schedule(B), [A])


@pytest.mark.parametrize("entry", [lower, build])
def test_scalar_var_not_in_args(entry):
    alpha = var("alpha", "float32")
    A = placeholder((4,), "float32", name="A")
    B = compute((4,), lambda i: A[i] * alpha, name="B")
    with pytest.raises(ValueError, match=r"scalar alpha .*not among the arguments"):
        entry(create_schedule(B), [A, B])


def test_missing_input_of_intermediate_stage():
    A = placeholder((4,), "float32", name="A")
    W = placeholder((4,), "float32", name="W")
    T = compute((4,), lambda i: A[i] * W[i], name="T")
    B = compute((4,), lambda i: T[i] + A[i], name="B")
    with pytest.raises(ValueError, match=r"input W \(read by T\)"):
        lower(create_schedule(B), [A, B])


def test_tensor_twice_in_args():
    A, B = elementwise()
    with pytest.raises(ValueError, match="A appears twice"):
        lower(create_schedule(B), [A, A, B])


def test_scalar_twice_in_args():
    alpha = var("alpha", "float32")
    A = placeholder((4,), "float32", name="A")
    B = compute((4,), lambda i: A[i] * alpha, name="B")
    with pytest.raises(ValueError, match="alpha appears twice"):
        lower(create_schedule(B), [A, alpha, alpha, B])


def test_non_tensor_argument():
    A, B = elementwise()
    with pytest.raises(TypeError):
        lower(create_schedule(B), [A, B, 3])


def test_lower_of_non_schedule():
    A, B = elementwise()
    with pytest.raises(TypeError):
        lower(B, [A, B])


# ---------------------------------------------------------------------- kernel calls

@pytest.fixture(scope="module")
def add_kernel():
    A = placeholder((4, 8), "float32", name="A")
    Bt = placeholder((4, 8), "float32", name="Bin")
    C = compute((4, 8), lambda i, j: A[i, j] + Bt[i, j], name="C")
    return build(create_schedule(C), [A, Bt, C])


def arrays():
    return np.ones((4, 8), "float32"), np.ones((4, 8), "float32"), np.zeros((4, 8), "float32")


def test_kernel_call_works(add_kernel):
    a, b, c = arrays()
    add_kernel(a, b, c)
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.parametrize("count", [0, 2, 4])
def test_kernel_wrong_argument_count(add_kernel, count):
    args = (list(arrays()) + [np.zeros((4, 8), "float32")])[:count]
    with pytest.raises(TypeError, match=r"takes 3 arguments \(A, Bin, C\)"):
        add_kernel(*args)


@pytest.mark.parametrize("position,name", [(0, "A"), (1, "Bin"), (2, "C")])
def test_kernel_wrong_dtype(add_kernel, position, name):
    args = list(arrays())
    args[position] = args[position].astype("float64")
    with pytest.raises(TypeError, match=rf"argument {name} must have dtype float32, got float64"):
        add_kernel(*args)


def test_kernel_non_array_argument(add_kernel):
    a, b, c = arrays()
    with pytest.raises(TypeError, match="argument Bin must be a numpy array"):
        add_kernel(a, b.tolist(), c)


@pytest.mark.parametrize("position,name,shape", [(0, "A", (8, 4)), (1, "Bin", (4, 9)), (2, "C", (32,))])
def test_kernel_wrong_shape(add_kernel, position, name, shape):
    args = list(arrays())
    args[position] = np.zeros(shape, "float32")
    with pytest.raises(ValueError, match=rf"argument {name} must have shape \(4, 8\)"):
        add_kernel(*args)


def test_kernel_non_contiguous_input(add_kernel):
    a, b, c = arrays()
    strided = np.ones((4, 16), "float32")[:, ::2]
    with pytest.raises(ValueError, match="argument Bin must be C-contiguous"):
        add_kernel(a, strided, c)


def test_kernel_fortran_order_output(add_kernel):
    a, b, _ = arrays()
    with pytest.raises(ValueError, match="argument C must be C-contiguous"):
        add_kernel(a, b, np.asfortranarray(np.zeros((4, 8), "float32")))


def test_kernel_output_is_an_input(add_kernel):
    # C reads A and Bin only at the element it stores: it may be written over either (the very
    # same array), never over a part of one (below) or over an input of another kernel
    a, b, _ = arrays()
    add_kernel(a, b, a)
    np.testing.assert_array_equal(a, np.full((4, 8), 2.0, "float32"))
    A = placeholder((4, 8), "float32", name="A")
    C = compute((4, 8), lambda i, j: A[3 - i, j] + 1.0, name="C")
    flip = build(create_schedule(C), [A, C])
    with pytest.raises(ValueError, match="output C overlaps argument A"):
        flip(a, a)


def test_kernel_output_partially_overlaps_input(add_kernel):
    base = np.zeros(64 + 16, "float32")
    a = base[:32].reshape(4, 8)
    c = base[16:48].reshape(4, 8)  # 64 bytes in: still aligned
    b = np.ones((4, 8), "float32")
    with pytest.raises(ValueError, match="output C overlaps argument A"):
        add_kernel(a, b, c)


def test_kernel_read_only_output(add_kernel):
    a, b, c = arrays()
    c.setflags(write=False)
    with pytest.raises(ValueError, match="output C is read-only"):
        add_kernel(a, b, c)


def test_kernel_inputs_may_alias_each_other(add_kernel):
    a, _, c = arrays()
    add_kernel(a, a, c)
    np.testing.assert_array_equal(c, a + a)


def test_kernel_scalar_argument_errors():
    alpha = var("alpha", "float32")
    n = var("n", "int32")
    A = placeholder((4,), "float32", name="A")
    B = compute((4,), lambda i: A[i] * alpha + cast("float32", n), name="B")
    f = build(create_schedule(B), [A, alpha, n, B])
    a, b = np.ones(4, "float32"), np.zeros(4, "float32")
    with pytest.raises(TypeError, match="scalar alpha must be a number"):
        f(a, "2", 1, b)
    with pytest.raises(TypeError, match="scalar n must be an int"):
        f(a, 2.0, 1.5, b)
    with pytest.raises(ValueError, match="scalar n=.* does not fit in int32"):
        f(a, 2.0, 2**40, b)
    f(a, 2.0, 3, b)
    np.testing.assert_array_equal(b, np.full(4, 5.0, "float32"))


def test_kernel_two_outputs_overlap():
    A = placeholder((8,), "float32", name="A")
    T = compute((8,), lambda i: A[i] * 2.0, name="T")
    U = compute((8,), lambda i: T[i] + 1.0, name="U")
    f = build(create_schedule(U), [A, T, U])
    a, out = np.ones(8, "float32"), np.zeros(8, "float32")
    with pytest.raises(ValueError, match="output T overlaps argument U"):
        f(a, out, out)


def test_kernel_misaligned_input(add_kernel):
    _, b, c = arrays()
    a = np.ones(4 * 8 + 1, "float32")[1:].reshape(4, 8)  # 4 bytes past an aligned start
    with pytest.raises(ValueError, match="argument A is not 16-byte aligned"):
        add_kernel(a, b, c)


@pytest.mark.parametrize("axis, factor, offset, match", [
    (1, 16, 0, "the last axis's entries are adjacent"),
    (0, 0, 0, "factor must be an int >= 1"),
    (0, 16, -1, "offset must be an int >= 0"),
    (0, 16, 16, "offset must be less than the factor 16"),
    (0, 16.0, 0, "factor must be an int"),
    (0, 64, 1, "no extent from 10 of the next axis"),        # rows of 10 x 2: always even
])
def test_storage_align_bad_requests(axis, factor, offset, match):
    A = placeholder((4, 10, 2), name="A")
    B = compute((4, 10, 2), lambda i, j, k: A[i, j, k] * 2.0, name="B")
    s = create_schedule(B)
    axes = [B.op.axis[0], B.op.axis[2]]
    with pytest.raises(ScheduleError, match=match):
        s[B].storage_align(axes[axis], factor, offset)
    assert s[B].storage_shape is None


def test_storage_align_needs_a_data_axis_of_the_stage():
    A = placeholder((4, 8), name="A")
    B = compute((4, 8), lambda i, j: A[i, j] * 2.0, name="B")
    s = create_schedule(B)
    outer, _ = s[B].split(B.op.axis[0], factor=2)
    with pytest.raises(ScheduleError, match="storage_align needs a data axis"):
        s[B].storage_align(outer, 16, 0)
