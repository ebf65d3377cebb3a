"""lower: the loop IR text of default schedules, guards of splits, allocation of intermediates,
zero-size and size-1 axes. Kernels built from the same schedules are compared with numpy."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from tilefuse.schedule import build, create_schedule, lower
from tilefuse.schedule.schedule import ScheduleError
from tilefuse.tensorir import compute, max as rmax, placeholder, reduce_axis, sum as rsum
from schedule_testing import rand


def expected(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def block(text: str, header: str) -> str:
    """The lines of the loop opened by ``header`` (a line prefix), up to its closing brace."""
    lines = text.splitlines()
    start = next(k for k, line in enumerate(lines) if line.strip().startswith(header))
    indent = len(lines[start]) - len(lines[start].lstrip())
    for end in range(start + 1, len(lines)):
        if lines[end] == " " * indent + "}":
            return "\n".join(lines[start:end + 1])
    raise AssertionError(f"unclosed block {header!r} in\n{text}")


# ---------------------------------------------------------------------- exact text

def test_default_elementwise_text():
    A = placeholder((4, 3), "float32", name="A")
    B = compute((4, 3), lambda i, j: A[i, j] + 1.0, name="B")
    assert str(lower(create_schedule(B), [A, B])) == expected("""
        func main(A: float32[4, 3], B: float32[4, 3]) {
          for (i, 0, 4) {
            for (j, 0, 3) {
              B[i, j] = A[i, j] + 1f
            }
          }
        }
    """)


def test_default_reduction_text():
    A = placeholder((4, 3), "float32", name="A")
    r = reduce_axis((0, 3), name="r")
    C = compute((4,), lambda i: rsum(A[i, r], axis=r), name="C")
    assert str(lower(create_schedule(C), [A, C])) == expected("""
        func main(A: float32[4, 3], C: float32[4]) {
          for (i, 0, 4) {
            C[i] = 0f
            for (r, 0, 3) {
              C[i] = C[i] + A[i, r]
            }
          }
        }
    """)


def test_default_max_reduction_with_offset_domain_text():
    A = placeholder((2, 9), "float32", name="A")
    r = reduce_axis((2, 9), name="r")
    C = compute((2,), lambda i: rmax(A[i, r], axis=r), name="C")
    text = str(lower(create_schedule(C), [A, C]))
    assert text == expected("""
        func main(A: float32[2, 9], C: float32[2]) {
          for (i, 0, 2) {
            C[i] = -inff
            for (r, 2, 7) {
              C[i] = max(C[i], A[i, r])
            }
          }
        }
    """)
    f = build(create_schedule(C), [A, C])
    a, c = rand((2, 9)), np.zeros(2, "float32")
    f(a, c)
    np.testing.assert_array_equal(c, a[:, 2:].max(axis=1))


def test_scalar_param_in_signature_text():
    from tilefuse.tensorir import var
    alpha = var("alpha", "float32")
    A = placeholder((3,), "float32", name="A")
    B = compute((3,), lambda i: A[i] * alpha, name="B")
    assert str(lower(create_schedule(B), [A, alpha, B])) == expected("""
        func main(A: float32[3], alpha: float32, B: float32[3]) {
          for (i, 0, 3) {
            B[i] = A[i] * alpha
          }
        }
    """)


def test_lower_function_name():
    A = placeholder((3,), "float32", name="A")
    B = compute((3,), lambda i: A[i], name="B")
    assert str(lower(create_schedule(B), [A, B], name="copy")).startswith("func copy(")


# ---------------------------------------------------------------------- guards of splits

@pytest.mark.parametrize("n,factor", [(64, 16), (100, 4), (12, 12), (96, 32)])
def test_dividing_split_has_no_guard(n, factor):
    A = placeholder((n,), "float32", name="A")
    B = compute((n,), lambda i: A[i] * 2.0, name="B")
    s = create_schedule(B)
    _, xi = s[B].split(B.op.axis[0], factor=factor)
    s[B].vectorize(xi)
    text = str(lower(s, [A, B]))
    assert "if (" not in text
    f = build(s, [A, B])
    a, b = rand(n), np.zeros(n, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a * np.float32(2))


def test_dividing_tile_has_no_guard():
    A = placeholder((32, 48), "float32", name="A")
    B = compute((32, 48), lambda i, j: A[i, j] + A[i, j], name="B")
    s = create_schedule(B)
    s[B].tile(*B.op.axis, 8, 16)
    assert "if (" not in str(lower(s, [A, B]))


def test_non_dividing_split_guard_only_in_vectorized_tail():
    A = placeholder((100,), "float32", name="A")
    B = compute((100,), lambda i: A[i] * 2.0, name="B")
    s = create_schedule(B)
    _, xi = s[B].split(B.op.axis[0], factor=16)
    s[B].vectorize(xi)
    text = str(lower(s, [A, B]))
    main = block(text, "for (i.outer, 0, 6)")
    assert "if (" not in main
    tail = text.replace(main, "")
    assert tail.count("if (") == 1
    assert "vectorized (i.inner, 0, 16)" in tail
    f = build(s, [A, B])
    a, b = rand(100), np.zeros(100, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a * np.float32(2))


def test_non_dividing_split_serial_tail_is_peeled():
    A = placeholder((100,), "float32", name="A")
    B = compute((100,), lambda i: A[i] * 2.0, name="B")
    s = create_schedule(B)
    s[B].split(B.op.axis[0], factor=16)
    text = str(lower(s, [A, B]))
    assert "if (" not in text   # serial tails are peeled to their exact extent
    assert "for (i.outer, 0, 6)" in text and "for (i.inner, 0, 4)" in text


def test_non_dividing_tile_guards_only_outside_main_nest():
    A = placeholder((19, 21), "float32", name="A")
    B = compute((19, 21), lambda i, j: A[i, j] * 3.0, name="B")
    s = create_schedule(B)
    io, jo, ii, ji = s[B].tile(*B.op.axis, 4, 8)
    s[B].vectorize(ji)
    text = str(lower(s, [A, B]))
    assert "if (" in text
    main = block(text, "for (i.outer, 0, 4)")
    main_inner = block(main, "for (j.outer, 0, 2)")
    assert "if (" not in main_inner
    f = build(s, [A, B])
    a, b = rand((19, 21)), np.zeros((19, 21), "float32")
    f(a, b)
    np.testing.assert_allclose(b, a * np.float32(3), rtol=1e-6)


def test_non_dividing_reduce_split_guard_only_in_tail():
    A = placeholder((3, 50), "float32", name="A")
    r = reduce_axis((0, 50), name="r")
    C = compute((3,), lambda i: rsum(A[i, r], axis=r), name="C")
    s = create_schedule(C)
    s[C].split(r, factor=16)
    text = str(lower(s, [A, C]))
    assert "if (" not in block(text, "for (r.outer, 0, 3)")
    f = build(s, [A, C])
    a, c = rand((3, 50)), np.zeros(3, "float32")
    f(a, c)
    np.testing.assert_allclose(c, a.sum(axis=1), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------- intermediates

def two_stage(n):
    A = placeholder((n,), "float32", name="A")
    T = compute((n,), lambda i: A[i] * 2.0, name="T")
    U = compute((n,), lambda i: T[i] + 1.0, name="U")
    return A, T, U


def test_intermediate_not_in_args_is_allocated():
    A, T, U = two_stage(100)
    s = create_schedule(U)
    text = str(lower(s, [A, U]))
    assert "allocate T[100]: float32" in text
    assert "func main(A: float32[100], U: float32[100])" in text
    f = build(s, [A, U])
    a, u = rand(100), np.zeros(100, "float32")
    f(a, u)
    np.testing.assert_array_equal(u, a * np.float32(2) + np.float32(1))


def test_intermediate_in_args_is_not_allocated_and_written():
    A, T, U = two_stage(20)
    s = create_schedule(U)
    assert "allocate" not in str(lower(s, [A, T, U]))
    f = build(s, [A, T, U])
    a, t, u = rand(20), np.zeros(20, "float32"), np.zeros(20, "float32")
    f(a, t, u)
    np.testing.assert_array_equal(t, a * np.float32(2))
    np.testing.assert_array_equal(u, t + np.float32(1))


def test_large_intermediate_allocated_on_heap_works():
    A, T, U = two_stage(70000)   # 280 kB: more than the stack limit
    s = create_schedule(U)
    for st in (T, U):
        _, xi = s[st].split(st.op.axis[0], factor=8)
        s[st].vectorize(xi)
    assert "allocate T[70000]" in str(lower(s, [A, U]))
    f = build(s, [A, U])
    a, u = rand(70000), np.zeros(70000, "float32")
    f(a, u)
    np.testing.assert_array_equal(u, a * np.float32(2) + np.float32(1))


def test_intermediate_reduction_then_broadcast():
    A = placeholder((5, 7), "float32", name="A")
    r = reduce_axis((0, 7), name="r")
    M = compute((5,), lambda i: rmax(A[i, r], axis=r), name="M")
    B = compute((5, 7), lambda i, j: A[i, j] - M[i], name="B")
    s = create_schedule(B)
    assert [st.op.name for st in s.stages] == ["M", "B"]
    assert "allocate M[5]" in str(lower(s, [A, B]))
    f = build(s, [A, B])
    a, b = rand((5, 7)), np.zeros((5, 7), "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a - a.max(axis=1, keepdims=True))


def test_two_outputs_sharing_an_intermediate():
    A, T, U = two_stage(9)
    V = compute((9,), lambda i: T[i] * T[i], name="V")
    s = create_schedule([U, V])
    assert [st.op.name for st in s.stages] == ["T", "U", "V"]
    text = str(lower(s, [A, U, V]))
    assert text.count("allocate") == 1
    f = build(s, [A, U, V])
    a, u, v = rand(9), np.zeros(9, "float32"), np.zeros(9, "float32")
    f(a, u, v)
    t = a * np.float32(2)
    np.testing.assert_array_equal(u, t + np.float32(1))
    np.testing.assert_array_equal(v, t * t)


# ---------------------------------------------------------------------- zero-size and size-1 axes

def test_zero_size_axis_lowers_to_empty_body_and_runs():
    A = placeholder((0, 5), "float32", name="A")
    B = compute((0, 5), lambda i, j: A[i, j] + 1.0, name="B")
    s = create_schedule(B)
    assert str(lower(s, [A, B])) == expected("""
        func main(A: float32[0, 5], B: float32[0, 5]) {
        }
    """)
    f = build(s, [A, B])
    f(np.zeros((0, 5), "float32"), np.zeros((0, 5), "float32"))


def test_zero_size_axis_with_split_and_vectorize():
    A = placeholder((3, 0), "float32", name="A")
    B = compute((3, 0), lambda i, j: A[i, j] * 2.0, name="B")
    s = create_schedule(B)
    _, ji = s[B].split(B.op.axis[1], factor=8)
    s[B].vectorize(ji)
    assert "B[" not in str(lower(s, [A, B]))
    f = build(s, [A, B])
    f(np.zeros((3, 0), "float32"), np.zeros((3, 0), "float32"))


def test_zero_extent_reduce_axis_gives_identity():
    A = placeholder((4, 0), "float32", name="A")
    r = reduce_axis((0, 0), name="r")
    S = compute((4,), lambda i: rsum(A[i, r], axis=r), name="S")
    M = compute((4,), lambda i: rmax(A[i, r], axis=r), name="M")
    s = create_schedule([S, M])
    text = str(lower(s, [A, S, M]))
    assert "for (r," not in text
    f = build(s, [A, S, M])
    sv, mv = np.full(4, np.nan, "float32"), np.full(4, np.nan, "float32")
    f(np.zeros((4, 0), "float32"), sv, mv)
    np.testing.assert_array_equal(sv, np.zeros(4, "float32"))
    np.testing.assert_array_equal(mv, np.full(4, -np.inf, "float32"))


def test_size_one_axis_loop_is_removed():
    A = placeholder((1, 5), "float32", name="A")
    B = compute((1, 5), lambda i, j: A[i, j] + 1.0, name="B")
    s = create_schedule(B)
    assert str(lower(s, [A, B])) == expected("""
        func main(A: float32[1, 5], B: float32[1, 5]) {
          for (j, 0, 5) {
            B[0, j] = A[0, j] + 1f
          }
        }
    """)
    f = build(s, [A, B])
    a, b = rand((1, 5)), np.zeros((1, 5), "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a + np.float32(1))


def test_all_size_one_axes_with_reduction():
    A = placeholder((1, 1), "float32", name="A")
    r = reduce_axis((0, 1), name="r")
    C = compute((1,), lambda i: rsum(A[i, r], axis=r), name="C")
    s = create_schedule(C)
    assert "for" not in str(lower(s, [A, C]))
    f = build(s, [A, C])
    a, c = rand((1, 1)), np.full(1, np.nan, "float32")
    f(a, c)
    np.testing.assert_array_equal(c, a[:, 0])


def test_size_one_axis_split_vectorized_and_parallel():
    A = placeholder((1, 7), "float32", name="A")
    B = compute((1, 7), lambda i, j: A[i, j] * A[i, j], name="B")
    s = create_schedule(B)
    i, j = B.op.axis
    s[B].parallel(i)
    _, ji = s[B].split(j, factor=4)
    s[B].vectorize(ji)
    f = build(s, [A, B])
    a, b = rand((1, 7)), np.zeros((1, 7), "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a * a)


def test_scalar_output_shape():
    A = placeholder((6,), "float32", name="A")
    r = reduce_axis((0, 6), name="r")
    C = compute((), lambda: rsum(A[r], axis=r), name="C")
    s = create_schedule(C)
    assert str(lower(s, [A, C])) == expected("""
        func main(A: float32[6], C: float32[]) {
          C[] = 0f
          for (r, 0, 6) {
            C[] = C[] + A[r]
          }
        }
    """)
    f = build(s, [A, C])
    a, c = rand(6), np.full((), np.nan, "float32")
    f(a, c)
    np.testing.assert_allclose(c, a.sum(), rtol=1e-5, atol=1e-6)


def test_storage_align_pads_the_rows_of_an_intermediate_and_keeps_the_results():
    A = placeholder((6, 5, 32), "float32", name="A")
    T = compute((6, 5, 32), lambda i, j, k: A[i, j, k] * 2.0, name="T")
    U = compute((6, 5, 32), lambda i, j, k: T[i, j, k] + T[i, (j + 1) % 5, k], name="U")
    other = create_schedule(U)
    other[T].storage_align(T.op.axis[0], 64, 0)               # entries of 5 x 32: 5 -> 6 rows of 32
    assert other[T].storage_shape == (6, 6, 32)
    s = create_schedule(U)
    s[T].storage_align(T.op.axis[1], 32, 16)                  # 32 -> 48 elements per row
    assert s[T].storage_shape == (6, 5, 48)
    _, inner = s[T].split(T.op.axis[2], factor=16)
    s[T].vectorize(inner)
    assert "allocate T[6, 5, 48]" in str(lower(s, [A, U]))
    f = build(s, [A, U])
    a, u = rand((6, 5, 32)), np.full((6, 5, 32), np.nan, "float32")
    f(a, u)
    np.testing.assert_array_equal(u, a * np.float32(2) + np.roll(a, -1, axis=1) * np.float32(2))


@pytest.mark.parametrize("where", ["argument", "at", "inline"])
def test_storage_align_of_a_stage_without_a_root_buffer_of_its_own_is_refused_when_lowered(where):
    A2 = placeholder((4, 16), "float32", name="A2")
    T2 = compute((4, 16), lambda i, j: A2[i, j] * 2.0, name="T2")
    U2 = compute((4, 16), lambda i, j: T2[i, j] + 1.0, name="U2")
    s = create_schedule(U2)
    s[T2].storage_align(T2.op.axis[0], 16, 8)
    args = [A2, U2]
    if where == "argument":
        args = [A2, T2, U2]
    elif where == "at":
        s[T2].compute_at(s[U2], U2.op.axis[0])
    else:
        s[T2].compute_inline()
    with pytest.raises(ScheduleError, match="storage_align needs a stage computed at the root"):
        lower(s, args)
