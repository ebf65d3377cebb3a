"""compute_inline and compute_root."""
import numpy as np
import pytest

from tilefuse.schedule import ScheduleError, create_schedule, lower
from schedule_testing import rand, run
from tilefuse.tensorir import compute, exp, placeholder, reduce_axis, sum as rsum


def chain():
    A = placeholder((10, 12), name="A")
    B = compute((10, 12), lambda i, j: A[i, j] * 2.0, name="B")
    C = compute((10, 12), lambda i, j: exp(B[i, j]) + 1.0, name="C")
    D = compute((10, 12), lambda i, j: C[i, j] * B[i, j], name="D")
    return A, B, C, D


def test_inlined_stages_leave_one_loop_nest():
    A, B, C, D = chain()
    s = create_schedule(D)
    s[B].compute_inline()
    s[C].compute_inline()
    text = str(lower(s, [A, D]))
    assert text.count("for (") == 2 and "allocate" not in text
    a = rand((10, 12))
    np.testing.assert_allclose(run(s, [A, D], [a], (10, 12)), (np.exp(2 * a) + 1) * (2 * a), rtol=1e-6)


def test_inline_into_a_reduction():
    A = placeholder((6, 9), name="A")
    B = compute((6, 9), lambda i, j: A[i, j] * A[i, j], name="B")
    r = reduce_axis((0, 9), name="r")
    C = compute((6,), lambda i: rsum(B[i, r], axis=r), name="C")
    s = create_schedule(C)
    s[B].compute_inline()
    a = rand((6, 9))
    np.testing.assert_allclose(run(s, [A, C], [a], (6,)), (a * a).sum(1), rtol=1e-5)


def test_compute_root_undoes_compute_at_and_inline():
    A, B, C, D = chain()
    s = create_schedule(D)
    s[B].compute_inline()
    s[C].compute_at(s[D], D.op.axis[0])
    s[B].compute_root()
    s[C].compute_root()
    assert str(lower(s, [A, D])).count("allocate") == 2


def test_cannot_inline_a_reduction_or_an_output():
    A = placeholder((6, 9), name="A")
    r = reduce_axis((0, 9), name="r")
    B = compute((6,), lambda i: rsum(A[i, r], axis=r), name="B")
    C = compute((6,), lambda i: B[i] * 2.0, name="C")
    s = create_schedule(C)
    with pytest.raises(ScheduleError, match="stage B: cannot inline a reduction"):
        s[B].compute_inline()
    with pytest.raises(ScheduleError, match="stage C: cannot inline an output"):
        s[C].compute_inline()


def test_compute_at_an_inlined_stage_is_an_error():
    A, B, C, D = chain()
    s = create_schedule(D)
    s[B].compute_at(s[C], C.op.axis[0])
    s[C].compute_inline()
    with pytest.raises(ScheduleError, match="stage B: computed at stage C, which is inlined"):
        lower(s, [A, D])
