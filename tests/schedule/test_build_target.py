"""Building for a target other than the host: templates and ``build`` take ``target=`` (a
Target or a string ``Target.parse`` reads), take their vector lanes from it and emit its
instructions, whatever this host is; only the host runs what it can."""
import numpy as np
import pytest

from tilefuse.schedule import build, create_schedule, template_for
from tilefuse.tensorir import compute, placeholder, reduce_axis, sum as rsum
from tilefuse.tensorir.runtime.target import Target

pytestmark = pytest.mark.skipif(not Target.host().triple.startswith("x86_64"), reason="x86-64 targets")


def _matmul(n=32, k=48, m=64):
    A = placeholder((n, k), name="A"); B = placeholder((k, m), name="B")
    r = reduce_axis((0, k), name="r")
    return A, B, compute((n, m), lambda i, j: rsum(A[i, r] * B[r, j], axis=r), name="C")


@pytest.mark.parametrize("spec, register, lanes", [("llvm -mcpu=skylake-avx512", "zmm", 16),
                                                   ("llvm -mcpu=haswell", "ymm", 8),
                                                   ("llvm -mcpu=x86-64-v2", "xmm", 4)])
def test_a_template_builds_code_for_its_target(spec, register, lanes):
    A, B, C = _matmul()
    t = template_for(C, spec)
    assert t.target == Target.parse(spec)
    kernel = t.build()
    asm = (kernel.kernels[0] if hasattr(kernel, "kernels") else kernel).source("asm")
    widest = next(r for r in ("zmm", "ymm", "xmm") if r in asm)
    assert widest == register
    x = placeholder((1000,), name="x"); y = compute((1000,), lambda i: x[i] * 2.0, name="y")
    assert template_for(y, spec).default_config()["vector"] == lanes
    if Target.parse(spec).cannot_run_here() is None:       # and it computes the product here
        a, b = np.random.rand(32, 48).astype("float32"), np.random.rand(48, 64).astype("float32")
        c = np.zeros((32, 64), "float32")
        kernel(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_build_takes_a_target_or_its_name():
    A, B, C = _matmul()
    s = create_schedule(C)
    _, ji = s[C].split(C.op.axis[1], factor=16)
    s[C].vectorize(ji)
    named = build(s, [A, B, C], target="llvm -mcpu=skylake-avx512")
    assert named.target == Target.parse("llvm -mcpu=skylake-avx512") and "zmm" in named.source("asm")
    assert build(s, [A, B, C]).target is Target.host()
