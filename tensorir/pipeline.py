"""The loop pipeline: the passes a lowered loop nest goes through before code generation, in
order. Each is a plain function from statement to statement that never changes its input.

1. ``simplify_stmt``: fold constants, drop dead branches and empty loops;
2. ``partition_loops``: split loops at their guards, so the main body has none and the
   guards stay in the tails;
3. ``simplify_stmt`` again: the partitioned pieces simplify further.

``lower`` returns the loop nest after these (what the tuner's features and the printer see).
Code generation first runs ``CODEGEN_PASSES``, which turn loop kinds into explicit structure:

1. ``unroll_loops``: unrolled loops (and vectorized loops inside vectorized ones) become
   their copies, each with the loop variable bound by a let;
2. ``outline_parallel_loops``: each outermost parallel loop becomes a ``ParallelFor`` naming
   its closure; nested parallel loops run serially;
3. ``vectorize_loops``: each vectorized loop becomes its body under ``let var = ramp(min, 1,
   lanes)``; code generation emits what depends on a ramp on vectors.

Code generation only translates: it refuses unrolled, parallel and vectorized loops.

``run_passes`` takes a ``PrimFunc`` (or a bare statement) and two switches. ``trace`` prints a
line per pass on stderr, its milliseconds and the statements before and after, and at level 2
the IR after each pass (``tensorir.trace``; default from ``TILEFUSE_TRACE``). ``verify`` runs
``tensorir.verify`` on the input and after each pass (default from ``TILEFUSE_VERIFY``, which
the test suite sets), so broken IR is refused with the name of the pass that broke it.

Example:
    >>> from tilefuse.tensorir.expr import Buffer, const, var
    >>> from tilefuse.tensorir.stmt import BufferStore, For
    >>> A = Buffer("A", (4,), "float32"); i = var("i")
    >>> loop = For(i, const(0), const(4), "serial", BufferStore(A, const(1.0) + const(1.0), (i,)))
    >>> [p.__name__ for p in LOWERING_PASSES]
    ['simplify_stmt', 'partition_loops', 'simplify_stmt']
    >>> print(run_passes(loop))
    for (i, 0, 4) {
      A[i] = 2f
    }
"""
from __future__ import annotations

import threading

from . import stmt as S
from . import trace as T
from . import verify as V
from .passes import outline_parallel_loops, partition_loops, simplify_stmt, unroll_loops, vectorize_loops
from .walk import statements

LOWERING_PASSES = (simplify_stmt, partition_loops, simplify_stmt)
"""The passes between lowering and code generation, in order."""

CODEGEN_PASSES = (unroll_loops, outline_parallel_loops, vectorize_loops)
"""The passes code generation runs first, in order: loop kinds made explicit."""

LEAVES_NONE = {unroll_loops: ("unrolled", "nested vectorized"), outline_parallel_loops: ("parallel",),
               vectorize_loops: ("vectorized",)}
"""The loop kinds a pass leaves none of (``tensorir.verify``'s ``gone``): once it has run, the
verifier refuses them after every later pass of the same run."""


def run_passes(ir, passes=LOWERING_PASSES, *, trace=None, verify=None):
    """``ir`` (a ``PrimFunc``, or a statement) after each of ``passes`` in order; a PrimFunc
    comes back as a PrimFunc with the new body. ``trace``: see ``tensorir.trace`` (None reads
    ``TILEFUSE_TRACE``); ``verify``: check the input and the IR after each pass (None reads
    ``TILEFUSE_VERIFY``).

    Example:
        >>> from tilefuse.tensorir.stmt import SeqStmt
        >>> run_passes(SeqStmt(()), passes=()) == SeqStmt(())
        True
    """
    func = ir if isinstance(ir, S.PrimFunc) else None
    body = ir.body if func is not None else ir
    check = None
    if V.enabled(verify):
        check = _Checks(func, body)
    passes = tuple(passes)
    pipeline = {LOWERING_PASSES: "lower", CODEGEN_PASSES: "codegen"}.get(passes, "loop")
    pipeline += f" {func.name}" if func is not None else ""
    show = str if func is None else (lambda b: str(S.PrimFunc(func.name, func.params, b)))
    body = T.run(passes, body, pipeline=pipeline, size=_statement_count, unit="stmts", show=show,
                 trace=trace, check=check)
    return S.PrimFunc(func.name, func.params, body) if func is not None else body


_VERIFIED: dict = {}
"""The last bodies a pipeline verified, with their parameters, by id (each kept, so no id is
reused): code generation's input is most often ``lower``'s output, not checked twice."""
_VERIFIED_LOCK = threading.Lock()


class _Checks:
    """The verifier run on a pipeline's input and after each pass, with the loop kinds the
    passes run so far leave none of."""

    def __init__(self, func, body):
        self.func, self.gone = func, set()
        self.constant_extents = V.has_constant_extents(body)

    def __call__(self, body, after):
        params = None if self.func is None else self.func.params
        if after is None and _VERIFIED.get(id(body)) == (body, params):
            return
        name = None if after is None else getattr(after, "__name__", repr(after))
        self.gone.update(LEAVES_NONE.get(after, ()))
        ir = body if self.func is None else S.PrimFunc(self.func.name, self.func.params, body)
        V.verify(ir, after=name or "nothing (the pipeline's input)", gone=self.gone,
                 constant_extents=self.constant_extents)
        if not self.gone:                # what a pipeline's input is checked for, no more
            with _VERIFIED_LOCK:
                if len(_VERIFIED) >= 16:
                    _VERIFIED.pop(next(iter(_VERIFIED)))
                _VERIFIED[id(body)] = (body, params)


def _statement_count(body: S.Stmt) -> int:
    """Statements other than sequences: the size a trace line shows."""
    return sum(not isinstance(s, S.SeqStmt) for s in statements(body))
