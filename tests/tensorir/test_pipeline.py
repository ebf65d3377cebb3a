"""The loop pipeline: its passes in order, and what a guarded loop becomes (before/after)."""
from tilefuse.schedule import create_schedule, lower
from tilefuse.tensorir import compute, placeholder
from tilefuse.tensorir.expr import Buffer, const, var
from tilefuse.tensorir.node import same
from tilefuse.tensorir.passes import partition_loops, simplify_stmt
from tilefuse.tensorir.pipeline import LOWERING_PASSES, run_passes
from tilefuse.tensorir.stmt import BufferStore, For, IfThenElse


def test_the_passes_in_order():
    assert LOWERING_PASSES == (simplify_stmt, partition_loops, simplify_stmt)


def test_a_guarded_loop_loses_its_guard():
    A = Buffer("A", (10,), "float32")
    i = var("i")
    before = For(i, const(0), const(10), "serial",
                 IfThenElse(i < const(7), BufferStore(A, const(1.0) + const(1.0), (i,))))
    after = For(i, const(0), const(7), "serial", BufferStore(A, const(2.0), (i,)))
    assert same(run_passes(before), after)
    assert run_passes(before, passes=()) is before


def test_lower_runs_the_pipeline():
    A = placeholder((10,), name="A")
    B = compute((10,), lambda i: A[i] * 2.0, name="B")
    s = create_schedule(B)
    _, inner = s[B].split(B.op.axis[0], factor=4)     # 10 = 2*4 + 2: a guarded tail
    text = str(lower(s, [A, B]))
    assert "if" not in text, text                     # the guard became a main loop and a tail
    assert "for (i.outer, 0, 2)" in text and "B[i.inner + 8]" in text
