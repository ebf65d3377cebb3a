"""Whole-graph compilation, as frameworks use oneDNN: every supported partition compiled,
the rest run by the reference interpreter, all in topological order."""
from __future__ import annotations

import warnings

import numpy as np

from . import reference
from .logical_tensor import GraphError, PropertyType
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

    def __init__(self, graph, engine: Engine | None = None, configs=None, kernel_cache=None):
        self.graph = graph
        self.engine = engine or Engine()
        self.partitions = graph.get_partitions()
        # the partitions compute the graph after the passes: folded constants are its inputs too
        computed = self.partitions[0].graph if self.partitions else graph
        self.bound = {**graph.constant_values, **computed.constant_values}
        self.steps = []
        fallback = []
        for p in self.partitions:
            constant = all(t.property_type is PropertyType.constant for t in p.get_output_ports())
            if p.is_supported():
                compiled = p.compile(p.get_input_ports(), p.get_output_ports(), self.engine, configs, kernel_cache)
                ports = ([compiled.query_logical_tensor(t.id) for t in p.get_input_ports()],
                         [compiled.query_logical_tensor(t.id) for t in p.get_output_ports()])
                self.steps.append(_Step(p, compiled, ports, constant))
            else:
                self.steps.append(_Step(p, None, None, constant))
                fallback += [f"{op.kind.value} (op {op.id})" for op in p.ops]
        if fallback:
            warnings.warn(f"running {len(fallback)} op(s) in the numpy reference interpreter: "
                          f"{', '.join(fallback)}", stacklevel=2)
        self.output_ids = [t.id for t in graph.get_output_ports()]
        self.input_ports = [t for t in graph.get_input_ports() if t.id not in self.bound]
        self._input_specs = [(t.id, t.shape, t.dtype.numpy) for t in self.input_ports if t.is_known()]

    def run(self, feeds: dict) -> dict:
        """Run the graph on ``feeds`` (graph input id -> array; bound constants need none);
        returns graph outputs by id. A partition that computes only constants runs once and
        keeps its results while it is fed the same constant arrays (constant inputs must not
        be modified between runs, as in oneDNN).

        Example:
            >>> # compile_graph(g).run({0: x})[out_id]
        """
        values = dict(self.bound)
        for tid, array in feeds.items():
            values[tid] = np.asarray(array, order="C")   # keeps 0-d arrays 0-d
        for tid, shape, dtype in self._input_specs:
            array = values.get(tid)
            if array is None:
                raise GraphError(f"no feed for graph input {tid}")
            if array.shape != shape or array.dtype != dtype:
                raise GraphError(f"graph input {tid} must be {dtype}{list(shape)}, got {array.dtype}{list(array.shape)}")
        for step in self.steps:
            values.update(step.run(values))
        return {tid: values[tid] for tid in self.output_ids}


class _Step:
    """One partition of a compiled graph: a compiled partition or the reference interpreter,
    with the results of a constant partition kept between runs."""

    def __init__(self, partition, compiled, ports, constant: bool):
        self.partition, self.compiled, self.ports, self.constant = partition, compiled, ports, constant
        self._kept = None          # (the input arrays, the results) of a constant partition
        if compiled is not None:   # the kernel's arguments, worked out once (checked at compile)
            self._outputs = [(t.id, t.shape, t.dtype.numpy) for t in ports[1]]
            self._args = [(role == "out", tid) for role, tid in compiled._arg_ports]

    def run(self, values: dict) -> dict:
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
            results = {tid: np.empty(shape, dtype) for tid, shape, dtype in self._outputs}
            self.compiled.kernel(*[results[tid] if out else values[tid] for out, tid in self._args])
        if self.constant:
            self._kept = (inputs, results)
        return results


def compile_graph(graph, engine: Engine | None = None, configs=None, kernel_cache=None) -> CompiledGraph:
    """Compile every supported partition of a finalized graph.

    ``configs`` is a ``schedule.ConfigSource``: each partition's template gets the config it
    chooses, or its default config where it has none. ``autotune.HistoryBest(db)`` chooses the
    best config recorded for each workload on this CPU (warning about every workload without a
    record; ``strict=True``: raising ``autotune.MissingTuningRecord`` instead) and keeps the
    compiled kernels in the database. Without ``configs``, the source made active by
    ``autotune.apply_history_best`` (``schedule.using_configs``) is used, else the defaults.
    ``kernel_cache``: a ``tensorir.runtime.KernelCache`` (default: the config source when it is
    one).

    Example:
        >>> # outputs = compile_graph(load_json("mlp.json"), configs=autotune.HistoryBest("tuning.db")).run({0: x})
    """
    return CompiledGraph(graph, engine, configs, kernel_cache)
