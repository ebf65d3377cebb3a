"""LLVM code generation: every kernel checked against numpy."""
import math

import numpy as np
import pytest

from tilefuse.schedule import build, create_schedule
from tilefuse.tensorir import (abs, cast, ceil, compute, erf, exp, floor, if_then_else, log, placeholder, pow,
                      reduce_axis, rsqrt, sigmoid, sqrt, sum, tanh, var)
from tilefuse.tensorir import max as tmax
from tilefuse.tensorir import min as tmin
from tilefuse.tensorir import prod as tprod
from host_vectors import REGISTER

rng = np.random.default_rng(0)


def _vectorized(T, lanes=16, parallel=True):
    s = create_schedule(T)
    fused = s[T].fuse(*T.op.axis) if len(T.op.axis) > 1 else T.op.axis[0]
    outer, inner = s[T].split(fused, factor=lanes)
    s[T].vectorize(inner)
    if parallel:
        s[T].parallel(outer)
    return s


def _random(shape, dtype):
    if dtype in ("float32", "float64"):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100), shape).astype(dtype)


@pytest.mark.parametrize("vectorize", [False, True])
def test_elementwise_chain_of_every_intrinsic(vectorize):
    X = placeholder((37, 19), name="X")
    Y = compute((37, 19), lambda i, j: exp(X[i, j]) * tanh(X[i, j]) + sigmoid(X[i, j]) - erf(X[i, j])
                + sqrt(abs(X[i, j])) + log(abs(X[i, j]) + 1.0) + rsqrt(abs(X[i, j]) + 1.0)
                + floor(X[i, j]) * ceil(X[i, j]) + pow(abs(X[i, j]), 1.5), name="Y")
    s = _vectorized(Y) if vectorize else create_schedule(Y)
    f = build(s, [X, Y])
    x = _random((37, 19), "float32")
    y = np.empty_like(x)
    f(x, y)
    ax = np.abs(x)
    ref = (np.exp(x) * np.tanh(x) + 1 / (1 + np.exp(-x)) - np.vectorize(math.erf)(x) + np.sqrt(ax)
           + np.log(ax + 1) + 1 / np.sqrt(ax + 1) + np.floor(x) * np.ceil(x) + ax ** 1.5)
    np.testing.assert_allclose(y, ref, rtol=2e-6, atol=2e-6)


def test_float64_intrinsics():
    X = placeholder((50,), "float64", name="X")
    Y = compute((50,), lambda i: exp(X[i]) + tanh(X[i]) + erf(X[i]) + sigmoid(X[i]), name="Y")
    f = build(_vectorized(Y, 8), [X, Y])
    x = _random((50,), "float64")
    y = np.empty_like(x)
    f(x, y)
    ref = np.exp(x) + np.tanh(x) + np.vectorize(math.erf)(x) + 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(y, ref, rtol=1e-13)


def test_broadcast_written_as_index_expression():
    A, b = placeholder((7, 33), name="A"), placeholder((33,), name="b")
    C = compute((7, 33), lambda i, j: A[i, j] * b[j] + A[i, 0], name="C")
    f = build(_vectorized(C), [A, b, C])
    a, bv = _random((7, 33), "float32"), _random((33,), "float32")
    c = np.empty((7, 33), "float32")
    f(a, bv, c)
    np.testing.assert_allclose(c, a * bv + a[:, :1], rtol=1e-6, atol=1e-6)  # FMA rounds once


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "int8", "uint8"])
@pytest.mark.parametrize("reducer, ref", [(sum, np.sum), (tmax, np.max), (tmin, np.min), (tprod, np.prod)])
def test_reductions_over_several_axes(dtype, reducer, ref):
    A = placeholder((5, 6, 3), dtype, name="A")
    r1, r2 = reduce_axis((0, 6), name="r1"), reduce_axis((0, 3), name="r2")
    B = compute((5,), lambda i: reducer(A[i, r1, r2], axis=[r1, r2]), name="B")
    f = build(create_schedule(B), [A, B])
    a = _random((5, 6, 3), dtype)
    if reducer is tprod and dtype.startswith(("float",)):
        a = (a * 0.3 + 1).astype(dtype)
    b = np.empty(5, dtype)
    f(a, b)
    with np.errstate(over="ignore"):
        expected = ref(a, axis=(1, 2)).astype(dtype)
    np.testing.assert_allclose(b, expected, rtol=1e-5)


def test_matmul_vectorized_parallel_is_exact_enough_and_uses_host_vector_fma():
    n, k, m = 67, 45, 83
    A, B = placeholder((n, k), name="A"), placeholder((k, m), name="B")
    r = reduce_axis((0, k), name="r")
    C = compute((n, m), lambda i, j: sum(A[i, r] * B[r, j], axis=r), name="C")
    s = create_schedule(C)
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 32)
    s[C].reorder(io, jo, r, ii, ji)
    s[C].unroll(ii); s[C].vectorize(ji); s[C].parallel(io)
    f = build(s, [A, B, C])
    a, b = _random((n, k), "float32"), _random((k, m), "float32")
    c = np.empty((n, m), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    asm = f.source("asm")
    assert REGISTER in asm and "vfmadd" in asm
    assert "tilefuse_parallel_for" in f.source("llvm")


@pytest.mark.parametrize("src, dst", [("float32", "int32"), ("int32", "float32"), ("float64", "float32"),
                                      ("int8", "int64"), ("uint8", "int32"), ("int32", "int8"),
                                      ("float32", "bool"), ("bool", "float32"), ("int64", "uint8")])
def test_casts(src, dst):
    X = placeholder((40,), src, name="X")
    Y = compute((40,), lambda i: cast(dst, X[i]), name="Y")
    f = build(_vectorized(Y, 8, parallel=False), [X, Y])
    x = _random((40,), src)
    if src.startswith("float") and dst in ("int32",):
        x = (x * 50).astype(src)
    y = np.empty(40, dst)
    f(x, y)
    np.testing.assert_array_equal(y, x.astype(dst))


@pytest.mark.parametrize("vectorize", [False, True])
def test_integer_floordiv_and_mod_follow_python_including_zero_divisor(vectorize):
    I, J = placeholder((64,), "int32", name="I"), placeholder((64,), "int32", name="J")
    D = compute((64,), lambda i: I[i] // J[i] * 1000 + I[i] % J[i], name="D")
    f = build(_vectorized(D, 16, False) if vectorize else create_schedule(D), [I, J, D])
    a = rng.integers(-50, 50, 64).astype("int32")
    b = rng.integers(-5, 5, 64).astype("int32")
    a[0], b[0] = np.iinfo("int32").min, -1
    d = np.empty(64, "int32")
    f(a, b, d)
    safe = np.where(b == 0, 1, b)
    with np.errstate(all="ignore"):
        ref = np.where(b == 0, 0, np.floor_divide(a, safe) * 1000 + np.mod(a, safe)).astype("int32")
    np.testing.assert_array_equal(d, ref)


def test_float_floordiv_and_mod():
    X, Y = placeholder((30,), name="X"), placeholder((30,), name="Y")
    Z = compute((30,), lambda i: X[i] // Y[i] + X[i] % Y[i], name="Z")
    f = build(_vectorized(Z, 8), [X, Y, Z])
    x, y = _random((30,), "float32") * 10, _random((30,), "float32") + 3
    x, y = x.astype("float32"), y.astype("float32")
    z = np.empty(30, "float32")
    f(x, y, z)
    np.testing.assert_allclose(z, np.floor_divide(x, y) + np.mod(x, y), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("vectorize", [False, True])
def test_padding_reads_only_where_the_condition_holds(vectorize):
    X = placeholder((33, 19), name="X")
    P = compute((35, 21), lambda i, j: if_then_else((i >= 1) & (i < 34) & (j >= 1) & (j < 20),
                                                     X[i - 1, j - 1], 0.0), name="P")
    f = build(_vectorized(P) if vectorize else create_schedule(P), [X, P])
    x = _random((33, 19), "float32")
    p = np.empty((35, 21), "float32")
    f(x, p)
    np.testing.assert_array_equal(p, np.pad(x, 1))


def test_bool_inputs_outputs_and_logic():
    X = placeholder((50,), name="X")
    M = placeholder((50,), "bool", name="M")
    Y = compute((50,), lambda i: (X[i] > 0.0) & ~M[i] | (X[i] != X[i]), name="Y")
    f = build(_vectorized(Y, 16), [X, M, Y])
    x, m = _random((50,), "float32"), _random((50,), "bool")
    x[3] = np.nan
    y = np.empty(50, bool)
    f(x, m, y)
    np.testing.assert_array_equal(y, (x > 0) & ~m | np.isnan(x))


def test_min_max_propagate_nan_like_numpy():
    X, Y = placeholder((20,), name="X"), placeholder((20,), name="Y")
    from tilefuse.tensorir.expr import Max, Min
    Z = compute((20,), lambda i: Max(X[i], Y[i], "float32") + Min(X[i], Y[i], "float32"), name="Z")
    f = build(_vectorized(Z, 8), [X, Y, Z])
    x, y = _random((20,), "float32"), _random((20,), "float32")
    x[2] = np.nan
    z = np.empty(20, "float32")
    f(x, y, z)
    np.testing.assert_array_equal(z, np.maximum(x, y) + np.minimum(x, y))


def test_zero_size_and_size_one_axes():
    X = placeholder((0, 5), name="X")
    Y = compute((0, 5), lambda i, j: X[i, j] + 1.0, name="Y")
    f = build(_vectorized(Y, 8), [X, Y])
    f(np.zeros((0, 5), "float32"), np.zeros((0, 5), "float32"))
    A = placeholder((1, 7, 1), name="A")
    r = reduce_axis((0, 0), name="r")
    E = compute((1, 7), lambda i, j: sum(A[i, j, r], axis=r), name="E")     # empty reduction
    f = build(create_schedule(E), [A, E])
    e = np.ones((1, 7), "float32")
    f(_random((1, 7, 1), "float32"), e)
    np.testing.assert_array_equal(e, np.zeros((1, 7), "float32"))


def test_scalar_parameters():
    X = placeholder((10,), name="X")
    alpha, n = var("alpha", "float32"), var("n", "int64")
    Y = compute((10,), lambda i: X[i] * alpha + cast("float32", i * n), name="Y")
    f = build(_vectorized(Y, 4), [X, alpha, n, Y])
    x, y = _random((10,), "float32"), np.empty(10, "float32")
    f(x, 2.5, 3, y)
    np.testing.assert_allclose(y, x * 2.5 + np.arange(10) * 3, rtol=1e-6)


def test_intermediate_stages_are_allocated_and_chained():
    X = placeholder((300, 300), name="X")          # big enough for a heap allocation
    T = compute((300, 300), lambda i, j: X[i, j] * 2.0, name="T")
    r = reduce_axis((0, 300), name="r")
    U = compute((300,), lambda i: sum(T[i, r], axis=r), name="U")
    V = compute((4,), lambda i: X[i, 0] + 1.0, name="V")           # small: on the stack
    W = compute((300,), lambda i: U[i] + V[i % 4], name="W")
    f = build(create_schedule(W), [X, W])
    x, w = _random((300, 300), "float32"), np.empty(300, "float32")
    f(x, w)
    np.testing.assert_allclose(w, (2 * x).sum(1) + (x[np.arange(300) % 4, 0] + 1), rtol=1e-4, atol=1e-4)


def test_fast_math_is_only_used_when_asked():
    X = placeholder((64,), name="X")
    Y = compute((64,), lambda i: X[i] * 2.0 + 1.0, name="Y")
    strict = build(_vectorized(Y), [X, Y])
    fast = build(_vectorized(Y), [X, Y], fast_math=True)
    assert " fast " not in strict.source("llvm") and "reassoc" not in strict.source("llvm")
    assert "fast" in fast.source("llvm")
    x, a, b = _random((64,), "float32"), np.empty(64, "float32"), np.empty(64, "float32")
    strict(x, a), fast(x, b)
    np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize("index, expected", [
    (lambda i: i // 2, lambda a: np.repeat(a[:32], 2)),           # nearest-neighbour upsampling
    (lambda i: i * 2 + 1, lambda a: a[1:129:2]),                    # stride 2
    (lambda i: i * 3, lambda a: a[0:192:3]),                        # stride 3
])
def test_lane_patterns_known_at_compile_time_are_a_wide_load_and_a_shuffle(index, expected):
    A = placeholder((200,), name="A")
    B = compute((64,), lambda i: A[index(i)] * 2.0, name="B")
    s = create_schedule(B)
    _, lanes = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(lanes)
    f = build(s, [A, B])
    a = np.arange(200, dtype="float32")
    b = np.full(64, np.nan, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, expected(a) * 2)
    text = f.source("llvm")
    assert "shufflevector" in text and "masked.gather" not in text


def test_a_select_side_reading_only_what_its_condition_read_loads_without_a_mask():
    A = placeholder((64,), name="A")
    relu = compute((64,), lambda i: if_then_else(A[i] > 0.0, A[i], 0.0), name="relu")
    shifted = compute((64,), lambda i: if_then_else(i > 0, A[i - 1], 0.0), name="shifted")   # a padding
    texts = []
    for out in (relu, shifted):
        s = create_schedule(out)
        _, lanes = s[out].split(out.op.axis[0], factor=8)
        s[out].vectorize(lanes)
        f = build(s, [A, out])
        a, got = np.arange(-32, 32, dtype="float32"), np.full(64, np.nan, "float32")
        f(a, got)
        np.testing.assert_array_equal(got, np.maximum(a, 0) if out is relu else np.concatenate([[0], a[:-1]]))
        texts.append(f.source("llvm"))
    assert "masked.load" not in texts[0]          # the condition read A[i] already
    assert "masked.load" in texts[1]              # A[i - 1] at i = 0 is outside A: only under the mask


@pytest.mark.parametrize("lanes, stride, calls", [(32, 1, 2), (8, 1, 1), (16, 2, 1), (1, 1, 1)])
def test_a_prefetch_fetches_each_line_of_contiguous_lanes_once_and_lane_zero_otherwise(lanes, stride, calls):
    from tilefuse.tensorir.codegen import CodeGen, build_prim_func
    from tilefuse.tensorir.expr import Buffer, BufferLoad, const
    from tilefuse.tensorir.pipeline import CODEGEN_PASSES, run_passes
    from tilefuse.tensorir.stmt import BufferStore, For, LetStmt, Prefetch, PrimFunc, seq
    A, B = Buffer("A", (4, 64), "float32"), Buffer("B", (4, 64), "float32")
    i, j = var("i"), var("j")
    body = seq(Prefetch(A, (i + 1, j * stride)), BufferStore(B, BufferLoad(A, (i, j), "float32") * 2.0, (i, j)))
    inner = For(j, const(0), const(lanes), "vectorized", body) if lanes > 1 else LetStmt(j, const(0), body)
    func = PrimFunc("pf", (A, B), For(i, const(0), const(4), "serial", inner))
    emitted = str(CodeGen(PrimFunc("pf", func.params, run_passes(func.body, CODEGEN_PASSES))).module)
    assert emitted.count("call void @\"llvm.prefetch.p0\"") == calls      # before LLVM unrolls anything
    a = rng.standard_normal((4, 64)).astype(np.float32)
    b = np.full_like(a, np.nan)
    build_prim_func(func)(a, b)                          # row 3 fetches past A's end: harmless
    np.testing.assert_array_equal(b[:, :lanes], a[:, :lanes] * 2.0)


def _emitted(func):
    from tilefuse.tensorir.codegen import CodeGen
    from tilefuse.tensorir.pipeline import CODEGEN_PASSES, run_passes
    from tilefuse.tensorir.stmt import PrimFunc
    return str(CodeGen(PrimFunc(func.name, func.params, run_passes(func.body, CODEGEN_PASSES))).module)


def test_index_arithmetic_is_emitted_once_per_scope_and_folded_in_unrolled_copies():
    from tilefuse.tensorir.codegen import build_prim_func
    from tilefuse.tensorir.expr import Buffer, BufferLoad, const
    from tilefuse.tensorir.stmt import BufferStore, For, IfThenElse, PrimFunc, seq
    A, B = Buffer("A", (40, 8), "float32"), Buffer("B", (40, 8), "float32")
    f, k = var("f"), var("k")
    row = f // 7 * 8 + f % 7           # the same index in every copy, read and written
    body = seq(IfThenElse(k == 0, BufferStore(B, const(0.0), (row, k))),       # a guard the copies decide
               BufferStore(B, BufferLoad(B, (row, k), "float32") + BufferLoad(A, (row, k), "float32"), (row, k)))
    func = PrimFunc("copies", (A, B), For(f, const(0), const(35), "serial", For(k, const(0), const(8), "unrolled", body)))
    text = _emitted(func)
    assert text.count("sdiv") == 2       # f // 7 and f % 7 (an sdiv each) once, for all 8 copies
    assert "if.then" not in text                                     # k == 0 decided in each copy
    assert "add i64 0, " not in text                                 # the copies' k folded
    a = rng.standard_normal((40, 8)).astype(np.float32)
    b = np.zeros_like(a)
    b[:, 0] = np.nan                     # cleared by the guarded store
    build_prim_func(func)(a, b)
    rows = [r // 7 * 8 + r % 7 for r in range(35)]
    np.testing.assert_array_equal(b[rows], a[rows])


@pytest.mark.parametrize("where", ["branch", "loop"])
def test_index_arithmetic_from_a_branch_or_loop_body_is_emitted_again_after_it(where):
    """A value computed in a branch or a loop body does not reach the code after it (LLVM's
    verifier refuses the module otherwise): the same index is computed again there."""
    from tilefuse.tensorir.codegen import build_prim_func
    from tilefuse.tensorir.expr import Buffer, const
    from tilefuse.tensorir.stmt import BufferStore, For, IfThenElse, PrimFunc, seq
    A = Buffer("A", (10, 4), "float32")
    f, n, j = var("f"), var("n", "int64"), var("j")
    store = BufferStore(A, const(1.0), (f // 3, f % 3))
    first = IfThenElse(n > 2, store) if where == "branch" else For(j, const(0), n, "serial", store)
    after = BufferStore(A, const(2.0), (f // 3, f % 3 + 1))
    func = PrimFunc("after", (A, n), For(f, const(0), const(30), "serial", seq(first, after)))
    assert _emitted(func).count("sdiv") == 4      # f // 3 and f % 3 in the branch or loop, and after it
    for count in (0, 5):
        a = np.zeros((10, 4), np.float32)
        build_prim_func(func)(a, count)
        want = np.zeros((10, 4), np.float32)
        for r in range(30):
            if count > 2 if where == "branch" else count > 0:
                want[r // 3, r % 3] = 1.0
            want[r // 3, r % 3 + 1] = 2.0
        np.testing.assert_array_equal(a, want)


def test_splats_and_zero_vectors_are_short_in_the_ir_text():
    A = placeholder((64,), name="A")
    out = compute((64,), lambda i: A[i] * A[0], name="out")
    s = create_schedule(out)
    _, lanes = s[out].split(out.op.axis[0], factor=16)
    s[out].vectorize(lanes)
    f = build(s, [A, out])
    a, got = rng.standard_normal(64).astype(np.float32), np.empty(64, np.float32)
    f(a, got)
    np.testing.assert_array_equal(got, a * a[0])
    from tilefuse.tensorir.codegen import CodeGen
    from tilefuse.schedule import lower
    from tilefuse.tensorir.pipeline import CODEGEN_PASSES, run_passes
    from tilefuse.tensorir.stmt import PrimFunc
    func = lower(s, [A, out])
    text = str(CodeGen(PrimFunc(func.name, func.params, run_passes(func.body, CODEGEN_PASSES))).module)
    assert "shufflevector <16 x float>" in text and "float 0.0, float 0.0" not in text
    assert "poison" in text and "zeroinitializer" in text


def test_integer_values_read_from_memory_are_read_again_after_a_store():
    """Integer arithmetic on loaded values is not index arithmetic: an unrolled accumulation
    whose copies are the same expression reads the running sum anew in each copy."""
    from tilefuse.tensorir.codegen import build_prim_func
    from tilefuse.tensorir.expr import Buffer, BufferLoad, const
    from tilefuse.tensorir.stmt import BufferStore, For, PrimFunc
    X, acc = Buffer("X", (6,), "int32"), Buffer("acc", (6,), "int32")
    i, r = var("i"), var("r")
    add = BufferStore(acc, BufferLoad(acc, (i,), "int32") + BufferLoad(X, (i,), "int32"), (i,))
    func = PrimFunc("acc", (X, acc), For(i, const(0), const(6), "serial", For(r, const(0), const(4), "unrolled", add)))
    x = np.arange(6, dtype=np.int32)
    out = np.ones(6, np.int32)
    build_prim_func(func)(x, out)
    np.testing.assert_array_equal(out, 1 + 4 * x)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64"])
def test_constant_integer_arithmetic_keeps_each_dtype_s_own_semantics(dtype):
    """Folded at compile time or not, constants combine as numpy combines them: unsigned
    division, min and max of large uint8 values, wraparound of small types."""
    from tilefuse.tensorir.codegen import build_prim_func
    from tilefuse.tensorir.expr import Buffer, Const, Max, Min
    from tilefuse.tensorir.stmt import BufferStore, PrimFunc, seq
    out = Buffer("out", (5,), dtype)
    a, b = (200, 3) if dtype == "uint8" else (-7, 2)
    c = lambda v: Const(v, dtype)
    body = seq(*[BufferStore(out, e, (Const(k, "int64"),)) for k, e in enumerate(
        [c(a) // c(b), c(a) % c(b), Min(c(a), c(b), dtype), Max(c(a), c(b), dtype), c(a) * c(b) + c(a)])])
    got = np.zeros(5, dtype)
    build_prim_func(PrimFunc("consts", (out,), body))(got)
    x, y = np.array(a, dtype), np.array(b, dtype)
    with np.errstate(over="ignore"):
        want = np.array([x // y, x % y, min(x, y), max(x, y), x * y + x], dtype)
    np.testing.assert_array_equal(got, want)
