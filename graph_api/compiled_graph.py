"""Whole-graph compilation, as frameworks use oneDNN: every supported partition compiled,
the rest run by the reference interpreter, all in topological order.

A Concat whose inputs are all written by compiled partitions, along an axis with only unit
dims before it (channels of a batch-1 NCHW tensor), costs nothing: its output is allocated
first and each producer's kernel writes straight into its slice, a contiguous block. A concat
that is itself an input of such a concat (DenseNet's growing feature maps) is that slice.

A compiled graph pickles (to send it to a worker process) as its graph, ``strict``, the config
each partition was built with and its kernels' artifacts, checksummed; unpickling compiles the
graph again with those configs, loading each kernel from its artifact when it was built for
this host and with this code generator (no LLVM), building it otherwise."""
from __future__ import annotations

import functools
import hashlib
import pickle
import warnings

import numpy as np

from schedule.config_source import FixedConfigs
from schedule.space import ConfigError
from tensorir.errors import Unsupported
from tensorir.runtime.abi import PARAM_ALIGN

from . import reference
from .build import kernel_artifact, partition_signature
from .logical_tensor import GraphError, PropertyType
from .op import OpKind
from .runtime import Engine

PICKLE_FORMAT = 1
"""The format of a pickled compiled graph's payload; unpickling refuses another one."""


class CompiledGraph:
    """A graph ready to run: ``run(feeds) -> {output id: array}``. ``chosen_configs`` holds
    the config each compiled partition was built with by its signature
    (``build.partition_signature``; None: the template's default). It pickles: see
    ``__reduce__``.

    Example:
        >>> from graph_api import DataType, Graph, LogicalTensor, Op, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
        >>> g = Graph(); _ = g.add_op(Op(0, OpKind.ReLU, [x], [y])); g.finalize()
        >>> compile_graph(g).run({0: np.array([[-1, 2, -3], [4, -5, 6]], "float32")})[1].tolist()
        [[0.0, 2.0, 0.0], [4.0, 0.0, 6.0]]
    """

    def __init__(self, graph, engine: Engine | None = None, configs=None, kernel_cache=None, strict: bool = False):
        self.graph = graph
        self.engine = engine or Engine()
        self.strict = strict
        self.chosen_configs = {}
        self.partitions = graph.get_partitions()
        # the partitions compute the graph after the passes: folded constants are its inputs too
        computed = self.partitions[0].graph if self.partitions else graph
        self.bound = {**graph.constant_values, **computed.constant_values}
        self.steps = []
        fallback = [f"{op.kind.value} (op {op.id})" for p in self.partitions if not p.is_supported() for op in p.ops]
        if strict and fallback:
            raise Unsupported(f"strict: {len(fallback)} op(s) would run in the numpy reference interpreter, not "
                              f"compiled: {', '.join(fallback)}")
        for p in self.partitions:
            constant = all(t.property_type is PropertyType.constant for t in p.get_output_ports())
            self.steps.append(self._compile(p, constant, configs, kernel_cache) if p.is_supported()
                              else _Step(p, None, None, constant))
        if fallback:
            warnings.warn(f"running {len(fallback)} op(s) in the numpy reference interpreter: "
                          f"{', '.join(fallback)}", stacklevel=2)
        self.output_ids = [t.id for t in graph.get_output_ports()]
        self.input_ports = [t for t in graph.get_input_ports() if t.id not in self.bound]
        self._input_specs = [(t.id, t.shape, t.dtype.numpy) for t in self.input_ports if t.is_known()]
        self._input_order = [t.id for t in self.input_ports]      # what feeds by position mean
        self._input_ids = frozenset(self._input_order)
        self.in_place = _in_place_concats(self.steps, set(self.output_ids))
        elided = {id(step) for step, _ in self.in_place}
        self._run_steps = [step for step in self.steps if id(step) not in elided]

    def _compile(self, p, constant: bool, configs, kernel_cache) -> "_Step":
        """The step of the supported partition ``p``, compiled with the config ``configs``
        chooses (the recorded one when restoring a pickle), which ``chosen_configs`` keeps."""
        signature = partition_signature(p, p.get_input_ports())
        source = configs.source_for(p, signature) if isinstance(configs, _RecordedConfigs) else configs
        compiled = p.compile(p.get_input_ports(), p.get_output_ports(), self.engine, source, kernel_cache)
        self.chosen_configs[signature] = compiled.config
        ports = ([compiled.query_logical_tensor(t.id) for t in p.get_input_ports()],
                 [compiled.query_logical_tensor(t.id) for t in p.get_output_ports()])
        return _Step(p, compiled, ports, constant, signature)

    def __reduce__(self):
        """Pickled as the graph (bound constants included), ``strict``, ``chosen_configs`` and
        the artifact of each kernel, with a format version and a sha256 of the payload.
        Unpickling compiles the graph again with the same configs (not the config source it
        was compiled with, which need not pickle), each kernel loaded from its artifact when
        that was built for this host, else built; it runs on a fresh ``Engine()``, without a
        kernel cache. A damaged payload or another format raises ``pickle.UnpicklingError``.

        Example:
            >>> import pickle
            >>> from graph_api import DataType, Graph, LogicalTensor, Op, OpKind
            >>> x = LogicalTensor(0, DataType.f32, (3,)); y = LogicalTensor(1, DataType.f32, (3,))
            >>> g = Graph(); _ = g.add_op(Op(0, OpKind.ReLU, [x], [y])); g.finalize()
            >>> again = pickle.loads(pickle.dumps(compile_graph(g)))
            >>> again.run({0: np.array([-1, 0, 2], "float32")})[1].tolist()
            [0.0, 0.0, 2.0]
        """
        state = {"graph": self.graph, "strict": self.strict, "configs": self.chosen_configs,
                 "kernels": self._kernel_artifacts()}
        payload = pickle.dumps(state, protocol=4)   # 4: arrays come back in numpy's (aligned) memory
        return _restore, (PICKLE_FORMAT, payload, hashlib.sha256(payload).digest())

    def _kernel_artifacts(self) -> dict:
        """The artifact of each compiled partition's kernel under the key ``build_partition``
        looks it up by in a kernel cache."""
        found = {}
        for step in self.steps:
            if step.compiled is not None:
                built = (step.compiled.kernel, _arg_positions(step.partition, step.compiled._arg_ports),
                         [t.shape for t in step.ports[1]])
                key, blob = kernel_artifact(step.signature, step.compiled.config, built)
                found[key] = blob
        return found

    def run(self, feeds: dict) -> dict:
        """Run the graph on ``feeds`` (graph input id -> array, or a list of arrays in
        ``input_ports`` order; bound constants need none and may not be fed);
        returns graph outputs by id. A partition that computes only constants runs once and
        keeps its results while it is fed the same constant arrays (constant inputs must not
        be modified between runs, as in oneDNN).

        Example:
            >>> # compile_graph(g).run({0: x})[out_id]
        """
        feeds = self._feeds_by_id(feeds)
        values = dict(self.bound)
        for tid, array in feeds.items():
            values[tid] = np.asarray(array, order="C")   # keeps 0-d arrays 0-d
        for tid, shape, dtype in self._input_specs:
            array = values.get(tid)
            if array is None:
                raise GraphError(f"no feed for graph input {tid}")
            if array.shape != shape or array.dtype != dtype:
                raise GraphError(f"graph input {tid} must be {dtype}{list(shape)}, got {array.dtype}{list(array.shape)}")
        slices = {}
        for step, plan in reversed(self.in_place):    # concats' outputs first, the last concat first:
            whole = slices.get(plan.output)           # a concat of a concat is a slice of it
            if whole is None:
                whole = np.empty(plan.shape, plan.dtype)
            values[plan.output] = whole
            for tid, index in plan.slices:
                slices[tid] = whole[index]
        for step in self._run_steps:
            values.update(step.run(values, slices))
        return {tid: values[tid] for tid in self.output_ids}

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
            constants = [k for k in unknown if k in self.bound]
            what = (f"tensor(s) {constants} are bound constants, not inputs" if constants
                    else f"{unknown} are not graph input ids")
            raise GraphError(f"run: {what}; the inputs are ids {ids}")
        return feeds


class _Step:
    """One partition of a compiled graph: a compiled partition or the reference interpreter,
    with the results of a constant partition kept between runs."""

    def __init__(self, partition, compiled, ports, constant: bool, signature=None):
        self.partition, self.compiled, self.ports, self.constant = partition, compiled, ports, constant
        self.signature = signature  # of a compiled partition: the key of its config and kernel
        self._kept = None          # (the input arrays, the results) of a constant partition
        if compiled is not None:   # the kernel's arguments, worked out once (checked at compile)
            self._outputs = [(t.id, t.shape, t.dtype.numpy) for t in ports[1]]
            self._args = [(role == "out", tid) for role, tid in compiled._arg_ports]

    def run(self, values: dict, slices: dict | None = None) -> dict:
        """The partition's outputs by id; an output with an array in ``slices`` (a slice of a
        concat's output) is written there."""
        p = self.partition
        if self.constant:
            inputs = [values[t.id] for t in p.get_input_ports()]
            if self._kept is not None and all(a is b for a, b in zip(self._kept[0], inputs)):
                return self._kept[1]
        if self.compiled is None:
            results = {}
            for op in p.ops:
                outs = reference.evaluate(op, [results[t.id] if t.id in results else values[t.id]
                                               for t in op.inputs])
                results.update({t.id: v for t, v in zip(op.outputs, outs)})
        else:
            slices = slices or {}
            results = {tid: slices[tid] if tid in slices else np.empty(shape, dtype) for tid, shape, dtype in self._outputs}
            self.compiled.kernel(*[results[tid] if out else values[tid] for out, tid in self._args])
        if self.constant:
            self._kept = (inputs, results)
        return results


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


def _restore(version, payload, digest) -> CompiledGraph:
    """The compiled graph ``CompiledGraph.__reduce__`` pickled, compiled again with its
    recorded configs and kernels; ``pickle.UnpicklingError`` for another format or a payload
    whose checksum does not match."""
    if version != PICKLE_FORMAT:
        raise pickle.UnpicklingError(f"compiled graph pickled in format {version!r}; this tilefuse reads "
                                     f"format {PICKLE_FORMAT}")
    if not isinstance(payload, bytes) or hashlib.sha256(payload).digest() != digest:
        raise pickle.UnpicklingError("compiled graph pickle: checksum mismatch (truncated or altered)")
    state = pickle.loads(payload)
    graph = state["graph"]
    for array in graph.constant_values.values():
        array.setflags(write=False)      # read-only again, as bind_constant left them
    return CompiledGraph(graph, None, _RecordedConfigs(state["configs"]), _ShippedKernels(state["kernels"]),
                         state["strict"])


class _RecordedConfigs:
    """The configs a compiled graph's partitions were built with, by partition signature:
    what its pickle compiles with again."""

    def __init__(self, configs: dict):
        self.configs = configs

    def source_for(self, partition, signature) -> FixedConfigs:
        """A config source giving ``partition`` (whose signature is ``signature``) its
        recorded config; GraphError when none was recorded (another graph, or a tilefuse
        that partitions it otherwise)."""
        if signature not in self.configs:
            raise GraphError(f"partition {partition.id} (ops {[op.id for op in partition.ops]}) has no recorded "
                             f"config: the pickle was made from another graph or by another tilefuse")
        return FixedConfigs(functools.partial(_recorded_config, self.configs[signature]))


def _recorded_config(config, template):
    """``config`` (None: the default) if it is a point of ``template``'s space; else None
    with a warning: a config chosen on another CPU, whose template has other knobs here."""
    if config is None:
        return None
    try:
        template.space.index_of(config)
    except ConfigError as err:
        warnings.warn(f"the pickled compiled graph's config {config} does not fit this host's {template.name} "
                      f"template ({err}); it compiles with the default config", stacklevel=2)
        return None
    return config


class _ShippedKernels(dict):
    """The kernel artifacts a compiled graph was pickled with, as a ``KernelCache``: a key
    not found (another host) or an artifact that cannot be loaded here is built again."""

    def cached_kernel(self, key: str) -> bytes | None:
        """The artifact under ``key``, or None."""
        return self.get(key)

    def cache_kernel(self, key: str, blob: bytes) -> None:
        """Keep ``blob`` under ``key``."""
        self[key] = blob


def _arg_positions(partition, arg_ports) -> list:
    """Kernel arguments as (role, tensor id) turned into (role, port index), as
    ``build.build_partition`` gives them."""
    index = {("in", t.id): ("in", k) for k, t in enumerate(partition.input_ports)}
    index.update({("out", t.id): ("out", k) for k, t in enumerate(partition.output_ports)})
    return [index[port] for port in arg_ports]


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
        for t in step.partition.get_output_ports():
            producer[t.id] = step
    found, claimed = [], set()
    for step in steps:
        ops = step.partition.ops
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
        if any(tid in graph_outputs or tid not in producer or producer[tid].compiled is None
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
