"""A compiled graph: what ``compiler.compile_graph`` made, run and pickled.

``CompiledGraph.run(feeds)`` runs the steps in topological order: compiled partitions call
their kernels (the native entry without Python's per-argument checks where the run's arrays
are known to fit: planned buffers and constants checked once, feeds at each run; consecutive
kernels all called by native code in one call from Python, ``kernel_sequence``); unsupported
ones run in the reference interpreter; views cost nothing. A compiled graph keeps only the
constants its steps still read (packed copies, not the originals they came from) and no
reference to the graph or its partitions.

Intermediate tensors live in the buffers of the memory plan (``graph_api.memory_plan``):
allocated once, for the first run, reused by liveness, and kept for the next run (each run
in progress has its own set, so runs from several threads never share one); a run allocates
only the graph's outputs, which are the caller's, and writes into the last run's outputs
instead where the caller dropped them and every view of them (``_UNCLAIMED``).

A compiled graph pickles (to send it to a worker process) as what it runs: its kernels'
object code (``tensorir.runtime.artifact``), the constants its steps read, the ops the
reference interpreter runs, and its inputs and outputs, checksummed. Unpickling runs no
LLVM; a pickle made on another CPU or by another code generator is refused."""
from __future__ import annotations

import hashlib
import pickle
import time
from sys import getrefcount

import numpy as np

from tilefuse.tensorir.runtime import artifact
from tilefuse.tensorir.runtime.abi import PARAM_ALIGN
from tilefuse.tensorir.runtime.aligned import aligned_empty, aligned_maker, data_address, on_cache_line
from tilefuse.tensorir.runtime.kernel_sequence import KernelSequence

from .logical_tensor import GraphError
from .engine import Engine
from .limits import checked_array
from .steps import Step

_UNCLAIMED = 4
"""``sys.getrefcount`` of an output array of the last run that only its run state holds (its
``recycled`` dict, its kernel's argument list, the name it is read into, the call's argument),
its block (``aligned_maker``) held by it alone (a view of it holds the block, not the array):
the caller dropped both, so the run writes into it again instead of into a new array, whose
pages are cold (attention's P.V, 12x128x128 by 12x128x64: 0.090 ms a run into new arrays,
0.075 into the last run's)."""

PICKLE_FORMAT = 4
"""The format of a pickled compiled graph's payload (4: steps of ``graph_api.steps``, kernels,
constants, ops and views, the output tensors, no graph); unpickling refuses another one."""


class CompiledGraph:
    """A graph ready to run: ``run(feeds) -> {output id: array}``. ``steps`` are its
    partitions in order (``kind``, ``ops``, ``config``: the config it was built with, None for
    the template's default; ``kernel``, None when the reference interpreter runs it);
    ``chosen_configs`` holds each compiled partition's config by its signature
    (``build.partition_signature``); ``bound`` the constants the steps read. It pickles: see
    ``__reduce__``.

    Example:
        >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, compile_graph
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
        >>> g = Graph(); _ = g.add_op(Op(0, OpKind.ReLU, [x], [y])); g.finalize()
        >>> compiled = compile_graph(g)
        >>> compiled.run({0: np.array([[-1, 2, -3], [4, -5, 6]], "float32")})[1].tolist()
        [[0.0, 2.0, 0.0], [4.0, 0.0, 6.0]]
        >>> [(t.id, t.shape) for t in compiled.outputs], [s.kind for s in compiled.steps]
        ([(1, (2, 3))], ['injective'])
    """

    def __init__(self, program, input_ports: list, outputs: list, chosen_configs: dict,
                 engine: Engine | None = None, strict: bool = False, index_limits: dict | None = None):
        """From a ``after_build.Program`` that went through every step after the build, the
        graph's input ports that are fed (not bound), its output tensors (with their shapes),
        the config of each compiled partition by signature, and ``index_limits``: {input id:
        (n, what)} for inputs that index an axis of length n (a Gather's indices fed as they
        are), each value refused outside [-n, n) as onnxruntime does."""
        self.engine = engine or Engine()
        self.strict = strict
        self.chosen_configs = chosen_configs
        self.steps = program.steps
        self.output_ids = list(program.output_ids)
        self.outputs = outputs
        self.input_ports = input_ports
        self.constant_ids = program.constant_ids
        self._input_specs = [(t.id, t.shape, t.dtype.numpy) for t in self.input_ports if t.is_known()]
        self._feed_specs = _feed_specs(self._input_specs)
        self._index_limits = dict(index_limits or {})
        self._input_order = [t.id for t in self.input_ports]      # what feeds by position mean
        self._input_ids = frozenset(self._input_order)
        self.in_place = program.in_place
        self._run_steps, self.bound = program.run_steps, program.bound
        self.memory = program.memory
        self._arenas = []         # the planned buffers of runs that ended, for the next ones
        self._timed_arenas = []   # the same for profiled runs
        self._cannot_run = self.engine.target.cannot_run_here()      # None: its kernels run here

    def __reduce_ex__(self, protocol):
        """Pickled as what it runs: the steps (each compiled kernel as an artifact, each
        interpreted step's ops), the constants they read, the inputs and outputs, ``strict``
        and ``chosen_configs``, with a format version and a sha256 of it all. The arrays'
        data travel apart from the payload: out of band with protocol 5 (a caller that keeps
        them in a file can hand them back without a copy, as ``InferenceSession.save`` does),
        as bytes otherwise. Unpickling loads the kernels' object code (no LLVM) and runs on a
        fresh ``Engine()``; a payload that is damaged, of another format, or made on another
        CPU or by another code generator raises ``pickle.UnpicklingError`` saying which.

        Example:
            >>> import pickle
            >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, compile_graph
            >>> x = LogicalTensor(0, DataType.f32, (3,)); y = LogicalTensor(1, DataType.f32, (3,))
            >>> g = Graph(); _ = g.add_op(Op(0, OpKind.ReLU, [x], [y])); g.finalize()
            >>> again = pickle.loads(pickle.dumps(compile_graph(g)))
            >>> again.run({0: np.array([-1, 0, 2], "float32")})[1].tolist()
            [0.0, 0.0, 2.0]
        """
        state = {k: v for k, v in self.__dict__.items()
                 if k not in ("engine", "_arenas", "_timed_arenas", "_cannot_run", "_feed_specs")}
        state["target"] = self.target
        buffers = []
        payload = pickle.dumps(state, protocol=5, buffer_callback=buffers.append)
        raw = [b.raw() for b in buffers]
        data = [pickle.PickleBuffer(r) for r in raw] if protocol >= 5 else [bytes(r) for r in raw]
        return _restore, (PICKLE_FORMAT, payload, data, _digest(payload, raw))

    def run(self, feeds: dict, stop=None) -> dict:
        """Run the graph on ``feeds`` (graph input id -> array, or a list of arrays in
        ``input_ports`` order; bound constants need none and may not be fed);
        returns graph outputs by id: new arrays, but for one the caller dropped with every view
        of it, which the next run writes into again. A partition that computes only constants
        fed at run (not bound) runs once and keeps its results while it is fed the same constant
        arrays (constant inputs must not be modified between runs, as in oneDNN). ``stop``: a
        function called before each step; when it raises, the run ends with its exception.

        Example:
            >>> from tilefuse.graph_api import load_json, compile_graph
            >>> compiled = compile_graph(load_json("examples/mlp.json"))
            >>> [y.shape for y in compiled.run([np.ones(t.shape, "float32") for t in compiled.input_ports]).values()]
            [(32, 10)]
        """
        if self._cannot_run is not None:
            self._refuse_to_run()
        values = self._checked_values(feeds)
        try:
            state = self._arenas.pop()          # one run's buffers are never another's at the same time
        except IndexError:
            state = _RunState(self)
        try:
            return self._execute(state, values, stop)
        finally:
            self._arenas.append(state)

    def profile(self, feeds: dict, stop=None) -> tuple:
        """``run(feeds, stop)``'s outputs, and when each step began and how long it took, in
        run order: [(its partition index, ``time.perf_counter()`` at its start, seconds), ...]
        (a step that costs nothing, a view, is absent; see ``step_times``).

        Example:
            >>> from tilefuse.graph_api import load_json, compile_graph
            >>> compiled = compile_graph(load_json("examples/mlp.json"))
            >>> outputs, log = compiled.profile([np.ones(t.shape, "float32") for t in compiled.input_ports])
            >>> [index for index, started, seconds in log], list(outputs) == compiled.output_ids
            ([0, 1, 2, 3], True)
        """
        if self._cannot_run is not None:
            self._refuse_to_run()
        values = self._checked_values(feeds)
        try:
            state = self._timed_arenas.pop()
        except IndexError:
            state = self._timed_state()
        try:
            state.log.clear()
            return self._execute(state, values, stop), list(state.log)
        finally:
            self._timed_arenas.append(state)

    def step_times(self, feeds: dict, runs: int = 10) -> dict:
        """Seconds each step took in each of ``runs`` runs on ``feeds``, by the index of its
        partition in the compiler's partitions (``pipeline.partition(graph).partitions``):
        {index: [seconds of run 1, ...]}. A run is
        ``run``'s, each step timed alone (a few tenths of a microsecond of timer per step); a
        step that costs nothing (a reshape or slice that is a view, a concat its producers
        write) is absent. What a kernel costs between its neighbours, which a kernel timed
        alone does not show: the other core's cache lines, threads woken from sleep.

        Example:
            >>> from tilefuse.graph_api import load_json, compile_graph
            >>> compiled = compile_graph(load_json("examples/mlp.json"))
            >>> times = compiled.step_times({t.id: np.ones(t.shape, "float32") for t in compiled.input_ports}, runs=3)
            >>> sorted(times), [len(seconds) for seconds in times.values()]
            ([0, 1, 2, 3], [3, 3, 3, 3])
        """
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            raise ValueError(f"runs must be a positive int, got {runs!r}")
        if self._cannot_run is not None:
            self._refuse_to_run()
        values = self._checked_values(feeds)
        state = self._timed_state()
        times = {index: [] for index in state.indices}
        for _ in range(runs):
            self._execute(state, dict(values))
        for index, _, seconds in state.log:
            times[index].append(seconds)
        return times

    def _timed_state(self) -> "_RunState":
        """A run state of its own (its own buffers) whose program appends (partition index,
        start, seconds) of each step it runs to its ``log``."""
        state = _RunState(self)
        log = state.log = []
        state.plan = None               # each kernel called from Python, to be timed
        state.program = [_TimedStep(instruction, index, log) if isinstance(instruction, Step) else
                         (_timed(instruction[0], index, log), *instruction[1:])
                         for index, instruction in zip(state.indices, state.program)]
        return state

    @property
    def target(self):
        """The ``Target`` its kernels were generated for.

        Example:
            >>> from tilefuse.graph_api import load_json, compile_graph
            >>> compile_graph(load_json("examples/mlp.json"), target="llvm -mcpu=haswell").target.lanes("float32")
            8
        """
        return self.engine.target

    def _refuse_to_run(self) -> None:
        raise GraphError(f"this compiled graph cannot run here: {self._cannot_run}; save it and run it on such "
                         f"a machine, or compile it for this host")

    def _execute(self, state: "_RunState", values: dict, stop=None) -> dict:
        """Run ``state``'s program on ``values`` (the bound constants and the checked feeds),
        calling ``stop`` (when given) before each step; the graph's outputs by id."""
        values.update(state.values)
        slices = state.slices if state.slices is not None else self._concat_slices(values, state.arena)
        recycled = state.recycled
        for instruction in state.program if stop is not None or state.plan is None else state.plan:
            if stop is not None:
                stop()
            if type(instruction) is _NativeRun:
                instruction.run(values, recycled)
                continue
            if type(instruction) is not tuple:      # a step run as it is (timed or not)
                values.update(instruction.run(values, slices, state.arena))
                continue
            entry, args, reads, writes, kernel = instruction
            for position, key in reads:
                args[position] = values[key]
            for position, key, make in writes:
                values[key] = args[position] = _output_array(recycled, key, make)
            if entry(*args):            # the unchecked entry refused them: the kernel explains
                kernel(*args)
        return {tid: values[tid] for tid in self.output_ids}

    def _checked_values(self, feeds) -> dict:
        """The bound constants and the aligned feeds by tensor id; GraphError for a feed that
        is missing or of the wrong shape or dtype."""
        feeds = self._feeds_by_id(feeds)
        values = dict(self.bound)
        specs = self._feed_specs
        for tid, array in feeds.items():
            spec = specs.get(tid)
            if (spec is None or type(array) is not np.ndarray or array.shape != spec[0] or array.dtype != spec[1]
                    or not array.flags.c_contiguous or data_address(array) % PARAM_ALIGN):
                array = _aligned_array(checked_array(f"graph input {tid}", array))     # else it fits as it is
            values[tid] = array
        for tid, shape, dtype in self._input_specs:
            array = values.get(tid)
            if array is None:
                raise GraphError(f"no feed for graph input {tid}")
            if array.shape != shape or array.dtype != dtype:
                raise GraphError(f"graph input {tid} must be {dtype}{list(shape)}, got {array.dtype}{list(array.shape)}")
        for tid, (n, what) in getattr(self, "_index_limits", {}).items():
            array = values[tid]
            if array.size and (array.min() < -n or array.max() >= n):
                bad = array[(array < -n) | (array >= n)].flat[0]
                raise GraphError(f"graph input {tid}: index {bad} is out of range [{-n}, {n - 1}] of {what}")
        return values

    def _concat_slices(self, values: dict, arena: dict) -> dict:
        """Put the outputs of the concats computed in place into ``values`` (their planned
        buffers in ``arena``, else new ones); returns the slice of one of them each producer
        writes, by the producer's output id."""
        slices = {}
        for step, plan in reversed(self.in_place):    # concats' outputs first, the last concat first:
            whole = slices.get(plan.output)           # a concat of a concat is a slice of it
            if whole is None:
                whole = arena.get(plan.output)
            if whole is None:
                whole = aligned_empty(plan.shape, plan.dtype)
            values[plan.output] = whole
            for tid, index in plan.slices:
                slices[tid] = whole[index]
        return slices

    def _feeds_by_id(self, feeds) -> dict:
        """``feeds`` as a dict by input id: a dict whose keys are all graph input ids, or a list
        or tuple with one array per input in ``input_ports`` order; anything else is refused
        with the valid ids (a key naming a bound constant would replace a weight)."""
        ids = self._input_order
        if isinstance(feeds, (list, tuple)):
            if len(feeds) != len(ids):
                raise GraphError(f"run got {len(feeds)} arrays by position, but the graph has {len(ids)} inputs "
                                 f"(ids {ids})")
            return dict(zip(ids, feeds))
        if not isinstance(feeds, dict):
            raise TypeError(f"run takes a dict {{input id: array}} or a list of arrays in input order, got "
                            f"{type(feeds).__name__}")
        unknown = [k for k in feeds if k not in self._input_ids]
        if unknown:
            constants = [k for k in unknown if k in self.constant_ids]
            what = (f"tensor(s) {constants} are bound constants, not inputs" if constants
                    else f"{unknown} are not graph input ids")
            raise GraphError(f"run: {what}; the inputs are ids {ids}")
        return feeds


class _RunState:
    """What one run in progress works on: the planned buffers (``arena``), the concat slices in
    them, the values they give (``values``: by tensor id, the planned tensors and slices), and
    the ``program``: per step, the step itself (the reference interpreter, a constant kept
    between runs, a concat slice not planned) or (kernel, its argument list with the planned
    arrays and bound constants in place, (position, key) read from the run's values, (position,
    key, a function making its new array: ``aligned_maker``) written into new arrays): a run
    fills in only feeds and outputs;
    ``indices``: the partition index of each instruction's step; and ``plan``: the program with
    each run of consecutive kernels that take packed arguments one ``_NativeRun``."""

    def __init__(self, graph: "CompiledGraph"):
        self.arena = graph.memory.arena()
        self.values = dict(self.arena)
        nested = {tid for _, plan in graph.in_place for tid, _ in plan.slices}
        planned = all(plan.output in self.arena or plan.output in nested for _, plan in graph.in_place)
        self.slices = None          # a concat that is a graph output is new each run: so are its slices
        if planned:
            self.slices = graph._concat_slices(self.values, self.arena)
            self.values.update(self.slices)
        static = {**graph.bound, **self.values}
        # what arrays a run puts in values are like: the feeds (checked) and compiled steps' outputs
        made = {tid: (tuple(shape), np.dtype(dtype)) for tid, shape, dtype in graph._input_specs}
        made.update({tid: (tuple(shape), np.dtype(dtype)) for step in graph._run_steps
                     if step.kernel is not None for tid, shape, dtype in step.outputs})
        self.recycled = {}          # by key: the array a kernel wrote last run, made again only when still held
        self.program, self.indices = [], []     # the indices: each instruction's step's
        for step in graph._run_steps:
            if step.view is not None and planned and step.view[0] in static:    # a view of a planned buffer
                (_, out, index, shape), whole = step.view, static[step.view[0]]
                self.values[out] = static[out] = whole[index].reshape(shape)
                continue
            self.indices.append(step.index)
            if step.kernel is None or step.constant or not planned:
                self.program.append(step)
                continue
            args, reads, writes = [], [], []
            shapes = {tid: (shape, dtype) for tid, shape, dtype in step.outputs}
            for position, (written, key) in enumerate(step.args):
                args.append(static.get(key))
                if args[-1] is None:
                    (writes.append((position, key, aligned_maker(*shapes[key]))) if written
                     else reads.append((position, key)))
            entry = _entry(step.kernel, args, [key for _, key in step.args], made)
            self.program.append((entry, args, reads, writes, step.kernel))
        self.plan = _native_plan(self.program)


def _native_plan(program: list) -> list:
    """``program`` with each run of two or more consecutive instructions whose kernels take
    packed arguments (``Kernel.packed_entry_address``), called through their unchecked entries
    with aligned arrays known before the run, made one ``_NativeRun``."""
    plan, run = [], []

    def close():
        plan.extend([_NativeRun(run)] if len(run) >= 2 else run)
        run.clear()
    for instruction in program:
        if type(instruction) is tuple and _packable(instruction):
            run.append(instruction)
            continue
        close()
        plan.append(instruction)
    close()
    return plan


def _packable(instruction: tuple) -> bool:
    entry, args, _, _, kernel = instruction
    return entry is not kernel and getattr(kernel, "packed_entry_address", None) is not None and \
        all(a is None or data_address(a) % PARAM_ALIGN == 0 for a in args)


class _NativeRun:
    """Consecutive kernels of a run state's program called by native code in one call
    (``kernel_sequence.KernelSequence``): their instructions as the program holds them, the
    arrays known before the run already pointed to; a run points to its feeds and its new
    outputs (as the program's loop would make or take them), and the kernels run. A kernel
    that fails (no scratch memory) is called again from Python, which explains, and so are
    those after it."""

    def __init__(self, instructions: list):
        self.instructions = list(instructions)
        self.sequence = KernelSequence([(kernel.packed_entry_address, [0 if a is None else data_address(a) for a in args])
                                        for _, args, _, _, kernel in self.instructions])
        # in run order, a kernel's inputs before its outputs: an output made here may be a later
        # kernel's input (make None: an input, read from the run's values)
        self.points = []
        for k, (_, args, reads, writes, _) in enumerate(self.instructions):
            self.points += [(k, position, key, None, args) for position, key in reads]
            self.points += [(k, position, key, make, args) for position, key, make in writes]

    def run(self, values: dict, recycled: dict) -> None:
        point = self.sequence.point
        for k, position, key, make, args in self.points:
            if make is None:
                array = args[position] = values[key]
            else:
                array = values[key] = args[position] = _output_array(recycled, key, make)
            point(k, position, data_address(array))
        failed = self.sequence.run()
        if failed:
            for _, args, _, _, kernel in self.instructions[failed - 1:]:
                kernel(*args)


def _output_array(recycled: dict, key, make) -> np.ndarray:
    """The array a kernel writes output ``key`` into: the last run's where only the run state
    holds it and its block (``_UNCLAIMED``), else a new one from ``make``, kept for the next run."""
    array = recycled.get(key)
    if array is None or getrefcount(array) > _UNCLAIMED or getrefcount(array.base) > 2:
        array = recycled[key] = make()
    return array


def _timed(entry, index: int, log: list):
    """``entry``, appending (``index``, its start, its seconds) of each call to ``log``."""
    clock = time.perf_counter

    def call(*args):
        started = clock()
        status = entry(*args)
        log.append((index, started, clock() - started))
        return status
    return call


def _entry(kernel, args: list, keys: list, made: dict):
    """What a run calls for ``kernel`` with ``args`` (the arrays known before the run, None
    where a run puts the value of ``keys``' entry): its unchecked native entry when every
    argument is sure to fit it (the known arrays checked here once, the others feeds or
    compiled steps' outputs, ``made``: their shapes and dtypes), else the kernel, which checks
    them at each call (and returns None: success)."""
    unchecked = getattr(kernel, "unchecked_entry", None)
    if unchecked is None:
        return kernel
    for position, (spec, array, key) in enumerate(zip(kernel.args, args, keys)):
        if array is None:
            if made.get(key) != (spec.shape, np.dtype(spec.dtype)):
                return kernel
        elif not kernel.accepts(position, array):
            return kernel
    return unchecked


class _TimedStep:
    """A step whose runs append (its partition index, their start, their seconds) to a log."""

    def __init__(self, step: Step, index: int, log: list):
        self.step, self.index, self.log = step, index, log

    def run(self, values: dict, slices: dict, arena: dict) -> dict:
        started = time.perf_counter()
        results = self.step.run(values, slices, arena)
        self.log.append((self.index, started, time.perf_counter() - started))
        return results


def _restore(version, payload, buffers, digest) -> CompiledGraph:
    """The compiled graph ``CompiledGraph.__reduce_ex__`` pickled (its arrays' data in
    ``buffers``, used in place where they start on a cache line, else copied to one);
    ``pickle.UnpicklingError`` for another format, a payload whose checksum does not match, or
    kernels that cannot run here."""
    if version != PICKLE_FORMAT:
        raise pickle.UnpicklingError(f"compiled graph pickled in format {version!r}; this tilefuse reads "
                                     f"format {PICKLE_FORMAT}")
    try:
        views = [memoryview(b).cast("B") for b in buffers]
        intact = _digest(payload, views) == digest
    except TypeError:
        intact = False
    if not intact:
        raise pickle.UnpicklingError("compiled graph pickle: checksum mismatch (truncated or altered)")
    try:
        state = pickle.loads(payload, buffers=[on_cache_line(np.frombuffer(b, np.uint8)) for b in views])
    except artifact.ArtifactError as err:
        raise pickle.UnpicklingError(f"compiled graph pickle: {err}; a compiled graph unpickles on the CPU and "
                                     f"with the code generator it was compiled with (compile the graph again "
                                     f"elsewhere)") from None
    restored = CompiledGraph.__new__(CompiledGraph)
    target = state.pop("target")
    restored.__dict__.update(state, engine=Engine(target=target), _arenas=[], _timed_arenas=[],
                             _cannot_run=target.cannot_run_here(), _feed_specs=_feed_specs(state["_input_specs"]))
    return restored


def _feed_specs(input_specs: list) -> dict:
    """{input id: (shape, numpy dtype)} of the inputs whose shapes are known: a feed that is an
    array of that shape and dtype, C-contiguous and aligned, is used as it is (its size was
    checked when the graph was)."""
    return {tid: (tuple(shape), np.dtype(dtype)) for tid, shape, dtype in input_specs}


def _aligned_array(value) -> np.ndarray:
    """``value`` as a C-contiguous array whose data kernels can read (``PARAM_ALIGN``-aligned):
    itself when it is one, else a copy (0-d arrays stay 0-d)."""
    array = np.asarray(value, order="C")
    if data_address(array) % PARAM_ALIGN and array.size:
        array = array.copy()        # numpy's allocator aligns what it allocates
    return array


def _digest(payload, buffers) -> bytes:
    """The sha256 of a pickled compiled graph: its payload, then each buffer's length and data."""
    h = hashlib.sha256(payload)
    for b in buffers:
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.digest()


