"""Loop IR -> LLVM IR (llvmlite).

* Buffers become ``noalias`` pointer parameters with a known alignment (not an output that may
  be passed as one of its inputs, ``tensorir.in_place``, nor those inputs); bool is one byte in
  memory and ``i1`` in registers.
* ``let v = ramp(min, 1, L)`` (a vectorized loop, ``passes.vectorize_loops``) opens a vector
  region: ``v`` is the vector ``<min, min+1, ..., min+L-1>`` and every expression that depends
  on it is an ``<L x T>`` value.
  Loads and stores whose flat index is ``1 * lane + rest`` are contiguous vector accesses.
  Unmasked loads whose lanes sit at offsets known at compile time within a short span (a
  stride of 2: ``2 * lane + rest``; an upsampling's ``lane // 2 + rest``) are one contiguous
  load of the span and a shuffle. Other lane-dependent accesses are gathers / scatters. Under
  a lane-dependent condition they are masked (``llvm.masked.*``), so a tail needs no scalar
  loop.
* A ``Prefetch`` is ``llvm.prefetch`` (locality 3, data cache) of its address, once per cache
  line that a contiguous vector of lanes spans.
* ``serial`` loops are plain loops; unrolled loops are gone (``passes.unroll_loops``).
* A ``ParallelFor`` (``passes.outline_parallel_loops``) becomes ``void body(i64 begin, i64 end,
  ptr closure)``, run by ``tilefuse_parallel_for`` on the native thread pool, over the closure
  the node names. The body calls an always-inline helper whose buffer parameters are
  ``noalias`` again, so alias facts survive outlining. Its buffers too large for the stack
  are allocated once per call of the body (a thread's chunk of iterations), not once per
  iteration: each is one ``aligned_alloc`` and ``free`` a thread, where one per iteration
  (attention's blocks of scores) let glibc hand the memory back and fault it in again.
* Float arithmetic carries the ``contract`` flag (FMA formation) by default, all fast-math
  flags only when the caller asks for them.
"""
from __future__ import annotations

import functools
import itertools

import llvmlite.ir as ir

from .. import dtype as dt
from .. import expr as E
from .. import stmt as S
from ..simplify import COMPARISONS, Linear, fold_int, linear_coefficient, simplify, sum_of_simplified
from ..runtime.abi import (ARRAY_DATA_OFFSET, ARRAY_ENTRY_SUFFIX, PACKED_ENTRY_SUFFIX, PARALLEL_FOR, PARAM_ALIGN,
                           STATUS_BAD_ARGUMENT, STATUS_NO_MEMORY, STATUS_OK)
from ..node import IdentityMemo, same
from ..runtime.scratch import SCRATCH
from ..walk import statements, substitute, walk
from ..visitor import Visitor
from ..errors import TilefuseError

ALLOC_ALIGN = 64
STACK_LIMIT = 64 * 1024  # bytes; larger allocations go to the heap
CACHE_LINE = 64          # bytes a prefetch brings in
MAX_PATTERN_SPAN = 4     # a read whose lanes span up to this many vectors is a wide load and a shuffle

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
_SCALAR = {"float32": ir.FloatType(), "float64": ir.DoubleType(), "int8": I8, "uint8": I8,
           "int32": I32, "int64": I64, "uint32": I32, "uint64": I64, "bool": I1}


class CodegenError(TilefuseError, RuntimeError):
    """The loop IR holds something the code generator cannot emit."""


def llvm_type(dtype: str) -> ir.Type:
    """The register type of ``dtype`` (bool is ``i1``).

    Example:
        >>> str(llvm_type("float32"))
        'float'
    """
    return _SCALAR[dtype]


def memory_type(dtype: str) -> ir.Type:
    """The in-memory element type of ``dtype`` (bool is ``i8``).

    Example:
        >>> str(memory_type("bool"))
        'i8'
    """
    return I8 if dtype == "bool" else _SCALAR[dtype]


class _Scope:
    """Integer index arithmetic already emitted (expression -> value) that code emitted later
    in this scope may reuse: a function body, a loop body or a branch (``block``: its values
    do not reach the code after it), or the copy of a let-bound variable (``binds``: values
    that read the variable belong to the copy; the others reach the next copy)."""

    __slots__ = ("values", "binds", "block")

    def __init__(self, binds=frozenset(), block=False):
        self.values, self.binds, self.block = {}, binds, block


class _Ctx:
    """Emission state: where we are and what names mean."""

    def __init__(self, func, builder, env, buffers):
        self.func, self.builder = func, builder
        self.env = env            # var uid -> ir.Value
        self.buffers = buffers    # buffer uid -> ir.Value (pointer)
        self.lanes = None         # int while inside a vectorized loop
        self.lane_var = None
        self.lane_start = None    # the vectorized loop's first value (an Expr)
        self.mask = None          # <L x i1> while inside a lane-dependent condition
        self.vector_vars = set()  # uids of vars bound to vector values
        self.scopes = (_Scope(block=True),)   # outermost first

    def child(self, **changes):
        c = _Ctx.__new__(_Ctx)
        c.__dict__.update(self.__dict__)
        c.env = dict(self.env)
        c.vector_vars = set(self.vector_vars)
        c.__dict__.update(changes)
        return c

    def enter(self, binds=frozenset(), block=False, **changes):
        """A child context in a new scope: a block (loop body, branch) or a let's copy."""
        c = self.child(**changes)
        c.scopes = self.scopes + (_Scope(binds, block),)
        return c


class CodeGen(Visitor):
    """Emit one PrimFunc as an LLVM module with an entry function of the same name.

    Example:
        >>> from tilefuse.tensorir.expr import Buffer, var, const
        >>> from tilefuse.tensorir.stmt import For, BufferStore, PrimFunc
        >>> A = Buffer("A", (4,), "float32"); i = var("i")
        >>> f = PrimFunc("fill", (A,), For(i, const(0), const(4), "serial", BufferStore(A, const(1.0), (i,))))
        >>> 'define i32 @"fill"' in str(CodeGen(f).module)
        True
    """

    def __init__(self, func: S.PrimFunc, fast_math: bool = False, triple: str = "", data_layout: str = "",
                 shares: dict | None = None, target=None):
        super().__init__()
        self.prim = func
        self.target = target      # the Target the code is for (its math may use its instructions), or None
        # outputs that may be passed as the very array of some inputs (tensorir.in_place): their
        # pointers, and those inputs', are not noalias, and the array entry lets each pair coincide
        self.shares = dict(shares or {})
        self._aliased = {func.params[k].uid for out, ins in self.shares.items() for k in (out, *ins)}
        self.flags = ("fast",) if fast_math else ("contract",)
        self.module = ir.Module(name=func.name)
        self.module.triple = triple
        self.module.data_layout = data_layout
        self._outlined = itertools.count()
        self._alloca_builders: dict[str, ir.IRBuilder] = {}
        self._task_heap: dict[str, list] = {}       # a parallel loop's body -> its large buffers
        self._flat_index = IdentityMemo(flat_index)     # accesses repeat (unrolled copies)
        self._var_uids = IdentityMemo(var_uids)
        self._linear_coefficient = IdentityMemo(linear_coefficient)
        # a value read from memory may change between two uses (a store in between): never reused
        self._reads_no_memory = IdentityMemo(lambda e: not any(isinstance(n, (E.BufferLoad, E.Call)) for n in walk(e)))
        self._emit_entry()

    # ------------------------------------------------------------------ functions
    def _emit_entry(self):
        params = self.prim.params
        types = [PTR if isinstance(p, E.Buffer) else _abi_type(p.dtype) for p in params]
        fn = ir.Function(self.module, ir.FunctionType(I32, types), name=self.prim.name)
        fn.attributes.add("nounwind")
        env, buffers = {}, {}
        for p, arg in zip(params, fn.args):
            arg.name = p.name
            if isinstance(p, E.Buffer):
                if p.uid not in self._aliased:
                    arg.add_attribute("noalias")
                arg.attributes.align = PARAM_ALIGN
                buffers[p.uid] = arg
        builder = self._begin_function(fn)
        for p, arg in zip(params, fn.args):
            if isinstance(p, E.Var):
                env[p.uid] = builder.trunc(arg, I1) if p.dtype == "bool" else arg
        ctx = _Ctx(fn, builder, env, buffers)
        self._scratch_bytes, self._scratch_slot = 0, None
        self.visit(self.prim.body, ctx)
        ctx.builder.ret(constant(I32, STATUS_OK))
        self._take_scratch(fn)
        self._end_function(fn)
        self._emit_array_entry(fn)
        self._emit_packed_entry(fn)

    def _scratch_buffer(self, ctx, nbytes: int, name: str) -> ir.Value:
        """A large buffer of the entry function (not inside a parallel loop) at its own offset
        in this thread's scratch block (``runtime/scratch.py``), whose start the entry block
        stores in a stack slot (``_take_scratch``)."""
        if self._scratch_slot is None:
            self._scratch_slot = self._entry_alloca(ctx.func, PTR, "scratch", 8)
        offset, self._scratch_bytes = self._scratch_bytes, self._scratch_bytes + -(-nbytes // ALLOC_ALIGN) * ALLOC_ALIGN
        base = ctx.builder.load(self._scratch_slot, typ=PTR)
        return ctx.builder.gep(base, [constant(I64, offset)], name=name, source_etype=I8)

    def _take_scratch(self, fn: ir.Function) -> None:
        """In the entry block, once the body has placed its large buffers: ask for a scratch
        block of their total size and keep its start in the slot they read, or return
        STATUS_NO_MEMORY when it cannot be had."""
        if self._scratch_slot is None:
            return
        entry = self._alloca_builders[fn.name]
        base = entry.call(self._declare(SCRATCH, PTR, [I64]), [constant(I64, self._scratch_bytes)], name="scratch")
        entry.store(base, self._scratch_slot)
        failed = entry.icmp_unsigned("==", base, constant(PTR, None))
        no_memory = fn.append_basic_block("no_memory")
        ir.IRBuilder(no_memory).ret(constant(I32, STATUS_NO_MEMORY))
        entry.cbranch(failed, no_memory, fn.blocks[1])
        self._alloca_builders[fn.name] = None        # terminated: _end_function adds no branch

    def _emit_array_entry(self, entry: ir.Function) -> None:
        """``i32 <name>.arrays(PyArrayObject *..., scalars...)``: read each array's data pointer
        (at ``ARRAY_DATA_OFFSET``), check alignment and that no output overlaps another
        argument (an input it may be computed over in place only as the very same array), then
        call the entry. Lets the runtime skip per-array pointer lookups."""
        params = self.prim.params
        fn = ir.Function(self.module, entry.function_type, name=self.prim.name + ARRAY_ENTRY_SUFFIX)
        fn.attributes.add("nounwind")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        args, spans = [], []
        written = written_buffer_uids(self.prim)
        coinciding = {(params[out].uid, params[k].uid) for out, ins in self.shares.items() for k in ins}
        for p, arg in zip(params, fn.args):
            if not isinstance(p, E.Buffer):
                args.append(arg)
                continue
            field = b.gep(arg, [constant(I64, ARRAY_DATA_OFFSET)], source_etype=I8)
            data = b.load(field, typ=PTR)
            args.append(data)
            nbytes = p.size * dt.itemsize(p.dtype)
            if nbytes:
                lo = b.ptrtoint(data, I64)
                misaligned = b.icmp_unsigned("!=", b.and_(lo, constant(I64, PARAM_ALIGN - 1)), constant(I64, 0))
                with b.if_then(misaligned, likely=False):
                    b.ret(constant(I32, STATUS_BAD_ARGUMENT))
                spans.append((p, lo, b.add(lo, constant(I64, nbytes))))
        for w, w_lo, w_hi in spans:
            if w.uid not in written:
                continue
            for o, o_lo, o_hi in spans:
                if o is w:
                    continue
                overlap = b.and_(b.icmp_unsigned("<", o_lo, w_hi), b.icmp_unsigned("<", w_lo, o_hi))
                if (w.uid, o.uid) in coinciding:         # the same array (same size: same shape and dtype) is fine
                    overlap = b.and_(overlap, b.icmp_unsigned("!=", o_lo, w_lo))
                with b.if_then(overlap, likely=False):
                    b.ret(constant(I32, STATUS_BAD_ARGUMENT))
        b.ret(b.call(entry, args))

    def _emit_packed_entry(self, entry: ir.Function) -> None:
        """``i32 <name>.packed(void **pointers)``, for a kernel of arrays only: load each
        argument's data pointer from ``pointers`` and call the entry, checking nothing (the
        caller's arrays are aligned and apart, as a compiled graph's are). Native code runs a
        graph's kernels one after another through it (``runtime.kernel_sequence``)."""
        params = self.prim.params
        if not all(isinstance(p, E.Buffer) for p in params):
            return
        fn = ir.Function(self.module, ir.FunctionType(I32, [PTR]), name=self.prim.name + PACKED_ENTRY_SUFFIX)
        fn.attributes.add("nounwind")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        pointers = fn.args[0]
        args = [b.load(b.gep(pointers, [constant(I64, k)], source_etype=PTR), typ=PTR) for k in range(len(params))]
        b.ret(b.call(entry, args))

    def _begin_function(self, fn: ir.Function) -> ir.IRBuilder:
        """Give ``fn`` an entry block that holds only stack allocations, and return a builder
        on the block after it where the code goes."""
        self._alloca_builders[fn.name] = ir.IRBuilder(fn.append_basic_block("entry"))
        return ir.IRBuilder(fn.append_basic_block("body"))

    def _end_function(self, fn: ir.Function) -> None:
        entry = self._alloca_builders.pop(fn.name)
        if entry is not None:
            entry.branch(fn.blocks[1])

    def _entry_alloca(self, func: ir.Function, typ: ir.Type, name: str, align: int) -> ir.Value:
        """Stack memory in the function's entry block (so loops do not grow the stack)."""
        slot = self._alloca_builders[func.name].alloca(typ, name=name)
        slot.align = align
        slot.type = PTR  # llvmlite types allocas as typed pointers; LLVM's pointers are opaque
        return slot

    def _declare(self, name: str, ret: ir.Type, args: list) -> ir.Function:
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        fn = ir.Function(self.module, ir.FunctionType(ret, args), name=name)
        return fn

    # ------------------------------------------------------------------ statements
    def generic_visit(self, node, ctx):
        raise CodegenError(f"cannot emit a {type(node).__name__} node")

    def visit_SeqStmt(self, s, ctx):
        for c in s.stmts:
            self.visit(c, ctx)

    def visit_LetStmt(self, s, ctx):
        value = self.visit(s.value, ctx)
        if isinstance(s.value, E.Ramp):      # a vectorized loop's variable: a vector region
            if ctx.lanes is not None:
                raise CodegenError(f"ramp {s.var.name} inside the vector region of {ctx.lane_var.name}")
            inner = ctx.enter({s.var.uid}, lanes=s.value.lanes, lane_var=s.var, lane_start=s.value.base, mask=None)
        else:
            inner = ctx.enter({s.var.uid})
        inner.env[s.var.uid] = value
        if isinstance(value.type, ir.VectorType):
            inner.vector_vars.add(s.var.uid)
        self.visit(s.body, inner)
        ctx.builder = inner.builder

    def visit_BufferStore(self, s, ctx):
        self._store(s.buffer, s.indices, s.value, ctx)

    def visit_Prefetch(self, s, ctx):
        """``llvm.prefetch`` of the element's line; in a vector region, of lane 0's line and, when
        the lanes are contiguous, of every further line they span. Level 1 is locality 3
        (x86's prefetcht0: into L1), level 2 locality 2 (prefetcht1: into L2)."""
        base = ctx.buffers.get(s.buffer.uid)
        if base is None:
            raise CodegenError(f"buffer {s.buffer.name} is prefetched but neither a parameter nor allocated")
        b = ctx.builder
        flat = self._flat_index(s.buffer, s.indices)
        offset = self.visit(flat, ctx)
        lines = 1
        if isinstance(offset.type, ir.VectorType):
            offset = b.extract_element(offset, constant(I32, 0))
            lin = self._linear_coefficient(flat, ctx.lane_var)
            if lin is not None and lin[0] == 1:
                lines = -(-ctx.lanes * dt.itemsize(s.buffer.dtype) // CACHE_LINE)
        first = b.gep(base, [offset], source_etype=memory_type(s.buffer.dtype))   # not inbounds: may lie outside
        fn = self._declare("llvm.prefetch.p0", ir.VoidType(), [PTR, I32, I32, I32])
        for k in range(lines):
            ptr = first if k == 0 else b.gep(first, [constant(I64, k * CACHE_LINE)], source_etype=I8)
            b.call(fn, [ptr, constant(I32, int(s.write)), constant(I32, 4 - s.level), constant(I32, 1)])

    def visit_IfThenElse(self, s, ctx):
        cond = self.visit(s.cond, ctx)
        if isinstance(cond.type, ir.VectorType):
            then_ctx = ctx.child(mask=self._and_mask(ctx, cond))
            self.visit(s.then_body, then_ctx)
            ctx.builder = then_ctx.builder
            if s.else_body is not None:
                inverted = ctx.builder.xor(cond, constant(cond.type, (1,) * ctx.lanes))
                else_ctx = ctx.child(mask=self._and_mask(ctx, inverted))
                self.visit(s.else_body, else_ctx)
                ctx.builder = else_ctx.builder
            return
        decided = _known(cond)
        if decided is not None:              # decided at compile time (an unrolled copy's guard)
            body = s.then_body if decided else s.else_body
            if body is not None:
                self.visit(body, ctx)
            return
        b = ctx.builder
        then_bb = ctx.func.append_basic_block("if.then")
        else_bb = ctx.func.append_basic_block("if.else") if s.else_body is not None else None
        end_bb = ctx.func.append_basic_block("if.end")
        b.cbranch(cond, then_bb, else_bb or end_bb)
        for body, bb in ((s.then_body, then_bb), (s.else_body, else_bb)):
            if bb is None:
                continue
            inner = ctx.enter(block=True, builder=ir.IRBuilder(bb))
            self.visit(body, inner)
            inner.builder.branch(end_bb)
        ctx.builder = ir.IRBuilder(end_bb)

    def visit_Allocate(self, s, ctx):
        buf = s.buffer
        nbytes = buf.size * dt.itemsize(buf.dtype)
        inner = ctx.child()
        if nbytes <= STACK_LIMIT:
            ptr = self._entry_alloca(ctx.func, ir.ArrayType(memory_type(buf.dtype), max(buf.size, 1)), buf.name,
                                     ALLOC_ALIGN)
        elif ctx.func.name == self.prim.name:         # not per task of a parallel loop: in the scratch block
            ptr = self._scratch_buffer(ctx, nbytes, buf.name)
        else:       # in a parallel loop's body: once per task (a thread's chunk of iterations)
            alloc = self._declare("aligned_alloc", PTR, [I64, I64])
            rounded = (max(nbytes, 1) + ALLOC_ALIGN - 1) // ALLOC_ALIGN * ALLOC_ALIGN
            ptr = self._alloca_builders[ctx.func.name].call(
                alloc, [constant(I64, ALLOC_ALIGN), constant(I64, rounded)], name=buf.name)
            self._task_heap[ctx.func.name].append(ptr)
        inner.buffers = {**ctx.buffers, buf.uid: ptr}
        self.visit(s.body, inner)
        ctx.builder = inner.builder

    def visit_For(self, s, ctx):
        with self.inside(s):
            self._emit_loop(s, ctx)

    def _emit_loop(self, s, ctx):
        if s.kind != "serial":
            raise CodegenError(f"loop {s.var.name} ({s.kind}) reached code generation; run "
                               f"tensorir.pipeline.CODEGEN_PASSES first")
        start, extent = self.visit(s.min, ctx), self.visit(s.extent, ctx)
        end = _fold(E.Add, start, extent) or ctx.builder.add(start, extent)
        self._serial_loop(s.var, start, end, s.body, ctx)

    def _serial_loop(self, var, start, end, body, ctx):
        b = ctx.builder
        pre = b.block
        header = ctx.func.append_basic_block(f"for.{var.name}")
        body_bb = ctx.func.append_basic_block(f"for.{var.name}.body")
        exit_bb = ctx.func.append_basic_block(f"for.{var.name}.end")
        b.branch(header)
        hb = ir.IRBuilder(header)
        phi = hb.phi(I64, name=var.name)
        phi.add_incoming(start, pre)
        hb.cbranch(hb.icmp_signed("<", phi, end), body_bb, exit_bb)
        inner = ctx.enter({var.uid}, block=True, builder=ir.IRBuilder(body_bb))
        inner.env[var.uid] = phi
        self.visit(body, inner)
        nxt = inner.builder.add(phi, constant(I64, 1), flags=["nsw"])
        phi.add_incoming(nxt, inner.builder.block)
        inner.builder.branch(header)
        ctx.builder = ir.IRBuilder(exit_bb)

    def visit_ParallelFor(self, s, ctx):
        with self.inside(s):
            self._parallel_loop(s, ctx)

    def _parallel_loop(self, s, ctx):
        body, captured_vars, captured_bufs = s.body, s.params, s.buffers
        values = [ctx.env[v.uid] for v in captured_vars] + [self.visit(s.min, ctx)]
        k = next(self._outlined)
        name = f"{self.prim.name}.parallel{k}"
        # impl(ptr noalias buffers..., captured scalars..., i64 begin, i64 end), always inlined
        impl_types = [PTR] * len(captured_bufs) + [v.type for v in values] + [I64, I64]
        impl = ir.Function(self.module, ir.FunctionType(ir.VoidType(), impl_types), name=name + ".impl")
        impl.linkage = "internal"
        impl.attributes.add("alwaysinline")
        impl.attributes.add("nounwind")
        ib = self._begin_function(impl)
        env, buffers = dict(), dict()
        for buf, arg in zip(captured_bufs, impl.args):
            if buf.uid not in self._aliased:
                arg.add_attribute("noalias")
            buffers[buf.uid] = arg
        for v, arg in zip(captured_vars, impl.args[len(captured_bufs):]):
            env[v.uid] = arg
        start, begin, end = impl.args[-3], impl.args[-2], impl.args[-1]
        ictx = _Ctx(impl, ib, env, buffers)
        self._task_heap[impl.name] = []
        self._serial_loop(s.var, ib.add(start, begin), ib.add(start, end), body, ictx)
        for ptr in self._task_heap.pop(impl.name):
            ictx.builder.call(self._declare("free", ir.VoidType(), [PTR]), [ptr])
        ictx.builder.ret_void()
        self._end_function(impl)
        # task(i64 begin, i64 end, ptr closure): unpack the closure and call impl
        closure_type = ir.LiteralStructType([PTR] * len(captured_bufs) + [v.type for v in values])
        task = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [I64, I64, PTR]), name=name)
        task.linkage = "internal"
        task.attributes.add("nounwind")
        tb = ir.IRBuilder(task.append_basic_block("entry"))
        unpacked = []
        for idx, ftype in enumerate(closure_type.elements):
            field = tb.gep(task.args[2], [constant(I32, 0), constant(I32, idx)],
                           inbounds=True, source_etype=closure_type)
            unpacked.append(tb.load(field, typ=ftype))
        tb.call(impl, unpacked + [task.args[0], task.args[1]])
        tb.ret_void()
        # caller: fill the closure and launch
        b = ctx.builder
        closure = self._entry_alloca(ctx.func, closure_type, f"closure{k}", 8)
        fields = [ctx.buffers[buf.uid] for buf in captured_bufs] + values
        for idx, val in enumerate(fields):
            ptr = b.gep(closure, [constant(I32, 0), constant(I32, idx)], inbounds=True,
                        source_etype=closure_type)
            b.store(val, ptr)
        launch = self._declare(PARALLEL_FOR, ir.VoidType(), [PTR, PTR, I64])
        b.call(launch, [task, closure, self.visit(s.extent, ctx)])

    # ------------------------------------------------------------------ memory
    def _access(self, buf, indices, ctx):
        """('scalar', ptr) | ('contiguous', ptr) | ('pattern', (ptr, offsets)) | ('gather',
        <L x ptr>) for an access; a pattern's lanes are at ``ptr + offsets[k]``, offsets known
        at compile time, the lowest 0."""
        base = ctx.buffers.get(buf.uid)
        if base is None:
            raise CodegenError(f"buffer {buf.name} is used but neither a parameter nor allocated")
        elem = memory_type(buf.dtype)
        flat = self._flat_index(buf, indices)
        if ctx.lanes is not None and self._lane_dependent(flat, ctx):
            lin = self._linear_coefficient(flat, ctx.lane_var)
            if lin is not None and lin[0] == 1 and not self._lane_dependent(lin[1], ctx):
                base_offset = self.visit(lin[1], ctx)     # may branch (a masked load): first
                first = self.visit(ctx.lane_start, ctx)  # lane 0 of the ramp
                offset = _fold(E.Add, base_offset, first) or ctx.builder.add(base_offset, first)
                return "contiguous", ctx.builder.gep(base, [offset], inbounds=True, source_etype=elem)
            pattern = self._lane_pattern(flat, ctx)
            if pattern is not None:
                rest, offsets = pattern
                low = min(offsets)
                start = self.visit(simplify(rest + low if low else rest), ctx)
                ptr = ctx.builder.gep(base, [start], inbounds=True, source_etype=elem)
                return "pattern", (ptr, [o - low for o in offsets])
            offsets = self._widen(self.visit(flat, ctx), ctx)
            ptrs = ctx.builder.gep(base, [offsets], inbounds=True, source_etype=elem)
            ptrs.type = ir.VectorType(PTR, ctx.lanes)  # llvmlite does not type vector GEPs
            return "gather", ptrs
        offset = self.visit(flat, ctx)
        return "scalar", ctx.builder.gep(base, [offset], inbounds=True, source_etype=elem)

    def _lane_pattern(self, flat: E.Expr, ctx):
        """(rest, offsets): ``flat`` at lane k is ``rest + offsets[k]`` with ``rest`` the same for
        every lane and the offsets constants spanning at most ``MAX_PATTERN_SPAN`` vectors; or
        None. The lane-dependent terms must read only the lane variable, which must start at a
        constant."""
        if not isinstance(ctx.lane_start, E.Const):
            return None
        lin = Linear.of(flat)
        rest = Linear({}, lin.const, lin.dtype)
        offsets = [0] * ctx.lanes
        for atom, coeff in lin.terms.items():
            if not self._lane_dependent(atom, ctx):
                rest = rest.add(Linear({atom: coeff}, 0, lin.dtype))
                continue
            if any(isinstance(n, E.Var) and n.uid != ctx.lane_var.uid for n in walk(atom)):
                return None
            for k in range(ctx.lanes):
                value = simplify(substitute(atom, {ctx.lane_var: E.Const(ctx.lane_start.value + k, "int64")}))
                if not isinstance(value, E.Const):
                    return None
                offsets[k] += coeff * int(value.value)
        if max(offsets) - min(offsets) >= MAX_PATTERN_SPAN * ctx.lanes:
            return None
        return rest.to_expr(), offsets

    def _pattern_load(self, start, offsets, elem, align, ctx):
        """The lanes at ``start + offsets[k]``: the span they cover read by two loads of the
        largest power of two of elements that fits it, one from each end (one when the span is
        that size), so nothing past the span is read and the loads are legal vector types; then
        one shuffle picks the lanes."""
        b = ctx.builder
        span = max(offsets) + 1
        width = 1 << (span.bit_length() - 1)
        vtype = ir.VectorType(elem, width)
        first = b.load(start, typ=vtype, align=align)
        if width == span:
            second, picks = constant(vtype, None), offsets
        else:
            tail = b.gep(start, [constant(I64, span - width)], inbounds=True, source_etype=elem)
            second = b.load(tail, typ=vtype, align=align)
            picks = [o if o < width else width + o - (span - width) for o in offsets]
        return b.shuffle_vector(first, second, constant(ir.VectorType(I32, ctx.lanes), tuple(picks)))

    def _pattern_pointers(self, start, offsets, elem, ctx):
        """<L x ptr>: ``start + offsets[k]`` for each lane k."""
        steps = constant(ir.VectorType(I64, ctx.lanes), tuple(offsets))
        ptrs = ctx.builder.gep(start, [steps], inbounds=True, source_etype=elem)
        ptrs.type = ir.VectorType(PTR, ctx.lanes)   # llvmlite does not type vector GEPs
        return ptrs

    def _lane_dependent(self, e: E.Expr, ctx) -> bool:
        return not self._var_uids(e).isdisjoint(ctx.vector_vars)

    def _load(self, e: E.BufferLoad, ctx):
        buf = e.buffer
        elem = memory_type(buf.dtype)
        align = dt.itemsize(buf.dtype)
        kind, ptr = self._access(buf, e.indices, ctx)
        b = ctx.builder
        if kind == "pattern" and ctx.mask is None:
            return self._from_memory(self._pattern_load(*ptr, elem, align, ctx), buf.dtype, b)
        if kind == "pattern":
            kind, ptr = "gather", self._pattern_pointers(*ptr, elem, ctx)
        if kind == "scalar":
            if ctx.mask is None:
                value = b.load(ptr, typ=elem, align=align)
            else:
                value = self._guarded_scalar_load(ptr, elem, align, ctx)
                b = ctx.builder
        else:
            vtype = ir.VectorType(elem, ctx.lanes)
            mask = ctx.mask if ctx.mask is not None else None
            if kind == "contiguous" and mask is None:
                value = b.load(ptr, typ=vtype, align=align)
            elif kind == "contiguous":
                fn = self._declare(f"llvm.masked.load.{_vname(vtype)}.p0", vtype, [PTR, I32, mask.type, vtype])
                value = b.call(fn, [ptr, constant(I32, align), mask, constant(vtype, None)])
            else:
                mask = mask if mask is not None else self._all_true(ctx.lanes)
                ptrs_t = ir.VectorType(PTR, ctx.lanes)
                fn = self._declare(f"llvm.masked.gather.{_vname(vtype)}.v{ctx.lanes}p0", vtype,
                                   [ptrs_t, I32, mask.type, vtype])
                value = b.call(fn, [ptr, constant(I32, align), mask, constant(vtype, None)])
        return self._from_memory(value, buf.dtype, b)

    def _from_memory(self, value, dtype, b):
        if dtype == "bool":
            value = b.icmp_unsigned("!=", value, constant(value.type, None))
        return value

    def _guarded_scalar_load(self, ptr, elem, align, ctx):
        """A lane-independent load under a lane mask: read only if some lane is active."""
        b = ctx.builder
        any_fn = self._declare(f"llvm.vector.reduce.or.v{ctx.lanes}i1", I1, [ctx.mask.type])
        active = b.call(any_fn, [ctx.mask])
        pre = b.block
        load_bb = ctx.func.append_basic_block("masked.scalar.load")
        end_bb = ctx.func.append_basic_block("masked.scalar.end")
        b.cbranch(active, load_bb, end_bb)
        lb = ir.IRBuilder(load_bb)
        loaded = lb.load(ptr, typ=elem, align=align)
        lb.branch(end_bb)
        eb = ir.IRBuilder(end_bb)
        phi = eb.phi(elem)
        phi.add_incoming(loaded, load_bb)
        phi.add_incoming(constant(elem, None), pre)
        ctx.builder = eb
        return phi

    def _store(self, buf, indices, value_expr, ctx):
        value = self.visit(value_expr, ctx)
        kind, ptr = self._access(buf, indices, ctx)
        b = ctx.builder
        align = dt.itemsize(buf.dtype)
        if kind == "scalar":
            if isinstance(value.type, ir.VectorType):
                raise CodegenError(f"store to {buf.name}{list(map(str, indices))} does not vary along the "
                                   f"vectorized loop {ctx.lane_var.name} but its value does")
            value = self._to_memory(value, buf.dtype, b)
            if ctx.mask is None:
                b.store(value, ptr, align=align)
                return
            any_fn = self._declare(f"llvm.vector.reduce.or.v{ctx.lanes}i1", I1, [ctx.mask.type])
            with b.if_then(b.call(any_fn, [ctx.mask])):
                b.store(value, ptr, align=align)
            return
        value = self._to_memory(self._widen(value, ctx), buf.dtype, b)
        vtype = value.type
        if kind == "pattern":
            kind, ptr = "gather", self._pattern_pointers(*ptr, memory_type(buf.dtype), ctx)
        if kind == "contiguous" and ctx.mask is None:
            b.store(value, ptr, align=align)
        elif kind == "contiguous":
            fn = self._declare(f"llvm.masked.store.{_vname(vtype)}.p0", ir.VoidType(), [vtype, PTR, I32, ctx.mask.type])
            b.call(fn, [value, ptr, constant(I32, align), ctx.mask])
        else:
            mask = ctx.mask if ctx.mask is not None else self._all_true(ctx.lanes)
            ptrs_t = ir.VectorType(PTR, ctx.lanes)
            fn = self._declare(f"llvm.masked.scatter.{_vname(vtype)}.v{ctx.lanes}p0", ir.VoidType(),
                               [vtype, ptrs_t, I32, mask.type])
            b.call(fn, [value, ptr, constant(I32, align), mask])

    def _to_memory(self, value, dtype, b):
        if dtype != "bool":
            return value
        target = ir.VectorType(I8, value.type.count) if isinstance(value.type, ir.VectorType) else I8
        return b.zext(value, target)

    # ------------------------------------------------------------------ vectors
    def _splat(self, value, lanes, b):
        vtype = ir.VectorType(value.type, lanes)
        one = b.insert_element(poison(vtype), value, constant(I32, 0))
        return b.shuffle_vector(one, poison(vtype), constant(ir.VectorType(I32, lanes), None))

    def _widen(self, value, ctx):
        if ctx.lanes is None or isinstance(value.type, ir.VectorType):
            return value
        return self._splat(value, ctx.lanes, ctx.builder)

    def _all_true(self, lanes):
        return constant(ir.VectorType(I1, lanes), (1,) * lanes)

    def _and_mask(self, ctx, cond):
        return cond if ctx.mask is None else ctx.builder.and_(ctx.mask, cond)

    def _match(self, a, b, ctx):
        if isinstance(a.type, ir.VectorType) or isinstance(b.type, ir.VectorType):
            return self._widen(a, ctx), self._widen(b, ctx)
        return a, b

    # ------------------------------------------------------------------ expressions
    def visit_Const(self, e, ctx):
        t = llvm_type(e.dtype)
        if e.dtype == "bool":
            return constant(t, int(bool(e.value)))
        if dt.is_float(e.dtype):
            return ir.Constant(t, float(e.value))
        return constant(t, int(e.value) & ((1 << t.width) - 1))

    def visit_Var(self, e, ctx):
        try:
            return ctx.env[e.uid]
        except KeyError:
            raise CodegenError(f"variable {e.name} is used but not defined (not a parameter, loop or let)") from None

    visit_IterVar = visit_Var

    def visit_BufferLoad(self, e, ctx):
        return self._load(e, ctx)

    def visit_Ramp(self, e, ctx):
        start = self.visit(e.base, ctx)
        base = self._splat(start, e.lanes, ctx.builder)
        steps = constant(ir.VectorType(start.type, e.lanes), tuple(k * e.stride for k in range(e.lanes)))
        return ctx.builder.add(base, steps)

    def _binary(self, e, ctx):
        if e.dtype in _INDEX_TYPES and self._reads_no_memory(e):     # index arithmetic: emitted once per
            scope = self._scope_of(e, ctx)                             # scope that can reuse it
            value = scope.values.get(e)
            if value is None:
                value = scope.values[e] = self._arithmetic(e, ctx)
            return value
        return self._arithmetic(e, ctx)

    def _scope_of(self, e, ctx) -> _Scope:
        """The outermost scope whose emitted values reach here and that binds every variable
        ``e`` reads: the innermost block, or the innermost copy of a variable of ``e``."""
        uids = self._var_uids(e)
        for scope in reversed(ctx.scopes):
            if scope.block or not uids.isdisjoint(scope.binds):
                return scope
        raise AssertionError("the function body is a block scope")

    def _arithmetic(self, e, ctx):
        a, b = self._match(self.visit(e.a, ctx), self.visit(e.b, ctx), ctx)
        bld, dtype = ctx.builder, e.dtype
        cls = type(e)
        folded = _fold(cls, a, b) if dtype in _INDEX_TYPES else None    # signed: floor division as Python's
        if folded is not None:
            return folded
        if dt.is_float(dtype):
            if cls is E.Add: return bld.fadd(a, b, flags=self.flags)
            if cls is E.Sub: return bld.fsub(a, b, flags=self.flags)
            if cls is E.Mul: return bld.fmul(a, b, flags=self.flags)
            if cls is E.Div: return bld.fdiv(a, b, flags=self.flags)
            if cls in (E.FloorDiv, E.FloorMod):
                from .mathlib import emit_intrinsic
                q = emit_intrinsic(bld, "floor", [bld.fdiv(a, b, flags=self.flags)], self.flags)
                return q if cls is E.FloorDiv else bld.fsub(a, bld.fmul(q, b, flags=self.flags), flags=self.flags)
            if cls in (E.Min, E.Max):
                name = "llvm.minimum" if cls is E.Min else "llvm.maximum"
                fn = self._declare(f"{name}.{_vname(a.type)}", a.type, [a.type, a.type])
                return bld.call(fn, [a, b])
        signed = dt.is_signed(dtype)
        if cls is E.Add: return bld.add(a, b)
        if cls is E.Sub: return bld.sub(a, b)
        if cls is E.Mul: return bld.mul(a, b)
        if cls in (E.Min, E.Max):
            name = ("llvm.smin" if signed else "llvm.umin") if cls is E.Min else ("llvm.smax" if signed else "llvm.umax")
            fn = self._declare(f"{name}.{_vname(a.type)}", a.type, [a.type, a.type])
            return bld.call(fn, [a, b])
        if cls in (E.FloorDiv, E.FloorMod):
            return self._int_divmod(cls, a, b, e.b, signed, bld)
        if cls in (E.And, E.Or):
            return bld.and_(a, b) if cls is E.And else bld.or_(a, b)
        raise CodegenError(f"cannot emit {cls.__name__} on {dtype}")

    def _int_divmod(self, cls, a, b, divisor_expr, signed, bld):
        const_ok = isinstance(divisor_expr, E.Const) and divisor_expr.value not in (0, -1)
        t = a.type
        zero, one = constant(t, None), _const(t, 1)
        if not const_ok:  # x // 0 and x % 0 give 0, and INT_MIN // -1 wraps, instead of trapping
            is_zero = bld.icmp_signed("==", b, zero)
            is_neg_one = bld.icmp_signed("==", b, _const(t, -1)) if signed else None
            bad = bld.or_(is_zero, is_neg_one) if signed else is_zero
            safe_b = bld.select(bad, one, b)
        else:
            safe_b = b
        if not signed:
            result = bld.udiv(a, safe_b) if cls is E.FloorDiv else bld.urem(a, safe_b)
        else:
            q, r = bld.sdiv(a, safe_b), bld.srem(a, safe_b)
            # floor semantics: adjust when the remainder is non-zero and has the divisor's opposite sign
            fix = bld.and_(bld.icmp_signed("!=", r, zero), bld.icmp_signed("<", bld.xor(r, safe_b), zero))
            if cls is E.FloorDiv:
                result = bld.sub(q, bld.zext(fix, t))
            else:
                result = bld.add(r, bld.select(fix, safe_b, zero))
        if not const_ok:
            if signed:
                neg = bld.sub(zero, a) if cls is E.FloorDiv else zero
                result = bld.select(is_neg_one, neg, result)
            result = bld.select(is_zero, zero, result)
        return result

    visit_Add = visit_Sub = visit_Mul = visit_Div = _binary
    visit_FloorDiv = visit_FloorMod = visit_Min = visit_Max = visit_And = visit_Or = _binary

    def _compare(self, e, ctx):
        a, b = self._match(self.visit(e.a, ctx), self.visit(e.b, ctx), ctx)
        op = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}[type(e)]
        src = e.a.dtype
        if src in _INDEX_TYPES and _known(a) is not None and _known(b) is not None:
            return constant(I1, int(COMPARISONS[type(e)](_known(a), _known(b))))
        if dt.is_float(src):
            # ordered comparisons, except != which is true when either side is NaN (as numpy)
            return ctx.builder.fcmp_unordered(op, a, b) if op == "!=" else ctx.builder.fcmp_ordered(op, a, b)
        if dt.is_signed(src):
            return ctx.builder.icmp_signed(op, a, b)
        return ctx.builder.icmp_unsigned(op, a, b)

    visit_EQ = visit_NE = visit_LT = visit_LE = visit_GT = visit_GE = _compare

    def visit_Not(self, e, ctx):
        a = self.visit(e.a, ctx)
        return ctx.builder.xor(a, constant(a.type, (1,) * a.type.count) if isinstance(a.type, ir.VectorType)
                               else constant(I1, 1))

    def visit_Select(self, e, ctx):
        cond = self.visit(e.cond, ctx)
        decided = _known(cond)
        if decided is not None:          # decided at compile time: only the side it takes
            return self.visit(e.true_value if decided else e.false_value, ctx)
        b = ctx.builder
        has_load = any(isinstance(n, E.BufferLoad) for side in (e.true_value, e.false_value) for n in walk(side))
        if isinstance(cond.type, ir.VectorType):
            inverted = b.xor(cond, constant(cond.type, (1,) * ctx.lanes))
            values = []
            read = [n for n in walk(e.cond) if isinstance(n, E.BufferLoad)]
            for side, side_mask in ((e.true_value, cond), (e.false_value, inverted)):
                # a side that reads only what the condition read (max_skip_nan's select(x > m,
                # x, m)) needs no mask: every lane's address was read already
                loads = [n for n in walk(side) if isinstance(n, E.BufferLoad)]
                if all(any(same(n, r) for r in read) for n in loads):
                    side_mask = None
                inner = ctx.child(mask=self._and_mask(ctx, side_mask) if side_mask is not None else ctx.mask)
                value = self.visit(side, inner)
                ctx.builder = inner.builder
                values.append(self._widen(value, ctx))
            return ctx.builder.select(cond, values[0], values[1])
        if not has_load:
            t, f = self._match(self.visit(e.true_value, ctx), self.visit(e.false_value, ctx), ctx)
            return ctx.builder.select(cond, t, f)
        # only the chosen side may be read: branch
        t_bb = ctx.func.append_basic_block("select.true")
        f_bb = ctx.func.append_basic_block("select.false")
        end_bb = ctx.func.append_basic_block("select.end")
        b.cbranch(cond, t_bb, f_bb)
        results = []
        for side, bb in ((e.true_value, t_bb), (e.false_value, f_bb)):
            inner = ctx.enter(block=True, builder=ir.IRBuilder(bb))
            value = self.visit(side, inner)
            results.append((value, inner))
        t, f = results[0][0], results[1][0]
        if isinstance(t.type, ir.VectorType) != isinstance(f.type, ir.VectorType):
            t = self._widen(t, results[0][1])
            f = self._widen(f, results[1][1])
        for value, inner in ((t, results[0][1]), (f, results[1][1])):
            inner.builder.branch(end_bb)
        eb = ir.IRBuilder(end_bb)
        phi = eb.phi(t.type)
        phi.add_incoming(t, results[0][1].builder.block)
        phi.add_incoming(f, results[1][1].builder.block)
        ctx.builder = eb
        return phi

    def visit_Cast(self, e, ctx):
        v = self.visit(e.value, ctx)
        src, dst = e.value.dtype, e.dtype
        b = ctx.builder
        lanes = v.type.count if isinstance(v.type, ir.VectorType) else None
        to = llvm_type(dst) if lanes is None else ir.VectorType(llvm_type(dst), lanes)
        if src == dst:
            return v
        if dst == "bool":
            zero = constant(v.type, None)
            return b.fcmp_unordered("!=", v, zero) if dt.is_float(src) else b.icmp_unsigned("!=", v, zero)
        if src == "bool":
            return b.uitofp(v, to) if dt.is_float(dst) else b.zext(v, to)
        if dt.is_float(src) and dt.is_float(dst):
            return b.fpext(v, to) if dt.bits(dst) > dt.bits(src) else b.fptrunc(v, to)
        if dt.is_float(src):
            name = "llvm.fptosi.sat" if dt.is_signed(dst) else "llvm.fptoui.sat"
            fn = self._declare(f"{name}.{_vname(to)}.{_vname(v.type)}", to, [v.type])
            return b.call(fn, [v])
        if dt.is_float(dst):
            return b.sitofp(v, to) if dt.is_signed(src) else b.uitofp(v, to)
        if dt.bits(dst) > dt.bits(src):
            return b.sext(v, to) if dt.is_signed(src) else b.zext(v, to)
        if dt.bits(dst) < dt.bits(src):
            return b.trunc(v, to)
        return v  # signed <-> unsigned of one width: same bits

    def visit_Call(self, e, ctx):
        args = [self.visit(a, ctx) for a in e.args]
        if len(args) == 2:
            args = list(self._match(args[0], args[1], ctx))
        if e.name == "abs" and not dt.is_float(e.dtype):
            v = args[0]
            if not dt.is_signed(e.dtype):
                return v
            fn = self._declare(f"llvm.abs.{_vname(v.type)}", v.type, [v.type, I1])
            return ctx.builder.call(fn, [v, constant(I1, 0)])
        from .mathlib import emit_intrinsic
        return emit_intrinsic(ctx.builder, e.name, args, self.flags, self.target)

    def visit_TensorLoad(self, e, ctx):
        raise CodegenError(f"tensor read {e} reached codegen; lower the schedule first")

    def visit_Reduce(self, e, ctx):
        raise CodegenError(f"reduction {e} reached codegen; lower the schedule first")


def written_buffer_uids(func: S.PrimFunc) -> set[int]:
    """Uids of the buffers ``func`` stores to (its outputs, among the parameters).

    Example:
        >>> from tilefuse.tensorir.expr import Buffer, const
        >>> from tilefuse.tensorir.stmt import BufferStore, PrimFunc
        >>> A = Buffer("A", (1,), "float32")
        >>> written_buffer_uids(PrimFunc("f", (A,), BufferStore(A, const(0.0), (const(0),)))) == {A.uid}
        True
    """
    return {n.buffer.uid for n in statements(func.body) if isinstance(n, S.BufferStore)}


def flat_index(buf: E.Buffer, indices) -> E.Expr:
    """The row-major element offset of ``buf[indices]``: a simplified int64 expression.

    Example:
        >>> from tilefuse.tensorir.expr import Buffer, var
        >>> i, j = var("i"), var("j")
        >>> str(flat_index(Buffer("A", (4, 8), "float32"), (i, j)))
        'i * 8 + j'
    """
    terms = [(index if index.dtype == "int64" else simplify(E.Cast(index, "int64")), stride)
             for index, stride in zip(indices, buf.strides())]
    if len(terms) == 1 and terms[0][1] == 1:
        return terms[0][0]
    return sum_of_simplified(terms)      # the indices come simplified: only their sum is new


def var_uids(e: E.Expr) -> frozenset:
    """The uids of the variables ``e`` reads.

    Example:
        >>> from tilefuse.tensorir.expr import var
        >>> i = var("i")
        >>> var_uids(i * 2 + i) == {i.uid}
        True
    """
    return frozenset(n.uid for n in walk(e) if isinstance(n, E.Var))


class _Spelled(ir.Constant):
    """A constant written as LLVM's short spelling of it (``zeroinitializer``, ``poison``)
    rather than lane by lane: a splat's operands and a zero vector are a few characters of IR
    text, not a few hundred, which llvmlite formats and LLVM parses at every use."""

    def __init__(self, typ: ir.Type, spelling: str):
        super().__init__(typ, None)
        self.spelling = spelling

    def _get_reference(self):
        return self.spelling


def constant(typ: ir.Type, value) -> ir.Constant:
    """The integer constant ``value`` of ``typ`` (a tuple of lane values for a vector type; None
    is zero), one object for every use of the same type and value, so that llvmlite formats its
    text once however often a build reads it (shuffle masks, lane steps, splat indices). Values
    that compare equal but are spelled apart (``True`` and ``1``, ``-0.0`` and ``0.0``) get
    objects of their own.

    Example:
        >>> v4 = ir.VectorType(I32, 4)
        >>> constant(v4, (0, 1, 2, 3)) is constant(v4, (0, 1, 2, 3)), str(constant(v4, (0, 0, 0, 0)))
        (True, '<4 x i32> <i32 0, i32 0, i32 0, i32 0>')
        >>> constant(ir.FloatType(), -0.0) is constant(ir.FloatType(), 0.0), constant(I1, True) is constant(I1, 1)
        (False, False)
    """
    return _shared_constant(typ, value, repr(value))


@functools.lru_cache(maxsize=4096)
def _shared_constant(typ: ir.Type, value, spelling: str) -> ir.Constant:
    if isinstance(typ, ir.VectorType) and value is None:
        return _Spelled(typ, "zeroinitializer")
    return ir.Constant(typ, value)


@functools.lru_cache(maxsize=256)
def poison(typ: ir.Type) -> ir.Constant:
    """The poison value of ``typ`` (a splat's unused lanes), one object per type.

    Example:
        >>> str(poison(ir.VectorType(I32, 4)))
        '<4 x i32> poison'
    """
    return _Spelled(typ, "poison")


_INDEX_TYPES = ("int64", "int32")
"""Signed integer types of index arithmetic: folded when constant, reused within a scope."""


def _known(value):
    """The Python int of a scalar integer constant (signed; a bool is 0 or 1), else None.

    Example:
        >>> _known(constant(I64, 7)), _known(constant(I64, -1 & (2 ** 64 - 1))), _known(constant(I1, 1))
        (7, -1, 1)
        >>> _known(constant(ir.VectorType(I64, 2), (1, 2))) is None
        True
    """
    if type(value) is not ir.Constant or not isinstance(value.type, ir.IntType) or type(value.constant) is not int:
        return None
    bits = value.type.width
    unsigned = value.constant & ((1 << bits) - 1)
    return unsigned - (1 << bits) if bits > 1 and unsigned >> (bits - 1) else unsigned


def _fold(cls, a, b):
    """``a <cls> b`` without code, for signed integer ``a`` and ``b``: a constant when both are
    constants and the result fits their type (floor division and modulo as Python's), or one operand when the
    other is the identity (``x + 0``, ``x * 1``); else None, and the code is emitted.

    Example:
        >>> str(_fold(E.FloorDiv, constant(I64, -7), constant(I64, 2)))
        'i64 -4'
        >>> _fold(E.Add, constant(I64, 0), constant(I64, 5)) is constant(I64, 5)
        True
    """
    x, y = _known(a), _known(b)
    if a.type != b.type or not isinstance(a.type, ir.IntType):
        return None
    if (cls is E.Add and x == 0) or (cls is E.Mul and x == 1):
        return b
    if (cls in (E.Add, E.Sub) and y == 0) or (cls is E.Mul and y == 1):
        return a
    if x is None or y is None:
        return None
    result = fold_int(cls, x, y)
    bits = a.type.width
    if result is None or not -(1 << (bits - 1)) <= result < (1 << (bits - 1)):
        return None
    return constant(a.type, result)


def _const(t: ir.Type, value) -> ir.Constant:
    """A constant of scalar or vector type ``t`` with every lane equal to ``value``."""
    if isinstance(t, ir.VectorType):
        return constant(t, (value,) * t.count)
    return constant(t, value)


def _vname(t: ir.Type) -> str:
    """LLVM's overload suffix for a type: f32, v16f32, i64, v8i1, p0."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_vname(t.element)}"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    if isinstance(t, ir.PointerType):
        return "p0"
    raise CodegenError(f"no overload name for type {t}")


def _abi_type(dtype: str) -> ir.Type:
    """Type of a scalar parameter at the C ABI: bool travels as a byte."""
    return I8 if dtype == "bool" else llvm_type(dtype)
