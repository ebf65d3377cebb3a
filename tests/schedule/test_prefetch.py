"""Stage.prefetch: where the Prefetch lands in the loop IR, that results never change, and
the schedules it refuses."""
import numpy as np
import pytest

from tilefuse.schedule import build, create_schedule, lower
from tilefuse.schedule.schedule import ScheduleError
from tilefuse.tensorir import compute, exp, placeholder, reduce_axis, sum as rsum
from tilefuse.tensorir.stmt import IfThenElse, Prefetch
from tilefuse.tensorir.walk import walk
from schedule_testing import assert_close, rand, run


def scale_rows(rows=37, cols=100):
    A = placeholder((rows, cols), name="A")
    B = compute((rows, cols), lambda i, j: A[i, j] * 2.0, name="B")
    return A, B


def prefetches(func):
    return [n for n in walk(func.body) if isinstance(n, Prefetch)]


def test_a_read_and_the_own_output_are_fetched_offset_rows_ahead_in_the_innermost_loop():
    A, B = scale_rows()
    s = create_schedule(B)
    s[B].prefetch(A, B.op.axis[0], 1)
    s[B].prefetch(B, B.op.axis[0], 2, write=True)
    _, inner = s[B].split(B.op.axis[1], factor=16)       # 100 = 6 * 16 + 4: a guarded tail
    s[B].vectorize(inner)
    text = str(lower(s, [A, B]))
    assert "prefetch A[i + 1, j.outer * 16 + j.inner]" in text
    assert "prefetch_write B[i + 2, j.outer * 16 + j.inner]" in text
    found = prefetches(lower(s, [A, B]))
    assert {(p.buffer.name, p.write) for p in found} == {("A", False), ("B", True)}
    a = rand((37, 100))
    assert_close(run(s, [A, B], [a], (37, 100)), a * 2.0)
    assert "llvm.prefetch" in build(s, [A, B]).source("llvm")


def test_a_line_needed_long_after_is_fetched_into_l2_only():
    # level 2: x86's prefetcht1 (llvm.prefetch locality 2), where level 1 is prefetcht0 (3)
    A, B = scale_rows()
    s = create_schedule(B)
    s[B].prefetch(A, B.op.axis[0], 4, level=2)
    s[B].prefetch(B, B.op.axis[0], 1, write=True)
    text = str(lower(s, [A, B]))
    assert "prefetch (L2) A[i + 4, j]" in text and "prefetch_write B[i + 1, j]" in text
    assert sorted((p.buffer.name, p.level) for p in prefetches(lower(s, [A, B]))) == [("A", 2), ("B", 1)]
    llvm = build(s, [A, B]).source("llvm")
    assert "i32 0, i32 2, i32 1)" in llvm and "i32 1, i32 3, i32 1)" in llvm
    a = rand((37, 100))
    assert_close(run(s, [A, B], [a], (37, 100)), a * 2.0)


def test_a_backward_offset_and_a_reduction_stage_keep_their_results():
    A = placeholder((13, 101), name="A")
    r = reduce_axis((0, 101), name="r")
    S_ = compute((13,), lambda i: rsum(A[i, r], axis=r), name="S")
    s = create_schedule(S_)
    s[S_].prefetch(A, S_.op.axis[0], -1)
    s[S_].prefetch(S_, S_.op.axis[0], 3, write=True)
    s[S_].parallel(S_.op.axis[0])
    a = rand((13, 101))
    np.testing.assert_allclose(run(s, [A, S_], [a], (13,)), a.sum(1), rtol=1e-5, atol=1e-5)
    assert "prefetch A[i - 1, r]" in str(lower(s, [A, S_]))


def test_a_stage_computed_at_a_row_fetches_the_next_row_of_the_input_and_of_the_consumer():
    X = placeholder((9, 300), name="X")
    E = compute((9, 300), lambda i, j: exp(X[i, j]), name="E")
    Y = compute((9, 300), lambda i, j: E[i, j] + 1.0, name="Y")
    s = create_schedule(Y)
    s[E].compute_at(s[Y], Y.op.axis[0])
    s[E].prefetch(X, E.op.axis[0], 1)
    s[E].prefetch(Y, E.op.axis[0], 1, write=True)        # not read by E, but of E's shape
    text = str(lower(s, [X, Y]))
    assert "prefetch X[i + 1, j]" in text and "prefetch_write Y[i + 1, j]" in text
    x = rand((9, 300))
    np.testing.assert_allclose(run(s, [X, Y], [x], (9, 300)), np.exp(x) + 1.0, rtol=1e-6)


@pytest.mark.parametrize("bad, message", [
    (lambda s, A, B: s[B].prefetch("A", B.op.axis[0]), "needs a tensor"),
    (lambda s, A, B: s[B].prefetch(A, reduce_axis((0, 4), name="k")), "axis of the op"),
    (lambda s, A, B: s[B].prefetch(A, B.op.axis[0], 0), "nonzero integer"),
    (lambda s, A, B: s[B].prefetch(A, B.op.axis[0], True), "nonzero integer"),
    (lambda s, A, B: s[B].prefetch(A, B.op.axis[0], 1.5), "nonzero integer"),
    (lambda s, A, B: s[B].prefetch_at("A", lambda c: (0, 0)), "needs a tensor"),
    (lambda s, A, B: s[B].prefetch_at(A, (0, 0)), "function of the coordinates"),
    (lambda s, A, B: s[B].prefetch(A, B.op.axis[0], 1, level=3), "cache level is 1"),
    (lambda s, A, B: s[B].prefetch_at(A, lambda c: (0, 0), level=0), "cache level is 1"),
])
def test_bad_prefetches_are_refused_when_scheduled(bad, message):
    A, B = scale_rows()
    s = create_schedule(B)
    with pytest.raises(ScheduleError, match=message):
        bad(s, A, B)


def test_a_split_axis_is_not_an_axis_of_the_op():
    A, B = scale_rows()
    s = create_schedule(B)
    outer, _ = s[B].split(B.op.axis[0], factor=4)
    with pytest.raises(ScheduleError, match="axis of the op"):
        s[B].prefetch(A, outer)


def test_a_reduction_fetches_ahead_along_its_reduce_axis_once_per_step_of_an_unrolled_tile():
    # C = A @ B with 4 rows of C unrolled: each step of r reads one vector of B for all 4 rows
    A, B = placeholder((10, 37), name="A"), placeholder((37, 48), name="B")
    r = reduce_axis((0, 37), name="r")
    C = compute((10, 48), lambda i, j: rsum(A[i, r] * B[r, j], axis=r), name="C")
    s = create_schedule(C)
    io, ii = s[C].split(C.op.axis[0], factor=4)          # 10 = 2 * 4 + 2: a guarded tail
    s[C].reorder(io, r, ii, C.op.axis[1])
    s[C].unroll(ii)
    s[C].vectorize(C.op.axis[1])
    s[C].prefetch(B, r, 8)
    func = lower(s, [A, B, C])
    text = str(func)
    assert "prefetch B[r + 8, j]" in text
    guards = [n for n in walk(func.body) if isinstance(n, IfThenElse) and isinstance(n.then_body, Prefetch)]
    assert guards and all(str(g.cond) == "i.inner == 0" for g in guards)
    a, b = rand((10, 37)), rand((37, 48))
    np.testing.assert_allclose(run(s, [A, B, C], [a, b], (10, 48)), a @ b, rtol=1e-5, atol=1e-5)
    # the address moves with the unrolled rows: every copy fetches its own line
    s2 = create_schedule(C)
    io, ii = s2[C].split(C.op.axis[0], factor=4)
    s2[C].reorder(io, r, ii, C.op.axis[1])
    s2[C].unroll(ii)
    s2[C].prefetch(A, r, 16)
    assert not [n for n in walk(lower(s2, [A, B, C]).body) if isinstance(n, IfThenElse)
                and isinstance(n.then_body, Prefetch)]


def test_a_fetched_stage_cut_out_as_an_input_is_fetched_from_the_input():
    # packed weights computed once apart (prepacking): the kernel fetches from the packed input
    from tilefuse.schedule.hoist import build_prepacked
    A, W = placeholder((6, 64), name="A"), placeholder((64, 40), name="W", constant=True)
    r = reduce_axis((0, 64), name="r")
    C = compute((6, 40), lambda i, j: rsum(A[i, r] * W[r, j], axis=r), name="C")
    s = create_schedule(C)
    packed = s.pack(W, axis=1, block=16)
    s[C].prefetch(packed, r, 4)
    f = build_prepacked(s, [A, W, C], constants=[W])
    a, w, c = rand((6, 64)), rand((64, 40)), np.zeros((6, 40), np.float32)
    f(a, w, c)
    np.testing.assert_allclose(c, a @ w, rtol=1e-5, atol=1e-5)
    assert "llvm.prefetch" in f.main.source("llvm")


def test_a_tensor_neither_read_nor_of_the_stage_shape_is_refused_at_lowering():
    A, B = scale_rows()
    other = placeholder((5,), name="other")
    s = create_schedule(B)
    s[B].prefetch(other, B.op.axis[0])
    with pytest.raises(ScheduleError, match="does not read"):
        lower(s, [A, B, other])


def test_an_inlined_tensor_has_no_buffer_to_fetch():
    X = placeholder((9, 30), name="X")
    E = compute((9, 30), lambda i, j: X[i, j] * 3.0, name="E")
    F = compute((9, 30), lambda i, j: X[i, j] - 1.0, name="F")
    Y = compute((9, 30), lambda i, j: E[i, j] + F[i, j], name="Y")
    s = create_schedule(Y)
    s[E].compute_inline()
    s[F].compute_root()
    s[F].prefetch(E, F.op.axis[0])
    with pytest.raises(ScheduleError, match="no buffer"):
        lower(s, [X, Y])


def test_prefetch_at_fetches_its_index_once_per_trip_from_the_first_copy_and_lane():
    # C = A @ B, 4 rows unrolled, columns vectorized: one fetch per step of r, from the first row
    A, B = placeholder((10, 37), name="A"), placeholder((37, 48), name="B")
    r = reduce_axis((0, 37), name="r")
    C = compute((10, 48), lambda i, j: rsum(A[i, r] * B[r, j], axis=r), name="C")
    s = create_schedule(C)
    io, ii = s[C].split(C.op.axis[0], factor=4)
    jo, ji = s[C].split(C.op.axis[1], factor=16)
    s[C].reorder(io, jo, r, ii, ji)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    seen = {}

    def index(coords):
        seen.update(coords)
        return coords[C.op.axis[1]] // 16 + 1, coords[r]        # the next column block's row
    s[C].prefetch_at(B, index)
    func = lower(s, [A, B, C])
    fetches = prefetches(func)          # the full row tiles' and the 2-row tail's
    assert len(fetches) == 2 and all([str(i) for i in f.indices] == ["j.outer + 1", "r"] for f in fetches)
    assert str(seen[C.op.axis[1]]) == "j.outer * 16"
    guards = [n for n in walk(func.body) if isinstance(n, IfThenElse) and isinstance(n.then_body, Prefetch)]
    assert len(guards) == 2 and all(str(g.cond) == "i.inner == 0" for g in guards)
    a, b = rand((10, 37)), rand((37, 48))
    np.testing.assert_allclose(run(s, [A, B, C], [a, b], (10, 48)), a @ b, rtol=1e-5, atol=1e-5)
    assert "llvm.prefetch" in build(s, [A, B, C]).source("llvm")


def test_prefetch_at_with_the_wrong_number_of_indices_is_refused_at_lowering():
    A, B = scale_rows()
    s = create_schedule(B)
    s[B].prefetch_at(A, lambda coords: (coords[B.op.axis[0]] + 1,))
    with pytest.raises(ScheduleError, match="gave 1 indices for its 2 dimensions"):
        lower(s, [A, B])
