"""compute_at: bound inference gives each attached stage exactly the window its reader needs."""
import numpy as np
import pytest

from tilefuse.schedule import ScheduleError, create_schedule, lower
from schedule_testing import assert_close, rand, run
from tilefuse.tensorir import compute, placeholder, reduce_axis, sum as rsum


def blur(h, w):
    """The Halide blur with the input padded by one on each side."""
    inp = placeholder((h + 2, w + 2), name="input")
    blur_x = compute((h + 2, w), lambda y, x: (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) / 3.0, name="blur_x")
    blur_y = compute((h, w), lambda y, x: (blur_x[y, x] + blur_x[y + 1, x] + blur_x[y + 2, x]) / 3.0,
                     name="blur_y")
    return inp, blur_x, blur_y


def blur_reference(a):
    bx = (a[:, :-2] + a[:, 1:-1] + a[:, 2:]) / np.float32(3)
    return (bx[:-2] + bx[1:-1] + bx[2:]) / np.float32(3)


def halide_schedule(inp, blur_x, blur_y):
    # blur_y.tile(x, y, xi, yi, 256, 32).vectorize(xi, 8).parallel(y)
    # blur_x.compute_at(blur_y, x).vectorize(x, 8)
    s = create_schedule(blur_y)
    y, x = blur_y.op.axis
    yo, xo, yi, xi = s[blur_y].tile(y, x, 32, 256)
    _, xv = s[blur_y].split(xi, factor=8)
    s[blur_y].vectorize(xv)
    s[blur_y].parallel(yo)
    s[blur_x].compute_at(s[blur_y], xo)
    _, bxv = s[blur_x].split(blur_x.op.axis[1], factor=8)
    s[blur_x].vectorize(bxv)
    return s


@pytest.mark.parametrize("h, w", [(64, 512), (100, 300), (7, 9), (33, 257)])
def test_halide_blur_schedule_matches_numpy(h, w):
    inp, blur_x, blur_y = blur(h, w)
    s = halide_schedule(inp, blur_x, blur_y)
    a = rand((h + 2, w + 2))
    np.testing.assert_allclose(run(s, [inp, blur_y], [a], (h, w)), blur_reference(a), rtol=1e-6, atol=1e-6)


def test_blur_x_window_is_the_tile_plus_the_stencil_rows():
    inp, blur_x, blur_y = blur(64, 512)
    text = str(lower(halide_schedule(inp, blur_x, blur_y), [inp, blur_y]))
    # 32 rows of blur_y need 34 rows of blur_x; a 256-wide tile needs 256 columns
    assert "allocate blur_x[34, 256]: float32, local" in text
    assert text.count("allocate blur_x") == 1          # 64 x 512 tiles evenly: no tail copies
    assert "if (" not in text


def test_attached_stage_over_a_non_dividing_tile_shifts_its_window_inside():
    inp, blur_x, blur_y = blur(10, 20)
    s = create_schedule(blur_y)
    y, x = blur_y.op.axis
    yo, xo, yi, xi = s[blur_y].tile(y, x, 4, 8)
    s[blur_x].compute_at(s[blur_y], xo)
    a = rand((12, 22))
    np.testing.assert_allclose(run(s, [inp, blur_y], [a], (10, 20)), blur_reference(a), rtol=1e-6, atol=1e-6)


def test_a_round_up_axis_keeps_its_window_aligned_and_runs_past_the_end():
    # P is padded to 16 columns; B, over 10 of them, is computed in tiles of 4 at its consumer
    P = placeholder((3, 16), name="P")
    B = compute((3, 10), lambda i, j: P[i, j] * 2.0, name="B")
    C = compute((3, 10), lambda i, j: B[i, j] + 1.0, name="C")
    shifted, rounded = create_schedule(C), create_schedule(C)
    for s, round_up in ((shifted, ()), (rounded, lambda: [B.op.axis[1]])):
        jo, _ = s[C].split(C.op.axis[1], factor=4)
        s[B].compute_at(s[C], jo, round_up=round_up() if round_up else ())
    assert "P[i, j + 6]" in str(lower(shifted, [P, C]))   # the last tile moved back to columns 6..9
    text = str(lower(rounded, [P, C]))
    assert "P[i, j + 6]" not in text and "P[i, j + 8]" in text      # columns 8..11: aligned
    a = rand((3, 16))
    for s in (shifted, rounded):
        np.testing.assert_allclose(run(s, [P, C], [a], (3, 10)), a[:, :10] * 2.0 + 1.0, rtol=1e-6)


def test_a_round_up_tile_wider_than_its_axis_stays_whole():
    # 10 columns in one tile of 16: the window keeps the tile's 16 columns (P's padding), where
    # clipped to 10 the last vector of each row would be a partial one
    P = placeholder((3, 16), name="P")
    B = compute((3, 10), lambda i, j: P[i, j] * 2.0, name="B")
    C = compute((3, 10), lambda i, j: B[i, j] + 1.0, name="C")
    s = create_schedule(C)
    jo, _ = s[C].split(C.op.axis[1], factor=16)
    s[B].compute_at(s[C], jo, round_up=[B.op.axis[1]])
    assert "allocate B[1, 16]" in str(lower(s, [P, C]))         # a row of it: 16 columns, not 10
    a = rand((3, 16))
    np.testing.assert_allclose(run(s, [P, C], [a], (3, 10)), a[:, :10] * 2.0 + 1.0, rtol=1e-6)


def test_compute_at_inner_loop_and_chain_of_three():
    A = placeholder((20, 30), name="A")
    B = compute((20, 30), lambda i, j: A[i, j] * 2.0, name="B")
    C = compute((20, 29), lambda i, j: B[i, j] + B[i, j + 1], name="C")
    D = compute((19, 29), lambda i, j: C[i, j] - C[i + 1, j], name="D")
    s = create_schedule(D)
    i, j = D.op.axis
    io, ii = s[D].split(i, factor=5)
    s[C].compute_at(s[D], ii)           # one row pair of C per row of D
    s[B].compute_at(s[C], C.op.axis[0])  # B's rows for one row of C
    text = str(lower(s, [A, D]))
    assert "allocate C[2, 29]" in text and "allocate B[1, 30]" in text
    a = rand((20, 30))
    b = a * 2
    c = b[:, :-1] + b[:, 1:]
    np.testing.assert_allclose(run(s, [A, D], [a], (19, 29)), c[:-1] - c[1:], rtol=1e-6, atol=1e-6)


def test_reduction_computed_at_a_tile_of_its_consumer():
    A = placeholder((16, 40), name="A")
    r = reduce_axis((0, 40), name="r")
    S = compute((16,), lambda i: rsum(A[i, r], axis=r), name="S")
    N = compute((16, 40), lambda i, j: A[i, j] / S[i], name="N")
    s = create_schedule(N)
    io, ii = s[N].split(N.op.axis[0], factor=4)
    s[S].compute_at(s[N], io)
    assert "allocate S[4]" in str(lower(s, [A, N]))
    a = rand((16, 40)) + 5
    np.testing.assert_allclose(run(s, [A, N], [a], (16, 40)), a / a.sum(1, keepdims=True), rtol=1e-5)


def test_output_computed_at_another_output_is_an_error():
    A = placeholder((8,), name="A")
    B = compute((8,), lambda i: A[i] + 1.0, name="B")
    C = compute((8,), lambda i: A[i] * 2.0, name="C")
    s = create_schedule([B, C])
    s[B].compute_at(s[C], C.op.axis[0])
    with pytest.raises(ScheduleError, match="stage B, axis i: computed at a loop of C, which does not read it"):
        lower(s, [A, B, C])


def test_compute_at_a_loop_not_around_every_reader_is_an_error():
    A = placeholder((8, 8), name="A")
    B = compute((8, 8), lambda i, j: A[i, j] + 1.0, name="B")
    C = compute((8, 8), lambda i, j: B[i, j] * 2.0, name="C")
    D = compute((8, 8), lambda i, j: B[i, j] + C[i, j], name="D")
    s = create_schedule(D)
    s[B].compute_at(s[C], C.op.axis[0])   # D reads B too, outside C's loops
    with pytest.raises(ScheduleError, match="read by D, which is not computed inside that loop"):
        lower(s, [A, D])


def test_compute_at_bad_targets():
    A = placeholder((8,), name="A")
    B = compute((8,), lambda i: A[i] + 1.0, name="B")
    C = compute((8,), lambda i: B[i] * 2.0, name="C")
    s = create_schedule(C)
    with pytest.raises(ScheduleError, match="stage C, axis i: stage B is computed before C"):
        s[C].compute_at(s[B], B.op.axis[0])
    with pytest.raises(ScheduleError, match="compute_at needs a loop of stage C"):
        s[B].compute_at(s[C], B.op.axis[0])
    with pytest.raises(ScheduleError, match="compute_at into itself"):
        s[C].compute_at(s[C], C.op.axis[0])
    with pytest.raises(ScheduleError, match="round_up takes data axes of the op"):
        s[B].compute_at(s[C], C.op.axis[0], round_up=[C.op.axis[0]])
    co, ci = s[C].split(C.op.axis[0], factor=2)
    with pytest.raises(ScheduleError, match="compute_at needs a loop of stage C"):
        s[B].compute_at(s[C], C.op.axis[0])    # split away: no longer a loop
    s[B].compute_at(s[C], co)
    s[C].split(co, factor=2)                    # ... and split after compute_at
    with pytest.raises(ScheduleError, match="no longer has"):
        lower(s, [A, C])


def test_a_stage_read_only_inside_a_stage_computed_at_the_same_loop_gets_the_region_read_there():
    # T is read by U's accumulator (computed at a loop of U), and U is computed at C's row
    # blocks: T, computed at the same loop of C, covers the block's rows of every k
    A = placeholder((20, 12), name="A")
    B = placeholder((12, 16), name="B")
    T = compute((20, 12), lambda i, k: A[i, k] * 2.0, name="T")
    r = reduce_axis((0, 12), name="r")
    U = compute((20, 16), lambda i, j: rsum(T[i, r] * B[r, j], axis=r), name="U")
    C = compute((20, 16), lambda i, j: U[i, j] + 1.0, name="C")
    s = create_schedule(C)
    local = s[s.cache_write(U, "local")]
    io, ii = s[C].split(C.op.axis[0], factor=8)                 # 8 + 8 + 4 rows
    uo, ui = s[U].split(U.op.axis[0], factor=4)
    local.compute_at(s[U], uo)
    for stage in (T, U):
        s[stage].compute_at(s[C], io)
    text = str(lower(s, [A, B, C]))
    assert "allocate T[8, 12]" in text and "allocate U[8, 16]" in text
    a, b = rand((20, 12)), rand((12, 16))
    assert_close(run(s, [A, B, C], [a, b], (20, 16)), (a * 2) @ b + 1)
