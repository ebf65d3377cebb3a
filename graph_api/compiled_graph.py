"""Whole-graph compilation, as frameworks use oneDNN: every supported partition compiled,
the rest run by the reference interpreter, all in topological order.

A Concat whose inputs are all written by compiled partitions, along an axis with only unit
dims before it (channels of a batch-1 NCHW tensor), costs nothing: its output is allocated
first and each producer's kernel writes straight into its slice, a contiguous block. A concat
that is itself an input of such a concat (DenseNet's growing feature maps) is that slice."""
from __future__ import annotations

import warnings

import numpy as np

from tensorir.errors import Unsupported
from tensorir.runtime.abi import PARAM_ALIGN

from . import reference
from .logical_tensor import GraphError, PropertyType
from .op import OpKind
from .runtime import Engine


class CompiledGraph:
    """A graph ready to run: ``run(feeds) -> {output id: array}``.

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
            if p.is_supported():
                compiled = p.compile(p.get_input_ports(), p.get_output_ports(), self.engine, configs, kernel_cache)
                ports = ([compiled.query_logical_tensor(t.id) for t in p.get_input_ports()],
                         [compiled.query_logical_tensor(t.id) for t in p.get_output_ports()])
                self.steps.append(_Step(p, compiled, ports, constant))
            else:
                self.steps.append(_Step(p, None, None, constant))
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

    def __init__(self, partition, compiled, ports, constant: bool):
        self.partition, self.compiled, self.ports, self.constant = partition, compiled, ports, constant
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
