"""tensorir.passes.vectorize_loops: the vector form, printed and checked before code generation."""
import numpy as np
import pytest

from tilefuse.tensorir import stmt as S
from tilefuse.tensorir.codegen import CodeGen, CodegenError, build_prim_func
from tilefuse.tensorir.errors import LoweringError
from tilefuse.tensorir.expr import Buffer, BufferLoad, Ramp, const, var
from tilefuse.tensorir.passes import unroll_loops, vectorize_loops
from tilefuse.tensorir.pipeline import CODEGEN_PASSES, run_passes

A = Buffer("A", (50,), "float32")
B = Buffer("B", (50,), "float32")


def _tail_nest():
    """B[i] = A[i] * 2 over 50 elements in vectors of 16: the last vector is guarded."""
    io, ii = var("io"), var("ii")
    idx = io * 16 + ii
    store = S.IfThenElse(idx < 50, S.BufferStore(B, BufferLoad(A, (idx,), "float32") * 2.0, (idx,)))
    return S.For(io, const(0), const(4), "serial", S.For(ii, const(0), const(16), "vectorized", store))


def test_the_vector_form_binds_the_loop_variable_to_a_ramp():
    out = vectorize_loops(_tail_nest())
    assert str(out).splitlines() == [
        "for (io, 0, 4) {",
        "  let ii = ramp(0, 1, 16)",
        "  if (io * 16 + ii < 50) {",
        "    B[io * 16 + ii] = A[io * 16 + ii] * 2f",
        "  }",
        "}"]
    ramp = out.body.value
    assert isinstance(ramp, Ramp) and (ramp.stride, ramp.lanes) == (1, 16)


def test_loops_that_cannot_be_vectorized_are_refused_with_the_reason():
    i, j, n = var("i"), var("j"), var("n")
    store = S.BufferStore(A, const(0.0), (i,))
    with pytest.raises(LoweringError, match="extent n is not a constant"):
        vectorize_loops(S.For(i, const(0), n, "vectorized", store))
    nested = S.For(j, const(0), const(2), "vectorized", S.For(i, const(0), const(4), "vectorized", store))
    with pytest.raises(LoweringError, match="inside another vectorized loop"):
        vectorize_loops(nested)
    assert "ramp(0, 1, 2)" in str(vectorize_loops(unroll_loops(nested)))       # the inner one unrolled


def test_code_generation_translates_only_explicit_forms():
    f = S.PrimFunc("v", (A, B), _tail_nest())
    with pytest.raises(CodegenError, match=r"loop ii \(vectorized\) reached code generation"):
        CodeGen(f)
    CodeGen(S.PrimFunc("v", (A, B), run_passes(f.body, CODEGEN_PASSES)))


def test_the_vectorized_kernel_masks_its_tail():
    k = build_prim_func(S.PrimFunc("v", (A, B), _tail_nest()))
    assert "masked" in k.source("llvm")
    a = np.arange(50, dtype=np.float32)
    b = np.full(50, -1.0, np.float32)
    k(a, b)
    np.testing.assert_array_equal(b, a * 2)
