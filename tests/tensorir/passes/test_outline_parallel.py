"""tensorir.passes.outline_parallel_loops: parallel loops become ParallelFor nodes naming
their closure; nested parallelism runs serially."""
import numpy as np

from tilefuse.tensorir import stmt as S
from tilefuse.tensorir.codegen import build_prim_func
from tilefuse.tensorir.expr import Buffer, BufferLoad, const, var
from tilefuse.tensorir.passes import outline_parallel_loops
from tilefuse.tensorir.passes.outline_parallel import closure_of

A = Buffer("A", (6, 16), "float32")
B = Buffer("B", (6, 16), "float32")


def _store(i, j, scale):
    return S.BufferStore(B, BufferLoad(A, (i, j), "float32") * scale, (i, j))


def test_the_closure_names_outer_variables_and_buffers_in_first_use_order_without_locals():
    i, j, n = var("i"), var("j"), var("n", "float32")
    tmp = Buffer("tmp", (16,), "float32")
    body = S.Allocate(tmp, S.For(j, const(0), const(16), "serial", S.seq(
        S.BufferStore(tmp, BufferLoad(A, (i, j), "float32"), (j,)),
        S.BufferStore(B, BufferLoad(tmp, (j,), "float32") + n, (i, j)))))
    params, buffers = closure_of(i, body)
    assert [p.name for p in params] == ["n"] and [b.name for b in buffers] == ["A", "B"]


def test_a_buffer_only_prefetched_is_part_of_the_closure():
    i = var("i")
    C = Buffer("C", (6, 16), "float32")
    body = S.seq(S.Prefetch(C, (i + 1, const(0)), True), _store(i, const(0), 2.0))
    assert [b.name for b in closure_of(i, body)[1]] == ["C", "B", "A"]


def test_only_the_outermost_parallel_loop_is_outlined():
    i, j = var("i"), var("j")
    nest = S.For(i, const(0), const(6), "parallel", S.For(j, const(0), const(16), "parallel", _store(i, j, 2.0)))
    out = outline_parallel_loops(nest)
    assert isinstance(out, S.ParallelFor) and out.body.kind == "serial"
    assert [b.name for b in out.buffers] == ["B", "A"] and out.params == ()      # stores come before their values


def test_a_parallel_loop_inside_a_vectorized_loop_runs_serially():
    i, j = var("i"), var("j")
    nest = S.For(j, const(0), const(16), "vectorized", S.For(i, const(0), const(6), "parallel", _store(i, j, 2.0)))
    out = outline_parallel_loops(nest)
    assert out.kind == "vectorized" and out.body.kind == "serial"


def test_the_outlined_kernel_computes_the_same_with_a_captured_scalar():
    i, j, n = var("i"), var("j"), var("n", "float32")
    f = S.PrimFunc("p", (A, B, n), S.For(i, const(0), const(6), "parallel",
                                       S.For(j, const(0), const(16), "serial", _store(i, j, n))))
    a = np.random.default_rng(0).standard_normal((6, 16)).astype(np.float32)
    b = np.zeros_like(a)
    build_prim_func(f)(a, b, np.float32(3.0))
    np.testing.assert_allclose(b, a * 3.0, rtol=1e-6)
