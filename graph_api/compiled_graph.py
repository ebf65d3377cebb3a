"""Whole-graph compilation, as frameworks use oneDNN: every supported partition compiled,
the rest run by the reference interpreter, all in topological order.

Compiling also does, once, what does not depend on the feeds: partitions that compute only
from bound constants run at compile time and their results become constants, and kernels
that repack constant weights (``PrepackedKernel``) pack the bound ones then. A compiled graph
keeps only the constants its steps still read (packed copies, not the originals they came
from) and no reference to the graph or its partitions, so the originals are freed once
nothing else holds them.

Intermediate tensors live in the buffers of a memory plan (``graph_api.memory_plan``):
allocated once, for the first run, reused by liveness, and kept for the next run (each run
in progress has its own set, so runs from several threads never share one); a run allocates
only the graph's outputs, which are the caller's.

A Concat whose inputs are all written by compiled partitions, along an axis with only unit
dims before it (channels of a batch-1 NCHW tensor), costs nothing: its output is allocated
first and each producer's kernel writes straight into its slice, a contiguous block. A concat
that is itself an input of such a concat (DenseNet's growing feature maps) is that slice.

A StaticReshape alone in its partition, and a Slice whose output is a contiguous, aligned
block of its input (``ops.movement.slice_view``: the channel groups of a batch-1 NCHW tensor,
as a grouped convolution split into one per group reads them), cost nothing either: they
compile no kernel, and the output is a view of the input, whose buffer the memory plan keeps
until the view's last reader.

A compiled graph pickles (to send it to a worker process) as what it runs: its kernels'
object code (``tensorir.runtime.artifact``), the constants its steps read, the ops the
reference interpreter runs, and its inputs and outputs, checksummed. Unpickling runs no
LLVM; a pickle made on another CPU or by another code generator is refused."""
from __future__ import annotations

import hashlib
import pickle
import time
import warnings

import numpy as np

from tilefuse.tensorir.errors import Unsupported
from tilefuse.tensorir.runtime import artifact
from tilefuse.tensorir.runtime.abi import PARAM_ALIGN
from tilefuse.tensorir.runtime.aligned import aligned_empty, data_address, on_cache_line
from tilefuse.tensorir.runtime.prepacked import PrepackedKernel

from . import reference
from .build import build_partitions, partition_signature
from .logical_tensor import GraphError, PropertyType
from .memory_plan import MemoryPlan, plan_memory
from .op import OpKind
from .ops.movement import slice_view
from .engine import Engine

PICKLE_FORMAT = 3
"""The format of a pickled compiled graph's payload (3: kernels, constants, ops and slice views, no graph);
unpickling refuses another one."""


class CompiledGraph:
    """A graph ready to run: ``run(feeds) -> {output id: array}``. ``steps`` are its
    partitions in order (``kind``, ``ops``, ``config``: the config it was built with, None for
    the template's default; ``kernel``, None when the reference interpreter runs it);
    ``chosen_configs`` holds each compiled partition's config by its signature
    (``build.partition_signature``); ``bound`` the constants the steps read. It pickles: see
    ``__reduce__``.

    Example:
        >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
        >>> g = Graph(); _ = g.add_op(Op(0, OpKind.ReLU, [x], [y])); g.finalize()
        >>> compile_graph(g).run({0: np.array([[-1, 2, -3], [4, -5, 6]], "float32")})[1].tolist()
        [[0.0, 2.0, 0.0], [4.0, 0.0, 6.0]]
    """

    def __init__(self, graph, engine: Engine | None = None, configs=None, kernel_cache=None, strict: bool = False,
                 *, owned: bool = False):
        self.engine = engine or Engine()
        self.strict = strict
        self.chosen_configs = {}
        partitions = graph.get_partitions()
        # the partitions compute the graph after the passes: folded constants are its inputs too
        computed = partitions[0].graph if partitions else graph
        bound = {**graph.constant_values, **computed.constant_values}
        fallback = [f"{op.kind.value} (op {op.id})" for p in partitions if not p.is_supported() for op in p.ops]
        if strict and fallback:
            raise Unsupported(f"strict: {len(fallback)} op(s) would run in the numpy reference interpreter, not "
                              f"compiled: {', '.join(fallback)}")
        outputs = {t.id for t in graph.get_output_ports()}
        views = [_view_of(p, outputs) for p in partitions]
        build_partitions([p for p, view in zip(partitions, views) if p.is_supported() and view is None],
                         configs, kernel_cache)   # in parallel
        self.steps = [_Step.viewing(k, p, view) if view is not None else
                      self._compile(k, p, configs, kernel_cache) if p.is_supported() else _Step.interpreted(k, p)
                      for k, (p, view) in enumerate(zip(partitions, views))]
        if fallback:
            warnings.warn(f"running {len(fallback)} op(s) in the numpy reference interpreter: "
                          f"{', '.join(fallback)}", stacklevel=2)
        self.output_ids = [t.id for t in graph.get_output_ports()]
        self.input_ports = [t for t in graph.get_input_ports() if t.id not in bound]
        self.constant_ids = frozenset(bound)
        self._input_specs = [(t.id, t.shape, t.dtype.numpy) for t in self.input_ports if t.is_known()]
        self._input_order = [t.id for t in self.input_ports]      # what feeds by position mean
        self._input_ids = frozenset(self._input_order)
        self.in_place = _in_place_concats(self.steps, set(self.output_ids))
        elided = {id(step) for step, _ in self.in_place}
        if owned:       # ours to empty: each weight is dropped once packed, so weights are held about once
            _empty_constants(graph, partitions)
            del graph, partitions, computed
        self._run_steps, self.bound = _settle_constants([s for s in self.steps if id(s) not in elided], bound,
                                                        self.output_ids)
        self.memory = _plan(self._run_steps, self.in_place, set(self.output_ids))
        self._arenas = []         # the planned buffers of runs that ended, for the next ones

    def _compile(self, index: int, p, configs, kernel_cache) -> "_Step":
        """The step of the supported partition ``p``, compiled with the config ``configs``
        chooses, which ``chosen_configs`` keeps."""
        signature = partition_signature(p, p.get_input_ports())
        compiled = p.compile(p.get_input_ports(), p.get_output_ports(), self.engine, configs, kernel_cache)
        self.chosen_configs[signature] = compiled.config
        outputs = [compiled.query_logical_tensor(t.id) for t in p.get_output_ports()]
        args = [(role == "out", tid) for role, tid in compiled._arg_ports]
        return _Step(index, p, outputs, compiled.kernel, args, compiled.config)

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
            >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
            >>> x = LogicalTensor(0, DataType.f32, (3,)); y = LogicalTensor(1, DataType.f32, (3,))
            >>> g = Graph(); _ = g.add_op(Op(0, OpKind.ReLU, [x], [y])); g.finalize()
            >>> again = pickle.loads(pickle.dumps(compile_graph(g)))
            >>> again.run({0: np.array([-1, 0, 2], "float32")})[1].tolist()
            [0.0, 0.0, 2.0]
        """
        state = {k: v for k, v in self.__dict__.items() if k not in ("engine", "_arenas")}
        buffers = []
        payload = pickle.dumps(state, protocol=5, buffer_callback=buffers.append)
        raw = [b.raw() for b in buffers]
        data = [pickle.PickleBuffer(r) for r in raw] if protocol >= 5 else [bytes(r) for r in raw]
        return _restore, (PICKLE_FORMAT, payload, data, _digest(payload, raw))

    def run(self, feeds: dict) -> dict:
        """Run the graph on ``feeds`` (graph input id -> array, or a list of arrays in
        ``input_ports`` order; bound constants need none and may not be fed);
        returns graph outputs by id. A partition that computes only constants fed at run (not
        bound) runs once and keeps its results while it is fed the same constant arrays
        (constant inputs must not be modified between runs, as in oneDNN).

        Example:
            >>> # compile_graph(g).run({0: x})[out_id]
        """
        values = self._checked_values(feeds)
        try:
            state = self._arenas.pop()          # one run's buffers are never another's at the same time
        except IndexError:
            state = _RunState(self)
        try:
            return self._execute(state, values)
        finally:
            self._arenas.append(state)

    def step_times(self, feeds: dict, runs: int = 10) -> dict:
        """Seconds each step took in each of ``runs`` runs on ``feeds``, by the index of its
        partition in ``graph.get_partitions()``: {index: [seconds of run 1, ...]}. A run is
        ``run``'s, each step timed alone (a few tenths of a microsecond of timer per step); a
        step that costs nothing (a reshape or slice that is a view, a concat its producers
        write) is absent. What a kernel costs between its neighbours, which a kernel timed
        alone does not show: the other core's cache lines, threads woken from sleep.

        Example:
            >>> # times = compile_graph(g).step_times({0: x}, runs=100)
            >>> # {index: min(seconds) for index, seconds in times.items()}
        """
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            raise ValueError(f"runs must be a positive int, got {runs!r}")
        values = self._checked_values(feeds)
        state = _RunState(self)         # its own buffers: its program times each step
        times = {index: [] for index in state.indices}
        state.program = [_TimedStep(instruction, times[index]) if isinstance(instruction, _Step) else
                         (_timed(instruction[0], times[index]), *instruction[1:])
                         for index, instruction in zip(state.indices, state.program)]
        for _ in range(runs):
            self._execute(state, dict(values))
        return times

    def _execute(self, state: "_RunState", values: dict) -> dict:
        """Run ``state``'s program on ``values`` (the bound constants and the checked feeds);
        the graph's outputs by id."""
        values.update(state.values)
        slices = state.slices if state.slices is not None else self._concat_slices(values, state.arena)
        for instruction in state.program:
            if type(instruction) is not tuple:      # a step run as it is (timed or not)
                values.update(instruction.run(values, slices, state.arena))
                continue
            entry, args, reads, writes, kernel = instruction
            for position, key in reads:
                args[position] = values[key]
            for position, key, shape, dtype in writes:
                values[key] = args[position] = aligned_empty(shape, dtype)
            if entry(*args):            # the unchecked entry refused them: the kernel explains
                kernel(*args)
        return {tid: values[tid] for tid in self.output_ids}

    def _checked_values(self, feeds) -> dict:
        """The bound constants and the aligned feeds by tensor id; GraphError for a feed that
        is missing or of the wrong shape or dtype."""
        feeds = self._feeds_by_id(feeds)
        values = dict(self.bound)
        for tid, array in feeds.items():
            values[tid] = _aligned_array(array)
        for tid, shape, dtype in self._input_specs:
            array = values.get(tid)
            if array is None:
                raise GraphError(f"no feed for graph input {tid}")
            if array.shape != shape or array.dtype != dtype:
                raise GraphError(f"graph input {tid} must be {dtype}{list(shape)}, got {array.dtype}{list(array.shape)}")
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
    key, shape, dtype) written into new arrays): a run fills in only feeds and outputs; and
    ``indices``: the partition index of each instruction's step."""

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
                    (writes.append((position, key, *shapes[key])) if written else reads.append((position, key)))
            entry = _entry(step.kernel, args, [key for _, key in step.args], made)
            self.program.append((entry, args, reads, writes, step.kernel))


def _timed(entry, seconds: list):
    """``entry``, appending the seconds of each call to ``seconds``."""
    clock = time.perf_counter

    def call(*args):
        started = clock()
        status = entry(*args)
        seconds.append(clock() - started)
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
    """A step whose runs append their seconds to a list."""

    def __init__(self, step: "_Step", seconds: list):
        self.step, self.seconds = step, seconds

    def run(self, values: dict, slices: dict, arena: dict) -> dict:
        started = time.perf_counter()
        results = self.step.run(values, slices, arena)
        self.seconds.append(time.perf_counter() - started)
        return results


class _Step:
    """One partition of a compiled graph: its kernel with the values it reads and writes, or
    the ops the reference interpreter runs; a partition computing constants fed at run keeps
    its results between runs. ``args``: per kernel argument, (written?, the key of its value:
    a tensor id, or ("packed", step, k) for a packed constant)."""

    def __init__(self, index: int, partition, outputs, kernel=None, args=None, config=None, view=None):
        self.index, self.kind, self.ops = index, partition.get_kind(), list(partition.ops)
        self.view = view           # (input id, output id, numpy index, shape): the output is a view of the input
        self.input_ids = [t.id for t in partition.get_input_ports()]
        self.outputs = [(t.id, t.shape, t.dtype.numpy) for t in outputs]   # of a compiled step
        self.output_ids = [t.id for t in partition.get_output_ports()]
        self.constant = all(t.property_type is PropertyType.constant for t in partition.get_output_ports())
        self.kernel, self.args, self.config = kernel, args, config
        self._kept = None          # (the input arrays, the results) of a constant partition

    @classmethod
    def interpreted(cls, index: int, partition) -> "_Step":
        """A step the reference interpreter runs."""
        return cls(index, partition, [])

    @classmethod
    def viewing(cls, index: int, partition, view) -> "_Step":
        """A step whose output is a view of its input (``view``: input id, output id, the numpy
        index of the output in the input, and the output's shape)."""
        return cls(index, partition, [], view=view)

    def reads(self) -> list:
        """The keys of the values a run of the step reads."""
        if self.kernel is None:
            return list(self.input_ids)
        return [key for written, key in self.args if not written]

    def prepack(self, values: dict) -> dict:
        """Pack the constant weights of a ``PrepackedKernel`` now, when ``values`` holds them
        all: the step then calls the main kernel on the packed copies (and no longer reads the
        originals); returns the packed arrays by key (empty when there is nothing to pack)."""
        kernel = self.kernel
        if not isinstance(kernel, PrepackedKernel):
            return {}
        positions = kernel.constant_positions
        if any(self.args[i][0] or self.args[i][1] not in values for i in positions):
            return {}
        packed = kernel.pack([values[self.args[i][1]] if i in positions else None for i in range(len(self.args))])
        keys = [("packed", self.index, k) for k in range(len(packed))]
        self.args = [self.args[k] if role == "arg" else (False, keys[k]) for role, k in kernel.main_args]
        self.kernel = kernel.main
        return dict(zip(keys, packed))

    def run(self, values: dict, slices: dict | None = None, arena: dict | None = None) -> dict:
        """The partition's outputs by id; an output with an array in ``slices`` (a slice of a
        concat's output) is written there, else into its planned buffer in ``arena``, else into
        a new array."""
        if self.constant:
            inputs = [values[tid] for tid in self.input_ids]
            if self._kept is not None and all(a is b for a, b in zip(self._kept[0], inputs)):
                return self._kept[1]
        if self.view is not None:
            src, out, index, shape = self.view
            results = {out: values[src][index].reshape(shape)}
        elif self.kernel is None:
            results = {}
            for op in self.ops:
                outs = reference.evaluate(op, [results[t.id] if t.id in results else values[t.id]
                                               for t in op.inputs])
                results.update({t.id: v for t, v in zip(op.outputs, outs)})
        else:
            slices, arena = slices or {}, arena or {}
            results = {tid: slices[tid] if tid in slices else arena[tid] if tid in arena else
                       aligned_empty(shape, dtype) for tid, shape, dtype in self.outputs}
            self.kernel(*[results[key] if written else values[key] for written, key in self.args])
        if self.constant:
            self._kept = (inputs, results)
        return results

    def __getstate__(self) -> dict:
        state = dict(self.__dict__, _kept=None)
        if self.kernel is not None:
            state["kernel"] = artifact.dumps(self.kernel)
        return state

    def __setstate__(self, state: dict) -> None:
        if state["kernel"] is not None:
            state["kernel"] = artifact.loads(state["kernel"], f"the kernel of step {state['index']} ({state['kind']})")[0]
        self.__dict__.update(state)


def _plan(steps: list, in_place: list, outputs: set) -> MemoryPlan:
    """The memory plan of the steps a run takes: what compiled steps write (not constants kept
    between runs), each in-place concat as one tensor its slices are views of, an output its
    kernel may compute over an input in that input's block when it is the input's last reader."""
    views = {tid: plan.output for _, plan in in_place for tid, _ in plan.slices}
    views.update({step.view[1]: step.view[0] for step in steps if step.view is not None})
    wholes = {plan.output: (plan.shape, plan.dtype) for _, plan in in_place}
    order = [(step.input_ids, step.outputs if step.kernel is not None and not step.constant else [])
             for step in steps]
    over = {}               # the inputs a step's kernel may compute an output over
    for k, step in enumerate(steps):
        pairs = step.kernel.in_place if step.kernel is not None and not step.constant else ()
        for w, i in pairs:
            key = step.args[i][1]       # ... when every argument that tensor is passed as may be shared
            if all((w, j) in pairs for j, (written, other) in enumerate(step.args) if other == key and not written):
                over.setdefault((k, step.args[w][1]), []).append(key)
    return plan_memory(order, views, outputs, wholes, over)


def _settle_constants(steps: list, bound: dict, outputs) -> tuple[list, dict]:
    """(the steps left to run, the constants they read): the steps that compute only from
    bound constants run now and their results become constants; each prepacked kernel packs
    its bound weights now; of the constants, only those a step left or a graph output reads
    are kept. ``bound`` is emptied as it goes: a constant no later step reads leaves it as
    soon as it is packed or used, so where nothing else holds it, it is freed before the next
    weight is packed."""
    last_reader = {}
    for k, step in enumerate(steps):
        for key in step.input_ids:
            last_reader[key] = k
    keep = set(outputs)
    values, left = bound, []
    for k, step in enumerate(steps):
        if step.constant and all(tid in values for tid in step.input_ids):
            values.update(step.run(values))
        else:
            values.update(step.prepack(values))
            left.append(step)
            keep.update(step.reads())
        for key in step.input_ids:
            if last_reader[key] == k and key not in keep:
                values.pop(key, None)
    return left, {key: on_cache_line(value) for key, value in values.items() if key in keep}


def _empty_constants(graph, partitions) -> None:
    """Drop the constant values ``graph`` and its partitions' graph IR hold (a compiled graph
    that owns them keeps its own references, and lets each go when it is packed)."""
    graph._values.clear()
    graph._ir = None
    for p in partitions:
        p.graph._values.clear()


def compile_graph(graph, engine: Engine | None = None, configs=None, kernel_cache=None,
                  strict: bool = False) -> CompiledGraph:
    """Compile every supported partition of a finalized graph.

    ``configs`` is a ``schedule.ConfigSource``: each partition's template gets the config it
    chooses, or its default config where it has none. ``autotune.HistoryBest(db)`` chooses the
    best config recorded for each workload on this CPU (warning about every workload without a
    record; ``strict=True``: raising ``autotune.MissingTuningRecord`` instead) and keeps the
    compiled kernels in the database. Without ``configs``, the source made active by
    ``autotune.apply_history_best`` (``schedule.using_configs``) is used, else the defaults.
    ``kernel_cache``: a ``tensorir.runtime.KernelCache`` (default: the config source when it is
    one). Ops without a compiled kernel (an unsupported kind or attribute, an ONNX Wildcard)
    run in the numpy reference interpreter with a warning naming them; with ``strict=True``
    such a graph is refused instead (``Unsupported``, naming the ops).

    Example:
        >>> # outputs = compile_graph(load_json("mlp.json"), configs=autotune.HistoryBest("tuning.db")).run({0: x})
    """
    return CompiledGraph(graph, engine, configs, kernel_cache, strict)


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
    restored.__dict__.update(state, engine=Engine(), _arenas=[])
    return restored


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


def _view_of(partition, graph_outputs: set):
    """(input id, output id, numpy index, shape) when ``partition`` is a lone StaticReshape or a
    lone Slice whose output is a view of its input (``slice_view``), and its output no graph
    output (the caller owns those); else None."""
    ops = partition.ops
    if len(ops) != 1 or ops[0].outputs[0].id in graph_outputs or not ops[0].outputs[0].is_known():
        return None
    op = ops[0]
    if op.kind is OpKind.StaticReshape:
        index = ()
    elif op.kind is OpKind.Slice:
        index = slice_view(op)
    else:
        return None
    return None if index is None else (op.inputs[0].id, op.outputs[0].id, index, tuple(op.outputs[0].shape))


class _InPlaceConcat:
    """A concat computed by its producers: its output's id, shape and dtype, and for each input
    the index of its slice."""

    def __init__(self, output, shape, dtype, slices):
        self.output, self.shape, self.dtype, self.slices = output, shape, dtype, slices


def _in_place_concats(steps: list, graph_outputs: set) -> list:
    """(step, plan) for each step that is a lone Concat whose slices its producers can write:
    every input is a distinct tensor written by a compiled, non-constant partition and is no
    graph output, and each slice is a contiguous, aligned block (unit dims before the axis)."""
    producer = {}
    for step in steps:
        for tid in step.output_ids:
            producer[tid] = step
    found, claimed = [], set()
    for step in steps:
        ops = step.ops
        if len(ops) != 1 or ops[0].kind is not OpKind.Concat or step.constant:
            continue
        op, out = ops[0], ops[0].outputs[0]
        if not out.is_known() or any(not t.is_known() for t in op.inputs):
            continue
        axis = op.attrs["axis"] % len(out.shape)
        ids = [t.id for t in op.inputs]
        dtype = out.dtype.numpy
        inner = int(np.prod(out.shape[axis + 1:], dtype=np.int64)) * dtype.itemsize
        if any(n != 1 for n in out.shape[:axis]) or len(set(ids)) != len(ids) or claimed & set(ids):
            continue
        if any(tid in graph_outputs or tid not in producer or producer[tid].kernel is None
               or producer[tid].constant for tid in ids):
            continue
        slices, start = [], 0
        for t in op.inputs:
            if (start * inner) % PARAM_ALIGN:
                break
            slices.append((t.id, (slice(None),) * axis + (slice(start, start + t.shape[axis]),)))
            start += t.shape[axis]
        else:
            claimed.update(ids)
            found.append((step, _InPlaceConcat(out.id, out.shape, dtype, slices)))
    return found
