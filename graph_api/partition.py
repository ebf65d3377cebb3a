"""Partitions of a graph and their compiled form.

A ``Partition`` is a group of ops of the graph IR that ``graph_api.pipeline`` cut out; it is
supported when its class is not opaque and its data types are compiled. ``compile`` checks
the ports and builds its kernel (``graph_api.build``) into a ``CompiledPartition``.
"""
from __future__ import annotations

import itertools

from .build import build_partition, lower_partition
from .logical_tensor import GraphError, LogicalTensor
from .lowering import COMPILED_DTYPES
from .op import Op, OpKind
from .engine import Engine, Stream, Tensor

_partition_ids = itertools.count(1)
NEVER_COMPILED = {OpKind.Wildcard, OpKind.End}


class Partition:
    """A group of ops compiled and run as one kernel (or, when unsupported, not compiled).

    Example:
        >>> # for p in graph.get_partitions(): p.is_supported(), [op.id for op in p.get_ops()]
    """

    def __init__(self, graph, ops: list[Op], kind: str, graph_outputs: set[int], engine_kind: str = "cpu",
                 user_ops: list[Op] | None = None):
        self.id = next(_partition_ids)
        self.graph = graph
        self.ops = list(ops)
        self.user_ops = self.ops if user_ops is None else list(user_ops)
        self.kind = kind
        self.engine_kind = engine_kind
        inside = {t.id for op in self.ops for t in op.outputs}
        self.input_ports: list[LogicalTensor] = []
        for op in self.ops:
            for t in op.inputs:
                if t.id not in inside and all(p.id != t.id for p in self.input_ports):
                    self.input_ports.append(t)
        members = {id(op) for op in self.ops}
        self.output_ports = [t for op in self.ops for t in op.outputs
                             if t.id in graph_outputs or any(id(c) not in members for c in graph.consumers(t.id))]
        self._supported = self._check_supported()

    def _check_supported(self) -> bool:
        if any(op.kind in NEVER_COMPILED for op in self.ops) or self.kind == "opaque":
            return False
        tensors = [t for op in self.ops for t in op.inputs + op.outputs]
        return all(t.dtype in COMPILED_DTYPES for t in tensors) and all(t.is_known() for t in tensors)

    def is_supported(self) -> bool:
        return self._supported

    def get_ops(self) -> list[Op]:
        """The user's ops this partition stands for (``self.ops`` are the ones it computes,
        after the graph passes).

        Example:
            >>> # [op.id for op in p.get_ops()]
        """
        return list(self.user_ops)

    def get_ops_num(self) -> int:
        return len(self.user_ops)

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
        """Compile for the given input and output logical tensors (matched to the ports by id).
        ``configs``: a ``schedule.ConfigSource`` (default: the active one, else the template's
        default config); ``kernel_cache``: a ``tensorir.runtime.KernelCache`` (see
        ``graph_api.build.build_partition``).

        Example:
            >>> # cp = p.compile(p.get_input_ports(), p.get_output_ports(), Engine("cpu"))
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
        ins = [given[p.id] for p in self.input_ports]
        kernel, arg_positions, shapes, config = build_partition(self, ins, configs, kernel_cache)
        ports = {"in": self.input_ports, "out": self.output_ports}
        arg_ports = [(role, ports[role][k].id) for role, k in arg_positions]
        outs = []
        for port, shape in zip(self.output_ports, shapes):
            t = wanted[port.id]
            if t.shape is not None and t.is_known() and t.shape != shape:
                raise GraphError(f"partition {self.id}: output {port.id} has shape {list(shape)}, "
                                 f"not {list(t.shape)}")
            outs.append(t.with_shape(shape))
        compiled = CompiledPartition(self, kernel, arg_ports, ins, outs)
        compiled.config = config           # the config a source chose; None: the default
        return compiled

    def compute_dag(self, inputs: list[LogicalTensor] | None = None) -> list:
        """The partition as a tensorir compute DAG: its output tensors (one per output port),
        over one placeholder per input port (``inputs``: the compiled input logical tensors,
        default the ports). What ``compile`` schedules, and what the autotuner tunes.

        Example:
            >>> # [t.shape for t in p.compute_dag()]
        """
        return lower_partition(self, self.input_ports if inputs is None else inputs)[1]


class CompiledPartition:
    """A compiled partition: run it with ``execute(stream, inputs, outputs)``.

    Example:
        >>> # cp.execute(Stream(Engine()), [Tensor(lt, eng, array), ...], [Tensor(out_lt, eng), ...])
    """

    def __init__(self, partition: Partition, kernel, arg_ports, inputs, outputs):
        self.partition = partition
        self.kernel = kernel          # a Kernel, or a PrepackedKernel packing constant weights once
        self._arg_ports = arg_ports
        self.inputs = {t.id: t for t in inputs}
        self.outputs = {t.id: t for t in outputs}

    def query_logical_tensor(self, tensor_id: int) -> LogicalTensor:
        """The compiled logical tensor ``tensor_id`` with its full shape.

        Example:
            >>> # cp.query_logical_tensor(out_id).shape
        """
        t = self.inputs.get(tensor_id) or self.outputs.get(tensor_id)
        if t is None:
            raise GraphError(f"compiled partition {self.partition.id} has no logical tensor {tensor_id}")
        return t

    def get_inplace_ports(self) -> list[tuple[int, int]]:
        """(input id, output id) pairs that may share memory: none, outputs are written fresh."""
        return []

    def execute(self, stream: Stream, inputs: list[Tensor], outputs: list[Tensor]) -> None:
        """Run the kernel on the tensors (matched to the compiled ports by logical tensor id).

        Example:
            >>> # cp.execute(stream, [Tensor(...)], [Tensor(...)])
        """
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
        args = []
        for key in self._arg_ports:
            if key not in arrays:
                raise GraphError(f"compiled partition {self.partition.id}: missing {key[0]}put tensor {key[1]}")
            args.append(arrays[key])
        self.kernel(*args)
