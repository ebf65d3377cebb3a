"""Accuracy and code-quality tests for tensorir.codegen.mathlib.

Every (intrinsic, dtype, lanes) combination is compiled into a tiny kernel

    void kernel(T *a, T *b, T *out, i64 n)   # out[i] = f(a[i]) or f(a[i], b[i])

which is optimised at O3, JIT-compiled with MCJIT and called through ctypes on
numpy arrays: by default as code for any CPU (``emit_intrinsic`` without a target)
run on the host; the float32 functions that divide or scale by 2^k also as code for
an AVX2 and an AVX-512 target (whose own instructions replace the division), where
the host can run them.  float32 results are measured in ulps against float64
references (np.exp, np.log, np.tanh, 1/(1+np.exp(-x)), math.erf).
"""
from __future__ import annotations

import ctypes
import functools
import math
import re
from dataclasses import dataclass

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
import pytest

from tilefuse.tensorir.codegen.mathlib import INTRINSICS, SIGMOID_LO, emit_intrinsic, float_type_of, lanes_of
from tilefuse.tensorir.runtime.target import Target, host_target_machine, initialize_llvm, optimize_module
from host_vectors import LANES as HOST_LANES, REGISTER

#: the targets whose instructions the float32 code may use, each where this host runs its code
TARGETS = {name: Target.parse(spec) for name, spec in (("avx2", "llvm -mcpu=haswell"),
                                                      ("avx512", "llvm -mcpu=skylake-avx512"))
           if Target.host().triple.startswith("x86_64")}
RUNNABLE = [None] + [pytest.param(name, marks=pytest.mark.skipif(
    target.cannot_run_here() is not None, reason=f"the host cannot run {name} code"))
    for name, target in TARGETS.items()]

LANES = (1, 8, 16)
DTYPES = ("float32", "float64")
F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).tiny)
F32_DENORM = 1.4e-45


# ---------------------------------------------------------------------------
# kernel construction and JIT


@dataclass
class Kernel:
    name: str
    dtype: np.dtype
    lanes: int
    engine: llvm.ExecutionEngine       # keeps the machine code alive
    cfunc: object
    ir_text: str                       # optimised IR
    asm: str

    def __call__(self, a, b=None):
        a = np.ascontiguousarray(a, dtype=self.dtype)
        n = a.size
        padded = max(self.lanes, -(-n // self.lanes) * self.lanes)
        pa = np.zeros(padded, self.dtype)
        pa[:n] = a
        pb = np.ones(padded, self.dtype)
        if b is not None:
            pb[:n] = np.ascontiguousarray(b, dtype=self.dtype)
        out = np.empty(padded, self.dtype)
        self.cfunc(pa.ctypes.data, pb.ctypes.data, out.ctypes.data, padded)
        return out[:n]


def build_module(name: str, dtype: str, lanes: int, fastmath=("contract",), target: Target | None = None) -> ir.Module:
    elem = ir.FloatType() if dtype == "float32" else ir.DoubleType()
    vty = elem if lanes == 1 else ir.VectorType(elem, lanes)
    i64 = ir.IntType(64)
    ptr = ir.PointerType()
    mod = ir.Module(name=f"{name}_{dtype}_{lanes}")
    mod.triple = llvm.get_process_triple()
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr, i64]), "kernel")
    a, b, out, n = fn.args
    entry, loop, done = fn.append_basic_block("entry"), fn.append_basic_block("loop"), fn.append_basic_block("done")
    bld = ir.IRBuilder(entry)
    bld.branch(loop)
    bld.position_at_end(loop)
    i = bld.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    align = 4 if dtype == "float32" else 8

    def load(p):
        return bld.load(bld.gep(p, [i], inbounds=True, source_etype=elem), typ=vty, align=align)

    args = [load(a)] + ([load(b)] if INTRINSICS[name] == 2 else [])
    result = emit_intrinsic(bld, name, args, fastmath=fastmath, target=target)
    assert result.type == vty
    bld.store(result, bld.gep(out, [i], inbounds=True, source_etype=elem), align=align)
    nxt = bld.add(i, ir.Constant(i64, lanes))
    i.add_incoming(nxt, bld.block)          # exp may have branched: the loop ends in a later block
    bld.cbranch(bld.icmp_signed("<", nxt, n), loop, done)
    bld.position_at_end(done)
    bld.ret_void()
    return mod


def jit(mod: ir.Module, name: str, dtype: str, lanes: int, target: Target | None = None) -> Kernel:
    """The module's kernel compiled for ``target`` (None: the host)."""
    initialize_llvm()
    target = target or Target.host()
    ref = llvm.parse_assembly(str(mod))
    ref.verify()
    optimize_module(ref, target)
    ir_text = str(ref)
    asm = (host_target_machine() if target == Target.host() else target.target_machine()).emit_assembly(ref)
    # MCJIT takes ownership of the target machine it is given and frees it with the engine, so
    # each engine gets a new one rather than the process-wide cached host_target_machine()
    engine = llvm.create_mcjit_compiler(ref, target.target_machine())
    engine.finalize_object()
    addr = engine.get_function_address("kernel")
    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    return Kernel(name, np.dtype(dtype), lanes, engine, proto(addr), ir_text, asm)


@functools.lru_cache(maxsize=None)
def kernel(name: str, dtype: str, lanes: int, target: str | None = None) -> Kernel:
    """The kernel of ``name``, as code for any CPU (``target`` None) or for ``TARGETS[target]``."""
    tgt = TARGETS[target] if target else None
    return jit(build_module(name, dtype, lanes, target=tgt), name, dtype, lanes, tgt)


# ---------------------------------------------------------------------------
# inputs and error measures


def strided_f32_bits(stride: int = 4099, sign: int | None = None) -> np.ndarray:
    """Every ``stride``-th float32 bit pattern: all binades, denormals, inf, NaN."""
    bits = np.arange(0, 2**32, stride, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    if sign is not None:
        x = np.abs(x) if sign > 0 else -np.abs(x)
    return x


SPECIALS_F32 = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5,
                         F32_DENORM, -F32_DENORM, F32_TINY, -F32_TINY, F32_MAX, -F32_MAX,
                         88.72283, 88.72284, 89.0, -87.33654, -87.33655, -103.97208, -103.97209,
                         -104.0, -150.0, 1e-30, -1e-30, 1e-8, -1e-8, 0.625, -0.625,
                         0.927734375, -0.927734375, 3.92, -3.92, 4.0, -4.0, 9.0, -9.0, 1e30, -1e30],
                        dtype=np.float32)


def ulp32(ref: np.ndarray) -> np.ndarray:
    """The float32 ulp of the binade holding |ref| (float64), never below 2^-149."""
    _, e = np.frexp(np.abs(ref))
    return np.ldexp(1.0, np.maximum(e - 24, -149))


def ulp_errors(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in float32 ulps of ref; NaN/inf must match exactly (error 0 or inf)."""
    got = got.astype(np.float64)
    with np.errstate(over="ignore"):
        ref32 = ref.astype(np.float32).astype(np.float64)
    err = np.zeros(ref.shape)
    special = ~np.isfinite(ref32)
    same = (np.isnan(got) & np.isnan(ref32)) | (got == ref32)
    err[special & ~same] = np.inf
    finite = ~special
    with np.errstate(invalid="ignore", over="ignore"):
        err[finite] = np.abs(got[finite] - ref[finite]) / ulp32(ref[finite])
    err[finite & ~np.isfinite(got)] = np.inf
    return err


def f64_reference(name: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):                 # signalling NaNs, overflow
        x = x.astype(np.float64)
        if name == "exp":
            return np.exp(x)
        if name == "log":
            return np.log(x)
        if name == "tanh":
            return np.tanh(x)
        if name == "sigmoid":
            return 1.0 / (1.0 + np.exp(-x))
        if name == "erf":
            return np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)
    raise KeyError(name)


def inputs_f32(name: str) -> np.ndarray:
    rng = np.random.default_rng(0)
    if name == "exp":
        dense = [np.linspace(-110, 95, 1_000_001), np.linspace(-1, 1, 200_001),
                 rng.uniform(-104, 89, 500_000)]
    elif name == "log":
        dense = [np.linspace(0, 4, 1_000_001), np.linspace(0.5, 2.0, 500_001),
                 np.geomspace(1.4e-45, 3.4e38, 500_000), rng.uniform(0.7, 1.5, 200_000)]
    elif name == "tanh":
        dense = [np.linspace(-12, 12, 1_000_001), np.linspace(-1, 1, 200_001),
                 np.geomspace(1e-40, 20, 200_000)]
    elif name == "sigmoid":
        dense = [np.linspace(-110, 110, 1_000_001), np.linspace(-20, 20, 200_001)]
    elif name == "erf":
        dense = [np.linspace(-5, 5, 1_000_001), np.linspace(-1.2, 1.2, 200_001),
                 np.geomspace(1e-40, 6, 200_000)]
    else:
        raise KeyError(name)
    dense = [np.asarray(d, dtype=np.float32) for d in dense]
    if name != "log":
        dense.append(-dense[-1])
    return np.concatenate(dense + [strided_f32_bits(), SPECIALS_F32])


# ---------------------------------------------------------------------------
# float32 polynomial code: accuracy


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("name", ["exp", "log"])
def test_f32_exp_log_within_2ulp(name, lanes, target):
    x = inputs_f32(name)
    got = kernel(name, "float32", lanes, target)(x)
    err = ulp_errors(got, f64_reference(name, x))
    worst = int(np.argmax(err))
    assert err.max() <= 2.0, f"{name}({x[worst]!r}) = {got[worst]!r}: {err[worst]} ulp"


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("name", ["tanh", "erf"])
def test_f32_tanh_erf_accuracy(name, lanes, target):
    x = inputs_f32(name)
    got = kernel(name, "float32", lanes, target)(x)
    ref = f64_reference(name, x)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan)
    absolute = np.abs(got[~nan].astype(np.float64) - ref[~nan])
    assert absolute.max() <= 1e-6, f"{name}: abs error {absolute.max()}"
    # everywhere, including tiny arguments (odd polynomials keep relative accuracy near 0)
    err = ulp_errors(got, ref)
    worst = int(np.argmax(err))
    assert err.max() <= 4.0, f"{name}({x[worst]!r}): {err[worst]} ulp"


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("lanes", LANES + (48,))
def test_f32_sigmoid_accuracy(lanes, target):
    """Relative error below 4e-7 wherever sigmoid(x) is a normal float (the far negative tail
    included); 0 where it would be denormal, below log(FLT_MIN)."""
    x = inputs_f32("sigmoid")
    got = kernel("sigmoid", "float32", lanes, target)(x)
    ref = f64_reference("sigmoid", x)
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    normal = x >= SIGMOID_LO
    assert ref[normal].min() >= F32_TINY and ref[x < SIGMOID_LO].max() < F32_TINY
    relative = np.abs(got[normal].astype(np.float64) - ref[normal]) / ref[normal]
    worst = int(np.argmax(relative))
    assert relative.max() <= 4e-7, f"sigmoid({x[normal][worst]!r}): relative error {relative[worst]}"
    assert (got[x < SIGMOID_LO] == 0).all()
    big = ref > 1e-3
    assert ulp_errors(got[big], ref[big]).max() <= 4.0


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sigmoid", "erf"])
def test_f32_special_values_match_numpy(name, lanes, target):
    x = SPECIALS_F32
    got = kernel(name, "float32", lanes, target)(x)
    with np.errstate(all="ignore"):
        want = {
            "exp": np.exp, "log": np.log, "tanh": np.tanh,
            "sigmoid": lambda v: np.float32(1) / (np.float32(1) + np.exp(-v)),
            "erf": lambda v: np.array([math.erf(t) for t in v.astype(np.float64)], np.float32),
        }[name](x)
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=1e-30 if name != "log" else 0)
    # exact special cases spelled out
    expected = {
        "exp": {-np.inf: 0.0, np.inf: np.inf, 89.0: np.inf, -104.0: 0.0, 0.0: 1.0},
        "log": {0.0: -np.inf, -0.0: -np.inf, -1.0: np.nan, -np.inf: np.nan, np.inf: np.inf, 1.0: 0.0},
        "tanh": {np.inf: 1.0, -np.inf: -1.0, 0.0: 0.0, 20.0: 1.0, -1e30: -1.0},
        "sigmoid": {np.inf: 1.0, -np.inf: 0.0, 0.0: 0.5, 17.5: 1.0, 1e30: 1.0, -88.0: 0.0, -1e30: 0.0},
        "erf": {np.inf: 1.0, -np.inf: -1.0, 0.0: 0.0, 4.0: 1.0, -4.0: -1.0},
    }[name]
    inp = np.array(list(expected) + [np.nan], np.float32)
    out = kernel(name, "float32", lanes, target)(inp)
    np.testing.assert_array_equal(out, np.array(list(expected.values()) + [np.nan], np.float32))


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("name", ["exp", "tanh", "sigmoid", "erf"])
def test_f32_every_nan_stays_nan(name, target):
    """NaNs of any sign and payload, quiet or signalling (the bits that the exponent tricks
    shift into place), give NaN."""
    bits = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FC000FF, 0x7FFFFFFF, 0x7FA5A5A5,
                     0xFFC0007F, 0x7FC00001, 0x7FC00180], np.uint32)
    for lanes in (1, 16, 48):
        got = kernel(name, "float32", lanes, target)(np.tile(bits.view(np.float32), 5))
        assert np.isnan(got).all(), (lanes, got)


def test_f32_log_denormal_inputs_are_accurate():
    x = (np.arange(1, 2**23, 37, dtype=np.uint32)).view(np.float32)   # all denormal binades
    got = kernel("log", "float32", 16)(x)
    assert ulp_errors(got, f64_reference("log", x)).max() <= 2.0


def test_f32_exp_denormal_results_round_correctly():
    x = np.linspace(-103.97, -87.3, 100_001, dtype=np.float32)
    got = kernel("exp", "float32", 16)(x)
    assert ulp_errors(got, f64_reference("exp", x)).max() <= 1.0


@pytest.mark.parametrize("dtype, lanes", [("float32", 16), ("float32", 1), ("float64", 8)])
def test_exp_flush_is_exp_with_what_would_be_denormal_zero(dtype, lanes):
    tiny = np.finfo(dtype).tiny
    x = np.concatenate([np.linspace(-120 if dtype == "float32" else -750, 20, 100_001),
                        [-np.inf, np.inf, np.nan, np.log(tiny), np.nextafter(np.log(tiny), 0)]]).astype(dtype)
    got = kernel("exp_flush", dtype, lanes)(x)
    exp = kernel("exp", dtype, lanes)(x)
    assert ((exp != 0) & (exp < tiny)).any()                       # the range has denormal exps
    assert not ((got != 0) & (np.abs(got) < tiny)).any()           # exp_flush has none
    np.testing.assert_array_equal(got, np.where(exp < tiny, 0, exp))


def test_odd_functions_are_odd():
    x = np.geomspace(1e-38, 10, 100_000).astype(np.float32)
    for name in ("tanh", "erf"):
        k = kernel(name, "float32", 16)
        np.testing.assert_array_equal(k(-x), -k(x))


def test_f32_without_contraction_still_accurate():
    """With no fast-math flags at all (no FMA contraction) accuracy degrades gracefully."""
    for name, bound in (("exp", 2.0), ("log", 2.0), ("tanh", 4.0), ("sigmoid", 5.0), ("erf", 4.0)):
        k = jit(build_module(name, "float32", 16, fastmath=()), name, "float32", 16)
        x = inputs_f32(name)
        ref = f64_reference(name, x)
        keep = ~np.isfinite(ref) | (np.abs(ref) > 1e-3) | (name in ("exp", "log"))
        err = ulp_errors(k(x)[keep], ref[keep])
        assert err.max() <= bound, (name, err.max())


def test_fast_flags_keep_accuracy_and_exact_rsqrt():
    """'fast' is honoured except reassoc (which would overflow 2^n) and, for rsqrt, arcp/afn."""
    x = np.linspace(-87, 88.7, 200_001, dtype=np.float32)
    k = jit(build_module("exp", "float32", 16, fastmath=("fast",)), "exp", "float32", 16)
    assert ulp_errors(k(x), f64_reference("exp", x)).max() <= 2.0
    assert "reassoc" not in k.ir_text and " fast " not in k.ir_text
    k = jit(build_module("rsqrt", "float32", 16, fastmath=("fast",)), "rsqrt", "float32", 16)
    assert "rsqrt" not in k.asm
    x = np.geomspace(1e-30, 1e30, 10_000).astype(np.float32)
    np.testing.assert_array_equal(k(x), np.float32(1) / np.sqrt(x))


def test_flags_are_put_on_emitted_instructions():
    text = str(build_module("exp", "float32", 8, fastmath=("contract", "nsz")))
    assert "fmul contract nsz" in text and "fadd contract nsz" in text
    assert 'call contract nsz <8 x float> @"llvm.fabs.v8f32"' in text


# ---------------------------------------------------------------------------
# intrinsic-backed functions and float64


def _numpy_reference(name, a, b=None):
    with np.errstate(all="ignore"):
        one = a.dtype.type(1)
        return {
            "exp": lambda: np.exp(a), "log": lambda: np.log(a), "sqrt": lambda: np.sqrt(a),
            "rsqrt": lambda: one / np.sqrt(a), "tanh": lambda: np.tanh(a),
            "sigmoid": lambda: one / (one + np.exp(-a)), "abs": lambda: np.abs(a),
            "floor": lambda: np.floor(a), "ceil": lambda: np.ceil(a),
            "erf": lambda: np.array([math.erf(t) for t in a.astype(np.float64)], a.dtype),
            "pow": lambda: np.power(a, b),
        }[name]()


def _generic_inputs(dtype):
    rng = np.random.default_rng(1)
    vals = np.concatenate([
        rng.uniform(-30, 30, 20_000), rng.uniform(-1, 1, 5_000), np.linspace(-5.5, 5.5, 1_001),
        np.geomspace(1e-300 if dtype == "float64" else 1e-37, 1e30, 2_000),
        [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 1e-310 if dtype == "float64" else 1e-40],
    ])
    return vals.astype(dtype)


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["sqrt", "rsqrt", "abs", "floor", "ceil"])
def test_exact_intrinsics(name, dtype, lanes):
    x = _generic_inputs(dtype)
    np.testing.assert_array_equal(kernel(name, dtype, lanes)(x), _numpy_reference(name, x))


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sigmoid", "erf"])
def test_f64_matches_numpy(name, lanes):
    x = _generic_inputs("float64")
    if name == "exp":
        x = np.concatenate([x, np.linspace(-745, 710, 10_001)])
    got = kernel(name, "float64", lanes)(x)
    np.testing.assert_allclose(got, _numpy_reference(name, x), rtol=5e-16, atol=1e-300)


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_pow(dtype, lanes):
    rng = np.random.default_rng(2)
    a = np.concatenate([rng.uniform(0, 10, 20_000), rng.uniform(-3, 3, 1_000),
                        [0.0, 0.0, -2.0, -2.0, np.nan, 1.0, np.inf, 2.0, -0.0, 4.0]]).astype(dtype)
    b = np.concatenate([rng.uniform(-8, 8, 20_000), np.round(rng.uniform(-4, 4, 1_000)),
                        [0.0, -1.0, 3.0, 0.5, 0.0, np.nan, -1.0, np.inf, -1.0, 0.5]]).astype(dtype)
    got = kernel("pow", dtype, lanes)(a, b)
    np.testing.assert_allclose(got, _numpy_reference("pow", a, b),
                               rtol=4e-7 if dtype == "float32" else 5e-16, atol=0)


# ---------------------------------------------------------------------------
# generated code


def test_f32_exp_is_real_vector_code():
    k = kernel("exp", "float32", HOST_LANES)
    for banned in ("expf", "llvm.exp", "@exp"):
        assert banned not in k.ir_text, banned
    assert f"<{HOST_LANES} x float>" in k.ir_text
    assert REGISTER in k.asm
    assert "call" not in k.asm


@pytest.mark.parametrize("target, instructions", [("avx512", ("vrcp14ps", "vscalefps")), ("avx2", ("vrcpps",))])
@pytest.mark.parametrize("lanes", [16, 48])
@pytest.mark.parametrize("name", ["sigmoid", "tanh"])
def test_f32_vectors_divide_without_a_divide(name, lanes, target, instructions):
    """The division of sigmoid and tanh is a reciprocal estimate and a Newton step: the target's
    own instructions, never a divide (whose unit takes 5-10 cycles a vector)."""
    if target not in TARGETS:
        pytest.skip("x86-64 targets")
    module = llvm.parse_assembly(str(build_module(name, "float32", lanes, target=TARGETS[target])))
    optimize_module(module, TARGETS[target])
    asm = TARGETS[target].target_machine().emit_assembly(module)
    assert not re.search(r"\bv?div[sp]s\b", asm)
    for instruction in instructions:
        assert instruction in asm


@pytest.mark.parametrize("name", ["log", "tanh", "sigmoid", "erf"])
def test_f32_polynomial_functions_make_no_calls(name):
    k = kernel(name, "float32", HOST_LANES)
    assert "call" not in k.asm
    assert REGISTER in k.asm


def test_f64_tanh_erf_call_libm_per_lane():
    k = kernel("erf", "float64", 8)
    assert k.ir_text.count("@erf(") >= 8


def test_float_type_helpers_and_errors():
    vec = ir.VectorType(ir.FloatType(), 8)
    assert float_type_of(vec) == ir.FloatType() and float_type_of(ir.DoubleType()) == ir.DoubleType()
    assert lanes_of(vec) == 8 and lanes_of(ir.FloatType()) is None
    with pytest.raises(TypeError):
        float_type_of(ir.IntType(32))
    mod = ir.Module()
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [vec, ir.FloatType()]), "f")
    bld = ir.IRBuilder(fn.append_basic_block())
    with pytest.raises(ValueError):
        emit_intrinsic(bld, "cbrt", [fn.args[0]])
    with pytest.raises(ValueError):
        emit_intrinsic(bld, "pow", [fn.args[0]])
    with pytest.raises(TypeError):
        emit_intrinsic(bld, "pow", [fn.args[0], fn.args[1]])
    # straight-line code, except exp's branch to its full version (the builder ends after it)
    for name in ("log", "tanh", "sigmoid", "erf"):
        emit_intrinsic(bld, name, [fn.args[0]])
    assert len(fn.blocks) == 1
    emit_intrinsic(bld, "exp", [fn.args[0]])
    assert [blk.name for blk in fn.blocks[1:]] == ["exp.normal", "exp.full", "exp.end"]
    assert bld.block is fn.blocks[-1]
