"""Loop IR nodes: immutability, structural equality, printing."""
import dataclasses

import pytest

from tilefuse.tensorir.expr import Buffer, const, var
from tilefuse.tensorir.stmt import Allocate, For, IfThenElse, LetStmt, PrimFunc, BufferStore, seq


def test_nodes_are_immutable_and_compare_structurally():
    A = Buffer("A", (4,), "float32")
    i = var("i")
    s1 = For(i, const(0), const(4), "serial", BufferStore(A, const(0.0), (i,)))
    s2 = For(i, const(0), const(4), "serial", BufferStore(A, const(0.0), (i,)))
    assert s1 == s2 and hash(s1) == hash(s2)
    assert s1 != For(i, const(0), const(5), "serial", BufferStore(A, const(0.0), (i,)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        s1.kind = "parallel"


def test_unknown_loop_kind_is_rejected():
    with pytest.raises(ValueError, match="unknown loop kind"):
        For(var("i"), const(0), const(4), "simd", seq())


def test_function_prints_as_pseudo_code():
    A, T = Buffer("A", (4, 8), "float32"), Buffer("T", (8,), "float32", scope="local")
    i, j, t, n = var("i"), var("j"), var("t"), var("n", "int32")
    body = Allocate(T, For(i, const(0), const(4), "parallel", seq(
        For(j, const(0), const(8), "vectorized", BufferStore(T, const(1.0), (j,))),
        LetStmt(t, i * 2, IfThenElse(t < 4, BufferStore(A, const(0.5), (i, t)),
                                     BufferStore(A, const(0.0), (i, const(0))))))))
    text = str(PrimFunc("f", (A, n), body))
    assert text == """func f(A: float32[4, 8], n: int32) {
  allocate T[8]: float32, local
  parallel (i, 0, 4) {
    vectorized (j, 0, 8) {
      T[j] = 1f
    }
    let t = i * 2
    if (t < 4) {
      A[i, t] = 0.5f
    } else {
      A[i, 0] = 0f
    }
  }
}"""
