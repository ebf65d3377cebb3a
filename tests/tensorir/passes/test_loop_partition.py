"""Loop partitioning: before/after IR, and the numbers stay right."""
import numpy as np

from tilefuse.tensorir.codegen import build_prim_func
from tilefuse.tensorir.expr import Buffer, const, var
from tilefuse.tensorir.passes import partition_loops, simplify_stmt
from tilefuse.tensorir.stmt import For, IfThenElse, PrimFunc, BufferStore, seq
from tilefuse.tensorir.walk import walk


def _nest(n, factor, inner_kind="serial"):
    A = Buffer("A", (n,), "float32")
    io, ii = var("io"), var("ii")
    index = io * factor + ii
    body = IfThenElse(index < n, BufferStore(A, const(1.0), (index,)))
    outer = -(-n // factor)
    return A, io, ii, For(io, const(0), const(outer), "serial", For(ii, const(0), const(factor), inner_kind, body))


def test_guard_moves_to_the_tail():
    A, io, ii, nest = _nest(10, 4)
    expected = seq(
        For(io, const(0), const(2), "serial", For(ii, const(0), const(4), "serial",
                                                  BufferStore(A, const(1.0), (io * 4 + ii,)))),
        For(ii, const(0), const(2), "serial", BufferStore(A, const(1.0), (ii + 8,))),
    )
    assert simplify_stmt(partition_loops(nest)) == expected


def test_dividing_split_has_no_guard_left():
    _, _, _, nest = _nest(12, 4)
    out = simplify_stmt(partition_loops(simplify_stmt(nest)))
    assert not any(isinstance(n, IfThenElse) for n in walk(out))


def test_vectorized_loop_keeps_its_guard_for_masking():
    _, _, _, nest = _nest(10, 4, "vectorized")
    out = simplify_stmt(partition_loops(nest))
    guards = [n for n in walk(out) if isinstance(n, IfThenElse)]
    assert len(guards) == 1 and str(guards[0].cond) == "ii < 2"


def test_lower_bound_guard_partitions_at_the_front():
    A = Buffer("A", (10,), "float32")
    i = var("i")
    loop = For(i, const(0), const(10), "serial", IfThenElse(i >= 3, BufferStore(A, const(2.0), (i,))))
    out = simplify_stmt(partition_loops(loop))
    assert out == For(i, const(3), const(7), "serial", BufferStore(A, const(2.0), (i,)))


def test_partitioned_kernel_matches_numpy():
    for n, factor, kind in [(10, 4, "serial"), (37, 8, "vectorized"), (5, 16, "unrolled"), (1, 3, "serial")]:
        A, _, _, nest = _nest(n, factor, kind)
        f = build_prim_func(PrimFunc("fill", (A,), simplify_stmt(partition_loops(nest))))
        a = np.zeros(n, "float32")
        f(a)
        np.testing.assert_array_equal(a, np.ones(n, "float32"))


def _concat_loop(kind="parallel"):
    """out[c, x] = select(c < 3, P[c, x], select(c < 7, Q[c - 3, x], R[c - 7, x])) for c < 9."""
    from tilefuse.tensorir.expr import BufferLoad, Select
    P, Q, R = Buffer("P", (3, 5), "float32"), Buffer("Q", (4, 5), "float32"), Buffer("R", (2, 5), "float32")
    out = Buffer("out", (9, 5), "float32")
    c, x = var("c"), var("x")
    value = Select(c < 3, BufferLoad(P, (c, x), "float32"),
                   Select(c < 7, BufferLoad(Q, (c - 3, x), "float32"), BufferLoad(R, (c - 7, x), "float32"),
                          "float32"), "float32")
    loop = For(c, const(0), const(9), kind, For(x, const(0), const(5), "vectorized",
                                                 BufferStore(out, value, (c, x))))
    return (P, Q, R, out), loop


def test_a_select_between_buffers_splits_its_loop_into_one_piece_per_buffer():
    from tilefuse.tensorir.expr import BufferLoad, Select
    _, loop = _concat_loop()
    out = simplify_stmt(partition_loops(loop))
    pieces = [n for n in walk(out) if isinstance(n, For) and n.kind == "parallel"]
    assert [(p.min.value, p.extent.value) for p in pieces] == [(0, 3), (3, 4), (7, 2)]
    assert not any(isinstance(n, Select) for n in walk(out))
    assert [{n.buffer.name for n in walk(p) if isinstance(n, BufferLoad)} for p in pieces] == [{"P"}, {"Q"}, {"R"}]


def test_a_padding_select_is_cut_so_the_interior_has_none():
    from tilefuse.tensorir.expr import And, BufferLoad, Select
    A, out = Buffer("A", (6,), "float32"), Buffer("out", (9,), "float32")
    i = var("i")
    inside = And(i >= 2, i < 8, "bool")                           # two pads in front, one behind
    padded = Select(inside, BufferLoad(A, (i - 2,), "float32"), const(0.0), "float32")
    loop = For(i, const(0), const(9), "serial", BufferStore(out, padded, (i,)))
    text = str(simplify_stmt(partition_loops(loop)))
    assert "select" not in text and "A[i - 2]" in text
    f = build_prim_func(PrimFunc("pad", [A, out], simplify_stmt(partition_loops(loop))))
    a, got = np.arange(1, 7, dtype="float32"), np.full(9, np.nan, "float32")
    f(a, got)
    np.testing.assert_array_equal(got, np.pad(a, (2, 1)))


def test_a_window_over_padding_keeps_selects_only_at_the_borders():
    from tilefuse.tensorir.expr import And, BufferLoad, Select
    A, out = Buffer("A", (10,), "float32"), Buffer("out", (10,), "float32")
    i, k = var("i"), var("k")
    inside = And(i + k >= 1, i + k < 11, "bool")                   # out[i] = sum A[i + k - 1], k < 3
    read = Select(inside, BufferLoad(A, (i + k - 1,), "float32"), const(0.0), "float32")
    body = For(k, const(0), const(3), "serial",
               BufferStore(out, BufferLoad(out, (i,), "float32") + read, (i,)))
    loop = For(i, const(0), const(10), "serial", body)
    lowered = simplify_stmt(partition_loops(loop))
    assert "select" not in str(lowered)                            # the border taps are cut off too
    f = build_prim_func(PrimFunc("window", [A, out], lowered))
    a, got = np.arange(1, 11, dtype="float32"), np.zeros(10, "float32")
    f(a, got)
    np.testing.assert_array_equal(got, np.convolve(a, np.ones(3, "float32"), mode="same"))


def test_concat_pieces_compute_the_concatenation():
    buffers, loop = _concat_loop("serial")
    f = build_prim_func(PrimFunc("cat", buffers, simplify_stmt(partition_loops(loop))))
    rng = np.random.default_rng(0)
    p, q, r = (rng.standard_normal(b.shape).astype("float32") for b in buffers[:3])
    out = np.zeros((9, 5), "float32")
    f(p, q, r, out)
    np.testing.assert_array_equal(out, np.concatenate([p, q, r]))
