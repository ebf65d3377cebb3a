"""The loop-IR verifier: each invariant, a hand-built IR that breaks it (refused, with the
message) beside one that keeps it (accepted); the IR of real schedules after every pass; the
pipeline naming the pass after which the IR broke."""
import pytest

from tilefuse.schedule import build, create_schedule, lower, template_for
from tilefuse.tensorir import compute, placeholder, reduce_axis
from tilefuse.tensorir import sum as rsum
from tilefuse.tensorir.errors import IRVerifyError, LoweringError
from tilefuse.tensorir.expr import Add, Buffer, BufferLoad, Cast, Const, Ramp, TensorLoad, const, var
from tilefuse.tensorir.passes import simplify_stmt
from tilefuse.tensorir.pipeline import CODEGEN_PASSES, run_passes
from tilefuse.tensorir.stmt import (Allocate, BufferStore, For, IfThenElse, LetStmt, ParallelFor, Prefetch, PrimFunc,
                                    SeqStmt)
from tilefuse.tensorir.verify import enabled, verify

A = Buffer("A", (8,), "float32")
i, j, n = var("i"), var("j"), var("n")


def loop(body, v=i, kind="serial", extent=const(8)):
    return For(v, const(0), extent, kind, body)


def func(body, *params):
    return PrimFunc("f", params or (A,), body)


def refused(ir, message, **kw):
    with pytest.raises(IRVerifyError, match=message):
        verify(ir, **kw)


def test_a_variable_read_must_be_bound():
    refused(func(loop(BufferStore(A, const(0.0), (j,)))), r"variable j is read but not bound")
    verify(func(loop(loop(BufferStore(A, const(0.0), (j,)), j))))
    verify(func(loop(BufferStore(A, const(0.0), (n,))), A, n))       # a scalar parameter
    verify(loop(BufferStore(A, const(0.0), (j,))))                     # a bare statement: j is its parameter


def test_a_variable_is_bound_once_where_it_stands():
    refused(func(loop(loop(BufferStore(A, const(0.0), (i,))))), r"loop binds i, which is already bound here")
    refused(func(loop(LetStmt(i, const(1), BufferStore(A, const(0.0), (i,))))), r"let binds i")
    refused(func(loop(BufferStore(A, const(0.0), (n,)), n), A, n), r"loop binds n")
    verify(func(SeqStmt((loop(BufferStore(A, const(0.0), (i,))), loop(BufferStore(A, const(1.0), (i,)))))))


def test_a_prefetch_fetches_into_l1_or_l2():
    refused(func(loop(Prefetch(A, (i,), level=3))), r"a prefetch of A into cache level 3: 1 or 2")
    verify(func(loop(SeqStmt((Prefetch(A, (i,)), Prefetch(A, (i,), True, 2))))))


def test_loop_bounds_are_integers_of_the_variable_dtype():
    refused(func(loop(BufferStore(A, const(0.0), (i,)), extent=const(8.0))),
            r"loop i: variable, start and extent must be integers of one dtype, got int64, int64 and float32")
    refused(func(loop(BufferStore(A, const(0.0), (const(0),)), v=var("x", "float32"))), r"loop x")
    refused(func(loop(BufferStore(A, const(0.0), (const(0),)), extent=const(8, "int32"))), r"int32")


def test_vectorized_and_unrolled_loops_have_constant_extents():
    for kind in ("vectorized", "unrolled"):
        bad = func(loop(BufferStore(A, const(0.0), (i,)), kind=kind, extent=n), A, n)
        refused(bad, rf"loop i is {kind} but its extent n is not a constant")
        verify(bad, constant_extents=False)
        verify(func(loop(BufferStore(A, const(0.0), (i,)), kind=kind)))


def test_the_loop_kinds_a_pass_removed_stay_gone():
    for kind in ("unrolled", "parallel", "vectorized"):
        ir = func(loop(BufferStore(A, const(0.0), (i,)), kind=kind))
        refused(ir, rf"loop i is {kind}, but a pass already run leaves no {kind} loop", gone=(kind,), after="p")
        verify(ir, gone=tuple({"unrolled", "parallel", "vectorized"} - {kind}))
    B = Buffer("B", (8, 8), "float32")
    nested = func(loop(loop(BufferStore(B, const(0.0), (i, j)), j, "vectorized"), kind="vectorized"), B)
    refused(nested, r"loop j is vectorized inside another vectorized loop", gone=("nested vectorized",))
    verify(nested)
    with pytest.raises(ValueError, match="gone names"):
        verify(nested, gone=("serial",))


def test_a_vector_region_is_not_opened_inside_another():
    B = Buffer("B", (8, 8), "float32")
    inner = LetStmt(j, Ramp(const(0), 1, 8, "int64"), BufferStore(B, const(0.0), (i, j)))
    refused(func(LetStmt(i, Ramp(const(0), 1, 8, "int64"), inner), B), r"let j opens a vector region inside that of i")
    verify(func(loop(inner), B))


def test_buffers_are_parameters_or_allocated_around():
    T = Buffer("T", (8,), "float32", scope="local")
    store = loop(BufferStore(T, BufferLoad(A, (i,), "float32"), (i,)))
    refused(func(store), r"buffer T is stored to but is neither a parameter nor allocated around")
    verify(func(Allocate(T, store)))
    refused(func(SeqStmt((Allocate(T, SeqStmt(())), store))), r"buffer T is stored to")  # used outside its allocation
    refused(func(Allocate(A, SeqStmt(()))), r"buffer A is allocated where it is already a parameter")
    verify(func(SeqStmt((Allocate(T, store), Allocate(T, store)))))   # siblings: a partitioned loop's pieces
    load = loop(BufferStore(A, BufferLoad(T, (i,), "float32"), (i,)))
    refused(func(load), r"buffer T is loaded but")


def test_one_buffer_id_is_one_buffer():
    other = Buffer("A2", (16,), "float32", uid=A.uid)
    refused(func(loop(BufferStore(other, const(0.0), (i,)))), r"buffer A2 \(float32\[16\]\) has the id of A \(float32\[8\]\)")


def test_stores_and_loads_have_their_buffer_dtype():
    refused(func(loop(BufferStore(A, const(0), (i,)))), r"a int64 value is stored to A, a float32 buffer")
    refused(func(loop(BufferStore(A, Cast(BufferLoad(A, (i,), "float64"), "float32"), (i,)))),
            r"the load A\[i\] is typed float64, its buffer float32")
    verify(func(loop(BufferStore(A, BufferLoad(A, (i,), "float32"), (i,)))))


def test_indices_are_integers_one_per_dimension():
    refused(func(loop(BufferStore(A, const(0.0), (i, i)))), r"A has 1 dimensions but is indexed by 2")
    refused(func(loop(BufferStore(A, BufferLoad(A, (), "float32"), (i,)))), r"indexed by 0")
    x = var("x", "float32")
    refused(func(loop(BufferStore(A, const(0.0), (x,))), A, x), r"index x of A is a float32")


def test_conditions_are_bool_and_operands_agree():
    refused(func(loop(IfThenElse(i + 1, BufferStore(A, const(0.0), (i,))))), r"the condition i \+ 1 is a int64")
    verify(func(loop(IfThenElse(i < 4, BufferStore(A, const(0.0), (i,))))))
    refused(func(loop(BufferStore(A, const(0.0), (Add(i, Const(1, "int32"), "int64"),)))),
            r"operands of i \+ int32\(1\) are int64 and int32")


def test_a_let_value_has_its_variable_dtype():
    x = var("x", "float32")
    refused(func(LetStmt(x, const(1), BufferStore(A, x, (const(0),)))), r"let x \(float32\) is bound to a int64 value")
    verify(func(LetStmt(x, const(1.0), BufferStore(A, x, (const(0),)))))


def test_a_parallel_for_reads_only_its_closure():
    s = var("s", "float32")
    body = BufferStore(A, s, (i,))
    refused(func(ParallelFor(i, const(0), const(8), body, (), (A,)), A, s),
            r"variable s is read in parallel_for i but is not in its closure")
    refused(func(ParallelFor(i, const(0), const(8), body, (s,), ()), A, s),
            r"buffer A is stored to in parallel_for i but is not in its closure")
    verify(func(ParallelFor(i, const(0), const(8), body, (s,), (A,)), A, s))
    refused(func(ParallelFor(i, const(0), const(8), body, (s,), (A,)), A),    # the closure reads from outside
            r"variable s is read but not bound")
    inner = ParallelFor(j, const(0), const(8), BufferStore(A, s, (j,)), (s,), (A,))
    refused(func(ParallelFor(i, const(0), const(8), inner, (s,), (A,)), A, s), r"parallel_for j is inside parallel_for i")


def test_algorithm_nodes_do_not_reach_loop_ir():
    X = placeholder((8,), name="X")
    refused(func(loop(BufferStore(A, TensorLoad(X, (i,), "float32"), (i,)))), r"TensorLoad X\[i\] is an algorithm node")


def test_a_message_names_the_function_the_pass_and_the_statement():
    with pytest.raises(IRVerifyError) as err:
        verify(func(loop(BufferStore(A, const(0.0), (j,)))), after="partition_loops")
    assert str(err.value) == ("loop IR of f after partition_loops: variable j is read but not bound "
                              "(not a parameter, loop or let)\n  in: A[j] = 0f")


def _drops_the_outer_loop(body):
    """A broken pass: the loop goes, its body stays (its variable unbound)."""
    return body.body if isinstance(body, For) else body


def test_the_pipeline_names_the_pass_after_which_the_ir_broke(monkeypatch):
    ir = func(loop(BufferStore(A, const(0.0), (i,))))
    with pytest.raises(IRVerifyError, match=r"loop IR of f after _drops_the_outer_loop: variable i is read"):
        run_passes(ir, passes=(simplify_stmt, _drops_the_outer_loop), verify=True)
    run_passes(ir, passes=(simplify_stmt, _drops_the_outer_loop), verify=False)      # off: not checked
    monkeypatch.setenv("TILEFUSE_VERIFY", "0")
    assert not enabled()
    run_passes(ir, passes=(_drops_the_outer_loop,))
    monkeypatch.setenv("TILEFUSE_VERIFY", "1")
    with pytest.raises(IRVerifyError):
        run_passes(ir, passes=(_drops_the_outer_loop,))
    with pytest.raises(IRVerifyError, match=r"after nothing \(the pipeline's input\)"):
        run_passes(func(loop(BufferStore(A, const(0.0), (j,)))), passes=())


def test_a_symbolic_vectorized_extent_still_gets_the_passes_own_error():
    ir = func(loop(BufferStore(A, const(0.0), (i,)), kind="vectorized", extent=n), A, n)
    with pytest.raises(LoweringError, match="extent n is not a constant"):
        run_passes(run_passes(ir, verify=True), CODEGEN_PASSES, verify=True)


def test_the_suite_runs_with_verification_on():
    assert enabled()


def _schedules():
    A_, B_ = placeholder((64, 64), name="A"), placeholder((64, 64), name="B")
    r = reduce_axis((0, 64), name="r")
    C_ = compute((64, 64), lambda a, b: rsum(A_[a, r] * B_[r, b], axis=r), name="C")
    s = create_schedule(C_)
    io, jo, ii, ji = s[C_].tile(*s[C_].op.axis, 8, 16)
    s[C_].reorder(io, jo, r, ii, ji); s[C_].unroll(ii); s[C_].vectorize(ji); s[C_].parallel(io)
    yield "matmul, tiled", s, [A_, B_, C_]
    t = template_for(C_)
    yield "matmul, complex template", t.apply(t.default_config()), [A_, B_, C_]
    X = placeholder((10, 30), name="X")
    Y = compute((10, 30), lambda a, b: X[a, b] * 2.0, name="Y")
    Z = compute((10, 30), lambda a, b: Y[a, b] + 1.0, name="Z")
    s = create_schedule(Z)
    zo, zi = s[Z].split(Z.op.axis[1], factor=8)                     # a guarded tail, partitioned
    s[Y].compute_at(s[Z], zo); s[Z].vectorize(zi); s[Z].parallel(Z.op.axis[0])
    yield "elementwise, compute_at and a tail", s, [X, Z]


@pytest.mark.parametrize("name", ["matmul, tiled", "matmul, complex template", "elementwise, compute_at and a tail"])
def test_the_ir_of_real_schedules_verifies_after_every_pass(name):
    s, args = next((s, args) for n, s, args in _schedules() if n == name)
    lowered = lower(s, args)                                          # LOWERING_PASSES, verified (enabled())
    verify(lowered)
    final = run_passes(lowered, CODEGEN_PASSES, verify=True)          # verified after each pass
    verify(final, gone=("unrolled", "nested vectorized", "parallel", "vectorized"))
    assert "parallel_for" in str(final) and "ramp(" in str(final)
    build(s, args)
