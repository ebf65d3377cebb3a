"""The graph IR the pipeline works on: a finished set of ops, never modified.

``GraphIR`` holds ops, their logical tensors, the values bound to constant inputs and the
graph's settings, with the queries passes need (producers, consumers, a topological order,
ports). It is built without checking ops against their schemas (they were checked once, when
the user added them to a ``Graph``), so a pass rewrites by making a new one with
``with_ops``: cheap, and the input is never touched. The user-facing ``Graph`` is a facade
that validates ops as they come and hands its IR to the pipeline (``Graph.ir()``).

Example:
    >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
    >>> x = LogicalTensor(0, DataType.f32, (2,)); y = LogicalTensor(1, DataType.f32, (2,))
    >>> z = LogicalTensor(2, DataType.f32, (2,))
    >>> ir = GraphIR([Op(1, OpKind.Exp, [y], [z]), Op(0, OpKind.Abs, [x], [y])])
    >>> [op.id for op in ir.topological_ops()], [t.id for t in ir.get_output_ports()]
    ([0, 1], [2])
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from .logical_tensor import GraphError, LogicalTensor
from .op import Op, OpKind


@dataclass(frozen=True)
class GraphSettings:
    """What a graph is compiled for: oneDNN's engine kind and floating-point math mode.

    Example:
        >>> GraphSettings().engine_kind
        'cpu'
    """
    engine_kind: str = "cpu"
    fpmath_mode: str = "strict"
    fpmath_mode_apply_to_int: bool = False


class GraphIR:
    """Ops with their tensors (``tensors``: merged descriptions by id; default: each tensor
    as its producer, else its first reader, describes it), bound constant values (kept for
    the inputs the ops still read) and settings. GraphError when two ops produce one tensor
    or the ops form a cycle.

    Example:
        >>> GraphIR([]).ops, GraphIR([]).constant_values
        ([], {})
    """

    def __init__(self, ops, tensors: dict | None = None, values: dict | None = None,
                 settings: GraphSettings = GraphSettings()):
        self._ops: list[Op] = list(ops)
        self.settings = settings
        self._producer: dict[int, Op] = {}
        self._consumers: dict[int, list[Op]] = {}
        described: dict[int, LogicalTensor] = {}
        for op in self._ops:
            for t in op.inputs:
                described.setdefault(t.id, t)
                readers = self._consumers.setdefault(t.id, [])
                if not readers or readers[-1] is not op:
                    readers.append(op)
            for t in op.outputs:
                if t.id in self._producer:
                    raise GraphError(f"op {op.id} ({op.kind.value}): logical tensor {t.id} is already produced "
                                     f"by op {self._producer[t.id].id}")
                self._producer[t.id] = op
                described[t.id] = t
        self._tensors = described if tensors is None else {tid: tensors[tid] for tid in described}
        self._values = {tid: v for tid, v in (values or {}).items()
                        if tid in self._tensors and tid not in self._producer}
        self._order = self._topological_order()

    # ---- rewriting -------------------------------------------------------------------------

    def with_ops(self, ops, values: dict | None = None) -> "GraphIR":
        """A new IR holding ``ops`` with this one's settings and bound values (plus
        ``values``), each tensor described by the new ops.

        Example:
            >>> GraphIR([]).with_ops([]).ops
            []
        """
        return GraphIR(ops, None, {**self._values, **(values or {})}, self.settings)

    # ---- queries ---------------------------------------------------------------------------

    @property
    def ops(self) -> list[Op]:
        """The ops in the order they were given.

        Example:
            >>> GraphIR([]).ops
            []
        """
        return list(self._ops)

    @property
    def engine_kind(self) -> str:
        return self.settings.engine_kind

    @property
    def fpmath_mode(self) -> str:
        return self.settings.fpmath_mode

    @property
    def fpmath_mode_apply_to_int(self) -> bool:
        return self.settings.fpmath_mode_apply_to_int

    @property
    def is_finalized(self) -> bool:
        """Always True: an IR is finished when it is made.

        Example:
            >>> GraphIR([]).is_finalized
            True
        """
        return True

    @property
    def constant_values(self) -> dict[int, np.ndarray]:
        """The values bound to constant inputs, by tensor id (read-only arrays).

        Example:
            >>> GraphIR([]).constant_values
            {}
        """
        return dict(self._values)

    @property
    def tensors(self) -> dict[int, LogicalTensor]:
        """Every logical tensor by id.

        Example:
            >>> GraphIR([]).tensors
            {}
        """
        return dict(self._tensors)

    def tensor(self, tensor_id: int) -> LogicalTensor:
        """The logical tensor ``tensor_id`` (GraphError when no op mentions it).

        Example:
            >>> GraphIR([]).tensor(5)
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
            >>> GraphIR([]).producer(0) is None
            True
        """
        return self._producer.get(tensor_id)

    def consumers(self, tensor_id: int) -> list[Op]:
        """The ops reading ``tensor_id``, in op order (each op once).

        Example:
            >>> GraphIR([]).consumers(0)
            []
        """
        return list(self._consumers.get(tensor_id, ()))

    def topological_ops(self) -> list[Op]:
        """The ops with every producer before its consumers; among ready ops, op order decides.

        Example:
            >>> GraphIR([]).topological_ops()
            []
        """
        return list(self._order)

    def get_input_ports(self) -> list[LogicalTensor]:
        """Logical tensors consumed but produced by no op, in order of first use.

        Example:
            >>> GraphIR([]).get_input_ports()
            []
        """
        ports = {}
        for op in self._ops:
            for t in op.inputs:
                if t.id not in self._producer:
                    ports.setdefault(t.id, self._tensors[t.id])
        return list(ports.values())

    def get_output_ports(self) -> list[LogicalTensor]:
        """Logical tensors produced and consumed by no op, plus the inputs of End ops, in op
        order.

        Example:
            >>> GraphIR([]).get_output_ports()
            []
        """
        ports = {}
        for op in self._ops:
            candidates = op.inputs if op.kind is OpKind.End else [t for t in op.outputs if t.id not in self._consumers]
            for t in candidates:
                ports.setdefault(t.id, self._tensors[t.id])
        return list(ports.values())

    def __len__(self) -> int:
        return len(self._ops)

    def __repr__(self) -> str:
        return f"GraphIR({len(self._ops)} ops)"

    def __str__(self) -> str:
        """The graph as text, one line per op in topological order: ``%<tensor id>: type``
        for the inputs (``const`` for constants, ``bound`` when a value is bound) and each
        op's outputs, ``Kind(%inputs) {attributes}``, then what the graph returns.

        Example:
            >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
            >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (3, 2))
            >>> ir = GraphIR([Op(0, OpKind.StaticTranspose, [x], [y], {"order": [1, 0]})])
            >>> print(ir)
            graph(%0: f32[2, 3]) {
              %1: f32[3, 2] = StaticTranspose(%0) {order: [1, 0]}
              return %1
            }
        """
        def typed(t: LogicalTensor) -> str:
            dims = "?" if t.shape is None else ", ".join("?" if d < 0 else str(d) for d in t.shape)
            return f"%{t.id}: {t.dtype.value}[{dims}]"

        ins = []
        for t in self.get_input_ports():
            mark = " bound" if t.id in self._values else " const" if t.property_type.value == "constant" else ""
            ins.append(typed(t) + mark)
        lines = [f"graph({', '.join(ins)}) {{"]
        for op in self._order:
            attrs = ", ".join(f"{k}: {v}" for k, v in op.attrs.items())
            outs = ", ".join(typed(self._tensors[t.id]) for t in op.outputs)
            call = f"{op.kind.value}({', '.join(f'%{t.id}' for t in op.inputs)})" + (f" {{{attrs}}}" if attrs else "")
            lines.append(f"  {outs} = {call}" if outs else f"  {call}")
        lines += [f"  return {', '.join(f'%{t.id}' for t in self.get_output_ports())}", "}"]
        return "\n".join(lines)

    def _topological_order(self) -> list[Op]:
        index = {id(op): i for i, op in enumerate(self._ops)}
        preds = [{index[id(p)] for t in op.inputs if (p := self._producer.get(t.id)) is not None}
                 for op in self._ops]
        succs: list[list[int]] = [[] for _ in self._ops]
        for i, ps in enumerate(preds):
            for p in ps:
                succs[p].append(i)
        waiting = [len(ps) for ps in preds]
        ready = [i for i, n in enumerate(waiting) if n == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            i = heapq.heappop(ready)
            order.append(self._ops[i])
            for s in succs[i]:
                waiting[s] -= 1
                if waiting[s] == 0:
                    heapq.heappush(ready, s)
        if len(order) < len(self._ops):
            raise GraphError(self._cycle_message(preds, {i for i, n in enumerate(waiting) if n > 0}))
        return order

    def _cycle_message(self, preds, left: set[int]) -> str:
        path, node = [], min(left)
        while node not in path:          # walk back through producers until a node repeats
            path.append(node)
            node = min(p for p in preds[node] if p in left)
        cycle = path[path.index(node):][::-1]
        op = self._ops[cycle[0]]
        chain = " -> ".join(f"op {self._ops[i].id}" for i in cycle + cycle[:1])
        return f"op {op.id} ({op.kind.value}): is on a cycle ({chain})"
