"""Lowering: a schedule and its arguments -> a loop-IR PrimFunc.

* Inlined stages are substituted into their readers.
* Every other stage becomes a loop nest over its leaf axes. Loop extents follow from the
  region the stage realizes: its whole shape at the root, or, when it is computed at a loop
  of another stage, the window its readers touch during one iteration of that loop (bound
  inference over the readers' index expressions: symbolic in the loops outside, interval
  over the loops inside), shifted inside the tensor's shape. Such a stage gets a buffer of
  the window's size allocated in that loop, and reads of it are rebased to the window.
* The original axes are rebuilt from the leaves through the split/fuse relations; a split
  that does not divide its axis guards the store. A reduction writes its identity at the
  depth of the first reduce loop and accumulates inside.
* The result goes through the loop pipeline (``tensorir.pipeline``): it is simplified and its
  loops are partitioned so that guards remain only in tails.
"""
from __future__ import annotations

import functools

from tilefuse.tensorir import expr as E
from tilefuse.tensorir.dtype import itemsize
from tilefuse.tensorir import stmt as S
from tilefuse.tensorir.node import same
from tilefuse.tensorir.pipeline import run_passes
from tilefuse.tensorir.simplify import Linear, bound, simplify
from tilefuse.tensorir.tensor import PlaceholderOp, Tensor
from tilefuse.tensorir.walk import free_vars, rewrite, substitute, walk

from .schedule import Fuse, Schedule, ScheduleError, Split, Stage, split_extents

_COMBINE = {"sum": E.Add, "prod": E.Mul, "max": E.Max, "min": E.Min,
            # the new value where it is greater, so a NaN never enters: one compare and select
            "max_skip_nan": lambda current, value, dtype: E.Select(E.GT(value, current, "bool"), value, current, dtype)}


def lower(sch: Schedule, args: list, name: str = "main") -> S.PrimFunc:
    """Lower ``sch`` to a PrimFunc whose parameters are ``args`` (tensors and scalar vars).

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import create_schedule
        >>> A = placeholder((4,), name="A"); B = compute((4,), lambda i: A[i] * 2.0, name="B")
        >>> print(lower(create_schedule(B), [A, B]))
        func main(A: float32[4], B: float32[4]) {
          for (i, 0, 4) {
            B[i] = A[i] * 2f
          }
        }
    """
    if not isinstance(sch, Schedule):
        raise TypeError(f"lower takes a Schedule, got {type(sch).__name__}")
    if isinstance(args, (Tensor, E.Var)):
        args = [args]
    lowering = _Lowering(sch, list(args))
    body = lowering.run()
    return run_passes(S.PrimFunc(name, tuple(lowering.params), body))      # tensorir.pipeline.LOWERING_PASSES


class _Lowering:
    def __init__(self, sch: Schedule, args: list):
        self.sch, self.args = sch, args
        self.names: set[str] = set()
        self.arg_buffers = self._bind_args()
        self.bodies: dict[int, E.Expr] = {}       # id(stage) -> body with inlined stages substituted
        inlined: dict[int, tuple] = {}
        for st in sch.stages:
            body = _simplified_over_domain(_inline(st.body, inlined), st)
            if st.attach_type == "inline":
                inlined[id(st.op)] = (st.axis, body)
            else:
                self.bodies[id(st)] = body
        self.stages = [st for st in sch.stages if st.attach_type != "inline"]
        self.readers: dict[int, list[Stage]] = {}
        for st in self.stages:
            for n in walk(self.bodies[id(st)]):
                if isinstance(n, E.TensorLoad):
                    lst = self.readers.setdefault(id(n.tensor.op), [])
                    if st not in lst:
                        lst.append(st)
        self.attached: dict[int, list[Stage]] = {}
        for st in self.stages:
            if st.attach_type == "at":
                parent = st.attach_stage
                if parent.attach_type == "inline":
                    raise ScheduleError(f"stage {st.op.name}: computed at stage {parent.op.name}, which is inlined")
                if st.attach_ivar not in parent.leaf_iter_vars:
                    raise ScheduleError(f"stage {st.op.name}, axis {st.attach_ivar.name}: computed at a loop that "
                                        f"stage {parent.op.name} no longer has (it was split or fused after)")
                self.attached.setdefault(id(parent), []).append(st)
        self._check_inputs()

    # ------------------------------------------------------------------ arguments
    def _bind_args(self) -> dict:
        buffers = {}
        seen_scalars = set()
        for a in self.args:
            if isinstance(a, Tensor):
                if id(a.op) in buffers:
                    raise ValueError(f"tensor {a.name} appears twice among the arguments")
                buffers[id(a.op)] = E.Buffer(self._unique(a.name), a.shape, a.dtype)
            elif isinstance(a, E.Var) and not isinstance(a, E.IterVar):
                if a.uid in seen_scalars:
                    raise ValueError(f"scalar {a.name} appears twice among the arguments")
                seen_scalars.add(a.uid)
                self.names.add(a.name)
            else:
                raise TypeError(f"arguments must be tensors or scalar vars, got {a!r}")
        for out in self.sch.outputs:
            if id(out.op) not in buffers:
                raise ValueError(f"output {out.name} is not among the arguments; pass it so the result can be read")
        return buffers

    def _check_inputs(self):
        """Every placeholder and scalar the stages read must be an argument."""
        scalars = {a.uid for a in self.args if isinstance(a, E.Var)}
        for st in self.stages:
            for n in walk(self.bodies[id(st)]):
                if isinstance(n, E.TensorLoad) and isinstance(n.tensor.op, PlaceholderOp) \
                        and id(n.tensor.op) not in self.arg_buffers:
                    raise ValueError(f"input {n.tensor.name} (read by {st.op.name}) is not among the arguments")
            for v in free_vars(self.bodies[id(st)]):
                if not isinstance(v, E.IterVar) and v.uid not in scalars:
                    raise ValueError(f"scalar {v.name} (used by {st.op.name}) is not among the arguments")

    def _unique(self, name: str) -> str:
        candidate, k = name, 1
        while candidate in self.names:
            candidate, k = f"{name}_{k}", k + 1
        self.names.add(candidate)
        return candidate

    # ------------------------------------------------------------------ driver
    def run(self) -> S.Stmt:
        env = {}
        allocations = []
        for st in self.sch.stages:
            if st.storage_shape is not None and (st.attach_type != "root" or id(st.op) in self.arg_buffers):
                where = {"root": "an argument of the kernel", "inline": "inlined"}.get(
                    st.attach_type, "computed at a loop of another stage")
                raise ScheduleError(f"stage {st.op.name}: storage_align needs a stage computed at the root into a "
                                    f"buffer of its own; this one is {where}")
        for st in self.stages:
            if st.attach_type != "root":
                continue
            buf = self.arg_buffers.get(id(st.op))
            if buf is None:
                buf = E.Buffer(self._unique(st.op.name), st.storage_shape or st.op.shape, st.op.dtype)
                allocations.append(buf)
            env[id(st.op)] = (buf, _zeros(len(st.op.shape)))
        for op_id, buf in self.arg_buffers.items():
            env.setdefault(op_id, (buf, _zeros(len(buf.shape))))
        body = S.seq(*[self._stage(st, _zeros(len(st.op.shape)), st.op.shape, env, {})
                       for st in self.stages if st.attach_type == "root"])
        for buf in reversed(allocations):
            body = S.Allocate(buf, body)
        self.params = [self.arg_buffers[id(a.op)] if isinstance(a, Tensor) else a for a in self.args]
        return body

    # ------------------------------------------------------------------ one stage
    def _stage(self, st: Stage, mins: tuple, exts: tuple, env: dict, ranges: dict) -> S.Stmt:
        values, extents, guards = _leaf_values(st, exts)
        glob, starts = _root_values(st, mins, values)
        ranges = dict(ranges)
        for leaf in st.leaf_iter_vars:
            ranges[leaf.uid] = (starts.get(leaf.uid, 0), extents[leaf.uid])
        regions = self._regions(st, glob, extents, ranges)
        buf, offsets = env[id(st.op)]
        body = self.bodies[id(st)]
        store_index = tuple(simplify(glob[ax.uid] - off) for ax, off in zip(st.axis, offsets))
        data_guards = [c for parent, c in guards if parent.kind == "data"]
        reduce_guards = [c for parent, c in guards if parent.kind == "reduce"]
        leaves = st.leaf_iter_vars

        def value_of(expr, env):
            return _to_buffers(substitute(expr, glob), env)

        def emit(leaf_list, core, env, attach):
            if not leaf_list:
                return core(env)
            leaf = leaf_list[0]
            prologue, inner_env, allocs = (self._attached_at(st, leaf, regions, env, ranges) if attach
                                           else ([], env, []))
            inner = S.seq(*prologue, emit(leaf_list[1:], core, inner_env, attach))
            for b in reversed(allocs):
                inner = S.Allocate(b, inner)
            kind = st.iter_var_kinds.get(leaf.uid, "serial")
            st.check_extent(leaf, kind, extents[leaf.uid])
            start = E.Const(starts.get(leaf.uid, 0), "int64")
            return S.For(leaf, start, E.Const(extents[leaf.uid], "int64"), kind, inner)

        def prefetches(env):
            return [self._prefetch(st, body, glob, env, starts, *p) for p in st.prefetches]

        if not isinstance(body, E.Reduce):
            def core(env):
                return S.seq(*prefetches(env),
                             _guarded(S.BufferStore(buf, value_of(body, env), store_index), data_guards))
            return emit(leaves, core, env, True)

        def init(env):
            return _guarded(S.BufferStore(buf, body.identity, store_index), data_guards)

        def update(env):
            current = E.BufferLoad(buf, store_index, body.dtype)
            combined = _COMBINE[body.combiner](current, value_of(body.source, env), body.dtype)
            return S.seq(*prefetches(env),
                         _guarded(S.BufferStore(buf, combined, store_index), data_guards + reduce_guards))

        first = next((k for k, iv in enumerate(leaves) if iv.kind == "reduce"), len(leaves))
        outer, inner = leaves[:first], leaves[first:]
        inner_data = [iv for iv in inner if iv.kind == "data"]
        return emit(outer, lambda env: S.seq(emit(inner_data, init, env, False), emit(inner, update, env, True)),
                    env, True)

    def _prefetch(self, st: Stage, body, glob: dict, env: dict, starts: dict, tensor, axis, offset,
                  write, level) -> S.Stmt:
        """The Prefetch of ``Stage.prefetch``: the stage's first read of ``tensor``, or its own
        coordinates in ``tensor``, with ``axis`` moved ``offset`` iterations ahead; issued by
        the first copy only of each unrolled loop whose copies do not move that address (a
        register tile's rows all read one weight vector: one fetch, not one per row)."""
        if axis is None:
            return self._prefetch_at(st, glob, env, starts, tensor, offset, write, level)
        ahead = dict(glob)
        ahead[axis.uid] = glob[axis.uid] + offset
        load = next((n for n in walk(body) if isinstance(n, E.TensorLoad) and n.tensor.op is tensor.op), None)
        if load is None:
            if tuple(tensor.shape) != tuple(st.op.shape):
                raise ScheduleError(f"stage {st.op.name}: prefetch of {tensor.name}, which the stage does not read "
                                    f"and whose shape {tuple(tensor.shape)} is not the stage's {tuple(st.op.shape)}")
            load = E.TensorLoad(tensor, tuple(ax for ax in st.axis), tensor.dtype)
        return _first_copy_fetch(st, env, starts, substitute(load, ahead), write, level)

    def _prefetch_at(self, st: Stage, glob: dict, env: dict, starts: dict, tensor, index, write, level) -> S.Stmt:
        """The Prefetch of ``Stage.prefetch_at``: ``index`` of the coordinates with every
        unrolled and vectorized loop at its first value (so no copy moves the address, and the
        first copy alone issues it)."""
        copies = [leaf for leaf in st.leaf_iter_vars if st.iter_var_kinds.get(leaf.uid) in ("unrolled", "vectorized")]
        first = {leaf.uid: E.Const(starts.get(leaf.uid, 0), "int64") for leaf in copies}
        coords = {ax: simplify(substitute(glob[ax.uid], first)) for ax in (*st.op.axis, *st.op.reduce_axis)}
        indices = tuple(E.as_expr(i, "int64") for i in index(coords))
        if len(indices) != len(tensor.shape):
            raise ScheduleError(f"stage {st.op.name}: prefetch_at of {tensor.name} gave {len(indices)} indices "
                                f"for its {len(tensor.shape)} dimensions")
        return _first_copy_fetch(st, env, starts, E.TensorLoad(tensor, indices, tensor.dtype), write, level)

    def _attached_at(self, st: Stage, leaf, regions: dict, env: dict, ranges: dict):
        prologue, allocs = [], []
        env = dict(env)
        for p in self.attached.get(id(st), []):
            if p.attach_ivar is not leaf:
                continue
            mins, exts = regions[id(p)]
            if id(p.op) in self.arg_buffers:   # an output computed piecewise into its argument
                buf, offsets = self.arg_buffers[id(p.op)], _zeros(len(exts))
            else:
                nbytes = int(_prod(exts)) * itemsize(p.op.dtype)
                buf = E.Buffer(self._unique(p.op.name), tuple(exts), p.op.dtype,
                               "local" if nbytes <= 64 * 1024 else "global")
                offsets = mins
                allocs.append(buf)
            env[id(p.op)] = (buf, offsets)
            prologue.append(self._stage(p, mins, exts, env, ranges))
        return prologue, env, allocs

    # ------------------------------------------------------------------ bound inference
    def _regions(self, st: Stage, glob: dict, extents: dict, ranges: dict) -> dict:
        """Window (mins, extents) of every stage computed at a loop of ``st``."""
        attached = self.attached.get(id(st), [])
        regions: dict[int, tuple] = {}
        leaves = st.leaf_iter_vars
        for p in reversed(attached):           # readers before the stages they read
            pos = leaves.index(p.attach_ivar)
            inner = {iv.uid: (0, extents[iv.uid]) for iv in leaves[pos + 1:]}
            within = _Within(self, st, pos, glob, inner, regions, ranges)
            reads = within.reads_of(p)
            if not reads:
                raise ScheduleError(f"stage {p.op.name}, axis {p.attach_ivar.name}: computed at a loop of "
                                    f"{st.op.name}, which does not read it")
            regions[id(p)] = within.window(p, reads)
        return regions


class _Within:
    """Bound inference inside one iteration of loop ``st.leaf_iter_vars[pos]``: what each
    stage computed inside it (at ``st`` or, nested, at a stage that is) reads of another."""

    def __init__(self, lowering, st, pos, glob, inner, regions, ranges):
        self.lowering, self.st, self.pos, self.glob, self.inner = lowering, st, pos, glob, inner
        self.regions, self.ranges, self.nested = regions, ranges, {}

    def window(self, p, reads):
        rounded = {a.uid for a in p.round_up}
        return _window(p.op.shape, reads, self.ranges, [ax.uid in rounded for ax in p.axis])

    def reads_of(self, p):
        """(indices, ranges of the loops they use) of every read of ``p`` (a stage computed at
        a loop) by its readers, each over all it computes in the iteration."""
        reads = []
        for reader in self.lowering.readers.get(id(p.op), []):
            if reader is self.st:
                context = self.glob, self.inner
            else:
                context = self._span(reader)
                if context is None:
                    raise ScheduleError(
                        f"stage {p.op.name}, axis {p.attach_ivar.name}: computed at loop "
                        f"{p.attach_ivar.name} of {self.st.op.name}, but read by {reader.op.name}, which is "
                        f"not computed inside that loop")
            rglob, rinner = context
            reads += [(_subst_all(n.indices, rglob), rinner) for n in walk(self.lowering.bodies[id(reader)])
                      if isinstance(n, E.TensorLoad) and n.tensor.op is p.op]
        return reads

    def _span(self, stage):
        """(root values, loop ranges) of ``stage``'s loops over all it computes in the iteration,
        or None when it is not computed inside the loop."""
        if stage.attach_type != "at":
            return None
        if stage.attach_stage is self.st:
            if self.st.leaf_iter_vars.index(stage.attach_ivar) < self.pos or id(stage) not in self.regions:
                return None
            region = self.regions[id(stage)]
        elif id(stage) in self.nested:
            region = self.nested[id(stage)]
        else:       # computed at a stage that is inside: its region spans all its readers read there
            if self._span(stage.attach_stage) is None:
                return None
            region = self.nested[id(stage)] = self.window(stage, self.reads_of(stage))
        rmins, rexts = region
        rvalues, rextents, _ = _leaf_values(stage, rexts)
        rglob, rstarts = _root_values(stage, rmins, rvalues)
        rinner = dict(self.inner)
        rinner.update({iv.uid: (rstarts.get(iv.uid, 0), rextents[iv.uid]) for iv in stage.leaf_iter_vars})
        return rglob, rinner


# ---------------------------------------------------------------------------- helpers

def _inline(body: E.Expr, inlined: dict) -> E.Expr:
    if not inlined:
        return body

    def replace(n):
        if isinstance(n, E.TensorLoad) and id(n.tensor.op) in inlined:
            axis, definition = inlined[id(n.tensor.op)]
            return substitute(definition, dict(zip(axis, n.indices)))
        return n
    return rewrite(body, replace)


def _simplified_over_domain(body: E.Expr, st: Stage) -> E.Expr:
    """``body`` simplified with each root axis of ``st`` in its domain: index arithmetic that
    inlined reshapes compose (``(c*W + w) % W``) folds back to the axes while they are whole
    variables, before splits make them ``outer*factor + inner`` (whose tail exceeds the
    extent, so the folds no longer hold for bound inference)."""
    ranges = {ax.uid: (ax.dom_min, ax.dom_extent) for ax in st.axis}
    ranges.update({r.uid: (r.dom_min, r.dom_extent) for r in st.reduce_axis})
    return simplify(body, ranges)


def _first_copy_fetch(st: Stage, env: dict, starts: dict, load, write, level) -> S.Stmt:
    """The Prefetch of ``load`` (a read of a tensor with a buffer here), issued by the first
    copy only of each unrolled loop of ``st`` whose copies do not move its address."""
    tensor = load.tensor
    if id(tensor.op) not in env:
        raise ScheduleError(f"stage {st.op.name}: prefetch of {tensor.name}, which has no buffer here (it is "
                            f"inlined or computed inside another loop)")
    moved = _to_buffers(load, env)
    indices = tuple(simplify(i) for i in moved.indices)
    fetch = S.Prefetch(moved.buffer, indices, write, level)
    used = {v.uid for i in indices for v in walk(i) if isinstance(v, E.Var)}
    firsts = [E.EQ(leaf, E.Const(starts.get(leaf.uid, 0), "int64"), "bool") for leaf in st.leaf_iter_vars
              if st.iter_var_kinds.get(leaf.uid) == "unrolled" and leaf.uid not in used]
    if not firsts:
        return fetch
    return S.IfThenElse(functools.reduce(lambda a, b: E.And(a, b, "bool"), firsts), fetch)


def _to_buffers(e: E.Expr, env: dict) -> E.Expr:
    def replace(n):
        if isinstance(n, E.TensorLoad):
            buf, offsets = env[id(n.tensor.op)]
            idx = tuple(i if _is_zero(o) else i - o for i, o in zip(n.indices, offsets))
            return E.BufferLoad(buf, idx, n.dtype)
        return n
    return rewrite(e, replace)


def _subst_all(indices, mapping):
    return tuple(substitute(i, mapping) for i in indices)


def _zeros(n: int) -> tuple:
    return (E.Const(0, "int64"),) * n


def _is_zero(e) -> bool:
    return isinstance(e, E.Const) and e.value == 0


def _offset(base: E.Expr, local: E.Expr) -> E.Expr:
    return local if _is_zero(base) else base + local


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _leaf_values(st: Stage, root_extents: tuple):
    """Extents of every axis of the stage for a realized region of ``root_extents`` (data axes;
    reduce axes keep their domain), each root axis as a 0-based expression of the leaf loop
    variables, and the guards of splits that do not divide their axis."""
    extents = {ax.uid: int(e) for ax, e in zip(st.axis, root_extents)}
    for r in st.reduce_axis:
        extents[r.uid] = r.dom_extent
    for rel in st.relations:
        if isinstance(rel, Split):
            extents[rel.outer.uid], extents[rel.inner.uid] = split_extents(extents[rel.parent.uid], rel.factor,
                                                                           rel.nparts)
        else:
            extents[rel.fused.uid] = extents[rel.outer.uid] * extents[rel.inner.uid]
    values = {iv.uid: iv for iv in st.leaf_iter_vars}
    guards = []
    for rel in reversed(st.relations):
        if isinstance(rel, Split):
            inner_ext = extents[rel.inner.uid]
            values[rel.parent.uid] = values[rel.outer.uid] * inner_ext + values[rel.inner.uid]
            if extents[rel.outer.uid] * inner_ext != extents[rel.parent.uid]:
                guards.append((rel.parent, values[rel.parent.uid] < extents[rel.parent.uid]))
        elif isinstance(rel, Fuse):
            fused, n = values[rel.fused.uid], extents[rel.inner.uid]
            values[rel.outer.uid] = fused // n if n != 1 else fused
            values[rel.inner.uid] = fused % n if n != 1 else E.Const(0, "int64")
    return values, extents, guards


def _root_values(st: Stage, mins: tuple, values: dict):
    """Each root axis of ``st`` in tensor coordinates (window start + 0-based value), and the
    start of loops that are not 0: an unsplit reduce axis keeps its own domain."""
    glob = {ax.uid: _offset(mins[d], values[ax.uid]) for d, ax in enumerate(st.axis)}
    starts = {}
    for r in st.reduce_axis:
        if r in st.leaf_iter_vars and r.dom_min:
            starts[r.uid] = r.dom_min
            glob[r.uid] = r
        else:
            glob[r.uid] = _offset(E.Const(r.dom_min, "int64"), values[r.uid])
    return glob, starts


def _interval(e: E.Expr, inner: dict, ranges: dict):
    """(symbolic part, lo, hi) with ``e`` in [symbolic + lo, symbolic + hi] while the ``inner``
    variables range over their loops; None when that cannot be bounded."""
    lin = Linear.of(simplify(e, ranges))
    symbolic, lo, hi = {}, lin.const, lin.const
    for atom, c in lin.terms.items():
        inner_vars = [n for n in walk(atom) if isinstance(n, E.Var) and n.uid in inner]
        if not inner_vars:
            symbolic[atom] = c
            continue
        if isinstance(atom, E.Var):
            a0, ext = inner[atom.uid]
            a1 = a0 + ext - 1
        else:
            a0, a1 = bound(atom, {**ranges, **inner})
            if a0 == -float("inf") or a1 == float("inf"):
                return None
        lo += min(c * a0, c * a1)
        hi += max(c * a0, c * a1)
    return Linear(symbolic, 0, "int64"), lo, hi


def _window(shape: tuple, reads: list, ranges: dict, round_up=None):
    """The region of a tensor of ``shape`` that all ``reads`` (index tuples, each with the
    ranges of its inner variables) touch: symbolic mins and constant extents. It is shifted
    inside the tensor, except along the dims that ``round_up`` marks."""
    mins, exts = [], []
    for d, n in enumerate(shape):
        parts = [_interval(idx[d], inner, ranges) for idx, inner in reads]
        base = parts[0][0].to_expr() if parts[0] is not None else None
        if any(p is None or not same(p[0].to_expr(), base) for p in parts):
            mins.append(E.Const(0, "int64"))
            exts.append(n)
            continue
        lo, hi = min(p[1] for p in parts), max(p[2] for p in parts)
        ext = hi - lo + 1
        if round_up and round_up[d]:       # past the end too: a tile wider than the axis stays whole
            mins.append(simplify(base + lo, ranges))
            exts.append(ext)
            continue
        if ext >= n:
            mins.append(E.Const(0, "int64"))
            exts.append(n)
            continue
        start = simplify(base + lo, ranges)
        # shift the window inside the tensor, so it never reaches past either end
        start = simplify(E.Max(E.Min(start, E.Const(n - ext, "int64"), "int64"), E.Const(0, "int64"), "int64"),
                         ranges)
        mins.append(start)
        exts.append(ext)
    return tuple(mins), tuple(exts)


def _guarded(stmt: S.Stmt, conds) -> S.Stmt:
    for c in conds:
        stmt = S.IfThenElse(c, stmt)
    return stmt
