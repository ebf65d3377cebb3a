"""Whole-graph compilation, as frameworks use oneDNN: every supported partition compiled,
the rest run by the reference interpreter, all in topological order."""
from __future__ import annotations

import warnings

import numpy as np

from . import reference
from .logical_tensor import GraphError
from .runtime import Engine, Stream, Tensor


class CompiledGraph:
    """A graph ready to run: ``run(feeds) -> {output id: array}``.

    Example:
        >>> from graph_api import DataType, Graph, LogicalTensor, Op, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
        >>> g = Graph(); _ = g.add_op(Op(0, OpKind.ReLU, [x], [y])); g.finalize()
        >>> compile_graph(g).run({0: np.array([[-1, 2, -3], [4, -5, 6]], "float32")})[1].tolist()
        [[0.0, 2.0, 0.0], [4.0, 0.0, 6.0]]
    """

    def __init__(self, graph, engine: Engine | None = None):
        self.graph = graph
        self.engine = engine or Engine()
        self.stream = Stream(self.engine)
        self.partitions = graph.get_partitions()
        self.steps = []
        fallback = []
        for p in self.partitions:
            if p.is_supported():
                compiled = p.compile(p.get_input_ports(), p.get_output_ports(), self.engine)
                ports = ([compiled.query_logical_tensor(t.id) for t in p.get_input_ports()],
                         [compiled.query_logical_tensor(t.id) for t in p.get_output_ports()])
                self.steps.append(("compiled", p, (compiled, ports)))
            else:
                self.steps.append(("reference", p, None))
                fallback += [f"{op.kind.value} (op {op.id})" for op in p.get_ops()]
        if fallback:
            warnings.warn(f"running {len(fallback)} op(s) in the numpy reference interpreter: "
                          f"{', '.join(fallback)}", stacklevel=2)
        self.output_ids = [t.id for t in graph.get_output_ports()]

    def run(self, feeds: dict) -> dict:
        """Run the graph on ``feeds`` (graph input id -> array); returns graph outputs by id."""
        values = {}
        for port in self.graph.get_input_ports():
            if port.id not in feeds:
                raise GraphError(f"no feed for graph input {port.id}")
            values[port.id] = np.asarray(feeds[port.id], order="C")   # keeps 0-d arrays 0-d
        for how, p, prepared in self.steps:
            if how == "reference":
                for op in p.get_ops():
                    outs = reference.evaluate(op, [values[t.id] for t in op.inputs])
                    values.update({t.id: v for t, v in zip(op.outputs, outs)})
                continue
            compiled, (in_ports, out_ports) = prepared
            ins = [Tensor(lt, self.engine, values[lt.id]) for lt in in_ports]
            outs = [Tensor(lt, self.engine) for lt in out_ports]
            compiled.execute(self.stream, ins, outs)
            values.update({t.logical_tensor.id: t.handle for t in outs})
        return {tid: values[tid] for tid in self.output_ids}


def compile_graph(graph, engine: Engine | None = None, db=None) -> CompiledGraph:
    """Compile every supported partition of a finalized graph (``db``: the tuning database,
    used once the autotuner exists).

    Example:
        >>> # outputs = compile_graph(load_json("mlp.json")).run({0: x, 1: w})
    """
    if db is not None:
        raise GraphError("tuning databases are not supported yet")
    return CompiledGraph(graph, engine)
