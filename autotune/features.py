"""Feature vectors of schedule candidates, read from their lowered loop IR and their knob values.

``loop_features(func)`` looks at every ``BufferStore`` of a lowered ``PrimFunc``, in the spirit of
Ansor's per-store features: the loops around the store (extents and kinds: serial, parallel,
vectorized, unrolled), the arithmetic of the stored value (float add/sub, mul, fused
multiply-add, divisions, min/max, transcendental calls, index arithmetic), and for the store
and each buffer load inside it the stride along the innermost and the vectorized loop, the
bytes and cache lines touched over the innermost 1, 2, 3 loops, one parallel task and the whole
nest, and how far apart reuses of the same element are. Stores are ranked by how many times
they execute; the top ``TOP_STORES`` fill fixed slots (zeros when there are fewer), and a few
whole-function totals (flops, bytes, allocations, parallel extent, prefetches) follow. Counts are
log-transformed, ``log2(1 + x)``. The vector has the same length for every function:
``len(FEATURE_NAMES)``.

``config_features(space, config)`` encodes the knob values (numbers as ``log2``, booleans as
0/1, other values one-hot by candidate), and ``features_of(template, config)`` concatenates the
two after lowering ``template.apply(config)``.

Example:
    >>> from tilefuse.tensorir import placeholder, compute
    >>> from tilefuse.schedule import template_for
    >>> A = placeholder((1024,), name="A"); B = compute((1024,), lambda i: A[i] * 2.0, name="B")
    >>> t = template_for(B)
    >>> x = features_of(t, t.default_config())
    >>> x.shape == (len(FEATURE_NAMES) + len(config_feature_names(t.space)),)
    True
"""
from __future__ import annotations

import json
import math

import numpy as np

from tilefuse.schedule.lower import lower
from tilefuse.schedule.space import Config, ConfigError, ConfigSpace
from tilefuse.tensorir import expr as E
from tilefuse.tensorir import stmt as S
from tilefuse.tensorir.dtype import is_float, itemsize
from tilefuse.tensorir.node import same
from tilefuse.tensorir.visitor import Visitor
from tilefuse.tensorir.simplify import bound
from tilefuse.tensorir.errors import TilefuseError

CACHE_LINE_BYTES = 64
TOP_STORES = 3                  # stores with the most executions that get a slot of their own
CHEAP_CALLS = frozenset({"abs", "floor", "ceil"})


class FeatureError(TilefuseError, ValueError):
    """A candidate whose features cannot be computed (its schedule does not lower)."""


# ---------------------------------------------------------------------------- feature names

# One block per access (the store's own write, and the dominant load of the store).
_LEVELS = ("inner1", "inner2", "inner3", "task", "all")
ACCESS_FIELDS = (
    ("local", "1 if the buffer lives in local (stack) scope"),
    ("stride_inner", "log2(1 + |stride|) in elements along the innermost loop"),
    ("stride_inner_class", "along the innermost loop: 0 reuse, 1 contiguous, 2 strided"),
    ("stride_vector", "log2(1 + |stride|) along the innermost vectorized loop (0 without one)"),
    ("stride_vector_class", "along the vectorized loop: -1 no such loop, 0 reuse, 1 contiguous, 2 strided"),
    ("stride_outer", "log2(1 + |stride|) over the first step of the outermost loop"),
    ("stride_outer_class", "along the outermost loop: 0 reuse, 1 contiguous, 2 strided"),
    *((f"bytes_{lv}", f"log2(1 + distinct bytes touched over the {lv} loop level)") for lv in _LEVELS),
    *((f"lines_{lv}", f"log2(1 + {CACHE_LINE_BYTES}-byte lines touched over the {lv} loop level)")
      for lv in _LEVELS),
    ("reuse_depth", "loops inside the innermost loop the access does not depend on (-1: none)"),
    ("reuse_count", "log2(1 + extent of that reuse loop)"),
    ("reuse_dist_iters", "log2(1 + iterations between two reuses of an element)"),
    ("reuse_dist_bytes", "log2(1 + bytes the access touches between two reuses)"),
)

_OPS = ("float_addsub", "float_mul", "float_fma", "float_div", "float_minmax", "float_other",
        "transcendental", "compare_select", "cast", "int_arith", "index_arith")
STORE_FIELDS = (
    ("instances", "log2(1 + executions of the store: product of the loop extents around it)"),
    ("depth", "number of loops around the store"),
    ("innermost_extent", "log2(1 + extent of the innermost loop)"),
    ("outermost_extent", "log2(1 + extent of the outermost loop)"),
    ("vector_lanes", "log2(1 + extent of the innermost vectorized loop)"),
    ("vector_innermost", "1 if the innermost loop is vectorized"),
    ("vector_product", "log2(1 + product of vectorized loop extents)"),
    ("unroll_product", "log2(1 + product of unrolled loop extents)"),
    ("unroll_loops", "number of unrolled loops"),
    ("parallel_product", "log2(1 + product of parallel loop extents)"),
    ("parallel_loops", "number of parallel loops"),
    ("serial_product", "log2(1 + product of serial loop extents)"),
    ("guarded", "1 if the store is under an if (a loop tail)"),
    ("is_update", "1 if the value reads the stored element (an accumulation)"),
    *((f"{op}", f"log2(1 + {op.replace('_', ' ')} operations over all executions)") for op in _OPS),
    ("flops", "log2(1 + float operations over all executions, an FMA counting 2)"),
    ("intensity", "log2(1 + flops / distinct bytes of all the store's accesses)"),
    ("loads", "number of buffer loads in the value"),
    ("loads_local", "loads from local buffers"),
    ("loads_inner_reuse", "loads invariant along the innermost loop"),
    ("loads_inner_contiguous", "loads with stride 1 along the innermost loop"),
    ("loads_inner_strided", "loads with another stride along the innermost loop"),
    ("loads_vector_reuse", "loads invariant along the vectorized loop"),
    ("loads_vector_contiguous", "loads with stride 1 along the vectorized loop"),
    ("loads_vector_strided", "loads with another stride along the vectorized loop"),
    *((f"loads_bytes_{lv}", f"log2(1 + summed distinct bytes of the loads at the {lv} level)") for lv in _LEVELS),
    *((f"loads_lines_{lv}", f"log2(1 + summed cache lines of the loads at the {lv} level)") for lv in _LEVELS),
    *((f"write_{name}", f"the store's write: {doc}") for name, doc in ACCESS_FIELDS),
    *((f"load_{name}", f"the load touching the most lines per task: {doc}") for name, doc in ACCESS_FIELDS),
)

GLOBAL_FIELDS = (
    ("stores", "number of stores"),
    ("loops", "number of loops"),
    ("max_depth", "deepest loop nest"),
    ("guards", "number of if statements"),
    ("total_instances", "log2(1 + executions of all stores)"),
    ("total_flops", "log2(1 + float operations of all stores)"),
    ("total_bytes", "log2(1 + distinct bytes of all accesses, summed)"),
    ("total_lines_task", "log2(1 + cache lines per parallel task of all accesses, summed)"),
    ("total_lines", "log2(1 + cache lines of all accesses, summed)"),
    ("total_intensity", "log2(1 + total flops / total bytes)"),
    ("outer_parallel_extent", "log2(1 + largest extent of a parallel loop not inside another one)"),
    ("parallel_launches", "log2(1 + times a parallel loop starts)"),
    ("work_per_task", "log2(1 + store executions inside parallel loops / parallel tasks)"),
    ("alloc_local_bytes", "log2(1 + bytes of local allocations)"),
    ("alloc_local_max_bytes", "log2(1 + bytes of the largest local allocation)"),
    ("alloc_global_bytes", "log2(1 + bytes of global (heap) allocations)"),
    ("allocs", "number of allocations"),
    ("prefetches", "log2(1 + executions of prefetches; an unrolled copy that does not move the address skips it)"),
    ("prefetch_ahead_bytes", "log2(1 + bytes from the address a prefetch fetches to the one the next store's "
                             "load of that buffer reads, the largest over prefetches)"),
)


def _feature_docs() -> dict[str, str]:
    docs = {}
    for slot in range(TOP_STORES):
        for name, doc in STORE_FIELDS:
            docs[f"store{slot}.{name}"] = f"store #{slot} by executions: {doc}"
    for name, doc in GLOBAL_FIELDS:
        docs[f"func.{name}"] = doc
    return docs


FEATURE_DOCS: dict[str, str] = _feature_docs()
FEATURE_NAMES: tuple[str, ...] = tuple(FEATURE_DOCS)
"""The meaning of each entry of ``loop_features``: ``storeK.<field>`` for the K-th store by
executions, ``func.<field>`` for whole-function totals; ``FEATURE_DOCS`` explains each."""

_ACCESS_LEN = len(ACCESS_FIELDS)
_AT = {name: k for k, (name, _) in enumerate(ACCESS_FIELDS)}     # position in an access block
_TASK = _LEVELS.index("task")
_ALL = _LEVELS.index("all")
_STORE_LEN = len(STORE_FIELDS)


def _log(x) -> float:
    return math.log2(1.0 + max(float(x), 0.0))


# ---------------------------------------------------------------------------- address analysis

_INT_OPS = {
    E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
    E.FloorDiv: lambda a, b: a // b if b else 0, E.FloorMod: lambda a, b: a % b if b else 0,
    E.Min: min, E.Max: max, E.EQ: lambda a, b: a == b, E.NE: lambda a, b: a != b,
    E.LT: lambda a, b: a < b, E.LE: lambda a, b: a <= b, E.GT: lambda a, b: a > b,
    E.GE: lambda a, b: a >= b, E.And: lambda a, b: a and b, E.Or: lambda a, b: a or b,
}


def _evaluate(e, values: dict, lets: dict) -> int:
    """The integer value of index expression ``e`` with loop variables at ``values`` (uid ->
    int) and let-bound ones from ``lets`` (uid -> Expr); anything unknown counts as 0."""
    if isinstance(e, E.Var):
        if e.uid in values:
            return values[e.uid]
        bound_value = lets.get(e.uid)
        return 0 if bound_value is None else _evaluate(bound_value, values, lets)
    if isinstance(e, E.Const):
        return int(e.value) if not isinstance(e.value, float) or math.isfinite(e.value) else 0
    op = _INT_OPS.get(type(e))
    if op is not None:
        return int(op(_evaluate(e.a, values, lets), _evaluate(e.b, values, lets)))
    if isinstance(e, E.Select):
        chosen = e.true_value if _evaluate(e.cond, values, lets) else e.false_value
        return _evaluate(chosen, values, lets)
    if isinstance(e, E.Cast):
        return _evaluate(e.value, values, lets)
    if isinstance(e, E.Not):
        return int(not _evaluate(e.a, values, lets))
    return 0                                   # a load inside an index, a call: unknown


class _Loop:
    __slots__ = ("uid", "min", "extent", "kind")

    def __init__(self, uid, lo, extent, kind):
        self.uid, self.min, self.extent, self.kind = uid, lo, extent, kind


def _address_slopes(buffer: E.Buffer, indices: tuple, loops, lets: dict):
    """For each loop (by uid): the average change of the flattened (row-major) address per
    iteration over the loop's whole range, and the change over its first step, the other
    loops at their first iteration. Exact for affine indices, and right for fused-then-split
    ones such as ``A[x // 19, x % 19]``."""
    values = {lp.uid: lp.min for lp in loops}

    def address():
        return _address_at(buffer, indices, values, lets)
    base = address()
    slopes, steps = {}, {}
    for lp in loops:
        if lp.extent <= 1:
            continue
        values[lp.uid] = lp.min + 1
        step = address() - base
        if lp.extent > 2:
            values[lp.uid] = lp.min + lp.extent - 1
            slope = (address() - base) / (lp.extent - 1)
        else:
            slope = float(step)
        values[lp.uid] = lp.min
        if step or slope:
            slopes[lp.uid], steps[lp.uid] = slope, step
    return slopes, steps


def _address_at(buffer: E.Buffer, indices: tuple, values: dict, lets: dict) -> int:
    """The flattened (row-major) element address of an access with loop variables at ``values``."""
    return sum(_evaluate(ix, values, lets) * st for ix, st in zip(indices, buffer.strides()))


def _first_address(buffer: E.Buffer, indices: tuple, loops, lets: dict) -> int:
    """The flattened element address of an access at the first iteration of ``loops``."""
    return _address_at(buffer, indices, {lp.uid: lp.min for lp in loops}, lets)


def _footprint(loops, coeffs, size: int):
    """(distinct bytes, cache lines) an access with address ``coeffs`` touches over ``loops``."""
    nonzero = sorted((abs(coeffs.get(lp.uid, 0.0)), lp.extent) for lp in loops
                     if lp.extent > 1 and coeffs.get(lp.uid, 0.0) != 0.0)
    span, blocks, product = 1.0, 1, 1
    for c, n in nonzero:
        product *= n
        if c <= span:           # overlaps or continues the contiguous run
            span += c * (n - 1)
        else:
            blocks *= n
    elements = min(blocks * span, product)
    lines = min(blocks * math.ceil(span * size / CACHE_LINE_BYTES), elements)
    return elements * size, lines


def _stride_class(c: float) -> int:
    return 0 if c == 0 else (1 if abs(c) == 1 else 2)


def _access(buffer, indices, loops, task_start: int, lets: dict):
    """The ACCESS_FIELDS block of one access under ``loops`` (outermost first), and its
    (bytes, lines) footprint at each level."""
    size = itemsize(buffer.dtype)
    coeffs, steps = _address_slopes(buffer, indices, loops, lets)
    inner = loops[-1] if loops else None
    vector = next((lp for lp in reversed(loops) if lp.kind == "vectorized"), None)
    s_inner = steps.get(inner.uid, 0) if inner else 0
    s_vector = steps.get(vector.uid, 0) if vector else 0
    s_outer = steps.get(loops[0].uid, 0) if loops else 0
    out = [1.0 if buffer.scope == "local" else 0.0,
           _log(abs(s_inner)), float(_stride_class(s_inner)),
           _log(abs(s_vector)), float(_stride_class(s_vector)) if vector else -1.0,
           _log(abs(s_outer)), float(_stride_class(s_outer))]
    levels = [loops[-1:], loops[-2:], loops[-3:], loops[task_start:], loops]
    prints = [_footprint(lv, coeffs, size) for lv in levels]
    out += [_log(b) for b, _ in prints] + [_log(n) for _, n in prints]
    reuse = [-1.0, 0.0, 0.0, 0.0]
    for depth in range(len(loops) - 1, -1, -1):
        lp = loops[depth]
        if lp.extent > 1 and lp.uid not in coeffs:
            inside = loops[depth + 1:]
            iters = 1
            for q in inside:
                iters *= q.extent
            reuse = [float(len(inside)), _log(lp.extent), _log(iters), _log(_footprint(inside, coeffs, size)[0])]
            break
    out += reuse
    return out, prints


# ---------------------------------------------------------------------------- arithmetic

class _OpCounter(Visitor):
    """Counts the operations of a stored value and collects its loads; ``visit(e, True)``
    counts an index expression (its arithmetic is index arithmetic)."""

    def __init__(self):
        super().__init__()
        self.ops = dict.fromkeys(_OPS, 0)
        self.loads: list[E.BufferLoad] = []

    def generic_visit(self, e, in_index=False):
        pass                                    # constants, variables

    def visit_BufferLoad(self, e, in_index=False):
        self.loads.append(e)
        for index in e.indices:
            self.visit(index, True)

    def visit_BinaryOp(self, e, in_index=False):
        ops = self.ops
        if in_index:
            ops["index_arith"] += 1
            self.visit(e.a, True)
            self.visit(e.b, True)
            return
        if isinstance(e, E.CmpOp) or isinstance(e, (E.And, E.Or)):
            ops["compare_select"] += 1
        elif is_float(e.dtype):
            if isinstance(e, (E.Add, E.Sub)) and (isinstance(e.a, E.Mul) or isinstance(e.b, E.Mul)):
                ops["float_fma"] += 1
                product, other = (e.a, e.b) if isinstance(e.a, E.Mul) else (e.b, e.a)
                self.visit(product.a)
                self.visit(product.b)
                self.visit(other)
                return
            if isinstance(e, (E.Add, E.Sub)):
                ops["float_addsub"] += 1
            elif isinstance(e, E.Mul):
                ops["float_mul"] += 1
            elif isinstance(e, (E.Div, E.FloorDiv, E.FloorMod)):
                ops["float_div"] += 1
            else:
                ops["float_minmax"] += 1
        else:
            ops["int_arith"] += 1
        self.visit(e.a)
        self.visit(e.b)

    def visit_Call(self, e, in_index=False):
        self.ops["float_other" if e.name in CHEAP_CALLS else "transcendental"] += 1
        for a in e.args:
            self.visit(a)

    def visit_Select(self, e, in_index=False):
        self.ops["compare_select"] += 1
        self.visit(e.cond)
        self.visit(e.true_value)
        self.visit(e.false_value)

    def visit_Cast(self, e, in_index=False):
        self.ops["cast"] += 1
        self.visit(e.value)

    def visit_Not(self, e, in_index=False):
        self.ops["compare_select"] += 1
        self.visit(e.a)


def _flops(ops: dict) -> int:
    return (ops["float_addsub"] + ops["float_mul"] + 2 * ops["float_fma"] + ops["float_div"]
            + ops["float_minmax"] + ops["float_other"] + ops["transcendental"])


# ---------------------------------------------------------------------------- the walk

class _Walk(Visitor):
    """Statements are visited with ``guarded`` (inside an if); ``self.frames`` holds a ``_Loop``
    (constant bounds) for each loop of ``self.loops``."""

    def __init__(self):
        super().__init__()
        self.frames: list[_Loop] = []
        self.stores = []             # (instances, order, store vector, flops, bytes, lines_task, lines_all)
        self.lets: dict = {}         # let-bound variable uid -> value
        self.max_depth = 0
        self.guards = 0
        self.parallel_launches = 0
        self.outer_parallel = 1
        self.parallel_instances = 0
        self.parallel_tasks = 0
        self.alloc_local = 0
        self.alloc_local_max = 0
        self.alloc_global = 0
        self.allocs = 0
        self.loop_count = 0
        self.pending_fetches = []    # (buffer, flat address at the loops' first iteration) before their store
        self.prefetches = 0
        self.prefetch_ahead = 0

    def generic_visit(self, s, guarded):
        pass

    def visit_For(self, s, guarded):
        self.loop_count += 1
        loops = self.frames
        extent = s.extent.value if isinstance(s.extent, E.Const) else self._extent(s.extent, loops)
        lo = s.min.value if isinstance(s.min, E.Const) else 0
        if s.kind == "parallel":
            launches = 1
            for lp in loops:
                launches *= lp.extent
            self.parallel_launches += launches
            if not any(lp.kind == "parallel" for lp in loops):
                self.outer_parallel = max(self.outer_parallel, extent)
        self.frames = loops + [_Loop(s.var.uid, int(lo), max(int(extent), 0), s.kind)]
        with self.inside(s):
            self.visit(s.body, guarded)
        self.frames = loops

    def visit_BufferStore(self, s, guarded):
        self.store(s, self.frames, guarded)

    def visit_SeqStmt(self, s, guarded):
        for c in s.stmts:
            self.visit(c, guarded)

    def visit_Allocate(self, s, guarded):
        nbytes = s.buffer.size * itemsize(s.buffer.dtype)
        self.allocs += 1
        if s.buffer.scope == "local":
            self.alloc_local += nbytes
            self.alloc_local_max = max(self.alloc_local_max, nbytes)
        else:
            self.alloc_global += nbytes
        self.visit(s.body, guarded)

    def visit_IfThenElse(self, s, guarded):
        self.guards += 1
        self.visit(s.then_body, True)
        if s.else_body is not None:
            self.visit(s.else_body, True)

    def visit_Prefetch(self, s, guarded):
        slopes, _ = _address_slopes(s.buffer, s.indices, self.frames, self.lets)
        executions = 1
        for lp in self.frames:      # unrolled copies that do not move the address fetch once
            executions *= lp.extent if lp.kind != "unrolled" or lp.uid in slopes else 1
        self.prefetches += executions
        self.pending_fetches.append((s.buffer, _first_address(s.buffer, s.indices, self.frames, self.lets)))

    def visit_LetStmt(self, s, guarded):
        self.lets[s.var.uid] = s.value
        self.visit(s.body, guarded)

    @staticmethod
    def _extent(extent, loops) -> int:
        ranges = {lp.uid: (lp.min, lp.extent) for lp in loops}
        hi = bound(extent, ranges)[1]
        return int(hi) if math.isfinite(hi) else 1

    def store(self, s, loops, guarded):
        self.max_depth = max(self.max_depth, len(loops))
        instances = 1
        vec_product = unroll_product = par_product = serial_product = 1
        unroll_loops = par_loops = 0
        task_start = 0
        for d, lp in enumerate(loops):
            instances *= lp.extent
            if lp.kind == "vectorized":
                vec_product *= lp.extent
            elif lp.kind == "unrolled":
                unroll_product *= lp.extent
                unroll_loops += 1
            elif lp.kind == "parallel":
                par_product *= lp.extent
                par_loops += 1
                if par_loops == 1:
                    task_start = d + 1
            else:
                serial_product *= lp.extent
        if par_loops:
            self.parallel_instances += instances
            self.parallel_tasks += par_product
        vector = next((lp for lp in reversed(loops) if lp.kind == "vectorized"), None)
        counter = _OpCounter()
        counter.visit(s.value)
        for index in s.indices:
            counter.visit(index, True)
        ops = counter.ops
        flops = _flops(ops)

        write, write_prints = _access(s.buffer, s.indices, loops, task_start, self.lets)
        is_update = any(ld.buffer == s.buffer and same(ld.indices, s.indices) for ld in counter.loads)
        load_blocks = []
        sums = [[0.0, 0.0] for _ in _LEVELS]
        classes = [0] * 6
        local = 0
        for ld in counter.loads:
            block, prints = _access(ld.buffer, ld.indices, loops, task_start, self.lets)
            load_blocks.append((prints[_TASK][1], block))
            for level, (b, n) in enumerate(prints):
                sums[level][0] += b
                sums[level][1] += n
            classes[int(block[_AT["stride_inner_class"]])] += 1
            if block[_AT["stride_vector_class"]] >= 0:
                classes[3 + int(block[_AT["stride_vector_class"]])] += 1
            local += int(block[_AT["local"]])
        for buffer, fetched in self.pending_fetches:
            reads = [_first_address(ld.buffer, ld.indices, loops, self.lets) for ld in counter.loads
                     if ld.buffer is buffer]
            if reads:
                ahead = abs(fetched - min(reads, key=lambda a: abs(fetched - a))) * itemsize(buffer.dtype)
                self.prefetch_ahead = max(self.prefetch_ahead, ahead)
        self.pending_fetches = []
        dominant = max(load_blocks, key=lambda t: t[0])[1] if load_blocks else [0.0] * _ACCESS_LEN
        all_bytes = write_prints[_ALL][0] + sums[_ALL][0]
        vec = [
            _log(instances), float(len(loops)),
            _log(loops[-1].extent) if loops else 0.0, _log(loops[0].extent) if loops else 0.0,
            _log(vector.extent) if vector else 0.0,
            1.0 if loops and loops[-1].kind == "vectorized" else 0.0,
            _log(vec_product), _log(unroll_product), float(unroll_loops),
            _log(par_product), float(par_loops), _log(serial_product),
            1.0 if guarded else 0.0, 1.0 if is_update else 0.0,
            *(_log(ops[op] * instances) for op in _OPS),
            _log(flops * instances), _log(flops * instances / max(all_bytes, 1.0)),
            float(len(counter.loads)), float(local), *(float(c) for c in classes),
            *(_log(b) for b, _ in sums), *(_log(n) for _, n in sums),
            *write, *dominant,
        ]
        self.stores.append((instances, len(self.stores), vec, flops * instances, all_bytes,
                            write_prints[_TASK][1] + sums[_TASK][1], write_prints[_ALL][1] + sums[_ALL][1]))


def loop_features(func: S.PrimFunc) -> np.ndarray:
    """The fixed-length feature vector (``len(FEATURE_NAMES)`` float64 entries) of a lowered
    kernel; see the module docstring and ``FEATURE_DOCS`` for the entries.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import create_schedule, lower
        >>> A = placeholder((64,), name="A"); B = compute((64,), lambda i: A[i] + 1.0, name="B")
        >>> x = loop_features(lower(create_schedule(B), [A, B]))
        >>> x.shape == (len(FEATURE_NAMES),), float(x[FEATURE_NAMES.index("store0.instances")])  # log2(1 + 64)
        (True, 6.022367813028454)
    """
    if not isinstance(func, S.PrimFunc):
        raise TypeError(f"loop_features takes a lowered PrimFunc, got {type(func).__name__}")
    walk = _Walk()
    walk.visit(func.body, False)
    out = np.zeros(len(FEATURE_NAMES), dtype=np.float64)
    ranked = sorted(walk.stores, key=lambda t: (-t[0], t[1]))
    for slot, store in enumerate(ranked[:TOP_STORES]):
        out[slot * _STORE_LEN:(slot + 1) * _STORE_LEN] = store[2]
    total_instances = sum(t[0] for t in walk.stores)
    total_flops = sum(t[3] for t in walk.stores)
    total_bytes = sum(t[4] for t in walk.stores)
    out[TOP_STORES * _STORE_LEN:] = [
        float(len(walk.stores)), float(walk.loop_count), float(walk.max_depth), float(walk.guards),
        _log(total_instances), _log(total_flops), _log(total_bytes),
        _log(sum(t[5] for t in walk.stores)), _log(sum(t[6] for t in walk.stores)),
        _log(total_flops / max(total_bytes, 1.0)),
        _log(walk.outer_parallel if walk.parallel_launches else 0), _log(walk.parallel_launches),
        _log(walk.parallel_instances / max(walk.parallel_tasks, 1)),
        _log(walk.alloc_local), _log(walk.alloc_local_max), _log(walk.alloc_global), float(walk.allocs),
        _log(walk.prefetches), _log(walk.prefetch_ahead),
    ]
    return out


# ---------------------------------------------------------------------------- knob values

def _knob_encoding(knob) -> str:
    values = knob.candidates
    if knob.kind == "split":
        return "split"
    if knob.kind in ("reorder", "annotate"):
        return knob.kind
    if all(isinstance(v, bool) for v in values):
        return "bool"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return "number"
    return "onehot"


def _annotate_options(knob) -> list:
    options: list = []
    for cand in knob.candidates:
        for o in cand:
            if o not in options:
                options.append(o)
    return options


def _signed_log(v: float) -> float:
    return math.copysign(math.log2(1.0 + abs(v)), v)


def config_feature_names(space: ConfigSpace) -> list[str]:
    """Names of the entries of ``config_features(space, ...)``, e.g. ``tile_j`` or
    ``order=ji``.

    Example:
        >>> s = ConfigSpace(); s.define_knob("vector", [8, 16]); s.define_knob("order", ["ij", "ji"])
        >>> config_feature_names(s)
        ['vector', 'order=ij', 'order=ji']
    """
    names = []
    for knob in space.knobs.values():
        enc = _knob_encoding(knob)
        if enc == "split":
            names += [f"{knob.name}[{i}]" for i in range(1, len(knob.candidates[0]))]
        elif enc == "reorder":
            names += [f"{knob.name}[{i}]" for i in range(len(knob.candidates[0]))]
        elif enc == "annotate":
            names += [f"{knob.name}[{i}]={o}" for i in range(len(knob.candidates[0]))
                      for o in _annotate_options(knob)]
        elif enc in ("bool", "number"):
            names.append(knob.name)
        else:
            names += [f"{knob.name}={_knob_text(v)}" for v in knob.candidates]
    return names


def _knob_text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _encode(knob, value) -> list:
    enc = _knob_encoding(knob)
    if enc == "split":
        return [_signed_log(v) for v in value[1:]]
    if enc == "reorder":
        return [float(v) for v in value]
    if enc == "annotate":
        options = _annotate_options(knob)
        return [1.0 if o == opt else 0.0 for o in value for opt in options]
    if enc == "bool":
        return [1.0 if value else 0.0]
    if enc == "number":
        return [_signed_log(value)]
    pick = knob.candidates.index(value)
    return [1.0 if i == pick else 0.0 for i in range(len(knob.candidates))]


def _encoded_candidates(knob) -> list:
    """The encoding of each candidate of ``knob`` (a list of floats), computed once per knob:
    a search over a large space encodes thousands of points a plan."""
    table = knob.__dict__.get("_encoded")
    if table is None:
        table = [_encode(knob, value) for value in knob.candidates]
        object.__setattr__(knob, "_encoded", table)     # a cache on the frozen knob, not a field
    return table


def config_features(space: ConfigSpace, config: Config) -> np.ndarray:
    """Knob values of ``config`` as numbers: a split's inner tile sizes and a numeric knob as
    ``log2(1 + v)``, a boolean as 0/1, a reorder as its permutation, an annotation and any
    other knob one-hot (by candidate). Length ``len(config_feature_names(space))``;
    ConfigError if ``config`` is not a point of ``space``.

    Example:
        >>> s = ConfigSpace(); s.define_knob("vector", [8, 16]); s.define_knob("order", ["ij", "ji"])
        >>> config_features(s, Config({"vector": 16, "order": "ji"})).tolist()
        [4.087462841250339, 0.0, 1.0]
    """
    return config_features_at(space, space.index_of(config))


def config_features_at(space: ConfigSpace, index: int) -> np.ndarray:
    """``config_features`` of the point at ``index`` of ``space``, read from the index.

    Example:
        >>> s = ConfigSpace(); s.define_knob("vector", [8, 16]); s.define_knob("order", ["ij", "ji"])
        >>> config_features_at(s, 3).tolist() == config_features(s, s.get(3)).tolist()
        True
    """
    out: list[float] = []
    for knob, pick in zip(space.knobs.values(), space.digits(index)):
        out += _encoded_candidates(knob)[pick]
    return np.asarray(out, dtype=np.float64)


def feature_names_of(template) -> list[str]:
    """Names of the entries of ``features_of(template, ...)``: the loop features, then the
    knobs (prefixed ``knob.``).

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import template_for
        >>> A = placeholder((256,), name="A"); t = template_for(compute((256,), lambda i: A[i] + 1.0))
        >>> names = feature_names_of(t); names[-3:]
        ['knob.vector', 'knob.unroll', 'knob.parallel']
        >>> len(names) == len(features_of(t, t.default_config()))
        True
    """
    return list(FEATURE_NAMES) + [f"knob.{n}" for n in config_feature_names(template.space)]


def features_of(template, config: Config) -> np.ndarray:
    """``loop_features`` of the lowered schedule of ``config`` followed by its
    ``config_features``. ConfigError (a ValueError) when ``config`` is not a point of the
    template's space; FeatureError (a ValueError) when the schedule fails to apply or lower,
    naming the config and chaining the cause.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import template_for
        >>> A = placeholder((256,), name="A"); B = compute((256,), lambda i: A[i] + 1.0, name="B")
        >>> t = template_for(B)
        >>> features_of(t, t.space.get(0)).shape == features_of(t, t.space.get(5)).shape
        True
    """
    space = template.space
    space.index_of(config)
    try:
        func = lower(template.apply(config), template.args)
    except ConfigError:
        raise
    except Exception as err:  # any failure to schedule or lower this candidate
        raise FeatureError(f"cannot lower config {config.to_json()} of {template!r}: "
                           f"{type(err).__name__}: {err}") from err
    return np.concatenate([loop_features(func), config_features(space, config)])


def _features_job(template, values: dict) -> np.ndarray:
    return features_of(template, Config(values))


def features_on(executor, template, configs, timeout: float = 60.0) -> list:
    """``features_of(template, config)`` for each of ``configs``, computed on ``executor``'s
    workers in parallel (each costs a lowering: tens of milliseconds); a row, or the
    FeatureError of a config that did not lower (or whose job failed), per config.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import template_for
        >>> from tilefuse.autotune.executor import Executor, JobResult
        >>> class InProcess(Executor):       # tuning passes default_executor(): worker processes
        ...     def run(self, calls, timeout, parallel=True):
        ...         return [JobResult(value=fn(*args)) for fn, args in calls]
        >>> A = placeholder((256,), name="A"); t = template_for(compute((256,), lambda i: A[i] + 1.0))
        >>> rows = features_on(InProcess(), t, [t.space.get(0), t.space.get(5)])
        >>> [row.tolist() == features_of(t, t.space.get(i)).tolist() for row, i in zip(rows, [0, 5])]
        [True, True]
    """
    configs = list(configs)
    if not configs:
        return []
    found = []
    for config, job in zip(configs, executor.run([(_features_job, (template, dict(c.values))) for c in configs],
                                                 timeout, parallel=True)):
        if job.ok:
            found.append(np.asarray(job.value, dtype=np.float64))
        else:       # the worker's message: FeatureError's own, or how the job died
            found.append(FeatureError(f"config {config.to_json()}: {job.error}: {job.message.splitlines()[0] if job.message else ''}"))
    return found

