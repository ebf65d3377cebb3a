"""Statement simplification: dead loops and decided branches disappear."""
from tilefuse.tensorir.expr import Buffer, const, var
from tilefuse.tensorir.passes import simplify_stmt
from tilefuse.tensorir.stmt import Allocate, For, IfThenElse, LetStmt, BufferStore, SeqStmt, seq

A = Buffer("A", (8,), "float32")


def test_provable_guard_is_removed():
    i = var("i")
    loop = For(i, const(0), const(8), "serial", IfThenElse(i < 8, BufferStore(A, const(0.0), (i,))))
    assert simplify_stmt(loop) == For(i, const(0), const(8), "serial", BufferStore(A, const(0.0), (i,)))


def test_false_guard_takes_the_else_branch():
    i = var("i")
    s = For(i, const(0), const(8), "serial",
            IfThenElse(i > 20, BufferStore(A, const(0.0), (i,)), BufferStore(A, const(1.0), (i,))))
    assert simplify_stmt(s) == For(i, const(0), const(8), "serial", BufferStore(A, const(1.0), (i,)))


def test_zero_extent_loop_and_empty_allocation_vanish():
    i = var("i")
    empty = For(i, const(0), const(0), "serial", BufferStore(A, const(0.0), (i,)))
    assert simplify_stmt(empty) == SeqStmt(())
    assert simplify_stmt(Allocate(Buffer("T", (4,), "float32"), empty)) == SeqStmt(())


def test_unit_loop_is_replaced_by_its_body():
    i = var("i")
    s = For(i, const(3), const(1), "vectorized", BufferStore(A, const(0.0), (i + 1,)))
    assert simplify_stmt(s) == BufferStore(A, const(0.0), (const(4),))


def test_let_value_range_proves_inner_guard():
    i, t = var("i"), var("t")
    s = For(i, const(0), const(4), "serial",
            LetStmt(t, i * 2, IfThenElse(t < 8, BufferStore(A, const(0.0), (t,)))))
    out = simplify_stmt(s)
    assert out == For(i, const(0), const(4), "serial", LetStmt(t, i * 2, BufferStore(A, const(0.0), (t,))))


def test_sequences_flatten():
    s = seq(SeqStmt(()), seq(BufferStore(A, const(0.0), (const(0),))), SeqStmt(()))
    assert simplify_stmt(s) == BufferStore(A, const(0.0), (const(0),))
