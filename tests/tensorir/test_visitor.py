"""tensorir.visitor: dispatch by class (and base class), the loop stack, rebuilding."""
import pytest

from tilefuse.tensorir import expr as E
from tilefuse.tensorir import stmt as S
from tilefuse.tensorir.codegen.llvm import CodeGen, CodegenError
from tilefuse.tensorir.expr import Buffer, const, var
from tilefuse.tensorir.visitor import Mutator, Visitor

A = Buffer("A", (4, 8), "float32")


def _nest():
    i, j = var("i"), var("j")
    store = S.BufferStore(A, E.BufferLoad(A, (i, j), "float32") * 2.0 + 1.0, (i, j))
    return S.For(i, const(0), const(4), "parallel", S.For(j, const(0), const(8), "vectorized", store))


def test_methods_are_found_by_class_then_by_base_class():
    seen = []

    class Kinds(Visitor):
        def visit_BinaryOp(self, e):
            seen.append(type(e).__name__)
            self.generic_visit(e)

        def visit_Mul(self, e):
            seen.append("mul!")
            self.generic_visit(e)
    Kinds().visit(_nest())
    assert seen == ["Add", "mul!"]


def test_the_loop_stack_holds_the_enclosing_loops_outermost_first():
    stacks = []

    class Stacks(Visitor):
        def visit_BufferStore(self, s):
            stacks.append([(lp.var.name, lp.kind) for lp in self.loops])
    v = Stacks()
    v.visit(_nest())
    assert stacks == [[("i", "parallel"), ("j", "vectorized")]] and v.loops == []


def test_the_loop_stack_is_unwound_when_a_visit_raises():
    class Boom(Visitor):
        def visit_BufferStore(self, s):
            raise RuntimeError("boom")
    v = Boom()
    with pytest.raises(RuntimeError):
        v.visit(_nest())
    assert v.loops == []


def test_a_mutator_rebuilds_only_what_changed_and_never_its_input():
    nest = _nest()

    class Kinds(Mutator):
        def visit_For(self, loop):
            rebuilt = super().visit_For(loop)
            return S.For(rebuilt.var, rebuilt.min, rebuilt.extent, "serial", rebuilt.body)
    out = Kinds().visit(nest)
    assert [nest.kind, nest.body.kind] == ["parallel", "vectorized"]
    assert [out.kind, out.body.kind] == ["serial", "serial"]
    assert Mutator().visit(nest) is nest


def test_codegen_refuses_a_node_it_has_no_translation_for():
    class Odd(S.Stmt):
        pass
    f = S.PrimFunc("odd", (A,), S.SeqStmt((Odd(),)))
    with pytest.raises(CodegenError, match="cannot emit a Odd node"):
        CodeGen(f)


def test_walk_distinct_visits_a_shared_subtree_once_and_free_vars_stays_in_order_of_first_use():
    from tilefuse.tensorir.expr import Buffer, BufferLoad, const, var
    from tilefuse.tensorir.stmt import BufferStore, LetStmt, seq
    from tilefuse.tensorir.walk import free_vars, walk, walk_distinct
    A = Buffer("A", (8,), "float32")
    i, n, m = var("i"), var("n"), var("m")
    body = BufferStore(A, BufferLoad(A, (i + n,), "float32"), (i + m,))     # shared by both copies
    copies = seq(LetStmt(i, const(0), body), LetStmt(i, const(1), body))
    assert len(list(walk(copies))) > len(list(walk_distinct(copies)))
    assert len({id(x) for x in walk(copies)}) == len(list(walk_distinct(copies)))
    assert [v.name for v in free_vars(copies)] == ["n", "m"]      # the store's value, then its index
