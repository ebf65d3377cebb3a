"""The partitions a user of the oneDNN-style API sees, and their compiled form.

A ``Partition`` is a group of the user's ops (``Graph.get_partitions()``, cut by
``user_partitions``): its ports are the user's logical tensors, so partitions can be
compiled and executed one by one with only the user's tensors, as oneDNN's are. ``compile``
compiles its ops as a graph of their own, through the whole pipeline
(``compiler.compile_graph``): the passes, layout planning among them, run inside, and the
layout conversions they add are part of the compiled partition, never partitions of their
own. Its outputs are written in the user's (strided, row-major) layout.
"""
from __future__ import annotations

import itertools

import numpy as np

from .compiler import compile_graph
from .fusion import dominant_class
from .ir_partition import partition_ir
from .logical_tensor import GraphError, LogicalTensor
from .op import Op, OpKind
from .passes import DEFAULT, plan_layouts
from .pipeline import prepare
from .engine import Engine, Stream, Tensor
from .shape_inference import with_inferred_shapes

_partition_ids = itertools.count(1)

USER_PARTITION_PASSES = tuple(p for p in DEFAULT if p is not plan_layouts)
"""The passes the user's partitions are grouped after: all but layout planning, whose
conversions are no op of the user's and live inside compiled partitions."""


class Partition:
    """User ops compiled and run together (or, when unsupported, not compiled).

    Example:
        >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
        >>> z = LogicalTensor(2, DataType.f32, (2, 3))
        >>> g = Graph(); _ = g.add_op(Op(0, OpKind.Exp, [x], [y])); _ = g.add_op(Op(1, OpKind.ReLU, [y], [z]))
        >>> g.finalize(); (p,) = g.get_partitions()
        >>> p.is_supported(), [op.id for op in p.get_ops()], [t.id for t in p.get_input_ports()], p.get_kind()
        (True, [0, 1], [0], 'injective')
    """

    def __init__(self, graph, ops: list[Op], kind: str, supported: bool, described: dict, graph_outputs: set):
        """``described``: the user's logical tensors by id with the shapes shape inference gave
        them (a port the user left open reports its shape); ``graph_outputs``: the ids of the
        graph's outputs (``user_partitions`` makes partitions)."""
        self.id = next(_partition_ids)
        self.graph = graph
        self.ops = list(ops)
        self.kind = kind
        self.engine_kind = graph.engine_kind
        inside = {t.id for op in self.ops for t in op.outputs}
        ports: dict[int, LogicalTensor] = {}
        for op in self.ops:
            for t in op.inputs:
                if t.id not in inside:
                    ports.setdefault(t.id, described.get(t.id, t))
        self.input_ports = list(ports.values())
        members = {op.id for op in self.ops}
        self.output_ports = [described.get(t.id, t) for op in self.ops for t in op.outputs
                             if t.id in graph_outputs or any(c.id not in members for c in graph.consumers(t.id))]
        self._supported = supported

    def is_supported(self) -> bool:
        return self._supported

    def get_ops(self) -> list[Op]:
        """The user's ops in this partition, in topological order.

        Example:
            >>> from tilefuse.graph_api import load_json
            >>> [[op.kind.value for op in p.get_ops()] for p in load_json("examples/mlp.json").get_partitions()][0]
            ['MatMul', 'Add', 'ReLU']
        """
        return list(self.ops)

    def get_ops_num(self) -> int:
        return len(self.ops)

    def get_input_ports(self) -> list[LogicalTensor]:
        return list(self.input_ports)

    def get_output_ports(self) -> list[LogicalTensor]:
        return list(self.output_ports)

    def get_engine_kind(self) -> str:
        return self.engine_kind

    def get_kind(self) -> str:
        """The partition's operator class: injective, reduction, complex or opaque."""
        return self.kind

    def __repr__(self):
        return f"Partition({self.id}, {self.kind}, ops={[op.id for op in self.ops]})"

    def compile(self, inputs: list[LogicalTensor], outputs: list[LogicalTensor],
                engine: Engine | None = None, configs=None, kernel_cache=None) -> "CompiledPartition":
        """Compile for the given input and output logical tensors (matched to the ports by id;
        an input's full shape may be given here when the graph left it open). ``configs``: a
        ``schedule.ConfigSource`` (default: the active one, else each template's default
        config); ``kernel_cache``: a ``tensorir.runtime.KernelCache``.

        Example:
            >>> import numpy as np
            >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
            >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, None)
            >>> g = Graph(); _ = g.add_op(Op(0, OpKind.ReLU, [x], [y])); g.finalize()
            >>> (p,) = g.get_partitions()
            >>> cp = p.compile(p.get_input_ports(), p.get_output_ports())
            >>> cp.query_logical_tensor(1).shape
            (2, 3)
        """
        if not self._supported:
            raise GraphError(f"partition {self.id} (ops {[op.id for op in self.ops]}) is not supported; "
                             f"it cannot be compiled")
        given = {t.id: t for t in inputs}
        for port in self.input_ports:
            t = given.get(port.id)
            if t is None:
                raise GraphError(f"partition {self.id}: compile is missing input logical tensor {port.id}")
            if t.dtype is not port.dtype or (port.is_known() and t.shape != port.shape) or not t.is_known():
                raise GraphError(f"partition {self.id}: input {port.id} is {t.dtype.value}{list(t.shape or [])}, "
                                 f"the partition takes {port.dtype.value}{list(port.shape or [])}")
        wanted = {t.id: t for t in outputs}
        for port in self.output_ports:
            if port.id not in wanted:
                raise GraphError(f"partition {self.id}: compile is missing output logical tensor {port.id}")
        ins = {port.id: given[port.id] for port in self.input_ports}
        compiled = compile_graph(self._own_graph(ins), engine, configs, kernel_cache)
        shapes = {t.id: t.shape for t in compiled.outputs}
        outs = []
        for port in self.output_ports:
            t, shape = wanted[port.id], shapes[port.id]
            if t.shape is not None and t.is_known() and tuple(t.shape) != tuple(shape):
                raise GraphError(f"partition {self.id}: output {port.id} has shape {list(shape)}, "
                                 f"not {list(t.shape)}")
            outs.append(t.with_shape(shape))
        return CompiledPartition(self, compiled, list(ins.values()), outs)

    def _own_graph(self, inputs: dict):
        """The partition's ops as a finalized graph of their own: its inputs described as
        ``inputs`` gives them, the values the user's graph binds to them kept, and every output
        port an output (an End op marks one that an op of the partition reads too)."""
        def described(t):
            return inputs.get(t.id, t)
        ops = [Op(op.id, op.kind, [described(t) for t in op.inputs], op.outputs, op.attrs, op.name, op.covers)
               for op in self.ops]
        read_inside = {t.id for op in self.ops for t in op.inputs}
        next_id = max(op.id for op in self.graph.ops) + 1
        ops += [Op(next_id + k, OpKind.End, [t], []) for k, t in
                enumerate(t for t in self.output_ports if t.id in read_inside)]
        return self.graph.rebuilt(ops)


class CompiledPartition:
    """A compiled partition: run it with ``execute(stream, inputs, outputs)``. It is a
    compiled graph of the partition's ops (``compiled``); inputs bound to constants in the
    user's graph are passed too, as oneDNN's API passes them, and not read again.

    Example:
        >>> import numpy as np
        >>> from tilefuse.graph_api import DataType, Engine, Graph, LogicalTensor, Op, OpKind, Stream, Tensor
        >>> x = LogicalTensor(0, DataType.f32, (3,)); y = LogicalTensor(1, DataType.f32, (3,))
        >>> g = Graph(); _ = g.add_op(Op(0, OpKind.ReLU, [x], [y])); g.finalize()
        >>> (p,) = g.get_partitions(); cp = p.compile([x], [y]); eng = Engine("cpu")
        >>> out = np.empty(3, "float32")
        >>> cp.execute(Stream(eng), [Tensor(x, eng, np.array([-1, 0, 2], "float32"))], [Tensor(y, eng, out)])
        >>> out.tolist()
        [0.0, 0.0, 2.0]
    """

    def __init__(self, partition: Partition, compiled, inputs, outputs):
        self.partition = partition
        self.compiled = compiled
        self.inputs = {t.id: t for t in inputs}
        self.outputs = {t.id: t for t in outputs}

    def query_logical_tensor(self, tensor_id: int) -> LogicalTensor:
        """The compiled logical tensor ``tensor_id`` with its full shape (always the strided
        layout the user gave: layout conversions stay inside the partition).

        Example:
            >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
            >>> x = LogicalTensor(0, DataType.f32, (2, 5)); y = LogicalTensor(1, DataType.f32, None)
            >>> g = Graph(); _ = g.add_op(Op(0, OpKind.Exp, [x], [y])); g.finalize()
            >>> (p,) = g.get_partitions(); p.compile([x], [y]).query_logical_tensor(1).shape
            (2, 5)
        """
        t = self.inputs.get(tensor_id) or self.outputs.get(tensor_id)
        if t is None:
            raise GraphError(f"compiled partition {self.partition.id} has no logical tensor {tensor_id}")
        return t

    def get_inplace_ports(self) -> list[tuple[int, int]]:
        """(input id, output id) pairs that may share memory: none, outputs are written fresh."""
        return []

    def execute(self, stream: Stream, inputs: list[Tensor], outputs: list[Tensor]) -> None:
        """Run the partition on the tensors (matched to the compiled ports by logical tensor
        id), writing each output tensor's array (see the class example)."""
        arrays = {}   # ("in" | "out", tensor id) -> array
        for role, tensors, compiled in (("in", inputs, self.inputs), ("out", outputs, self.outputs)):
            for t in tensors:
                if not isinstance(t, Tensor):
                    raise GraphError(f"execute takes graph_api.Tensor objects, got {type(t).__name__}")
                lt, array = t.logical_tensor, t.handle
                want = compiled.get(lt.id)
                if want is None:
                    raise GraphError(f"compiled partition {self.partition.id}: no {role}put logical tensor {lt.id}")
                if array.shape != want.shape or array.dtype != want.dtype.numpy:
                    raise GraphError(f"compiled partition {self.partition.id}: {role}put {lt.id} must be "
                                     f"{want.dtype.value}{list(want.shape)}, got {array.dtype}{list(array.shape)}")
                arrays[(role, lt.id)] = array
        for role, compiled in (("in", self.inputs), ("out", self.outputs)):
            for tid in compiled:
                if (role, tid) not in arrays:
                    raise GraphError(f"compiled partition {self.partition.id}: missing {role}put tensor {tid}")
        feeds = {t.id: arrays[("in", t.id)] for t in self.compiled.input_ports}
        for tid, value in self.compiled.run(feeds).items():
            np.copyto(arrays[("out", tid)], value)


def user_partitions(graph, policy: str = "fusion") -> list[Partition]:
    """The partitions of a finalized user ``graph`` (``Graph.get_partitions``), in topological
    order: the user's ops grouped as the compiler groups the graph optimized without layout
    planning, each op in exactly one partition, ports the user's logical tensors.
    ``policy="debug"`` runs no pass and puts each op alone.

    Example:
        >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
        >>> t = [LogicalTensor(i, DataType.f32, (2, 4)) for i in range(3)]
        >>> w = LogicalTensor(3, DataType.f32, (4, 4))
        >>> g = Graph(); _ = g.add_op(Op(0, OpKind.StaticTranspose, [t[0]], [t[1]], {"order": [0, 1]}))
        >>> _ = g.add_op(Op(1, OpKind.MatMul, [t[1], w], [t[2]])); g.finalize()
        >>> [([op.id for op in p.get_ops()], [x.id for x in p.get_input_ports()]) for p in user_partitions(g)]
        [([0, 1], [0, 3])]
    """
    partitioned = partition_ir(prepare(graph, policy, USER_PARTITION_PASSES), policy)
    groups = partitioned.partitions
    owners = _owners(graph, {op.id: k for k, p in enumerate(groups) for op in p.ops})
    merged = _merge_cycles(graph, owners)
    members: dict[int, list] = {}
    for op in graph.topological_ops():
        members.setdefault(merged[op.id], []).append(op)
    merged_group = {owners[op_id]: m for op_id, m in merged.items()}   # a group owning no user op: none
    kinds: dict[int, set] = {}
    supported: dict[int, bool] = {}
    for k, p in enumerate(groups):
        if k in merged_group:
            m = merged_group[k]
            kinds.setdefault(m, set()).add(p.kind)
            supported[m] = supported.get(m, True) and p.is_supported()
    described = with_inferred_shapes(graph.ir()).tensors
    outputs = {t.id for t in graph.get_output_ports()}
    return [Partition(graph, members[m], dominant_class(kinds.get(m, {"opaque"})), supported.get(m, False), described,
                      outputs) for m in sorted(members)]       # merged groups are numbered in a topological order


def _merge_cycles(graph, owners: dict) -> dict:
    """``owners`` (op id -> group) with groups that reach each other through the user's ops
    merged into one (an op a pass removed can be owned by a group downstream of another that
    reads it); returns op id -> merged group, numbered in topological order of first op."""
    edges: dict[int, set] = {}
    for op in graph.ops:
        for t in op.inputs:
            p = graph.producer(t.id)
            if p is not None and owners[p.id] != owners[op.id]:
                edges.setdefault(owners[p.id], set()).add(owners[op.id])
    component = _strongly_connected(set(owners.values()), edges)
    first: dict = {}                    # component -> position of its first op
    for k, op in enumerate(graph.topological_ops()):
        first.setdefault(component[owners[op.id]], k)
    after = {c: set() for c in first}   # component -> the components it reads from
    for g, targets in edges.items():
        for h in targets:
            if component[g] != component[h]:
                after[component[h]].add(component[g])
    order: dict = {}
    while len(order) < len(first):     # ready components, the one whose first op comes first
        ready = min((c for c in first if c not in order and after[c] <= order.keys()), key=first.get)
        order[ready] = len(order)
    return {op_id: order[component[g]] for op_id, g in owners.items()}


def _strongly_connected(nodes: set, edges: dict) -> dict:
    """node -> a representative of its strongly connected component (Tarjan's algorithm)."""
    index, low, stack, on_stack, root = {}, {}, [], set(), {}

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v); on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            while True:
                w = stack.pop(); on_stack.discard(w); root[w] = v
                if w == v:
                    break

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return root


def _owners(graph, group_of: dict) -> dict:
    """The group index of every op of the user's ``graph``: its own when a pass kept it (by op
    id), else that of the nearest kept op downstream (breadth first), else upstream."""
    owners = {}
    for op in graph.topological_ops():
        if op.id in group_of:
            owners[op.id] = group_of[op.id]
            continue
        for step in (lambda o: [c for t in o.outputs for c in graph.consumers(t.id)],
                     lambda o: [p for t in o.inputs if (p := graph.producer(t.id)) is not None]):
            frontier, seen = [op], {op.id}
            while frontier and op.id not in owners:
                nxt = []
                for o in frontier:
                    for n in step(o):
                        if n.id in group_of:
                            owners[op.id] = group_of[n.id]
                            break
                        if n.id not in seen:
                            seen.add(n.id)
                            nxt.append(n)
                    if op.id in owners:
                        break
                frontier = nxt
            if op.id in owners:
                break
        owners.setdefault(op.id, 0)       # an island every pass removed: the first partition
    return owners
