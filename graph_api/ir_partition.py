"""The graph IR cut into the groups of ops the compiler builds one kernel for.

``partition_ir`` classifies every op of an optimized ``GraphIR`` from the compute definition it
lowers to (``lowering.op_class``) and groups the ops by the fusion rules (``fusion.group_ops``)
into ``IRPartition`` objects, in topological order; ``PartitionedGraph`` holds the IR and its
partitions. These are the compiler's partitions: their ports are tensors of the optimized IR
(a channels-last copy the layout plan made, a weight a pass folded), and some stand for no op
of the user's (the layout plan's transposes). What a user of the oneDNN-style API sees are
``partition.Partition`` objects, made of the user's ops (``partition.user_partitions``).

Example:
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
    >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
    >>> z = LogicalTensor(2, DataType.f32, (2, 3))
    >>> g = Graph(); _ = g.add_op(Op(0, OpKind.Exp, [x], [y])); _ = g.add_op(Op(1, OpKind.ReLU, [y], [z]))
    >>> g.finalize()
    >>> partitioned = partition_ir(g.ir())
    >>> [(p.kind, [op.id for op in p.ops], [t.id for t in p.input_ports]) for p in partitioned.partitions]
    [('injective', [0, 1], [0])]
"""
from __future__ import annotations

from dataclasses import dataclass

from .fusion import dominant_class, group_ops
from .ir import GraphIR
from .logical_tensor import LogicalTensor, PropertyType
from .lowering import COMPILED_DTYPES, lower_op, op_class, placeholder_for
from .op import Op, OpKind

NEVER_COMPILED = {OpKind.Wildcard, OpKind.End}


class IRPartition:
    """Ops of the graph IR computed together: one kernel when supported (its class is not
    opaque and its data types and shapes are compiled), else run by the reference interpreter.
    ``input_ports``: the tensors it reads from outside, in order of first use;
    ``output_ports``: the tensors it writes that something outside reads or the graph outputs.

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (4,)); y = LogicalTensor(1, DataType.f32, (4,))
        >>> ir = GraphIR([Op(0, OpKind.ReLU, [x], [y])])
        >>> p = IRPartition(ir, ir.ops, "injective", {1})
        >>> p.is_supported(), [t.shape for t in p.compute_dag()]
        (True, [(4,)])
    """

    def __init__(self, ir: GraphIR, ops: list[Op], kind: str, graph_outputs: set[int]):
        self.ops = list(ops)
        self.kind = kind
        inside = {t.id for op in self.ops for t in op.outputs}
        ports: dict[int, LogicalTensor] = {}
        for op in self.ops:
            for t in op.inputs:
                if t.id not in inside:
                    ports.setdefault(t.id, t)
        self.input_ports = list(ports.values())
        members = {id(op) for op in self.ops}
        self.output_ports = [t for op in self.ops for t in op.outputs
                             if t.id in graph_outputs or any(id(c) not in members for c in ir.consumers(t.id))]

    def is_supported(self) -> bool:
        """Whether it compiles to a kernel (else the reference interpreter runs its ops).

        Example:
            >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
            >>> x = LogicalTensor(0, DataType.f32, (4,)); y = LogicalTensor(1, DataType.f32, (4,))
            >>> ir = GraphIR([Op(0, OpKind.ReLU, [x], [y])])
            >>> IRPartition(ir, ir.ops, "opaque", {1}).is_supported()
            False
        """
        if self.kind == "opaque" or any(op.kind in NEVER_COMPILED for op in self.ops):
            return False
        tensors = [t for op in self.ops for t in op.inputs + op.outputs]
        return all(t.dtype in COMPILED_DTYPES and t.is_known() for t in tensors)

    def compute_dag(self) -> list:
        """The partition as a tensorir compute DAG: its output tensors (one per output port)
        over one placeholder per input port; what its kernel computes and what the autotuner
        tunes (see ``lower_partition``).

        Example:
            >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
            >>> x = LogicalTensor(0, DataType.f32, (2, 8)); y = LogicalTensor(1, DataType.f32, (2, 8))
            >>> ir = GraphIR([Op(0, OpKind.Exp, [x], [y])])
            >>> (out,) = IRPartition(ir, ir.ops, "injective", {1}).compute_dag(); out.shape
            (2, 8)
        """
        return lower_partition(self, self.input_ports)[1]

    def __repr__(self):
        return f"IRPartition({self.kind}, ops={[op.id for op in self.ops]})"


@dataclass
class PartitionedGraph:
    """An optimized graph IR and its partitions in topological order: what the compiler
    builds (``compiler.compile_graph``) and the autotuner extracts tasks from.

    Example:
        >>> PartitionedGraph(GraphIR([]), []).partitions
        []
    """
    ir: GraphIR
    partitions: list[IRPartition]


def partition_ir(ir: GraphIR, policy: str = "fusion") -> PartitionedGraph:
    """The IR's ops grouped by the fusion rules (``policy="fusion"``) or one op a partition
    (``"debug"``), in topological order.

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (4, 4)); y = LogicalTensor(1, DataType.f32, (4, 4))
        >>> z = LogicalTensor(2, DataType.f32, (4, 4))
        >>> ir = GraphIR([Op(0, OpKind.MatMul, [x, x], [y]), Op(1, OpKind.ReLU, [y], [z])])
        >>> [[op.id for op in p.ops] for p in partition_ir(ir, "debug").partitions]
        [[0], [1]]
        >>> [p.kind for p in partition_ir(ir).partitions]
        ['complex']
    """
    ops = ir.topological_ops()
    classes = {id(op): op_class(op) for op in ops}

    def rows_of(op):
        return op.outputs[0].shape if op.outputs else None

    def constant_of(op):
        return bool(op.outputs) and all(t.property_type is PropertyType.constant for t in op.outputs)

    groups = group_ops(ops, lambda op: classes[id(op)], ir.producer, policy, rows_of, constant_of)
    outputs = {t.id for t in ir.get_output_ports()}
    return PartitionedGraph(ir, [IRPartition(ir, group, dominant_class({classes[id(op)] for op in group}), outputs)
                                 for group in groups])


def lower_partition(partition, inputs):
    """(tensor by logical tensor id, the output tensors): the partition's ops lowered to a
    tensorir compute DAG over one placeholder per input port (``inputs``: the logical tensors
    in port order).

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
        >>> from tilefuse.graph_api.ir import GraphIR
        >>> from tilefuse.graph_api.ir_partition import partition_ir
        >>> x = LogicalTensor(0, DataType.f32, (3, 4)); y = LogicalTensor(1, DataType.f32, (3, 4))
        >>> (p,) = partition_ir(GraphIR([Op(0, OpKind.Tanh, [x], [y])])).partitions
        >>> env, outs = lower_partition(p, p.input_ports); sorted(env), outs[0].shape
        ([0, 1], (3, 4))
    """
    env = {port.id: placeholder_for(t) for port, t in zip(partition.input_ports, inputs)}
    for op in partition.ops:
        for t, out in zip(op.outputs, lower_op(op, [env[t.id] for t in op.inputs])):
            env[t.id] = out
    return env, [env[p.id] for p in partition.output_ports]
