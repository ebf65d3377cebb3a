"""Cutting constant stages out of a schedule: as_input and build_prepacked."""
import numpy as np
import pytest

from tilefuse.schedule import ScheduleError, create_schedule
from tilefuse.schedule.hoist import PrepackedKernel, build_prepacked, hoistable
from tilefuse.schedule.templates import template_for
from schedule_testing import assert_close, matmul, rand
from tilefuse.tensorir import compute, placeholder
from tilefuse.tensorir.runtime import artifact
from tilefuse.tensorir.runtime.prepacked import PanelPack


def test_as_input_makes_the_kernel_read_the_tensor():
    A = placeholder((13,), name="A")
    B = compute((13,), lambda i: A[i] * 3.0, name="B")
    C = compute((13,), lambda i: B[i] + 1.0, name="C")
    s = create_schedule(C)
    BI = s.as_input(B)
    from tilefuse.schedule import build
    f = build(s, [BI, C])
    b = rand((13,))
    out = np.zeros(13, "float32")
    f(b, out)
    assert_close(out, b + 1)


def test_as_input_refuses_outputs_attached_and_inlined_stages():
    A = placeholder((8,), name="A")
    B = compute((8,), lambda i: A[i] * 3.0, name="B")
    C = compute((8,), lambda i: B[i] + 1.0, name="C")
    s = create_schedule(C)
    with pytest.raises(ScheduleError, match="output"):
        s.as_input(C)
    s[B].compute_inline()
    with pytest.raises(ScheduleError, match="inline"):
        s.as_input(B)
    s2 = create_schedule(C)
    s2[B].compute_at(s2[C], C.op.axis[0])
    with pytest.raises(ScheduleError, match="at"):
        s2.as_input(B)


@pytest.mark.parametrize("n,k,m", [(7, 13, 37), (16, 32, 48)])
def test_prepacked_matmul_matches_numpy(n, k, m):
    assert template_for(matmul(n, k, m)[2]).default_config()["pack"] is False    # data this small: not packed per call
    _, B, C, _ = matmul(n, k, m, constant_b=True)
    t = template_for(C)
    cfg = t.default_config()
    assert cfg["pack"] is True
    f = build_prepacked(t.apply(cfg), t.args, constants=[B])
    assert isinstance(f, PrepackedKernel) and len(f.packs) == 1 and f.packs[0][1] == [1]
    assert [type(k) for k, _ in f.packs] == [PanelPack] and f.kernels == [f.main]   # no pack kernel built
    a, b = rand((n, k)), rand((k, m))
    c = np.full((n, m), np.nan, "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    packed = f._cached[1][0]
    f(a * 2, b, c)                                   # same weights: not packed again
    assert f._cached[1][0] is packed
    np.testing.assert_allclose(c, 2 * a @ b, rtol=1e-5, atol=1e-5)
    b2 = b + 1
    f(a, b2, c)
    np.testing.assert_allclose(c, a @ b2, rtol=1e-5, atol=1e-5)
    again, _ = artifact.loads(artifact.dumps(f))
    c2 = np.zeros_like(c)
    again(a, b2, c2)
    np.testing.assert_array_equal(c2, c)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        f(a, c)


def test_templates_prepack_constant_placeholders():
    A = placeholder((9, 21), name="A")
    B = placeholder((21, 40), name="B", constant=True)
    from tilefuse.tensorir import reduce_axis, sum as rsum
    r = reduce_axis((0, 21), name="r")
    C = compute((9, 40), lambda i, j: rsum(A[i, r] * B[r, j], axis=r), name="C")
    t = template_for(C)
    assert t.constants == [B]
    f = t.build()
    assert isinstance(f, PrepackedKernel)
    a, b = rand((9, 21)), rand((21, 40))
    c = np.zeros((9, 40), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_nothing_to_hoist_without_constants_or_with_variable_mixing():
    A, B, C, _ = matmul(8, 16, 32)
    t = template_for(C)
    s = t.apply()
    assert hoistable(s, []) == [] and hoistable(s, [A]) == []
    assert not isinstance(build_prepacked(t.apply(), t.args, constants=[]), PrepackedKernel)
