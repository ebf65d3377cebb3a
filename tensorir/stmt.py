"""Statement nodes of the loop IR and the function that holds them.

A lowered kernel is a ``PrimFunc`` over buffer and scalar parameters whose body is built from
``For`` loops (serial, parallel, vectorized, unrolled), ``BufferStore``, ``Prefetch``,
``Allocate``, ``IfThenElse``, ``LetStmt`` and ``SeqStmt``; the passes before code generation make parallel
loops ``ParallelFor``. ``str()`` prints readable pseudo-code.
"""
from __future__ import annotations

from dataclasses import dataclass

from .expr import Buffer, Expr, Var
from .node import Node

FOR_KINDS = ("serial", "parallel", "vectorized", "unrolled")


class Stmt(Node):
    """Base class of statements."""

    __slots__ = ()

    def __eq__(self, other):
        from .node import same
        return same(self, other)

    __hash__ = Node.__hash__

    def __str__(self):
        from .printer import stmt_str
        return stmt_str(self)

    __repr__ = __str__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class For(Stmt):
    """``for var in [min, min + extent)`` of the given kind."""
    var: Var
    min: Expr
    extent: Expr
    kind: str
    body: Stmt
    binders = ("var",)

    def __post_init__(self):
        if self.kind not in FOR_KINDS:
            raise ValueError(f"unknown loop kind {self.kind!r}; expected one of {FOR_KINDS}")


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ParallelFor(Stmt):
    """A parallel loop made explicit for code generation (``passes.outline_parallel_loops``):
    ``body`` runs for ``var`` in ``[min, min + extent)``, split into ranges that the thread
    pool's workers run. ``params`` (variables) and ``buffers`` are what the body reads from
    outside: the closure handed to the workers, in this order."""
    var: Var
    min: Expr
    extent: Expr
    body: Stmt
    params: tuple
    buffers: tuple
    binders = ("var",)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BufferStore(Stmt):
    """``buffer[indices] = value``."""
    buffer: Buffer
    value: Expr
    indices: tuple


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Prefetch(Stmt):
    """A hint that ``buffer[indices]`` will soon be read (or written, when ``write``): its cache
    line is fetched ahead, and nothing else changes. The address may lie outside the buffer
    (a prefetch never faults); in a vectorized loop every cache line the lanes span is fetched.
    ``level``: the cache it is fetched into, 1 (L1 and the levels below) or 2 (L2 and below:
    a line needed many iterations later, which in L1 would evict the lines needed now)."""
    buffer: Buffer
    indices: tuple
    write: bool = False
    level: int = 1


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Allocate(Stmt):
    """Memory for ``buffer`` that lives while ``body`` runs."""
    buffer: Buffer
    body: Stmt
    binders = ("buffer",)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class IfThenElse(Stmt):
    cond: Expr
    then_body: Stmt
    else_body: Stmt | None = None


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class LetStmt(Stmt):
    """Bind ``var`` to ``value`` in ``body``."""
    var: Var
    value: Expr
    body: Stmt
    binders = ("var",)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class SeqStmt(Stmt):
    """Statements run in order; the empty sequence is a no-op."""
    stmts: tuple


def seq(*stmts: Stmt) -> Stmt:
    """A sequence of statements, flattened, without no-ops; a single statement stays itself.

    Example:
        >>> seq() == SeqStmt(())
        True
    """
    flat = []
    for s in stmts:
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        elif s is not None:
            flat.append(s)
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))


def is_noop(s: Stmt) -> bool:
    """True for the empty sequence."""
    return isinstance(s, SeqStmt) and not s.stmts


@dataclass(frozen=True, slots=True)
class PrimFunc:
    """A kernel: named buffer and scalar-variable parameters and a loop-IR body."""
    name: str
    params: tuple  # of Buffer | Var
    body: Stmt

    def __str__(self):
        from .printer import func_str
        return func_str(self)
