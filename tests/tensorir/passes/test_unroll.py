"""tensorir.passes.unroll_loops: unrolled loops become their copies before code generation."""
import numpy as np
import pytest

from tilefuse.tensorir import stmt as S
from tilefuse.tensorir.codegen import build_prim_func
from tilefuse.tensorir.errors import LoweringError
from tilefuse.tensorir.expr import Buffer, BufferLoad, const, var
from tilefuse.tensorir.passes import unroll_loops

A = Buffer("A", (3, 16), "float32")


def test_an_unrolled_loop_becomes_one_copy_per_iteration_with_its_variable_bound():
    i = var("i")
    out = unroll_loops(S.For(i, const(1), const(3), "unrolled", S.BufferStore(A, const(0.0), (i, const(0)))))
    assert str(out).splitlines() == ["let i = 1 + 0", "A[i, 0] = 0f", "let i = 1 + 1", "A[i, 0] = 0f",
                                     "let i = 1 + 2", "A[i, 0] = 0f"]


def test_a_vectorized_loop_inside_a_vectorized_loop_is_unrolled_and_others_are_kept():
    i, j, k = var("i"), var("j"), var("k")
    store = S.BufferStore(A, const(1.0), (i, j))
    inner = S.For(i, const(0), const(3), "vectorized", store)
    nest = S.For(k, const(0), const(2), "serial", S.For(j, const(0), const(16), "vectorized", inner))
    out = unroll_loops(nest)
    assert "vectorized (j, 0, 16)" in str(out) and "vectorized (i" not in str(out)
    assert str(out).count("let i") == 3 and "for (k, 0, 2)" in str(out)
    assert unroll_loops(S.For(i, const(0), const(3), "vectorized", store)) == \
        S.For(i, const(0), const(3), "vectorized", store)


def test_each_copy_keeps_only_the_side_of_a_select_its_index_decides():
    from tilefuse.tensorir.intrinsics import if_then_else
    i, j = var("i"), var("j")
    row = if_then_else(i == 0, const(5.0), if_then_else(i == 1, const(6.0), const(7.0)))
    undecided = if_then_else(j == 0, const(1.0), const(2.0))        # another loop's index: kept
    body = S.BufferStore(A, row + undecided, (i, j))
    out = unroll_loops(S.For(j, const(0), const(16), "serial",
                             S.For(i, const(0), const(3), "unrolled", body)))
    text = str(out)
    assert "i == " not in text and text.count("j == 0") == 3
    assert ["5f" in text, "6f" in text, "7f" in text] == [True, True, True]
    f = build_prim_func(S.PrimFunc("rows", (A,), out))
    a = np.zeros((3, 16), "float32")
    f(a)
    np.testing.assert_array_equal(a, np.array([[5.0], [6.0], [7.0]]) + np.where(np.arange(16) == 0, 1.0, 2.0))


def test_an_empty_unrolled_loop_leaves_nothing():
    i = var("i")
    assert S.is_noop(unroll_loops(S.For(i, const(0), const(0), "unrolled", S.BufferStore(A, const(0.0), (i, i)))))


def test_an_unrolled_loop_needs_a_constant_extent():
    i, n = var("i"), var("n")
    with pytest.raises(LoweringError, match="loop i is unrolled but its extent n is not a constant"):
        unroll_loops(S.For(i, const(0), n, "unrolled", S.BufferStore(A, const(0.0), (i, i))))


def test_the_unrolled_kernel_computes_the_same():
    i, j = var("i"), var("j")
    body = S.BufferStore(A, BufferLoad(A, (i, j), "float32") * 2.0 + 1.0, (i, j))
    f = S.PrimFunc("u", (A,), S.For(i, const(0), const(3), "unrolled", S.For(j, const(0), const(16), "serial", body)))
    a = np.arange(48, dtype=np.float32).reshape(3, 16)
    want = a * 2 + 1
    build_prim_func(f)(a)
    np.testing.assert_array_equal(a, want)
