"""The loop-IR verifier: the invariants the loop passes and code generation rely on, checked on
a ``PrimFunc`` (or a bare statement). ``tensorir.pipeline.run_passes`` runs it on its input and
after every pass when verification is on (``TILEFUSE_VERIFY=1``; the test suite turns it on,
users get it off), so an error names the pass that broke the IR.

What it checks:

* scope: every variable read is bound (a scalar parameter, an enclosing loop or let; in a
  ``ParallelFor``, its closure or a binder inside it), and no binder binds a variable that is
  already bound where it stands; every buffer loaded, stored or prefetched is a parameter or
  allocated around the access (in a ``ParallelFor``, one of its closure's buffers or allocated
  inside), the same buffer (shape, dtype) wherever its id appears, and not allocated where it
  is already a parameter or allocated (siblings may allocate it: a partitioned loop's pieces);
* types: loop variables, starts and extents are integers of one dtype; a let's value has its
  variable's dtype; a store's value and a load have their buffer's dtype; indices are integers,
  one per dimension of the buffer; a condition is a bool; both sides of an arithmetic or
  comparison node share a dtype;
* loop-IR nodes only: no ``TensorLoad`` or ``Reduce`` (algorithm nodes that lowering removes);
* loop kinds: a vectorized or unrolled loop has a constant extent (``unroll_loops`` and
  ``vectorize_loops`` need it; the pipeline checks this only when its input had it, so a
  schedule with a symbolic vectorized extent still gets the passes' own ``LoweringError``);
  loop kinds that a pass already run removes are gone (``gone``: ``"unrolled"``,
  ``"parallel"``, ``"vectorized"``, and ``"nested vectorized"``, a vectorized loop inside
  another); a ``ParallelFor`` is not inside another or inside a vectorized loop; a
  ramp-bound variable (a vector region) is not bound inside another vector region.

For a bare statement the variables and buffers it reads from outside are taken as its
parameters (except inside a ``ParallelFor``, whose closure is checked all the same).

Example:
    >>> from tilefuse.tensorir.expr import Buffer, const, var
    >>> from tilefuse.tensorir.stmt import BufferStore, For, PrimFunc
    >>> A = Buffer("A", (4,), "float32"); i, j = var("i"), var("j")
    >>> verify(PrimFunc("ok", (A,), For(i, const(0), const(4), "serial", BufferStore(A, const(0.0), (i,)))))
    >>> verify(PrimFunc("bad", (A,), For(i, const(0), const(4), "serial", BufferStore(A, const(0.0), (j,)))),
    ...        after="partition_loops")
    Traceback (most recent call last):
    ...
    tilefuse.tensorir.errors.IRVerifyError: loop IR of bad after partition_loops: variable j is read but not bound (not a parameter, loop or let)
      in: A[j] = 0f
"""
from __future__ import annotations

import os

from . import dtype as dt
from . import expr as E
from . import stmt as S
from .errors import IRVerifyError
from .visitor import Visitor
from .walk import walk_distinct

LOOP_KINDS_GONE = ("unrolled", "parallel", "vectorized", "nested vectorized")
"""What ``gone`` may name: loop kinds, and vectorized loops inside vectorized ones."""


def enabled(verify: bool | None = None) -> bool:
    """Whether the pipeline verifies: ``verify`` when given, else the environment variable
    ``TILEFUSE_VERIFY`` (``1``, ``true``, ``yes`` or ``on``; off by default).

    Example:
        >>> enabled(True), enabled(False)
        (True, False)
    """
    if verify is not None:
        return bool(verify)
    return os.environ.get("TILEFUSE_VERIFY", "").strip().lower() in ("1", "true", "yes", "on")


def verify(ir, *, after: str | None = None, gone=(), constant_extents: bool = True) -> None:
    """Check the invariants above on ``ir`` (a ``PrimFunc`` or a statement); IRVerifyError
    naming ``after`` (the pass just run) and the statement at fault, else None.

    Example:
        >>> from tilefuse.tensorir.expr import Buffer, const, var
        >>> from tilefuse.tensorir.stmt import BufferStore, For
        >>> A = Buffer("A", (4,), "float32"); i = var("i")
        >>> verify(For(i, const(0), const(4), "unrolled", BufferStore(A, const(0.0), (i,))),
        ...        after="unroll_loops", gone=("unrolled",))
        Traceback (most recent call last):
        ...
        tilefuse.tensorir.errors.IRVerifyError: loop IR after unroll_loops: loop i is unrolled, but a pass already run leaves no unrolled loop
          in: unrolled (i, 0, 4) { ...
    """
    _check(ir, after, gone, constant_extents)


def has_constant_extents(body: S.Stmt) -> bool:
    """Whether every vectorized and unrolled loop of ``body`` has a constant extent.

    Example:
        >>> from tilefuse.tensorir.expr import Buffer, const, var
        >>> from tilefuse.tensorir.stmt import BufferStore, For
        >>> A = Buffer("A", (4,), "float32"); i, n = var("i"), var("n")
        >>> has_constant_extents(For(i, const(0), n, "vectorized", BufferStore(A, const(0.0), (i,))))
        False
    """
    from .walk import statements
    return all(not isinstance(s, S.For) or s.kind not in ("vectorized", "unrolled") or isinstance(s.extent, E.Const)
               for s in statements(body))


def _check(ir, after, gone, constant_extents) -> None:
    checker = _Checker(ir, gone, constant_extents)
    try:
        checker.run()
    except _Broken as broken:
        name = f" of {ir.name}" if isinstance(ir, S.PrimFunc) else ""
        when = f" after {after}" if after else ""
        where = "" if checker.where is None else f"\n  in: {_excerpt(checker.where)}"
        raise IRVerifyError(f"loop IR{name}{when}: {broken}{where}") from None


class _Broken(Exception):
    """An invariant that does not hold (made an IRVerifyError with its context)."""


def _excerpt(stmt: S.Stmt) -> str:
    lines = str(stmt).splitlines()
    return lines[0][:200] + (" ..." if len(lines) > 2 else "") if lines else ""


class _Checker(Visitor):
    """Statements are visited with the variables (uid -> Var) and buffers (uid -> Buffer) in
    scope; each distinct expression object is scanned once for what it reads."""

    def __init__(self, ir, gone, constant_extents):
        super().__init__()
        unknown = set(gone) - set(LOOP_KINDS_GONE)
        if unknown:
            raise ValueError(f"gone names {sorted(unknown)}; expected some of {LOOP_KINDS_GONE}")
        self.gone, self.constant_extents = frozenset(gone), constant_extents
        self.where = None                 # the statement being checked
        self.vars: dict = {}
        self.buffers: dict = {}
        self.open = not isinstance(ir, S.PrimFunc)
        self.vector = 0                   # depth of vectorized loops around
        self.ramp = None                  # the variable of the vector region around, if any
        self.parallel = None              # the ParallelFor around, if any
        self._reads: dict = {}            # id(expr) -> (expr, variables, buffers) it reads
        if isinstance(ir, S.PrimFunc):
            for p in ir.params:
                if isinstance(p, E.Buffer):
                    self.buffers[p.uid] = p
                elif isinstance(p, E.Var):
                    self.vars[p.uid] = p
                else:
                    raise _Broken(f"parameter {p!r} is neither a Buffer nor a Var")
            self.body = ir.body
        elif isinstance(ir, S.Stmt):
            self.body = ir
        else:
            raise TypeError(f"verify takes a PrimFunc or a statement, got {type(ir).__name__}")

    def run(self):
        self.visit(self.body)

    # ---------------------------------------------------------------- expressions
    def _reads_of(self, e: E.Expr):
        hit = self._reads.get(id(e))
        if hit is None:
            hit = self._reads[id(e)] = (e, *_scan(e))
        return hit

    def read(self, e: E.Expr) -> None:
        """Everything ``e`` reads is in scope."""
        _, variables, buffers = self._reads_of(e)
        for v in variables:
            self._need_var(v)
        for b in buffers:
            self._need_buffer(b, "loaded")

    def _need_var(self, v: E.Var) -> None:
        if v.uid not in self.vars:
            self._missing(f"variable {v.name} is read", "bound", "not bound (not a parameter, loop or let)")

    def _need_buffer(self, b: E.Buffer, how: str) -> None:
        known = self.buffers.get(b.uid)
        if known is None:
            self._missing(f"buffer {b.name} is {how}", "allocated", "is neither a parameter nor allocated around")
            return
        if known is not b and known != b:
            raise _Broken(f"buffer {b.name} ({b.dtype}{list(b.shape)}) has the id of "
                          f"{known.name} ({known.dtype}{list(known.shape)})")

    def _missing(self, what: str, inside: str, outside: str) -> None:
        """Something read that is not in scope: fine at the top of a bare statement (one of
        its parameters), else broken."""
        if self.parallel is not None:
            raise _Broken(f"{what} in parallel_for {self.parallel.var.name} but is not in its closure "
                          f"nor {inside} inside it")
        if not self.open:
            raise _Broken(f"{what} but {outside}")

    def _indices(self, b: E.Buffer, indices) -> None:
        _check_indices(b, indices)
        for i in indices:
            self.read(i)

    # ---------------------------------------------------------------- binding
    def _bind(self, v: E.Var, what: str):
        if not isinstance(v, E.Var):
            raise _Broken(f"{what} binds {v!r}, not a Var")
        if v.uid in self.vars:
            raise _Broken(f"{what} binds {v.name}, which is already bound here")
        self.vars[v.uid] = v

    def _index_dtypes(self, v: E.Var, lo: E.Expr, extent: E.Expr, what: str):
        if not dt.is_int(v.dtype) or lo.dtype != v.dtype or extent.dtype != v.dtype:
            raise _Broken(f"{what} {v.name}: variable, start and extent must be integers of one dtype, "
                          f"got {v.dtype}, {lo.dtype} and {extent.dtype}")

    # ---------------------------------------------------------------- statements
    def generic_visit(self, node, *args):
        self.where = node
        raise _Broken(f"{type(node).__name__} is not a loop-IR statement")

    def visit_SeqStmt(self, s):
        for c in s.stmts:
            self.visit(c)

    def visit_For(self, s):
        self.where = s
        self._index_dtypes(s.var, s.min, s.extent, "loop")
        self.read(s.min)
        self.read(s.extent)
        nested = s.kind == "vectorized" and self.vector > 0
        if s.kind in self.gone or (nested and "nested vectorized" in self.gone):
            what = "vectorized inside another vectorized loop" if nested and s.kind not in self.gone else s.kind
            raise _Broken(f"loop {s.var.name} is {what}, but a pass already run leaves no "
                          f"{'such' if what != s.kind else s.kind} loop")
        if s.kind == "vectorized" and self.ramp is not None:
            raise _Broken(f"loop {s.var.name} is vectorized inside the vector region of {self.ramp.name}")
        if self.constant_extents and s.kind in ("vectorized", "unrolled") and not isinstance(s.extent, E.Const):
            raise _Broken(f"loop {s.var.name} is {s.kind} but its extent {s.extent} is not a constant")
        self._bind(s.var, "loop")
        self.vector += s.kind == "vectorized"
        with self.inside(s):
            self.visit(s.body)
        self.vector -= s.kind == "vectorized"
        del self.vars[s.var.uid]

    def visit_ParallelFor(self, s):
        self.where = s
        if self.parallel is not None:
            raise _Broken(f"parallel_for {s.var.name} is inside parallel_for {self.parallel.var.name}")
        if self.vector or self.ramp is not None:
            raise _Broken(f"parallel_for {s.var.name} is inside a vectorized loop")
        self._index_dtypes(s.var, s.min, s.extent, "parallel_for")
        self.read(s.min)
        self.read(s.extent)
        for v in s.params:
            self._need_var(v)
        for b in s.buffers:
            self._need_buffer(b, "in the closure")
        outer = self.vars, self.buffers
        if s.var.uid in self.vars:
            raise _Broken(f"parallel_for binds {s.var.name}, which is already bound here")
        self.vars = {v.uid: v for v in s.params}
        self.vars[s.var.uid] = s.var
        self.buffers = {b.uid: b for b in s.buffers}
        self.parallel = s
        with self.inside(s):
            self.visit(s.body)
        self.parallel = None
        self.vars, self.buffers = outer

    def visit_LetStmt(self, s):
        self.where = s
        self.read(s.value)
        if s.value.dtype != s.var.dtype:
            raise _Broken(f"let {s.var.name} ({s.var.dtype}) is bound to a {s.value.dtype} value")
        ramp = isinstance(s.value, E.Ramp)
        if ramp and (self.ramp is not None or self.vector):
            raise _Broken(f"let {s.var.name} opens a vector region inside "
                          f"{'that of ' + self.ramp.name if self.ramp is not None else 'a vectorized loop'}")
        self._bind(s.var, "let")
        outer = self.ramp
        if ramp:
            self.ramp = s.var
        self.visit(s.body)
        self.ramp = outer
        del self.vars[s.var.uid]

    def visit_Allocate(self, s):
        self.where = s
        b = s.buffer
        if b.uid in self.buffers:
            raise _Broken(f"buffer {b.name} is allocated where it is already a parameter or allocated")
        self.buffers[b.uid] = b
        self.visit(s.body)
        del self.buffers[b.uid]

    def visit_BufferStore(self, s):
        self.where = s
        self._need_buffer(s.buffer, "stored to")
        if s.value.dtype != s.buffer.dtype:
            raise _Broken(f"a {s.value.dtype} value is stored to {s.buffer.name}, a {s.buffer.dtype} buffer")
        self._indices(s.buffer, s.indices)
        self.read(s.value)

    def visit_Prefetch(self, s):
        self.where = s
        if s.level not in (1, 2):
            raise _Broken(f"a prefetch of {s.buffer.name} into cache level {s.level}: 1 or 2")
        self._need_buffer(s.buffer, "prefetched")
        self._indices(s.buffer, s.indices)

    def visit_IfThenElse(self, s):
        self.where = s
        if s.cond.dtype != "bool":
            raise _Broken(f"the condition {s.cond} is a {s.cond.dtype}, not a bool")
        self.read(s.cond)
        self.visit(s.then_body)
        if s.else_body is not None:
            self.visit(s.else_body)


def _check_indices(b: E.Buffer, indices) -> None:
    if len(indices) != len(b.shape):
        raise _Broken(f"{b.name} has {len(b.shape)} dimensions but is indexed by {len(indices)}")
    for i in indices:
        if not dt.is_int(i.dtype):
            raise _Broken(f"index {i} of {b.name} is a {i.dtype}, not an integer")


def _scan(e: E.Expr) -> tuple[list, list]:
    """The variables and buffers ``e`` reads (each distinct node once), checking its nodes."""
    variables, buffers = {}, {}
    for n in walk_distinct(e):
        cls = type(n)
        if cls is E.Var or cls is E.IterVar:
            variables[n.uid] = n
        elif cls is E.BufferLoad:
            if n.dtype != n.buffer.dtype:
                raise _Broken(f"the load {n} is typed {n.dtype}, its buffer {n.buffer.dtype}")
            _check_indices(n.buffer, n.indices)
            buffers[n.buffer.uid] = n.buffer
        elif isinstance(n, E.BinaryOp):
            if n.a.dtype != n.b.dtype:
                raise _Broken(f"the operands of {n} are {n.a.dtype} and {n.b.dtype}")
        elif cls is E.Select:
            if n.cond.dtype != "bool" or n.true_value.dtype != n.dtype or n.false_value.dtype != n.dtype:
                raise _Broken(f"the select {n} has a {n.cond.dtype} condition and {n.true_value.dtype} and "
                              f"{n.false_value.dtype} sides for a {n.dtype} value")
        elif cls is E.TensorLoad or cls is E.Reduce:
            raise _Broken(f"{cls.__name__} {n} is an algorithm node; lowering leaves none in loop IR")
    return list(variables.values()), list(buffers.values())
