"""The Graph: ops added one by one (each checked against its schema and against the tensors seen
so far), then finalized (checked for cycles) and queried: order, producers, consumers, ports.

The Graph is the user's builder, a facade in the shape of oneDNN's graph API; what the
pipeline compiles is its ``GraphIR`` (``Graph.ir()``, ``graph_api.ir``), which passes rewrite
without going back through ``add_op``.

Example:
    >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
    >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
    >>> g = Graph()
    >>> g.add_op(Op(0, OpKind.ReLU, [x], [y]))
    'success'
    >>> g.finalize()
    >>> [t.id for t in g.get_input_ports()], [t.id for t in g.get_output_ports()]
    ([0], [1])
"""
from __future__ import annotations

import numpy as np

from .dot import graph_to_dot
from .engine import GRAPH_ENGINE_KINDS
from .ir import GraphIR, GraphSettings
from .logical_tensor import GraphError, LayoutType, LogicalTensor, PropertyType
from .op import Op
from .partition import user_partitions
from .ops.schema import validate_op
from .serialize import graph_to_json

FPMATH_MODES = ("strict", "bf16", "f16", "tf32", "any")


class Graph:
    """A oneDNN-style graph. ``engine_kind`` is one of ``engine.GRAPH_ENGINE_KINDS`` (what the
    graph was built for; there is no GPU backend, so a "gpu" graph compiles for the CPU
    ``Engine`` it is given), ``fpmath_mode`` one of FPMATH_MODES. The same logical tensor id may appear in many ops (that is how ops connect), but
    it must always describe the same tensor: the same data type, the same dims where both sides
    know them, the same property type (``undef`` matches any).

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
        >>> a = LogicalTensor(0, DataType.f32, (4,)); b = LogicalTensor(1, DataType.f32, (4,))
        >>> c = LogicalTensor(2, DataType.f32, (4,))
        >>> g = Graph("cpu", "strict")
        >>> _ = g.add_op(Op(1, OpKind.Exp, [b], [c])); _ = g.add_op(Op(0, OpKind.Abs, [a], [b]))
        >>> g.finalize()
        >>> [op.id for op in g.topological_ops()], g.producer(1).id, [op.id for op in g.consumers(1)]
        ([0, 1], 0, [1])
    """

    def __init__(self, engine_kind: str = "cpu", fpmath_mode: str = "strict",
                 fpmath_mode_apply_to_int: bool = False):
        if engine_kind not in GRAPH_ENGINE_KINDS:      # "gpu": a dump made on a GPU, compiled for the CPU
            raise GraphError(f"unknown engine kind {engine_kind!r}; expected one of {list(GRAPH_ENGINE_KINDS)}")
        if fpmath_mode not in FPMATH_MODES:
            raise GraphError(f"unknown fpmath mode {fpmath_mode!r}; expected one of {list(FPMATH_MODES)}")
        self.engine_kind = engine_kind
        self.fpmath_mode = fpmath_mode
        self.fpmath_mode_apply_to_int = bool(fpmath_mode_apply_to_int)
        self._ops: list[Op] = []
        self._op_ids: set[int] = set()
        self._tensors: dict[int, LogicalTensor] = {}
        self._producer: dict[int, Op] = {}
        self._consumers: dict[int, list[Op]] = {}
        self._values: dict[int, np.ndarray] = {}
        self._finalized = False
        self._ir: GraphIR | None = None

    # ---- building ------------------------------------------------------------------------------

    def add_op(self, op: Op, allow_exception: bool = True) -> str:
        """Add an op after checking it; returns "success". With ``allow_exception=False`` an
        error is returned as its message instead of raised (and the graph is left unchanged).

        Example:
            >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
            >>> x = LogicalTensor(0, DataType.f32, (2,)); y = LogicalTensor(1, DataType.f16, (2,))
            >>> Graph().add_op(Op(3, OpKind.ReLU, [x], [y]), allow_exception=False)
            'op 3 (ReLU): output 0 (dst, tensor 1) has data type f16 but input 0 (src, tensor 0) has f32'
        """
        try:
            self._add(op)
        except GraphError as e:
            if allow_exception:
                raise
            return str(e)
        return "success"

    def _add(self, op: Op) -> None:
        if self._finalized:
            raise GraphError("graph is finalized")
        if not isinstance(op, Op):
            raise GraphError(f"add_op takes an Op, got {type(op).__name__}")
        where = f"op {op.id} ({op.kind.value})"
        if op.id in self._op_ids:
            raise GraphError(f"{where}: duplicate op id {op.id}")
        validate_op(op)
        merged: dict[int, LogicalTensor] = {}
        for t in op.inputs + op.outputs:
            seen = merged.get(t.id, self._tensors.get(t.id))
            merged[t.id] = t if seen is None else _merge(seen, t, where)
        out_ids = [t.id for t in op.outputs]
        for tid in out_ids:
            if out_ids.count(tid) > 1:
                raise GraphError(f"{where}: logical tensor {tid} appears twice among the outputs")
            if tid in self._producer:
                raise GraphError(f"{where}: logical tensor {tid} is already produced by op {self._producer[tid].id}")
        self._tensors.update(merged)
        self._ops.append(op)
        self._ir = None
        self._op_ids.add(op.id)
        for tid in out_ids:
            self._producer[tid] = op
        for tid in dict.fromkeys(t.id for t in op.inputs):
            self._consumers.setdefault(tid, []).append(op)

    def bind_constant(self, tensor_id: int, value, copy: bool = True) -> None:
        """Give a constant graph input its value when the graph is built (as a model's weights
        are known when it is imported). Passes fold the ops that read only bound constants, and
        ``compile_graph(...).run`` feeds bound values itself. The tensor must be a constant-property
        input no op produces; the value must match its data type and shape; it is copied, unless
        ``copy=False`` hands a C-contiguous array of the right data type over as it is (it
        becomes read-only: an importer's own arrays, not a caller's).

        Example:
            >>> import numpy as np
            >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind, PropertyType
            >>> w = LogicalTensor(0, DataType.f32, (2,), property_type=PropertyType.constant)
            >>> y = LogicalTensor(1, DataType.f32, (2,))
            >>> g = Graph(); _ = g.add_op(Op(0, OpKind.ReLU, [w], [y]))
            >>> g.bind_constant(0, [1.0, -2.0]); g.constant_values[0]
            array([ 1., -2.], dtype=float32)
        """
        t = self.tensor(tensor_id)
        if t.property_type is not PropertyType.constant:
            raise GraphError(f"logical tensor {tensor_id} has property {t.property_type.value}; "
                             f"only constant tensors take a bound value")
        if tensor_id in self._producer:
            raise GraphError(f"logical tensor {tensor_id} is produced by op {self._producer[tensor_id].id}; "
                             f"only graph inputs take a bound value")
        convert = np.array if copy else np.asarray          # kernels read row-major
        array = convert(value, dtype=t.dtype.numpy, order="C")
        if not t.is_known() or array.shape != t.shape:
            raise GraphError(f"logical tensor {tensor_id} has shape {list(t.shape or [])}, "
                             f"the bound value {list(array.shape)}")
        array.setflags(write=False)
        self._values[tensor_id] = array
        self._ir = None

    @property
    def constant_values(self) -> dict[int, np.ndarray]:
        """The values bound with ``bind_constant``, by tensor id (read-only arrays).

        Example:
            >>> Graph().constant_values
            {}
        """
        return dict(self._values)

    def rebuilt(self, ops) -> "Graph":
        """A new graph with this graph's settings holding ``ops``, keeping the bound values of
        the inputs it still reads; finalized when this graph is.

        Example:
            >>> Graph().rebuilt([]).is_finalized
            False
        """
        g = Graph(self.engine_kind, self.fpmath_mode, self.fpmath_mode_apply_to_int)
        for op in ops:
            g.add_op(op)
        for tid, value in self._values.items():
            if tid in g._tensors and tid not in g._producer:
                g._values[tid] = value
        if self._finalized:
            g.finalize()
        return g

    def release_constant_values(self) -> None:
        """Forget the values bound to constant inputs: a compiler that was handed this graph to
        own keeps its own references and lets each go once it is packed. The graph cannot be
        compiled again after this.

        Example:
            >>> from tilefuse.graph_api import DataType, LogicalTensor, OpKind, PropertyType
            >>> g = Graph()
            >>> _ = g.add_op(Op(0, OpKind.ReLU, [LogicalTensor(0, DataType.f32, (2,), property_type=PropertyType.constant)],
            ...                 [LogicalTensor(1, DataType.f32, (2,))]))
            >>> g.bind_constant(0, [1.0, -2.0]); g.release_constant_values(); g.constant_values
            {}
        """
        self._values.clear()
        self._ir = None

    def finalize(self) -> None:
        """Check the graph (no cycles) and freeze it: later ``add_op`` calls fail.

        Example:
            >>> g = Graph(); g.finalize(); g.is_finalized
            True
        """
        if not self._finalized:
            self.ir()
            self._finalized = True

    # ---- queries -------------------------------------------------------------------------------

    @property
    def ops(self) -> list[Op]:
        """The ops in insertion order.

        Example:
            >>> Graph().ops
            []
        """
        return list(self._ops)

    @property
    def is_finalized(self) -> bool:
        """True once ``finalize`` has run.

        Example:
            >>> Graph().is_finalized
            False
        """
        return self._finalized

    @property
    def tensors(self) -> dict[int, LogicalTensor]:
        """Every logical tensor of the graph by id, each merged from all its appearances.

        Example:
            >>> Graph().tensors
            {}
        """
        return dict(self._tensors)

    def tensor(self, tensor_id: int) -> LogicalTensor:
        """The logical tensor ``tensor_id`` (GraphError when no op mentions it).

        Example:
            >>> Graph().tensor(5)
            Traceback (most recent call last):
            ...
            tilefuse.graph_api.logical_tensor.GraphError: no logical tensor 5 in the graph
        """
        try:
            return self._tensors[tensor_id]
        except KeyError:
            raise GraphError(f"no logical tensor {tensor_id} in the graph") from None

    def producer(self, tensor_id: int) -> Op | None:
        """The op producing ``tensor_id``, or None for a graph input.

        Example:
            >>> Graph().producer(0) is None
            True
        """
        return self._producer.get(tensor_id)

    def consumers(self, tensor_id: int) -> list[Op]:
        """The ops reading ``tensor_id``, in insertion order (each op once).

        Example:
            >>> Graph().consumers(0)
            []
        """
        return list(self._consumers.get(tensor_id, ()))

    def ir(self) -> GraphIR:
        """The graph as the pipeline's IR (GraphError naming an op on a cycle when there is
        one). Made again only after the graph changes.

        Example:
            >>> Graph().ir().ops
            []
        """
        if self._ir is None:
            settings = GraphSettings(self.engine_kind, self.fpmath_mode, self.fpmath_mode_apply_to_int)
            self._ir = GraphIR(self._ops, self._tensors, self._values, settings)
        return self._ir

    def topological_ops(self) -> list[Op]:
        """The ops with every producer before its consumers; among ready ops, insertion order
        decides. GraphError naming an op on a cycle when there is one.

        Example:
            >>> Graph().topological_ops()
            []
        """
        return self.ir().topological_ops()

    def get_input_ports(self) -> list[LogicalTensor]:
        """Logical tensors consumed but produced by no op, in order of first use.

        Example:
            >>> Graph().get_input_ports()
            []
        """
        return self.ir().get_input_ports()

    def get_output_ports(self) -> list[LogicalTensor]:
        """Logical tensors produced and consumed by no op, plus the inputs of End ops, in op
        order.

        Example:
            >>> Graph().get_output_ports()
            []
        """
        return self.ir().get_output_ports()

    def get_partitions(self, policy: str = "fusion") -> list:
        """The partitions of this finalized graph, in topological order (``policy`` "fusion"
        groups ops by operator class; "debug" gives one op per partition): each made of this
        graph's ops only, its ports this graph's logical tensors (``partition.user_partitions``).

        Example:
            >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
            >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
            >>> z = LogicalTensor(2, DataType.f32, (2, 3))
            >>> g = Graph(); _ = g.add_op(Op(0, OpKind.Exp, [x], [y])); _ = g.add_op(Op(1, OpKind.ReLU, [y], [z]))
            >>> g.finalize(); [[op.id for op in p.get_ops()] for p in g.get_partitions()]
            [[0, 1]]
        """
        return user_partitions(self, policy)

    def to_dot(self, policy: str = "fusion") -> str:
        """Graphviz text of the graph with its partitions as clusters (see ``dot.graph_to_dot``).

        Example:
            >>> Graph().to_dot().startswith("digraph")
            True
        """
        return graph_to_dot(self, policy)

    def to_json(self) -> str:
        """This graph in oneDNN's JSON dump format (see ``graph_api.serialize``).

        Example:
            >>> '"engine_kind": "cpu"' in Graph().to_json()
            True
        """
        return graph_to_json(self)

    def __len__(self) -> int:
        return len(self._ops)

    def __repr__(self) -> str:
        state = "finalized" if self._finalized else "open"
        return f"Graph({self.engine_kind}, {self.fpmath_mode}, {len(self._ops)} ops, {state})"


def _merge(a: LogicalTensor, b: LogicalTensor, where: str) -> LogicalTensor:
    """One tensor from two descriptions of the same id; GraphError when they disagree."""
    def conflict(what, x, y):
        return GraphError(f"{where}: logical tensor {a.id} has {what} {y} here but {x} elsewhere in the graph")

    if a.dtype is not b.dtype:
        raise conflict("data type", a.dtype.value, b.dtype.value)
    if a.shape is None or b.shape is None:
        shape = a.shape if b.shape is None else b.shape
    else:
        if len(a.shape) != len(b.shape) or any(x != y and x >= 0 and y >= 0 for x, y in zip(a.shape, b.shape)):
            raise conflict("shape", list(a.shape), list(b.shape))
        shape = tuple(x if x >= 0 else y for x, y in zip(a.shape, b.shape))
    undef = PropertyType.undef
    if a.property_type is not undef and b.property_type is not undef and a.property_type is not b.property_type:
        raise conflict("property type", a.property_type.value, b.property_type.value)
    prop = b.property_type if a.property_type is undef else a.property_type
    base = b if a.layout_type in (LayoutType.any, LayoutType.undef) and b.layout_type not in (
        LayoutType.any, LayoutType.undef) else a
    if shape == base.shape and prop is base.property_type:
        return base
    strides = base.strides if shape == base.shape else None
    return LogicalTensor(a.id, a.dtype, shape, base.layout_type, prop, strides)
