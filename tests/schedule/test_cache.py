"""cache_write, cache_read and pack: new stages that readers use instead of the original."""
import numpy as np
import pytest

from tilefuse.schedule import ScheduleError, build, create_schedule, lower
from schedule_testing import matmul, rand, run
from host_vectors import REGISTER
from tilefuse.tensorir import compute, if_then_else, placeholder


def register_tiled(n, k, m, ti=4, tj=16, pack=True):
    A, B, C, r = matmul(n, k, m)
    s = create_schedule(C)
    CL = s.cache_write(C, "local")
    if pack:
        P = s.pack(B, axis=1, block=tj)
        s[P].vectorize(P.op.axis[2])
    io, jo, ii, ji = s[C].tile(*C.op.axis, ti, tj)
    s[C].vectorize(ji)
    s[C].parallel(io)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    (cr,) = s[CL].op.reduce_axis
    s[CL].reorder(cr, ci, cj)
    s[CL].unroll(ci)
    s[CL].vectorize(cj)
    return A, B, C, s


@pytest.mark.parametrize("n, k, m", [(64, 32, 64), (67, 45, 83), (3, 7, 5), (1, 1, 1)])
@pytest.mark.parametrize("pack", [False, True])
def test_register_tiled_matmul(n, k, m, pack):
    A, B, C, s = register_tiled(n, k, m, pack=pack)
    a, b = rand((n, k)), rand((k, m))
    np.testing.assert_allclose(run(s, [A, B, C], [a, b], (n, m)), a @ b, rtol=1e-5, atol=1e-5 * k)


def test_cache_write_keeps_the_accumulator_in_registers():
    A, B, C, s = register_tiled(128, 64, 128)
    text = str(lower(s, [A, B, C]))
    assert "allocate C.local[4, 16]: float32, local" in text
    asm = build(s, [A, B, C]).source("asm")
    assert "vfmadd231ps" in asm and REGISTER in asm


def test_cache_write_must_come_first():
    A, B, C, r = matmul(8, 8, 8)
    s = create_schedule(C)
    s[C].split(C.op.axis[0], factor=2)
    with pytest.raises(ScheduleError, match="stage C: cache_write must come before"):
        s.cache_write(C, "local")



def test_cache_write_with_an_order_lays_the_new_stage_out_transposed():
    A, B, C, r = matmul(13, 9, 35)
    s = create_schedule(C)
    CT = s.cache_write(C, "local", order=(1, 0))
    assert CT.shape == (35, 13)
    io, jo, ii, ji = s[C].tile(*C.op.axis, 4, 16)
    s[CT].compute_at(s[C], jo)
    s[CT].vectorize(CT.op.axis[1])
    text = str(lower(s, [A, B, C]))
    assert "allocate C.local[16, 4]: float32, local" in text
    a, b = rand((13, 9)), rand((9, 35))
    np.testing.assert_allclose(run(s, [A, B, C], [a, b], (13, 35)), a @ b, rtol=1e-5, atol=1e-5)


def test_cache_write_order_must_be_a_permutation():
    A, B, C, r = matmul(8, 8, 8)
    with pytest.raises(ScheduleError, match=r"cache_write order \(0, 0\) is not a permutation"):
        create_schedule(C).cache_write(C, "local", order=(0, 0))

def test_cache_read_copies_a_tile_of_the_input():
    A = placeholder((32, 32), name="A")
    B = compute((32, 32), lambda i, j: A[i, j] * 2.0 + A[i, 31 - j], name="B")
    s = create_schedule(B)
    AL = s.cache_read(A, "local", [B])
    io, ii = s[B].split(B.op.axis[0], factor=8)
    s[AL].compute_at(s[B], io)
    assert "allocate A.local[8, 32]" in str(lower(s, [A, B]))
    a = rand((32, 32))
    np.testing.assert_allclose(run(s, [A, B], [a], (32, 32)), a * 2 + a[:, ::-1], rtol=1e-6)


def test_cache_read_errors():
    A = placeholder((8,), name="A")
    B = compute((8,), lambda i: A[i] * 2.0, name="B")
    C = compute((8,), lambda i: B[i] + 1.0, name="C")
    s = create_schedule(C)
    with pytest.raises(ScheduleError, match="cache_read A: stage C does not read it"):
        s.cache_read(A, "local", [C])


def test_pack_layout_and_zero_fill():
    A = placeholder((5, 20), name="A")
    B = compute((5, 20), lambda i, j: A[i, j] + 1.0, name="B")
    s = create_schedule(B)
    P = s.pack(A, axis=1, block=8)
    assert P.shape == (3, 5, 8)
    f = build(s, [A, B])
    a = rand((5, 20))
    out = np.empty((5, 20), "float32")
    f(a, out)
    np.testing.assert_array_equal(out, a + 1)


def test_pack_errors():
    A = placeholder((5, 20), name="A")
    B = compute((5, 20), lambda i, j: if_then_else(i > 0, A[i, j], 0.0), name="B")
    s = create_schedule(B)
    with pytest.raises(ScheduleError, match="pack A: axis must be a dimension index"):
        s.pack(A, axis=2, block=8)
    with pytest.raises(ScheduleError, match="pack A, axis 1: block must be an int >= 1"):
        s.pack(A, axis=1, block=0)
    with pytest.raises(ScheduleError, match="pack B: no stage reads it"):
        s.pack(B, axis=0, block=2)
