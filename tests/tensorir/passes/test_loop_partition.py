"""Loop partitioning: before/after IR, and the numbers stay right."""
import numpy as np

from tensorir.codegen import build_prim_func
from tensorir.expr import Buffer, const, var
from tensorir.passes import partition_loops, simplify_stmt
from tensorir.stmt import For, IfThenElse, PrimFunc, BufferStore, seq
from tensorir.visit import walk


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
