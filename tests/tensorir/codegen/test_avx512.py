"""tensorir.codegen.avx512: which values may use the AVX-512 instructions, and rcp14 and
scalef on vectors of one to five registers, run where the host has AVX-512 (checked against
numpy)."""
from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
import pytest

from tilefuse.tensorir.codegen import avx512
from tilefuse.tensorir.runtime.target import Target, initialize_llvm, optimize_module

F32 = ir.FloatType()
AVX512 = Target.parse("llvm -mcpu=skylake-avx512") if Target.host().triple.startswith("x86_64") else None
runs_here = pytest.mark.skipif(AVX512 is None or AVX512.cannot_run_here() is not None,
                               reason="the host cannot run AVX-512 code")


def compiled(name: str, lanes: int):
    """out[i:i+lanes] = op(a[i:i+lanes], b[i:i+lanes]) over n floats, as a callable on arrays,
    with ``op`` the function of this module called ``name``."""
    vty, i64, ptr = ir.VectorType(F32, lanes), ir.IntType(64), ir.PointerType()
    mod = ir.Module(name=f"{name}{lanes}")
    mod.triple = AVX512.triple
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr, i64]), "kernel")
    a, b, out, n = fn.args
    entry, loop, done = (fn.append_basic_block(k) for k in ("entry", "loop", "done"))
    bld = ir.IRBuilder(entry)
    bld.branch(loop)
    bld.position_at_end(loop)
    i = bld.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    x, y = (bld.load(bld.gep(p, [i], source_etype=F32), typ=vty, align=4) for p in (a, b))
    result = avx512.rcp14(bld, x) if name == "rcp14" else avx512.scalef(bld, x, y)
    bld.store(result, bld.gep(out, [i], source_etype=F32), align=4)
    following = bld.add(i, ir.Constant(i64, lanes))
    i.add_incoming(following, loop)
    bld.cbranch(bld.icmp_signed("<", following, n), loop, done)
    bld.position_at_end(done)
    bld.ret_void()
    initialize_llvm()
    module = llvm.parse_assembly(str(mod))
    module.verify()
    optimize_module(module, AVX512)
    engine = llvm.create_mcjit_compiler(module, AVX512.target_machine())
    engine.finalize_object()
    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    call = proto(engine.get_function_address("kernel"))

    def run(x, y):
        out = np.empty_like(x)
        call(x.ctypes.data, y.ctypes.data, out.ctypes.data, x.size)
        return out
    run.engine = engine         # keeps the code alive
    return run


def test_fits_takes_whole_registers_of_float32_on_avx512_targets():
    v = lambda lanes, elem=F32: ir.VectorType(elem, lanes)   # noqa: E731
    avx512_target = Target.of("x", "+avx512f")
    assert all(avx512.fits(avx512_target, v(lanes)) for lanes in (16, 32, 48, 64))
    assert not any(avx512.fits(avx512_target, t) for t in (v(8), v(24), F32, v(16, ir.DoubleType()),
                                                           v(16, ir.IntType(32))))
    assert not avx512.fits(Target.of("y", "+avx2,+fma"), v(16))
    assert not avx512.fits(None, v(16))


@runs_here
@pytest.mark.parametrize("lanes", [16, 32, 48, 80])
def test_rcp14_is_the_reciprocal_within_2_to_the_minus_14(lanes):
    rng = np.random.default_rng(0)
    count = lanes * 64
    x = (rng.uniform(0.5, 2, count) * 2.0 ** rng.integers(-100, 100, count) * rng.choice([-1, 1], count))
    x = x.astype(np.float32)
    x[:4] = [1.0, 2.0, 0.5, -4.0]
    got = compiled("rcp14", lanes)(x, x)
    np.testing.assert_allclose(got, 1 / x.astype(np.float64), rtol=2.0 ** -14)
    np.testing.assert_array_equal(got[:4], [1.0, 0.5, 2.0, -0.25])    # powers of two: exact
    assert not np.array_equal(got, np.float32(1) / x)                  # an estimate, not a division


@runs_here
@pytest.mark.parametrize("lanes", [16, 48])
def test_scalef_multiplies_by_2_to_the_floor(lanes):
    rng = np.random.default_rng(1)
    count = lanes * 32
    a = rng.standard_normal(count).astype(np.float32)
    b = rng.uniform(-120, 120, count).astype(np.float32)
    b[:3] = [200.0, -200.0, 2.5]          # overflow to inf, underflow to 0, floor
    a[:3] = [1.0, 1.0, 3.0]
    got = compiled("scalef", lanes)(a, b)
    with np.errstate(over="ignore"):
        want = np.ldexp(a, np.floor(b).astype(np.int32))
    np.testing.assert_array_equal(got, want)
    assert got[0] == np.inf and got[1] == 0 and got[2] == 12.0
